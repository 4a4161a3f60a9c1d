"""Fault injection with a checker: appenders with unique records while
brokers are killed (SIGKILL), restarted, and stopped gracefully, at random
for a bounded time. GAZ_FAULT_SECONDS makes it longer. The last test adds
every other kind of fault: etcd restarts, S3 outages, slow appenders and
slow readers (GAZ_FAULT_COUNT runs it until that many faults).

Faults stay within what replication 3 promises to survive: the next fault
comes only once the route is back to 3 members and an append has gone
through it (the new member is synchronised). Faster faults can destroy
every copy of a range not yet persisted, which no replication factor
survives."""
import os
import random
import re
import shutil
import signal
import threading
import time

import grpc

import protocol_pb2 as pb
from conftest import Cluster, Etcd, wait_for
from gazpb import Client, spec
from tcpproxy import TcpProxy
from gazpb import wait_route

import pytest

SECONDS = float(os.environ.get("GAZ_FAULT_SECONDS", "12"))


def recover(c, journal, rf, timeout=60):
    """Waits until the route has `rf` members again and one append has
    gone through it (the new member is synchronised)."""
    wait_route(c, journal, rf, timeout=timeout)
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if c.append(journal, b"", timeout=5).status == pb.OK:
                return
        except grpc.RpcError:
            pass
        time.sleep(0.05)
    raise AssertionError("no append went through the recovered route of %s" % journal)


def read_to_head(client, journal, chunk=16 << 20):
    """Reads the journal from 0 to its write head in reads of at most
    `chunk` bytes, each with its own deadline: a long run's journal (over a
    hundred MB in thousands of fragments, through a sanitizer build) takes
    longer than one RPC's deadline to read."""
    data = bytearray()
    while True:
        got, last = client.read_bytes(journal, offset=len(data), end_offset=len(data) + chunk, timeout=120)
        data += got
        if not got or (last is not None and last.write_head and len(data) >= last.write_head):
            return bytes(data)


def read_final(brokers, journal, want_end, timeout=30, errors=None):
    """Reads the journal to its write head through every broker, until one
    holds at least `want_end` bytes. A replica that joined late serves
    history from the store once the primary's fragments are persisted and
    listed, so this allows for the refresh interval. Returns the longest
    read and every read (broker, bytes); failed reads go to `errors`."""
    data, reads, deadline = b"", [], time.time() + timeout
    while time.time() < deadline:
        reads = []
        for b in brokers:
            try:
                got = read_to_head(Client(b.address), journal)
            except (AssertionError, grpc.RpcError) as e:
                if errors is not None:
                    errors.append("final read via %s: %s" % (b.id, e))
                continue
            reads.append((b, got))
            if len(got) > len(data):
                data = got
        if len(data) >= want_end:
            break
        time.sleep(1)
    return data, reads


def sync_failures(cluster):
    n = 0
    for b in cluster.brokers:
        if os.path.exists(b.logpath):
            text = open(b.logpath).read()
            n += text.count("sync did not converge") + text.count("a peer refused the sync")
    return n


