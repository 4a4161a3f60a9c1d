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

from conftest import CRDS, ETCDCTL_BIN, GAZCTL, GO_DIR, Operator, wait_for

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
    # A journal's first write is persisted at once (case BR-01); what
    # follows stays in the broker's spool until the fragment closes.
    seed = b"seed\n"
    env.gazctl("append", "-l", "name=k8s/delete/d", input=seed)
    wait_for(lambda: env.cr("d")["status"].get("persistedThrough") == len(seed), 20,
             "first write persisted")
    data = seed + b"".join(b"line %06d\n" % i for i in range(5000))
    env.gazctl("append", "-l", "name=k8s/delete/d", input=data[len(seed):])
    frag_dir = os.path.join(env.cluster.file_root, "k8s/delete/d")
    assert len(os.listdir(frag_dir)) == 1  # the seed's fragment only
    wait_for(lambda: env.cr("d")["status"].get("writeHead") == len(data), 20, "status writeHead")
    assert env.cr("d")["status"]["persistedThrough"] == len(seed)

    env.k("delete", "journalspec", "d", "--timeout=60s")
    assert env.cr("d") is None
    assert "k8s/delete/d" not in env.journals()
    assert env.etcd_item("k8s/delete/d") == ""
    # Every byte reached the store before the spec went: the seed's
    # fragment and the rest, end to end.
    files = sorted(os.listdir(frag_dir))
    spans = [tuple(int(x, 16) for x in f.split("-")[:2]) for f in files]
    assert spans == [(0, len(seed)), (len(seed), len(data))], files
    assert b"".join(open(os.path.join(frag_dir, f), "rb").read() for f in files) == data
    assert "Deleted" in env.events("d")


def test_delete_policy_through_brokers_verifying_tokens(crds, cluster):
    """Brokers started with --broker.auth-keys refuse unsigned calls. An
    operator without the keys cannot list or suspend the journal: the
    deletion stops with a DeleteFailed condition naming the missing flag,
    and the journal stays in etcd. The same operator with the keys
    ($BROKER_AUTH_KEYS, as the chart gives it) signs its calls: the
    journal is suspended, persisted and deleted. Keys that are not base64
    stop the operator at start."""
    import base64
    keys = "%s %s" % (base64.b64encode(b"operator test key").decode(), base64.b64encode(b"second").decode())
    ns = "t-" + uuid.uuid4().hex[:10]
    crds.kubectl("create", "namespace", ns)
    b = cluster.start(extra=["--broker.auth-keys", keys])
    op = Operator(crds, cluster, ns, b.address, name=ns + "-nokeys").start()
    e = Env(crds, cluster, ns, b, op)
    gazenv = dict(os.environ, HOME="/nonexistent", BROKER_AUTH_KEYS=keys)

    def gazctl(*args, input=None):
        r = subprocess.run([GAZCTL, "journals"] + list(args) + ["--broker.address", b.address],
                           input=input, capture_output=True, env=gazenv, timeout=60)
        assert r.returncode == 0, r.stderr.decode()
        return r.stdout
    try:
        e.apply("sec", "k8s/auth/sec", deletionPolicy="Delete")
        wait_for(lambda: e.ready("sec"), 20, "Ready (the spec goes to etcd, not through a broker)")
        data = b"".join(b"line %06d\n" % i for i in range(2000))
        wait_for(lambda: b"k8s/auth/sec" in gazctl("list", "-o", "yaml"), 20, "journal assigned")
        gazctl("append", "-l", "name=k8s/auth/sec", input=data)
        e.k("delete", "journalspec", "sec", "--wait=false")

        def refused():
            c = e.condition("sec", "Ready")
            return c if c and c["status"] == "False" and c["reason"] == "DeleteFailed" else None
        c = wait_for(refused, 30, "DeleteFailed")
        assert "Authorization" in c["message"] and "--broker.auth-keys" in c["message"], c
        item = "%s/items/k8s/auth/sec" % cluster.prefix
        assert e.cr("sec") is not None and cluster.etcd.ctl("get", item, "--keys-only").strip() == item
        assert "DeleteFailed" in e.events("sec")
        op.stop()

        op = Operator(crds, cluster, ns, b.address, env={"BROKER_AUTH_KEYS": keys},
                      name=ns + "-keys").start()
        wait_for(lambda: e.cr("sec") is None, 60, "CR deleted by the operator with keys")
        assert cluster.etcd.ctl("get", item, "--keys-only").strip() == ""
        frag_dir = os.path.join(cluster.file_root, "k8s/auth/sec")
        files = sorted(os.listdir(frag_dir))
        assert b"".join(open(os.path.join(frag_dir, f), "rb").read() for f in files) == data, files
        assert "Deleted" in e.events("sec")
        assert "broker_auth=keys" in op.logtext()
    finally:
        op.stop()
    bad = Operator(crds, cluster, ns, b.address, extra=["--broker.auth-keys", "not*base64"], name=ns + "-bad")
    r = subprocess.run(bad.args, capture_output=True, text=True, timeout=30,
                       env={k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "BROKER_"))})
    assert r.returncode == 1 and "--broker.auth-keys" in r.stdout + r.stderr, (r.stdout, r.stderr)


