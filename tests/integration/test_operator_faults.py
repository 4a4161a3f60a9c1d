"""gazette-operator when what it depends on fails, against real processes:
its API server restarting mid-watch (a private kube-apiserver, so the
session's is never touched), its credentials revoked and renewed, the
brokers' etcd going away and coming back, journal items replaced by
garbage in etcd, and a Delete-policy journal whose bucket cannot be
reached. Each checks what reaches etcd, the API server and the bucket."""
import base64
import json
import os
import subprocess
import time
import types
import uuid

import pytest

from conftest import (CRDS, ETCDCTL_BIN, ROOT, S3, Cluster, ExternalEtcd, Kube, Operator,
                      wait_for)
from test_operator import GROUP, RBAC, Env, crds, env, write_atomically  # noqa: F401 (fixtures)

KUBE_TEST = os.path.join(ROOT, "scripts/kube-test.sh")
ETCD_TEST = os.path.join(ROOT, "scripts/etcd-test.sh")
S3_TEST = os.path.join(ROOT, "scripts/s3-test.sh")


def journal_item(etcd, prefix, journal):
    """(raw bytes, mod revision) of the journal's etcd item, or None."""
    out = json.loads(etcd.ctl("get", "-w", "json", "%s/items/%s" % (prefix, journal)))
    kvs = out.get("kvs") or []
    return (base64.b64decode(kvs[0]["value"]), int(kvs[0]["mod_revision"])) if kvs else None


def journal_spec(etcd, prefix, journal):
    """The item decoded as a JournalSpec (protoc's Python code), or None."""
    import protocol_pb2 as pb
    it = journal_item(etcd, prefix, journal)
    return pb.JournalSpec.FromString(it[0]) if it else None


def put_raw(etcd, key, raw):
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ETCD"))
    env["ETCDCTL_API"] = "3"
    subprocess.run([ETCDCTL_BIN, "--endpoints", etcd.endpoint, "put", key], input=raw, env=env, check=True,
                   capture_output=True, timeout=30)


def cond(e, name, ctype="Ready"):
    return e.condition(name, ctype) or {}


def resume(script, d):
    """Starts a halted server again (scripts/*-test.sh resume). A loaded
    machine may be slow to bring it up, or a port may be taken meanwhile
    and freed again: one more try before failing with the script's words."""
    for attempt in (1, 2):
        r = subprocess.run([script, "resume", d], capture_output=True, text=True, timeout=300)
        if r.returncode == 0:
            return
    raise AssertionError("%s resume %s failed: %s%s" % (os.path.basename(script), d, r.stdout, r.stderr))


def alive(op):
    assert op.proc.poll() is None, "operator exited %s:\n%s" % (op.proc.returncode, op.logtail())
    return True


# ---- 1. the API server restarts mid-watch ---------------------------------------------

@pytest.fixture(scope="module")
def private_kube():
    """A kube-apiserver and etcd of this module's own: it is stopped and
    started again, which the session's shared one must never be."""
    out = subprocess.check_output([KUBE_TEST, "start"], text=True, timeout=300).split("\n")
    k = Kube.__new__(Kube)
    k.kubeconfig, k.etcd_endpoint, k.dir = out[0], out[1], out[2]
    try:
        k.kubectl("apply", "-f", CRDS)
        k.kubectl("wait", "--for=condition=Established", "crd/journalspecs." + GROUP,
                  "crd/shardspecs." + GROUP, "--timeout=60s")
        yield k
    finally:
        k.stop()


def failure_lines(text):
    return [l for l in text.splitlines() if " failed" in l]


