"""`gazctl shards ...` and `gazctl attach-uuids` against a real consumer:
Gazette's own stream-sum `summer` (SQLite stores, recovery logs, hints in
etcd) on two of our brokers, its shards created by our `shards apply`.
Every listing format of ours is compared byte for byte with Gazette's
gazctl against the same consumer; unassign, edit and the apply errors
change (or leave) the cluster as Gazette's do; prune --dry-run lists what
Gazette's lists.

The cluster is shared by the module (starting consumers takes seconds);
tests that move shards wait for the cluster to settle again.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

import conftest as cf
from conftest import GAZCTL, GO_GAZCTL

EXAMPLES = subprocess.check_output([os.path.join(cf.ROOT, "scripts/deps.sh"), "--examples-dir"],
                                   text=True).strip()
SUMMER = os.path.join(EXAMPLES, "summer")
CHUNKER = os.path.join(EXAMPLES, "chunker")
NSHARDS = 4

pytestmark = pytest.mark.skipif(not os.access(SUMMER, os.X_OK),
                                reason="Gazette's examples are not built (scripts/deps.sh --examples)")

JOURNALS = """name: examples/stream-sum/
replication: 2
labels:
  - name: example-name
    value: stream-sum
fragment:
  length: 1048576
  stores: ["file:///"]
  refresh_interval: 1s
  compression_codec: SNAPPY
children:
  - name: examples/stream-sum/chunks/
    labels:
      - {name: app.gazette.dev/message-type, value: stream_sum.Chunk}
      - {name: content-type, value: application/x-ndjson}
    children:
%s
  - name: examples/stream-sum/recovery-logs/
    labels: [{name: content-type, value: application/x-gazette-recoverylog}]
    fragment:
      length: 1024
    children:
%s
  - name: examples/stream-sum/sums
    labels:
      - {name: app.gazette.dev/message-type, value: stream_sum.Sum}
      - {name: content-type, value: application/x-ndjson}
""" % ("\n".join("      - name: examples/stream-sum/chunks/part-%03d" % i for i in range(NSHARDS)),
       "\n".join("      - name: examples/stream-sum/recovery-logs/chunks-part-%03d" % i
                 for i in list(range(NSHARDS)) + [99]))


def shards_yaml(hints):
    """stream-sum's shards (as its generate-shards.sh), SQLite stores, one
    backup hints key, plus a disabled shard that never runs and so never
    writes hints."""
    out = """common:
  recovery_log_prefix: examples/stream-sum/recovery-logs
  hint_prefix: %s
  hint_backups: 1
  max_txn_duration: 1s
  hot_standbys: 1
  labels:
  - name: store
    value: sqlite
