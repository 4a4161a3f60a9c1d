/*
 * bench_ops.c - the RPCs gazbench drives, written against lib/rpc directly
 * (not the client library) so that what is timed is exactly one RPC of the
 * protocol, the same on both brokers:
 *
 *   Append (client-streaming, Gazette broker/append_api.go):
 *     [AppendRequest{journal}] [AppendRequest{content}]* [AppendRequest{}]
 *     half-close -> AppendResponse{status, commit} -> end of stream
 *   Read (server-streaming, broker/read_api.go):
 *     ReadRequest{journal, offset, block, end_offset} -> ReadResponse{
 *     metadata} then ReadResponse{offset, content}* (32 KiB - 32 chunks)
 *   Apply (unary, broker/list_apply_api.go): upserts and deletes specs.
 *
 * Invariant: every call carries a deadline, so no operation can hang the
 * benchmark; a stream is always freed (which cancels it if unfinished).
 */
#include "bench/bench.h"

#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "google/protobuf/duration.pb-c.h"

#define APPEND_PATH "/protocol.Journal/Append"
#define READ_PATH "/protocol.Journal/Read"
#define APPLY_PATH "/protocol.Journal/Apply"

void *bench_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "gazbench: out of memory (%zu bytes)\n", n);
		abort();
	}
	return p;
}

void *bench_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p) {
		fprintf(stderr, "gazbench: out of memory (%zu x %zu bytes)\n", n, size);
		abort();
	}
	return p;
}

bool bench_retryable_status(int status)
{
	return status == PROTOCOL__STATUS__NO_JOURNAL_PRIMARY_BROKER ||
	       status == PROTOCOL__STATUS__INSUFFICIENT_JOURNAL_BROKERS ||
	       status == PROTOCOL__STATUS__NOT_JOURNAL_PRIMARY_BROKER;
}

/* send_append sends the request, the content chunks and the commit
 * message, then half-closes. Returns 0 or GAZ_ERPC (the stream ended:
 * its status tells why). */
static int send_append(struct gaz_rpc_stream *s, const char *journal, const uint8_t *data,
		       size_t len, size_t chunk)
{
	Protocol__AppendRequest req = PROTOCOL__APPEND_REQUEST__INIT;
	Protocol__AppendRequest msg = PROTOCOL__APPEND_REQUEST__INIT;

	req.journal = (char *)journal;
	/* The request and content wait in the transport for the commit
	 * message: one write for the whole append, as the client library's
	 * appender sends it. */
	if (gaz_rpc_stream_send_buffered(s, &req.base))
		return GAZ_ERPC;
	for (size_t off = 0; off < len;) {
		size_t n = len - off < chunk ? len - off : chunk;

		msg.content.data = (uint8_t *)data + off;
		msg.content.len = n;
		if (gaz_rpc_stream_send_buffered(s, &msg.base))
			return GAZ_ERPC;
		off += n;
	}
	msg.content.data = NULL;
	msg.content.len = 0;
	if (gaz_rpc_stream_send(s, &msg.base))
		return GAZ_ERPC;
	return gaz_rpc_stream_close_send(s);
}

/* note_primary records the endpoint of the primary the header's route
 * names, if it names one with an endpoint. */
static void note_primary(const Protocol__Header *h, struct bench_append_result *res)
{
	const Protocol__Route *rt = h ? h->route : NULL;

	if (rt && rt->primary >= 0 && (size_t)rt->primary < rt->n_members &&
	    rt->n_endpoints == rt->n_members && rt->endpoints[rt->primary])
		snprintf(res->primary, sizeof(res->primary), "%s", rt->endpoints[rt->primary]);
}

/* finish_append reads the response and the stream's end; fills res. */
static int finish_append(struct gaz_rpc_stream *s, const char *journal, int64_t deadline_ns,
			 struct bench_append_result *res, struct gaz_status *st)
{
	Protocol__AppendResponse *r = NULL;
	/* The response and the end of the stream, in one wait (Gazette's
	 * client reads both too). */
	int rc = gaz_rpc_stream_recv_last(s, &protocol__append_response__descriptor,
					  (ProtobufCMessage **)&r, deadline_ns);

	if (rc == 0) {
		res->acked_ns = gaz_mono_ns();
		res->status = (int)r->status;
		if (r->commit)
			res->commit_end = r->commit->end;
		note_primary(r->header, res);
		protobuf_c_message_free_unpacked(&r->base, NULL);
	} else if (rc == GAZ_EPROTO) {
		return gaz_status_set(st, GAZ_ERPC, "append to \"%s\" failed: bad response",
				      journal);
	} else if (rc == GAZ_ETIMEDOUT) {
		return gaz_status_set(st, GAZ_ERPC, "append to \"%s\" failed: deadline passed",
				      journal);
	}
	if (gaz_rpc_stream_finish(s, st)) {
		gaz_status_prefix(st, "append to \"%s\" failed: ", journal);
		return st && st->grpc == GAZ_GRPC_UNAVAILABLE ? GAZ_EUNAVAIL : GAZ_ERPC;
	}
	if (res->status < 0)
		return gaz_status_set(st, GAZ_ERPC, "append to \"%s\" failed: no response",
				      journal);
	if (res->status == PROTOCOL__STATUS__OK)
		return 0;
	gaz_status_set(st, GAZ_ERPC, "append to \"%s\" failed: status %d", journal,
		       res->status);
	return bench_retryable_status(res->status) ? GAZ_EUNAVAIL : GAZ_ERPC;
}

