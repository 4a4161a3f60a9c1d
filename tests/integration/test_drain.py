"""Broker drains on Kubernetes (docs/operator.md): gazette-operator watches
broker Pod objects on a real kube-apiserver, maps each to its member key in
the brokers' real etcd (broker id = pod name), marks the member of a
terminating pod exiting, reports the drain on the pod, holds the pod with
its finalizer until the member key is gone, and keeps a
PodDisruptionBudget whose maxUnavailable is 0 while a journal is
under-replicated or a drain is in progress.

The test API server runs no kubelet and no scheduler: pods never run. The
brokers are local processes whose --broker.id is the pod's name; deleting
a pod that carries a finalizer leaves it terminating (deletionTimestamp
set), as a kubelet would see it, and the test sends the SIGTERM a kubelet
would send."""
import json
import os
import signal
import subprocess
import tempfile
import urllib.error
import urllib.request
import uuid

import pytest

from conftest import CRDS, GAZCTL, Operator, wait_for

SELECTOR = "app.kubernetes.io/name=gazette-test,app.kubernetes.io/component=broker"
PDB = "gazette-brokers"


def pod_doc(name):
    labels = dict(kv.split("=") for kv in SELECTOR.split(","))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "broker", "image": "gazette-c:test",
                                     "env": [{"name": "BROKER_ID", "valueFrom": {
                                         "fieldRef": {"fieldPath": "metadata.name"}}}]}]}}


