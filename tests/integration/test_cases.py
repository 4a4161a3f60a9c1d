"""Real-world cases from shared/cases/broker.md that apply to a file://
store and a single replica. Each names its case."""
import hashlib
import os
import threading
import time

import grpc
import pytest

import protocol_pb2 as pb
from gazpb import Client, read_replica, spec, wait_assigned


def put_fragment(root, journal, begin, content, ext=".raw"):
    d = os.path.join(root, journal)
    os.makedirs(d, exist_ok=True)
    name = "%016x-%016x-%s%s" % (begin, begin + len(content), hashlib.sha1(content).hexdigest(), ext)
    with open(os.path.join(d, name), "wb") as f:
        f.write(content)


def test_BR07_dirty_store_blocks_appends_until_reset_head(cluster):
    b = cluster.start()
    c = Client(b.address)
    c.apply(spec("dirty/j", length=1024))
    for i in range(3):
        assert c.append("dirty/j", bytes([65 + i]) * 100).status == pb.OK
    # Stop gracefully (all 300 bytes persisted), then lose etcd's state
    # and re-create the journal from scratch.
    assert b.stop() == 0
    cluster.etcd.ctl("del", "--prefix", cluster.prefix)
    b2 = cluster.start()
    c2 = Client(b2.address)
    c2.apply(spec("dirty/j", length=1024))
    # A dirty store: appends refuse to reuse offsets the store holds.
    r = c2.append("dirty/j", b"x" * 10)
    assert r.status == pb.INDEX_HAS_GREATER_OFFSET and not r.HasField("commit")
    rs = c2.read("dirty/j", offset=-1, metadata_only=True)
    assert rs[-1].status == pb.OFFSET_NOT_YET_AVAILABLE and rs[-1].offset == 300 and rs[-1].write_head == 300
    # reset-head: an empty append at the index end, SUSPEND_KEEP.
    r = c2.append("dirty/j", b"", offset=300, suspend=pb.AppendRequest.SUSPEND_KEEP)
    assert r.status == pb.OK and (r.commit.begin, r.commit.end) == (300, 300)
    # A racing writer with a stale offset loses.
    assert c2.append("dirty/j", b"y", offset=299).status == pb.WRONG_APPEND_OFFSET
    r = c2.append("dirty/j", b"z" * 10)
    assert (r.commit.begin, r.commit.end) == (300, 310)
    data, _ = c2.read_bytes("dirty/j")
    assert data == b"A" * 100 + b"B" * 100 + b"C" * 100 + b"z" * 10
    # Read-only variant: no INDEX_HAS_GREATER_OFFSET check.
    put_fragment(cluster.file_root, "dirty/ro", 0, b"q" * 50)
    c2.apply(spec("dirty/ro", flags=pb.JournalSpec.O_RDONLY))
    assert c2.append("dirty/ro", b"").status == pb.OK
    assert c2.read_bytes("dirty/ro")[0] == b"q" * 50


def test_BR08_read_stops_exactly_at_end_offset(cluster):
    b = cluster.start()
    c = Client(b.address)
    import gzip
    put_fragment(cluster.file_root, "eo/j", 0, b"hello, world\n", ext=".gz")
    # The file holds the gzip of the content under the content's name.
    d = os.path.join(cluster.file_root, "eo/j")
    name = os.listdir(d)[0]
    open(os.path.join(d, name), "wb").write(gzip.compress(b"hello, world\n"))
    c.apply(spec("eo/j", flags=pb.JournalSpec.O_RDONLY))
    wait_assigned(c, "eo/j")
    got, _ = c.read_bytes("eo/j", offset=2, end_offset=7)
    assert got == b"llo, "
    got, _ = c.read_bytes("eo/j", offset=2, end_offset=13)
    assert got == b"llo, world\n"
    got, last = c.read_bytes("eo/j", offset=2)
    assert got == b"llo, world\n" and last.status == pb.OFFSET_NOT_YET_AVAILABLE
    # do_not_proxy on a persisted fragment: metadata with its URL, then EOF.
    rs = c.read("eo/j", offset=2, end_offset=7, do_not_proxy=True)
    assert len(rs) == 1 and rs[0].fragment_url.startswith("file:///eo/j/") and not rs[0].content


