"""word-count in C on our brokers: the publisher (examples/word-count/
publisher.c, bin/word-count-publisher) against Gazette's own counter, and
the counter (examples/word-count/counter.c, bin/word-count-counter, the
consumer runtime with PostgreSQL) against Gazette's wordcountctl.

One cluster for the module (examples_env.py): three of our brokers, the
examples' journals, Gazette's counter shards as the soak makes them and
two of Gazette's counters (N=2); beside them, under another etcd prefix,
two of our counters (N=2) with the same four shards (one per deltas
partition, a hot standby each, no recovery log), applied by Gazette's
gazctl. Both groups read every deltas partition, so both count every
document published through either: each test checks the totals of both
against the 2-grams it counted itself (TOTAL), exactly."""
import collections
import os
import re
import signal
import subprocess
import threading
import time

import pytest

import conftest as cf
from examples_env import EXAMPLES, CConsumer, Env
from test_consumer import Shards, wait_primary
import soak

PUBLISHER = os.path.join(cf.BIN, "word-count-publisher")
COUNTER = os.path.join(cf.BIN, "word-count-counter")
WORDCOUNTCTL = os.path.join(EXAMPLES, "wordcountctl")
SHARD_IDS = ["shard-%03d" % i for i in range(4)]
DOCS = [
    "The quick brown fox jumps over the lazy dog.\n",
    "Over the lazy dog, the quick Fox; the END of it's START.\n",
    "dog dog dog DOG\n\n  fox-fox\n",
]
# Letters beyond ASCII, digits and punctuation as separators. (Python's
# str.lower and Go's unicode.ToLower differ on a few letters, as İ and a
# final Σ: these documents have none.)
UNICODE_DOCS = [
    "Éclair naïve ß; ÉCLAIR 3x NAÏVE!\n",
    "Straße STRASSE Привет, МИР мир: 42 日本語テキスト x2y\n",
    "déjà-vu Déjà_Vu 1.5 déjà vu\n",
]
TOTAL = collections.Counter()  # every 2-gram published so far in this module


def grams(text):
    """Gazette's counter's 2-grams of text, counted: the soak's rule
    (soak.WordCount.grams: lower case, runs of letters, START/END padding)
    with the letters of Go's unicode.IsLetter, which are Python's
    str.isalpha (general categories L*)."""
    words, word = [], ""
    for ch in text.lower() + " ":
        if ch.isalpha():
            word += ch
        elif word:
            words.append(word)
            word = ""
    g, out = ["START", "START"], collections.Counter()
    for i in range(len(words) + 2):
        g = g[1:] + [words[i] if i < len(words) else "END"]
        out[" ".join(g)] += 1
    return out


def fnv1a32(b):
    h = 0x811C9DC5
    for c in b:
        h = ((h ^ c) * 0x01000193) & 0xFFFFFFFF
    return h


def shard_of(gram):
    """The shard counting a 2-gram: the modulo mapping of its bytes over
    the four deltas partitions, part-00i read by shard-00i."""
    return SHARD_IDS[fnv1a32(gram.encode()) % 4]


def expected(prefix="", shard=None):
    """What Query answers: the (gram, count) of a shard starting with
    prefix, in byte order; the shard the prefix maps to when none."""
    shard = shard or shard_of(prefix)
    return sorted(((g, c) for g, c in TOTAL.items() if g.startswith(prefix) and shard_of(g) == shard),
                  key=lambda gc: gc[0].encode())


class Counter(CConsumer):
    """One of our counters."""

    def __init__(self, env, name, postgres):
        super().__init__(env, name, COUNTER, "c-counter",
                         ["--wordcount.N", "2", "--wordcount.postgres", postgres.conninfo])
        self.postgres = postgres


@pytest.fixture(scope="module")
def env(etcd, tmp_path_factory):
    e = Env(etcd, str(tmp_path_factory.mktemp("word-count")), "counter")
    yield e
    e.stop()


@pytest.fixture(scope="module")
def ours(env, postgres):
    """Our two counters and their shards: the soak's counter shards
    without recovery logs and hints (our stores keep no recovery log)."""
    counters = [Counter(env, "c-counter-%d" % i, postgres).start() for i in (1, 2)]
    try:
        specs = "".join(ln + "\n" for ln in soak.counter_shards("").splitlines()
                        if not ln.strip().startswith(("recovery_log_prefix:", "hint_prefix:", "hint_backups:")))
        path = os.path.join(env.dir, "c-counter-shards.yaml")
        with open(path, "w") as f:
            f.write(specs)
        env.gazctl(cf.GO_GAZCTL, "shards", "apply", "--specs", path, "--consumer.address", counters[0].address)
        shards = Shards(counters[0].address)
        for sid in SHARD_IDS:
            wait_primary(shards, sid)
        yield counters
    finally:
        errors = []
        for c in counters:
            try:
                c.stop()
            except AssertionError as e:
                errors.append(str(e))
        assert not errors, "\n".join(errors)