class Rig:
    def __init__(self, kube, cluster, ns):
        self.kube, self.cluster, self.ns = kube, cluster, ns
        self.brokers = {}
        self.op = None

    def k(self, *args, **kw):
        return self.kube.kubectl(*args, namespace=self.ns, **kw)

    def add_broker(self, name, zone):
        """A Pod object and the broker process standing for it."""
        self.k("apply", "-f", "-", input=json.dumps(pod_doc(name)))
        self.brokers[name] = self.cluster.start(bid=name, zone=zone)
        return self.brokers[name]

    def pod(self, name):
        r = self.k("get", "pod", name, "-o", "json", check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def annotation(self, name, key="gazette-c.dev/drain"):
        p = self.pod(name)
        return ((p or {}).get("metadata", {}).get("annotations") or {}).get(key)

    def pdb(self):
        r = self.k("get", "pdb", PDB, "-o", "json", check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def max_unavailable(self):
        self.check_operator()
        p = self.pdb()
        return p and p["spec"].get("maxUnavailable")

    def check_operator(self):
        if self.op.proc.poll() is not None:
            raise AssertionError("operator exited %s:\n%s" % (self.op.proc.returncode, self.op.logtail()))

    def events(self, name):
        r = self.k("get", "events", "--field-selector", "involvedObject.name=" + name, "-o", "json")
        return [e["reason"] for e in json.loads(r.stdout)["items"]]

    def gazctl(self, broker, *args, input=None):
        """Runs `gazctl journals ARGS`. An append's input goes through a
        file: gazctl retries an append it can re-read on routing statuses,
        and a journal applied a moment ago has no primary until the
        allocator's assignments reach the broker (NO_JOURNAL_PRIMARY_BROKER,
        which a one-shot append of stdin does not retry, as Gazette's)."""
        env = dict(os.environ, HOME="/nonexistent")
        args = list(args)
        if args and args[0] == "append" and input is not None:
            with tempfile.NamedTemporaryFile(prefix="gazctl-append-") as f:
                f.write(input)
                f.flush()
                return self.gazctl(broker, *(args + ["-i", f.name]))
        r = subprocess.run([GAZCTL, "journals"] + args + ["--broker.address", broker.address],
                           input=input, capture_output=True, env=env, timeout=60)
        assert r.returncode == 0, r.stderr.decode()
        return r.stdout

    def member(self, name):
        """The decoded BrokerSpec of the member named by pod `name`, or None."""
        import protocol_pb2
        out = self.cluster.etcd.ctl("get", "--prefix", "%s/members/" % self.cluster.prefix, "-w", "json")
        import base64
        for kv in json.loads(out).get("kvs") or []:
            key = base64.b64decode(kv["key"]).decode()
            if key.endswith("#" + name):
                spec = protocol_pb2.BrokerSpec()
                spec.ParseFromString(base64.b64decode(kv.get("value", "")))
                return spec
        return None

    def assignments(self, name=None):
        """journal -> member suffixes, from the assignment keys."""
        out = self.cluster.etcd.ctl("get", "--prefix", "%s/assign/" % self.cluster.prefix, "--keys-only")
        res = {}
        for key in filter(None, out.split("\n")):
            journal, _zone, suffix, _slot = key[len(self.cluster.prefix) + len("/assign/"):].split("#")
            res.setdefault(journal, []).append(suffix)
        return res


@pytest.fixture(scope="module")
def crds(kube):
    kube.kubectl("apply", "-f", CRDS)
    kube.kubectl("wait", "--for=condition=Established", "crd/journalspecs.gazette-c.dev", "--timeout=60s")
    return kube


@pytest.fixture
def rig(crds, cluster):
    kube = crds
    ns = "drain-" + uuid.uuid4().hex[:8]
    kube.kubectl("create", "namespace", ns)
    r = Rig(kube, cluster, ns)
    yield r
    if r.op:
        r.op.stop()
    # Pods left with our finalizer would stay terminating forever.
    for p in json.loads(r.k("get", "pods", "-o", "json").stdout)["items"]:
        if p["metadata"].get("finalizers"):
            r.k("patch", "pod", p["metadata"]["name"], "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                check=False)


def start_operator(rig, anchor):
    # Kept before start() so that the fixture stops it even if start fails.
    rig.op = Operator(rig.kube, rig.cluster, rig.ns, anchor.address,
                      extra=["--brokers.selector", SELECTOR, "--brokers.pdb", PDB,
                             "--drain.interval", "1s"])
    rig.op.start()


def ready_code(broker):
    try:
        with urllib.request.urlopen(broker.address + "/debug/ready", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def apply_journals(rig, broker, names, replication):
    """Gazette's YAML hierarchy: one parent carrying the shared spec."""
    specs = ("name: %s/\nreplication: %d\nfragment:\n  length: 1048576\n  compression_codec: NONE\n"
             "  stores: [file:///]\n  refresh_interval: 1s\nchildren:\n" % (names[0].split("/")[0], replication))
    specs += "".join("- name: %s\n" % n for n in names)
    rig.gazctl(broker, "apply", "--specs", "/dev/stdin", input=specs.encode())


def test_terminating_pod_is_drained_and_released(rig):
    """A pod marked terminating: its member is marked exiting, its journals
    are handed off, the pod reports Draining -> HandedOff -> Drained, the
    finalizer holds the pod until the member key is gone, and the PDB
    allows no disruption meanwhile."""
    b0 = rig.add_broker("broker-0", "zone-a")
    b1 = rig.add_broker("broker-1", "zone-b")
    b2 = rig.add_broker("broker-2", "zone-a")
    start_operator(rig, b1)
    for n in ("broker-0", "broker-1", "broker-2"):
        wait_for(lambda: "gazette-c.dev/drain" in (rig.pod(n)["metadata"].get("finalizers") or []), 20,
                 "finalizer on " + n)
    journals = ["drain/j-%d" % i for i in range(6)]
    apply_journals(rig, b1, journals, 2)
    data = {}
    for j in journals:
        data[j] = b"".join(b"%s line %05d\n" % (j.encode(), i) for i in range(2000))
        rig.gazctl(b1, "append", "-l", "name=" + j, input=data[j])
    wait_for(lambda: rig.max_unavailable() == 1, 30, "PDB maxUnavailable 1 with every journal replicated")
    pdb = rig.pdb()
    assert pdb["spec"]["selector"]["matchLabels"] == dict(kv.split("=") for kv in SELECTOR.split(","))
    assert pdb["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gazette-operator"
    held = [j for j, m in rig.assignments().items() if "broker-0" in m]
    assert held, rig.assignments()  # broker-0 has something to hand off
    assert ready_code(b0) == 200

    # The pod is deleted: it stays, terminating, held by the finalizer.
    rig.k("delete", "pod", "broker-0", "--wait=false")
    assert rig.pod("broker-0")["metadata"].get("deletionTimestamp")
    wait_for(lambda: getattr(rig.member("broker-0"), "exiting", False), 20, "member marked exiting")
    assert rig.pod("broker-0") is not None
    wait_for(lambda: rig.max_unavailable() == 0, 10, "PDB maxUnavailable 0 during the drain")
    # The broker itself took up the mark: not ready, so a rollout waits.
    wait_for(lambda: ready_code(b0) == 503, 10, "broker-0 not ready once exiting")
    assert "DrainStarted" in rig.events("broker-0")
    assert rig.annotation("broker-0", "gazette-c.dev/member") == "zone-a#broker-0"

    # Journals are handed off; the pod says so, and is still held.
    wait_for(lambda: rig.annotation("broker-0") == "HandedOff", 60, "HandedOff")
    assert rig.annotation("broker-0", "gazette-c.dev/drain-assignments") == "0"
    a = rig.assignments()
    assert all("broker-0" not in m and len(m) == 2 for m in a.values()), a
    assert rig.pod("broker-0") is not None and rig.member("broker-0") is not None
    assert rig.max_unavailable() == 0

    # What a kubelet does next: SIGTERM. The broker persists and exits; its
    # member key goes; the operator reports Drained and lets the pod go.
    assert b0.stop(signal.SIGTERM, timeout=60) == 0
    wait_for(lambda: rig.pod("broker-0") is None, 20, "pod released once the member key is gone")
    assert rig.member("broker-0") is None
    assert "Drained" in rig.events("broker-0")
    # The budget was raised before the pod was released (same pass, earlier).
    assert rig.max_unavailable() == 1
    # Every byte is still there: the journals broker-0 held, and the rest.
    # (A replica that joined after the last fragment was persisted serves
    # it once its index refresh lists the store: allow a few intervals.)
    for j in held + [j for j in journals if j not in held]:
        wait_for(lambda: rig.gazctl(b2, "read", "-l", "name=" + j) == data[j], 20, "content of " + j)
    code, text = rig.op.http("/metrics")
    assert code == 200
    assert "gazette_operator_drains_completed_total 1" in text, text
    assert "gazette_operator_members_marked_exiting_total 1" in text
    assert "gazette_operator_pdb_max_unavailable 1" in text
    log = rig.op.logtext()
    assert "pod terminating: member marked exiting" in log and "drain complete" in log
    assert "removing the drain finalizer failed" not in log, log


def test_pdb_follows_under_replication(rig):
    """maxUnavailable is 0 while a journal has fewer live replicas than its
    replication (a broker lost), and 1 again once a new broker holds a
    synchronised replica."""
    b0 = rig.add_broker("broker-0", "zone-a")
    b1 = rig.add_broker("broker-1", "zone-b")
    b2 = rig.add_broker("broker-2", "zone-c")
    start_operator(rig, b0)
    apply_journals(rig, b0, ["under/j"], 3)
    rig.gazctl(b0, "append", "-l", "name=under/j", input=b"x" * 1000)
    wait_for(lambda: rig.max_unavailable() == 1, 30, "PDB 1 with replication 3 met")
    assert sorted(rig.assignments()["under/j"]) == ["broker-0", "broker-1", "broker-2"]

    # broker-2 dies without a drain; once its lease expires, under/j has two
    # live replicas of three and no broker can take the third.
    b2.proc.kill()
    b2.proc.wait()
    wait_for(lambda: rig.member("broker-2") is None, 20, "broker-2's lease to expire")
    wait_for(lambda: rig.max_unavailable() == 0, 10, "PDB 0 while under-replicated")
    code, text = rig.op.http("/metrics")
    assert "gazette_operator_underreplicated_journals 1" in text, text
    # Not a drain: nobody marked anything exiting.
    assert rig.member("broker-0").exiting is False and rig.member("broker-1").exiting is False

    rig.k("delete", "pod", "broker-2", "--wait=false")  # no member: released at once
    wait_for(lambda: rig.pod("broker-2") is None, 20, "pod of the lost broker released")
    rig.add_broker("broker-3", "zone-c")
    wait_for(lambda: rig.max_unavailable() == 1, 30, "PDB back to 1 once broker-3 holds a replica")
    assert sorted(rig.assignments()["under/j"]) == ["broker-0", "broker-1", "broker-3"]
    code, text = rig.op.http("/metrics")
    assert "gazette_operator_underreplicated_journals 0" in text


def test_finalizer_follows_the_flag(rig):
    """--brokers.finalizer=false releases running pods (the step before an
    uninstall, docs/operator.md); a pod with no member is released at once
    when deleted."""
    b0 = rig.add_broker("broker-0", "zone-a")
    start_operator(rig, b0)
    wait_for(lambda: "gazette-c.dev/drain" in (rig.pod("broker-0")["metadata"].get("finalizers") or []), 20,
             "finalizer added")
    rig.op.stop()
    rig.op = Operator(rig.kube, rig.cluster, rig.ns, b0.address, name="no-finalizer",
                      extra=["--brokers.selector", SELECTOR, "--brokers.finalizer=false",
                             "--drain.interval", "1s"])
    rig.op.start()
    wait_for(lambda: not rig.pod("broker-0")["metadata"].get("finalizers"), 20, "finalizer removed")
    # Without the finalizer nothing holds the pod object: an unscheduled
    # pod is deleted at once, and its broker is left to its own SIGTERM.
    rig.k("delete", "pod", "broker-0", "--wait=false")
    wait_for(lambda: rig.pod("broker-0") is None, 10, "pod gone")


def test_rolling_restart_drains_each_broker_in_turn(rig):
    """A StatefulSet rolling update, step by step as its controller and the
    kubelet would take it: delete the highest pod, wait until it is gone
    (the finalizer holds it until its member key is), start the
    replacement under the same name (so the same broker id), wait until
    the budget is back to 1, go on. Every byte survives three restarts."""
    zones = {"broker-0": "zone-a", "broker-1": "zone-b", "broker-2": "zone-c"}
    for n, z in zones.items():
        rig.add_broker(n, z)
    start_operator(rig, rig.brokers["broker-0"])
    for n in zones:
        wait_for(lambda: "gazette-c.dev/drain" in (rig.pod(n)["metadata"].get("finalizers") or []), 20,
                 "finalizer on " + n)
    journals = ["roll/j-%d" % i for i in range(4)]
    apply_journals(rig, rig.brokers["broker-0"], journals, 2)
    data = {}
    for j in journals:
        data[j] = b"".join(b"%s %05d\n" % (j.encode(), i) for i in range(3000))
        rig.gazctl(rig.brokers["broker-0"], "append", "-l", "name=" + j, input=data[j])
    wait_for(lambda: rig.max_unavailable() == 1, 30, "budget 1 before the rollout")

    for n in ("broker-2", "broker-1", "broker-0"):
        old = rig.brokers[n]
        rig.k("delete", "pod", n, "--wait=false")
        wait_for(lambda: rig.annotation(n) == "HandedOff", 60, n + " handed off")
        assert rig.max_unavailable() == 0
        assert old.stop(signal.SIGTERM, timeout=60) == 0
        wait_for(lambda: rig.pod(n) is None, 20, n + " released")
        rig.add_broker(n, zones[n])  # the replacement: same name, same member key
        wait_for(lambda: rig.max_unavailable() == 1, 60, "budget 1 after replacing " + n)
        # Balancing may move a replica onto the replacement (a journal then
        # holds three assignments until the newcomer is consistent and
        # the heaviest is removed); it settles at two.
        wait_for(lambda: sorted(rig.assignments()) == journals and
                 all(len(m) == 2 for m in rig.assignments().values()), 30,
                 "two assignments per journal after replacing " + n)
        wait_for(lambda: rig.max_unavailable() == 1, 30, "budget 1 once settled after " + n)
    anchor = rig.brokers["broker-1"]
    for j in journals:
        wait_for(lambda: rig.gazctl(anchor, "read", "-l", "name=" + j) == data[j], 20, "content of " + j)
    assert rig.events("broker-0").count("Drained") >= 1
    code, text = rig.op.http("/metrics")
    assert "gazette_operator_drains_completed_total 3" in text, text
