"""The consumer runtime's longest fault test, in a file of its own so that
it runs beside test_consumer.py's other tests on another pytest-xdist
worker (tests/integration/run.sh keeps a file on one worker): five
chain-consumer shards in a chain on three consumers and three brokers,
consumers and brokers SIGKILLed at random, every source message counted
exactly once at the end. The rig (Group, Consumer, Shards and the waits)
is test_consumer.py's."""
import os
import random
import signal
import threading
import time

import consumer_pb2 as cpb
import grpc

from conftest import wait_for
from gazpb import Client, spec, wait_route
from test_consumer import (JSON, Consumer, Group, Shards, primary_write_head, shard_spec, stat_read_through,
                           wait_primary)


def test_chain_of_five_exactly_once_under_faults(cluster, postgres):
    """Five consumer shards in a chain (each reads the previous one's
    output journal and republishes transactionally), on three consumers
    and three brokers at replication 2, while consumers and brokers are
    SIGKILLed at random: a read-committed checker at the end counts every
    source message's effect exactly once, having passed all five links."""
    rnd = random.Random(int(os.environ.get("GAZ_TEST_SEED", "17")))
    group = Group(cluster, postgres)
    try:
        brokers = [group.broker, cluster.start(zone="b"), cluster.start(zone="c")]
        names = ["chain5/in"] + ["chain5/j%d" % i for i in range(1, 5)] + ["chain5/out"]
        group.client.apply(*[spec(n, replication=2, labels=JSON) for n in names])
        for n in names:
            wait_route(group.client, n, 2)
        consumers = [group.consumer() for _ in range(3)]
        shards = Shards(consumers[0].address)
        links = ["link5-%d" % i for i in range(5)]
        assert shards.apply(*[shard_spec(links[i], [names[i]], names[i + 1], hot_standbys=1, max_txn_ms=300)
                              for i in range(5)]).status == cpb.OK
        for sid in links:
            wait_primary(shards, sid)
        total, batch, done, errors = 1500, 50, threading.Event(), []
        faults = {"consumer": 0, "broker": 0}

        def publisher():
            try:
                for start in range(1, total + 1, batch):
                    group.publish(names[0], range(start, start + batch))
                    time.sleep(0.3)
            except Exception as e:
                errors.append(e)
            done.set()

        t = threading.Thread(target=publisher)
        t.start()
        # Faults until the publisher is done and each kind has struck at
        # least once: the second fault is the kind the first was not (how
        # many fit in the publisher's time depends on the machine).
        while not done.is_set() or not all(faults.values()):
            time.sleep(rnd.uniform(1.0, 2.5))
            kill_consumer = rnd.random() < 0.6
            if sum(faults.values()) and not all(faults.values()):
                kill_consumer = not faults["consumer"]
            if kill_consumer:
                i = rnd.randrange(3)
                consumers[i].stop(signal.SIGKILL)
                consumers[i] = Consumer(group)
                group.consumers.append(consumers[i])
                consumers[i].start()
                faults["consumer"] += 1
            else:
                i = rnd.randrange(3)
                old = brokers[i]
                old.stop(sig=signal.SIGKILL)
                # The entry point the consumers dial comes back on its port.
                brokers[i] = cluster.start(zone=old.zone, port=old.port if i == 0 else None,
                                           bid="%s-%d" % (old.id[:10], sum(faults.values())))
                if i == 0:
                    group.broker = brokers[0]
                faults["broker"] += 1
                # One broker down at a time: replication 2 survives one
                # failure, not two before the routes are repaired.
                c = Client(brokers[0].address)

                def repaired():
                    try:
                        js = [j for j in c.list() if j.spec.name in names]
                    except grpc.RpcError:
                        return False  # the restarted entry point is not up yet
                    return len(js) == len(names) and all(
                        len(j.route.members) == 2 and j.route.primary >= 0 and
                        all(m.suffix != old.id for m in j.route.members) for j in js)
                wait_for(repaired, 60, "routes without the killed broker")
                c.close()
        t.join()
        assert not errors, errors
        for n in names:
            wait_route(group.client, n, 2, timeout=60)
        # Each link in turn has read through what the one before it
        # published: the first through the source's head, each next one
        # through the offsets the previous one's Stat says its ACKs were
        # written at (publish_at, Gazette's Stat), so the checker's read of
        # the last journal comes after the last link's last commit.
        live = Shards(consumers[0].address)
        target = wait_for(lambda: primary_write_head(group, names[0]), 60, "the source's write head")
        for i, sid in enumerate(links):
            st = stat_read_through(live, sid, names[i], target)
            assert st.status == cpb.OK, (sid, st)
            target = st.publish_at.get(names[i + 1])
            assert target, (sid, "no ACK published to %s" % names[i + 1], st)
        rows = [d for f, d in group.read(names[-1]) if f != 2]
        raw = [d for f, d in group.read(names[-1], "uncommitted") if f != 2]
        ids = [d["id"] for d in rows]
        lost = sorted(set(range(1, total + 1)) - set(ids))
        double = sorted(i for i in set(ids) if ids.count(i) > 1)
        print("chain of 5: %d messages, %d consumer and %d broker SIGKILLs, %d duplicates dropped by the "
              "checker's reader, %d lost, %d double" % (total, faults["consumer"], faults["broker"],
                                                        len(raw) - len(rows), len(lost), len(double)))
        assert not lost and not double, (lost[:20], double[:20])
        assert all(d["hops"] == 5 and d["path"] == links for d in rows)
        assert faults["consumer"] and faults["broker"], faults
    finally:
        group.stop()
