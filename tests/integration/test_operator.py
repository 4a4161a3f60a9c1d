"""gazette-operator against a real kube-apiserver (with its own etcd) and
real gazette-c brokers on a real etcd: CRD installation and validation,
JournalSpec CRs synced into the brokers' keyspace (create, update, both
deletion policies), drift correction, adoption, conflicts, status, and
case BR-25 (a watch resumed after etcd compaction gets 410 Gone and the
operator relists)."""
import json
import os
import signal
import subprocess
import time
import uuid

import pytest

from conftest import CRDS, GAZCTL, Operator, wait_for

GROUP = "gazette-c.dev"


@pytest.fixture(scope="module")
def crds(kube):
    kube.kubectl("apply", "-f", CRDS)
    kube.kubectl("wait", "--for=condition=Established", "crd/journalspecs." + GROUP,
                 "crd/shardspecs." + GROUP, "--timeout=60s")
    return kube


@pytest.fixture
def env(crds, cluster):
    """A namespace, one broker, an operator watching that namespace."""
    ns = "t-" + uuid.uuid4().hex[:10]
    crds.kubectl("create", "namespace", ns)
    b = cluster.start()
    op = Operator(crds, cluster, ns, b.address).start()
    e = Env(crds, cluster, ns, b, op)
    yield e
    op.stop()


