"""Compatibility: Gazette's own gazctl (pinned Go build) gets the same
results from our broker as from Gazette's Go broker, and our gazctl gets
the same results from both."""
import json
import os
import subprocess
import time

import pytest

from conftest import GAZCTL, GO_GAZCTL

SPECS = """
name: compat/
replication: 1
labels:
  - name: app.gazette.dev/tag
    value: compat
fragment:
  length: 65536
  compression_codec: GZIP
  stores:
    - file:///
  refresh_interval: 1s
children:
  - name: compat/a
    labels:
      - name: content-type
        value: application/x-ndjson
  - name: compat/b
    fragment:
      compression_codec: ZSTANDARD
"""


def gazctl(exe, address, *args, stdin=None, check=True):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
    env["BROKER_ADDRESS"] = address
    env["HOME"] = "/nonexistent"  # no ~/.config/gazette/gazctl.ini surprises
    p = subprocess.run([exe] + list(args), input=stdin, capture_output=True, env=env, timeout=60)
    if check and p.returncode != 0:
        raise AssertionError("%s %s failed (%d): %s" % (exe, args, p.returncode, p.stderr.decode()))
    return p


def settle(address):
    """Waits until every journal has a primary and the broker's view of etcd
    stops moving: after an apply, the allocator and then each new primary
    write assignments, so an append sent at once may find no primary yet
    (NO_JOURNAL_PRIMARY_BROKER, which neither gazctl retries for stdin) and
    two listings may carry different header revisions."""
    deadline = time.time() + 30
    last = None
    while time.time() < deadline:
        out = json.loads(gazctl(GAZCTL, address, "journals", "list", "-o", "json").stdout)
        routes = [j.get("route", {}) for j in out.get("journals", [])]
        ready = routes and all(r.get("members") and r.get("primary", 0) >= 0 for r in routes)
        rev = out["header"]["etcd"]["revision"] if ready else None
        if rev is not None and rev == last:
            return
        last = rev
        time.sleep(0.3)
    raise AssertionError("journals at %s never settled" % address)


def session(exe, cluster, go_broker, tmp_path):
    """Runs one scripted gazctl session; returns what a user would compare."""
    b = cluster.start(go=go_broker)
    specs = tmp_path / ("specs-%s.yaml" % go_broker)
    specs.write_text(SPECS)
    out = {}
    gazctl(exe, b.address, "journals", "apply", "--specs", str(specs))
    settle(b.address)
    listing = gazctl(exe, b.address, "journals", "list", "-o", "yaml").stdout.decode()
    out["list"] = "\n".join(l for l in listing.splitlines() if not l.strip().startswith("revision:"))
    data = b"".join(b'{"n": %d, "pad": "%s"}\n' % (i, b"x" * (i % 97)) for i in range(20000))
    gazctl(exe, b.address, "journals", "append", "-l", "name=compat/a", stdin=data)
    gazctl(exe, b.address, "journals", "append", "-l", "name=compat/b", stdin=data[:1000])
    out["read_a"] = gazctl(exe, b.address, "journals", "read", "-l", "name=compat/a").stdout
    out["read_b"] = gazctl(exe, b.address, "journals", "read", "-l", "name=compat/b").stdout
    assert out["read_a"] == data and out["read_b"] == data[:1000]
    frags = json.loads("[" + ",".join(
        l for l in gazctl(exe, b.address, "journals", "fragments", "-l", "app.gazette.dev/tag=compat",
                          "-o", "json").stdout.decode().splitlines() if l.strip()) + "]")
    out["fragments"] = sorted((f["spec"]["journal"], int(f["spec"].get("begin", 0)), int(f["spec"]["end"]),
                               tuple(sorted(f["spec"]["sum"].items())), f["spec"]["compression_codec"])
                              for f in frags)
    return out