@pytest.mark.parametrize("n", [1000, 1001, 2500])
def test_BR11_listing_past_1000_with_junk(cluster, n):
    b = cluster.start()
    c = Client(b.address)
    for i in range(n):
        put_fragment(cluster.file_root, "page/j", 10 * i, b"%09d\n" % i)
    d = os.path.join(cluster.file_root, "page/j")
    open(os.path.join(d, "README.txt"), "w").write("junk")
    os.makedirs(os.path.join(d, "subdir"))
    open(os.path.join(d, "0000000000000000-000000000000000a-zz.raw"), "w").write("junk")
    c.apply(spec("page/j", flags=pb.JournalSpec.O_RDONLY))
    wait_assigned(c, "page/j")
    page1 = c.fragments("page/j", page_limit=1000)
    assert len(page1.fragments) == min(n, 1000)
    if n == 1001:
        assert page1.next_page_token == 10000
        page2 = c.fragments("page/j", page_limit=1000, next_page_token=page1.next_page_token)
        assert len(page2.fragments) == 1 and page2.next_page_token == 0
    total, token = 0, 0
    while True:
        p = c.fragments("page/j", page_limit=1000, next_page_token=token)
        total += len(p.fragments)
        token = p.next_page_token
        if not token:
            break
    assert total == n
    got, last = c.read_bytes("page/j", offset=10 * n - 5, end_offset=10 * n)
    assert got == (b"%09d\n" % (n - 1))[-5:]
    rs = c.read("page/j", offset=10 * n - 5, metadata_only=True)
    assert rs[0].write_head == 10 * n


def test_BR19_min_etcd_revision_across_brokers(cluster):
    a = cluster.start()
    slow = cluster.start(extra=["--broker.watch-delay", "200ms"])
    ca, cs = Client(a.address), Client(slow.address)
    iterations = int(os.environ.get("GAZ_BR19_ITERATIONS", "40"))
    not_found = 0
    for i in range(iterations):
        name = "race/j%d" % i
        rev = ca.apply(spec(name)).header.etcd.revision
        rs = cs.read(name, offset=0, min_etcd_revision=rev)
        assert rs[0].status != pb.JOURNAL_NOT_FOUND
        assert rs[-1].status in (pb.OFFSET_NOT_YET_AVAILABLE, pb.INSUFFICIENT_JOURNAL_BROKERS)
        r = cs.append(name, b"x", min_etcd_revision=rev)
        assert r.status == pb.OK, r
        not_found += r.status == pb.JOURNAL_NOT_FOUND
    assert not_found == 0
    # The header of a proxied append names the primary.
    r = cs.append("race/j0", b"y")
    owner = [j for j in cs.list() if j.spec.name == "race/j0"][0].route
    assert r.header.process_id.suffix == owner.members[owner.primary].suffix


def test_BR04_suspension_modes_single_replica(cluster):
    b = cluster.start()
    c = Client(b.address)
    c.apply(spec("sus/part"), spec("sus/empty"))
    assert c.append("sus/part", b"k" * 1024).status == pb.OK
    time.sleep(1.5)  # the first fragment is persisted promptly
    # The suspending append answers SUSPENDED once the level is PARTIAL
    # (Gazette re-validates after the update; gazctl counts it a success).
    r = c.append("sus/part", b"", suspend=pb.AppendRequest.SUSPEND_NOW)
    assert r.status in (pb.OK, pb.SUSPENDED)
    sp = [j.spec for j in c.list() if j.spec.name == "sus/part"][0]
    assert sp.suspend.level == pb.JournalSpec.Suspend.PARTIAL and sp.suspend.offset == 1024
    # reset-head's empty SUSPEND_KEEP append: OK, suspension unchanged.
    r = c.append("sus/part", b"", offset=1024, suspend=pb.AppendRequest.SUSPEND_KEEP)
    assert r.status == pb.OK and (r.commit.begin, r.commit.end) == (1024, 1024)
    assert c.append("sus/part", b"x", offset=1024, suspend=pb.AppendRequest.SUSPEND_KEEP).status == pb.NOT_ALLOWED
    sp2 = [j.spec for j in c.list() if j.spec.name == "sus/part"][0]
    assert sp2.suspend == sp.suspend
    # An empty journal suspends fully; then a KEEP append is SUSPENDED.
    r = c.append("sus/empty", b"", suspend=pb.AppendRequest.SUSPEND_IF_FLUSHED)
    se = [j.spec for j in c.list() if j.spec.name == "sus/empty"][0]
    assert se.suspend.level == pb.JournalSpec.Suspend.FULL
    assert c.append("sus/empty", b"", suspend=pb.AppendRequest.SUSPEND_KEEP).status == pb.SUSPENDED
    assert c.read("sus/empty")[0].status == pb.SUSPENDED
    # A normal (RESUME) append resumes it.
    assert c.append("sus/empty", b"back").status == pb.OK
    se = [j.spec for j in c.list() if j.spec.name == "sus/empty"][0]
    assert se.suspend.level == pb.JournalSpec.Suspend.NONE