def wordcountctl_query(address, shard=None, prefix=None):
    """Gazette's `wordcountctl query`: its (gram, count) lines, in order."""
    args = [WORDCOUNTCTL, "query", "--consumer.address", address]
    args += ["--shard", shard] if shard else []
    args += ["--prefix", prefix] if prefix is not None else []
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, "%s: %s" % (" ".join(args), r.stderr)
    out = []
    for m in re.finditer(r'count=(\d+) gram=("(?:[^"\\]|\\.)*"|\S+)', r.stderr + r.stdout):
        g = m.group(2)
        if g.startswith('"'):
            g = g[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        out.append((g, int(m.group(1))))
    return out


def totals(address):
    """Every shard's counts through one counter (Gazette's or ours)."""
    got = collections.Counter()
    for sid in SHARD_IDS:
        for g, c in wordcountctl_query(address, shard=sid):
            got[g] += c
    return got


def publish(exe, address, path):
    args = [exe, "publish", "--consumer.address", address, "--file", path]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def publish_doc(env, exe, address, text, name):
    path = os.path.join(env.dir, name)
    with open(path, "w") as f:
        f.write(text)
    r = publish(exe, address, path)
    assert r.returncode == 0, "%s to %s: %s" % (exe, address, r.stderr)
    for m in cf.SAN_MARKERS:
        assert m not in r.stderr, r.stderr
    TOTAL.update(grams(text))


def primaries(counters):
    """shard id -> the name of our counter that is its primary."""
    out = {}
    live = [c for c in counters if c.proc.poll() is None]
    for s in Shards(live[0].address).list().shards:
        if s.route.primary >= 0:
            out[s.spec.id] = s.route.members[s.route.primary].suffix
    return out


def test_ours_and_gazettes_publisher_count_alike(env):
    """Our publisher and Gazette's wordcountctl, to Gazette's counters."""
    for k, text in enumerate(DOCS * 2):
        exe = PUBLISHER if k % 2 == 0 else WORDCOUNTCTL
        publish_doc(env, exe, env.consumers[k % 2].address, text, "doc-%d.txt" % k)
    # From stdin too.
    r = subprocess.run([PUBLISHER, "publish", "--consumer.address", env.consumers[1].address],
                       input=DOCS[0], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    TOTAL.update(grams(DOCS[0]))
    cf.wait_for(lambda: totals(env.consumers[0].address) == TOTAL, 60, "the counts of every published 2-gram")
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


def test_our_counter_counts_both_publishers(env, ours):
    """Documents published by ours and by wordcountctl to our counters
    (both of them), non-ASCII letters included: wordcountctl query gives
    every shard's exact counts, in byte order, from its primary and
    through the other counter, which proxies to it; Gazette's counters
    count the same deltas alike."""
    for k, text in enumerate(DOCS + UNICODE_DOCS):
        exe = PUBLISHER if k % 2 == 0 else WORDCOUNTCTL
        publish_doc(env, exe, ours[k % 2].address, text, "ours-%d.txt" % k)
    cf.wait_for(lambda: totals(ours[0].address) == TOTAL, 60, "our counters' counts of every 2-gram")
    prim = primaries(ours)
    assert set(prim) == set(SHARD_IDS), prim
    for sid in SHARD_IDS:
        primary = next(c for c in ours if c.name == prim[sid])
        other = next(c for c in ours if c.name != prim[sid])
        assert wordcountctl_query(primary.address, shard=sid) == expected(shard=sid), sid
        assert wordcountctl_query(other.address, shard=sid) == expected(shard=sid), sid + " (proxied)"
    assert any("é" in g for g in TOTAL) and any("日本語テキスト" in g for g in TOTAL)
    cf.wait_for(lambda: totals(env.consumers[0].address) == TOTAL, 60, "Gazette's counters' counts")
    env.check_consumers()


def test_query_a_prefix(env, ours):
    """A prefix without a shard asks the shard its mapping picks; with a
    shard, that shard: every 2-gram with the prefix, in byte order, from
    either counter."""
    for prefix in ["the ", "the", "dog dog", "éclair", "déjà ", "d", "z", "START ", "nothing-like-it"]:
        for c in ours:
            assert wordcountctl_query(c.address, prefix=prefix) == expected(prefix), (prefix, c.name)
    for sid in SHARD_IDS:
        assert wordcountctl_query(ours[1].address, shard=sid, prefix="the ") == expected("the ", sid), sid
    assert wordcountctl_query(ours[0].address, prefix="nothing-like-it") == []
    full = wordcountctl_query(ours[0].address, prefix="quick brown")
    assert full == [("quick brown", TOTAL["quick brown"])] and TOTAL["quick brown"] >= 3, full


def test_unknown_shard_and_bad_flags(env, ours):
    """Query of a shard nobody has: Gazette's status name as the error.
    A counter without --wordcount.N (or with 0), or without its database,
    exits 1 saying why."""
    r = subprocess.run([WORDCOUNTCTL, "query", "--consumer.address", ours[0].address, "--shard", "no-such-shard"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "SHARD_NOT_FOUND" in r.stderr + r.stdout, r.stderr
    base = [COUNTER, "serve", "--etcd.address", env.cluster.etcd.endpoint, "--broker.address", env.broker.address,
            "--etcd.prefix", env.prefix + "/consumers/c-counter-bad", "--consumer.port", str(cf.free_port())]
    pg = ["--wordcount.postgres", ours[0].postgres.conninfo]
    for args, want in [(pg, "--wordcount.N must be specified"),
                       (pg + ["--wordcount.N", "0"], "--wordcount.N must be specified"),
                       (pg + ["--wordcount.N", "-2"], "--wordcount.N must be positive"),
                       (["--wordcount.N", "2"], "--wordcount.postgres is required"),
                       (pg + ["--wordcount.N", "two"], "wordcount.N")]:
        r = subprocess.run(base + args, capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and want in r.stderr, (args, r.returncode, r.stderr)
        for m in cf.SAN_MARKERS:
            assert m not in r.stderr, r.stderr


def test_sigkill_of_the_primary_counter(env, ours):
    """Documents stream in through the other counter and Gazette's, and
    are queried meanwhile, while the counter holding most primaries is
    SIGKILLed (then started again): its shards move to their standbys,
    which restore their checkpoints from PostgreSQL, and every count stays
    exact (no delta lost or counted twice)."""
    prim = primaries(ours)
    victim = max(ours, key=lambda c: list(prim.values()).count(c.name))
    other = next(c for c in ours if c is not victim)
    assert list(prim.values()).count(victim.name) >= 1, prim
    stop, errors, published = threading.Event(), [], [0]

    def stream():
        words = ("alpha beta gamma delta Epsilon zeta ETA theta iota kappa lambda mu nu xi omicron pi rho "
                 "sigma tau upsilon phi chi psi omega naïve Éclair").split()
        k = 0
        while not stop.is_set() and not errors:
            text = " ".join(words[(k * 7 + i * 3) % len(words)] for i in range(200)) + ".\n"
            exe = PUBLISHER if k % 2 == 0 else WORDCOUNTCTL
            address = other.address if k % 3 else env.consumers[0].address
            try:
                publish_doc(env, exe, address, text, "stream-%d.txt" % k)
                published[0] += 1
            except AssertionError as e:
                errors.append(str(e))
            k += 1

    t = threading.Thread(target=stream, daemon=True)
    t.start()
    try:
        # Queries meanwhile, each shard's store borrowed between its
        # transactions: they see committed counts only, which never fall.
        seen, deadline = collections.Counter(), time.time() + 3
        while time.time() < deadline:
            now = totals(other.address)
            assert all(now[g] >= c for g, c in seen.items()), "a count fell"
            seen = now
        assert t.is_alive() and published[0] > 0, errors
        victim.proc.kill()
        victim.proc.wait()
        time.sleep(3)
        assert not errors, errors
        victim.start()
        time.sleep(2)
    finally:
        stop.set()
        t.join(180)
    assert not errors, errors
    for sid in SHARD_IDS:
        wait_primary(Shards(other.address), sid)
    cf.wait_for(lambda: totals(other.address) == TOTAL, 90, "our counters' counts after the SIGKILL")
    assert totals(victim.address) == TOTAL
    cf.wait_for(lambda: totals(env.consumers[0].address) == TOTAL, 90, "Gazette's counters' counts")
    print("word-count: %d documents streamed across a SIGKILL of %s (primary of %d shards)"
          % (published[0], victim.name, list(prim.values()).count(victim.name)))
