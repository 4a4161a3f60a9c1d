"""Hundreds of replicated journals per broker (issue 39): the replica side
of a Replicate stream holds no handler thread between the primary's
messages (each is applied on the poller that received it), so a broker's
threads stay few however many journals it replicates, and appends are
answered beside them; a replica's teardown ends its stream."""
import os
import time
import urllib.request

import protocol_pb2 as pb
from gazpb import Client, spec
from test_many_readers import thread_names, threads_of

JOURNALS = int(os.environ.get("GAZ_TEST_REPLICATED_JOURNALS", "300"))
APPLY_BATCH = 100  # etcd's default limit is 128 operations per transaction


def open_replicate_streams(b):
    """Replicate calls `b` has started and not yet finished, by its
    go-grpc-prometheus counters."""
    text = urllib.request.urlopen(b.address + "/debug/metrics", timeout=5).read().decode()
    n = 0.0
    for ln in text.splitlines():
        if 'grpc_method="Replicate"' not in ln:
            continue
        if ln.startswith("grpc_server_started_total"):
            n += float(ln.split()[-1])
        elif ln.startswith("grpc_server_handled_total"):
            n -= float(ln.split()[-1])
    return int(n)


def wait_for(what, fn, timeout):
    """Polls fn() until it returns something true, and returns that; fn
    may also return (False, detail) for the failure's message."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v and not (isinstance(v, tuple) and not v[0]):
            return v
        assert time.monotonic() < deadline, "timed out waiting for %s: %s" % (what, v)
        time.sleep(0.2)


def test_replicated_journals_hold_no_thread_per_stream(cluster):
    # Idle handler threads exit after a second (30 s by default): the
    # counts below show what the streams hold, not what their arrival
    # started.
    env = {"GAZ_RPC_IDLE_THREAD_MS": "1000"}
    brokers = [cluster.start(env=env) for _ in range(3)]
    c = Client(brokers[0].address)
    names = ["many/rep-%05d" % i for i in range(JOURNALS)]
    for i in range(0, JOURNALS, APPLY_BATCH):
        c.apply(*[spec(n, replication=3) for n in names[i:i + APPLY_BATCH]], timeout=60)

    def all_routed():
        js = c.list(timeout=60)
        n = len([j for j in js if j.route.primary >= 0 and len(j.route.members) == 3])
        return n == JOURNALS or (False, "%d of %d listed, %d routed" % (len(js), JOURNALS, n))
    t0 = time.monotonic()
    wait_for("every journal routed over three brokers", all_routed, 120)
    print("%d journals routed over three brokers in %.1f s" % (JOURNALS, time.monotonic() - t0))
    # One append to each opens its primary's pipeline to its two peers
    # (pulses may have opened it first): a Replicate stream per peer.
    for n in names:
        r = c.append(n, b"x\n", timeout=60)
        assert r.status == pb.OK, "%s: %s" % (n, pb.Status.Name(r.status))

    def streams_open():
        v = [open_replicate_streams(b) for b in brokers]
        return v if sum(v) >= 2 * JOURNALS else None
    streams = wait_for("a Replicate stream per journal and peer", streams_open, 60)
    # Each broker serves about 2/3 of the streams, with few threads once
    # the idle ones (of the streams' arrival) have exited.
    for b, n in zip(brokers, streams):
        wait_for("broker %s at 64 threads or fewer beside %d open Replicate streams" % (b.address, n),
                 lambda: threads_of(b.proc.pid) <= 64 or (False, thread_names(b.proc.pid)[:6]), 15)
    # Appends go on at once beside them, through every stream of a route.
    for n in names[:20]:
        t0 = time.monotonic()
        r = c.append(n, b"y\n", timeout=5, retry=False)
        assert r.status == pb.OK and time.monotonic() - t0 < 1, (n, pb.Status.Name(r.status))
    # Deleting the journals tears their replicas down: every stream ends.
    for i in range(0, JOURNALS, APPLY_BATCH):
        revs = {j.spec.name: j.mod_revision for j in c.list(timeout=60)}
        c.apply(deletes=[(n, revs[n]) for n in names[i:i + APPLY_BATCH]], timeout=60)
    wait_for("every Replicate stream ended",
             lambda: all(open_replicate_streams(b) == 0 for b in brokers), 60)