class Env:
    def __init__(self, kube, cluster, ns, broker, op):
        self.kube, self.cluster, self.ns, self.broker, self.op = kube, cluster, ns, broker, op

    def k(self, *args, **kw):
        return self.kube.kubectl(*args, namespace=self.ns, **kw)

    def apply(self, name, journal, check=True, **spec):
        spec.setdefault("replication", 1)
        spec.setdefault("fragment", {"stores": ["file:///"], "refreshInterval": "1s",
                                     "compressionCodec": "NONE"})
        spec["name"] = journal
        doc = {"apiVersion": GROUP + "/v1alpha1", "kind": "JournalSpec",
               "metadata": {"name": name}, "spec": spec}
        return self.k("apply", "-f", "-", input=json.dumps(doc), check=check)

    def cr(self, name):
        r = self.k("get", "journalspec", name, "-o", "json", check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def condition(self, name, ctype):
        for c in ((self.cr(name) or {}).get("status") or {}).get("conditions", []):
            if c["type"] == ctype:
                return c
        return None

    def ready(self, name):
        if self.op.proc.poll() is not None:
            raise AssertionError("operator exited %s:\n%s" % (self.op.proc.returncode, self.op.logtail()))
        c = self.condition(name, "Ready")
        return c is not None and c["status"] == "True" and \
            c["observedGeneration"] == self.cr(name)["metadata"]["generation"]

    def events(self, name):
        r = self.k("get", "events", "--field-selector", "involvedObject.name=" + name, "-o", "json")
        return [e["reason"] for e in json.loads(r.stdout)["items"]]

    def gazctl(self, *args, input=None):
        env = dict(os.environ, HOME="/nonexistent")
        r = subprocess.run([GAZCTL, "journals"] + list(args) + ["--broker.address", self.broker.address],
                           input=input, capture_output=True, env=env, timeout=60)
        assert r.returncode == 0, r.stderr.decode()
        return r.stdout

    def journals(self):
        """What `gazctl journals list` shows: name -> (spec, mod_revision)."""
        out = json.loads(self.gazctl("list", "-o", "json"))
        return {j["spec"]["name"]: (j["spec"], int(j["mod_revision"])) for j in out.get("journals") or []}

    def etcd_item(self, journal):
        return self.cluster.etcd.ctl("get", "%s/items/%s" % (self.cluster.prefix, journal))


def test_crds_install_and_are_established(crds):
    crd = json.loads(crds.kubectl("get", "crd", "journalspecs." + GROUP, "-o", "json").stdout)
    conds = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conds.get("Established") == "True" and conds.get("NamesAccepted") == "True"
    assert crd["spec"]["names"]["shortNames"] == ["gj", "gjs"]
    assert crd["spec"]["names"]["categories"] == ["gazette"]
    v = crd["spec"]["versions"][0]
    assert v["name"] == "v1alpha1" and v["subresources"] == {"status": {}}
    cols = [c["name"] for c in v["additionalPrinterColumns"]]
    assert cols == ["Journal", "Replication", "Primary", "Write Head", "Persisted", "Ready", "Age"]
    shard = json.loads(crds.kubectl("get", "crd", "shardspecs." + GROUP, "-o", "json").stdout)
    assert {c["type"]: c["status"] for c in shard["status"]["conditions"]}["Established"] == "True"
    # Short names and the category resolve.
    crds.kubectl("get", "gj,gs", "-A")
    crds.kubectl("get", "gazette", "-A")


def test_apply_update_and_delete_with_retain(env):
    env.apply("a", "k8s/retain/a", labels=[{"name": "app.gazette.dev/tag", "value": "x"}])
    wait_for(lambda: "k8s/retain/a" in env.journals(), 20, "journal in gazctl list")
    wait_for(lambda: env.ready("a"), 20, "Ready")
    spec, rev = env.journals()["k8s/retain/a"]
    assert spec["replication"] == 1 and spec["fragment"]["compression_codec"] == "NONE"
    assert spec["labels"]["labels"] == [{"name": "app.gazette.dev/tag", "value": "x", "prefix": False}]
    st = env.cr("a")["status"]
    assert st["journal"] == "k8s/retain/a" and st["observedGeneration"] == 1
    assert st["etcdModRevision"] == rev and "adopted" not in st
    assert "gazette-c.dev/journal" in env.cr("a")["metadata"]["finalizers"]
    assert "Created" in env.events("a")

    # Update: the spec in etcd follows, observedGeneration too.
    env.apply("a", "k8s/retain/a", replication=2, maxAppendRate=1000)
    wait_for(lambda: env.journals()["k8s/retain/a"][0]["replication"] == 2, 20, "replication 2")
    assert env.journals()["k8s/retain/a"][0]["max_append_rate"] == "1000"
    wait_for(lambda: env.ready("a") and env.cr("a")["status"]["observedGeneration"] == 2, 20, "generation 2")
    assert "Updated" in env.events("a")

    # Delete with the default policy: the CR goes, the journal stays.
    env.k("delete", "journalspec", "a", "--timeout=30s")
    assert env.cr("a") is None
    assert env.journals()["k8s/retain/a"][0]["replication"] == 2
    assert "Retained" in env.events("a")


def test_delete_policy_suspends_persists_then_deletes(env):
    env.apply("d", "k8s/delete/d", deletionPolicy="Delete")
    wait_for(lambda: env.ready("d"), 20, "Ready")
    data = b"".join(b"line %06d\n" % i for i in range(5000))
    env.gazctl("append", "-l", "name=k8s/delete/d", input=data)
    # Nothing is persisted yet: the fragment is still the broker's spool.
    frag_dir = os.path.join(env.cluster.file_root, "k8s/delete/d")
    assert not os.path.exists(frag_dir) or not os.listdir(frag_dir)
    wait_for(lambda: env.cr("d")["status"].get("writeHead") == len(data), 20, "status writeHead")
    assert env.cr("d")["status"]["persistedThrough"] == 0

    env.k("delete", "journalspec", "d", "--timeout=60s")
    assert env.cr("d") is None
    assert "k8s/delete/d" not in env.journals()
    assert env.etcd_item("k8s/delete/d") == ""
    # Every byte reached the store before the spec went.
    files = os.listdir(frag_dir)
    assert len(files) == 1, files
    begin, end = files[0].split("-")[:2]
    assert (int(begin, 16), int(end, 16)) == (0, len(data))
    assert open(os.path.join(frag_dir, files[0]), "rb").read() == data
    assert "Deleted" in env.events("d")


def test_drift_in_etcd_is_corrected(env):
    env.apply("drift", "k8s/drift/j", labels=[{"name": "app.gazette.dev/tag", "value": "orig"}])
    wait_for(lambda: env.ready("drift"), 20, "Ready")
    yaml_text = env.gazctl("list", "-o", "yaml", "-l", "name=k8s/drift/j").decode()
    changed = yaml_text.replace("replication: 1", "replication: 3").replace("orig", "changed")
    assert changed != yaml_text
    env.gazctl("apply", "--specs", "/dev/stdin", input=changed.encode())
    assert env.journals()["k8s/drift/j"][0]["replication"] == 3
    wait_for(lambda: env.journals()["k8s/drift/j"][0]["replication"] == 1, 20, "drift corrected")
    assert env.journals()["k8s/drift/j"][0]["labels"]["labels"][0]["value"] == "orig"
    assert "DriftCorrected" in env.events("drift")
    # A deleted item comes back too.
    env.cluster.etcd.ctl("del", "%s/items/k8s/drift/j" % env.cluster.prefix)
    wait_for(lambda: "k8s/drift/j" in env.journals(), 20, "item recreated")
    # And an unchanged journal is not rewritten by resyncs.
    rev = env.journals()["k8s/drift/j"][1]
    time.sleep(5)
    assert env.journals()["k8s/drift/j"][1] == rev


def test_adoption_of_an_existing_journal(env):
    specs = ("name: k8s/adopt/j\nreplication: 2\nfragment:\n  length: 1048576\n"
             "  compression_codec: GZIP\n  stores: [file:///]\n  refresh_interval: 1m0s\n")
    env.gazctl("apply", "--specs", "/dev/stdin", input=specs.encode())
    before = env.journals()["k8s/adopt/j"]
    env.apply("adopt", "k8s/adopt/j")
    wait_for(lambda: env.ready("adopt"), 20, "Ready")
    st = env.cr("adopt")["status"]
    assert st["adopted"] is True
    spec, rev = env.journals()["k8s/adopt/j"]
    assert rev > before[1] and spec["replication"] == 1 and spec["fragment"]["compression_codec"] == "NONE"
    assert st["etcdModRevision"] == rev
    assert "Adopted" in env.events("adopt")
    # Adopting an identical journal writes nothing.
    env.k("delete", "journalspec", "adopt", "--timeout=30s")
    env.apply("adopt2", "k8s/adopt/j")
    wait_for(lambda: env.ready("adopt2"), 20, "Ready")
    assert env.cr("adopt2")["status"]["adopted"] is True
    assert env.journals()["k8s/adopt/j"][1] == rev


def test_two_crs_naming_one_journal_conflict(env):
    env.apply("first", "k8s/conflict/j", replication=1)
    wait_for(lambda: env.ready("first"), 20, "first Ready")
    env.apply("second", "k8s/conflict/j", replication=2, deletionPolicy="Delete")
    wait_for(lambda: (env.condition("second", "Conflict") or {}).get("status") == "True", 20, "Conflict")
    ready = env.condition("second", "Ready")
    assert ready["status"] == "False" and ready["reason"] == "Conflict"
    assert "default" not in ready["message"] and env.ns + "/first" in ready["message"]
    assert "Conflict" in env.events("second")
    time.sleep(3)  # a resync later, the owner's spec still stands
    assert env.journals()["k8s/conflict/j"][0]["replication"] == 1
    assert env.ready("first")
    # The owner goes (Retain): the other CR takes the journal over.
    env.k("delete", "journalspec", "first", "--timeout=30s")
    wait_for(lambda: env.ready("second"), 20, "second Ready")
    assert env.condition("second", "Conflict")["status"] == "False"
    assert env.journals()["k8s/conflict/j"][0]["replication"] == 2
    assert env.cr("second")["status"]["adopted"] is True


INVALID = [
    ({"replication": 6}, "should be less than or equal to 5"),
    ({"replication": 0}, "should be greater than or equal to 1"),
    ({"name": "/abs/journal"}, "spec.name in body should match"),
    ({"name": "abc"}, "should be at least 4 chars long"),
    ({"name": "a/../b/c"}, "name must be a clean path"),
    ({"fragment": {"refreshInterval": "25h"}}, "refreshInterval must be between 1s and 24h"),
    ({"fragment": {"refreshInterval": "1s", "flushInterval": "30s"}}, "flushInterval must be 0 or at least 1m"),
    ({"fragment": {"refreshInterval": "1s", "retention": "7d"}}, "spec.fragment.retention in body should match"),
    ({"fragment": {"refreshInterval": "1s", "length": 1023}}, "should be greater than or equal to 1024"),
    ({"fragment": {"refreshInterval": "1s", "compressionCodec": "LZ4"}}, 'Unsupported value: "LZ4"'),
    ({"fragment": {"refreshInterval": "1s", "stores": ["s3://bucket"]}}, "spec.fragment.stores[0] in body should match"),
    ({"fragment": {"refreshInterval": "1s", "stores": ["file:///"], "compressionCodec": "GZIP_OFFLOAD_DECOMPRESSION"}},
     "GZIP_OFFLOAD_DECOMPRESSION cannot be used with a file:// first store"),
    ({"fragment": {}}, "spec.fragment.refreshInterval: Required value"),
    ({"labels": [{"name": "name", "value": "x"}]}, "label names 'name' and 'prefix' are reserved"),
    ({"labels": [{"name": "content-type", "value": "a/b"}, {"name": "content-type", "value": "c/d"}]},
     "take one value"),
    ({"labels": [{"name": "t1", "value": ""}, {"name": "t1", "value": "x"}]},
     "a label with an empty value must be the only value of its name"),
    ({"flags": "O_RW"}, 'Unsupported value: "O_RW"'),
    ({"deletionPolicy": "Orphan"}, 'Unsupported value: "Orphan"'),
]


@pytest.mark.parametrize("change,message", INVALID, ids=[m for _, m in INVALID])
def test_invalid_crs_are_rejected_by_the_api_server(crds, change, message):
    spec = {"name": "k8s/invalid/j", "replication": 1, "fragment": {"refreshInterval": "1s"}}
    spec.update(change)
    doc = {"apiVersion": GROUP + "/v1alpha1", "kind": "JournalSpec",
           "metadata": {"name": "invalid-" + uuid.uuid4().hex[:8], "namespace": "default"}, "spec": spec}
    r = crds.kubectl("apply", "-f", "-", input=json.dumps(doc), check=False)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr


def test_spec_the_schema_admits_but_gazette_rejects(env):
    """The CRD cannot express every rule (a path postfix template must
    parse): the operator validates with Gazette's rules, writes nothing and
    says why."""
    frag = {"stores": ["file:///"], "refreshInterval": "1s", "compressionCodec": "NONE"}
    env.apply("tpl", "k8s/invalid/tpl", fragment=dict(frag, pathPostfixTemplate="date={{.Spool"))
    wait_for(lambda: (env.condition("tpl", "Ready") or {}).get("reason") == "InvalidSpec", 20, "InvalidSpec")
    st = env.cr("tpl")["status"]
    assert "unclosed action" in st["lastError"], st
    assert "k8s/invalid/tpl" not in env.journals()
    assert "InvalidSpec" in env.events("tpl")
    # Fixing it syncs it.
    env.apply("tpl", "k8s/invalid/tpl", fragment=dict(frag, pathPostfixTemplate="date={{.Spool.Begin}}"))
    wait_for(lambda: env.ready("tpl"), 20, "Ready once fixed")
    assert "k8s/invalid/tpl" in env.journals()
    assert "lastError" not in env.cr("tpl")["status"]


def test_journal_name_is_immutable(env):
    env.apply("imm", "k8s/immutable/j")
    r = env.apply("imm", "k8s/immutable/other", check=False)
    assert r.returncode != 0 and "name is immutable" in r.stderr


def test_status_and_printer_columns(env):
    env.apply("st", "k8s/status/j")
    wait_for(lambda: env.ready("st"), 20, "Ready")
    env.gazctl("append", "-l", "name=k8s/status/j", input=b"x" * 1000)
    wait_for(lambda: env.cr("st")["status"].get("writeHead") == 1000, 20, "write head")
    st = env.cr("st")["status"]
    member = "%s/%s" % (env.broker.zone, env.broker.id)
    assert st["primary"] == member and st["replicas"] == [member]
    assert st["suspend"] == "NONE" and st["persistedThrough"] == 0 and "lastError" not in st
    assert st["lastSyncTime"].endswith("Z")
    table = env.k("get", "gj", "st").stdout.split("\n")
    assert table[0].split() == ["NAME", "JOURNAL", "REPLICATION", "PRIMARY", "WRITE", "HEAD", "PERSISTED", "READY", "AGE"]
    assert table[1].split()[:7] == ["st", "k8s/status/j", "1", member, "1000", "0", "True"]
    # Operator endpoints.
    assert env.op.http("/healthz") == (200, "ok")
    code, text = env.op.http("/metrics")
    assert code == 200 and 'gazette_operator_etcd_writes_total{reason="Created"}' in text
    assert "gazette_operator_reconciles_total" in text


def test_br25_watch_410_gone_relists_and_converges(crds, cluster):
    """BR-25: the operator is stopped while CRs change and the API server's
    etcd is compacted; its resumed watch gets 410 Gone; it relists and
    converges within 30 s, without crash-looping or re-watching the
    expired version."""
    ns = "br25-" + uuid.uuid4().hex[:8]
    crds.kubectl("create", "namespace", ns)
    brokers = [cluster.start(zone="zone-%s" % z) for z in "abc"]
    op = Operator(crds, cluster, ns, brokers[0].address, extra=["--kube.watch-timeout", "2s"]).start()
    e = Env(crds, cluster, ns, brokers[0], op)
    try:
        e.apply("j-0", "k8s/j-0")
        e.apply("j-1", "k8s/j-1", replication=3)
        e.apply("j-2", "k8s/j-2", deletionPolicy="Delete")
        for n in ("j-0", "j-1", "j-2"):
            wait_for(lambda: e.ready(n), 30, n + " Ready")
        assert e.journals()["k8s/j-1"][0]["replication"] == 3
        data = b"persist me\n" * 1000
        e.gazctl("append", "-l", "name=k8s/j-2", input=data)

        op.proc.send_signal(signal.SIGSTOP)
        e.apply("j-new", "k8s/j-new")
        e.apply("j-1", "k8s/j-1", replication=2)
        e.k("delete", "journalspec", "j-2", "--wait=false")
        time.sleep(5)  # past the 2 s watch timeout: the server ends the watch
        for i in range(3):  # revisions past the last JournalSpec event
            e.k("create", "configmap", "filler-%d" % i)
        status = json.loads(crds.etcdctl("endpoint", "status", "-w", "json"))
        rev = status[0]["Status"]["header"]["revision"]
        crds.etcdctl("compact", str(rev))
        op.proc.send_signal(signal.SIGCONT)

        def converged():
            js = e.journals()
            return ("k8s/j-new" in js and js["k8s/j-1"][0]["replication"] == 2 and "k8s/j-2" not in js
                    and e.cr("j-2") is None and e.ready("j-1") and e.ready("j-new"))
        wait_for(converged, 30, "convergence after the 410", interval=0.5)
        assert e.cr("j-1")["status"]["observedGeneration"] == 2
        log = op.logtext()
        assert "watch expired (410 Gone); relisting" in log, op.logtail()
        # j-2 was suspended and persisted before its spec went.
        files = os.listdir(os.path.join(cluster.file_root, "k8s/j-2"))
        assert [tuple(int(x, 16) for x in f.split("-")[:2]) for f in files] == [(0, len(data))]
        # No crash loop, no re-watching of the expired version.
        time.sleep(5)
        log = op.logtext()
        assert log.count("410 Gone") <= 2, op.logtail()
        assert op.proc.poll() is None
        code, text = op.http("/metrics")
        assert 'gazette_operator_relists_total{resource="journalspecs"}' in text
    finally:
        op.stop()


# Least privilege for an operator watching one namespace: what it reads and
# writes, nothing else (no secrets, no cluster scope).
RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: gazette-operator}
rules:
- apiGroups: [gazette-c.dev]
  resources: [journalspecs]
  verbs: [get, list, watch, patch, update]
