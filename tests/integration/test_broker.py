"""Core broker behaviours on real etcd and real broker processes."""
import os
import random
import threading
import time

import grpc
import pytest

import protocol_pb2 as pb
from conftest import wait_for
from gazpb import Client, spec, wait_assigned


@pytest.fixture
def one(cluster):
    b = cluster.start()
    c = Client(b.address)
    yield cluster, b, c
    c.close()


def test_apply_list_and_revision_checks(one):
    cluster, b, c = one
    r = c.apply(spec("test/apply/a"), spec("test/apply/b", labels=[("app.gazette.dev/tag", "x")]))
    assert r.status == pb.OK and r.header.etcd.revision > 0 and r.header.etcd.cluster_id != 0
    names = [j.spec.name for j in c.list()]
    assert names == ["test/apply/a", "test/apply/b"]
    # Create-only (expect 0) of an existing journal fails the transaction.
    assert c.apply(spec("test/apply/a")).status == pb.ETCD_TRANSACTION_FAILED
    rev = [j.mod_revision for j in c.list() if j.spec.name == "test/apply/a"][0]
    assert c.apply(spec("test/apply/a", replication=1), expect=rev).status == pb.OK
    # Unconditional delete.
    assert c.apply(deletes=[("test/apply/b", -1)]).status == pb.OK
    assert [j.spec.name for j in c.list()] == ["test/apply/a"]
    # Selectors: by label and by the name meta-label prefix.
    sel = pb.LabelSelector()
    sel.include.labels.add(name="prefix", value="test/apply/")
    assert [j.spec.name for j in c.list(sel)] == ["test/apply/a"]


@pytest.mark.parametrize("mutate,needle", [
    (lambda s: setattr(s, "name", "abc"), "Name"),
    (lambda s: setattr(s, "name", "a//b/c"), "Name"),
    (lambda s: setattr(s, "replication", 6), "Replication"),
    (lambda s: setattr(s.fragment, "length", 1023), "Length"),
    (lambda s: s.fragment.stores.__setitem__(0, "file:///no-slash"), "Stores"),
    (lambda s: s.fragment.refresh_interval.Clear(), "RefreshInterval"),
    (lambda s: setattr(s, "flags", 3), "Flags"),
    (lambda s: s.labels.labels.add(name="name", value="x"), "name"),
    (lambda s: s.labels.labels.add(name="a b", value="x"), "a b"),
])
def test_apply_rejects_invalid_specs(one, mutate, needle):
    cluster, b, c = one
    s = spec("test/valid/j")
    mutate(s)
    with pytest.raises(grpc.RpcError) as e:
        c.apply(s)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert needle.lower() in e.value.details().lower()
    assert c.list() == []  # nothing written


def test_append_then_read_back(one):
    cluster, b, c = one
    c.apply(spec("test/rw/j"))
    data = os.urandom(3 * (1 << 20) + 12345)
    r = c.append("test/rw/j", data)
    assert r.status == pb.OK and r.commit.begin == 0 and r.commit.end == len(data)
    assert r.header.process_id.suffix == b.id
    got, last = c.read_bytes("test/rw/j")
    assert got == data
    assert last.status == pb.OFFSET_NOT_YET_AVAILABLE and last.write_head == len(data)
    # Reads of a middle range, and end_offset.
    got, _ = c.read_bytes("test/rw/j", offset=1000, end_offset=5000)
    assert got == data[1000:5000]
    # A second append starts at the write head.
    r2 = c.append("test/rw/j", b"tail")
    assert (r2.commit.begin, r2.commit.end) == (len(data), len(data) + 4)


def test_read_chunks_are_bounded_and_framed(one):
    cluster, b, c = one
    c.apply(spec("test/frame/j"))
    c.append("test/frame/j", os.urandom(100000))
    rs = c.read("test/frame/j")
    assert rs[0].HasField("header") and rs[0].HasField("fragment")
    assert rs[0].fragment.begin <= rs[0].offset < rs[0].fragment.end <= rs[0].write_head
    chunks = [r for r in rs if r.content]
    assert all(len(r.content) <= 32736 for r in chunks)
    assert all(not r.HasField("header") and not r.HasField("fragment") for r in chunks)


def test_blocked_reader_wakes_on_commit(one):
    cluster, b, c = one
    c.apply(spec("test/wake/j"))
    wait_assigned(c, "test/wake/j")
    got, ready = [], threading.Event()

    def reader():
        for r in c.read_stream("test/wake/j", offset=0):
            ready.set()
            if r.content:
                got.append((time.time(), r.content))
                return
    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.5)
    sent = time.time()
    c.append("test/wake/j", b"hello")
    t.join(10)
    assert got and got[0][1] == b"hello"
    assert got[0][0] - sent < 1.0  # woken by the commit, not by polling