def test_BR17_watch_behind_a_compaction_rereads_the_keyspace(private_cluster):
    """Broker B loses etcd for 3 s (less than its lease). Meanwhile j1 is
    deleted, j6 created, j2's labels changed, and etcd compacted past
    everything B saw. Afterwards B's view is current: it must re-read the
    keyspace rather than give up its watch or resume past the changes.
    The etcd is the test's own: a compaction of the shared one would cut
    every other test's watches at once."""
    cluster = private_cluster
    import json
    from tcpproxy import TcpProxy
    host, port = cluster.etcd.endpoint.replace("http://", "").split(":")
    proxy = TcpProxy(host, int(port))
    a = cluster.start()
    b = cluster.start(etcd_endpoint=proxy.endpoint, extra=["--etcd.lease", "20s"])
    ca, cb = Client(a.address), Client(b.address)
    names = ["cmp/j%d" % i for i in range(1, 6)]
    ca.apply(*[spec(n) for n in names])
    for n in names:
        wait_assigned(cb, n)
    mod = {j.spec.name: j.mod_revision for j in ca.list()}
    proxy.block()
    t0 = time.time()
    ca.apply(spec("cmp/j6"), deletes=[("cmp/j1", mod["cmp/j1"])])
    ca.apply(spec("cmp/j2", labels=[("color", "blue")]), expect=mod["cmp/j2"])
    rev = json.loads(cluster.etcd.ctl("get", "cmp-none", "-w", "json"))["header"]["revision"]
    cluster.etcd.ctl("compact", str(rev))
    time.sleep(max(0.0, 3.0 - (time.time() - t0)))
    proxy.unblock()

    def current():
        js = {j.spec.name: j for j in cb.list()}
        labels = {(l.name, l.value) for l in js["cmp/j2"].spec.labels.labels} if "cmp/j2" in js else set()
        return "cmp/j1" not in js and "cmp/j6" in js and ("color", "blue") in labels
    deadline = time.time() + 10
    while not current():
        assert time.time() < deadline, "broker B kept a stale keyspace:\n" + b.logtail()
        time.sleep(0.1)
    assert cb.read("cmp/j1", do_not_proxy=True)[0].status == pb.JOURNAL_NOT_FOUND
    for n in names[1:] + ["cmp/j6"]:
        assert cb.append(n, b"after\n").status == pb.OK, n
    assert b.proc.poll() is None, "broker B exited"
    assert "re-read" in open(b.logpath).read()
    cluster.stop_all()  # while B still reaches etcd through the proxy
    proxy.close()


