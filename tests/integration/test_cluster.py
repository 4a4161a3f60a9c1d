"""Several brokers: proxying to the primary, and graceful hand-off of
journals (replication 1) when a broker exits."""
import threading
import time

import grpc

import protocol_pb2 as pb
from gazpb import Client, spec, wait_assigned


def owner(c, journal):
    j = wait_assigned(c, journal)
    return j.route.members[j.route.primary].suffix


def test_non_owner_proxies_reads_and_appends(cluster):
    a, b = cluster.start(), cluster.start()
    ca, cb = Client(a.address), Client(b.address)
    names = ["prox/j%d" % i for i in range(6)]
    ca.apply(*[spec(n) for n in names])
    owners = {n: owner(ca, n) for n in names}
    assert set(owners.values()) == {a.id, b.id}, owners  # spread over both
    for n in names:
        other = cb if owners[n] == a.id else ca  # the broker that is NOT primary
        r = other.append(n, n.encode())
        assert r.status == pb.OK and r.header.process_id.suffix == owners[n]
        data, last = other.read_bytes(n)
        assert data == n.encode()
        # do_not_proxy to a non-member answers NOT_JOURNAL_BROKER.
        rs = other.read(n, do_not_proxy=True)
        assert rs[0].status == pb.NOT_JOURNAL_BROKER
        r = other.append(n, b"x", do_not_proxy=True, retry=False)
        assert r.status == pb.NOT_JOURNAL_PRIMARY_BROKER


def test_graceful_handoff_loses_no_acknowledged_append(cluster):
    a = cluster.start(extra=["--broker.exit-timeout", "60s"])
    ca = Client(a.address)
    ca.apply(spec("hand/j", length=4096))
    assert owner(ca, "hand/j") == a.id
    b = cluster.start()
    cb = Client(b.address)
    acked, stop, errors = [], threading.Event(), []

    def writer():
        i = 0
        while not stop.is_set():
            rec = b"<%06d>" % i
            try:
                r = cb.append("hand/j", rec, timeout=30)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    errors.append(e)
                time.sleep(0.05)
                continue  # not acknowledged: retried as a new record
            if r.status == pb.OK:
                acked.append((rec, r.commit.begin, r.commit.end))
            i += 1
    t = threading.Thread(target=writer)
    t.start()
    time.sleep(1.0)
    t0 = time.time()
    assert a.stop() == 0
    handoff_s = time.time() - t0
    time.sleep(1.0)
    stop.set()
    t.join(30)
    assert not errors, errors
    assert owner(cb, "hand/j") == b.id
    data, _ = cb.read_bytes("hand/j")
    for rec, begin, end in acked:
        assert data[begin:end] == rec, "acknowledged append missing at [%d,%d)" % (begin, end)
    ends = [e for _, _, e in acked]
    assert ends == sorted(ends) and acked[-1][2] == len(data)
    print("hand-off took %.2fs; %d appends acknowledged" % (handoff_s, len(acked)))
