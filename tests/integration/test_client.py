"""The client library against real brokers: the route cache sends appends
straight to the primary, appends and readers ride through a SIGKILLed
primary, AppendService keeps each journal's order under concurrency, and
gazctl fails fast on an address where nothing listens.

The library is driven through tests/tools/client_probe.c (bin/client-probe),
which prints one line per operation."""
import os
import re
import signal
import subprocess
import time
import urllib.request

import pytest

from conftest import BIN, GAZCTL, free_port, wait_for
from gazpb import Client, spec
from gazpb import wait_route

PROBE = os.path.join(BIN, "client-probe")


def started(broker, op):
    """The broker's gazette_journal_server_started_totals for `op`."""
    body = urllib.request.urlopen(broker.address + "/debug/metrics", timeout=10).read().decode()
    m = re.search(r'^gazette_journal_server_started_totals\{operation="%s"\} (\d+)' % op, body, re.M)
    return int(m.group(1)) if m else 0


def probe(*args, env=None, timeout=120):
    e = dict(os.environ, **(env or {}))
    r = subprocess.run([PROBE] + [str(a) for a in args], capture_output=True, env=e, timeout=timeout)
    return r


def ok_lines(out):
    return [ln.split() for ln in out.decode().splitlines() if ln.startswith("ok ")]


def three_brokers(cluster, journal, **kw):
    """Three brokers in zones z0..z2 and `journal` at replication 3.
    Returns (brokers, primary, a non-primary broker)."""
    brokers = [cluster.start(zone="z%d" % i) for i in range(3)]
    c = Client(brokers[0].address)
    c.apply(spec(journal, replication=3, **kw))
    route = wait_route(c, journal, 3)
    pid = route.members[route.primary].suffix
    primary = next(b for b in brokers if b.id == pid)
    other = next(b for b in brokers if b.id != pid)
    return brokers, primary, other


def test_appends_go_straight_to_the_primary(cluster):
    """Appends sent through a broker that is not the primary: the first is
    proxied, and its response header teaches the library the route; every
    later one goes to the primary itself. The same appends without a
    route cache are all proxied (the control: this is what the check sees
    when the cache does not work)."""
    brokers, primary, entry = three_brokers(cluster, "cli/direct")
    e0, p0 = started(entry, "Append"), started(primary, "Append")
    r = probe("append", entry.address, "cli/direct", 40, 100)
    assert r.returncode == 0, r.stderr.decode()
    oks = ok_lines(r.stdout)
    assert len(oks) == 40 and {o[4] for o in oks} == {primary.id}
    assert [int(o[2]) for o in oks] == [i * 100 for i in range(40)]
    e1, p1 = started(entry, "Append"), started(primary, "Append")
    assert e1 - e0 == 1, "appends reached the non-primary broker %d times" % (e1 - e0)
    assert p1 - p0 == 40
    # Control: no route cache, so the entry broker proxies every append.
    r = probe("append", entry.address, "cli/direct", 10, 100, env={"PROBE_CACHE": "-1"})
    assert r.returncode == 0, r.stderr.decode()
    assert started(entry, "Append") - e1 == 10


