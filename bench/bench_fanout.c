/*
 * bench_fanout.c - many blocking readers of one journal, driven without a
 * thread per reader: each Read stream's next message is awaited by a
 * receive notify (gaz_rpc_stream_recv_notify), whose callback runs on
 * lib/rpc's pollers, counts the content bytes that came and arms the
 * next. So gazbench follows 10,000 readers on the pollers it has, as the
 * broker under test should (issue 39).
 *
 * Locks: none. A reader's fields are written by its notify chain only
 * (one callback at a time per stream, each after the one before), and
 * the counters the workload reads are atomics.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "common/clock.h"

struct fan_reader {
	struct bench_fanout *f;
	struct gaz_rpc_stream *s;
	atomic_llong bytes;          /* content bytes received */
	atomic_int ended;            /* 0 while open, else how it ended (GAZ_E*) */
};

struct bench_fanout {
	struct fan_reader *rd;
	int n;
	atomic_int ended;            /* readers whose stream ended */
};

/* on_ready (a poller, or the thread arming it): takes every message that
 * is in, then arms the next receive's notify. */
static void on_ready(void *arg)
{
	struct fan_reader *rd = arg;

	for (;;) {
		ProtobufCMessage *m = NULL;
		int rc = gaz_rpc_stream_recv(rd->s, &protocol__read_response__descriptor, &m, 0);

		if (rc == GAZ_ETIMEDOUT) {
			gaz_rpc_stream_recv_notify(rd->s, on_ready, rd);
			return;
		}
		if (rc) {
			atomic_store(&rd->ended, rc);
			atomic_fetch_add(&rd->f->ended, 1);
			return;
		}
		atomic_fetch_add(&rd->bytes, (long long)((Protocol__ReadResponse *)m)->content.len);
		protobuf_c_message_free_unpacked(m, NULL);
	}
}

struct bench_fanout *bench_fanout_open(struct gaz_rpc_channel *const *chs, int nch,
				       const char *journal, int64_t offset, int n,
				       int64_t deadline_ns, struct gaz_status *st)
{
	struct bench_fanout *f = bench_xcalloc(1, sizeof(*f));
	Protocol__ReadRequest req = PROTOCOL__READ_REQUEST__INIT;

	f->rd = bench_xcalloc((size_t)n, sizeof(*f->rd));
	req.journal = (char *)journal;
	req.offset = offset;
	req.block = true;
	for (int i = 0; i < n; i++) {
		struct fan_reader *rd = &f->rd[i];

		rd->f = f;
		rd->s = gaz_rpc_stream_open(chs[i % nch], "/protocol.Journal/Read", deadline_ns,
					    true, NULL, st);
		if (!rd->s || gaz_rpc_stream_send(rd->s, &req.base) ||
		    gaz_rpc_stream_close_send(rd->s)) {
			if (!st->msg[0])
				gaz_status_set(st, GAZ_ERPC, "opening reader %d failed", i);
			f->n = i + (rd->s != NULL);
			bench_fanout_close(f);
			return NULL;
		}
		f->n = i + 1;
		on_ready(rd);
	}
	return f;
}

int bench_fanout_count(struct bench_fanout *f, int64_t bytes, int *ended)
{
	int have = 0;

	for (int i = 0; i < f->n; i++)
		have += atomic_load(&f->rd[i].bytes) >= bytes;
	if (ended)
		*ended = atomic_load(&f->ended);
	return have;
}

int64_t bench_fanout_bytes(struct bench_fanout *f)
{
	int64_t sum = 0;

	for (int i = 0; i < f->n; i++)
		sum += atomic_load(&f->rd[i].bytes);
	return sum;
}

void bench_fanout_close(struct bench_fanout *f)
{
	if (!f)
		return;
	for (int i = 0; i < f->n; i++)
		if (f->rd[i].s)
			gaz_rpc_stream_cancel(f->rd[i].s);
	/* Free waits for each stream's pending receive and its notify. */
	for (int i = 0; i < f->n; i++)
		gaz_rpc_stream_free(f->rd[i].s);
	free(f->rd);
	free(f);
}