shards:
""" % hints
    for i in range(NSHARDS):
        out += "- id: chunks-part-%03d\n  sources:\n  - journal: examples/stream-sum/chunks/part-%03d\n" % (i, i)
    out += ("- id: chunks-part-099\n  sources:\n  - journal: examples/stream-sum/chunks/part-000\n"
            "  hint_backups: 3\n  disable: true\n  labels:\n  - name: idle\n    value: \"\"\n")
    return out


def http_ok(url):
    try:
        return urllib.request.urlopen(url, timeout=2).status == 200
    except OSError:
        return False


class App:
    """Our brokers, two summers and the addresses both gazctls take."""

    def __init__(self, etcd, base):
        self.cluster = cf.Cluster(etcd, base)
        self.dir = base
        for _ in range(2):
            self.cluster.start()
        self.broker = self.cluster.brokers[0].address
        self.consumer_prefix = self.cluster.prefix + "-consumers/summer"
        self.hints = self.cluster.prefix + "-hints/stream-sum"
        self.summers = []

    def env(self, extra=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("BROKER_", "CONSUMER_", "GAZ_EDITOR", "EDITOR"))}
        env["HOME"] = "/nonexistent"  # no ~/.config/gazette/gazctl.ini
        env["BROKER_ADDRESS"] = self.broker
        env["CONSUMER_ADDRESS"] = self.summers[0]["address"] if self.summers else ""
        env.update(extra or {})
        return env

    def gazctl(self, exe, *args, stdin=None, check=True, env=None, cwd=None):
        p = subprocess.run([exe] + list(args), input=stdin, capture_output=True, text=True,
                           env=self.env(env), timeout=120, cwd=cwd or self.dir)
        if check and p.returncode != 0:
            raise AssertionError("%s %s failed (%d):\n%s%s" % (os.path.basename(exe), " ".join(args),
                                                              p.returncode, p.stdout, p.stderr))
        return p

    def start_summer(self, idx):
        port = cf.free_port()
        scratch = self.cluster.scratch("summer-%d" % idx)
        log = open(os.path.join(self.dir, "summer-%d.log" % idx), "a")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "BROKER_", "CONSUMER_"))}
        env["TMPDIR"] = scratch
        proc = subprocess.Popen(
            [SUMMER, "serve", "--consumer.zone", "local", "--consumer.id", "summer-%d" % idx,
             "--consumer.host", "127.0.0.1", "--consumer.port", str(port),
             "--broker.address", self.broker, "--broker.cache.size", "256",
             "--broker.file-root", self.cluster.file_root,
             "--etcd.address", self.cluster.etcd.endpoint, "--etcd.prefix", self.consumer_prefix,
             "--etcd.lease", "5s", "--log.level", "info"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=scratch)
        s = {"proc": proc, "address": "http://127.0.0.1:%d" % port, "log": log}
        cf.wait_for(lambda: proc.poll() is None and http_ok(s["address"] + "/debug/ready"), 60,
                    "summer-%d ready" % idx, interval=0.2)
        self.summers.append(s)

    def listing(self, exe=GAZCTL, *args):
        return json.loads(self.gazctl(exe, "shards", "list", "-o", "json", *args).stdout)

    def settle(self, timeout=90):
        """Waits until every enabled shard has a PRIMARY and a STANDBY and
        two listings in a row carry the same etcd revision."""
        last = None
        deadline = time.time() + timeout
        while time.time() < deadline:
            out = self.listing()
            ok = len(out["shards"]) == NSHARDS + 1
            for sh in out["shards"]:
                codes = sorted(s["code"] for s in sh["status"])
                want = [] if sh["spec"]["disable"] else ["PRIMARY", "STANDBY"]
                ok = ok and codes == want
            rev = out["header"]["etcd"]["revision"]
            if ok and rev == last:
                return out
            last = rev if ok else None
            time.sleep(0.5)
        raise AssertionError("shards did not settle:\n%s" % json.dumps(out, indent=1)[:4000])

    def chunks(self):
        """One round of stream-sum's chunker: writes chunks and waits until
        the summers published their sums (it verifies them). It serves
        diagnostics on :8080, hard-coded."""
        with cf.GazetteDiagnosticsPort():
            p = subprocess.run([CHUNKER, "run", "--chunker.zone", "local", "--chunker.workers", "2",
                                "--chunker.streams", "3", "--chunker.chunks", "20",
                                "--broker.address", self.broker, "--broker.cache.size", "0",
                                "--log.level", "info"],
                               capture_output=True, text=True, timeout=180, env=self.env(), cwd=self.dir)
        return p.returncode, p.stdout + p.stderr

    def stop(self):
        for s in self.summers:
            if s["proc"].poll() is None:
                s["proc"].send_signal(signal.SIGTERM)
        for s in self.summers:
            try:
                s["proc"].wait(5)  # both exit at once: none takes the other's shards
            except subprocess.TimeoutExpired:
                s["proc"].kill()
                s["proc"].wait()
            s["log"].close()
        self.cluster.stop_all()


@pytest.fixture(scope="module")
def app(etcd, tmp_path_factory):
    a = App(etcd, str(tmp_path_factory.mktemp("shards")))
    try:
        spec = os.path.join(a.dir, "journals.yaml")
        with open(spec, "w") as f:
            f.write(JOURNALS)
        a.gazctl(GAZCTL, "journals", "apply", "--specs", spec)
        for i in (1, 2):
            a.start_summer(i)
        with open(os.path.join(a.dir, "shards.yaml"), "w") as f:
            f.write(shards_yaml(a.hints))
        a.gazctl(GAZCTL, "shards", "apply", "--specs", os.path.join(a.dir, "shards.yaml"))
        a.settle()
        rc, text = a.chunks()
        a.chunks_result = (rc, text)
        a.settle()
        yield a
    finally:
        a.stop()


def same_output(app, args, tries=10):
    """Runs `gazctl shards list <args>` with ours and Gazette's until both
    print the same bytes (a listing between allocator rounds may differ
    from the next); returns them, or fails showing the last pair."""
    for _ in range(tries):
        ours = app.gazctl(GAZCTL, "shards", "list", *args)
        go = app.gazctl(GO_GAZCTL, "shards", "list", *args)
        if ours.stdout == go.stdout:
            return ours.stdout
        time.sleep(0.5)
    assert ours.stdout == go.stdout, "%s:\nours:\n%s\nGazette's:\n%s" % (args, ours.stdout, go.stdout)


def test_apply_created_the_shards(app):
    out = app.listing(GO_GAZCTL)
    ids = [sh["spec"]["id"] for sh in out["shards"]]
    assert ids == ["chunks-part-%03d" % i for i in list(range(NSHARDS)) + [99]]
    spec = out["shards"][1]["spec"]
    assert spec["sources"] == [{"journal": "examples/stream-sum/chunks/part-001", "min_offset": "0"}]
    assert spec["recovery_log_prefix"] == "examples/stream-sum/recovery-logs"
    assert spec["hint_prefix"] == app.hints and spec["hint_backups"] == 1
    assert out["shards"][-1]["spec"]["hint_backups"] == 3
    assert spec["max_txn_duration"] == "1s" and spec["hot_standbys"] == 1
    assert spec["labels"]["labels"] == [{"name": "store", "value": "sqlite", "prefix": False}]
    rc, text = app.chunks_result
    assert rc == 0, "the chunker's sums did not verify:\n" + text[-3000:]


@pytest.mark.parametrize("args", [
    [], ["-o", "yaml"], ["-o", "json"], ["-o", "proto"],
    ["--rf", "-p", "-r", "-L", "store", "-L", "idle", "-L", "missing"],
    ["-l", "id=chunks-part-002", "-p"], ["-l", "idle", "-o", "yaml"], ["-l", "id=nope", "-o", "yaml"],
    ["-l", "id=nope"], ["-l", "id=nope", "-o", "json"],
], ids=lambda a: " ".join(a) or "(table)")
def test_list_same_as_gazette(app, args):
    same_output(app, args)


def test_list_columns(app):
    out = same_output(app, ["--rf", "-p", "-r"])
    rows = [ln for ln in out.splitlines() if "chunks-part" in ln]
    assert len(rows) == NSHARDS + 1
    for ln in rows[:NSHARDS]:
        cells = [c.strip() for c in ln.strip("│").split("│")]
        assert cells[1] == "PRIMARY" and cells[2] == "2", ln
        assert re.fullmatch(r"summer-[12]:PRIMARY", cells[3]) and re.fullmatch(r"summer-[12]:STANDBY", cells[4]), ln
    disabled = [c.strip() for c in rows[-1].strip("│").split("│")]
    assert disabled[1:] == ["IDLE", "0", "<none>", ""], rows[-1]


def test_lag(app):
    # The disabled shard has no primary to Stat: both gazctls fail on it.
    for exe in (GAZCTL, GO_GAZCTL):
        r = app.gazctl(exe, "shards", "list", "--lag", "-l", "id=chunks-part-099", check=False)
        assert r.returncode != 0 and "failed to stat shard" in r.stderr and "NO_SHARD_PRIMARY" in r.stderr, r
    out = same_output(app, ["--lag", "-l", "store=sqlite,!idle"])
    lags = {}
    for ln in out.splitlines():
        m = re.match(r"│ (chunks-part-\d+) .*│ ([^│]*) │$", ln)
        if m:
            lags[m.group(1)] = m.group(2).strip()
    assert set(lags) == {"chunks-part-%03d" % i for i in range(NSHARDS)}
    for i in range(NSHARDS):
        m = re.fullmatch(r"examples/stream-sum/chunks/part-%03d:(\d+)" % i, lags["chunks-part-%03d" % i])
        assert m, lags
        assert int(m.group(1)) >= 0
    # Lag is the write head less what the shard read through: the chunker
    # waited for every sum, so the summers read everything.
    assert all(v.endswith(":0") for v in lags.values()), lags


def primaries(app):
    out = app.listing()
    return {sh["spec"]["id"]: sh["route"]["members"][sh["route"]["primary"]]["suffix"]
            for sh in out["shards"] if sh["route"]["primary"] >= 0}


def test_unassign(app):
    shard = "chunks-part-001"
    before = app.settle()
    was = primaries(app)[shard]
    # --dry-run names the shard and moves nothing; --failed finds none.
    r = app.gazctl(GAZCTL, "shards", "unassign", "-l", "id=" + shard, "--dry-run", "--log.level", "info")
    assert "Successfully unassigned shard" in r.stderr and shard in r.stderr, r.stderr
    r = app.gazctl(GAZCTL, "shards", "unassign", "-l", "id=" + shard, "--failed", "--log.level", "info")
    assert "Successfully unassigned" not in r.stderr, r.stderr
    time.sleep(2)
    assert primaries(app)[shard] == was
    assert app.listing()["shards"][1]["mod_revision"] == before["shards"][1]["mod_revision"]
    # A real unassign: the standby takes over as primary.
    app.gazctl(GAZCTL, "shards", "unassign", "-l", "id=" + shard)
    cf.wait_for(lambda: primaries(app).get(shard) not in (None, was), 60, "shard %s to move" % shard, interval=0.5)
    app.settle()
    # Gazette's gazctl unassigns the same way (it moves back).
    now = primaries(app)[shard]
    app.gazctl(GO_GAZCTL, "shards", "unassign", "-l", "id=" + shard)
    cf.wait_for(lambda: primaries(app).get(shard) not in (None, now), 60, "shard %s to move back" % shard,
                interval=0.5)
    app.settle()


EDITOR = r"""#!/bin/sh
# First run: break the file; when reopened with the error: fix it and edit.
f="$1"
if grep -q '^#⚠' "$f"; then
  grep -v '^bogus' "$f" | sed 's/max_txn_duration: 1s/max_txn_duration: 2s/' > "$f.new"
  cp "$f" "$f.seen"
  mv "$f.new" "$f"
