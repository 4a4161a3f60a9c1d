"""The message layer (message/) against a real broker: published messages
read back exactly once by a read-committed reader, transactions held until
their ACK and dropped without one, duplicated bytes dropped, a transaction
longer than the reader's ring replayed from the journal, modulo mapping
spreading messages over journals as Gazette's does, and bad input skipped
with a warning.

Driven through tests/tools/message_probe.c (bin/message-probe)."""
import json
import os
import subprocess

from conftest import BIN, wait_for
from gazpb import Client, spec
from gazpb import wait_route

PROBE = os.path.join(BIN, "message-probe")
JSON = [("content-type", "application/x-ndjson")]


def probe(*args, env=None, timeout=120, check=True):
    e = dict(os.environ, **(env or {}))
    r = subprocess.run([PROBE] + [str(a) for a in args], capture_output=True, env=e, timeout=timeout)
    if check:
        assert r.returncode == 0, r.stderr.decode()
    return r


def read(addr, journal, mode, env=None):
    """[(begin, end, flags, doc)] read by the probe, and the skipped count."""
    r = probe("read", addr, journal, mode, env=env)
    rows, skipped = [], None
    for ln in r.stdout.decode().splitlines():
        if ln.startswith("skipped "):
            skipped = int(ln.split()[1])
            continue
        b, e, f, doc = ln.split(" ", 3)
        rows.append((int(b), int(e), int(f), json.loads(doc)))
    return rows, skipped, r.stderr.decode()


def data(rows):
    """The non-ACK messages' (stream, seq)."""
    return [(d["stream"], d["seq"]) for _, _, f, d in rows if f != 2]


def journals(cluster, *names):
    b = cluster.start()
    c = Client(b.address)
    c.apply(*[spec(n, labels=JSON) for n in names])
    for n in names:
        wait_route(c, n, 1)
    return b, c


def held_publisher(cluster, b, journal, count, txn):
    """A publisher of `count` messages in transactions of `txn` whose last
    transaction's ACKs wait; the returned function releases them and waits
    for the publisher to finish."""
    hold = os.path.join(cluster.dir, "ack-" + journal.replace("/", "-"))
    p = subprocess.Popen([PROBE, "publish", b.address, "name=" + journal, str(count), str(txn)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, PROBE_HOLD_ACK=hold))

    def release():
        open(hold, "w").close()
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()
    return release


def raw(c, journal):
    return b"".join(r.content for r in c.read(journal) if r.content)


def test_committed_messages_read_once_and_mapped_like_gazette(cluster):
    """60 committed messages over three journals by the modulo of their
    stream: every stream lands on the journal Gazette's ModuloMapping picks
    (FNV-1a-32 of the stream, mod 3, in name order), each message once;
    then the journals' bytes appended again (an at-least-once retry)
    change nothing for a read-committed reader, while a read-uncommitted
    one sees every copy."""
    b, c = journals(cluster, "msg/a", "msg/b", "msg/c")
    r = probe("publish", b.address, "name in (msg/a, msg/b, msg/c)", 60, 0)
    assert "published 60" in r.stdout.decode()

    def fnv(s):
        h = 2166136261
        for ch in s.encode():
            h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
        return h

    names = ["msg/a", "msg/b", "msg/c"]
    seen = []
    for j in names:
        rows, skipped, _ = read(b.address, j, "committed")
        assert skipped == 0
        for stream, seq in data(rows):
            assert names[fnv(stream) % 3] == j, (stream, j)
            seen.append(seq)
        # Offsets tile the journal: each message ends where the next begins.
        assert all(rows[i][1] == rows[i + 1][0] for i in range(len(rows) - 1))
    assert sorted(seen) == list(range(60))

    before = {j: read(b.address, j, "committed")[0] for j in names}
    for j in names:
        c.append(j, [raw(c, j)])
    for j in names:
        rows, _, _ = read(b.address, j, "committed")
        assert data(rows) == data(before[j])
        unc, _, _ = read(b.address, j, "uncommitted")
        assert len(data(unc)) == 2 * len(data(before[j]))


def test_transactions_commit_at_their_ack_and_roll_back_without(cluster):
    """Transactions of 5: a read-committed reader delivers a transaction's
    messages only once its ACK is in the journal, each once, followed by
    the ACK (the fourth's is held back, then written). A second publisher
    dies before its ACK: its messages are never delivered, though
    read-uncommitted shows them."""
    b, c = journals(cluster, "txn/a")
    release = held_publisher(cluster, b, "txn/a", 20, 5)
    # The first three transactions commit; the fourth's messages are in
    # the journal, its ACK held back.
    wait_for(lambda: len(data(read(b.address, "txn/a", "uncommitted")[0])) == 20, timeout=60,
             what="all 20 messages written")
    rows, _, _ = read(b.address, "txn/a", "committed")
    assert [s for _, s in data(rows)] == list(range(15))
    assert sum(1 for r in rows if r[2] == 2) == 3  # the three ACKs
    release()
    rows, _, _ = read(b.address, "txn/a", "committed")
    assert [s for _, s in data(rows)] == list(range(20))

    # A publisher that dies before its ACK: nothing of it is delivered.
    probe("publish", b.address, "name=txn/a", 5, 5, env={"PROBE_NO_LAST_ACK": "1"})
    rows, _, _ = read(b.address, "txn/a", "committed")
    assert [s for _, s in data(rows)] == list(range(20))
    assert len(data(read(b.address, "txn/a", "uncommitted")[0])) == 25


def test_a_transaction_longer_than_the_ring_is_replayed(cluster):
    """A transaction of 12 messages held open while another producer
    commits 12 messages to the same journal, read with a ring of 4: the
    transaction's start has left the ring when its ACK arrives, so the
    reader re-reads it from the journal; every message is delivered
    once, the other producer's as they were read and the transaction's at
    its ACK."""
    b, c = journals(cluster, "ring/a")
    release = held_publisher(cluster, b, "ring/a", 12, 12)
    wait_for(lambda: len(data(read(b.address, "ring/a", "uncommitted")[0])) == 12, timeout=60,
             what="the open transaction written")
    probe("publish", b.address, "name=ring/a", 12, 0)
    release()
    for ring in ("4", "0"):
        rows, _, _ = read(b.address, "ring/a", "committed", env={"PROBE_RING": ring})
        got = data(rows)
        assert sorted(s for _, s in got) == sorted(list(range(12)) * 2), ring
        # The committed producer's 12 come first (read before the ACK),
        # then the transaction's 12 in their order.
        assert [s for _, s in got[12:]] == list(range(12)), ring


def test_bad_messages_are_skipped_with_a_warning(cluster):
    """Lines that are not JSON, a JSON message without a UUID, and a line
    cut short at the end of the journal: the reader skips the first two
    with a warning each, reads the good messages around them, and ends
    at the partial line as at the write head (it may still be
    completed)."""
    b, c = journals(cluster, "bad/a")
    probe("publish", b.address, "name=bad/a", 3, 0)
    good = raw(c, "bad/a")
    c.append("bad/a", [b"{not json\n", b'{"stream":"x","seq":99}\n'])
    probe("publish", b.address, "name=bad/a", 2, 0)
    c.append("bad/a", [b'{"stream":"cut'])
    rows, skipped, err = read(b.address, "bad/a", "committed")
    assert [s for _, s in data(rows)] == [0, 1, 2, 0, 1]
    assert skipped == 2
    assert err.count("skipping a message that does not decode") == 2
    assert "message has no UUID" in err and "invalid JSON message" in err
    assert rows[0][0] == 0 and rows[2][1] == len(good)