def test_apiserver_restart_mid_watch(private_kube, cluster):
    k = private_kube
    ns = "ar-" + uuid.uuid4().hex[:8]
    k.kubectl("create", "namespace", ns)
    b = cluster.start()
    op = Operator(k, cluster, ns, b.address).start()
    e = Env(k, cluster, ns, b, op)
    try:
        for n in ("keep", "change", "gone"):
            e.apply(n, "k8s/ar/" + n)
        for n in ("keep", "change", "gone"):
            wait_for(lambda: e.ready(n), 30, n + " Ready")
        wait_for(lambda: "watching" in op.logtext() and "resource=journalspecs" in op.logtext(), 20,
                 "watch established")
        time.sleep(1)
        mark = len(op.logtext())

        subprocess.run([KUBE_TEST, "halt", k.dir], check=True, timeout=60)
        t_down = time.time()
        # While the API server is down the journal drifts in the brokers' etcd.
        text = e.gazctl("list", "-o", "yaml", "-l", "name=k8s/ar/keep").decode()
        e.gazctl("apply", "--specs", "/dev/stdin", input=text.replace("replication: 1", "replication: 3").encode())
        assert e.journals()["k8s/ar/keep"][0]["replication"] == 3
        time.sleep(8)
        alive(op)
        down = op.logtext()[mark:]
        assert "Couldn't connect to server" in down, down[-3000:]
        assert "watch failed" in down or "list failed" in down, down[-3000:]
        assert "retry_in_ms=" in down
        # Backing off, not spinning: a handful of failures a second at most.
        fails = failure_lines(down)
        assert len(fails) <= 10 * (time.time() - t_down), "%d failures:\n%s" % (len(fails), "\n".join(fails[-40:]))

        resume(KUBE_TEST, k.dir)
        # Changed at once, while the operator may still be backing off:
        # they reach it through the resumed watch or a relist.
        e.apply("change", "k8s/ar/change", replication=2)
        e.apply("new", "k8s/ar/new")
        e.k("delete", "journalspec", "gone", "--wait=false")

        def converged():
            js = e.journals()
            return ("k8s/ar/new" in js and js["k8s/ar/change"][0]["replication"] == 2
                    and js["k8s/ar/keep"][0]["replication"] == 1 and e.cr("gone") is None
                    and e.ready("change") and e.ready("new") and e.ready("keep"))
        wait_for(converged, 120, "convergence after the API server came back", interval=0.5)
        assert e.cr("change")["status"]["observedGeneration"] == 2
        assert "k8s/ar/gone" in e.journals()  # deletionPolicy Retain
        assert "ChangedInEtcd" in e.events("keep")
        alive(op)
        assert op.http("/healthz")[0] == 200 and op.http("/readyz")[0] == 200
    finally:
        op.stop()


# ---- 2. revoked credentials -------------------------------------------------------------

def test_revoked_token_is_reported_and_a_new_one_recovers(crds, cluster, tmp_path):
    """A kubeconfig whose user reads its bearer token from a file; the
    token is bound to a Secret, so deleting the Secret revokes it (401)."""
    ns = "tok-" + uuid.uuid4().hex[:8]
    crds.kubectl("create", "namespace", ns)
    crds.kubectl("create", "serviceaccount", "gazette-operator", namespace=ns)
    crds.kubectl("apply", "-f", "-", input=RBAC, namespace=ns)

    def bound_token(secret):
        crds.kubectl("create", "secret", "generic", secret, "--from-literal=k=v", namespace=ns)
        return crds.kubectl("create", "token", "gazette-operator", "--duration", "10m", "--bound-object-kind",
                            "Secret", "--bound-object-name", secret, namespace=ns).stdout.strip()
    token_file = str(tmp_path / "token")
    write_atomically(token_file, bound_token("tok-1"))
    view = lambda path: crds.kubectl("config", "view", "--raw", "-o", "jsonpath={%s}" % path).stdout
    kc = {"apiVersion": "v1", "kind": "Config", "current-context": "sa",
          "clusters": [{"name": "c", "cluster": {"server": view(".clusters[0].cluster.server"),
                        "certificate-authority-data": view(".clusters[0].cluster.certificate-authority-data")}}],
          "users": [{"name": "sa", "user": {"tokenFile": token_file}}],
          "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa", "namespace": ns}}]}
    kc_path = str(tmp_path / "kubeconfig")
    with open(kc_path, "w") as f:
        json.dump(kc, f)
    b = cluster.start()
    op = Operator(types.SimpleNamespace(kubeconfig=kc_path), cluster, ns, b.address,
                  extra=["--kube.watch-timeout", "5s"]).start()
    e = Env(crds, cluster, ns, b, op)
    try:
        e.apply("one", "k8s/tok/one")
        wait_for(lambda: e.ready("one"), 30, "Ready with the bound token")
        rev = e.journals()["k8s/tok/one"][1]
        mark = len(op.logtext())

        # Revoked; the API server may honour its cached verdict for a few seconds.
        crds.kubectl("delete", "secret", "tok-1", namespace=ns)
        wait_for(lambda: alive(op) and ": 401: " in op.logtext()[mark:], 60, "a 401 in the log")
        t401 = time.time()
        e.apply("one", "k8s/tok/one", replication=2)
        e.apply("two", "k8s/tok/two")
        time.sleep(6)
        alive(op)
        log = op.logtext()[mark:]
        line = [l for l in log.splitlines() if ": 401: " in l][0]
        assert "Unauthorized" in line and "credentials: bearer token from file %s" % token_file in line, line
        # Nothing written with stale knowledge, nothing forgotten.
        assert "k8s/tok/two" not in e.journals()
        assert e.journals()["k8s/tok/one"][1] == rev
        n401 = len([l for l in op.logtext()[mark:].splitlines() if ": 401: " in l])
        assert n401 <= 10 * (time.time() - t401 + 10), "401s not backed off: %d" % n401

        write_atomically(token_file, bound_token("tok-2"))
        wait_for(lambda: e.ready("two") and e.ready("one") and e.cr("one")["status"]["observedGeneration"] == 2,
                 90, "converged with the new token", interval=0.5)
        assert e.journals()["k8s/tok/one"][0]["replication"] == 2 and "k8s/tok/two" in e.journals()
        alive(op)
    finally:
        op.stop()


