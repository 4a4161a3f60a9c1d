"""A replicated journal's idle fragment closed by the pulse at its flush
interval. Apart from test_replication.py because it waits for a wall-clock
minute boundary (up to a minute) without measuring any gap, so it runs on
a pytest-xdist worker beside other files rather than in the serial phase
(tests/integration/run.sh)."""
import time

import protocol_pb2 as pb
from gazpb import Client, spec, wait_route


def test_pulse_closes_an_idle_fragment_at_its_flush_interval(cluster):
    """With nothing appended after it, a fragment is still closed and
    persisted once its flush interval (1 minute, the smallest allowed) has
    crossed a boundary: the pulse rolls it (facts §4.8, §6.3), at
    replication 1 and 2 alike. Takes up to a minute."""
    brokers = [cluster.start(), cluster.start()]
    c = Client(brokers[0].address)
    names = {"flush/rf1": 1, "flush/rf2": 2}
    c.apply(*[spec(n, replication=rf, flush_s=60) for n, rf in names.items()])
    for n, rf in names.items():
        wait_route(c, n, rf)
        # The first append's fragment is rolled by the next append (a
        # journal's first fragment goes out at once); the second's stays open.
        assert c.append(n, b"first\n").status == pb.OK
        assert c.append(n, b"idle\n").status == pb.OK
    deadline = time.time() + 80
    for n in names:
        while not any(f.spec.end == 11 and f.spec.backing_store for f in c.fragments(n).fragments):
            assert time.time() < deadline, "idle fragment of %s never persisted" % n
            time.sleep(0.5)