def test_appends_and_reader_survive_a_killed_primary(cluster):
    """A primary is SIGKILLed while the library appends through another
    broker (directly to the primary, by then) and a reader follows the
    journal from the primary: every append still succeeds (retried whole),
    each sits at the offsets it was acknowledged at, and the reader resumes
    at another member and delivers the journal's bytes exactly, without a
    gap or a repeated byte."""
    brokers, primary, entry = three_brokers(cluster, "cli/kill", length=16384)
    count, size = 150, 200
    app = subprocess.Popen([PROBE, "append", entry.address, "cli/kill", str(count), str(size), "20"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The reader's first Read goes to its address: the primary.
    rd = subprocess.Popen([PROBE, "read", primary.address, "cli/kill", "0", str(count * size)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=dict(os.environ, PROBE_ZONE=primary.zone))
    try:
        acked = []
        while len(acked) < 40:
            line = app.stdout.readline()
            assert line, "appender ended early: %s" % app.stderr.read().decode()
            acked.append(line)
        primary.stop(sig=signal.SIGKILL)
        # A replacement broker lets the journal get back to 3 members.
        cluster.start(zone=primary.zone, bid=primary.id + "-new")
        out, err = app.communicate(timeout=150)
        rout, rerr = rd.communicate(timeout=120)
    finally:
        for p in (app, rd):
            if p.poll() is None:
                p.kill()
    lines = [ln.split() for ln in b"".join(acked + [out]).decode().splitlines()]
    assert app.returncode == 0, "appends failed: %s\n%s" % ([ln for ln in lines if ln[0] != "ok"],
                                                           err.decode()[-3000:])
    assert len(lines) == count and all(ln[0] == "ok" for ln in lines)
    assert rd.returncode == 0, rerr.decode()[-3000:]
    c = Client(entry.address)
    data, deadline = b"", time.time() + 30
    want_end = max(int(ln[3]) for ln in lines)
    while len(data) < want_end and time.time() < deadline:
        data = c.read_bytes("cli/kill", timeout=10)[0]
        time.sleep(0.2)
    for ln in lines:
        seq, begin, end = int(ln[1]), int(ln[2]), int(ln[3])
        assert data[begin:end] == b"<%08d>" % seq + b"." * (size - 11) + b"\n", "append %d lost" % seq
    # Only whole records, each acknowledged one at least once, in order of
    # acknowledgement (a retried append may appear twice: at-least-once).
    recs = [int(m) for m in re.findall(rb"<(\d{8})>", data)]
    assert len(recs) * size == len(data)
    assert sorted(set(recs)) == list(range(count))
    assert rout == data[:count * size], "reader delivered different bytes"
    print("append retries: %d; reader restarts: %d" % (err.count(b"will retry"), rerr.count(b"will retry")))


def test_one_thread_tails_many_journals_without_a_thread_each(cluster):
    """One thread of the library follows 300 journals at their heads with
    gaz_reader_try_read (issue 39: a process reading many journals holds
    no thread per journal). Every record appended after all 300 readers
    wait at their heads reaches its reader, and the process never holds
    more threads than with a handful of readers: its pollers and grpc's
    own, not one per journal. The control is the count itself: a thread
    per reader would be 300 or more."""
    b = cluster.start()
    c = Client(b.address)
    n, records = 300, 3
    for k in range(0, n, 50):
        c.apply(*[spec("tail/j%d" % i) for i in range(k, min(n, k + 50))])
    for i in range(n):
        c.append("tail/j%d" % i, b"0\n")
    p = subprocess.Popen([PROBE, "tail", b.address, "tail/j", str(n), str(records)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = p.stdout.readline()
        assert line == b"ready\n", line + p.stderr.read()
        for r in range(1, records):
            for i in range(n):
                c.append("tail/j%d" % i, b"%d\n" % r)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err.decode()[-3000:]
    lines = out.decode().split("\n")
    oks = sorted(ln.split()[1] for ln in lines if ln.startswith("ok "))
    assert oks == sorted("tail/j%d" % i for i in range(n))
    assert all(ln.split()[2] == str(records) for ln in lines if ln.startswith("ok "))
    threads = int(next(ln for ln in lines if ln.startswith("threads ")).split()[1])
    assert 0 < threads <= 16, "the tailing process had %d threads" % threads


def test_append_service_keeps_each_threads_order(cluster):
    """Six threads queue 300 records each over three journals through one
    AppendService with a 64 KiB buffer (so queueing blocks on
    back-pressure). Each journal holds, per thread, exactly that thread's
    records in the order it queued them, none lost or repeated; each handle
    reports where its record is; and queued appends were batched."""
    brokers = [cluster.start(zone="z%d" % i) for i in range(3)]
    c = Client(brokers[0].address)
    names = ["cli/svc%d" % i for i in range(3)]
    c.apply(*[spec(n, replication=3) for n in names])
    for n in names:
        wait_route(c, n, 3)
    threads, records, size = 6, 300, 64
    r = probe("service", brokers[1].address, ",".join(names), threads, records, size, 65536,
              timeout=180)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    oks = ok_lines(r.stdout)
    assert len(oks) == threads * records
    data = {n: c.read_bytes(n, timeout=20)[0] for n in names}
    batches = set()
    for _, t, i, j, begin, end, batch in oks:
        t, i, begin, end = int(t), int(i), int(begin), int(end)
        assert data[j][begin:end].startswith(b"t%02d:%06d|" % (t, i)), (t, i, j)
        batches.add((j, int(batch)))
    for k, n in enumerate(names):
        recs = re.findall(rb"t(\d\d):(\d{6})\|\.*\n", data[n])
        assert len(recs) * size == len(data[n]), "partial or foreign bytes in %s" % n
        for t in range(threads):
            seqs = [int(s) for tt, s in recs if int(tt) == t]
            assert seqs == [i for i in range(records) if (t + i) % 3 == k], (n, t)
    assert len(batches) < threads * records, "no append was batched"
    print("records %d, Append RPCs %d" % (threads * records, len(batches)))


@pytest.mark.parametrize("cmd", [
    ["journals", "list"],
    ["journals", "read", "-l", "name=a/b"],
    ["journals", "append", "-l", "name=a/b"],
    ["journals", "fragments", "-l", "name=a/b"],
    ["journals", "apply", "--specs", "-"],
], ids=lambda c: c[1])
def test_gazctl_fails_fast_on_an_unreachable_address(cmd):
    """Nothing listens at the address: gazctl gives up within seconds with
    an error naming it, instead of waiting forever."""
    addr = "http://127.0.0.1:%d" % free_port()
    t0 = time.time()
    r = subprocess.run([GAZCTL] + cmd + ["--broker.address", addr], capture_output=True,
                       input=b"name: ab/cd\nreplication: 1\nfragment: {length: 1024, stores: [file:///], "
                             b"refresh_interval: 1s, compression_codec: NONE}\n",
                       timeout=30)
    took = time.time() - t0
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "unreachable" in err and addr in err, err
    assert took < 15, "took %.1fs" % took


GAZLOAD = os.path.join(BIN, "gazload")


def gazload_summary(out):
    line = [ln for ln in out.decode().splitlines() if ln.startswith("gazload: ")]
    assert len(line) == 1, out
    return {k: float(v) for k, v in (kv.split("=") for kv in line[0].split()[1:])}


def test_gazload_counts_and_verifies_through_a_broker_exit(cluster):
    """gazload (the e2e load) appends to three journals at replication 3
    while one of four brokers exits gracefully and another joins; then it
    reads every journal back: each acknowledged record is at its offsets,
    none failed, and the summary adds up."""
    brokers = [cluster.start(zone="z%d" % (i % 2)) for i in range(4)]
    c = Client(brokers[0].address)
    names = ["load/j-%d" % i for i in range(3)]
    c.apply(*[spec(n, replication=3, length=16 << 10) for n in names])
    for n in names:
        wait_route(c, n, 3)
    c.close()
    stop = os.path.join(cluster.dir, "gazload.stop")
    p = subprocess.Popen([GAZLOAD, "--broker.address", brokers[1].address, "--journals", ",".join(names),
                          "--size", "200", "--pause", "5ms", "--until-file", stop],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(2)
    assert brokers[0].stop(timeout=60) == 0, brokers[0].logtail()
    cluster.start(zone="z0")
    time.sleep(2)
    open(stop, "w").close()
    out, err = p.communicate(timeout=90)
    assert p.returncode == 0, (out, err)
    s = gazload_summary(out)
    assert s["journals"] == 3 and s["failed"] == 0 and s["lost"] == 0 and s["unfinished"] == 0, s
    assert s["acknowledged"] > 100 and s["attempted"] == s["acknowledged"], s
    assert s["verified_bytes"] == 200 * s["acknowledged"], s


def test_gazload_signs_with_auth_keys(cluster):
    """Against brokers verifying tokens (--broker.auth-keys), gazload signs
    its appends and reads with --broker.auth-keys or $BROKER_AUTH_KEYS
    (the e2e's secure install passes the chart's Secret that way); without
    them every append is refused."""
    import base64
    keys = base64.b64encode(b"gazload key").decode() + "," + base64.b64encode(b"old key").decode()
    b = cluster.start(extra=["--broker.auth-keys", keys])
    args = [GAZLOAD, "--broker.address", b.address, "--journals", "load/auth", "--size", "100",
            "--pause", "5ms", "--duration", "1s"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
    # Applying needs a token too: gazctl with the same keys.
    r = subprocess.run([GAZCTL, "journals", "apply", "--broker.address", b.address, "--broker.auth-keys", keys],
                       input=b"name: load/auth\nreplication: 1\nfragment: {length: 65536, compression_codec: NONE, "
                             b"stores: ['file:///'], refresh_interval: 1s}\n", capture_output=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: b"load/auth" in subprocess.run(
        [GAZCTL, "journals", "list", "--broker.address", b.address, "--broker.auth-keys", keys, "-o", "yaml"],
        capture_output=True, env=env, timeout=30).stdout, 20, "journal listed")
    for how, extra, e in (("flag", ["--broker.auth-keys", keys], env),
                          ("env", [], dict(env, BROKER_AUTH_KEYS=keys))):
        r = subprocess.run(args + extra, capture_output=True, env=e, timeout=60)
        assert r.returncode == 0, (how, r.stdout, r.stderr)
        s = gazload_summary(r.stdout)
        assert s["acknowledged"] > 10 and s["failed"] == 0 and s["lost"] == 0, (how, s)
    r = subprocess.run(args, capture_output=True, env=env, timeout=60)
    assert r.returncode != 0, r
    s = gazload_summary(r.stdout)
    assert s["acknowledged"] == 0 and s["failed"] > 0, s
    assert b"Authorization" in r.stderr, r.stderr[-2000:]
    r = subprocess.run(args + ["--broker.auth-keys", "not base64!"], capture_output=True, env=env, timeout=30)
    assert r.returncode == 2 and b"auth-keys" in r.stderr, r


def test_gazload_rejects_bad_usage():
    r = subprocess.run([GAZLOAD, "--journals", "a/b"], capture_output=True, timeout=10,
                       env=dict(os.environ, BROKER_ADDRESS=""))
    assert r.returncode == 2 and b"usage: gazload" in r.stderr, r
    r = subprocess.run([GAZLOAD, "--broker.address", "http://127.0.0.1:1", "--journals", "a/b",
                        "--pause", "soon"], capture_output=True, timeout=10)
    assert r.returncode == 2 and b"--pause" in r.stderr, r
    r = subprocess.run([GAZLOAD, "--broker.address", "http://127.0.0.1:1", "--journals", "a/b",
                        "--size", "10"], capture_output=True, timeout=10)
    assert r.returncode == 2 and b"--size" in r.stderr, r
