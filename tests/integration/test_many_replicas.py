"""Hundreds of replicated journals per broker (issue 39): the replica side
of a Replicate stream holds no handler thread between the primary's
messages (each is applied on the poller that received it), so a broker's
threads stay few however many journals it replicates, and appends are
answered beside them; a replica's teardown ends its stream."""
import os
import queue
import signal
import threading
import time
import urllib.request

import protocol_pb2 as pb
from gazpb import Client, spec
from test_many_readers import own_connection, thread_names, threads_of

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



class WaitingStream:
    """A Replicate stream to broker `b` for journal `j` (a ListResponse
    journal), sent as its primary would send one. While another stream
    holds b's append token for the journal (the primary's own pipeline
    does, for its life), this one waits for it."""

    def __init__(self, b, j, etcd_header):
        self.q = queue.Queue()
        self.ch = own_connection(b.address)
        rep = self.ch.stream_stream("/protocol.Journal/Replicate", pb.ReplicateRequest.SerializeToString,
                                    pb.ReplicateResponse.FromString)
        self.q.put(pb.ReplicateRequest(
            header=pb.Header(process_id=pb.ProcessSpec.ID(zone=b.zone, suffix=b.id), route=j.route,
                             etcd=etcd_header),
            proposal=pb.Fragment(journal=j.spec.name, begin=0, end=0, compression_codec=pb.NONE),
            registers=pb.LabelSet(), acknowledge=True))
        self.call = rep(iter(self.q.get, None), timeout=120)
        self.got = None
        # Its first response comes once the token is the stream's.
        self.t = threading.Thread(target=self._first, daemon=True)
        self.t.start()

    def _first(self):
        try:
            self.got = next(self.call)
        except Exception as e:  # reported by the test's assertions
            self.got = e

    def close(self):
        self.q.put(None)  # half-close: the replica lets go of the token
        self.call.cancel()
        self.t.join(10)
        self.ch.close()


def test_streams_waiting_for_a_replicas_token_hold_no_thread(cluster):
    """A new primary's Replicate stream waits for the replica's append
    token while the previous primary's stream holds it. Here about a
    hundred wait at once on one broker, behind the pipelines of the
    journals' primaries: they hold no thread there; one cancelled leaves
    the queue; and when a primary dies, its streams end and the waiters
    behind them get the token."""
    env = {"GAZ_RPC_IDLE_THREAD_MS": "1000"}
    brokers = [cluster.start(env=env) for _ in range(3)]
    a, b = brokers[0], brokers[1]
    c = Client(brokers[2].address)
    names = ["many/tok-%04d" % i for i in range(150)]
    for i in range(0, len(names), APPLY_BATCH):
        c.apply(*[spec(n, replication=3) for n in names[i:i + APPLY_BATCH]], timeout=60)
    for n in names:  # every primary's pipeline is open: it holds its peers' tokens
        assert c.append(n, b"x\n", timeout=60).status == pb.OK

    def routed():
        resp = list(c._list(pb.ListRequest(), timeout=60))
        js = [j for r in resp for j in r.journals
              if j.route.primary >= 0 and len(j.route.members) == 3]
        return (resp[0].header.etcd, js) if len(js) == len(names) else (False, len(js))
    etcd_header, journals = wait_for("every journal routed over three brokers", routed, 120)
    bid = pb.ProcessSpec.ID(zone=b.zone, suffix=b.id)
    aid = pb.ProcessSpec.ID(zone=a.zone, suffix=a.id)
    behind_a = [j for j in journals if j.route.members[j.route.primary] == aid]
    behind_other = [j for j in journals if j.route.members[j.route.primary] not in (aid, bid)]
    assert len(behind_a) >= 25 and len(behind_other) >= 25, (len(behind_a), len(behind_other))
    before = open_replicate_streams(b)
    waiting = [WaitingStream(b, j, etcd_header) for j in behind_a + behind_other]
    wait_for("%d Replicate streams waiting for a token on %s" % (len(waiting), b.address),
             lambda: open_replicate_streams(b) >= before + len(waiting) or
             (False, open_replicate_streams(b) - before, [w.got for w in waiting[:2]]), 30)
    wait_for("%s at 64 threads or fewer beside %d streams waiting for a token" % (b.address, len(waiting)),
             lambda: threads_of(b.proc.pid) <= 64 or (False, thread_names(b.proc.pid)[:6]), 15)
    assert all(w.got is None for w in waiting), [w.got for w in waiting if w.got is not None][:3]
    # The pipelines that hold the tokens serve on: appends are answered.
    for j in journals[:10]:
        r = c.append(j.spec.name, b"y\n", timeout=5, retry=False)
        assert r.status == pb.OK, pb.Status.Name(r.status)
    # Cancelled waiters leave the queue and end.
    for w in waiting[len(behind_a):]:
        w.close()
    wait_for("the cancelled waiters' streams ended on %s" % b.address,
             lambda: open_replicate_streams(b) <= before + len(behind_a) or
             (False, open_replicate_streams(b) - before), 30)
    # The primary of the rest dies: its streams to b end, and each waiter
    # behind one gets the token and its first response.
    a.proc.kill()
    wait_for("every waiter behind the dead primary's streams answered",
             lambda: all(w.got is not None for w in waiting[:len(behind_a)]) or
             (False, sum(w.got is None for w in waiting[:len(behind_a)])), 30)
    bad = [w.got for w in waiting[:len(behind_a)] if not isinstance(w.got, pb.ReplicateResponse)]
    assert not bad, bad[:3]
    for w in waiting[:len(behind_a)]:
        w.close()
    wait_for("every waiter's stream ended on %s" % b.address,
             lambda: open_replicate_streams(b) <= before or
             (False, open_replicate_streams(b) - before), 30)
    assert b.proc.poll() is None


