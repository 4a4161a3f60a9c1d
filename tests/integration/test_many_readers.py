"""Thousands of blocking readers at the write head (issue 39): a waiting
Read holds no handler thread, so appends and control calls are answered
at once beside them, and one commit wakes every reader."""
import os
import threading
import time

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
    got = [0] * READERS
    lock = threading.Lock()

    def drain(lo, hi):
        # One thread drains many calls' first responses in turn: each
        # reader's metadata and "first\n", then (after the append below)
        # the next record.
        for i in range(lo, hi):
            for r in calls[i]:
                if r.content:
                    with lock:
                        got[i] += len(r.content)
                    if got[i] >= len(b"first\n"):
                        break
    drainers = [threading.Thread(target=drain, args=(i, min(i + 500, READERS)), daemon=True)
                for i in range(0, READERS, 500)]
    for t in drainers:
        t.start()
    for t in drainers:
        t.join(120)
    assert sum(1 for g in got if g >= len(b"first\n")) == READERS, "not every reader got the first record"
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
    second = [False] * READERS

    def drain_second(lo, hi):
        for i in range(lo, hi):
            for r in calls[i]:
                if r.content:
                    assert r.content == b"second\n", r
                    second[i] = True
                    break
    drainers = [threading.Thread(target=drain_second, args=(i, min(i + 500, READERS)), daemon=True)
                for i in range(0, READERS, 500)]
    for t in drainers:
        t.start()
    for t in drainers:
        t.join(120)
    assert all(second), "%d readers missed the second record" % second.count(False)
    for call in calls:
        call.cancel()
    # Cancelled readers end: the broker serves on.
    assert c.append("many/other", b"y\n").status == pb.OK
    assert b.proc.poll() is None