def test_drift_in_etcd_is_corrected(env):
    env.apply("drift", "k8s/drift/j", labels=[{"name": "app.gazette.dev/tag", "value": "orig"}])
    wait_for(lambda: env.ready("drift"), 20, "Ready")
    yaml_text = env.gazctl("list", "-o", "yaml", "-l", "name=k8s/drift/j").decode()
    changed = yaml_text.replace("replication: 1", "replication: 3").replace("orig", "changed")
    assert changed != yaml_text
    env.gazctl("apply", "--specs", "/dev/stdin", input=changed.encode())
    # The operator may undo it before a read here sees it (it did under
    # ThreadSanitizer's timing); the ChangedInEtcd event below shows it saw
    # the change.
    wait_for(lambda: env.journals()["k8s/drift/j"][0]["replication"] == 1, 20, "drift corrected")
    assert env.journals()["k8s/drift/j"][0]["labels"]["labels"][0]["value"] == "orig"
    assert "ChangedInEtcd" in env.events("drift")
    c = wait_for(lambda: env.condition("drift", "DriftCorrected"), 20, "condition DriftCorrected")
    assert c["status"] == "True" and c["reason"] == "ChangedInEtcd" and "k8s/drift/j" in c["message"], c
    # A deleted item comes back too.
    env.cluster.etcd.ctl("del", "%s/items/k8s/drift/j" % env.cluster.prefix)
    wait_for(lambda: "k8s/drift/j" in env.journals(), 20, "item recreated")
    wait_for(lambda: env.condition("drift", "DriftCorrected")["reason"] == "DeletedFromEtcd", 20,
             "DriftCorrected DeletedFromEtcd")
    # And an unchanged journal is not rewritten by resyncs.
    rev = env.journals()["k8s/drift/j"][1]
    time.sleep(5)
    assert env.journals()["k8s/drift/j"][1] == rev


def test_pause_annotation_leaves_etcd_alone_until_removed(env):
    """gazette-c.dev/paused=true: the operator writes nothing to etcd (a
    spec change waits, a hand edit in etcd is not corrected) and a
    deletion waits; status says so. Removing it resumes: the CR's spec is
    written over the hand edit, and the waiting deletion completes."""
    env.apply("pz", "k8s/pause/j", labels=[{"name": "app.gazette.dev/tag", "value": "orig"}])
    wait_for(lambda: env.ready("pz"), 20, "Ready")
    env.k("annotate", "journalspec", "pz", "gazette-c.dev/paused=true")
    c = wait_for(lambda: env.condition("pz", "Paused"), 20, "condition Paused")
    assert c["status"] == "True" and c["reason"] == "PausedByAnnotation", c
    assert env.cr("pz")["status"]["paused"] is True
    assert "Paused" in env.events("pz")
    rev = env.journals()["k8s/pause/j"][1]
    # A spec change is not written; a hand edit in etcd is not undone.
    env.apply("pz", "k8s/pause/j", replication=2, labels=[{"name": "app.gazette.dev/tag", "value": "orig"}])
    yaml_text = env.gazctl("list", "-o", "yaml", "-l", "name=k8s/pause/j").decode()
    env.gazctl("apply", "--specs", "/dev/stdin", input=yaml_text.replace("orig", "by-hand").encode())
    time.sleep(4)
    spec, rev2 = env.journals()["k8s/pause/j"]
    assert spec["replication"] == 1 and spec["labels"]["labels"][0]["value"] == "by-hand", spec
    assert rev2 > rev
    # A deletion waits, held by the finalizer.
    env.k("delete", "journalspec", "pz", "--wait=false")
    time.sleep(3)
    assert env.cr("pz") is not None and "deletion waits" in env.condition("pz", "Paused")["message"]
    # Resumed: the deletion completes (Retain: the journal stays), and a
    # resumed CR that is not deleted gets its spec written.
    env.k("annotate", "journalspec", "pz", "gazette-c.dev/paused-")
    wait_for(lambda: env.cr("pz") is None, 20, "deletion after resuming")
    assert "k8s/pause/j" in env.journals()
    env.apply("pz2", "k8s/pause/j2")
    wait_for(lambda: env.ready("pz2"), 20, "Ready")
    env.k("annotate", "journalspec", "pz2", "gazette-c.dev/paused=true")
    wait_for(lambda: env.condition("pz2", "Paused"), 20, "condition Paused")
    env.apply("pz2", "k8s/pause/j2", replication=2)
    time.sleep(2)
    assert env.journals()["k8s/pause/j2"][0]["replication"] == 1
    env.k("annotate", "journalspec", "pz2", "gazette-c.dev/paused-")
    wait_for(lambda: env.journals()["k8s/pause/j2"][0]["replication"] == 2, 20, "spec written on resume")
    wait_for(lambda: env.condition("pz2", "Paused")["status"] == "False", 20, "Paused False")
    assert env.condition("pz2", "Paused")["reason"] == "Resumed"
    assert "paused" not in env.cr("pz2")["status"]
    assert "Resumed" in env.events("pz2")


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
    # The journal's first write reaches the store at once (case BR-01).
    wait_for(lambda: env.cr("st")["status"].get("persistedThrough") == 1000, 20, "persisted")
    st = env.cr("st")["status"]
    member = "%s/%s" % (env.broker.zone, env.broker.id)
    assert st["primary"] == member and st["replicas"] == [member]
    assert st["suspend"] == "NONE" and "lastError" not in st
    assert st["lastSyncTime"].endswith("Z")
    table = env.k("get", "gj", "st").stdout.split("\n")
    assert table[0].split() == ["NAME", "JOURNAL", "REPLICATION", "PRIMARY", "WRITE", "HEAD", "PERSISTED", "READY", "AGE"]
    assert table[1].split()[:7] == ["st", "k8s/status/j", "1", member, "1000", "1000", "True"]
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
  resources: [journalspecs, shardspecs]
  verbs: [get, list, watch, patch, update]
- apiGroups: [gazette-c.dev]
  resources: [journalspecs/status, shardspecs/status]
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
        assert "(credentials: bearer token from file %s/token" % sa in op.logtext(), op.logtail()

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


# ---- ShardSpecs ------------------------------------------------------------------
#
# A ShardSpec CR becomes <consumer prefix>/items/<shard id> in etcd, a
# consumer.ShardSpec protobuf. Gazette's `gazctl shards list` reads shards
# through a running consumer application (the consumer.Shard List RPC),
# which this suite does not have; instead each value is decoded with
# Gazette's own consumer/protocol/protocol.proto (from the Go module cache)
# by protoc, independently of our C encoder.

GOMOD = os.path.join(os.path.dirname(GO_DIR), "gomod")