# ---- 3. the brokers' etcd goes away -------------------------------------------------------

class PrivateEtcd(ExternalEtcd):
    """An etcd of one test (scripts/etcd-test.sh), halted and resumed on
    the same data and port."""

    def __init__(self):
        out = subprocess.check_output([ETCD_TEST, "start"], text=True, timeout=120).split()
        self.endpoint, self.dir = out[0], out[1]

    def halt(self):
        subprocess.run([ETCD_TEST, "halt", self.dir], check=True, timeout=60)

    def resume(self):
        resume(ETCD_TEST, self.dir)

    def stop(self):
        subprocess.run([ETCD_TEST, "stop", self.dir], timeout=60, capture_output=True)


def test_unreachable_broker_etcd_is_reported_and_converges(crds, tmp_path):
    etcd = PrivateEtcd()
    base = tmp_path / "c"
    base.mkdir()
    c = Cluster(etcd, str(base))
    ns = "ed-" + uuid.uuid4().hex[:8]
    crds.kubectl("create", "namespace", ns)
    op = Operator(crds, c, ns, "").start()
    e = Env(crds, c, ns, None, op)
    spec = lambda j: journal_spec(etcd, c.prefix, j)
    try:
        e.apply("a", "k8s/ed/a")
        wait_for(lambda: e.ready("a"), 30, "Ready")
        assert spec("k8s/ed/a").replication == 1

        etcd.halt()
        e.apply("a", "k8s/ed/a", replication=2)
        e.apply("b", "k8s/ed/b")
        host_port = etcd.endpoint.replace("http://", "")
        for n in ("a", "b"):
            c_ = wait_for(lambda: alive(op) and cond(e, n).get("reason") == "EtcdUnavailable" and cond(e, n), 60,
                          n + " EtcdUnavailable")
            assert c_["status"] == "False" and host_port in c_["message"], c_
            assert "EtcdUnavailable" in e.events(n)
        assert e.cr("a")["status"]["lastError"] == cond(e, "a")["message"]
        time.sleep(3)
        alive(op)

        etcd.resume()
        wait_for(lambda: e.ready("a") and e.ready("b") and e.cr("a")["status"]["observedGeneration"] == 2, 90,
                 "Ready once etcd is back", interval=0.5)
        assert spec("k8s/ed/a").replication == 2 and spec("k8s/ed/b").name == "k8s/ed/b"
        assert "lastError" not in e.cr("a")["status"]
        alive(op)
    finally:
        op.stop()
        etcd.stop()


# ---- 4. garbage in a journal's etcd item ----------------------------------------------------

def test_journal_garbage_and_deletion_in_etcd_are_corrected(env):
    import protocol_pb2 as pb
    e, journal = env, "k8s/garbage/j"
    key = "%s/items/%s" % (e.cluster.prefix, journal)
    e.apply("gj", journal, replication=1, labels=[{"name": "app.gazette.dev/tag", "value": "mine"}])
    wait_for(lambda: e.ready("gj"), 30, "Ready")
    want = journal_item(e.cluster.etcd, e.cluster.prefix, journal)[0]

    def corrected(reason, needle):
        def check():
            alive(e.op)
            c = cond(e, "gj", "DriftCorrected")
            it = journal_item(e.cluster.etcd, e.cluster.prefix, journal)
            return (it is not None and it[0] == want and c.get("status") == "True" and c.get("reason") == reason
                    and needle in c.get("message", "") and c)
        return wait_for(check, 30, "%s (%s) corrected" % (reason, needle))

    # Bytes that are not a JournalSpec at all.
    put_raw(e.cluster.etcd, key, b"\xff\xfe not a journal spec")
    c = corrected("UnreadableInEtcd", "value is not a JournalSpec")
    assert journal in c["message"]
    assert "UnreadableInEtcd" in e.events("gj")
    # A well-formed JournalSpec that Gazette's validation refuses (no refresh interval).
    bad = pb.JournalSpec(name=journal, replication=1,
                         fragment=pb.JournalSpec.Fragment(length=1 << 20, compression_codec=pb.NONE))
    put_raw(e.cluster.etcd, key, bad.SerializeToString())
    corrected("UnreadableInEtcd", "invalid spec")
    # Another journal's spec under this key.
    other = pb.JournalSpec.FromString(want)
    other.name = "k8s/garbage/other"
    put_raw(e.cluster.etcd, key, other.SerializeToString())
    corrected("UnreadableInEtcd", 'names journal "k8s/garbage/other"')
    # A valid change by someone else.
    changed = pb.JournalSpec.FromString(want)
    changed.replication = 3
    put_raw(e.cluster.etcd, key, changed.SerializeToString())
    corrected("ChangedInEtcd", "was changed in etcd")
    # Deleted out from under it.
    e.cluster.etcd.ctl("del", key)
    corrected("DeletedFromEtcd", "was deleted from etcd")
    assert {"ChangedInEtcd", "DeletedFromEtcd"} <= set(e.events("gj"))
    assert e.ready("gj")
    # The broker lived through all of it and serves the journal.
    assert e.broker.proc.poll() is None
    e.gazctl("append", "-l", "name=" + journal, input=b"still here\n")