@pytest.mark.parametrize("rf", [3, 2], ids=["rf3", "rf2-BR06"])
def test_faults_lose_no_acknowledged_append(cluster, rf):
    """At replication 2 this is also case BR-06's natural scenario: fresh
    primaries meet peers holding committed bytes after every kill."""
    rnd = random.Random(int(os.environ.get("GAZ_FAULT_SEED", "7")))
    brokers = [cluster.start(zone="z%d" % (i % 2)) for i in range(3)]
    c = Client(brokers[0].address)
    c.apply(spec("fault/j", replication=rf, length=32768))
    wait_route(c, "fault/j", rf)
    counts = {"acked": 0, "ambiguous": 0, "retried": 0, "faults": 0}
    acked, ambiguous, stop, lock = [], set(), threading.Event(), threading.Lock()

    def writer(w):
        i = 0
        while not stop.is_set():
            rec = b"<w%d:%06d>" % (w, i)
            i += 1
            for attempt in range(400):
                b = brokers[rnd.randrange(len(brokers))]
                try:
                    r = Client(b.address).append("fault/j", rec, timeout=5)
                except grpc.RpcError:
                    with lock:
                        ambiguous.add(rec)  # may or may not have committed
                        counts["retried"] += attempt > 0
                    time.sleep(0.05)
                    continue
                if r.status == pb.OK:
                    with lock:
                        acked.append((rec, r.commit.begin, r.commit.end))
                    break
                time.sleep(0.05)
    writers = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    [t.start() for t in writers]
    deadline = time.time() + SECONDS
    while time.time() < deadline:
        time.sleep(rnd.uniform(0.5, 1.5))
        i = rnd.randrange(len(brokers))
        sig = rnd.choice([signal.SIGKILL, signal.SIGTERM])
        old = brokers[i]
        old.stop(sig=sig)
        counts["faults"] += 1
        brokers[i] = cluster.start(zone=old.zone, bid="%s-%d" % (old.id[:10], counts["faults"]))
        recover(Client(brokers[i].address), "fault/j", rf)
    time.sleep(2)
    stop.set()
    [t.join(120) for t in writers]
    data, _ = read_final(brokers, "fault/j", max((e for _, _, e in acked), default=0))
    violations = 0
    for rec, begin, end in acked:
        violations += data[begin:end] != rec
    # Commits never overlap: sorted by offset, each begins at or after the
    # previous one's end.
    spans = sorted((b, e) for _, b, e in acked)
    violations += sum(b < pe for (_, pe), (b, _) in zip(spans, spans[1:]))
    violations += sync_failures(cluster)
    found = re.findall(rb"<w\d:\d{6}>", data)
    dupes = len(found) - len(set(found))
    # No partial or interleaved record: the data is exactly a sequence of records.
    violations += len(b"".join(found)) != len(data)
    counts.update(acked=len(acked), ambiguous=len(ambiguous), duplicates=dupes, bytes=len(data),
                  violations=violations)
    print("fault-injection:", counts)
    assert violations == 0
    assert dupes <= counts["ambiguous"] + counts["retried"]


# ---- every kind of fault --------------------------------------------------------------

J = "fault/all"
FILL = b"abcdefghijklmnopqrstuvwxyz"
REC_HEAD = re.compile(rb"<([ws]\d+):(\d{6}):(\d{4}):")
FRAGMENT = re.compile(r"([0-9a-f]{16})-([0-9a-f]{16})-([0-9a-f]{40})\.raw$")


def record(tag, i, n):
    """Record number i of writer `tag`, with n bytes of payload: n copies of
    one letter fixed by both, so that neither a partial record nor one cut
    by another ever parses as whole."""
    k = (i * 7 + sum(tag)) % 26
    c = FILL[k:k + 1]
    return b"<%s:%06d:%04d:%s>" % (tag, i, n, c * n)


def parse_records(data):
    """Splits data into whole records: returns [(offset, record)] and the
    number of places where something else was found."""
    out, pos, bad = [], 0, 0
    while pos < len(data):
        m = REC_HEAD.match(data, pos)
        if m:
            rec = record(m.group(1), int(m.group(2)), int(m.group(3)))
            if data.startswith(rec, pos):
                out.append((pos, rec))
                pos += len(rec)
                continue
        bad += 1
        nxt = data.find(b"<", pos + 1)
        pos = len(data) if nxt < 0 else nxt
    return out, bad


def differing(data, offset, chunk):
    """How many bytes of `chunk`, served at `offset`, are not data's."""
    ref = data[offset:offset + len(chunk)]
    if ref == chunk:
        return 0
    return sum(a != b for a, b in zip(ref, chunk)) + len(chunk) - len(ref)


