"""Thousands of blocking readers at the write head (issue 39): a waiting
Read holds no handler thread, so appends and control calls are answered
at once beside them, and one commit wakes every reader."""
import os
import subprocess
import threading
import time
import urllib.request

import grpc
import pytest

import protocol_pb2 as pb
from conftest import GAZETTE
from gazpb import Client, spec, wait_assigned

READERS = int(os.environ.get("GAZ_TEST_READERS", "5000"))


def thread_names(pid):
    names = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                n = f.read().strip()
        except OSError:
            continue
        names[n] = names.get(n, 0) + 1
    return sorted(names.items(), key=lambda kv: -kv[1])


def threads_of(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(ln.split()[1] for ln in f if ln.startswith("Threads:")))


def threads_fall_to(b, limit, where, timeout=30):
    """Waits until broker `b` runs at most `limit` OS threads (the idle
    ones a burst started exit after GAZ_RPC_IDLE_THREAD_MS)."""
    deadline = time.monotonic() + timeout
    while threads_of(b.proc.pid) > limit:
        assert time.monotonic() < deadline, "%d threads %s: %s" % (
            threads_of(b.proc.pid), where, thread_names(b.proc.pid))
        time.sleep(0.2)


def next_records(calls, per_thread=500):
    """The next content response of each Read call (None if its stream
    ended first, the error's text if it failed), taken by threads that each drain per_thread calls in
    turn."""
    out = [None] * len(calls)

    def drain(lo, hi):
        for i in range(lo, hi):
            try:
                for r in calls[i]:
                    if r.content:
                        out[i] = r.content
                        break
            except grpc.RpcError as e:  # reported by the caller's assertion
                out[i] = "%s: %s" % (e.code(), e.details())
    threads = [threading.Thread(target=drain, args=(i, min(i + per_thread, len(calls))), daemon=True)
               for i in range(0, len(calls), per_thread)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def test_thousands_of_blocking_reads_leave_appends_and_control_calls_answered(cluster):
    # Idle handler threads exit after a second (30 s by default), so the
    # count below shows what waiting readers hold, not what the burst of
    # their arrival started.
    b = cluster.start(env={"GAZ_RPC_IDLE_THREAD_MS": "1000"})
    c = Client(b.address)
    c.apply(spec("many/readers"), spec("many/other"))
    wait_assigned(c, "many/readers")
    wait_assigned(c, "many/other")
    assert c.append("many/readers", b"first\n").status == pb.OK
    # Every reader reads from the first byte, then waits at the head.
    calls = [c._read(pb.ReadRequest(journal="many/readers", offset=0, block=True), timeout=300,
                     metadata=c._md("Read", "many/readers")) for _ in range(READERS)]
    first = next_records(calls)
    assert first.count(b"first\n") == READERS, "%d readers missed the first record: %s" % (
        READERS - first.count(b"first\n"), sorted(set(map(repr, first)))[:5])
    # Now every reader waits at the write head. Appends to another journal,
    # a List and an Apply answer within a second each.
    for what, fn in (("append", lambda: c.append("many/other", b"x\n", timeout=5)),
                     ("list", lambda: c.list(timeout=5)),
                     ("apply", lambda: c.apply(spec("many/third"), timeout=5))):
        t0 = time.monotonic()
        fn()
        took = time.monotonic() - t0
        assert took < 1.0, "%s took %.2f s beside %d waiting readers" % (what, took, READERS)
    # Waiting readers hold no threads: once the handler threads their
    # arrival started have idled out, the broker runs a few dozen.
    threads_fall_to(b, 64, "beside %d waiting readers" % READERS)
    # One commit wakes them all: each gets the new record.
    assert c.append("many/readers", b"second\n").status == pb.OK
    second = next_records(calls)
    assert second.count(b"second\n") == READERS, "%d readers missed the second record: %s" % (
        READERS - second.count(b"second\n"), sorted(set(map(repr, second)))[:5])
    for call in calls:
        call.cancel()
    # Cancelled readers end: the broker serves on.
    assert c.append("many/other", b"y\n").status == pb.OK
    assert b.proc.poll() is None


def own_connection(address):
    """A channel on a connection of its own (grpc shares one per target
    between channels otherwise)."""
    return grpc.insecure_channel(address.replace("http://", ""),
                                 options=[("grpc.use_local_subchannel_pool", 1)])


def open_read(ch, journal):
    read = ch.unary_stream("/protocol.Journal/Read", pb.ReadRequest.SerializeToString,
                           pb.ReadResponse.FromString)
    return read(pb.ReadRequest(journal=journal, offset=0, block=True), timeout=120)


def refused(call, bound):
    """The Read `call` is answered RESOURCE_EXHAUSTED within a second,
    naming `bound`."""
    t0 = time.monotonic()
    try:
        for _ in call:
            raise AssertionError("a Read past the bounds was served")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (e.code(), e.details())
        assert bound in e.details(), e.details()
    assert time.monotonic() - t0 < 1.0


def test_reads_past_the_bounds_are_refused_at_once_and_the_rest_served(cluster):
    # Bad bounds are refused at start, naming the flag.
    r = subprocess.run([GAZETTE, "serve", "--broker.max-read-streams", "-1"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "--broker.max-read-streams -1 out of range" in r.stderr, r.stderr
    b = cluster.start(extra=["--broker.max-read-streams", "12",
                             "--broker.max-read-streams-per-conn", "8"])
    c = Client(b.address)
    c.apply(spec("bounded/readers"), spec("bounded/other"))
    wait_assigned(c, "bounded/readers")
    wait_assigned(c, "bounded/other")
    assert c.append("bounded/readers", b"first\n").status == pb.OK
    one, two, three = (own_connection(b.address) for _ in range(3))
    # Eight on one connection fill its bound; a ninth there is refused.
    mine = [open_read(one, "bounded/readers") for _ in range(8)]
    assert next_records(mine) == [b"first\n"] * 8
    refused(open_read(one, "bounded/readers"),
            "this connection has its limit of concurrent streams open (8)")
    # Four more on another connection fill the broker's; a Read on a
    # third is refused.
    theirs = [open_read(two, "bounded/readers") for _ in range(4)]
    assert next_records(theirs) == [b"first\n"] * 4
    refused(open_read(three, "bounded/readers"),
            "the server has its limit of concurrent streams open (12)")
    # Appends and control calls are not counted: answered at once.
    for what, fn in (("append", lambda: c.append("bounded/other", b"x\n", timeout=5)),
                     ("list", lambda: c.list(timeout=5)),
                     ("apply", lambda: c.apply(spec("bounded/third"), timeout=5))):
        t0 = time.monotonic()
        fn()
        assert time.monotonic() - t0 < 1.0, what
    # The twelve admitted read on: each gets the next commit.
    assert c.append("bounded/readers", b"second\n").status == pb.OK
    assert next_records(mine + theirs) == [b"second\n"] * 12
    # A reader that ends makes room on its connection, and in all.
    mine.pop().cancel()
    deadline = time.monotonic() + 10
    while True:
        again = open_read(one, "bounded/readers")
        got = next_records([again])[0]
        if got == b"first\n":
            break
        assert "RESOURCE_EXHAUSTED" in str(got) and time.monotonic() < deadline, got
        time.sleep(0.1)
    m = urllib.request.urlopen(b.address + "/debug/metrics", timeout=5).read().decode()
    exhausted = [ln for ln in m.splitlines() if ln.startswith("grpc_server_handled_total{")
                 and 'grpc_method="Read"' in ln and 'grpc_code="ResourceExhausted"' in ln]
    assert exhausted and float(exhausted[0].split()[-1]) >= 2, exhausted
    for call in mine + theirs + [again]:
        call.cancel()
    for ch in (one, two, three):
        ch.close()


def test_proxied_blocking_reads_hold_no_thread_on_the_proxy(cluster):
    """A Read sent to a broker that does not serve the journal is proxied
    to one that does; at the write head the proxy waits for the upstream
    parked, holding no thread of its own."""
    env = {"GAZ_RPC_IDLE_THREAD_MS": "1000"}
    brokers = [cluster.start(env=env) for _ in range(2)]
    c = Client(brokers[0].address)
    c.apply(spec("many/proxied"))
    j = wait_assigned(c, "many/proxied")
    serving = j.route.members[j.route.primary].suffix
    proxy = next(b for b in brokers if b.id != serving)
    pc = Client(proxy.address)
    assert pc.append("many/proxied", b"first\n").status == pb.OK
    n = READERS // 5
    calls = [pc._read(pb.ReadRequest(journal="many/proxied", offset=0, block=True), timeout=300)
             for _ in range(n)]
    first = next_records(calls)
    assert first.count(b"first\n") == n, sorted(set(map(repr, first)))[:5]
    threads_fall_to(proxy, 64, "on the proxy beside %d proxied readers" % n)
    assert c.append("many/proxied", b"second\n").status == pb.OK
    second = next_records(calls)
    assert second.count(b"second\n") == n, sorted(set(map(repr, second)))[:5]
    for call in calls:
        call.cancel()
    assert pc.append("many/proxied", b"third\n").status == pb.OK
    assert all(b.proc.poll() is None for b in brokers)


class PausedAppends:
    """One streaming Append per entry of `journals` (a journal may repeat),
    each sending its first chunk (`first % i`), then pausing until
    resume(), then its last (`last % i`) and the commit intent."""

    def __init__(self, c, journals, first, last):
        self.c, self.journals, self.first, self.last = c, journals, first, last
        self.go = threading.Event()
        self.sent = [threading.Event() for _ in journals]
        self.results = [None] * len(journals)
        self.threads = [threading.Thread(target=self._append, args=(i,), daemon=True)
                        for i in range(len(journals))]
        for t in self.threads:
            t.start()

    def _chunks(self, i):
        yield pb.AppendRequest(journal=self.journals[i])
        yield pb.AppendRequest(content=self.first % i)
        self.sent[i].set()
        self.go.wait(120)
        yield pb.AppendRequest(content=self.last % i)
        yield pb.AppendRequest()

    def _append(self, i):
        try:
            self.results[i] = self.c._append(self._chunks(i), timeout=120)
        except grpc.RpcError as e:  # reported by resume's assertion
            self.results[i] = e

    def none_ended(self):
        assert not any(self.results), [r for r in self.results if r][:3]

    def resume(self):
        """Lets every append go on; asserts each committed."""
        self.go.set()
        for t in self.threads:
            t.join(120)
        bad = [r for r in self.results if not isinstance(r, pb.AppendResponse) or r.status != pb.OK]
        assert not bad, bad[:3]


def test_streaming_appends_waiting_for_the_token_hold_no_thread(cluster):
    """Appends that stream their content (not read whole ahead) queue for
    the journal's append token: one streams, and the rest wait parked,
    holding no thread, then commit in turn once their clients finish."""
    env = {"GAZ_RPC_IDLE_THREAD_MS": "1000"}
    # No minimum rate: the token holder's client pauses mid-append.
    b = cluster.start(env=env, extra=["--broker.min-append-rate", "0"])
    c = Client(b.address)
    c.apply(spec("many/appends"))
    wait_assigned(c, "many/appends")
    n = 200
    appends = PausedAppends(c, ["many/appends"] * n, b"part-%03d ", b"rest-%03d\n")
    threads_fall_to(b, 64, "beside %d appends waiting for the token" % n)
    appends.none_ended()
    appends.resume()
    data, _ = c.read_bytes("many/appends")
    lines = data.decode().splitlines()
    assert sorted(lines) == sorted("part-%03d rest-%03d" % (i, i) for i in range(n)), lines[:5]


@pytest.mark.parametrize("via", ["primary", "proxy"])
def test_appends_streaming_to_many_journals_hold_no_thread(cluster, via):
    """Appends that hold their journals' tokens mid-content (their clients
    pause between chunks) wait for each next chunk parked: the broker's
    threads stay few beside hundreds of them, other appends and control
    calls answer within a second, and each commits whole once its client
    goes on. Sent to a broker that is not the journals' primary, the
    proxy relays each chunk as it comes and holds no thread either."""
    env = {"GAZ_RPC_IDLE_THREAD_MS": "1000"}
    extra = ["--broker.min-append-rate", "0"]
    brokers = [cluster.start(env=env, extra=extra) for _ in range(1 if via == "primary" else 2)]
    c = Client(brokers[0].address)
    n = 200
    # Through the proxy: enough journals that the second broker serves n
    # of them, however the allocator splits them.
    names = ["many/streams-%03d" % i for i in range(n if via == "primary" else 2 * n + 150)]
    for i in range(0, len(names), 100):
        c.apply(*[spec(j) for j in names[i:i + 100]], timeout=60)
    c.apply(spec("many/aside"))
    deadline = time.monotonic() + 60
    while True:
        routes = {j.spec.name: j.route for j in c.list(timeout=30) if j.route.primary >= 0}
        if all(j in routes for j in names + ["many/aside"]):
            break
        assert time.monotonic() < deadline, "%d of %d journals routed" % (len(routes), len(names) + 1)
        time.sleep(0.1)
    if via == "proxy":
        # The journals the second broker serves, appended to through the first.
        names = [j for j in names if routes[j].members[routes[j].primary].suffix != brokers[0].id][:n]
        assert len(names) == n, "the second broker serves %d journals" % len(names)
    appends = PausedAppends(c, names, b"head-%03d ", b"tail-%03d\n")
    for e in appends.sent:
        assert e.wait(30)
    # Each append's first chunk is in its journal's spool once it holds
    # the token; the threads its handler took have idled out.
    for b in brokers:
        threads_fall_to(b, 64, "on %s beside %d appends paused mid-content" % (b.id, n))
    appends.none_ended()
    for what, fn in (("append", lambda: c.append("many/aside", b"x\n", timeout=5)),
                     ("list", lambda: c.list(timeout=5)),
                     ("apply", lambda: c.apply(spec("many/aside-2"), timeout=5))):
        t0 = time.monotonic()
        fn()
        took = time.monotonic() - t0
        assert took < 1.0, "%s took %.2f s beside %d paused appends" % (what, took, n)
    appends.resume()
    for i in range(0, n, 37):
        data, _ = c.read_bytes(names[i])
        assert data == b"head-%03d tail-%03d\n" % (i, i), data


def head_deliveries(b):
    """gazette_read_head_deliveries_total by outcome: (shared, returned)."""
    body = urllib.request.urlopen(b.address + "/debug/metrics", timeout=10).read().decode()
    out = {}
    for ln in body.splitlines():
        if ln.startswith("gazette_read_head_deliveries_total{"):
            out[ln.split('outcome="')[1].split('"')[0]] = float(ln.rsplit(" ", 1)[1])
    return out.get("shared", 0.0), out.get("returned", 0.0)


def read_through(call, base, want):
    """The content of Read `call` from offset `base` until it holds `want`
    bytes, every response checked as a Gazette client reads them: a metadata
    response (status OK, a fragment covering its offset) starts each run
    of content chunks of at most 32736 bytes at consecutive offsets."""
    data, meta = bytearray(), None
    for r in call:
        if r.content:
            assert meta is not None, "content before any metadata"
            assert r.offset == base + len(data), "chunk at %d, expected %d" % (r.offset, base + len(data))
            assert len(r.content) <= 32736, len(r.content)
            assert meta.fragment.begin <= r.offset < meta.fragment.end, (r.offset, meta.fragment)
            data += r.content
            if len(data) >= want:
                break
        else:
            assert r.status == pb.OK and r.HasField("fragment"), r
            assert r.offset == base + len(data), "metadata at %d, expected %d" % (r.offset, base + len(data))
            assert r.write_head >= r.fragment.end >= r.offset, r
            meta = r
    return bytes(data)


def test_readers_at_the_head_share_each_commit_and_a_slow_one_loses_nothing(cluster):
    """A commit is read and packed once for every Read waiting at the
    write head, and each reader gets the responses its own read would
    send (read_fanout.c): metadata, then chunks of at most 32736 bytes at
    consecutive offsets, also for records larger than one round. A reader
    that stops reading is returned to its own read, and gets every byte
    once it reads again."""
    b = cluster.start()
    c = Client(b.address)
    c.apply(spec("many/shared"))
    wait_assigned(c, "many/shared")
    assert c.append("many/shared", b"first\n").status == pb.OK
    n = 100
    calls = [c._read(pb.ReadRequest(journal="many/shared", offset=0, block=True), timeout=120,
                     metadata=c._md("Read", "many/shared")) for _ in range(n)]
    # The slow reader has a connection of its own with grpc's 64 KiB
    # stream window, not grown by BDP probes: what it does not read
    # fills the broker's response queue.
    slow_ch = grpc.insecure_channel(b.address.replace("http://", ""), options=[
        ("grpc.use_local_subchannel_pool", 1), ("grpc.http2.bdp_probe", 0)])
    slow = slow_ch.unary_stream("/protocol.Journal/Read", pb.ReadRequest.SerializeToString,
                                pb.ReadResponse.FromString)(
        pb.ReadRequest(journal="many/shared", offset=0, block=True), timeout=120)
    first = next_records(calls)
    assert first.count(b"first\n") == n, sorted(set(map(repr, first)))[:5]
    shared0, _ = head_deliveries(b)
    # Each reader sent its first response (its header) itself and waits in
    # the head group now: the next commit reaches all of them shared.
    assert c.append("many/shared", b"second\n").status == pb.OK
    second = next_records(calls)
    assert second.count(b"second\n") == n, sorted(set(map(repr, second)))[:5]
    shared1, _ = head_deliveries(b)
    assert shared1 - shared0 >= n, (shared0, shared1)
    # Records of several chunks and rounds (256 KiB: 9 chunks), while
    # `slow` reads nothing: its response queue fills and it is returned.
    records = [os.urandom(256 << 10) for _ in range(4)]
    for rec in records:
        assert c.append("many/shared", rec).status == pb.OK
    want = b"first\nsecond\n" + b"".join(records)
    got = [None] * n

    def drain(lo, hi):
        for i in range(lo, hi):
            got[i] = read_through(calls[i], len(b"first\nsecond\n"), len(want) - len(b"first\nsecond\n"))
    threads = [threading.Thread(target=drain, args=(i, min(i + 10, n)), daemon=True)
               for i in range(0, n, 10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(g == b"".join(records) for g in got), [i for i, g in enumerate(got) if g != b"".join(records)][:5]
    assert read_through(slow, 0, len(want)) == want
    _, returned = head_deliveries(b)
    assert returned >= 1, "the slow reader was never returned to its own read"
    for call in calls + [slow]:
        call.cancel()
    slow_ch.close()
