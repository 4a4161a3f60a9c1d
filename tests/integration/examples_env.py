"""A cluster for Gazette's example applications, shared by test_stream_sum.py
and test_word_count.py: etcd, three of our brokers, the examples' journals
and one application's shards as tests/soak/soak.py makes them
(journals_yaml, summer_shards, counter_shards, the consumers' flags), and
two of Gazette's consumer processes of that application (primary and hot
standby)."""
import os
import signal
import subprocess
import sys
import urllib.request

import conftest as cf
from gazpb import Client, wait_route

sys.path.insert(0, os.path.join(cf.ROOT, "tests/soak"))
import soak  # noqa: E402  (journals_yaml, summer_shards, counter_shards, EXAMPLES)

EXAMPLES = soak.EXAMPLES


def ready(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except Exception:
        return False


class Consumer:
    """One of Gazette's consumer applications (runconsumer), with soak.py's
    ConsumerProc flags."""

    def __init__(self, env, app, idx, extra=()):
        self.env, self.name = env, "%s-%d" % (app, idx)
        self.port = cf.free_port()
        self.address = "http://127.0.0.1:%d" % self.port
        self.logpath = os.path.join(env.dir, self.name + ".log")
        scratch = env.cluster.scratch(self.name)
        args = [os.path.join(EXAMPLES, app), "serve", "--consumer.zone", "local", "--consumer.id", self.name,
                "--consumer.host", "127.0.0.1", "--consumer.port", str(self.port),
                "--broker.address", env.broker.address, "--broker.cache.size", "256",
                "--broker.file-root", env.cluster.file_root,
                "--etcd.address", env.cluster.etcd.endpoint, "--etcd.prefix", env.prefix + "/consumers/" + app,
                "--etcd.lease", "5s", "--log.level", "info"] + list(extra)
        penv = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "BROKER_", "CONSUMER_"))}
        penv["TMPDIR"] = scratch
        with open(self.logpath, "a") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=penv, cwd=scratch)

    def wait_ready(self):
        def up():
            if self.proc.poll() is not None:
                raise AssertionError("%s exited %s:\n%s" % (self.name, self.proc.returncode, self.logtail()))
            return ready(self.address + "/debug/ready")
        cf.wait_for(up, 60, self.name + " ready", interval=0.1)

    def logtail(self, n=40):
        return "".join(open(self.logpath, errors="replace").readlines()[-n:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # as the soak ends its consumers
            self.proc.wait(30)



class CConsumer:
    """One of our example consumers (bin/<app>-<program> serve) in env's
    group `group` (etcd prefix <env.prefix>/consumers/<group>), with the
    application's own flags `app_args`; start() waits for its member key,
    stop() fails on a sanitizer report in its log."""

    def __init__(self, env, name, exe, group, app_args):
        self.env, self.name, self.exe, self.group, self.app_args = env, name, exe, group, app_args
        self.port = cf.free_port()
        self.address = "http://127.0.0.1:%d" % self.port
        self.logpath = os.path.join(env.dir, name + ".log")
        self.proc = None

    def start(self):
        e = self.env
        args = [self.exe, "serve", "--consumer.id", self.name, "--consumer.host", "127.0.0.1",
                "--consumer.port", str(self.port), "--broker.address", e.broker.address,
                "--etcd.address", e.cluster.etcd.endpoint, "--etcd.prefix", "%s/consumers/%s" % (e.prefix, self.group),
                "--etcd.lease", "3s", "--consumer.exit-timeout", "3s", "--log.level", "info"] + self.app_args
        penv = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "BROKER_", "CONSUMER_"))}
        penv["TSAN_OPTIONS"] = cf.TSAN_OPTIONS
        self.proc = subprocess.Popen(args, stdout=open(self.logpath, "a"), stderr=subprocess.STDOUT, env=penv)
        key = "%s/consumers/%s/members/local#%s" % (e.prefix, self.group, self.name)
        cf.wait_for(lambda: self.alive() and key in e.cluster.etcd.ctl("get", "--prefix", e.prefix, "--keys-only"),
                    30, self.name + " to announce", interval=0.1)
        return self

    def alive(self):
        assert self.proc.poll() is None, "%s exited %s:\n%s" % (self.name, self.proc.returncode,
                                                                  open(self.logpath).read()[-3000:])
        return True

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)
        text = open(self.logpath).read()
        for m in cf.SAN_MARKERS:
            assert m not in text, "sanitizer report in %s:\n%s" % (self.logpath, text[text.index(m) - 200:][:4000])

class Env:
    """`app` is "summer" (every store SQLite) or "counter" (N=2)."""

    def __init__(self, etcd, base, app):
        self.dir = base
        self.cluster = cf.Cluster(etcd, base)
        self.prefix = self.cluster.prefix
        self.cluster.prefix = self.prefix + "/cluster"
        self.consumers = []
        try:
            self.setup(base, app)
        except BaseException:
            self.stop()
            raise

    def setup(self, base, app):
        for _ in range(3):
            self.cluster.start()
        self.broker = self.cluster.brokers[0]
        spec = os.path.join(base, "journals.yaml")
        with open(spec, "w") as f:
            f.write(soak.journals_yaml())
        self.gazctl(cf.GAZCTL, "journals", "apply", "--specs", spec)
        c = Client(self.broker.address)
        if app == "summer":
            sources = ["examples/stream-sum/sums"] + ["examples/stream-sum/chunks/part-%03d" % i for i in range(8)]
        else:
            sources = ["examples/word-count/deltas/part-%03d" % i for i in range(4)]
        for j in sources:
            wait_route(c, j, 3, timeout=60)
        c.close()
        extra = ("--wordcount.N", "2") if app == "counter" else ()
        for i in (1, 2):
            self.consumers.append(Consumer(self, app, i, extra))
        for s in self.consumers:
            s.wait_ready()
        shards = os.path.join(base, "%s-shards.yaml" % app)
        with open(shards, "w") as f:
            if app == "summer":
                # The soak's shards with every store SQLite.
                f.write(soak.summer_shards(self.prefix + "/hints").replace("value: rocksdb", "value: sqlite"))
            else:
                f.write(soak.counter_shards(self.prefix + "/hints"))
        self.gazctl(cf.GO_GAZCTL, "shards", "apply", "--specs", shards, "--consumer.address",
                    self.consumers[0].address)

    def gazctl(self, exe, *args):
        r = subprocess.run([exe] + list(args) + ["--broker.address", self.broker.address], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, "%s %s: %s%s" % (exe, " ".join(args), r.stdout, r.stderr)
        return r.stdout

    def check_consumers(self):
        for s in self.consumers:
            assert s.proc.poll() is None, "%s exited %s:\n%s" % (s.name, s.proc.returncode, s.logtail())

    def stop(self):
        for s in self.consumers:
            s.stop()
        self.cluster.stop_all()