def pulses(b):
    """gazette_journal_pulses_total of `b`, by (path, outcome)."""
    text = urllib.request.urlopen(b.address + "/debug/metrics", timeout=5).read().decode()
    out = {}
    for ln in text.splitlines():
        if ln.startswith("gazette_journal_pulses_total{"):
            labels = dict(kv.split("=", 1) for kv in ln[ln.index("{") + 1:ln.index("}")].split(","))
            key = (labels["path"].strip('"'), labels["outcome"].strip('"'))
            out[key] = out.get(key, 0) + float(ln.split()[-1])
    return out


def pulse_sum(brokers, path, outcome):
    return sum(pulses(b).get((path, outcome), 0) for b in brokers)


def test_periodic_pulses_are_gathered_by_the_pollers(cluster):
    """A periodic pulse of a journal with nothing else to do is proposed
    by the pulse thread and its acknowledgements gathered by the pollers
    (no runner thread waits for it). One that a stopped peer never
    answers has its pipeline cut after the pulse timeout, fails, and its
    retry takes the Append handler's path, which rebuilds the pipeline
    once the peer answers again; appends go through all along the way."""
    env = {"GAZ_PULSE_PERIOD_MS": "1000"}  # and a timeout of half that
    brokers = [cluster.start(env=env) for _ in range(3)]
    c = Client(brokers[0].address)
    names = ["many/pulse-%02d" % i for i in range(30)]
    c.apply(*[spec(n, replication=3) for n in names], timeout=60)
    for n in names:
        assert c.append(n, b"x\n", timeout=60).status == pb.OK
    # Route writes, first writes and the like take the handler's path;
    # then every periodic pulse takes the fast one.
    wait_for("two fast pulses a journal",
             lambda: pulse_sum(brokers, "fast", "ok") >= 2 * len(names) or
             (False, [pulses(b) for b in brokers]), 30)
    before = [pulses(b) for b in brokers]
    time.sleep(3)
    after = [pulses(b) for b in brokers]
    fast = sum(a.get(("fast", "ok"), 0) - p.get(("fast", "ok"), 0) for a, p in zip(after, before))
    slow = sum(a.get(("handler", "ok"), 0) + a.get(("handler", "failed"), 0) + a.get(("fast", "failed"), 0)
               - p.get(("handler", "ok"), 0) - p.get(("handler", "failed"), 0) - p.get(("fast", "failed"), 0)
               for a, p in zip(after, before))
    assert fast >= 2 * len(names) and slow == 0, (before, after)
    # A peer stops answering (its process stopped, its connections open):
    # the pulses of the journals it replicates go unanswered and fail.
    stopped, others = brokers[2], brokers[:2]
    failed0 = pulse_sum(others, "fast", "failed")
    stopped.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for("fast pulses cut after their timeout",
                 lambda: pulse_sum(others, "fast", "failed") > failed0 or
                 (False, [pulses(b) for b in others]), 20)
    finally:
        stopped.proc.send_signal(signal.SIGCONT)
    # Answering again, the peer's pipelines are rebuilt by the handler's
    # path, and fast pulses go on; every journal takes appends.
    for n in names:
        r = c.append(n, b"y\n", timeout=60)
        assert r.status == pb.OK, (n, pb.Status.Name(r.status))
    ok0 = pulse_sum(brokers, "fast", "ok")
    wait_for("fast pulses again on every broker",
             lambda: pulse_sum(brokers, "fast", "ok") >= ok0 + len(names) or
             (False, [pulses(b) for b in brokers]), 30)