def test_concurrent_appenders_never_interleave(one):
    cluster, b, c = one
    c.apply(spec("test/conc/j"))
    n_writers, per = 6, 25
    errors = []

    def writer(w):
        cl = Client(b.address)
        try:
            for i in range(per):
                rec = ("<w%d-%d:" % (w, i)).encode() + bytes([65 + w]) * random.randint(10, 70000) + b">"
                r = cl.append("test/conc/j", rec)
                if r.status != pb.OK:
                    errors.append(r.status)
        except Exception as e:  # noqa
            errors.append(e)
        finally:
            cl.close()
    ts = [threading.Thread(target=writer, args=(w,)) for w in range(n_writers)]
    [t.start() for t in ts]
    [t.join(120) for t in ts]
    assert not errors
    data, _ = c.read_bytes("test/conc/j")
    recs = data.split(b">")[:-1]
    assert len(recs) == n_writers * per
    for rec in recs:
        head, body = rec.split(b":", 1)
        w = int(head[2:].split(b"-")[0])
        assert body == bytes([65 + w]) * len(body), "interleaved record"


def test_aborted_append_leaves_no_bytes(one):
    cluster, b, c = one
    c.apply(spec("test/abort/j"))
    c.append("test/abort/j", b"committed;")

    # Half-close without the empty commit message: rolled back, RPC error.
    def no_intent():
        yield pb.AppendRequest(journal="test/abort/j")
        yield pb.AppendRequest(content=b"never-visible")
    with pytest.raises(grpc.RpcError):
        c._append(no_intent(), timeout=10)

    # Client cancels mid-stream.
    gate = threading.Event()

    def cancelled():
        yield pb.AppendRequest(journal="test/abort/j")
        yield pb.AppendRequest(content=b"also-never-visible")
        gate.wait(5)
    fut = c._append.future(cancelled(), timeout=30)
    time.sleep(0.5)
    fut.cancel()
    gate.set()

    # A message after the commit intent is a protocol error.
    def after_intent():
        yield pb.AppendRequest(journal="test/abort/j")
        yield pb.AppendRequest(content=b"nope")
        yield pb.AppendRequest()
        yield pb.AppendRequest(content=b"extra")
    with pytest.raises(grpc.RpcError) as e:
        c._append(after_intent(), timeout=10)
    assert "EOF" in e.value.details()

    r = c.append("test/abort/j", b"next")
    assert r.commit.begin == len(b"committed;")
    data, _ = c.read_bytes("test/abort/j")
    assert data == b"committed;next"


def test_stalled_appender_is_aborted(one):
    cluster, b, c = one
    c.apply(spec("test/stall/j"))
    wait_assigned(c, "test/stall/j")

    def stalled():
        yield pb.AppendRequest(journal="test/stall/j")
        yield pb.AppendRequest(content=b"x" * 10)
        time.sleep(4)  # far below the 64 KiB/s minimum rate
        yield pb.AppendRequest()
    with pytest.raises(grpc.RpcError) as e:
        c._append(stalled(), timeout=20)
    assert "minimum append data rate" in e.value.details()
    assert c.read_bytes("test/stall/j")[0] == b""
    assert c.append("test/stall/j", b"ok").commit.begin == 0


def test_status_errors_as_gazette(one):
    cluster, b, c = one
    c.apply(spec("test/st/j"))
    c.append("test/st/j", b"0123456789")
    r = c.append("test/st/j", b"x", offset=5)
    assert r.status == pb.WRONG_APPEND_OFFSET and not r.HasField("commit")
    r = c.append("test/st/j", b"x", offset=10)
    assert r.status == pb.OK and r.commit.begin == 10
    r = c.append("test/st/missing", b"x")
    assert r.status == pb.JOURNAL_NOT_FOUND
    rs = c.read("test/st/missing")
    assert len(rs) == 1 and rs[0].status == pb.JOURNAL_NOT_FOUND and rs[0].HasField("header")
    # Registers: union on a non-empty append, then a mismatching check.
    u = pb.LabelSet()
    u.labels.add(name="owner", value="a")
    r = c.append("test/st/j", b"y", union_registers=u)
    assert r.status == pb.OK and [(l.name, l.value) for l in r.registers.labels] == [("owner", "a")]
    chk = pb.LabelSelector()
    chk.include.labels.add(name="owner", value="b")
    r = c.append("test/st/j", b"z", check_registers=chk)
    assert r.status == pb.REGISTER_MISMATCH
    assert [(l.name, l.value) for l in r.registers.labels] == [("owner", "a")]
    # Register changes need content.
    with pytest.raises(grpc.RpcError) as e:
        c.append("test/st/j", b"", union_registers=u)
    assert "non-empty" in e.value.details()
    # Non-blocking read at the head.
    rs = c.read("test/st/j", offset=-1)
    assert rs[-1].status == pb.OFFSET_NOT_YET_AVAILABLE and rs[-1].offset == rs[-1].write_head == 12


