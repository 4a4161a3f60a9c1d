"""`gazctl journals prune` (case BR-22, facts §5.5, §9.1) against one of our
brokers with a file:// store: only persisted fragments older than the
journal's retention are deleted; the spool is never touched; FULL-suspended
journals are skipped; retention 0 keeps everything; a failed delete is
reported by fragment, not counted as pruned, and fails the run."""
import os
import re
import shutil
import subprocess
import time

import protocol_pb2 as pb
from conftest import GAZCTL, wait_for
from gazpb import Client, spec, wait_assigned

LABELS = (("app", "pr"),)


def gazctl(address, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
    env["BROKER_ADDRESS"] = address
    env["HOME"] = "/nonexistent"
    return subprocess.run([GAZCTL] + list(args), capture_output=True, text=True, env=env, timeout=60)


def store_files(root, journal):
    d = os.path.join(root, journal)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def persisted(client, journal):
    return [f.spec for f in client.fragments(journal).fragments if f.spec.backing_store]


def local(client, journal):
    return [f.spec for f in client.fragments(journal).fragments if not f.spec.backing_store]


def append_persisted(client, root, journal, chunks):
    """Appends `chunks` one by one and waits until a fragment is persisted
    (in the store and, with its backing store, in the index)."""
    for chunk in chunks:
        assert client.append(journal, chunk).status == pb.OK
    wait_for(lambda: store_files(root, journal) and persisted(client, journal), 20,
             "%s to persist a fragment" % journal)


def summary(out, journal):
    m = re.search(r"^%s: (.*)$" % re.escape(journal), out, re.M)
    assert m, "no summary line for %s in:\n%s" % (journal, out)
    return m.group(1)


def setup_journals(cluster):
    b = cluster.start()
    c = Client(b.address)
    c.apply(spec("pr/j", retention_s=1, labels=LABELS), spec("pr/full", labels=LABELS),
            spec("pr/zero", labels=LABELS))
    for name in ("pr/j", "pr/full", "pr/zero"):
        wait_assigned(c, name)
    # An empty journal suspends fully at once.
    c.append("pr/full", b"", suspend=pb.AppendRequest.SUSPEND_IF_FLUSHED)
    full = [j.spec for j in c.list() if j.spec.name == "pr/full"][0]
    assert full.suspend.level == pb.JournalSpec.Suspend.FULL
    root = cluster.file_root
    append_persisted(c, root, "pr/j", [b"a" * 100, b"b" * 50])
    append_persisted(c, root, "pr/zero", [b"z" * 70, b"y" * 30])
    return b, c


def test_BR22_prune_deletes_only_old_persisted_fragments(cluster):
    b, c = setup_journals(cluster)
    root = cluster.file_root
    # One more record that stays in the spool (the spool is the one local
    # fragment: it keeps growing until it reaches the fragment length).
    assert c.append("pr/j", b"spool-record\n").status == pb.OK
    spool = local(c, "pr/j")
    assert len(spool) == 1 and spool[0].end == c.fragments("pr/j").fragments[-1].spec.end
    old = persisted(c, "pr/j")
    old_files = store_files(root, "pr/j")
    zero_files = store_files(root, "pr/zero")
    assert old and zero_files
    time.sleep(2)

    # Dry run: prints what it would do, deletes nothing.
    p = gazctl(b.address, "journals", "prune", "-l", "app=pr", "--dry-run", "--file-root", root)
    assert p.returncode == 0, p.stderr
    assert summary(p.stdout, "pr/j").startswith(
        "would prune %d fragments (%d bytes), would keep 1 fragments (%d bytes)"
        % (len(old), sum(f.end - f.begin for f in old), spool[0].end - spool[0].begin))
    assert p.stdout.count("would prune file:///pr/j/") == len(old)
    assert summary(p.stdout, "pr/full") == "skipped: journal is FULL-suspended"
    assert summary(p.stdout, "pr/zero").startswith("would prune 0 fragments (0 bytes)")
    assert "retention unset: kept forever" in summary(p.stdout, "pr/zero")
    assert "skipping journal" in p.stderr and "pr/full" in p.stderr  # the logged reason
    assert store_files(root, "pr/j") == old_files and store_files(root, "pr/zero") == zero_files

    # The real run.
    p = gazctl(b.address, "journals", "prune", "-l", "app=pr", "--file-root", root)
    assert p.returncode == 0, p.stderr
    assert summary(p.stdout, "pr/j").startswith("pruned %d fragments" % len(old))
    assert summary(p.stdout, "pr/full") == "skipped: journal is FULL-suspended"
    assert summary(p.stdout, "pr/zero").startswith("pruned 0 fragments (0 bytes), kept ")
    assert store_files(root, "pr/j") == []
    assert store_files(root, "pr/zero") == zero_files
    # The spool was not touched: its content still reads back.
    data, _ = c.read_bytes("pr/j", offset=spool[0].begin)
    assert data.endswith(b"spool-record\n") and len(data) == spool[0].end - spool[0].begin
    data, _ = c.read_bytes("pr/zero")
    assert data == b"z" * 70 + b"y" * 30


def test_BR22_prune_file_store_needs_file_root(cluster):
    b, c = setup_journals(cluster)
    files = store_files(cluster.file_root, "pr/j")
    time.sleep(2)
    p = gazctl(b.address, "journals", "prune", "-l", "app=pr")
    assert p.returncode == 1
    assert "needs --file-root" in p.stderr
    assert "failed to prune fragment file:///pr/j/%s" % files[0] in p.stderr
    assert summary(p.stdout, "pr/j").startswith("pruned 0 fragments (0 bytes)")
    assert store_files(cluster.file_root, "pr/j") == files


def test_BR22_prune_reports_failed_delete_and_continues(cluster):
    b = cluster.start()
    c = Client(b.address)
    # A long refresh interval keeps the index from noticing the sabotage.
    c.apply(spec("pr/bad", retention_s=1, refresh_s=3600, labels=LABELS),
            spec("pr/j", retention_s=1, labels=LABELS),
            spec("pr/young", retention_s=3600, labels=LABELS))
    for name in ("pr/bad", "pr/j", "pr/young"):
        wait_assigned(c, name)
    root = cluster.file_root
    append_persisted(c, root, "pr/bad", [b"a" * 100, b"b" * 50])
    append_persisted(c, root, "pr/j", [b"c" * 100, b"d" * 50])
    append_persisted(c, root, "pr/young", [b"e" * 100, b"f" * 50])
    young = store_files(root, "pr/young")
    bad = persisted(c, "pr/bad")
    # Make the first fragment's path a non-empty directory: unlink fails
    # (EISDIR), even as root.
    victim = os.path.join(root, "pr/bad", store_files(root, "pr/bad")[0])
    os.unlink(victim)
    os.makedirs(os.path.join(victim, "keep"))
    time.sleep(2)
    p = gazctl(b.address, "journals", "prune", "-l", "app=pr", "--file-root", root)
    assert p.returncode == 1
    assert "failed to prune fragment" in p.stderr and "pr/bad" in p.stderr
    assert "failed to prune fragment file:///pr/bad/%s" % os.path.basename(victim) in p.stderr
    assert "prune incomplete: 1 fragments could not be pruned" in p.stderr
    n = len(bad)
    line = summary(p.stdout, "pr/bad")
    assert line.startswith("pruned %d fragments" % (n - 1)), line
    assert "failed 1 fragments (%d bytes)" % (bad[0].end - bad[0].begin) in line
    assert os.path.basename(victim) not in p.stdout  # not reported as pruned
    # The run went on with the other journal.
    assert summary(p.stdout, "pr/j").startswith("pruned ")
    assert not summary(p.stdout, "pr/j").startswith("pruned 0 ")
    # Younger than its retention: kept.
    assert summary(p.stdout, "pr/young").startswith("pruned 0 fragments (0 bytes)")
    assert store_files(root, "pr/young") == young
    assert os.path.isdir(victim)
    shutil.rmtree(victim)