def test_BR18_paused_primary_past_its_lease_never_commits(cluster):
    """A is primary of fence/r2 (replication 2) and fence/r1 (replication
    1). It is paused (SIGSTOP) past its lease, the journals move, and the
    moment it resumes raw appends of STALE go straight to it. A must not
    acknowledge them, STALE must never be readable or persisted, and every
    record the writer had acknowledged on fence/r2 stays readable exactly
    once in commit order, identical on both live replicas."""
    import signal
    # B and C come first and each becomes primary of two pad journals, so
    # the allocator gives A (primary of none) both new journals and its
    # balancing (primaries even to within one) leaves them there.
    others = [cluster.start(), cluster.start()]
    cw = Client(others[0].address)
    for i in range(4):
        cw.apply(spec("fence/pad-%d" % i))
        wait_assigned(cw, "fence/pad-%d" % i)
    a = cluster.start()
    ca = Client(a.address)
    for n in ("fence/r1", "fence/r2"):
        ca.apply(spec(n, replication=int(n[-1]), length=2048))
        j = wait_assigned(cw, n)
        assert j.route.members[j.route.primary].suffix == a.id, (n, j.route)
    acked, stop = {"fence/r1": [], "fence/r2": []}, threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            for n in ("fence/r1", "fence/r2"):
                rec = (b"%08d" % i) * 12 + b"\n" * 4  # 100 bytes
                try:
                    r = Client(others[i % 2].address).append(n, rec, timeout=5, retry=False)
                except grpc.RpcError:
                    continue
                if r.status == pb.OK:
                    acked[n].append((rec, r.commit.begin, r.commit.end))
            i += 1
            time.sleep(0.01)
    t = threading.Thread(target=writer)
    t.start()
    time.sleep(1.0)
    a.proc.send_signal(signal.SIGSTOP)
    deadline = time.time() + 30
    while any(a.id in [m.suffix for m in wait_assigned(cw, n).route.members] for n in ("fence/r1", "fence/r2")):
        assert time.time() < deadline, "journals never moved off the paused broker"
        time.sleep(0.2)
    time.sleep(1.0)
    a.proc.send_signal(signal.SIGCONT)
    stale = {}
    for n in ("fence/r1", "fence/r2"):
        try:
            stale[n] = ca.append(n, b"STALE", timeout=5, retry=False, do_not_proxy=True)
        except grpc.RpcError as e:
            stale[n] = e.code()
    time.sleep(2.0)
    stop.set()
    t.join(30)
    print("STALE answers:", stale)
    for n, r in stale.items():
        assert not (isinstance(r, pb.AppendResponse) and r.status == pb.OK), (n, r)
    # A exits citing its lease, or stays up and rejoins; either is fine.
    rc = a.stop(timeout=90)
    assert rc in (0, 1), rc
    if rc == 1:
        assert "lease" in open(a.logpath).read()
    # fence/r2: every acknowledged record exactly once, in commit order, and
    # the two live replicas agree byte for byte.
    route = wait_assigned(cw, "fence/r2").route
    members = {m.suffix for m in route.members}
    copies = [read_replica(Client(b.address), "fence/r2", cluster.file_root)
              for b in others if b.id in members]
    assert len(copies) == 2 and copies[0] == copies[1], [len(c) for c in copies]
    data = copies[0]
    ends = [e for _, _, e in acked["fence/r2"]]
    assert ends == sorted(ends)
    for rec, begin, end in acked["fence/r2"]:
        assert data[begin:end] == rec and data.count(rec) == 1, (begin, end)
    for n in ("fence/r1", "fence/r2"):
        assert b"STALE" not in cw.read_bytes(n)[0], n
    for root, _, files in os.walk(cluster.file_root):
        for f in files:
            assert b"STALE" not in open(os.path.join(root, f), "rb").read(), f
    assert acked["fence/r2"] and acked["fence/r1"]


class ScriptedPeer:
    """A replication peer played by the test: a gRPC server answering
    Replicate as `answer(proposal_request, n)` says, registered in etcd as a
    member with its own lease and endpoint, so the allocator routes to it."""

    def __init__(self, cluster, answer, suffix="peer"):
        from concurrent import futures
        import subprocess
        from conftest import ETCDCTL_BIN
        self.answer, self.proposals = answer, []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        handler = grpc.method_handlers_generic_handler("protocol.Journal", {
            "Replicate": grpc.stream_stream_rpc_method_handler(
                self._replicate, request_deserializer=pb.ReplicateRequest.FromString,
                response_serializer=pb.ReplicateResponse.SerializeToString)})
        self.server.add_generic_rpc_handlers((handler,))
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        env = dict(os.environ, ETCDCTL_API="3")
        ctl = [ETCDCTL_BIN, "--endpoints", cluster.etcd.endpoint]
        out = subprocess.run(ctl + ["lease", "grant", "120"], capture_output=True, text=True,
                             env=env, check=True).stdout
        lease = out.split()[1]
        spec_ = pb.BrokerSpec(journal_limit=1024, process_spec=pb.ProcessSpec(
            id=pb.ProcessSpec.ID(zone="local", suffix=suffix), endpoint="http://127.0.0.1:%d" % port))
        subprocess.run(ctl + ["put", "--lease=" + lease, "%s/members/local#%s" % (cluster.prefix, suffix)],
                       input=spec_.SerializeToString(), env=env, check=True, capture_output=True)
        self.suffix = suffix

    def _replicate(self, requests, context):
        for req in requests:
            if req.HasField("proposal"):
                self.proposals.append(req.proposal)
                resp = self.answer(req, len(self.proposals))
                if req.acknowledge:
                    yield resp or pb.ReplicateResponse(status=pb.OK)

    def stop(self):
        self.server.stop(0)


