#!/usr/bin/env python3
"""Writes the protobuf seed inputs of the fuzz targets (tests/fuzz/corpus/
<target>/) from protobuf text: each message is encoded by protoc --encode
from our proto/ files, so the seeds are the bytes a real peer sends. Run
from the repository root after changing a message here; the output is
committed. Targets whose first byte picks the decoder get it prefixed
(its index in the target's table)."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO = os.path.join(ROOT, "proto")

HDR = '''process_id { zone: "us-east-1" suffix: "broker-a" }
route { members { zone: "us-east-1" suffix: "broker-a" } members { zone: "us-east-1" suffix: "broker-b" }
        primary: 0 endpoints: "http://10.0.0.1:8080" endpoints: "http://10.0.0.2:8080" }
etcd { cluster_id: 12345 member_id: 678 revision: 42 raft_term: 3 }'''
SPEC = '''name: "examples/stream-sum/chunks"
replication: 2
labels { labels { name: "app.gazette.dev/message-type" value: "Chunk" }
         labels { name: "content-type" value: "application/x-ndjson" } }
fragment { length: 134217728 compression_codec: SNAPPY stores: "s3://bucket/prefix/?profile=p"
           stores: "file:///" refresh_interval { seconds: 30 } retention { seconds: 86400 }
           flush_interval { seconds: 3600 }
           path_postfix_template: "date={{.Spool.FirstAppendTime.Format \\"2006-01-02\\"}}" }
flags: 4
max_append_rate: 1048576'''
FRAG = '''journal: "examples/stream-sum/chunks" begin: 1024 end: 2048
sum { part1: 1311768467463790320 part2: 1311768467463790320 part3: 305419896 }
compression_codec: GZIP backing_store: "s3://bucket/prefix/" mod_time: 1700000000
path_postfix: "date=2024-01-01"'''
SEL = '''include { labels { name: "app.gazette.dev/message-type" value: "Chunk" }
          labels { name: "prefix" value: "examples/" prefix: true } }
exclude { labels { name: "name" value: "examples/bad" } }'''
SHARD = '''id: "chunks-part-000" sources { journal: "examples/chunks;part=000" min_offset: 0 }
recovery_log_prefix: "examples/recovery/logs" hint_prefix: "/gazette/hints" hint_backups: 2
max_txn_duration { seconds: 1 } min_txn_duration { nanos: 0 } hot_standbys: 1
labels { labels { name: "app.gazette.dev/managed-by" value: "estuary.dev/flow" } }
ring_buffer_size: 1024 read_channel_size: 128'''
HINTS = '''log: "examples/recovery/logs/chunks-part-000"
live_nodes { fnode: 1 segments { author: 305419896 first_seq_no: 1 first_offset: 0
             first_checksum: 1234 last_seq_no: 4 last_offset: 512 } }
properties { path: "/IDENTITY" content: "abc" }'''

SEEDS = {
    "rpc_journal": [
        (0, "protocol.ReadRequest", 'header { %s } journal: "a/journal" offset: 1024 block: true do_not_proxy: true' % HDR),
        (0, "protocol.ReadRequest", 'journal: "a/journal;meta" offset: -1 metadata_only: true end_offset: 4096'),
        (1, "protocol.AppendRequest", 'journal: "a/journal" do_not_proxy: true offset: 2048 check_registers { %s } '
            'union_registers { labels { name: "reg" value: "1" } } subtract_registers { labels { name: "old" } } '
            'suspend: SUSPEND_RESUME' % SEL),
        (1, "protocol.AppendRequest", 'content: "hello, world\\n"'),
        (2, "protocol.ReplicateRequest", 'header { %s } proposal { %s } registers { labels { name: "r" value: "v" } } acknowledge: true' % (HDR, FRAG)),
        (2, "protocol.ReplicateRequest", 'content: "some bytes" content_delta: 10'),
        (3, "protocol.ListRequest", 'selector { %s } watch: true watch_resume { %s }' % (SEL, HDR)),
        (4, "protocol.ApplyRequest", 'changes { expect_mod_revision: 0 upsert { %s } } changes { expect_mod_revision: 7 delete: "a/old" }' % SPEC),
        (5, "protocol.FragmentsRequest", 'header { %s } journal: "a/journal" begin_mod_time: 1 end_mod_time: 1700000000 '
            'next_page_token: 4096 page_limit: 100 signatureTTL { seconds: 3600 } do_not_proxy: true' % HDR),
        (6, "protocol.FragmentStoreHealthRequest", 'fragment_store: "s3://bucket/prefix/?endpoint=http%3A%2F%2Flocalhost%3A8333&profile=x" '
            'check_delete: true check_delete_prefix: "health/"'),
        (7, "protocol.ReadResponse", 'status: OK header { %s } offset: 1024 write_head: 2048 fragment { %s } '
            'fragment_url: "https://bucket.s3.amazonaws.com/x?X-Amz-Signature=abc"' % (HDR, FRAG)),
        (8, "protocol.AppendResponse", 'status: OK header { %s } commit { %s } registers { labels { name: "r" value: "v" } } '
            'total_chunks: 3 delayed_chunks: 1' % (HDR, FRAG)),
        (9, "protocol.ReplicateResponse", 'status: WRONG_ROUTE header { %s } fragment { %s }' % (HDR, FRAG)),
        (10, "protocol.ListResponse", 'status: OK header { %s } journals { spec { %s } mod_revision: 5 route { '
             'members { zone: "z" suffix: "s" } primary: 0 endpoints: "http://h:1" } create_revision: 3 }' % (HDR, SPEC)),
        (11, "protocol.ApplyResponse", 'status: ETCD_TRANSACTION_FAILED header { %s }' % HDR),
        (12, "protocol.FragmentsResponse", 'status: OK header { %s } fragments { spec { %s } signed_url: "https://x/y" } '
             'next_page_token: 9' % (HDR, FRAG)),
        (13, "protocol.FragmentStoreHealthResponse", 'status: FRAGMENT_STORE_UNHEALTHY header { %s } store_health_error: "no bucket"' % HDR),
    ],
    "rpc_shard": [
        (0, "consumer.StatRequest", 'header { %s } shard: "chunks-part-000" read_through { key: "examples/chunks;part=000" value: 1024 }' % HDR),
        (1, "consumer.ListRequest", 'selector { %s }' % SEL),
        (2, "consumer.ApplyRequest", 'changes { expect_mod_revision: 0 upsert { %s } primary_hints { %s } } '
            'changes { expect_mod_revision: 12 delete: "chunks-part-001" }' % (SHARD, HINTS)),
        (3, "consumer.GetHintsRequest", 'shard: "chunks-part-000"'),
        (4, "consumer.UnassignRequest", 'shards: "chunks-part-000" shards: "chunks-part-001" only_failed: true dry_run: true'),
        (5, "consumer.ListResponse", 'status: OK header { %s } shards { spec { %s } mod_revision: 4 route { '
            'members { zone: "z" suffix: "c1" } primary: 0 endpoints: "http://c1:9000" } status { code: PRIMARY } '
            'create_revision: 2 }' % (HDR, SHARD)),
    ],
    "consumer_checkpoint": [
        (0, "consumer.Checkpoint", 'sources { key: "examples/chunks;part=000" value { read_through: 4096 '
            'producers { id: "\\001\\002\\003\\004\\005\\006" state { last_ack: 1311768467463790320 begin: -1 } } } } '
            'ack_intents { key: "examples/sums" value: "{\\"_meta\\":{\\"uuid\\":\\"9f2952f3-c6a3-11ea-8802-080607050309\\"}}\\n" }'),
        (1, "recoverylog.FSMHints", HINTS),
    ],
}

# etcd values of the keyspace: key "\n" value, after the selector byte
# (0 = a broker's journals keyspace, 1 = a consumer application's shards).
KEYSPACE = [
    (0, "/gazette/cluster/items/examples/stream-sum/chunks", "protocol.JournalSpec", SPEC),
    (0, "/gazette/cluster/members/us-east-1#broker-a", "protocol.BrokerSpec",
     'process_spec { id { zone: "us-east-1" suffix: "broker-a" } endpoint: "http://10.0.0.1:8080" } journal_limit: 1024'),
    (0, "/gazette/cluster/assign/examples/stream-sum/chunks#us-east-1#broker-a#0", "protocol.Route",
     'members { zone: "us-east-1" suffix: "broker-a" } primary: 0 endpoints: "http://10.0.0.1:8080"'),
    (1, "/gazette/cluster/items/chunks-part-000", "consumer.ShardSpec", SHARD),
    (1, "/gazette/cluster/members/us-east-1#consumer-a", "consumer.ConsumerSpec",
     'process_spec { id { zone: "us-east-1" suffix: "consumer-a" } endpoint: "http://10.0.0.3:9000" } shard_limit: 100'),
    (1, "/gazette/cluster/assign/chunks-part-000#us-east-1#consumer-a#0", "consumer.ReplicaStatus",
     'code: FAILED errors: "recovery failed"'),
]


def encode(msg, text):
    return subprocess.run(["protoc", "--encode=" + msg, "-I" + PROTO, "-I/usr/include",
                           "protocol.proto", "consumer.proto", "recoverylog.proto"],
                          input=text.encode(), capture_output=True, check=True, cwd=PROTO).stdout


def write(target, name, data):
    d = os.path.join(ROOT, "tests", "fuzz", "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    for target, seeds in SEEDS.items():
        for i, (k, msg, text) in enumerate(seeds):
            write(target, "seed-%02d-%s" % (i, msg.split(".")[-1]), bytes([k]) + encode(msg, text))
    for i, (k, key, msg, text) in enumerate(KEYSPACE):
        write("keyspace_values", "seed-%02d-%s" % (i, msg.split(".")[-1]),
              bytes([k]) + key.encode() + b"\n" + encode(msg, text))


if __name__ == "__main__":
    main()