def test_journal_flags(one):
    cluster, b, c = one
    c.apply(spec("test/flags/ro", flags=pb.JournalSpec.O_RDONLY), spec("test/flags/wo", flags=pb.JournalSpec.O_WRONLY))
    assert c.append("test/flags/ro", b"x").status == pb.NOT_ALLOWED
    assert c.append("test/flags/ro", b"").status == pb.OK  # an empty append is a barrier
    assert c.read("test/flags/wo")[0].status == pb.NOT_ALLOWED


def test_history_survives_restart_with_empty_scratch(one):
    cluster, b, c = one
    c.apply(spec("test/hist/j", codec=pb.GZIP, length=64 * 1024))
    data = os.urandom(200000) + b"the end"
    c.append("test/hist/j", data)
    assert b.stop() == 0
    b2 = cluster.start()
    c2 = Client(b2.address)
    wait_assigned(c2, "test/hist/j")
    got, last = c2.read_bytes("test/hist/j")
    assert got == data and last.write_head == len(data)
    # Appends continue at the right offset.
    assert c2.append("test/hist/j", b"more").commit.begin == len(data)
    frags = c2.fragments("test/hist/j").fragments
    assert frags and frags[0].spec.backing_store == "file:///"
    c2.close()


def test_lone_broker_exits_promptly_persisting_spools(one):
    cluster, b, c = one
    c.apply(spec("test/exit/j", length=1 << 30))  # never rolls by size
    c.append("test/exit/j", b"a" * 1000)
    c.append("test/exit/j", b"b" * 1000)
    t0 = time.time()
    assert b.stop() == 0
    assert time.time() - t0 < 20
    names = []
    for root, _, files in os.walk(os.path.join(cluster.file_root, "test/exit/j")):
        names += files
    ends = sorted(int(n.split("-")[1], 16) for n in names)
    assert ends and ends[-1] == 2000, names
    # Its member key and assignments went with its lease.
    keys = cluster.etcd.ctl("get", "--prefix", cluster.prefix, "--keys-only")
    assert "/members/" not in keys and "/assign/" not in keys


def test_debug_endpoints(one):
    cluster, b, c = one
    import urllib.request
    assert urllib.request.urlopen(b.address + "/debug/ready").status == 200
    body = urllib.request.urlopen(b.address + "/debug/metrics").read().decode()
    assert "process_resident_memory_bytes" in body


def test_broker_max_append_rate_only_lowers_a_journal_limit(cluster):
    """--broker.max-append-rate lowers a journal's own non-zero
    max_append_rate; a journal with none stays unlimited (facts §2.1.1),
    on the grouped append path as on the streaming one."""
    b = cluster.start(extra=("--broker.max-append-rate", "1000"))
    c = Client(b.address)
    c.apply(spec("rate/free"), spec("rate/capped", max_append_rate=1 << 20))
    for j in ("rate/free", "rate/capped"):
        wait_assigned(c, j)
    for i in range(5):  # small plain appends: the grouped path
        r = c.append("rate/free", b"x" * 4096)
        assert r.status == pb.OK and r.delayed_chunks == 0, r
    delayed = 0
    for i in range(5):  # the flag (1000 B/s) lowers the journal's 1 MiB/s
        r = c.append("rate/capped", b"y" * 4096)
        assert r.status == pb.OK, r
        delayed += r.delayed_chunks
    assert delayed > 0


@pytest.mark.parametrize("pause", [0.03, 0.1])
@pytest.mark.parametrize("where", ["first", "middle", "intent"])
def test_paced_large_append_commits(one, pause, where):
    """A 3 MiB append sent in 1 MiB chunks commits whether the client pauses
    before its first chunk, between chunks or before its commit intent: the
    read-ahead of small appends gives up waiting after 20 ms and the
    ordinary path must take over the stream exactly where it left off."""
    cluster, b, c = one
    name = "test/paced/%s-%d" % (where, int(pause * 1000))
    c.apply(spec(name))
    wait_assigned(c, name)
    data = bytes(random.Random(7).getrandbits(8) for _ in range(1 << 16)) * 48
    chunks = [data[i:i + (1 << 20)] for i in range(0, len(data), 1 << 20)]

    def paced():
        yield pb.AppendRequest(journal=name)
        for i, ch in enumerate(chunks):
            if (where == "first" and i == 0) or (where == "middle" and i > 0):
                time.sleep(pause)
            yield pb.AppendRequest(content=ch)
        if where == "intent":
            time.sleep(pause)
        yield pb.AppendRequest()
    r = c._append(paced(), timeout=20)
    assert r.status == pb.OK and (r.commit.begin, r.commit.end) == (0, len(data)), r
    assert c.read_bytes(name)[0] == data