class AllFaults:
    """Three brokers at replication 3 on their own etcd, the journal's
    fragments on S3 through a proxy the test cuts. Writers append unique
    records; a tailing reader records every byte it is served; faults of
    every kind come at random."""

    KINDS = ("broker_kill", "broker_term", "etcd_kill", "etcd_term", "s3_outage", "slow_append", "slow_read")

    def __init__(self, cluster, etcd, s3, bucket, proxy, seed):
        self.cluster, self.etcd, self.s3, self.bucket, self.proxy = cluster, etcd, s3, bucket, proxy
        # The seed picks the faults; the broker each check goes through is
        # picked apart, as the number of checks depends on timing.
        self.seed, self.rnd, self.check_rnd = seed, random.Random(seed), random.Random(seed + 2)
        self.mu, self.stop, self.tail_stop = threading.Lock(), threading.Event(), threading.Event()
        self.brokers, self.clients, self.slow, self.round, self.rounds = [], {}, {}, [], 0
        self.acked = []          # (record, begin, end)
        self.unknown = {}        # record -> attempts that failed with no answer (may have committed)
        self.refused = set()     # records whose every attempt was answered "not committed"
        self.served = []         # (offset, bytes, who): everything any reader was served
        self.refusals = {}       # status name -> appends the writers saw refused with it
        self.faults = {k: 0 for k in ("broker_kill", "broker_term", "etcd_kill", "etcd_term", "s3_outage",
                                      "slow_append_finish", "slow_append_cancel", "slow_read")}
        self.stats = {"slow_acked": 0, "slow_refused": 0, "slow_unknown": 0, "slow_cancelled": 0,
                      "slow_read_bytes": 0, "tail_reads": 0, "tail_gaps": 0, "self_exits": 0,
                      "etcd_restart_max_ms": 0, "recover_max_ms": 0}
        self.tail_offset, self.tail_call, self.evidence, self.timeline = 0, None, [], []

    def note(self, what):
        t = time.time()
        self.timeline.append("%s.%03dZ %s" % (time.strftime("%H:%M:%S", time.gmtime(t)), int(t * 1000) % 1000, what))

    # -- processes --

    def start_broker(self, zone, bid=None):
        return self.cluster.start(zone=zone, bid=bid, env=self.s3.env())

    def restart_broker(self, i, sig):
        old = self.brokers[i]
        self.note("%s %s" % (signal.Signals(sig).name, old.id))
        old.stop(sig=sig)
        with self.mu:
            c = self.clients.pop(old.address, None)
        if c:
            c.close()
        n = sum(self.faults.values()) + self.stats["self_exits"]
        self.brokers[i] = self.start_broker(old.zone, "%s-%d" % (old.id[:10], n))
        self.note("started %s" % self.brokers[i].id)

    def restart_exited(self):
        """A broker that exited on its own (its lease lost) is started again
        and counted; one that crashed fails the test."""
        for i, b in enumerate(self.brokers):
            rc = b.proc.poll()
            if rc is None:
                continue
            b.check_sanitizers()
            assert rc in (0, 1), "broker %s crashed (exit %s):\n%s" % (b.id, rc, b.logtail(80))
            self.stats["self_exits"] += 1
            self.note("%s exited %d by itself" % (b.id, rc))
            self.evidence.append("%s exited %d by itself:\n%s" % (b.id, rc, b.logtail(15)))
            self.restart_broker(i, signal.SIGKILL)

    def client(self, b):
        with self.mu:
            c = self.clients.get(b.address)
            if c is None:
                c = self.clients[b.address] = Client(b.address)
            return c

    def pick(self, rnd):
        return self.brokers[rnd.randrange(len(self.brokers))]

    def recover(self, timeout=120):
        """Today's rule: the route is back to 3 members and an append has
        gone through it. Brokers that exited meanwhile are restarted."""
        deadline = time.time() + timeout
        while True:
            self.restart_exited()
            try:
                return recover(self.client(self.pick(self.check_rnd)), J, 3, timeout=10)
            except (AssertionError, grpc.RpcError) as e:
                if time.time() > deadline:
                    raise AssertionError("%s did not recover within %ds (%s); faults:\n%s\nlogs:\n%s" % (
                        J, timeout, e, "\n".join(self.timeline),
                        "\n".join(b.id + ":\n" + b.logtail(20) for b in self.brokers)))

    # -- clients --

    def writer(self, w):
        rnd, tag, i = random.Random(self.seed * 1000 + w), b"w%d" % w, 0
        while not self.stop.is_set():
            rec, i, unknown, done = record(tag, i, rnd.randrange(0, 300)), i + 1, 0, False
            for _ in range(400):
                try:
                    r = self.client(self.pick(rnd)).append(J, rec, timeout=5)
                except grpc.RpcError:
                    unknown += 1
                    time.sleep(0.05)
                    continue
                with self.mu:
                    if r.status == pb.OK:
                        self.acked.append((rec, r.commit.begin, r.commit.end))
                        done = True
                        break
                    name = pb.Status.Name(r.status)
                    self.refusals[name] = self.refusals.get(name, 0) + 1
                time.sleep(0.05)
            with self.mu:
                if unknown:
                    self.unknown[rec] = unknown
                elif not done:
                    self.refused.add(rec)

    def slow_append(self, b, rec, stall, cancel):
        """Sends the first part of `rec`, stalls, then sends the rest and
        commits, or cancels the call mid-record."""
        split, release = len(rec) // 2, threading.Event()

        def gen():
            yield pb.AppendRequest(journal=J)
            yield pb.AppendRequest(content=rec[:split])
            release.wait(60)
            if not cancel:
                yield pb.AppendRequest(content=rec[split:])
                yield pb.AppendRequest()
        fut = self.client(b)._append.future(gen(), timeout=stall + 30)
        time.sleep(stall)
        early = fut.done()  # answered before the record was whole: never committed
        if cancel:
            fut.cancel()
        release.set()
        why = ""
        try:
            r = fut.result()
        except grpc.FutureCancelledError:
            r = None
        except grpc.RpcError as e:
            r, why = None, " %s: %s" % (e.code().name, e.details())
        if r is not None and r.status == pb.OK:
            outcome = "acked"
        elif cancel and not early:
            outcome = "cancelled"
        elif early or r is not None:
            outcome = "refused"  # answered before the end, or with a status: not committed
        else:
            outcome = "unknown"  # failed after the record was sent whole: may have committed
        with self.mu:
            self.stats["slow_" + outcome] += 1
            if outcome == "acked":
                self.acked.append((rec, r.commit.begin, r.commit.end))
            elif outcome == "unknown":
                self.unknown[rec] = 1
            else:
                self.refused.add(rec)
        self.note("%s: %s%s" % (rec[:12].decode(), outcome, why if r is None else " " + pb.Status.Name(r.status)))

    def slow_read(self, b, offset, stall):
        """A blocking Read that consumes nothing for `stall` seconds, then
        reads for a few."""
        call = self.client(b)._read(pb.ReadRequest(journal=J, offset=offset, block=True), timeout=stall + 4)
        time.sleep(stall)
        n = 0
        try:
            for r in call:
                if r.content:
                    with self.mu:
                        self.served.append((r.offset, r.content, "slow reader via " + b.id))
                    n += len(r.content)
        except grpc.RpcError:
            pass
        with self.mu:
            self.stats["slow_read_bytes"] += n

    def tail(self):
        """A blocking Read from 0 through the whole run, via a broker chosen
        at random, resumed at its next offset after any error."""
        rnd, offset = random.Random(self.seed + 1), 0
        while not self.tail_stop.is_set():
            b = self.pick(rnd)
            self.stats["tail_reads"] += 1
            try:
                self.tail_call = call = self.client(b)._read(pb.ReadRequest(journal=J, offset=offset, block=True))
                if self.tail_stop.is_set():
                    call.cancel()
                for r in call:
                    if r.content:
                        if r.offset != offset:
                            self.stats["tail_gaps"] += 1
                            self.evidence.append("tail asked %d, served from %d via %s" % (offset, r.offset, b.id))
                        with self.mu:
                            self.served.append((r.offset, r.content, "tail via " + b.id))
                        offset = self.tail_offset = r.offset + len(r.content)
                    elif r.status != pb.OK:
                        break
            except grpc.RpcError:
                pass
            self.tail_stop.wait(0.1)

    def spawn(self, fn, *args):
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        return t

    # -- the run --

    def next_kind(self):
        """Kinds come in rounds, each kind once in a random order; a slow
        client still running waits for a later turn."""
        if not self.round:
            self.round = list(self.KINDS)
            self.rnd.shuffle(self.round)
        for i, kind in enumerate(self.round):
            if not (kind in self.slow and self.slow[kind].is_alive()):
                self.round.pop(i)
                self.rounds += not self.round
                return kind
        return self.rnd.choice(self.KINDS[:5])

    def fault(self):
        rnd = self.rnd
        kind = self.next_kind()
        if kind in ("broker_kill", "broker_term"):
            self.restart_broker(rnd.randrange(3), signal.SIGKILL if kind == "broker_kill" else signal.SIGTERM)
        elif kind in ("etcd_kill", "etcd_term"):
            # etcd drains its clients' streams for up to ~7 s on SIGTERM.
            self.note(kind)
            took = self.etcd.restart(signal.SIGKILL if kind == "etcd_kill" else signal.SIGTERM)
            self.note("etcd healthy again after %.2f s" % took)
            self.stats["etcd_restart_max_ms"] = max(self.stats["etcd_restart_max_ms"], int(took * 1000))
        elif kind == "s3_outage":
            self.note("S3 blocked")
            self.proxy.block()
            time.sleep(rnd.uniform(1.5, 3.0))
            self.proxy.unblock()
            self.note("S3 unblocked")
        elif kind == "slow_append":
            cancel = rnd.random() < 0.5
            kind += "_cancel" if cancel else "_finish"
            # Within the minimum append rate's allowance (1 s) or far past it.
            stall = rnd.uniform(0.2, 0.8) if rnd.random() < 0.5 else rnd.uniform(2, 5)
            rec = record(b"s0", sum(self.faults.values()), rnd.randrange(2000, 6000))
            self.note("%s %s stalling %.1f s" % (kind, rec[:12].decode(), stall))
            self.slow["slow_append"] = self.spawn(self.slow_append, self.pick(rnd), rec, stall, cancel)
        elif kind == "slow_read":
            stall = rnd.uniform(2, 6)
            self.note("slow read stalling %.1f s" % stall)
            offset = int(rnd.random() * (self.tail_offset + 1))
            self.slow[kind] = self.spawn(self.slow_read, self.pick(rnd), offset, stall)
        self.faults[kind] += 1
        t0 = time.time()
        self.recover()
        self.stats["recover_max_ms"] = max(self.stats["recover_max_ms"], int((time.time() - t0) * 1000))
        self.note("recovered after %.2f s" % (time.time() - t0))

    def run(self, seconds, count):
        self.brokers = [self.start_broker("z%d" % (i % 2)) for i in range(3)]
        c = self.client(self.brokers[0])
        c.apply(spec(J, replication=3, stores=(self.proxied_url(),), length=16384, flush_s=60))
        self.recover()
        writers = [self.spawn(self.writer, w) for w in range(3)]
        tail = self.spawn(self.tail)
        deadline = time.time() + seconds
        while (sum(self.faults.values()) < count) if count else (time.time() < deadline or not self.rounds):
            time.sleep(self.rnd.uniform(0.5, 1.5))
            self.fault()
        time.sleep(2)
        self.stop.set()
        for t in writers + list(self.slow.values()):
            t.join(120)
        want = max((e for _, _, e in self.acked), default=0)
        data, reads = read_final(self.brokers, J, want, errors=self.evidence)
        self.served += [(0, got, "final read via " + b.id) for b, got in reads]
        try:
            wait_for(lambda: self.tail_offset >= len(data), 30, "the tailing reader to reach the write head")
        finally:
            self.tail_stop.set()
            if self.tail_call:
                self.tail_call.cancel()
            tail.join(30)
        return data

    def proxied_url(self):
        from urllib.parse import quote
        return "s3://%s/f/?endpoint=%s&region=us-east-1" % (self.bucket, quote(self.proxy.endpoint, safe=""))

    def persisted_differing(self, data):
        """Bytes of persisted fragments that are not the final data's (or
        not their name's SHA-1). Returns (fragments, bytes)."""
        import hashlib
        keys, bad, c = self.s3.keys(self.bucket, "f/%s/" % J), 0, self.s3.client()
        for k in keys:
            m = FRAGMENT.search(k)
            if not m:
                self.evidence.append("not a fragment name: " + k)
                bad += 1
                continue
            body = c.get_object(Bucket=self.bucket, Key=k)["Body"].read()
            begin, end = int(m.group(1), 16), int(m.group(2), 16)
            n = differing(data, begin, body) + (end - begin != len(body))
            n += hashlib.sha1(body).hexdigest() != m.group(3)
            if n:
                self.evidence.append("fragment %s: %d bytes differ from the final data" % (k, n))
            bad += n
        return len(keys), bad


