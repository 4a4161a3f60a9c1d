"""Replication above 1: every acknowledged append is on every replica."""
import os
import time

import protocol_pb2 as pb
from gazpb import Client, spec, wait_assigned


def wait_route(c, journal, n, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for j in c.list():
            if j.spec.name == journal and len(j.route.members) == n and j.route.primary >= 0:
                return j.route
        time.sleep(0.05)
    raise AssertionError("route of %s never reached %d members" % (journal, n))


def test_appends_reach_every_replica(cluster):
    brokers = [cluster.start(zone="z%d" % (i % 2)) for i in range(3)]
    clients = {b.id: Client(b.address) for b in brokers}
    c = clients[brokers[0].id]
    c.apply(spec("rep/j", replication=3))
    route = wait_route(c, "rep/j", 3)
    assert len({m.zone for m in route.members}) == 2  # spread over both zones
    data = b""
    for i in range(20):
        rec = os.urandom(1000 + i * 997)
        r = c.append("rep/j", rec)
        assert r.status == pb.OK, r
        assert r.commit.begin == len(data)
        data += rec
    # Each replica's own spool holds every acknowledged byte. (The first
    # fragment, [0, 1000), is closed and persisted at once; a do_not_proxy
    # read of it ends with its URL instead of content.)
    for b in brokers:
        got, last = clients[b.id].read_bytes("rep/j", offset=1000, do_not_proxy=True)
        assert got == data[1000:], "replica %s is missing bytes: %s" % (b.id, last)
    # The route was written back into every assignment (consistency).
    keys = cluster.etcd.ctl("get", "--prefix", cluster.prefix + "/assign/rep/j#", "--keys-only").split()
    assert len(keys) == 3