def test_primary_persists_content_a_peer_rolled_past_when_the_sync_fails(cluster):
    """A primary killed mid-commit can leave one replica ahead of another.
    When the one ahead becomes primary, its first sync makes the other roll
    forward past bytes it never held, and if a third peer fails that sync,
    the new primary's spool holds the only copy of them. It must persist
    that spool at once: otherwise its own end leaves a hole in the journal
    that no reader passes (seen under SIGKILLs in CI). Here peer `ahead`
    plays the replica that rolled forward (an empty fragment at the
    primary's end) and peer `down` fails the sync."""
    p = cluster.start()
    c = Client(p.address)
    c.apply(spec("hole/j", replication=3, length=1 << 30))
    assert wait_assigned(c, "hole/j").route.members[0].suffix == p.id
    mode = {"scripted": False}

    def ahead(req, n):
        if mode["scripted"]:
            end = req.proposal.end
            return pb.ReplicateResponse(status=pb.PROPOSAL_MISMATCH, registers=pb.LabelSet(),
                                        fragment=pb.Fragment(journal="hole/j", begin=end, end=end))
        return None

    def down(req, n):
        if mode["scripted"]:
            raise RuntimeError("scripted peer failure")
        return None
    peers = [ScriptedPeer(cluster, ahead, suffix="ahead"), ScriptedPeer(cluster, down, suffix="down")]
    try:
        deadline = time.time() + 20
        while len(wait_assigned(c, "hole/j").route.members) < 3:
            assert time.time() < deadline, "the peers never joined the route"
            time.sleep(0.05)
        for i in range(4):
            r = c.append("hole/j", bytes([65 + i]) * 25)
            assert r.status == pb.OK, r
        assert r.commit.end == 100
        # The journal's first write was rolled and persisted (as Gazette's
        # primary does); the rest, up to 100, is only in spools.
        stored = os.path.join(cluster.file_root, "hole/j")
        time.sleep(0.5)
        ends = [int(f.split("-")[1], 16) for f in os.listdir(stored)] if os.path.isdir(stored) else []
        spooled = max(ends, default=0)
        assert spooled < 100, "persisted before any roll: %s" % os.listdir(stored)
        mode["scripted"] = True
        # The next append fails at its commit; the one after it opens a new
        # pipeline, whose sync fails with `ahead` rolled onto 100.
        for _ in range(2):
            try:
                r = c.append("hole/j", b"lost", timeout=5, retry=False)
                assert r.status != pb.OK, r
            except grpc.RpcError:
                pass
        # The failed append's commit was applied by the primary before its
        # peers failed it, so the spool may end past 100 (Gazette's primary
        # does the same; the client was told the append failed).
        def persisted():
            return [f for f in os.listdir(stored) if f.startswith("%016x-" % spooled)
                    and int(f.split("-")[1], 16) >= 100]
        deadline = time.time() + 10
        while not persisted():
            assert time.time() < deadline, "[%d, 100) was not persisted: %s" % (spooled, os.listdir(stored))
            time.sleep(0.1)
        assert p.proc.poll() is None
        assert "rolling the spool to persist the only copy" in open(p.logpath).read()
    finally:
        cluster.stop_all()
        for peer in peers:
            peer.stop()


def test_BR06_fresh_primary_rolls_forward_to_a_peer_ahead(cluster):
    """Our primary's spool is empty ({0,0}); the peer answers the first sync
    with PROPOSAL_MISMATCH carrying committed bytes [0,123). The primary
    must roll every member forward to 123 and commit the append at
    [123,128), with no error and no teardown loop."""
    p = cluster.start()
    c = Client(p.address)
    c.apply(spec("rep/j", replication=2))
    assert wait_assigned(c, "rep/j").route.members[0].suffix == p.id
    ahead = pb.Fragment(journal="rep/j", begin=0, end=123,
                        sum=pb.SHA1Sum(part1=1, part2=2, part3=3))

    def answer(req, n):
        if n == 1:
            return pb.ReplicateResponse(status=pb.PROPOSAL_MISMATCH, fragment=ahead,
                                        registers=pb.LabelSet())
        return None
    peer = ScriptedPeer(cluster, answer)
    try:
        deadline = time.time() + 20
        while len(wait_assigned(c, "rep/j").route.members) < 2:
            assert time.time() < deadline, "the peer never joined the route"
            time.sleep(0.05)
        r = c.append("rep/j", b"hello")
        assert r.status == pb.OK, r
        assert (r.commit.begin, r.commit.end) == (123, 128), r.commit
        rolls = [x for x in peer.proposals if x.begin == x.end == 123]
        assert rolls, "the primary never proposed the roll to 123: %s" % peer.proposals
        assert "unexpected" not in open(p.logpath).read()
    finally:
        cluster.stop_all()
        peer.stop()
