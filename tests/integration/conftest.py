"""Integration harness: real etcd, real gazette-c brokers, Gazette's own Go
binaries. Every test gets its own etcd prefix and fragment root; etcd is
shared by the session (started here unless GAZ_TEST_ETCD names one).

Python is the harness only (the product is C); grpcio is a second,
independent client of the broker's wire protocol.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", "build")
BIN = os.path.join(ROOT, BUILD, "bin")
GAZETTE = os.path.join(BIN, "gazette")
GAZCTL = os.path.join(BIN, "gazctl")
GO_DIR = subprocess.check_output([os.path.join(ROOT, "scripts/deps.sh"), "--gazette-dir"], text=True).strip()
GO_GAZETTE = os.path.join(GO_DIR, "gazette")
GO_GAZCTL = os.path.join(GO_DIR, "gazctl")
ETCD_DIR = subprocess.check_output([os.path.join(ROOT, "scripts/deps.sh"), "--etcd-dir"], text=True).strip()
ETCD_BIN = os.path.join(ETCD_DIR, "etcd")
ETCDCTL_BIN = os.path.join(ETCD_DIR, "etcdctl")

_PB_DIR = tempfile.mkdtemp(prefix="gaz-pb-")
subprocess.check_call(["protoc", "--python_out=" + _PB_DIR, "-I" + os.path.join(ROOT, "proto"),
                       "-I/usr/include"] + [os.path.join(ROOT, "proto", p)
                                            for p in ("protocol.proto", "recoverylog.proto", "consumer.proto")])
sys.path.insert(0, _PB_DIR)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class GazetteDiagnosticsPort:
    """Gazette's stream-sum chunker serves diagnostics on :8080, which it
    does not let a flag change; test files on other pytest-xdist workers
    run it too. Holding this lock (an flock shared by every worker) from
    a chunker's start to its end keeps two from binding :8080 at once."""
    PATH = "/tmp/gazette-c-tests-diagnostics-8080.lock"

    def __init__(self, timeout=900):
        import fcntl
        self.f = open(self.PATH, "a")
        deadline = time.time() + timeout
        while True:
            try:
                fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.time() > deadline:
                    self.f.close()
                    raise AssertionError("another test held Gazette's chunker port (:8080) for %d s" % timeout)
                time.sleep(0.2)

    def release(self):
        if not self.f.closed:
            self.f.close()  # closing the file releases the flock

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def wait_for(pred, timeout=20.0, what="condition", interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError("timed out waiting for " + what)


class Etcd:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gaz-etcd-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self.cport, self.pport = free_port(), free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.cport
        self._spawn()
        wait_for(self.healthy, 30, "etcd health")

    def _spawn(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
        self.log = open(os.path.join(self.dir, "etcd.log"), "a")
        self.proc = subprocess.Popen(
            [ETCD_BIN, "--name", "gaz", "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
             "--listen-peer-urls", "http://127.0.0.1:%d" % self.pport,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % self.pport,
             "--initial-cluster", "gaz=http://127.0.0.1:%d" % self.pport,
             "--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def restart(self, sig=signal.SIGKILL, timeout=30):
        """Stops etcd with `sig` and starts it again on the same ports and
        data dir; returns once it is healthy. The downtime in seconds."""
        t0 = time.time()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        self._spawn()
        wait_for(self.healthy, timeout, "etcd health after a restart", interval=0.02)
        return time.time() - t0

    def healthy(self):
        try:
            out = subprocess.run(["curl", "-fsS", self.endpoint + "/health"], capture_output=True, text=True,
                                 timeout=2).stdout
            return '"health":"true"' in out
        except Exception:
            return False

    def ctl(self, *args):
        env = dict(os.environ, ETCDCTL_API="3")
        return subprocess.run([ETCDCTL_BIN, "--endpoints", self.endpoint] + list(args), capture_output=True,
                              text=True, env=env, check=True).stdout

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ExternalEtcd(Etcd):
    def __init__(self, endpoint):
        self.endpoint = endpoint

    def restart(self, sig=signal.SIGKILL, timeout=30):
        raise NotImplementedError("an etcd the suite did not start is not restarted")

    def stop(self):
        pass


@pytest.fixture(scope="session")
def etcd():
    e = ExternalEtcd(os.environ["GAZ_TEST_ETCD"]) if os.environ.get("GAZ_TEST_ETCD") else Etcd()
    yield e
    e.stop()


class S3:
    """An S3 server for the suite (SeaweedFS from scripts/s3-test.sh),
    with boto3 (Debian's python3-boto3) as an independent client. Each test
    makes its own bucket."""

    def __init__(self, endpoint, access_key, secret_key, dir=None):
        self.endpoint, self.access_key, self.secret_key, self.dir = endpoint, access_key, secret_key, dir
        self.made = []  # buckets named by new_bucket, dropped at the session's end

    @classmethod
    def start(cls):
        ak, sk = "gazette-test", "gazette-test-secret"
        env = dict(os.environ, GAZ_TEST_S3_ACCESS_KEY=ak, GAZ_TEST_S3_SECRET_KEY=sk)
        out = subprocess.check_output([os.path.join(ROOT, "scripts/s3-test.sh"), "start"], text=True, env=env)
        endpoint, d = out.split()[:2]
        return cls(endpoint, ak, sk, d)

    def stop(self):
        if self.dir:
            subprocess.run([os.path.join(ROOT, "scripts/s3-test.sh"), "stop", self.dir], capture_output=True)

    def client(self, access_key=None, secret_key=None):
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=access_key or self.access_key,
                            aws_secret_access_key=secret_key or self.secret_key,
                            config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                                          retries={"max_attempts": 3}))

    def env(self):
        """What a broker (ours or Gazette's) needs to reach this server."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}

    def new_bucket(self, create=True):
        name = "gz-%s" % uuid.uuid4().hex[:12]
        self.made.append(name)
        if create:
            self.client().create_bucket(Bucket=name)
        return name

    def drop_buckets(self):
        """Deletes the buckets made so far (each holds SeaweedFS volumes,
        and a shared server has a few hundred)."""
        c = self.client()
        for b in self.made:
            try:
                keys = self.keys(b)
                for i in range(0, len(keys), 1000):
                    c.delete_objects(Bucket=b, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]]})
                c.delete_bucket(Bucket=b)
            except Exception:
                pass  # never made, or already gone
        self.made = []

    def url(self, bucket, prefix="", **params):
        """A FragmentStore URL of Gazette's form for this server."""
        from urllib.parse import quote
        q = "endpoint=%s&region=us-east-1" % quote(self.endpoint, safe="")
        for k, v in params.items():
            q += "&%s=%s" % (k, quote(str(v), safe=""))
        return "s3://%s/%s?%s" % (bucket, prefix, q)

    def keys(self, bucket, prefix=""):
        out, token = [], None
        c = self.client()
        while True:
            kw = {"Bucket": bucket, "Prefix": prefix}
            if token:
                kw["ContinuationToken"] = token
            r = c.list_objects_v2(**kw)
            out += [o["Key"] for o in r.get("Contents", [])]
            if not r.get("IsTruncated"):
                return out
            token = r["NextContinuationToken"]


@pytest.fixture(scope="session")
def s3():
    if os.environ.get("GAZ_TEST_S3"):
        s = S3(os.environ["GAZ_TEST_S3"], os.environ.get("GAZ_TEST_S3_ACCESS_KEY", "gazette-test"),
               os.environ.get("GAZ_TEST_S3_SECRET_KEY", "gazette-test-secret"))
    else:
        s = S3.start()
    yield s
    s.drop_buckets()  # after every test's brokers have stopped
    s.stop()


SAN_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer")
# Under `make TSAN=1` (build-tsan/) our processes report races into their
# logs, which check_sanitizers reads; only third-party internals are
# suppressed (tests/tsan.supp).
TSAN_OPTIONS = os.environ.get("GAZ_TSAN_OPTIONS", "suppressions=%s halt_on_error=0 second_deadlock_stack=1"
                              % os.path.join(ROOT, "tests/tsan.supp"))
os.environ["TSAN_OPTIONS"] = TSAN_OPTIONS  # gazctl and the tools the tests run


EXIT_TIMEOUT = os.environ.get("GAZ_TEST_EXIT_TIMEOUT", "500ms")


def uses_tls(args, env):
    """Whether a process is given TLS files (flags or environment)."""
    return (any(re.search(r"(cert|key|ca)-file", a) for a in args) or
            any(re.search(r"(CERT|KEY|CA)_FILE$", k) for k in env))


def tls_leak_options():
    """LeakSanitizer for a broker that speaks TLS: tests/lsan.supp, which
    says why and what it suppresses (OpenSSL allocations whose stack
    stops at CRYPTO_zalloc)."""
    return {"LSAN_OPTIONS": "suppressions=%s" % os.path.join(ROOT, "tests", "lsan.supp")}


class Broker:
    """One broker process (ours, or Gazette's Go broker with go=True)."""

    def __init__(self, cluster, go=False, zone="local", bid=None, port=None, extra=(), env=None,
                 etcd_endpoint=None):
        self.cluster, self.go = cluster, go
        self.etcd_endpoint = etcd_endpoint or cluster.etcd.endpoint
        self.port = port or free_port()
        self.id = bid or "b-%s" % uuid.uuid4().hex[:8]
        self.zone = zone
        self.address = "http://127.0.0.1:%d" % self.port
        self.logpath = os.path.join(cluster.dir, "%s.log" % self.id)
        self.extra, self.env = list(extra), env or {}
        self.proc = None
        self.signalled = None

    def start(self, wait=True):
        exe = GO_GAZETTE if self.go else GAZETTE
        args = [exe, "serve", "--broker.port", str(self.port), "--broker.host", "127.0.0.1",
                "--broker.id", self.id, "--broker.zone", self.zone,
                "--broker.file-root", self.cluster.file_root,
                "--etcd.address", self.etcd_endpoint, "--etcd.prefix", self.cluster.prefix,
                "--etcd.lease", "5s",
                "--log.level", os.environ.get("GAZ_TEST_LOG_LEVEL", "info")] + self.extra
        if not self.go and not any(a.startswith("--broker.exit-timeout") for a in self.extra):
            # An exiting broker keeps what no other broker takes until its
            # exit timeout: a test's lone broker would wait the default 2m
            # at every stop. Tests of the hand-off pass their own.
            args += ["--broker.exit-timeout", EXIT_TIMEOUT]
        # No AWS settings leak in from the machine: S3 tests pass their own.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "BROKER_", "AWS_"))}
        env["AWS_SHARED_CREDENTIALS_FILE"] = env["AWS_CONFIG_FILE"] = "/nonexistent"
        env["TMPDIR"] = self.cluster.scratch(self.id)
        env["ASAN_OPTIONS"] = os.environ.get("GAZ_BROKER_ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        if not self.go and uses_tls(args, self.env):
            env.update(tls_leak_options())
        env["TSAN_OPTIONS"] = TSAN_OPTIONS
        env.update(self.env)
        self.log = open(self.logpath, "a")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        if wait:
            self.wait_ready()
        return self

    def member_key(self):
        return "%s/members/%s#%s" % (self.cluster.prefix, self.zone, self.id)

    def wait_ready(self, timeout=30):
        def ready():
            if self.proc.poll() is not None:
                raise AssertionError("broker exited %s:\n%s" % (self.proc.returncode, self.logtail()))
            return self.member_key() in self.cluster.etcd.ctl("get", "--prefix", self.cluster.prefix, "--keys-only")
        wait_for(ready, timeout, "broker %s to announce" % self.id, interval=0.1)

    def logtail(self, n=40):
        try:
            return "".join(open(self.logpath).readlines()[-n:])
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=60, lone=True):
        """Signals the broker and waits for its exit code. A Gazette broker
        that is `lone` (no peer to hand off to) is killed after 5 s."""
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        if self.signalled != (self.proc, sig):
            self.signal(sig)
        if self.go and lone:
            # A lone Gazette broker waits forever for a hand-off that
            # cannot happen (its documented behaviour); don't wait on it.
            timeout = min(timeout, 5)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            if self.go and lone:
                return rc
            raise AssertionError("broker %s did not exit within %ss:\n%s" % (self.id, timeout, self.logtail()))
        self.check_sanitizers()
        return rc

    def signal(self, sig=signal.SIGTERM):
        """Sends `sig` once; stop() then waits without sending it again (a
        second SIGTERM ends an exiting broker's wait for its unpersisted
        bytes)."""
        self.signalled = (self.proc, sig)
        self.proc.send_signal(sig)

    def check_sanitizers(self):
        text = open(self.logpath).read()
        for m in SAN_MARKERS:
            assert m not in text, "sanitizer report in %s:\n%s" % (self.logpath, text[text.index(m) - 200:][:4000])


class Cluster:
    def __init__(self, etcd, base):
        self.etcd = etcd
        self.dir = base
        self.prefix = "/gaz-test/%s" % uuid.uuid4().hex[:10]
        self.file_root = os.path.join(base, "fragments")
        os.makedirs(self.file_root)
        self.brokers = []

    def scratch(self, name):
        d = os.path.join(self.dir, "scratch-" + name)
        os.makedirs(d, exist_ok=True)
        return d

    def start(self, wait=True, **kw):
        b = Broker(self, **kw)
        self.brokers.append(b)
        b.start(wait=wait)
        return b

    def stop_all(self):
        """Signals every broker at once (each keeps what no other takes
        until its exit timeout, so one after another would add up), then
        waits for each."""
        errors = []
        for b in self.brokers:
            if b.proc and b.proc.poll() is None and b.signalled != (b.proc, signal.SIGTERM):
                b.signal(signal.SIGTERM)
        # Gazette's brokers wait for a hand-off none of the others can take
        # (all are exiting): their 5 s (Broker.stop) run from the signal,
        # together, not one after another.
        go_deadline = time.time() + 5
        for b in self.brokers:
            try:
                b.stop(timeout=max(0.1, go_deadline - time.time()) if b.go else 90)
            except AssertionError as e:
                errors.append(str(e))
        if errors:
            raise AssertionError("\n".join(errors))


def broker_stacks(brokers, max_lines=600):
    """Every thread's stack of each live broker of ours, by gdb (empty when
    gdb is missing): a hung RPC leaves no log line, its stack says where it
    waits."""
    gdb = shutil.which("gdb")
    out = []
    for b in brokers:
        if not gdb or b.go or not b.proc or b.proc.poll() is not None:
            continue
        try:
            r = subprocess.run([gdb, "-p", str(b.proc.pid), "-batch", "-nx", "-ex", "set pagination off",
                                "-ex", "thread apply all bt"], capture_output=True, text=True, timeout=30)
            text = r.stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            text = "gdb failed: %s" % e
        lines = [ln for ln in text.splitlines() if ln.startswith(("#", "Thread"))]
        try:
            m = urllib.request.urlopen(b.address + "/debug/metrics", timeout=5).read().decode()
            lines += [ln for ln in m.splitlines()
                      if ln.startswith(("grpc_server_started", "grpc_server_handled", "grpc_server_msg",
                                        "gazette_append"))]
        except OSError as e:
            lines.append("metrics: %s" % e)
        out.append("== broker %s (pid %d)\n%s" % (b.id, b.proc.pid, "\n".join(lines[-max_lines:])))
    return "\n".join(out)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """When a test's call fails with its brokers still up, the report gets
    their thread stacks (section "broker stacks")."""
    outcome = yield
    rep = outcome.get_result()
    c = getattr(item, "funcargs", {}).get("cluster")
    if rep.when == "call" and rep.failed and isinstance(c, Cluster):
        stacks = broker_stacks(c.brokers)
        if stacks:
            rep.sections.append(("broker stacks", stacks))


# ---- time per file, at the end of a run -----------------------------------------------
# run.sh's --durations=10 lists the slowest tests; CI's budget is spent per
# file too. A file's time is its tests' setup, call and teardown summed, as
# reported to this process (pytest-xdist's workers report theirs to the
# controller, which prints the table; a file stays on one worker).
FILE_SECONDS = {}


def pytest_runtest_logreport(report):
    f = report.nodeid.split("::", 1)[0]
    FILE_SECONDS[f] = FILE_SECONDS.get(f, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not FILE_SECONDS:
        return
    terminalreporter.write_sep("=", "time per file (its tests' setup + call + teardown)")
    for f, s in sorted(FILE_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line("%9.2fs %s" % (s, f))


@pytest.fixture
def cluster(etcd, tmp_path):
    c = Cluster(etcd, str(tmp_path))
    yield c
    c.stop_all()


@pytest.fixture
def private_cluster(tmp_path):
    """A cluster on an etcd of its own (started here, about a second on
    /dev/shm): for a test that compacts or restarts its etcd, which would
    disturb every other test's brokers on the shared one."""
    e = Etcd()
    c = Cluster(e, str(tmp_path))
    try:
        yield c
    finally:
        c.stop_all()
        e.stop()


# ---- Kubernetes: a real kube-apiserver (scripts/kube-test.sh) ------------------------

KUBE_TEST = os.path.join(ROOT, "scripts/kube-test.sh")
KUBE_DIR = subprocess.check_output([os.path.join(ROOT, "scripts/deps.sh"), "--kube-dir"], text=True).strip()
KUBECTL = os.path.join(KUBE_DIR, "kubectl")
OPERATOR = os.path.join(BIN, "gazette-operator")
CRDS = os.path.join(ROOT, "crds")


class Kube:
    """A kube-apiserver with its own etcd: the one named by GAZ_TEST_KUBECONFIG
    (and GAZ_TEST_KUBE_ETCD, its etcd endpoint), as .ci/run starts it with
    scripts/kube-test.sh, or one started here for the session."""

    def __init__(self):
        self.dir = None
        if os.environ.get("GAZ_TEST_KUBECONFIG"):
            self.kubeconfig = os.environ["GAZ_TEST_KUBECONFIG"]
            self.etcd_endpoint = os.environ.get("GAZ_TEST_KUBE_ETCD", "")
        else:
            out = subprocess.check_output([KUBE_TEST, "start"], text=True).split("\n")
            self.kubeconfig, self.etcd_endpoint, self.dir = out[0], out[1], out[2]

    def kubectl(self, *args, input=None, check=True, namespace=None):
        cmd = [KUBECTL, "--kubeconfig", self.kubeconfig] + (["-n", namespace] if namespace else []) + list(args)
        r = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise AssertionError("kubectl %s failed: %s%s" % (" ".join(args), r.stdout, r.stderr))
        return r

    def etcdctl(self, *args):
        env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ETCD"))
        return subprocess.run([ETCDCTL_BIN, "--endpoints", self.etcd_endpoint] + list(args),
                              capture_output=True, text=True, env=env, check=True).stdout

    def stop(self):
        if self.dir:
            subprocess.run([KUBE_TEST, "stop", self.dir], check=False)


@pytest.fixture(scope="session")
def kube():
    k = Kube()
    yield k
    k.stop()


class Operator:
    """One gazette-operator process watching one namespace."""

    def __init__(self, kube, cluster, namespace, broker_address, extra=(), env=None, in_cluster=False, name=None):
        self.kube, self.cluster, self.namespace = kube, cluster, namespace
        self.port = free_port()
        self.env = env or {}
        self.logpath = os.path.join(cluster.dir, "operator-%s.log" % (name or namespace))
        self.args = [OPERATOR, "--kubeconfig", "" if in_cluster else kube.kubeconfig, "--namespace", namespace,
                     "--etcd.address", cluster.etcd.endpoint, "--etcd.prefix", cluster.prefix,
                     "--broker.address", broker_address, "--broker.timeout", "10s", "--resync", "2s",
                     "--http.address", "127.0.0.1:%d" % self.port, "--log.level", "debug"] + list(extra)
        self.proc = None

    def start(self, wait=True):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "BROKER_", "KUBERNETES_"))}
        env["ASAN_OPTIONS"] = os.environ.get("GAZ_BROKER_ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        env["TSAN_OPTIONS"] = TSAN_OPTIONS
        env.update(self.env)
        self.log = open(self.logpath, "a")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        if wait:
            wait_for(lambda: self.http("/readyz")[0] == 200, 30, "operator /readyz")
        else:
            wait_for(lambda: self.http("/healthz")[0] == 200, 30, "operator /healthz")
        return self

    def http(self, path):
        import urllib.error
        import urllib.request
        if self.proc.poll() is not None:
            raise AssertionError("operator exited %s:\n%s" % (self.proc.returncode, self.logtail()))
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path), timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    def logtext(self):
        return open(self.logpath).read()

    def logtail(self, n=60):
        return "".join(self.logtext().splitlines(True)[-n:])

    def stop(self, timeout=30):
        if not self.proc or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("operator did not exit within %ss:\n%s" % (timeout, self.logtail()))
        text = self.logtext()
        for m in SAN_MARKERS:
            assert m not in text, "sanitizer report in %s:\n%s" % (self.logpath, text[text.index(m) - 200:][:4000])
        assert rc == 0, "operator exited %d:\n%s" % (rc, self.logtail())


class Postgres:
    """A PostgreSQL server for the consumer stores: the one GAZ_TEST_PG
    names (.ci/run starts one), else a throwaway one of scripts/pg-test.sh
    for the session."""

    def __init__(self):
        self.dir = None
        if os.environ.get("GAZ_TEST_PG"):
            self.conninfo = os.environ["GAZ_TEST_PG"]
        else:
            out = subprocess.check_output([os.path.join(ROOT, "scripts/pg-test.sh"), "start"], text=True)
            self.conninfo, self.dir = out.splitlines()[:2]

    def stop(self):
        if self.dir:
            subprocess.call([os.path.join(ROOT, "scripts/pg-test.sh"), "stop", self.dir])


@pytest.fixture(scope="session")
def postgres():
    p = Postgres()
    yield p
    p.stop()
