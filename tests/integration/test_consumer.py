"""The consumer runtime (consumer/) against real etcd, our brokers and a
real PostgreSQL: shards assigned by the shared allocator, the
consumer.Shard API (wire-compatible: Gazette's own gazctl drives it),
exactly-once effects through SIGKILLs of a primary, a zombie primary
fenced by the store, and bad input.

The application is tests/tools/chain_consumer.c (bin/chain-consumer): each
shard republishes its sources' messages, in its transactions, to the
journal its label chain.output names, and counts them in its store.
Source messages are JSON lines given v1 UUIDs by Gazette's own
`gazctl attach-uuids`."""
import json
import os
import signal
import subprocess
import threading
import time
import uuid

import consumer_pb2 as cpb
import grpc
import protocol_pb2 as pb
import pytest
from google.protobuf import duration_pb2

from conftest import BIN, GAZCTL, GO_GAZCTL, SAN_MARKERS, TSAN_OPTIONS, wait_for, free_port
from gazpb import Client, channel, spec, wait_route

CHAIN = os.path.join(BIN, "chain-consumer")
PROBE = os.path.join(BIN, "message-probe")
JSON = [("content-type", "application/x-ndjson")]


class Consumer:
    """One chain-consumer process."""

    def __init__(self, group, cid=None, env=None, lease="3s", store=None, etcd=None):
        self.group, self.env = group, env or {}
        self.etcd = etcd or group.cluster.etcd.endpoint
        self.id = cid or "c-%s" % uuid.uuid4().hex[:6]
        self.port = free_port()
        self.address = "http://127.0.0.1:%d" % self.port
        self.lease = lease
        self.store = store or ["--chain.postgres", group.postgres.conninfo]
        self.logpath = os.path.join(group.cluster.dir, "consumer-%s.log" % self.id)
        self.proc = None

    def start(self, wait=True):
        g = self.group
        args = [CHAIN, "serve", "--consumer.port", str(self.port), "--consumer.host", "127.0.0.1",
                "--consumer.id", self.id, "--etcd.address", self.etcd, "--etcd.prefix", g.prefix,
                "--etcd.lease", self.lease, "--broker.address", g.broker.address,
                "--log.level", os.environ.get("GAZ_TEST_LOG_LEVEL", "info"),
                "--consumer.exit-timeout", "3s"] + self.store
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "BROKER_", "CONSUMER_", "CHAIN_"))}
        env["TSAN_OPTIONS"] = TSAN_OPTIONS
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        env.update(self.env)
        self.proc = subprocess.Popen(args, stdout=open(self.logpath, "a"), stderr=subprocess.STDOUT, env=env)
        if wait:
            key = "%s/members/local#%s" % (g.prefix, self.id)
            wait_for(lambda: self.alive() and key in g.cluster.etcd.ctl("get", "--prefix", g.prefix, "--keys-only"),
                     30, "consumer %s to announce" % self.id, interval=0.1)
        return self

    def alive(self):
        if self.proc.poll() is not None:
            raise AssertionError("consumer exited %s:\n%s" % (self.proc.returncode, self.log()[-3000:]))
        return True

    def log(self):
        try:
            return open(self.logpath).read()
        except OSError:
            return ""

    def check_sanitizers(self):
        text = self.log()
        for m in SAN_MARKERS:
            assert m not in text, "sanitizer report in %s:\n%s" % (self.logpath, text[text.index(m) - 200:][:4000])

    def kill(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise AssertionError("consumer %s did not exit:\n%s" % (self.id, self.log()[-3000:]))
        return self.proc.returncode if self.proc else None


class Shards:
    """A client of consumer.Shard at `address`."""

    def __init__(self, address):
        self.ch = channel(address)

    def call(self, method, req, resp, timeout=30):
        return self.ch.unary_unary("/consumer.Shard/" + method, request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=resp.FromString)(req, timeout=timeout)

    def list(self, selector=None):
        req = cpb.ListRequest()
        if selector:
            req.selector.CopyFrom(selector)
        return self.call("List", req, cpb.ListResponse)

    def apply(self, *specs, expect=0, deletes=()):
        req = cpb.ApplyRequest()
        for s in specs:
            req.changes.add(upsert=s, expect_mod_revision=expect)
        for d, rev in deletes:
            req.changes.add(delete=d, expect_mod_revision=rev)
        return self.call("Apply", req, cpb.ApplyResponse)

    def stat(self, shard, read_through=None, header=None, timeout=60):
        req = cpb.StatRequest(shard=shard)
        for j, o in (read_through or {}).items():
            req.read_through[j] = o
        if header is not None:
            req.header.CopyFrom(header)
        return self.call("Stat", req, cpb.StatResponse, timeout=timeout)

    def unassign(self, *shards, only_failed=False, dry_run=False):
        return self.call("Unassign", cpb.UnassignRequest(shards=shards, only_failed=only_failed, dry_run=dry_run),
                         cpb.UnassignResponse)


def stat_read_through(shards, sid, journal, offset, timeout=180):
    """Stat of `sid` read through `offset` of `journal`, asked again while
    the shard has no primary (NO_SHARD_PRIMARY: a killed primary's
    assignment expired, its standby not yet promoted) or the one named is
    unreachable or stopping, as Gazette's clients do; the last response."""
    deadline = time.time() + timeout
    while True:
        try:
            st = shards.stat(sid, read_through={journal: offset}, timeout=max(1, deadline - time.time()))
            if st.status not in (cpb.NO_SHARD_PRIMARY, cpb.SHARD_STOPPED) or time.time() > deadline:
                return st
        except grpc.RpcError:
            if time.time() > deadline:
                raise
        time.sleep(0.2)


def shard_spec(sid, sources, output, hot_standbys=0, min_txn_ms=0, max_txn_ms=1000, disable=False):
    s = cpb.ShardSpec(id=sid, hot_standbys=hot_standbys, disable=disable)
    for j in sorted(sources):
        s.sources.add(journal=j)
    s.labels.labels.add(name="chain.output", value=output)
    s.min_txn_duration.CopyFrom(duration_pb2.Duration(nanos=min_txn_ms * 1000000))
    s.max_txn_duration.CopyFrom(duration_pb2.Duration(seconds=max_txn_ms // 1000,
                                                      nanos=(max_txn_ms % 1000) * 1000000))
    return s


class Group:
    """A consumer group (an etcd prefix) over a cluster of our brokers."""

    def __init__(self, cluster, postgres):
        self.cluster, self.postgres = cluster, postgres
        self.prefix = cluster.prefix + "-consumers/chain"
        self.broker = cluster.start()
        self.client = Client(self.broker.address)
        self.consumers = []
        self.seq = 0

    def journals(self, *names):
        self.client.apply(*[spec(n, labels=JSON) for n in names])
        for n in names:
            wait_route(self.client, n, 1)

    def consumer(self, **kw):
        c = Consumer(self, **kw)
        self.consumers.append(c)
        return c.start()

    def publish(self, journal, ids, extra=""):
        """Appends one JSON message per id, with UUIDs by Gazette's
        attach-uuids; returns the lines' text."""
        lines = "".join('"id":%d,"hops":0%s}\n' % (i, extra) for i in ids)
        tagged = subprocess.run([GO_GAZCTL, "attach-uuids", "--template", '{"_meta":{"uuid":"{{.UUID}}"},{{.Line}}\n'],
                                input=lines.encode(), capture_output=True, check=True).stdout
        self.append_raw(journal, tagged)
        return tagged

    def append_raw(self, journal, data, attempts=20):
        """Appends `data` (whole lines). A failed append is tried again
        with the same bytes, as an at-least-once producer does: a broker
        killed mid-append, or a proxied append landing on a process that
        took a killed broker's port before its member key expired, fails
        in Gazette's client too. Copies written twice carry the same
        UUIDs, which readers drop."""
        for attempt in range(attempts):
            r = subprocess.run([GAZCTL, "journals", "append", "--broker.address", self.broker.address, "-l",
                                "name=" + journal, "-f", "lines"], input=data, capture_output=True)
            if r.returncode == 0:
                return
            time.sleep(1)
        raise AssertionError(r.stderr.decode())

    def read(self, journal, mode="committed"):
        """[(flags, doc)] of the journal's messages, as our reader reads them."""
        r = subprocess.run([PROBE, "read", self.broker.address, journal, mode], capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode()
        rows = []
        for ln in r.stdout.decode().splitlines():
            if ln.startswith("skipped "):
                continue
            _, _, f, doc = ln.split(" ", 3)
            rows.append((int(f), json.loads(doc)))
        return rows

    def ids(self, journal):
        return [d["id"] for f, d in self.read(journal) if f != 2]

    def stop(self):
        """Stops the consumers gracefully (SIGTERM: a leak or race report
        comes at exit), then the brokers; fails on a sanitizer report."""
        for c in self.consumers:
            if c.proc and c.proc.poll() is None:
                c.proc.send_signal(signal.SIGCONT)
                c.proc.send_signal(signal.SIGTERM)
        for c in self.consumers:
            try:
                c.stop(timeout=60)
            except AssertionError:
                pass
        self.cluster.stop_all()
        for c in self.consumers:
            c.check_sanitizers()


@pytest.fixture
def group(cluster, postgres):
    g = Group(cluster, postgres)
    yield g
    g.stop()


def psql(postgres, sql):
    return subprocess.check_output(["psql", postgres.conninfo, "-At", "-c", sql], text=True).strip()


def write_head(group, journal):
    r = group.client.read(journal, offset=-1, block=False, metadata_only=True, timeout=10)
    for resp in r:
        return resp.write_head
    return 0


def primary_write_head(group, journal):
    """The journal's write head as its primary broker reports it (a
    replica just assigned reports the head of its store listing until the
    primary syncs it, as Gazette's do; a reader must not take that for
    the journal's head)."""
    for j in group.client.list():
        if j.spec.name == journal and j.route.primary >= 0:
            c = Client(j.route.endpoints[j.route.primary])
            try:
                for resp in c.read(journal, offset=-1, block=False, metadata_only=True, do_not_proxy=True,
                                   timeout=10):
                    if resp.status in (pb.OK, pb.OFFSET_NOT_YET_AVAILABLE):  # at the head
                        return resp.write_head
            finally:
                c.close()
    return None


def wait_primary(shards, sid, not_on=None, timeout=60):
    def primary():
        for s in shards.list().shards:
            if s.spec.id == sid and s.route.primary >= 0:
                member = s.route.members[s.route.primary].suffix
                if s.status[s.route.primary].code == cpb.ReplicaStatus.PRIMARY and member != not_on:
                    return member
        return None
    return wait_for(primary, timeout, "a primary of %s" % sid, interval=0.1)


def test_gazette_gazctl_drives_our_consumer(group):
    """Gazette's gazctl applies, lists and unassigns shards of our
    consumers; List carries the route with endpoints and every replica's
    ReplicaStatus; GetHints answers for a shard without hints."""
    group.journals("chain/in", "chain/out")
    a = group.consumer()
    b = group.consumer()
    yaml = ("common:\n  max_txn_duration: 1s\n  hot_standbys: 1\n  labels:\n    - name: chain.output\n"
            "      value: chain/out\nshards:\n  - id: link-0\n    sources:\n      - journal: chain/in\n")
    r = subprocess.run([GO_GAZCTL, "shards", "apply", "--consumer.address", a.address, "--broker.address",
                        group.broker.address], input=yaml.encode(), capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    shards = Shards(a.address)
    primary = wait_primary(shards, "link-0")

    def both_ready():
        s = shards.list().shards[0]
        return sorted(st.code for st in s.status) == [cpb.ReplicaStatus.STANDBY, cpb.ReplicaStatus.PRIMARY]
    wait_for(both_ready, 30, "a primary and a standby")
    out = subprocess.run([GO_GAZCTL, "shards", "list", "--consumer.address", b.address, "-o", "json"],
                         capture_output=True, check=True).stdout
    listed = json.loads(out)
    assert listed["shards"][0]["spec"]["id"] == "link-0"
    endpoints = sorted(listed["shards"][0]["route"]["endpoints"])
    assert endpoints == sorted([a.address, b.address])
    table = subprocess.run([GO_GAZCTL, "shards", "list", "--consumer.address", b.address, "--primary",
                            "--replicas"], capture_output=True, check=True, text=True).stdout
    assert "link-0" in table and primary + ":PRIMARY" in table and ":STANDBY" in table, table

    # Messages flow; Stat waits until the shard read through them.
    group.publish("chain/in", range(1, 51))
    head = write_head(group, "chain/in")
    st = shards.stat("link-0", read_through={"chain/in": head})
    assert st.status == cpb.OK and st.read_through["chain/in"] >= head, st
    assert st.publish_at["chain/out"] > 0, st
    assert sorted(group.ids("chain/out")) == list(range(1, 51))

    # Unassign through Gazette's gazctl: the standby takes over.
    r = subprocess.run([GO_GAZCTL, "shards", "unassign", "--consumer.address", a.address, "-l", "id=link-0"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    new = wait_primary(shards, "link-0", not_on=primary)
    assert new != primary
    group.publish("chain/in", range(51, 101))
    head = write_head(group, "chain/in")
    assert shards.stat("link-0", read_through={"chain/in": head}).status == cpb.OK
    assert sorted(group.ids("chain/out")) == list(range(1, 101))

    hints = Shards(b.address).call("GetHints", cpb.GetHintsRequest(shard="link-0"), cpb.GetHintsResponse)
    assert hints.status == cpb.OK and not hints.primary_hints.HasField("hints")


def threads_of(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("Threads:"))


def test_a_shard_reads_many_sources_without_a_thread_each(group):
    """A shard with 40 source journals reads them all from its own thread
    (issue 39: no thread per journal): every message of every source is
    consumed once, and the consumer process holds no more threads with
    the shard at its 40 sources' heads than a thread per source would
    leave it short of. Its ACK barrier holds no thread either."""
    n = 40
    sources = ["many/in%02d" % i for i in range(n)]
    group.journals(*sources, "many/out")
    a = group.consumer()
    shards = Shards(a.address)
    shards.apply(shard_spec("many", sources, "many/out"))
    wait_primary(shards, "many")
    for i, j in enumerate(sources):
        group.publish(j, [i])
    heads = {j: write_head(group, j) for j in sources}
    st = shards.stat("many", read_through=heads)
    assert st.status == cpb.OK, st
    assert sorted(group.ids("many/out")) == list(range(n))
    # At the heads, waiting: a thread per source would be 40 or more.
    threads = threads_of(a.proc.pid)
    assert threads < 24, "the consumer holds %d threads for one shard of %d sources" % (threads, n)


def test_many_shards_hold_no_thread_each(group, tmp_path):
    """100 shards in one consumer process run on its shard pool (issue
    39: no thread per shard): each consumes its own source journal's
    message exactly once, and at rest, once the append services' idle
    workers have exited, the process holds about the threads it holds
    with one shard, not one per shard."""
    n = 100
    sources = ["ms/in%03d" % i for i in range(n)]
    for k in range(0, n, 50):
        group.journals(*sources[k:k + 50])
    group.journals("ms/out")
    a = group.consumer(store=["--chain.store-dir", str(tmp_path / "stores")], env={"CONSUMER_LIMIT": "200"})
    shards = Shards(a.address)
    for k in range(0, n, 50):
        shards.apply(*[shard_spec("ms-%03d" % i, [sources[i]], "ms/out") for i in range(k, min(n, k + 50))])
    lines = "".join('"id":%d,"hops":0}\n' % i for i in range(n))
    tagged = subprocess.run([GO_GAZCTL, "attach-uuids", "--template", '{"_meta":{"uuid":"{{.UUID}}"},{{.Line}}\n'],
                            input=lines.encode(), capture_output=True, check=True).stdout.splitlines(True)
    for i, j in enumerate(sources):
        group.client.append(j, tagged[i])
    wait_for(lambda: len(group.ids("ms/out")) >= n, 120, "every shard's message in ms/out")
    assert sorted(group.ids("ms/out")) == list(range(n))
    # A thread per shard would be 100 or more.
    threads = wait_for(lambda: (lambda t: t if t < 40 else None)(threads_of(a.proc.pid)), 30,
                       "the consumer's threads at rest")
    assert threads < 40


def test_exactly_once_through_sigkill_of_primaries(group, postgres):
    """Two consumers, a hot standby, messages published continuously (some
    of them twice): the primary is SIGKILLed three times. Downstream every
    id appears exactly once, and the store counted each exactly once."""
    group.journals("chain/in", "chain/out")
    consumers = [group.consumer(), group.consumer()]
    shards = Shards(consumers[0].address)
    sid = "eo-%s" % uuid.uuid4().hex[:6]
    assert shards.apply(shard_spec(sid, ["chain/in"], "chain/out", hot_standbys=1, max_txn_ms=200)).status == cpb.OK
    primary = wait_primary(shards, sid)
    total, batch, done = 1200, 40, threading.Event()
    errors = []

    def publisher():
        try:
            for start in range(1, total + 1, batch):
                tagged = group.publish("chain/in", range(start, start + batch))
                if start % (batch * 5) == 1:
                    group.append_raw("chain/in", tagged)  # the same messages again: duplicates
                time.sleep(0.4)
        except Exception as e:  # surfaced below
            errors.append(e)
        done.set()

    t = threading.Thread(target=publisher)
    t.start()
    kills = 0
    while not done.is_set() and kills < 3:
        time.sleep(1.0)
        victim = next(c for c in consumers if c.id == primary)
        victim.stop(signal.SIGKILL)
        kills += 1
        survivor = next(c for c in consumers if c is not victim)
        shards = Shards(survivor.address)
        primary = wait_primary(shards, sid, not_on=victim.id)
        victim.start()
    t.join()
    assert not errors, errors
    assert kills == 3
    head = write_head(group, "chain/in")
    live = next(c for c in consumers if c.proc.poll() is None)
    st = Shards(live.address).stat(sid, read_through={"chain/in": head}, timeout=120)
    assert st.status == cpb.OK, st
    ids = group.ids("chain/out")
    raw = [d["id"] for f, d in group.read("chain/out", "uncommitted") if f != 2]
    assert sorted(ids) == list(range(1, total + 1)), "lost %s, doubled %s" % (
        sorted(set(range(1, total + 1)) - set(ids)), sorted(i for i in set(ids) if ids.count(i) > 1))
    counted = int(psql(postgres, "SELECT consumed FROM chain_counts WHERE shard = '%s/items/%s'" % (group.prefix, sid)))
    print("exactly-once: %d messages, %d kills, %d rewritten copies downstream dropped by the reader, "
          "store counted %d" % (total, kills, len(raw) - len(ids), counted))
    assert counted == total


def test_zombie_primary_is_fenced(group, postgres, tmp_path):
    """A primary stopped (SIGSTOP) in the middle of its transaction, past
    its lease, is replaced; woken (SIGCONT), it either tries its late
    commit, which the store's fence refuses, or first sees that its lease
    is gone and stops without committing (both threads wake at once, so
    either comes first); no message is lost or doubled. The fence alone
    is asserted in test_primary_fenced_by_a_replica_gone_since_recovers."""
    group.journals("chain/in", "chain/out")
    hold = str(tmp_path / "hold")
    consumers = [group.consumer(lease="2s", env={"CHAIN_HOLD": hold}),
                 group.consumer(lease="2s", env={"CHAIN_HOLD": hold})]
    shards = Shards(consumers[0].address)
    sid = "zombie-%s" % uuid.uuid4().hex[:6]
    assert shards.apply(shard_spec(sid, ["chain/in"], "chain/out", hot_standbys=1)).status == cpb.OK
    primary = wait_primary(shards, sid)
    zombie = next(c for c in consumers if c.id == primary)
    other = next(c for c in consumers if c is not zombie)
    open(hold, "w").close()
    group.publish("chain/in", range(1, 201))
    wait_for(lambda: os.path.exists(hold + ".held"), 30, "the primary to hold in its finalize")
    zombie.kill(signal.SIGSTOP)
    # Every thread stopped before the hold ends: a thread still running
    # would leave its finalize and could stop inside its commit, holding
    # the checkpoint row's lock that the new primary's restore waits for.
    wait_for(lambda: all(open("/proc/%d/task/%s/stat" % (zombie.proc.pid, t)).read().rsplit(")", 1)[1].split()[0]
                         == "T" for t in os.listdir("/proc/%d/task" % zombie.proc.pid)), 10, "the zombie to stop")
    os.unlink(hold)
    shards = Shards(other.address)
    wait_primary(shards, sid, not_on=zombie.id, timeout=60)
    group.publish("chain/in", range(201, 301))
    head = write_head(group, "chain/in")
    assert shards.stat(sid, read_through={"chain/in": head}, timeout=120).status == cpb.OK
    zombie.kill(signal.SIGCONT)
    wait_for(lambda: "checkpoint fence was updated" in zombie.log() or zombie.proc.poll() is not None, 30,
             "the zombie's commit to be fenced, or the zombie to exit")
    ids = group.ids("chain/out")
    assert sorted(ids) == list(range(1, 301))
    fenced = [ln for ln in zombie.log().splitlines() if "checkpoint fence was updated" in ln]
    print("zombie: %s" % (fenced[0] if fenced else "lost its lease first and stopped without committing"))


def test_primary_fenced_by_a_replica_gone_since_recovers(group, postgres, tmp_path):
    """A replica a keyspace revision behind can promote itself, restore
    the checkpoint (moving the fence) and stop a moment later, once it sees
    that slot 0 went to another replica. The primary's next commit is then
    fenced although no other primary exists: it keeps its assignment, so
    after the grace it recovers the checkpoint again and goes on (here the
    test moves the fence in PostgreSQL itself, as such a replica's restore
    does); no message is lost or doubled, and the shard never fails."""
    group.journals("fence/in", "fence/out")
    hold = str(tmp_path / "hold")
    a = group.consumer(env={"CHAIN_HOLD": hold})
    shards = Shards(a.address)
    sid = "fence-%s" % uuid.uuid4().hex[:6]
    assert shards.apply(shard_spec(sid, ["fence/in"], "fence/out")).status == cpb.OK
    assert wait_primary(shards, sid) == a.id
    open(hold, "w").close()
    group.publish("fence/in", range(1, 101))
    wait_for(lambda: os.path.exists(hold + ".held"), 30, "the primary to hold in its finalize")
    fqn = "%s/items/%s" % (group.prefix, sid)
    subprocess.check_call(["psql", postgres.conninfo, "-v", "ON_ERROR_STOP=1", "-qc",
                           "UPDATE gazette_checkpoints SET fence = fence + 1 WHERE shard_fqn = '%s'" % fqn])
    os.unlink(hold)
    wait_for(lambda: "recovering the checkpoint again" in a.log(), 30, "the fenced primary to recover")
    group.publish("fence/in", range(101, 201))
    head = write_head(group, "fence/in")
    assert stat_read_through(shards, sid, "fence/in", head, timeout=60).status == cpb.OK
    assert sorted(group.ids("fence/out")) == list(range(1, 201))
    codes = [st.code for x in shards.list().shards for st in x.status if x.spec.id == sid]
    assert codes == [cpb.ReplicaStatus.PRIMARY], codes
    assert "shard failed" not in a.log()


def test_stat_proxied_to_a_killed_primary_fails_fast(group):
    """A Stat proxied to a primary that was SIGKILLed a moment ago (its
    member key lives until its lease expires) answers UNAVAILABLE at once,
    as Gazette's fail-fast proxy does, rather than waiting for the dead
    address until the caller's deadline; asked again after the lease, it
    is answered by the consumer that took the shard over."""
    group.journals("ff/in", "ff/out")
    a = group.consumer(lease="6s")
    shards = Shards(a.address)
    assert shards.apply(shard_spec("ff-0", ["ff/in"], "ff/out")).status == cpb.OK
    assert wait_primary(shards, "ff-0") == a.id
    b = group.consumer()
    a.stop(signal.SIGKILL)
    t0 = time.time()
    with pytest.raises(grpc.RpcError) as e:
        Shards(b.address).stat("ff-0", timeout=30)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
    assert time.time() - t0 < 5, "the proxied Stat waited %.1f s" % (time.time() - t0)
    def served():
        try:
            st = Shards(b.address).stat("ff-0")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e  # until the lease expires
            return False
        assert st.status in (cpb.OK, cpb.NO_SHARD_PRIMARY), st
        return st.status == cpb.OK and st.header.process_id.suffix == b.id
    wait_for(served, 30, "the shard served by the other consumer once the killed one's lease expired")


def test_bad_input(group, postgres):
    """A shard over a journal that does not exist, and a message without
    the id the application needs, fail their shards with the reason in
    their status; a line that is not JSON is skipped with a warning;
    requests for unknown shards or another member's shard get Gazette's
    status; invalid requests get INVALID_ARGUMENT."""
    group.journals("bad/in", "bad/out", "bad/in2")
    c = group.consumer()
    shards = Shards(c.address)
    assert shards.apply(shard_spec("bad-source", ["bad/missing"], "bad/out")).status == cpb.OK

    def failed(sid, text):
        for s in shards.list().shards:
            if s.spec.id == sid and s.status and s.status[0].code == cpb.ReplicaStatus.FAILED:
                assert any(text in e for e in s.status[0].errors), s.status[0].errors
                return True
        return False
    wait_for(lambda: failed("bad-source", "bad/missing"), 30, "the shard of a missing journal to fail")

    assert shards.apply(shard_spec("bad-msg", ["bad/in"], "bad/out")).status == cpb.OK
    wait_primary(shards, "bad-msg")
    group.append_raw("bad/in", b"this is not JSON\n")
    group.publish("bad/in", [1, 2])
    head = write_head(group, "bad/in")
    assert shards.stat("bad-msg", read_through={"bad/in": head}).status == cpb.OK
    assert sorted(group.ids("bad/out")) == [1, 2]
    assert "not JSON" in c.log() or "skipp" in c.log()
    group.append_raw("bad/in", subprocess.run(
        [GO_GAZCTL, "attach-uuids", "--template", '{"_meta":{"uuid":"{{.UUID}}"},"note":"{{.Line}}"}\n'],
        input=b"no id here\n", capture_output=True, check=True).stdout)
    wait_for(lambda: failed("bad-msg", "has no integer"), 30, "the shard of a message without id to fail")

    # Unknown shard; stale apply; invalid requests.
    assert shards.stat("no-such-shard").status == cpb.SHARD_NOT_FOUND
    assert shards.apply(shard_spec("bad-source", ["bad/in"], "bad/out"), expect=1).status == \
        cpb.ETCD_TRANSACTION_FAILED
    with pytest.raises(grpc.RpcError) as e:
        shards.apply(shard_spec("x", ["bad/in"], "bad/out"))  # id shorter than 4
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "Id" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        shards.apply(shard_spec("bad-zero", ["bad/in"], "bad/out", max_txn_ms=0))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "MaxTxnDuration" in e.value.details()

    # A proxied Stat (it carries a header) for a shard whose primary is
    # another member: NOT_SHARD_PRIMARY, naming us as the responder.
    d = group.consumer()
    assert shards.apply(shard_spec("on-other", ["bad/in2"], "bad/out")).status == cpb.OK
    owner = wait_primary(shards, "on-other")
    other = c if owner == d.id else d
    hdr = Shards(other.address).list().header
    st = Shards(other.address).stat("on-other", header=hdr)
    assert st.status == cpb.NOT_SHARD_PRIMARY and st.header.process_id.suffix == other.id
    # Unproxied, the same request is proxied to the primary and answered.
    assert Shards(other.address).stat("on-other").status == cpb.OK

    # Unassign --failed through the API: both failed shards are released
    # (and, failing again, come back FAILED).
    r = shards.unassign("bad-source", "bad-msg", "on-other", only_failed=True, dry_run=True)
    assert sorted(r.shards) == ["bad-msg", "bad-source"]


def test_shard_api_unavailable_until_the_keyspace_loads(group):
    """The Shard service listens before the consumer's keyspace is
    loaded; while etcd cannot be reached every method is answered
    UNAVAILABLE (which clients retry), and the process neither crashes
    nor stops retrying; SIGTERM then ends it at once, saying why it never
    started."""
    c = Consumer(group, etcd="http://127.0.0.1:%d" % free_port())
    group.consumers.append(c)
    c.start(wait=False)
    wait_for(lambda: c.alive() and "etcd is unavailable; retrying" in c.log(), 30, "the etcd retry warning")
    shards = Shards(c.address)
    calls = [lambda: shards.list(), lambda: shards.apply(shard_spec("early-0", ["early/in"], "early/out")),
             lambda: shards.stat("early-0", timeout=10), lambda: shards.unassign("early-0"),
             lambda: shards.call("GetHints", cpb.GetHintsRequest(shard="early-0"), cpb.GetHintsResponse)]
    for call in calls:
        with pytest.raises(grpc.RpcError) as e:
            call()
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
        assert "keyspace is not loaded" in e.value.details(), e.value.details()
    assert c.alive()
    assert c.stop(timeout=15) == 1, c.log()[-3000:]
    assert "signalled while waiting for etcd" in c.log()
    c.check_sanitizers()


def test_store_down_at_start(group, postgres):
    """A primary whose PostgreSQL is down keeps retrying with a clear
    warning (its shard neither fails nor serves) and serves once the
    database is up."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..")
    # Its own server (in /dev/shm: the postgres user cannot enter pytest's
    # directories), crashed before the consumer starts.
    out = subprocess.check_output([os.path.join(root, "scripts/pg-test.sh"), "start"], text=True)
    conninfo, pgdir = out.splitlines()[:2]
    subprocess.check_call([os.path.join(root, "scripts/pg-test.sh"), "crash", pgdir])
    try:
        group.journals("down/in", "down/out")
        c = group.consumer(store=["--chain.postgres", conninfo + " connect_timeout=2"])
        shards = Shards(c.address)
        assert shards.apply(shard_spec("down-0", ["down/in"], "down/out")).status == cpb.OK
        wait_for(lambda: "store unavailable; retrying" in c.log(), 30, "the retry warning")
        s = shards.list().shards[0]
        assert s.status[0].code == cpb.ReplicaStatus.STANDBY, s.status
        subprocess.check_call([os.path.join(root, "scripts/pg-test.sh"), "resume", pgdir],
                              stdout=subprocess.DEVNULL)
        wait_primary(shards, "down-0", timeout=60)
        group.publish("down/in", [7])
        head = write_head(group, "down/in")
        assert shards.stat("down-0", read_through={"down/in": head}).status == cpb.OK
        assert group.ids("down/out") == [7]
    finally:
        subprocess.call([os.path.join(root, "scripts/pg-test.sh"), "stop", pgdir])


def test_primaries_balanced_onto_a_new_consumer(group, postgres):
    """Four shards with a hot standby, all primary on one consumer; a
    second joins, takes the standbys, and the allocator moves half of the
    primaries to it (a primary leaving slot 0 stops and serves again as a
    standby): no shard fails, and messages flow exactly once throughout."""
    names = ["bal/in-%d" % i for i in range(4)] + ["bal/out"]
    group.journals(*names)
    a = group.consumer()
    shards = Shards(a.address)
    sids = ["bal-%d" % i for i in range(4)]
    assert shards.apply(*[shard_spec(sids[i], [names[i]], "bal/out", hot_standbys=1) for i in range(4)]).status \
        == cpb.OK
    for sid in sids:
        assert wait_primary(shards, sid) == a.id
    for i in range(4):
        group.publish(names[i], range(i * 100 + 1, i * 100 + 51))
    b = group.consumer()

    def balanced():
        listed = shards.list().shards
        owners = [s.route.members[s.route.primary].suffix for s in listed if s.route.primary >= 0]
        codes = [st.code for s in listed for st in s.status]
        assert cpb.ReplicaStatus.FAILED not in codes, [(s.spec.id, list(s.status)) for s in listed]
        return len(owners) == 4 and owners.count(b.id) == 2 and all(len(s.status) == 2 for s in listed)
    wait_for(balanced, 90, "two primaries on each consumer")
    for i in range(4):
        group.publish(names[i], range(i * 100 + 51, i * 100 + 101))
    for i, sid in enumerate(sids):
        head = write_head(group, names[i])
        owner = wait_primary(shards, sid)
        st = Shards((a if owner == a.id else b).address).stat(sid, read_through={names[i]: head})
        assert st.status == cpb.OK, st
    assert sorted(group.ids("bal/out")) == sorted(i * 100 + k for i in range(4) for k in range(1, 101))