else
  echo 'bogus: true' >> "$f"
fi
"""


def test_edit(app, tmp_path):
    ed = tmp_path / "editor.sh"
    ed.write_text(EDITOR)
    ed.chmod(0o755)
    env = {"GAZ_EDITOR": str(ed), "TMPDIR": str(tmp_path)}
    r = app.gazctl(GAZCTL, "shards", "edit", "-l", "id in (chunks-part-000, chunks-part-003)", env=env)
    seen = [p for p in os.listdir(tmp_path) if p.endswith(".seen")]
    assert len(seen) == 1, (os.listdir(tmp_path), r.stderr)
    text = (tmp_path / seen[0]).read_text()
    assert "#⚠ There were errors validating or applying the spec." in text
    assert 'unknown key "bogus"' in text
    assert "max_txn_duration: 1s" in text and "revision:" in text
    specs = {sh["spec"]["id"]: sh["spec"] for sh in app.listing()["shards"]}
    assert specs["chunks-part-000"]["max_txn_duration"] == "2s"
    assert specs["chunks-part-003"]["max_txn_duration"] == "2s"
    assert specs["chunks-part-001"]["max_txn_duration"] == "1s"
    # An unchanged file cancels; nothing is applied.
    rev = app.listing()["header"]["etcd"]["revision"]
    r = app.gazctl(GAZCTL, "shards", "edit", "-l", "id=chunks-part-000", env={"GAZ_EDITOR": "true"})
    assert "Cancelled; nothing to do." in r.stderr
    r = app.gazctl(GAZCTL, "shards", "edit", "-l", "id=nope", env={"GAZ_EDITOR": "true"}, check=False)
    assert r.returncode != 0 and "no shards match selector" in r.stderr
    assert app.listing()["header"]["etcd"]["revision"] == rev
    app.settle()


def apply_both(app, text):
    """Applies `text` with ours and Gazette's gazctl; both must fail, and
    neither may change the listing."""
    before = app.gazctl(GAZCTL, "shards", "list", "-o", "yaml").stdout
    ours = app.gazctl(GAZCTL, "shards", "apply", stdin=text, check=False)
    go = app.gazctl(GO_GAZCTL, "shards", "apply", stdin=text, check=False)
    assert ours.returncode == 1 and go.returncode != 0, (ours, go)
    assert app.gazctl(GAZCTL, "shards", "list", "-o", "yaml").stdout == before
    return ours.stderr, go.stderr


@pytest.mark.parametrize("text,message", [
    ("shards:\n- id: abc\n  max_txn_duration: 1s\n",
     "Changes[0].Upsert.Id: invalid length (3; expected 4 <= length <= 512)"),
    ("shards:\n- id: abcd\n", "Changes[0].Upsert: invalid MaxTxnDuration (0; expected > 0)"),
    ("shards:\n- id: abcd\n  max_txn_duration: 1s\n  labels:\n  - name: id\n    value: x\n",
     'Changes[0].Upsert: Labels cannot include label \\"id\\"'),
    ("shards:\n- id: abcd\n  max_txn_duration: 1s\n  sources:\n  - journal: examples/nope\n",
     "Shard[abcd]: named journal does not exist (examples/nope)"),
    ("shards:\n- id: abcd\n  max_txn_duration: 1s\n  sources:\n  - journal: examples/stream-sum/chunks/part-000\n"
     "  recovery_log_prefix: examples/stream-sum/chunks\n  hint_prefix: /h\n",
     "Shard[abcd]: named journal does not exist (examples/stream-sum/chunks/abcd)"),
    ("shards:\n- id: part-000\n  max_txn_duration: 1s\n  sources:\n  - journal: examples/stream-sum/sums\n"
     "  recovery_log_prefix: examples/stream-sum\n  hint_prefix: /h\n",
     "Shard[part-000]: named journal does not exist (examples/stream-sum/part-000)"),
])
def test_apply_errors(app, text, message):
    ours, go = apply_both(app, text)
    # Gazette logs the error as a logfmt field (its quotes escaped); ours
    # prints it as it is.
    assert message in go, go
    assert message.replace('\\"', '"') in ours, ours


def test_apply_stale_revision(app):
    listed = app.gazctl(GAZCTL, "shards", "list", "-o", "yaml", "-l", "id=chunks-part-002").stdout
    m = re.search(r"revision: (\d+)", listed)
    stale = listed.replace(m.group(0), "revision: %d" % (int(m.group(1)) - 1))
    ours, go = apply_both(app, stale)
    assert "failed to apply shards: ETCD_TRANSACTION_FAILED" in ours, ours
    assert "ETCD_TRANSACTION_FAILED" in go, go
    # The listed revision itself applies (a no-op change), as Gazette's.
    app.gazctl(GAZCTL, "shards", "apply", stdin=listed)


def test_apply_dry_run_same_as_gazette(app):
    text = shards_yaml(app.hints)
    ours = app.gazctl(GAZCTL, "shards", "apply", "--dry-run", stdin=text)
    go = app.gazctl(GO_GAZCTL, "shards", "apply", "--dry-run", stdin=text)
    assert ours.stdout == go.stdout


def test_apply_strict_yaml(app):
    ours, go = apply_both(app, "shards:\n- id: abcd\n  bogus: 1\n")
    assert 'line 3: unknown key "bogus" in shard' in ours, ours
    assert "line 3: field bogus not found" in go, go


def pruned_by_gazette(app, *args):
    r = app.gazctl(GO_GAZCTL, "shards", "prune", "--dry-run", "--log.level", "debug", "--log.format", "json",
                   *args)
    names = set()
    for ln in r.stderr.splitlines():
        if ln.startswith("{"):
            e = json.loads(ln)
            if e.get("msg") == "pruning fragment":
                names.add((e["log"], e["name"]))
    return names, r


def pruned_by_us(app, *args):
    r = app.gazctl(GAZCTL, "shards", "prune", "--dry-run", "--file-root", app.cluster.file_root, *args)
    names = set()
    for ln in r.stdout.splitlines():
        m = re.match(r"would prune file:///(.*)/([^/]+) \(\d+ bytes\)$", ln)
        if m:
            names.add((m.group(1), m.group(2)))
    return names, r


def hint_primary_from_backup(app):
    """Gives every enabled shard primary hints with live files. A primary
    writes its hints every 5 minutes (Gazette's storeHintsInterval), and a
    new primary stores the hints it recovered from the log (live files and
    all) as backup 0: so move every shard once, then copy backup 0 to the
    primary key, where GetHints reads it."""
    app.gazctl(GAZCTL, "shards", "unassign", "-l", "store=sqlite,!idle")
    app.settle()
    for i in range(NSHARDS):
        base = "%s/chunks-part-%03d" % (app.hints, i)
        def backup():
            v = app.cluster.etcd.ctl("get", base + ".backup.0", "--print-value-only").strip()
            return v if '"live_nodes"' in v or '"liveNodes"' in v else None
        v = cf.wait_for(backup, 60, "backup hints of chunks-part-%03d" % i, interval=0.5)
        app.cluster.etcd.ctl("put", base + ".primary", v)


def test_prune_dry_run_same_as_gazette(app):
    sel = "store=sqlite"
    # Without primary hints, every log is skipped by both.
    go, gr = pruned_by_gazette(app, "-l", sel)
    ours, r = pruned_by_us(app, "-l", sel)
    assert go == ours == set() and "would prune" not in r.stdout, r.stdout
    hint_primary_from_backup(app)
    for _ in range(5):
        go, gr = pruned_by_gazette(app, "-l", sel)
        ours, r = pruned_by_us(app, "-l", sel)
        if go == ours:
            break
        time.sleep(1)
    assert ours == go, "ours:\n%s\nGazette's:\n%s" % (r.stdout + r.stderr, gr.stderr[-3000:])
    assert go, "nothing to prune: " + r.stdout
    # Logs of hinted shards are examined; the disabled shard never wrote
    # hints, so its log is not among them.
    for i in range(NSHARDS):
        assert "examples/stream-sum/recovery-logs/chunks-part-%03d: would prune" % i in r.stdout, r.stdout
    assert "chunks-part-099:" not in r.stdout
    # A real prune removes exactly those fragments from the store; once the
    # brokers' indexes refresh, neither gazctl finds anything to prune.
    r = app.gazctl(GAZCTL, "shards", "prune", "-l", sel, "--file-root", app.cluster.file_root)
    assert r.stdout.count("\npruned file:///") + r.stdout.startswith("pruned file:///") == len(go), r.stdout
    for journal, name in go:
        assert not os.path.exists(os.path.join(app.cluster.file_root, journal, name))
    def pruned_all():
        g, _ = pruned_by_gazette(app, "-l", sel)
        o, _ = pruned_by_us(app, "-l", sel)
        return not g and not o
    cf.wait_for(pruned_all, 30, "the fragment indexes to drop pruned fragments", interval=1)


def fragments(app, journal):
    out = app.gazctl(GAZCTL, "journals", "fragments", "-l", "name=" + journal, "-o", "json").stdout
    return sorted(ln for ln in out.splitlines() if ln.strip())


def test_prune_without_hints_deletes_nothing(app):
    log = "examples/stream-sum/recovery-logs/chunks-part-099"
    app.gazctl(GAZCTL, "journals", "append", "-l", "name=" + log, stdin="x" * 5000)
    # The journal's first write is rolled and persisted at once (case
    # BR-01): compare listings once it is, not across that persist.
    deadline = time.monotonic() + 30
    while True:
        before = fragments(app, log)
        if before and all("backing" in ln.lower() for ln in before):
            break
        assert time.monotonic() < deadline, before
        time.sleep(0.2)
    r = app.gazctl(GAZCTL, "shards", "prune", "-l", "id=chunks-part-099", "--file-root", app.cluster.file_root)
    assert "pruned" not in r.stdout, r.stdout
    assert fragments(app, log) == before


UUID = re.compile(r"^([0-9a-f]{8})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{12}),(.*)$")


def uuid_parts(line):
    m = UUID.match(line)
    assert m, line
    tl, tm, th, cs, node, rest = m.groups()
    th, cs = int(th, 16), int(cs, 16)
    clock = (th & 0x0FFF) << 48 | int(tm, 16) << 32 | int(tl, 16)
    return {"version": th >> 12, "variant": cs >> 14, "flags": cs & 0x3FF, "node": node,
            "clock": clock, "line": rest}


@pytest.mark.parametrize("args", [[], ["--skip-header"]], ids=["default", "skip-header"])
def test_attach_uuids(tmp_path, args, app):
    src = tmp_path / "in.csv"
    src.write_bytes(b"h1,h2\na,1\r\nb,2\n\nc,3")
    outs = []
    for exe in (GAZCTL, GO_GAZCTL):
        r = app.gazctl(exe, "attach-uuids", *args, str(src), str(src))
        outs.append([uuid_parts(ln) for ln in r.stdout.split("\n")[:-1]])
    ours, go = outs
    assert [p["line"] for p in ours] == [p["line"] for p in go]
    want = ["h1,h2", "a,1", "b,2", "", "c,3"]
    assert [p["line"] for p in ours] == (want[1:] * 2 if args else want * 2)
    for parts in outs:
        assert {(p["version"], p["variant"], p["flags"]) for p in parts} == {(1, 2, 0)}
        assert len({p["node"] for p in parts}) == 1  # one producer per run
        clocks = [p["clock"] for p in parts]
        assert clocks == sorted(clocks) and len(set(clocks)) == len(clocks)
        assert abs(clocks[0] / 1e7 - 12219292800 - time.time()) < 60  # a wall time, 100 ns since 1582
    assert ours[0]["node"] != go[0]["node"]


def test_attach_uuids_template_and_limits(tmp_path, app):
    tpl = '{"uuid": "{{.UUID}}","record":{{ .Line }}}\n'
    for exe in (GAZCTL, GO_GAZCTL):
        r = app.gazctl(exe, "attach-uuids", "--template", tpl, stdin='{"a":1}\n{"b":2}\n')
        docs = [json.loads(ln) for ln in r.stdout.splitlines()]
        assert [d["record"] for d in docs] == [{"a": 1}, {"b": 2}]
        assert all(uuid_parts(d["uuid"] + ",")["version"] == 1 for d in docs)
        r = app.gazctl(exe, "attach-uuids", "--max-length", "4", stdin="12345\n", check=False)
        assert r.returncode != 0 and "token too long" in r.stderr, r.stderr