def gazette_proto_args():
    import glob
    core = glob.glob(os.path.join(GOMOD, "go.gazette.dev/core@v0.103.0"))
    gogo = sorted(glob.glob(os.path.join(GOMOD, "github.com/gogo/protobuf@*")))
    assert core and gogo, "Gazette's module or gogo/protobuf missing from %s" % GOMOD
    return ["-I" + core[0], "-I" + gogo[-1], "-I/usr/include", "consumer/protocol/protocol.proto"]


def gazette_shard_text(raw):
    """Gazette's consumer.ShardSpec decoding of `raw`, as protobuf text."""
    r = subprocess.run(["protoc", "--decode=consumer.ShardSpec"] + gazette_proto_args(), input=raw,
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr.decode()
    text = r.stdout.decode()
    # Fields Gazette's schema does not know would print as bare numbers.
    assert not any(l.strip()[:1].isdigit() for l in text.splitlines()), text
    return text


def gazette_bytes(message, text):
    """A consumer `message` encoded by protoc from Gazette's schema."""
    r = subprocess.run(["protoc", "--encode=" + message] + gazette_proto_args(), input=text.encode(),
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def gazette_shard_bytes(text):
    return gazette_bytes("consumer.ShardSpec", text)


class ShardEnv(Env):
    def __init__(self, kube, cluster, ns, op, prefix):
        super().__init__(kube, cluster, ns, None, op)
        self.prefix = prefix

    def apply_shard(self, name, shard, check=True, **spec):
        spec.setdefault("maxTxnDuration", "1s")
        spec["name"] = shard
        doc = {"apiVersion": GROUP + "/v1alpha1", "kind": "ShardSpec", "metadata": {"name": name}, "spec": spec}
        return self.k("apply", "-f", "-", input=json.dumps(doc), check=check)

    def cr(self, name):
        r = self.k("get", "shardspec", name, "-o", "json", check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def item(self, shard, prefix=None):
        """(raw value, mod revision) of the shard's etcd item, or None."""
        import base64
        out = json.loads(self.cluster.etcd.ctl("get", "-w", "json", "%s/items/%s" % (prefix or self.prefix, shard)))
        kvs = out.get("kvs") or []
        return (base64.b64decode(kvs[0]["value"]), int(kvs[0]["mod_revision"])) if kvs else None

    def put_item(self, shard, raw):
        env = dict(os.environ, ETCDCTL_API="3")
        subprocess.run([ETCDCTL_BIN, "--endpoints", self.cluster.etcd.endpoint, "put",
                        "%s/items/%s" % (self.prefix, shard)], input=raw, env=env, check=True, capture_output=True)

    def text(self, shard):
        it = self.item(shard)
        return gazette_shard_text(it[0]) if it else None


@pytest.fixture
def shards(crds, cluster):
    """A namespace and an operator (no broker) whose default consumer
    prefix is this test's."""
    ns = "s-" + uuid.uuid4().hex[:10]
    crds.kubectl("create", "namespace", ns)
    prefix = cluster.prefix + "/consumer"
    op = Operator(crds, cluster, ns, "", extra=["--consumer.etcd-prefix", prefix]).start()
    yield ShardEnv(crds, cluster, ns, op, prefix)
    op.stop()


def test_shard_apply_update_and_delete_with_retain(shards):
    e = shards
    e.apply_shard("s", "shards/part-000", hotStandbys=1, minTxnDuration="10ms",
                  sources=[{"journal": "k8s/src/b", "minOffset": 1024}, {"journal": "k8s/src/a"}],
                  recoveryLogPrefix="recovery/app", hintPrefix="/hints/app", hintBackups=2,
                  labels=[{"name": "app.gazette.dev/tag", "value": "x"}], ringBufferSize=4096)
    wait_for(lambda: e.ready("s"), 20, "Ready")
    text = e.text("shards/part-000")
    # Gazette's decoding: every field, sources sorted by journal as Gazette requires.
    assert 'id: "shards/part-000"' in text
    assert text.index('journal: "k8s/src/a"') < text.index('journal: "k8s/src/b"')
    assert "min_offset: 1024" in text
    assert 'recovery_log_prefix: "recovery/app"' in text and 'hint_prefix: "/hints/app"' in text
    assert "hint_backups: 2" in text and "hot_standbys: 1" in text and "ring_buffer_size: 4096" in text
    assert "max_txn_duration {\n  seconds: 1\n}" in text and "min_txn_duration {\n  nanos: 10000000\n}" in text
    assert 'labels {\n    name: "app.gazette.dev/tag"\n    value: "x"\n  }' in text
    st = e.cr("s")["status"]
    raw, rev = e.item("shards/part-000")
    assert st["shard"] == "shards/part-000" and st["etcdKey"] == e.prefix + "/items/shards/part-000"
    assert st["etcdModRevision"] == rev and "adopted" not in st and st["observedGeneration"] == 1
    assert "gazette-c.dev/shard" in e.cr("s")["metadata"]["finalizers"]
    assert "Created" in e.events("s")
    # The consumer allocator's assignments (same layout as the brokers') give the
    # route; their ReplicaStatus values (Gazette's encoding) reduce to the highest code.
    def assign(member, slot, status_text):
        key = "%s/assign/shards/part-000#%s#%d" % (e.prefix, member, slot)
        raw = gazette_bytes("consumer.ReplicaStatus", status_text)
        subprocess.run([ETCDCTL_BIN, "--endpoints", e.cluster.etcd.endpoint, "put", key], input=raw,
                       env=dict(os.environ, ETCDCTL_API="3"), check=True, capture_output=True)
    assign("zone-b#consumer-2", 1, "code: STANDBY")
    assign("zone-a#consumer-1", 0, "code: PRIMARY")
    wait_for(lambda: e.cr("s")["status"].get("primary") == "zone-a/consumer-1", 20, "status primary")
    st = e.cr("s")["status"]
    assert st["replicas"] == ["zone-a/consumer-1", "zone-b/consumer-2"] and st["replicaStatus"] == "PRIMARY"
    assign("zone-b#consumer-2", 1, 'code: FAILED errors: "store: disk full"')
    wait_for(lambda: e.cr("s")["status"].get("replicaStatus") == "FAILED", 20, "FAILED reduced")
    assert e.cr("s")["status"]["replicaErrors"] == ["store: disk full"]
    table = e.k("get", "gs", "s").stdout.split("\n")
    assert table[0].split()[:4] == ["NAME", "SHARD", "HOT", "STANDBYS"] and "FAILED" in table[1].split()

    e.apply_shard("s", "shards/part-000", hotStandbys=2, disable=True)
    wait_for(lambda: "hot_standbys: 2" in e.text("shards/part-000"), 20, "hot standbys 2")
    text = e.text("shards/part-000")
    assert "disable: true" in text and "sources" not in text and "recovery_log_prefix" not in text
    wait_for(lambda: e.ready("s") and e.cr("s")["status"]["observedGeneration"] == 2, 20, "generation 2")
    assert "Updated" in e.events("s")
    # A resync of a settled shard writes nothing.
    rev = e.item("shards/part-000")[1]
    time.sleep(5)
    assert e.item("shards/part-000")[1] == rev

    e.k("delete", "shardspec", "s", "--timeout=30s")
    assert e.cr("s") is None
    assert "hot_standbys: 2" in e.text("shards/part-000")
    assert "Retained" in e.events("s")


def test_shard_delete_policy_removes_the_spec(shards):
    e = shards
    other = e.prefix.rsplit("/", 1)[0] + "/other-app"
    e.apply_shard("d", "shards/del", deletionPolicy="Delete", etcdPrefix=other)
    wait_for(lambda: e.ready("d"), 20, "Ready")
    assert e.item("shards/del", prefix=other) and e.item("shards/del") is None  # spec.etcdPrefix wins
    # A hint key next to it is the consumer's; deleting the spec leaves it.
    e.cluster.etcd.ctl("put", other + "/hints/shards/del.primary", "{}")
    e.k("delete", "shardspec", "d", "--timeout=30s")
    assert e.cr("d") is None
    assert e.item("shards/del", prefix=other) is None
    assert e.cluster.etcd.ctl("get", "--print-value-only", other + "/hints/shards/del.primary").strip() == "{}"
    assert "Deleted" in e.events("d")


def test_shard_drift_garbage_and_deletion_in_etcd_are_corrected(shards):
    e = shards
    e.apply_shard("dr", "shards/drift", hotStandbys=1)
    wait_for(lambda: e.ready("dr"), 20, "Ready")

    def drift_condition(reason):
        c = e.condition("dr", "DriftCorrected")
        return c if c and c["status"] == "True" and c["reason"] == reason else None

    # Changed by someone else (a valid spec, encoded from Gazette's schema).
    e.put_item("shards/drift", gazette_shard_bytes('id: "shards/drift"\nmax_txn_duration { seconds: 5 }\n'
                                                   'hot_standbys: 3\n'))
    assert "hot_standbys: 3" in e.text("shards/drift")
    wait_for(lambda: "hot_standbys: 1" in e.text("shards/drift"), 20, "drift corrected")
    c = wait_for(lambda: drift_condition("ChangedInEtcd"), 20, "DriftCorrected ChangedInEtcd")
    assert e.prefix + "/items/shards/drift" in c["message"]

    # Garbage: a consumer would skip it; the operator says so and rewrites it.
    e.put_item("shards/drift", b"not a shard spec")
    wait_for(lambda: e.item("shards/drift")[0] != b"not a shard spec", 20, "garbage replaced")
    assert "hot_standbys: 1" in e.text("shards/drift")
    c = wait_for(lambda: drift_condition("UnreadableInEtcd"), 20, "DriftCorrected UnreadableInEtcd")
    assert "value is not a ShardSpec" in c["message"], c
    assert e.ready("dr")
    assert "UnreadableInEtcd" in e.events("dr")
    # A valid spec of another shard under this key is unreadable too (Gazette's decoder refuses it).
    e.put_item("shards/drift", gazette_shard_bytes('id: "shards/other"\nmax_txn_duration { seconds: 1 }\n'))
    c = wait_for(lambda: (drift_condition("UnreadableInEtcd") or {}).get("message", "").find("names shard") >= 0
                 and drift_condition("UnreadableInEtcd"), 20, "names another shard")
    assert 'value names shard "shards/other"' in c["message"]
    assert 'id: "shards/drift"' in e.text("shards/drift")

    # Deleted behind its back.
    e.cluster.etcd.ctl("del", e.prefix + "/items/shards/drift")
    wait_for(lambda: e.item("shards/drift") is not None, 20, "item recreated")
    wait_for(lambda: drift_condition("DeletedFromEtcd"), 20, "DriftCorrected DeletedFromEtcd")
    assert {"ChangedInEtcd", "DeletedFromEtcd"} <= set(e.events("dr"))


def test_shard_adoption_of_an_existing_spec(shards):
    e = shards
    e.put_item("shards/adopt", gazette_shard_bytes('id: "shards/adopt"\nmax_txn_duration { seconds: 2 }\n'
                                                   'hot_standbys: 2\n'))
    before = e.item("shards/adopt")[1]
    e.apply_shard("ad", "shards/adopt", maxTxnDuration="2s")
    wait_for(lambda: e.ready("ad"), 20, "Ready")
    st = e.cr("ad")["status"]
    raw, rev = e.item("shards/adopt")
    assert st["adopted"] is True and rev > before and st["etcdModRevision"] == rev
    assert "hot_standbys" not in gazette_shard_text(raw)
    assert "Adopted" in e.events("ad")
    # An identical spec is adopted without a write.
    e.k("delete", "shardspec", "ad", "--timeout=30s")
    e.apply_shard("ad2", "shards/adopt", maxTxnDuration="2s")
    wait_for(lambda: e.ready("ad2"), 20, "Ready")
    assert e.cr("ad2")["status"]["adopted"] is True
    assert e.item("shards/adopt")[1] == rev


def test_two_shardspecs_naming_one_shard_conflict(shards):
    e = shards
    e.apply_shard("first", "shards/conflict", hotStandbys=1)
    wait_for(lambda: e.ready("first"), 20, "first Ready")
    e.apply_shard("second", "shards/conflict", hotStandbys=2, deletionPolicy="Delete")
    wait_for(lambda: (e.condition("second", "Conflict") or {}).get("status") == "True", 20,
             "Conflict")
    ready = e.condition("second", "Ready")
    assert ready["status"] == "False" and ready["reason"] == "Conflict" and e.ns + "/first" in ready["message"]
    assert "Conflict" in e.events("second")
    time.sleep(3)
    assert "hot_standbys: 1" in e.text("shards/conflict")
    # The same id in another consumer's keyspace is another shard: no conflict.
    e.apply_shard("elsewhere", "shards/conflict", etcdPrefix=e.prefix + "-b")
    wait_for(lambda: e.ready("elsewhere"), 20, "elsewhere Ready")
    # The owner goes (Retain): the other takes over.
    e.k("delete", "shardspec", "first", "--timeout=30s")
    wait_for(lambda: e.ready("second"), 20, "second Ready")
    assert "hot_standbys: 2" in e.text("shards/conflict")
    assert e.cr("second")["status"]["adopted"] is True


def test_shard_spec_the_schema_admits_but_gazette_rejects(shards):
    e = shards
    # "ab;meta" passes the schema's length, but its name part is 2 bytes.
    e.apply_shard("bad", "shards/bad", sources=[{"journal": "ab;meta"}])
    wait_for(lambda: (e.condition("bad", "Ready") or {}).get("reason") == "InvalidSpec", 20,
             "InvalidSpec")
    assert e.cr("bad")["status"]["lastError"].startswith("Sources[0].Journal: invalid length (2;")
    assert e.item("shards/bad") is None
    assert "InvalidSpec" in e.events("bad")
    e.apply_shard("bad", "shards/bad", sources=[{"journal": "abcd;meta"}])
    wait_for(lambda: e.ready("bad"), 20, "Ready once fixed")
    assert 'journal: "abcd;meta"' in e.text("shards/bad")
    # The brokers' own keyspace is not a consumer's.
    e.apply_shard("brokers", "shards/in-brokers", etcdPrefix=e.cluster.prefix)
    wait_for(lambda: (e.condition("brokers", "Ready") or {}).get("reason") == "InvalidSpec", 20, "InvalidSpec")
    assert "is the brokers' --etcd.prefix" in e.cr("brokers")["status"]["lastError"]
    assert e.item("shards/in-brokers", prefix=e.cluster.prefix) is None


def test_shard_without_a_consumer_prefix(crds, cluster):
    ns = "s-" + uuid.uuid4().hex[:10]
    crds.kubectl("create", "namespace", ns)
    op = Operator(crds, cluster, ns, "").start()
    e = ShardEnv(crds, cluster, ns, op, cluster.prefix + "/consumer")
    try:
        e.apply_shard("np", "shards/no-prefix")
        wait_for(lambda: (e.condition("np", "Ready") or {}).get("reason") == "NoConsumerPrefix",
                 20, "NoConsumerPrefix")
        assert "--consumer.etcd-prefix" in e.cr("np")["status"]["lastError"]
        e.k("delete", "shardspec", "np", "--timeout=30s")  # nothing to clean up: it goes at once
    finally:
        op.stop()


SHARD_INVALID = [
    ({"name": "abc"}, "should be at least 4 chars long"),
    ({"name": "a b c d"}, "spec.name in body should match"),
    ({"maxTxnDuration": "0s"}, "maxTxnDuration must be positive"),
    ({"maxTxnDuration": "1d"}, "spec.maxTxnDuration in body should match"),
    ({"minTxnDuration": "-1s"}, "spec.minTxnDuration in body should match"),
    ({"hotStandbys": -1}, "should be greater than or equal to 0"),
    ({"hotStandbys": 4294967296}, "should be less than or equal to 4294967295"),
    ({"hintBackups": -1}, "should be greater than or equal to 0"),
    ({"recoveryLogPrefix": "recovery/logs"}, "hintPrefix is required with recoveryLogPrefix"),
    ({"hintPrefix": "/hints"}, "hintPrefix is required with recoveryLogPrefix"),
    ({"recoveryLogPrefix": "/abs", "hintPrefix": "/hints"}, "spec.recoveryLogPrefix in body should match"),
    ({"recoveryLogPrefix": "logs", "hintPrefix": "hints"}, "spec.hintPrefix in body should match"),
    ({"recoveryLogPrefix": "logs", "hintPrefix": "/a/../b"}, "hintPrefix must be a clean path"),
    ({"name": "a//b", "recoveryLogPrefix": "logs", "hintPrefix": "/h"}, "recovery log recoveryLogPrefix/name"),
    ({"sources": [{"journal": "a/journal"}, {"journal": "a/journal"}]}, "Duplicate value"),
    ({"sources": [{"journal": "/abs/journal"}]}, "spec.sources[0].journal in body should match"),
    ({"sources": [{"journal": "a/./journal"}]}, "source journal must be a clean path"),
    ({"sources": [{"journal": "a/journal", "minOffset": -1}]}, "should be greater than or equal to 0"),
    ({"labels": [{"name": "id", "value": "x"}]}, "label name 'id' is reserved"),
    ({"labels": [{"name": "content-type", "value": "a/b"}, {"name": "content-type", "value": "c/d"}]},
     "take one value"),
    ({"labels": [{"name": "t1", "value": ""}, {"name": "t1", "value": "x"}]},
     "a label with an empty value must be the only value of its name"),
    ({"etcdPrefix": "relative/prefix"}, "spec.etcdPrefix in body should match"),
    ({"etcdPrefix": "/a/../b"}, "etcdPrefix must be a clean path"),
    ({"deletionPolicy": "Orphan"}, 'Unsupported value: "Orphan"'),
]


@pytest.mark.parametrize("change,message", SHARD_INVALID, ids=[m + " " + json.dumps(c) for c, m in SHARD_INVALID])
def test_invalid_shardspecs_are_rejected_by_the_api_server(crds, change, message):
    spec = {"name": "shards/invalid", "maxTxnDuration": "1s"}
    spec.update(change)
    doc = {"apiVersion": GROUP + "/v1alpha1", "kind": "ShardSpec",
           "metadata": {"name": "invalid-" + uuid.uuid4().hex[:8], "namespace": "default"}, "spec": spec}
    r = crds.kubectl("apply", "-f", "-", input=json.dumps(doc), check=False)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr


def test_shard_name_and_prefix_are_immutable(shards):
    e = shards
    e.apply_shard("imm", "shards/immutable")
    r = e.apply_shard("imm", "shards/other", check=False)
    assert r.returncode != 0 and "name is immutable" in r.stderr
    r = e.apply_shard("imm", "shards/immutable", check=False, etcdPrefix="/somewhere/else")
    assert r.returncode != 0 and "etcdPrefix is immutable" in r.stderr


# ---- Bucket lifecycle rules from retention ---------------------------------------------

LC_OWN = "gazette-operator/"


@pytest.fixture
def lc(crds, cluster, s3):
    """A namespace and an operator (no broker) with the S3 server's
    credentials; yields (env, s3)."""
    ns = "lc-" + uuid.uuid4().hex[:10]
    crds.kubectl("create", "namespace", ns)
    op = Operator(crds, cluster, ns, "", env=s3.env()).start()
    yield Env(crds, cluster, ns, None, op), s3
    op.stop()


def rules(s3, bucket):
    """The bucket's lifecycle rules as the S3 server returns them, by ID."""
    from botocore.exceptions import ClientError
    try:
        got = s3.client().get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    except ClientError as e:
        assert e.response["Error"]["Code"] == "NoSuchLifecycleConfiguration", e
        return {}
    return {r["ID"]: r for r in got}


def lc_apply(e, name, journal, stores, retention=None, labels=None, **kw):
    frag = {"stores": stores, "refreshInterval": "1s", "compressionCodec": "NONE"}
    if retention:
        frag["retention"] = retention
    return e.apply(name, journal, fragment=frag, labels=labels or [], **kw)


def lc_condition(e, name):
    return e.condition(name, "Lifecycle") or {}


FOREIGN = {"ID": "someone-else", "Status": "Enabled", "Filter": {"Prefix": "other/"},
           "Expiration": {"Days": 3}}


def test_lifecycle_rules_follow_retention(lc):
    e, s3 = lc
    b1, b2 = s3.new_bucket(), s3.new_bucket()
    s3.client().put_bucket_lifecycle_configuration(Bucket=b1, LifecycleConfiguration={"Rules": [FOREIGN]})
    stores = [s3.url(b1, "frag/"), s3.url(b2), "file:///"]
    lc_apply(e, "a", "k8s/lc/a", stores, retention="36h")
    wait_for(lambda: lc_condition(e, "a").get("reason") == "Applied", 20, "Lifecycle Applied")
    got1, got2 = rules(s3, b1), rules(s3, b2)
    id1, id2 = LC_OWN + "frag/k8s/lc/a/", LC_OWN + "k8s/lc/a/"
    assert set(got1) == {"someone-else", id1} and set(got2) == {id2}
    assert got1["someone-else"] == FOREIGN  # untouched
    # 36h rounds up to 2 whole days; the filter is the store prefix + journal + '/'.
    assert got1[id1] == {"ID": id1, "Status": "Enabled", "Filter": {"Prefix": "frag/k8s/lc/a/"},
                         "Expiration": {"Days": 2}}
    assert got2[id2]["Filter"] == {"Prefix": "k8s/lc/a/"} and got2[id2]["Expiration"] == {"Days": 2}
    st = e.cr("a")["status"]["lifecycle"]
    assert sorted((r["bucket"], r["id"], r["prefix"], r["expirationDays"]) for r in st["rules"]) == sorted(
        [(b1, id1, "frag/k8s/lc/a/", 2), (b2, id2, "k8s/lc/a/", 2)])
    assert "excluded" not in st and e.ready("a")

    # A second journal in the same bucket adds its own rule beside.
    lc_apply(e, "b", "k8s/lc/b", [s3.url(b1, "frag/")], retention="1ns")
    wait_for(lambda: LC_OWN + "frag/k8s/lc/b/" in rules(s3, b1), 20, "second journal's rule")
    assert rules(s3, b1)[LC_OWN + "frag/k8s/lc/b/"]["Expiration"] == {"Days": 1}

    # Retention changes follow; drift in the bucket is undone at the next resync.
    lc_apply(e, "a", "k8s/lc/a", stores, retention="240h")
    wait_for(lambda: rules(s3, b1)[id1]["Expiration"] == {"Days": 10}, 20, "10 days")
    wait_for(lambda: rules(s3, b2)[id2]["Expiration"] == {"Days": 10}, 20, "10 days in the second bucket")
    edited = [FOREIGN, dict(rules(s3, b1)[id1], Expiration={"Days": 99}), rules(s3, b1)[LC_OWN + "frag/k8s/lc/b/"]]
    s3.client().put_bucket_lifecycle_configuration(Bucket=b1, LifecycleConfiguration={"Rules": edited})
    wait_for(lambda: rules(s3, b1)[id1]["Expiration"] == {"Days": 10}, 20, "drift undone")

    # No retention: its rules go, everyone else's stay; an emptied bucket has no configuration.
    lc_apply(e, "a", "k8s/lc/a", stores)
    wait_for(lambda: lc_condition(e, "a").get("reason") == "NoRetention", 20, "NoRetention")
    assert set(rules(s3, b1)) == {"someone-else", LC_OWN + "frag/k8s/lc/b/"}
    assert rules(s3, b2) == {}
    assert e.cr("a")["status"]["lifecycle"] == {"rules": [], "excluded": "NoRetention"}

    # Deleting the resource (Retain) removes its rules too; the journal stays.
    e.k("delete", "journalspec", "b", "--timeout=30s")
    assert set(rules(s3, b1)) == {"someone-else"}
    assert e.cluster.etcd.ctl("get", "--keys-only", "%s/items/k8s/lc/b" % e.cluster.prefix).strip()


def test_lifecycle_never_for_recovery_logs(lc):
    e, s3 = lc
    b = s3.new_bucket()
    lc_apply(e, "rl", "k8s/lc/recovery/shard-0", [s3.url(b)], retention="24h")
    wait_for(lambda: lc_condition(e, "rl").get("reason") == "Applied", 20, "Applied")
    assert list(rules(s3, b)) == [LC_OWN + "k8s/lc/recovery/shard-0/"]
    # Labelled as a recovery log: its rule goes and none comes back.
    lc_apply(e, "rl", "k8s/lc/recovery/shard-0", [s3.url(b)], retention="24h",
             labels=[{"name": "content-type", "value": "application/x-gazette-recoverylog"}])
    wait_for(lambda: lc_condition(e, "rl").get("reason") == "RecoveryLog", 20, "RecoveryLog")
    assert rules(s3, b) == {}
    assert "never age-expired" in lc_condition(e, "rl")["message"]
    assert e.cr("rl")["status"]["lifecycle"]["excluded"] == "RecoveryLog"


def test_lifecycle_rule_limit(lc):
    e, s3 = lc
    b = s3.new_bucket()
    full = [{"ID": "r%04d" % i, "Status": "Enabled", "Filter": {"Prefix": "p%04d/" % i},
             "Expiration": {"Days": 1}} for i in range(1000)]
    s3.client().put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": full})
    assert len(rules(s3, b)) == 1000
    lc_apply(e, "lim", "k8s/lc/limit", [s3.url(b)], retention="24h")
    c = wait_for(lambda: lc_condition(e, "lim").get("status") == "False" and lc_condition(e, "lim"), 20,
                 "Lifecycle False")
    assert c["reason"] == "RuleLimit"
    assert "would hold 1001 lifecycle rules, more than S3's 1000 (1000 of other owners" in c["message"], c
    assert len(rules(s3, b)) == 1000 and LC_OWN + "k8s/lc/limit/" not in rules(s3, b)
    assert e.ready("lim")  # the journal itself is synced
    assert "LifecycleFailed" in e.events("lim")
    # Room made: it goes in.
    s3.client().put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": full[:999]})
    wait_for(lambda: LC_OWN + "k8s/lc/limit/" in rules(s3, b), 30, "rule written once there is room")
    wait_for(lambda: lc_condition(e, "lim").get("reason") == "Applied", 20, "Applied")


def test_lifecycle_s3_errors_are_reported(crds, cluster, s3):
    ns = "lc-" + uuid.uuid4().hex[:10]
    crds.kubectl("create", "namespace", ns)
    bad = dict(s3.env(), AWS_SECRET_ACCESS_KEY="wrong-secret")
    op = Operator(crds, cluster, ns, "", env=bad).start()
    e = Env(crds, cluster, ns, None, op)
    try:
        b = s3.new_bucket()
        lc_apply(e, "err", "k8s/lc/err", [s3.url(b)], retention="24h")
        c = wait_for(lambda: lc_condition(e, "err").get("status") == "False" and lc_condition(e, "err"), 20,
                     "Lifecycle False")
        assert c["reason"] == "S3Error" and b in c["message"] and "403" in c["message"], c
        assert rules(s3, b) == {}
        # The resource can still be deleted once its rules are known to be absent? It has none: yes.
        e.k("delete", "journalspec", "err", "--timeout=30s")
    finally:
        op.stop()


def test_lifecycle_long_journal_name_gets_a_hashed_id(lc):
    import hashlib
    e, s3 = lc
    b = s3.new_bucket()
    journal = "k8s/lc/" + "/".join(["segment-%02d" % i for i in range(25)])  # 281 bytes
    lc_apply(e, "long", journal, [s3.url(b, "frag/")], retention="1h")
    wait_for(lambda: lc_condition(e, "long").get("reason") == "Applied", 20, "Applied")
    prefix = "frag/" + journal + "/"
    rid = LC_OWN + "sha256-" + hashlib.sha256(prefix.encode()).hexdigest()
    got = rules(s3, b)
    assert list(got) == [rid] and len(rid) <= 255
    assert got[rid]["Filter"] == {"Prefix": prefix} and got[rid]["Expiration"] == {"Days": 1}


def test_lifecycle_can_be_turned_off(crds, cluster, s3):
    ns = "lc-" + uuid.uuid4().hex[:10]
    crds.kubectl("create", "namespace", ns)
    op = Operator(crds, cluster, ns, "", env=s3.env(), extra=["--bucket-lifecycle=false"]).start()
    e = Env(crds, cluster, ns, None, op)
    try:
        b = s3.new_bucket()
        lc_apply(e, "off", "k8s/lc/off", [s3.url(b)], retention="24h")
        wait_for(lambda: e.ready("off"), 20, "Ready")
        time.sleep(3)  # a resync later
        assert rules(s3, b) == {}
        assert e.condition("off", "Lifecycle") is None and "lifecycle" not in e.cr("off")["status"]
    finally:
        op.stop()


def appends_in_flight_then_delete(env, journal, **spec):
    """Deletes a JournalSpec with deletionPolicy Delete while four writers
    keep appending; returns the acknowledged appends as (begin, end,
    record) once the spec is gone."""
    import threading
    import grpc
    import protocol_pb2 as pb
    from gazpb import Client

    env.apply("inflight", journal, deletionPolicy="Delete", **spec)
    wait_for(lambda: env.ready("inflight"), 20, "Ready")
    c = Client(env.broker.address)
    acked, lock, stop = [], threading.Lock(), threading.Event()

    def writer(w):
        i = 0
        while not stop.is_set():
            rec = b"<w%d-%06d>" % (w, i)
            i += 1
            try:
                r = c.append(journal, rec, timeout=10, retry=False)
            except grpc.RpcError:
                continue  # not acknowledged
            if r.status == pb.OK:
                with lock:
                    acked.append((r.commit.begin, r.commit.end, rec))
            elif r.status in (pb.JOURNAL_NOT_FOUND, pb.SUSPENDED, pb.NOT_ALLOWED):
                time.sleep(0.01)
    threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(4)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(acked) >= 100, 30, "appends flowing")
        r = env.k("delete", "journalspec", "inflight", "--timeout=45s", check=False)
        assert r.returncode == 0 and env.cr("inflight") is None, \
            "delete did not finish: %s\n%s" % (env.cr("inflight")["status"], env.op.logtail(30))
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert journal not in env.journals()
    assert acked, "no append was acknowledged"
    return acked


def check_acked(acked, content):
    """Every acknowledged record at its committed range in `content`
    (fragment begin offset -> bytes, reassembled from the store)."""
    for begin, end, rec in acked:
        starts = [b for b in content if b <= begin]
        assert starts, "offset %d is not in the store" % begin
        base = max(starts)
        assert content[base][begin - base:end - base] == rec, "record at %d lost" % begin


def test_delete_policy_with_appends_in_flight_loses_no_acknowledged_byte(env):
    """Deleting a JournalSpec with deletionPolicy Delete while writers keep
    appending: every acknowledged append is in the store, at exactly its
    committed range, once the spec is gone."""
    journal = "k8s/inflight/d"
    acked = appends_in_flight_then_delete(env, journal)
    # Reassemble the store's fragments by offset and check every ack.
    frag_dir = os.path.join(env.cluster.file_root, journal)
    content = {}
    for f in os.listdir(frag_dir):
        begin, end = (int(x, 16) for x in f.split("-")[:2])
        body = open(os.path.join(frag_dir, f), "rb").read()
        assert len(body) == end - begin, f
        content[begin] = body
    check_acked(acked, content)


@pytest.fixture
def s3env(crds, cluster, s3):
    """As env, with the broker and operator holding the S3 server's keys."""
    ns = "t3-" + uuid.uuid4().hex[:10]
    crds.kubectl("create", "namespace", ns)
    b = cluster.start(env=s3.env())
    op = Operator(crds, cluster, ns, b.address, env=s3.env()).start()
    yield Env(crds, cluster, ns, b, op), s3
    op.stop()


def test_delete_policy_with_appends_in_flight_loses_no_acknowledged_byte_s3(s3env):
    """The same against a bucket: the acknowledged bytes are read back
    from the S3 server (boto3) after the spec is deleted."""
    env, s3 = s3env
    journal, bucket = "k8s/inflight/s3", s3.new_bucket()
    acked = appends_in_flight_then_delete(env, journal, fragment={
        "stores": [s3.url(bucket, "frag/")], "refreshInterval": "1s", "compressionCodec": "NONE"})
    c, content = s3.client(), {}
    keys = s3.keys(bucket, "frag/" + journal + "/")
    assert keys, "no fragment in the bucket"
    for key in keys:
        begin, end = (int(x, 16) for x in key.rsplit("/", 1)[1].split("-")[:2])
        body = c.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert len(body) == end - begin, key
        content[begin] = body
    check_acked(acked, content)


def test_shard_status_of_our_consumers(shards, postgres):
    """A ShardSpec CR served by gazette-c consumers (bin/chain-consumer):
    its status shows the route and the ReplicaStatus our consumers write,
    as it does Gazette's; a SIGKILLed primary's replacement shows."""
    from test_consumer import Consumer, JSON
    from gazpb import Client, spec as jspec, wait_route
    e = shards
    broker = e.cluster.start()
    c = Client(broker.address)
    c.apply(jspec("k8s/chain/in", labels=JSON), jspec("k8s/chain/out", labels=JSON))
    wait_route(c, "k8s/chain/in", 1)

    class Group:  # what Consumer reads of a group
        pass
    g = Group()
    g.cluster, g.postgres, g.prefix, g.broker = e.cluster, postgres, e.prefix, broker
    consumers = [Consumer(g).start(), Consumer(g).start()]
    try:
        e.apply_shard("ours", "chain/part-000", hotStandbys=1, sources=[{"journal": "k8s/chain/in"}],
                      labels=[{"name": "chain.output", "value": "k8s/chain/out"}])
        wait_for(lambda: e.ready("ours"), 20, "Ready")

        def status(code):
            st = e.cr("ours")["status"]
            return st.get("replicaStatus") == code and len(st.get("replicas", [])) == 2 and st.get("primary")
        wait_for(lambda: status("PRIMARY"), 30, "PRIMARY with a standby")
        first = e.cr("ours")["status"]["primary"]
        victim = next(x for x in consumers if first.endswith("/" + x.id))
        victim.stop(signal.SIGKILL)
        # Once the victim's lease expires the standby is promoted, alone
        # on the shard; a third consumer then becomes its new standby.
        wait_for(lambda: e.cr("ours")["status"].get("replicaStatus") == "PRIMARY" and
                 len(e.cr("ours")["status"].get("replicas", [])) == 1 and
                 e.cr("ours")["status"].get("primary") not in (None, first), 60,
                 "the standby's promotion in the CR status")
        consumers.append(Consumer(g).start())
        wait_for(lambda: status("PRIMARY") and e.cr("ours")["status"]["primary"] != first, 60,
                 "the promoted primary with a new standby in the CR status")
    finally:
        for x in consumers:
            x.stop(signal.SIGKILL)