def test_faults_of_every_kind(tmp_path, s3):
    """Broker SIGKILL/SIGTERM, etcd SIGKILL/SIGTERM, S3 outages, slow
    appenders (stalled mid-record, then finished or cancelled) and slow
    readers, at random. Checks:
    - lost: every acknowledged record is at its acknowledged offsets;
    - uncommitted_visible: every byte any reader was served (a tailing
      reader through the whole run, slow readers, final reads through
      each broker) and every byte of every persisted fragment is the final
      data's at that offset, and no record whose every append was refused
      or cancelled is in the final data;
    - interleavings: the final data is exactly a sequence of whole records,
      and acknowledged commits never overlap.
    It runs GAZ_FAULT_SECONDS (default 20, and at least until every kind
    came once) or until GAZ_FAULT_COUNT faults; GAZ_FAULT_SEED picks them.
    The faults as they happened are in faults.txt beside the logs."""
    seed = int(os.environ.get("GAZ_FAULT_SEED", "7"))
    seconds = float(os.environ.get("GAZ_FAULT_SECONDS", "20"))
    count = int(os.environ.get("GAZ_FAULT_COUNT", "0"))
    etcd = Etcd()
    host, port = s3.endpoint.replace("http://", "").split(":")
    proxy = TcpProxy(host, int(port))
    cluster = Cluster(etcd, str(tmp_path))
    run = AllFaults(cluster, etcd, s3, s3.new_bucket(), proxy, seed)
    try:
        data = run.run(seconds, count)
        acked = run.acked
        lost = sum(data[b:e] != rec for rec, b, e in acked)
        records, bad = parse_records(data)
        spans = sorted((b, e) for _, b, e in acked)
        interleavings = bad + sum(b < pe for (_, pe), (b, _) in zip(spans, spans[1:]))
        served_bad = 0
        for off, chunk, who in run.served:
            n = differing(data, off, chunk)
            if n:
                run.evidence.append("%s: %d of %d bytes at %d are not the final data's" % (who, n, len(chunk), off))
            served_bad += n
        fragments, persisted_bad = run.persisted_differing(data)
        seen = {}
        for _, rec in records:
            seen[rec] = seen.get(rec, 0) + 1
        refused_visible = sum(1 for rec in seen if rec in run.refused)
        acked_set = {rec for rec, _, _ in acked}
        # A record is in the data at most once per acknowledgement plus once
        # per attempt that failed with no answer.
        unexplained = sum(max(0, k - (rec in acked_set) - run.unknown.get(rec, 0))
                          for rec, k in seen.items() if rec not in run.refused)
        uncommitted_visible = served_bad + persisted_bad + refused_visible
        counts = dict(seed=seed, faults=dict(run.faults), acked=len(acked), ambiguous=len(run.unknown),
                      bytes=len(data), records=len(records), fragments=fragments,
                      duplicates=sum(k - 1 for k in seen.values()), unexplained_duplicates=unexplained,
                      sync_failures=sync_failures(cluster), refusals=run.refusals, **run.stats)
        counts.update(lost=lost, uncommitted_visible=uncommitted_visible, interleavings=interleavings)
        print("fault-injection:", " ".join("%s=%s" % kv for kv in counts.items()))
        failed = lost or uncommitted_visible or interleavings or unexplained or counts["sync_failures"] or \
            run.stats["tail_gaps"]
        for line in run.evidence[:40] + (run.timeline if failed else []):
            print("  " + line)
        with open(os.path.join(str(tmp_path), "faults.txt"), "w") as f:
            f.write("\n".join(run.timeline + run.evidence) + "\n")
        assert lost == 0 and uncommitted_visible == 0 and interleavings == 0, counts
        assert unexplained == 0 and counts["sync_failures"] == 0 and run.stats["tail_gaps"] == 0, counts
    finally:
        run.stop.set()
        run.tail_stop.set()
        if run.tail_call:
            run.tail_call.cancel()
        try:
            cluster.stop_all()
        finally:
            proxy.close()
            shutil.copy(os.path.join(etcd.dir, "etcd.log"), str(tmp_path))
            etcd.stop()
