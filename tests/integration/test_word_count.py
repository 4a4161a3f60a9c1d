"""word-count's publisher in C (examples/word-count/publisher.c,
bin/word-count-publisher) against Gazette's own counter consumer on our
brokers: documents published by ours and by Gazette's wordcountctl are
counted alike, and Gazette's `wordcountctl query` totals equal the
2-grams the test counts itself (tests/soak/soak.py's rule: lower case,
runs of letters, START/END padding). A refused call fails the publish
with exit 1.

One cluster for the module (examples_env.py): three of our brokers, the
examples' journals, Gazette's counter shards as the soak makes them, two
counters (N=2)."""
import collections
import os
import re
import subprocess

import pytest

import conftest as cf
from examples_env import EXAMPLES, Env
import soak

PUBLISHER = os.path.join(cf.BIN, "word-count-publisher")
WORDCOUNTCTL = os.path.join(EXAMPLES, "wordcountctl")
DOCS = [
    "The quick brown fox jumps over the lazy dog.\n",
    "Over the lazy dog, the quick Fox; the END of it's START.\n",
    "dog dog dog DOG\n\n  fox-fox\n",
]


class Grams:
    N = 2


def grams(text):
    return collections.Counter(soak.WordCount.grams(Grams, text))


@pytest.fixture(scope="module")
def env(etcd, tmp_path_factory):
    e = Env(etcd, str(tmp_path_factory.mktemp("word-count")), "counter")
    yield e
    e.stop()


def query(env):
    got = collections.Counter()
    for i in range(4):
        r = subprocess.run([WORDCOUNTCTL, "query", "--consumer.address", env.consumers[0].address,
                            "--shard", "shard-%03d" % i], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        for m in re.finditer(r'count=(\d+) gram=("(?:[^"\\]|\\.)*"|\S+)', r.stderr + r.stdout):
            g = m.group(2)
            got[g[1:-1] if g.startswith('"') else g] += int(m.group(1))
    return got


def publish(exe, address, path):
    args = [exe, "publish", "--consumer.address", address, "--file", path]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def test_ours_and_gazettes_publisher_count_alike(env):
    expect = collections.Counter()
    for k, text in enumerate(DOCS * 2):
        path = os.path.join(env.dir, "doc-%d.txt" % k)
        with open(path, "w") as f:
            f.write(text)
        exe = PUBLISHER if k % 2 == 0 else WORDCOUNTCTL
        r = publish(exe, env.consumers[k % 2].address, path)
        assert r.returncode == 0, "%s: %s" % (exe, r.stderr)
        for m in cf.SAN_MARKERS:
            assert m not in r.stderr, r.stderr
        expect.update(grams(text))
    # From stdin too.
    r = subprocess.run([PUBLISHER, "publish", "--consumer.address", env.consumers[1].address],
                       input=DOCS[0], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    expect.update(grams(DOCS[0]))
    cf.wait_for(lambda: query(env) == expect, 60, "the counts of every published 2-gram")
    env.check_consumers()


def test_a_refused_publish_and_bad_usage(env):
    """A server that is no counter (a broker: UNIMPLEMENTED) fails the
    publish with exit 1 and its status; so does unreadable input. (A
    counter that is down is waited for, as Gazette's wordcountctl waits:
    gRPC wait-for-ready, no deadline.)"""
    path = os.path.join(env.dir, "doc.txt")
    with open(path, "w") as f:
        f.write(DOCS[0])
    r = publish(PUBLISHER, env.broker.address, path)
    assert r.returncode == 1 and "publish to %s failed" % env.broker.address in r.stderr, r.stderr
    r = publish(PUBLISHER, env.consumers[0].address, os.path.join(env.dir, "missing.txt"))
    assert r.returncode == 1 and "missing.txt" in r.stderr, r.stderr
    r = subprocess.run([PUBLISHER, "publish", "--bogus"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown flag" in r.stderr, r.stderr
    r = subprocess.run([PUBLISHER], capture_output=True, text=True)
    assert r.returncode == 2 and "publish" in r.stderr, r.stderr