int bench_append(struct gaz_rpc_channel *ch, const char *journal, const uint8_t *data,
		 size_t len, size_t chunk, int64_t deadline_ns, struct bench_append_result *res,
		 struct gaz_status *st)
{
	struct gaz_rpc_stream *s;
	int rc;

	res->status = -1;
	res->commit_end = 0;
	res->acked_ns = 0;
	res->primary[0] = '\0';
	if (!(s = gaz_rpc_stream_open(ch, APPEND_PATH, deadline_ns, true, NULL, st)))
		return GAZ_ERPC;
	/* As the client library's appender: sends queue behind each other. */
	gaz_rpc_stream_queue_sends(s);
	/* A failed send means the broker ended the call: its status says why. */
	(void)send_append(s, journal, data, len, chunk ? chunk : len);
	rc = finish_append(s, journal, deadline_ns, res, st);
	gaz_rpc_stream_free(s);
	return rc;
}

/* Retries by bench_append_retry, by the status that caused them
 * (index BENCH_RETRY_GRPC: a gRPC UNAVAILABLE, no status). */
#define BENCH_RETRY_GRPC 31
static _Atomic long g_retries[BENCH_RETRY_GRPC + 1];

int bench_append_retry(struct gaz_rpc_channel *ch, const char *journal, const uint8_t *data,
		       size_t len, int64_t deadline_ns, struct bench_append_result *res,
		       struct gaz_status *st)
{
	for (;;) {
		int rc;

		gaz_status_clear(st);
		rc = bench_append(ch, journal, data, len, len, deadline_ns, res, st);
		if (rc != GAZ_EUNAVAIL || gaz_mono_ns() + 50 * GAZ_NS_PER_MS > deadline_ns)
			return rc;
		atomic_fetch_add(&g_retries[res->status >= 0 && res->status < BENCH_RETRY_GRPC
						    ? res->status
						    : BENCH_RETRY_GRPC],
				 1);
		nanosleep(&(struct timespec){.tv_nsec = 50 * GAZ_NS_PER_MS}, NULL);
	}
}

static const char *status_name(int i)
{
	const ProtobufCEnumValue *v =
		i == BENCH_RETRY_GRPC ? NULL
				      : protobuf_c_enum_descriptor_get_value(&protocol__status__descriptor, i);

	return v ? v->name : "UNAVAILABLE";
}

void bench_append_retries(char *buf, size_t cap, long *total)
{
	size_t at = 0;

	*total = 0;
	buf[0] = '\0';
	for (int i = 0; i <= BENCH_RETRY_GRPC; i++) {
		long n = atomic_exchange(&g_retries[i], 0);
		if (!n)
			continue;
		*total += n;
		if (at < cap)
			at += (size_t)snprintf(buf + at, cap - at, "%s%s %ld", at ? ", " : "",
					       status_name(i), n);
	}
}

/* apply_run sends one ApplyRequest and checks the response status. */
static int apply_run(struct gaz_rpc_channel *ch, Protocol__ApplyRequest *req,
		     struct gaz_status *st)
{
	Protocol__ApplyResponse *resp = NULL;
	int rc = gaz_rpc_unary(ch, APPLY_PATH, &req->base, &protocol__apply_response__descriptor,
			       (ProtobufCMessage **)&resp, gaz_deadline_in(10000), true, NULL, st);

	if (rc)
		return rc == GAZ_ERPC ? rc : gaz_status_set(st, GAZ_ERPC, "apply failed (%d)", rc);
	if (resp->status != PROTOCOL__STATUS__OK)
		rc = gaz_status_set(st, GAZ_ERPC, "apply failed: status %d", (int)resp->status);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

int bench_apply(struct gaz_rpc_channel *ch, const struct bench_spec *specs, size_t n,
		struct gaz_status *st)
{
	Protocol__ApplyRequest req = PROTOCOL__APPLY_REQUEST__INIT;
	Protocol__ApplyRequest__Change *chg = bench_xcalloc(n, sizeof(*chg));
	Protocol__ApplyRequest__Change **chp = bench_xcalloc(n, sizeof(*chp));
	Protocol__JournalSpec *js = bench_xcalloc(n, sizeof(*js));
	Protocol__JournalSpec__Fragment *fr = bench_xcalloc(n, sizeof(*fr));
	Google__Protobuf__Duration refresh = GOOGLE__PROTOBUF__DURATION__INIT;
	Google__Protobuf__Duration *refresh_of = bench_xcalloc(n, sizeof(*refresh_of));
	char **stores = bench_xcalloc(n, sizeof(*stores));
	int rc;

