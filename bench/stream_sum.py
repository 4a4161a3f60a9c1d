#!/usr/bin/python3
"""stream_sum.py - `make bench` (and `make bench-stream-sum`): stream-sum's
summer in C (bin/stream-sum-summer, PostgreSQL store) and Gazette's Go
summer (SQLite stores on recovery logs), side by side on the same brokers
(three of ours, replication 3) and the same load: our chunker
(bin/stream-sum-chunker), which publishes every stream's chunks and
verifies its final sum, reports the sums' latency after the last chunk's
commit. Each run gets a fresh cluster (its own etcd prefix and fragment
root), so neither summer sees the other's journals; runs alternate which
summer goes first.

Printed per run and summed up in a table: chunks per second through the
summer (published and summed, end to end), sum latency p50/p99, and the
summer process's CPU seconds.

Environment: BUILD (build), BENCH_ROUNDS (2), BENCH_SS_WORKERS (4),
BENCH_SS_STREAMS (300 per worker), BENCH_SS_CHUNKS (50 per stream),
BENCH_DIR (a new dir under /dev/shm)."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests/integration"))
sys.path.insert(0, os.path.join(ROOT, "tests/soak"))
import conftest as cf  # noqa: E402  (Etcd, Cluster, free_port, wait_for, binaries)
import soak  # noqa: E402  (journals_yaml, summer_shards, EXAMPLES)

BIN = cf.BIN
CHUNKER = os.path.join(BIN, "stream-sum-chunker")
C_SUMMER = os.path.join(BIN, "stream-sum-summer")
GO_SUMMER = os.path.join(soak.EXAMPLES, "summer")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
WORKERS = int(os.environ.get("BENCH_SS_WORKERS", "4"))
STREAMS = int(os.environ.get("BENCH_SS_STREAMS", "300"))
CHUNKS = int(os.environ.get("BENCH_SS_CHUNKS", "50"))
LATENCY = re.compile(r"over (\d+) streams: p50 ([\d.]+) ms, p99 ([\d.]+) ms, max ([\d.]+) ms")
SUMMARY = re.compile(r"verified (\d+) streams, published (\d+) chunks")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def shards_yaml(kind, prefix):
    """One shard per chunks partition, no standby (one summer process)."""
    if kind == "go":
        return soak.summer_shards(prefix + "/hints").replace("value: rocksdb", "value: sqlite") \
            .replace("hot_standbys: 1", "hot_standbys: 0")
    out = "common:\n  max_txn_duration: 1s\nshards:\n"
    for i in range(8):
        out += ("  - id: chunks-part-%03d\n    sources: [{journal: examples/stream-sum/chunks/part-%03d}]\n"
                "    labels: [{name: store, value: postgres}]\n" % (i, i))
    return out


def run(kind, etcd, base, conninfo, n):
    cluster = cf.Cluster(etcd, os.path.join(base, "%s-%d" % (kind, n)))
    prefix = cluster.prefix
    cluster.prefix = prefix + "/cluster"
    summer = None
    try:
        for _ in range(3):
            cluster.start()
        broker = cluster.brokers[0]
        spec = os.path.join(cluster.dir, "journals.yaml")
        with open(spec, "w") as f:
            f.write(soak.journals_yaml())
        subprocess.run([cf.GAZCTL, "journals", "apply", "--specs", spec, "--broker.address", broker.address],
                       check=True, capture_output=True)
        port = cf.free_port()
        address = "http://127.0.0.1:%d" % port
        common = ["serve", "--consumer.id", "summer", "--consumer.host", "127.0.0.1", "--consumer.port", str(port),
                  "--broker.address", broker.address, "--etcd.address", etcd.endpoint,
                  "--etcd.prefix", prefix + "/consumers/summer", "--log.level", "warn"]
        if kind == "go":
            args = [GO_SUMMER] + common + ["--broker.cache.size", "256", "--broker.file-root", cluster.file_root]
        else:
            args = [C_SUMMER] + common + ["--summer.postgres", conninfo]
        scratch = cluster.scratch("summer")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "BROKER_", "CONSUMER_"))}
        env["TMPDIR"] = scratch
        summer = subprocess.Popen(args, stdout=open(os.path.join(cluster.dir, "summer.log"), "w"),
                                  stderr=subprocess.STDOUT, env=env, cwd=scratch)
        time.sleep(1)
        r = subprocess.run([cf.GO_GAZCTL, "shards", "apply", "--consumer.address", address, "--broker.address",
                            broker.address], input=shards_yaml(kind, prefix).encode(), capture_output=True)
        assert r.returncode == 0, r.stderr.decode()

        def serving():
            out = subprocess.run([cf.GO_GAZCTL, "shards", "list", "--consumer.address", address],
                                 capture_output=True, text=True).stdout
            return out.count("PRIMARY") >= 8
        cf.wait_for(serving, 120, "eight primaries", interval=0.5)
        cpu0, t0 = cpu_seconds(summer.pid), time.time()
        r = subprocess.run([CHUNKER, "run", "--chunker.workers", str(WORKERS), "--chunker.streams", str(STREAMS),
                            "--chunker.chunks", str(CHUNKS), "--broker.address", broker.address,
                            "--broker.cache.size", "0", "--log.level", "warn"], capture_output=True, text=True,
                           timeout=900)
        secs, cpu = time.time() - t0, cpu_seconds(summer.pid) - cpu0
        assert r.returncode == 0, "chunker exited %d: %s%s" % (r.returncode, r.stdout, r.stderr[-3000:])
        s, lat = SUMMARY.search(r.stdout), LATENCY.search(r.stdout)
        chunks = int(s.group(2))
        row = {"kind": kind, "secs": secs, "chunks": chunks, "rate": chunks / secs, "p50": float(lat.group(2)),
               "p99": float(lat.group(3)), "cpu": cpu, "streams": int(s.group(1))}
        print("bench stream-sum: %-2s summer: %d streams, %d chunks in %.1f s (%.0f chunks/s), sum latency p50 "
              "%.1f ms p99 %.1f ms, summer CPU %.1f s" % (kind, row["streams"], chunks, secs, row["rate"],
                                                           row["p50"], row["p99"], cpu), flush=True)
        return row
    finally:
        if summer and summer.poll() is None:
            summer.send_signal(signal.SIGKILL)
            summer.wait()
        for b in cluster.brokers:
            if b.proc and b.proc.poll() is None:
                b.proc.send_signal(signal.SIGKILL)
                b.proc.wait()


def main():
    for exe in (CHUNKER, C_SUMMER, GO_SUMMER):
        if not os.access(exe, os.X_OK):
            sys.exit("bench stream-sum: %s is missing (make; scripts/deps.sh --examples)" % exe)
    own = not os.environ.get("BENCH_DIR")  # a directory of our own is removed at the end
    base = os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="gaz-bench-ss-",
                                                          dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    etcd = cf.Etcd()
    out = subprocess.check_output([os.path.join(ROOT, "scripts/pg-test.sh"), "start"], text=True)
    conninfo, pgdir = out.splitlines()[:2]
    rows = []
    try:
        for n in range(ROUNDS):
            for kind in (("c", "go") if n % 2 == 0 else ("go", "c")):
                rows.append(run(kind, etcd, base, conninfo, n))
    finally:
        subprocess.call([os.path.join(ROOT, "scripts/pg-test.sh"), "stop", pgdir], stdout=subprocess.DEVNULL)
        etcd.stop()
        if own:  # spools and fragments of every round: gigabytes of /dev/shm
            shutil.rmtree(base, ignore_errors=True)

    def mean(kind, key):
        v = [r[key] for r in rows if r["kind"] == kind]
        return sum(v) / len(v)
    print("\nstream-sum, %d workers x %d streams x %d chunks, %d rounds (our chunker, three of our brokers, "
          "replication 3):" % (WORKERS, STREAMS, CHUNKS, ROUNDS))
    print("%-30s %12s %12s %12s" % ("", "C summer", "Go summer", "C / Go"))
    for key, label in (("rate", "chunks/s end to end"), ("p50", "sum latency p50 (ms)"),
                       ("p99", "sum latency p99 (ms)"), ("cpu", "summer CPU (s)")):
        c, g = mean("c", key), mean("go", key)
        print("%-30s %12.1f %12.1f %12.2f" % (label, c, g, c / g if g else 0))


if __name__ == "__main__":
    main()