@pytest.mark.parametrize("exe", [GO_GAZCTL, GAZCTL], ids=["gazette-gazctl", "our-gazctl"])
def test_gazctl_same_results_on_both_brokers(etcd, tmp_path, exe):
    from conftest import Cluster
    results = {}
    for go in (False, True):
        c = Cluster(etcd, str(tmp_path / ("go" if go else "c")))
        try:
            results[go] = session(exe, c, go, tmp_path)
        finally:
            c.stop_all()
    ours, theirs = results[False], results[True]
    assert ours["list"] == theirs["list"]
    assert ours["read_a"] == theirs["read_a"] and ours["read_b"] == theirs["read_b"]
    assert ours["fragments"] == theirs["fragments"] and len(ours["fragments"]) == 2


def test_both_gazctls_print_the_same(cluster, tmp_path):
    b = cluster.start()
    specs = tmp_path / "specs.yaml"
    specs.write_text(SPECS)
    gazctl(GAZCTL, b.address, "journals", "apply", "--specs", str(specs))
    settle(b.address)
    for args in (["journals", "list"], ["journals", "list", "-o", "yaml"], ["journals", "list", "-o", "json"],
                 ["journals", "list", "-L", "content-type", "-p", "--stores"]):
        ours = gazctl(GAZCTL, b.address, *args).stdout
        theirs = gazctl(GO_GAZCTL, b.address, *args).stdout
        assert ours == theirs, args


@pytest.mark.parametrize("yaml_text,needle", [
    ("name: x/\n  bad: [indent\n", "line"),
    ("name: compat/x\nreplicaton: 1\n", "replicaton"),
    ("name: compat/\nchildren:\n  - name: other/x\n", "other/x"),
    ("name: compat/x\nreplication: 1\nfragment:\n  length: 10\n  stores: [file:///]\n  refresh_interval: 1s\n"
     "  compression_codec: NONE\n", "length"),
])
def test_gazctl_apply_rejects_bad_yaml(cluster, tmp_path, yaml_text, needle):
    b = cluster.start()
    f = tmp_path / "bad.yaml"
    f.write_text(yaml_text)
    p = gazctl(GAZCTL, b.address, "journals", "apply", "--specs", str(f), check=False)
    assert p.returncode != 0
    assert needle.lower() in p.stderr.decode().lower(), p.stderr.decode()
    assert gazctl(GAZCTL, b.address, "journals", "list", "-o", "json").stdout.count(b'"name"') == 0


def test_gazctl_suspend_and_reset_head(cluster):
    """BR-04 step 4 and BR-07 step 5 through our gazctl: suspend takes an
    empty journal to FULL, reset-head skips FULL journals and moves a dirty
    journal's head to the store's end."""
    from gazpb import Client, spec, wait_assigned
    import protocol_pb2 as pb
    b = cluster.start()
    c = Client(b.address)
    c.apply(spec("gz/empty"))
    wait_assigned(c, "gz/empty")
    gazctl(GAZCTL, b.address, "journals", "suspend", "-l", "name=gz/empty")
    level = [j.spec.suspend.level for j in c.list() if j.spec.name == "gz/empty"][0]
    assert level == pb.JournalSpec.Suspend.FULL
    gazctl(GAZCTL, b.address, "journals", "reset-head", "-l", "name=gz/empty")
    level = [j.spec.suspend.level for j in c.list() if j.spec.name == "gz/empty"][0]
    assert level == pb.JournalSpec.Suspend.FULL  # skipped, not resumed
    # A dirty store: fragments the brokers do not know about.
    from test_cases import put_fragment
    put_fragment(cluster.file_root, "gz/dirty", 0, b"d" * 40)
    c.apply(spec("gz/dirty"))
    assert c.append("gz/dirty", b"x").status == pb.INDEX_HAS_GREATER_OFFSET
    gazctl(GAZCTL, b.address, "journals", "reset-head", "-l", "name=gz/dirty")
    r = c.append("gz/dirty", b"x")
    assert r.status == pb.OK and r.commit.begin == 40