	refresh.seconds = 30;
	for (size_t i = 0; i < n; i++) {
		stores[i] = (char *)(specs[i].store ? specs[i].store : "file:///");
		refresh_of[i] = refresh;
		if (specs[i].refresh_s > 0)
			refresh_of[i].seconds = specs[i].refresh_s;
		protocol__apply_request__change__init(&chg[i]);
		protocol__journal_spec__init(&js[i]);
		protocol__journal_spec__fragment__init(&fr[i]);
		fr[i].length = specs[i].fragment_len;
		fr[i].compression_codec = specs[i].codec ? specs[i].codec
							 : PROTOCOL__COMPRESSION_CODEC__NONE;
		fr[i].n_stores = 1;
		fr[i].stores = &stores[i];
		fr[i].refresh_interval = &refresh_of[i];
		js[i].name = (char *)specs[i].name;
		js[i].replication = specs[i].replication > 0 ? specs[i].replication : 1;
		js[i].fragment = &fr[i];
		chg[i].expect_mod_revision = -1;
		chg[i].upsert = &js[i];
		chp[i] = &chg[i];
	}
	req.n_changes = n;
	req.changes = chp;
	rc = apply_run(ch, &req, st);
	free(stores);
	free(refresh_of);
	free(fr);
	free(js);
	free(chp);
	free(chg);
	return rc;
}

int bench_delete(struct gaz_rpc_channel *ch, const char *const *names, size_t n,
		 struct gaz_status *st)
{
	Protocol__ApplyRequest req = PROTOCOL__APPLY_REQUEST__INIT;
	Protocol__ApplyRequest__Change *chg = bench_xcalloc(n, sizeof(*chg));
	Protocol__ApplyRequest__Change **chp = bench_xcalloc(n, sizeof(*chp));
	int rc;

	for (size_t i = 0; i < n; i++) {
		protocol__apply_request__change__init(&chg[i]);
		chg[i].expect_mod_revision = -1;
		chg[i].delete_ = (char *)names[i];
		chp[i] = &chg[i];
	}
	req.n_changes = n;
	req.changes = chp;
	rc = apply_run(ch, &req, st);
	free(chp);
	free(chg);
	return rc;
}

/* read_loop receives responses until done; see bench_read. */
static int read_loop(struct gaz_rpc_stream *s, const char *journal, int64_t end_offset,
		     int64_t deadline_ns, bench_read_fn fn, void *arg, int64_t *got,
		     struct gaz_status *st)
{
	for (;;) {
		Protocol__ReadResponse *r = NULL;
		int rc = gaz_rpc_stream_recv(s, &protocol__read_response__descriptor,
					     (ProtobufCMessage **)&r, deadline_ns);
		bool more = true;
		int64_t end;
		size_t len;

		if (rc == GAZ_ETIMEDOUT)
			return rc;
		if (rc == GAZ_EOF)
			return gaz_rpc_stream_finish(s, st) ? GAZ_ERPC : 0;
		if (rc)
			return gaz_status_set(st, GAZ_ERPC, "read of \"%s\" failed: %s", journal,
					      gaz_err_str(rc));
		if (r->status != PROTOCOL__STATUS__OK) {
			/* Non-blocking reads end at the write head this way. */
			rc = r->status == PROTOCOL__STATUS__OFFSET_NOT_YET_AVAILABLE
				     ? 0
				     : gaz_status_set(st, GAZ_ERPC, "read of \"%s\" failed: status %d",
						      journal, (int)r->status);
			protobuf_c_message_free_unpacked(&r->base, NULL);
			return rc;
		}
		len = r->content.len;
		end = r->offset + (int64_t)len;
		if (len > 0) {
			*got += (int64_t)len;
			more = fn(arg, r->offset, r->content.data, len, gaz_mono_ns());
		}
		protobuf_c_message_free_unpacked(&r->base, NULL);
		if (!more || (end_offset > 0 && len > 0 && end >= end_offset))
			return 0;
	}
}

int bench_read(struct gaz_rpc_channel *ch, const char *journal, int64_t offset,
	       int64_t end_offset, bool block, int64_t deadline_ns, bench_read_fn fn,
	       void *arg, int64_t *got, struct gaz_status *st)
{
	Protocol__ReadRequest req = PROTOCOL__READ_REQUEST__INIT;
	struct gaz_rpc_stream *s;
	int rc;

	*got = 0;
	if (!(s = gaz_rpc_stream_open(ch, READ_PATH, deadline_ns, true, NULL, st)))
		return GAZ_ERPC;
	req.journal = (char *)journal;
	req.offset = offset;
	req.block = block;
	req.end_offset = end_offset;
	if (gaz_rpc_stream_send(s, &req.base) == 0)
		gaz_rpc_stream_close_send(s);
	rc = read_loop(s, journal, end_offset, deadline_ns, fn, arg, got, st);
	gaz_rpc_stream_free(s);
	return rc;
}
