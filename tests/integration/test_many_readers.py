"""Thousands of blocking readers at the write head (issue 39): a waiting
Read holds no handler thread, so appends and control calls are answered
at once beside them, and one commit wakes every reader."""
import os
import threading
import time

import grpc

import protocol_pb2 as pb
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
    deadline = time.monotonic() + 30
    while threads_of(b.proc.pid) > 64:
        assert time.monotonic() < deadline, "%d threads beside %d waiting readers: %s" % (
            threads_of(b.proc.pid), READERS, thread_names(b.proc.pid))
        time.sleep(0.2)
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
