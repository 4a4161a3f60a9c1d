"""stream-sum's summer in C (examples/stream-sum/summer.c, bin/stream-sum-
summer) on our consumer runtime, PostgreSQL store, our brokers: Gazette's
own chunker verifies every stream's final sum it publishes, and so does
ours; through SIGKILLs of the primary summer, no sum is wrong, missing or
doubled (the chunkers fail on any). Shards are applied by Gazette's
gazctl against our consumers.

One cluster for the module: etcd, three of our brokers, the examples'
journals as tests/soak/soak.py makes them, eight shards (one per chunks
partition, a hot standby each, no recovery log), and two summers."""
import os
import signal
import subprocess
import time

import pytest

import conftest as cf
from examples_env import CConsumer, soak  # tests/soak on the path
from gazpb import Client, wait_route
from test_consumer import Shards, wait_primary
from test_stream_sum import CHUNKER, GO_CHUNKER, check_ours, finish, start_chunker

SUMMER = os.path.join(cf.BIN, "stream-sum-summer")


class Summer(CConsumer):
    def __init__(self, env, name):
        super().__init__(env, name, SUMMER, "c-summer", ["--summer.postgres", env.postgres.conninfo])


SHARDS = """common:
  max_txn_duration: 1s
  hot_standbys: 1
shards:
""" + "".join("""  - id: chunks-part-%03d
    sources: [{journal: examples/stream-sum/chunks/part-%03d}]
    labels: [{name: store, value: postgres}]
""" % (i, i) for i in range(8))


class Env:
    def __init__(self, etcd, base, postgres):
        self.dir, self.postgres = base, postgres
        self.cluster = cf.Cluster(etcd, base)
        self.prefix = self.cluster.prefix
        self.cluster.prefix = self.prefix + "/cluster"
        self.summers = []
        for _ in range(3):
            self.cluster.start()
        self.broker = self.cluster.brokers[0]
        spec = os.path.join(base, "journals.yaml")
        with open(spec, "w") as f:
            f.write(soak.journals_yaml())
        subprocess.run([cf.GAZCTL, "journals", "apply", "--specs", spec, "--broker.address", self.broker.address],
                       check=True, capture_output=True)
        c = Client(self.broker.address)
        for j in ["examples/stream-sum/sums"] + ["examples/stream-sum/chunks/part-%03d" % i for i in range(8)]:
            wait_route(c, j, 3, timeout=60)
        c.close()
        self.summers = [Summer(self, "summer-%d" % i).start() for i in (1, 2)]
        r = subprocess.run([cf.GO_GAZCTL, "shards", "apply", "--consumer.address", self.summers[0].address,
                            "--broker.address", self.broker.address], input=SHARDS.encode(), capture_output=True)
        assert r.returncode == 0, r.stderr.decode()
        shards = Shards(self.summers[0].address)
        for i in range(8):
            wait_primary(shards, "chunks-part-%03d" % i)

    def stop(self):
        errors = []
        for s in self.summers:
            try:
                s.stop()
            except AssertionError as e:
                errors.append(str(e))
        self.cluster.stop_all()
        assert not errors, "\n".join(errors)


@pytest.fixture(scope="module")
def env(etcd, postgres, tmp_path_factory):
    e = Env(etcd, str(tmp_path_factory.mktemp("c-summer")), postgres)
    yield e
    e.stop()


def go_ok(rc, log):
    fatal = [ln for ln in log.splitlines() if "level=fatal" in ln or "panic" in ln]
    assert rc == 0, "Gazette's chunker exited %s: %s" % (rc, "\n".join(fatal) or log[-3000:])


def test_gazettes_chunker_verifies_our_summer(env):
    rc, _, log = finish(start_chunker(env, GO_CHUNKER, "go-1"))
    go_ok(rc, log)


def test_our_chunker_verifies_our_summer(env):
    rc, out, log = finish(start_chunker(env, CHUNKER, "ours-1"))
    check_ours(rc, out, log, 3 * 20)