# ---- 5. Delete policy with the bucket unreachable ----------------------------------------------

@pytest.fixture
def private_s3():
    """An S3 server of one test, halted and resumed on the same data."""
    s = S3.start()
    yield s
    s.stop()


def s3_fragments(s3, bucket, journal):
    """offset -> bytes of every fragment object under journal/."""
    c = s3.client()
    out = {}
    for key in s3.keys(bucket, journal + "/"):
        begin, end = (int(x, 16) for x in key.rsplit("/", 1)[1].split("-")[:2])
        body = c.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert len(body) == end - begin, key
        out[begin] = body
    return out


def test_delete_policy_waits_for_an_unreachable_bucket(crds, cluster, private_s3):
    s3 = private_s3
    ns = "ub-" + uuid.uuid4().hex[:8]
    crds.kubectl("create", "namespace", ns)
    b = cluster.start(env=s3.env())
    op = Operator(crds, cluster, ns, b.address, env=s3.env()).start()
    e = Env(crds, cluster, ns, b, op)
    journal, bucket = "k8s/unreachable/d", s3.new_bucket()
    store = s3.url(bucket)
    try:
        e.apply("d", journal, deletionPolicy="Delete",
                fragment={"stores": [store], "refreshInterval": "1s", "compressionCodec": "NONE"})
        wait_for(lambda: e.ready("d"), 30, "Ready")
        seed = b"seed\n"
        e.gazctl("append", "-l", "name=" + journal, input=seed)
        wait_for(lambda: e.cr("d")["status"].get("persistedThrough") == len(seed), 30, "first write persisted")
        data = seed + b"".join(b"line %06d\n" % i for i in range(5000))
        e.gazctl("append", "-l", "name=" + journal, input=data[len(seed):])
        wait_for(lambda: e.cr("d")["status"].get("writeHead") == len(data), 30, "status writeHead")
        assert e.cr("d")["status"]["persistedThrough"] == len(seed)  # the rest is in the spool

        subprocess.run([S3_TEST, "halt", s3.dir], check=True, timeout=60)
        e.k("delete", "journalspec", "d", "--wait=false")

        # Whether the broker could still suspend the journal (its store
        # health check not yet failed) or not, the deletion waits and says why.
        c = wait_for(lambda: alive(op) and cond(e, "d").get("reason") == "PersistenceBlocked" and cond(e, "d"),
                     60, "PersistenceBlocked", interval=0.5)
        assert c["status"] == "False" and "persisted" in c["message"], c
        assert "fragment store %s is unusable" % store in c["message"] and "Couldn't connect" in c["message"], c
        assert "PersistenceBlocked" in e.events("d")
        time.sleep(5)
        cr = e.cr("d")
        assert cr is not None and "gazette-c.dev/journal" in cr["metadata"]["finalizers"]
        assert journal_item(e.cluster.etcd, e.cluster.prefix, journal) is not None  # the spec stays
        alive(op)

        resume(S3_TEST, s3.dir)
        wait_for(lambda: alive(op) and e.cr("d") is None, 180, "deletion completes once the bucket is back",
                 interval=1)
        assert journal_item(e.cluster.etcd, e.cluster.prefix, journal) is None
        assert "Deleted" in e.events("d")
        frags = s3_fragments(s3, bucket, journal)
        assert sorted(frags) == [0, len(seed)], sorted(frags)
        assert b"".join(frags[k] for k in sorted(frags)) == data
    finally:
        op.stop()