- apiGroups: [gazette-c.dev]
  resources: [journalspecs/status]
  verbs: [get, patch, update]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: gazette-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: gazette-operator}
subjects:
- {kind: ServiceAccount, name: gazette-operator}
"""


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def test_in_cluster_config_rereads_the_token_file(crds, cluster, tmp_path):
    """In-cluster configuration (KUBERNETES_SERVICE_HOST/PORT and a
    service-account directory), a least-privilege Role, and a token file
    that changes under the running operator: a bad token stops it, a fresh
    one brings it back without a restart."""
    ns = "sa-" + uuid.uuid4().hex[:8]
    crds.kubectl("create", "namespace", ns)
    crds.kubectl("create", "serviceaccount", "gazette-operator", namespace=ns)
    crds.kubectl("apply", "-f", "-", input=RBAC, namespace=ns)
    sa = tmp_path / "sa"
    sa.mkdir()
    ca = crds.kubectl("config", "view", "--raw", "-o",
                      "jsonpath={.clusters[0].cluster.certificate-authority-data}").stdout
    import base64
    (sa / "ca.crt").write_bytes(base64.b64decode(ca))
    (sa / "namespace").write_text(ns + "\n")
    token = lambda: crds.kubectl("create", "token", "gazette-operator", "--duration", "10m", namespace=ns).stdout
    write_atomically(str(sa / "token"), token())
    server = crds.kubectl("config", "view", "-o", "jsonpath={.clusters[0].cluster.server}").stdout
    host, port = server.replace("https://", "").rsplit(":", 1)
    b = cluster.start()
    op = Operator(crds, cluster, ns, b.address, in_cluster=True,
                  extra=["--kube.service-account-dir", str(sa), "--kube.watch-timeout", "2s"],
                  env={"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}).start()
    e = Env(crds, cluster, ns, b, op)
    try:
        e.apply("one", "k8s/sa/one")
        wait_for(lambda: e.ready("one"), 20, "Ready with the service account")
        assert "Created" in e.events("one")  # events: create is allowed

        write_atomically(str(sa / "token"), "not-a-token\n")
        e.apply("two", "k8s/sa/two")
        time.sleep(4)
        assert "k8s/sa/two" not in e.journals()  # unauthorised: nothing written
        assert "401" in op.logtext() or "Unauthorized" in op.logtext()

        write_atomically(str(sa / "token"), token())
        wait_for(lambda: e.ready("two"), 30, "Ready after the token was replaced")
        assert "k8s/sa/two" in e.journals()
    finally:
        op.stop()


def test_leader_election_hands_over(crds, cluster):
    ns = "le-" + uuid.uuid4().hex[:8]
    crds.kubectl("create", "namespace", ns)
    b = cluster.start()
    extra = ["--leader-elect", "--lease.namespace", ns, "--lease.duration", "4s",
             "--lease.renew-deadline", "3s", "--lease.retry-period", "500ms"]
    first = Operator(crds, cluster, ns, b.address, extra=extra + ["--identity", "op-1"], name="op-1").start()
    second = Operator(crds, cluster, ns, b.address, extra=extra + ["--identity", "op-2"], name="op-2").start(wait=False)
    e = Env(crds, cluster, ns, b, first)
    try:
        lease = json.loads(crds.kubectl("get", "lease", "gazette-operator", "-o", "json", namespace=ns).stdout)
        assert lease["spec"]["holderIdentity"] == "op-1"
        time.sleep(2)
        assert second.http("/readyz")[0] == 503  # a follower is not ready
        e.apply("le", "k8s/le/one")
        wait_for(lambda: e.ready("le"), 20, "Ready")
        assert "journal spec event" not in second.logtext()  # only the leader acted

        first.stop()  # releases the Lease: no need to wait for it to expire
        e.op = second
        t0 = time.time()
        wait_for(lambda: second.http("/readyz")[0] == 200, 10, "the follower takes over")
        assert time.time() - t0 < 4
        lease = json.loads(crds.kubectl("get", "lease", "gazette-operator", "-o", "json", namespace=ns).stdout)
        assert lease["spec"]["holderIdentity"] == "op-2" and lease["spec"]["leaseTransitions"] >= 1
        e.apply("le2", "k8s/le/two")
        wait_for(lambda: e.ready("le2"), 20, "Ready under the new leader")
    finally:
        first.stop()
        second.stop()