def test_sigkill_of_the_primary_summer(env):
    """Both chunkers run while the summer holding most primaries is
    SIGKILLed twice (and restarted): every sum still verifies, and the
    kills came while both chunkers ran."""
    go = start_chunker(env, GO_CHUNKER, "go-2", workers=2, streams=400, chunks=50)
    ours = start_chunker(env, CHUNKER, "ours-2", workers=2, streams=400, chunks=50)
    for k in range(2):
        time.sleep(2)
        shards = Shards(env.summers[0].address if env.summers[0].proc.poll() is None else env.summers[1].address)
        primaries = [s.route.members[s.route.primary].suffix for s in shards.list().shards if s.route.primary >= 0]
        victim = max(env.summers, key=lambda s: primaries.count(s.name))
        victim.proc.kill()
        victim.proc.wait()
        assert go.poll() is None and ours.poll() is None, "a chunker finished before kill %d" % (k + 1)
        time.sleep(1)
        victim.start()
    rc, out, log = finish(ours, timeout=300)
    check_ours(rc, out, log, 2 * 400)
    grc, _, glog = finish(go, timeout=300)
    go_ok(grc, glog)
    print("c-summer: 2 SIGKILLs of the primary summer under both chunkers; %s" % out.strip().splitlines()[-1])


def test_a_minute_under_faults(env):
    """Both chunkers run for about a minute while, at random, a summer is
    SIGKILLed, a broker is SIGKILLed, or the summer holding most primaries
    is stopped (SIGSTOP) past its lease and woken (SIGCONT), a zombie the
    store's fence must refuse: every sum still verifies."""
    import random
    if "tsan" in cf.BUILD:
        pytest.skip("a minute of faults is the plain build's job; TSan runs the shorter tests")
    rnd = random.Random(int(os.environ.get("GAZ_TEST_SEED", "23")))
    go = start_chunker(env, GO_CHUNKER, "go-3", workers=2, streams=1200, chunks=50)
    ours = start_chunker(env, CHUNKER, "ours-3", workers=2, streams=1200, chunks=50)
    faults = {"summer_kill": 0, "broker_kill": 0, "zombie": 0}
    deadline = time.time() + 60
    while time.time() < deadline and go.poll() is None and ours.poll() is None:
        time.sleep(rnd.uniform(2, 4))
        live = [s for s in env.summers if s.proc.poll() is None]
        listed = Shards(live[0].address).list().shards
        primaries = [s.route.members[s.route.primary].suffix for s in listed if s.route.primary >= 0]
        busiest = max(env.summers, key=lambda s: primaries.count(s.name))
        kind = rnd.choice(sorted(faults))
        if kind == "summer_kill":
            busiest.proc.kill()
            busiest.proc.wait()
            busiest.start()
        elif kind == "zombie":
            busiest.proc.send_signal(signal.SIGSTOP)
            time.sleep(5)  # past its 3 s lease: the other summer takes over
            busiest.proc.send_signal(signal.SIGCONT)
            # It notices its lease is gone and exits; start it again.
            cf.wait_for(lambda: busiest.proc.poll() is not None, 60, "the zombie to exit")
            busiest.start()
        else:
            i = rnd.choice([1, 2])
            old = env.cluster.brokers[i]
            old.stop(sig=signal.SIGKILL)
            env.cluster.brokers[i] = env.cluster.start(zone=old.zone, bid="%s-%d" % (old.id[:10], sum(faults.values())))
        faults[kind] += 1
    rc, out, log = finish(ours, timeout=600)
    check_ours(rc, out, log, 2 * 1200)
    grc, _, glog = finish(go, timeout=600)
    go_ok(grc, glog)
    fenced = sum(open(s.logpath).read().count("checkpoint fence was updated") for s in env.summers)
    print("c-summer under faults: %s, %d fenced commits; %s" % (faults, fenced, out.strip().splitlines()[-1]))
    assert sum(faults.values()) >= 5, faults
