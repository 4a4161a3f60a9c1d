/*
 * test_client_rpc.c - the client library's RPC logic (client_list.c,
 * client_append.c, client_read.c) against a scripted broker: a real gRPC
 * server in this process (lib/rpc) answering protocol.Journal calls with
 * the responses each test scripts, and recording what the client sent.
 *
 * What is checked: the Append stream contract (parameters, chunks of at
 * most 1 MiB, the empty commit message, half-close; abort without it),
 * Append retries only for routing statuses and re-readable input, status
 * errors and response validation; Read events (metadata, content, offset
 * jumps, the tail), RetryReader restarts at the last offset, surfacing
 * JOURNAL_NOT_FOUND after its attempts, end_offset, direct file:// reads,
 * with read-ahead of the next fragment (every byte once, in order, onto
 * the live spool; a fetch failing ahead; freeing mid-read-ahead);
 * List continuation merging and its errors; Apply batching;
 * ListFragments paging. Real brokers are exercised by the integration
 * suite.
 *
 * Lock rule: S.mu guards all of S, what the broker saw and its script. The
 * handlers (lib/rpc's handler threads) and the tests (the main thread)
 * read and write S only under S.mu, the tests through seen() and the
 * script setters: a call's path through grpc and the network orders them
 * in fact, but ThreadSanitizer sees no order there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/lib/client_int.h"
#include "common/clock.h"

#define J "a/journal"
#define P(m) "/protocol.Journal/" m

static struct gaz_rpc_server *g_srv;
static struct gaz_client *g_client;
static char g_root[] = "/tmp/gaz-crpc-XXXXXX";

/* What the scripted broker saw. */
struct seen {
	int calls;
	int64_t read_offsets[16];
	bool read_dnp;
	char append_journal[64];
	size_t chunks[16];
	int nchunks;
	bool commit_seen, aborted;
	int64_t total;
	size_t apply_sizes[8];
	int napply;
	int64_t frag_tokens[8];
	int nfrag;
};

/* Per-test script: how the n-th call (0-based) of a method answers. */
struct script {
	void (*read)(struct gaz_rpc_call *call, const Protocol__ReadRequest *req, int n);
	int (*append_status)(int n);
	int list_mode, apply_status;
};

static struct {
	pthread_mutex_t mu;
	struct seen saw;
	struct script script;
} S = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int next_call(void)
{
	int n;

	pthread_mutex_lock(&S.mu);
	n = S.saw.calls++;
	pthread_mutex_unlock(&S.mu);
	return n;
}

/* seen: a copy of what the broker saw so far. */
static struct seen seen(void)
{
	struct seen v;

	pthread_mutex_lock(&S.mu);
	v = S.saw;
	pthread_mutex_unlock(&S.mu);
	return v;
}

/* seen_reset forgets what the broker saw. */
static void seen_reset(void)
{
	pthread_mutex_lock(&S.mu);
	memset(&S.saw, 0, sizeof(S.saw));
	pthread_mutex_unlock(&S.mu);
}

/* script: a copy of the script, for a handler. */
static struct script script(void)
{
	struct script v;

	pthread_mutex_lock(&S.mu);
	v = S.script;
	pthread_mutex_unlock(&S.mu);
	return v;
}

static void script_read(void (*fn)(struct gaz_rpc_call *, const Protocol__ReadRequest *, int))
{
	pthread_mutex_lock(&S.mu);
	S.script.read = fn;
	pthread_mutex_unlock(&S.mu);
}

static void script_append(int (*status)(int n))
{
	pthread_mutex_lock(&S.mu);
	S.script.append_status = status;
	pthread_mutex_unlock(&S.mu);
}

static void script_list(int mode)
{
	pthread_mutex_lock(&S.mu);
	S.script.list_mode = mode;
	pthread_mutex_unlock(&S.mu);
}

static void script_apply(int status)
{
	pthread_mutex_lock(&S.mu);
	S.script.apply_status = status;
	pthread_mutex_unlock(&S.mu);
}

/* ---- well-formed pieces ---------------------------------------------------- */

static Protocol__ProcessSpec__ID g_pid = PROTOCOL__PROCESS_SPEC__ID__INIT;
static Protocol__ProcessSpec__ID *g_members[1] = {&g_pid};
static Protocol__Route g_route = PROTOCOL__ROUTE__INIT;
static Protocol__Header__Etcd g_etcd = PROTOCOL__HEADER__ETCD__INIT;
static Protocol__Header g_hdr = PROTOCOL__HEADER__INIT;

static void init_header(void)
{
	g_pid.zone = "local";
	g_pid.suffix = "broker-1";
	g_route.n_members = 1;
	g_route.members = g_members;
	g_etcd.cluster_id = 1;
	g_etcd.member_id = 2;
	g_etcd.revision = 3;
	g_etcd.raft_term = 4;
	g_hdr.process_id = &g_pid;
	g_hdr.route = &g_route;
	g_hdr.etcd = &g_etcd;
}

/* send_meta sends a metadata ReadResponse; a fragment when end > begin. */
static void send_meta(struct gaz_rpc_call *call, int status, int64_t offset, int64_t begin,
		      int64_t end, const char *url, bool header)
{
	Protocol__ReadResponse r = PROTOCOL__READ_RESPONSE__INIT;
	Protocol__Fragment f = PROTOCOL__FRAGMENT__INIT;

	r.status = (Protocol__Status)status;
	r.header = header ? &g_hdr : NULL;
	r.offset = offset;
	r.write_head = end > offset ? end : offset;
	f.journal = J;
	f.begin = begin;
	f.end = end;
	f.compression_codec = PROTOCOL__COMPRESSION_CODEC__NONE;
	if (url) {
		f.backing_store = "file:///";
		f.mod_time = 1700000000;
		r.fragment_url = (char *)url;
	}
	if (end > begin)
		r.fragment = &f;
	gaz_rpc_send(call, &r.base);
}

static const char g_data[] = "0123456789abcdefghij";

static void send_chunk(struct gaz_rpc_call *call, int64_t offset, size_t len)
{
	Protocol__ReadResponse r = PROTOCOL__READ_RESPONSE__INIT;

	r.offset = offset;
	r.content.data = (uint8_t *)g_data + offset;
	r.content.len = len;
	gaz_rpc_send(call, &r.base);
}

static Protocol__JournalSpec__Fragment g_fspec = PROTOCOL__JOURNAL_SPEC__FRAGMENT__INIT;
static Google__Protobuf__Duration g_refresh = GOOGLE__PROTOBUF__DURATION__INIT;

static void init_spec(Protocol__JournalSpec *s, const char *name, int32_t replication)
{
	protocol__journal_spec__init(s);
	g_refresh.seconds = 1;
	g_fspec.length = 1024;
	g_fspec.compression_codec = PROTOCOL__COMPRESSION_CODEC__NONE;
	g_fspec.refresh_interval = &g_refresh;
	s->name = (char *)name;
	s->replication = replication;
	s->fragment = &g_fspec;
}

/* ---- handlers ------------------------------------------------------------ */

static void h_read(struct gaz_rpc_call *call, void *arg)
{
	ProtobufCMessage *m = NULL;
	struct script sc = script();
	int n = next_call();

	(void)arg;
	if (gaz_rpc_recv(call, &protocol__read_request__descriptor, &m, GAZ_DEADLINE_NEVER)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT, "no request");
		return;
	}
	pthread_mutex_lock(&S.mu);
	if (n < 16)
		S.saw.read_offsets[n] = ((Protocol__ReadRequest *)m)->offset;
	S.saw.read_dnp = ((Protocol__ReadRequest *)m)->do_not_proxy;
	pthread_mutex_unlock(&S.mu);
	sc.read(call, (Protocol__ReadRequest *)m, n);
	protobuf_c_message_free_unpacked(m, NULL);
	gaz_rpc_finish(call, NULL, GAZ_GRPC_OK, NULL);
}

/* append_recv reads the client's stream; false if it ended without the
 * commit message (an abort). */
static bool append_recv(struct gaz_rpc_call *call)
{
	Protocol__AppendRequest *m = NULL;
	bool first = true, commit = false;

	while (gaz_rpc_recv(call, &protocol__append_request__descriptor, (ProtobufCMessage **)&m,
			    GAZ_DEADLINE_NEVER) == 0) {
		pthread_mutex_lock(&S.mu);
		if (first)
			snprintf(S.saw.append_journal, sizeof(S.saw.append_journal), "%s",
				 m->journal);
		else if (m->content.len && S.saw.nchunks < 16)
			S.saw.chunks[S.saw.nchunks++] = m->content.len;
		S.saw.total += first ? 0 : (int64_t)m->content.len;
		commit = !first && m->content.len == 0;
		pthread_mutex_unlock(&S.mu);
		first = false;
		protobuf_c_message_free_unpacked(&m->base, NULL);
	}
	return commit;
}

static void h_append(struct gaz_rpc_call *call, void *arg)
{
	Protocol__AppendResponse r = PROTOCOL__APPEND_RESPONSE__INIT;
	Protocol__Fragment commit = PROTOCOL__FRAGMENT__INIT;
	Protocol__LabelSet regs = PROTOCOL__LABEL_SET__INIT;
	struct script sc = script();
	int n = next_call();

	(void)arg;
	if (!append_recv(call)) {
		pthread_mutex_lock(&S.mu);
		S.saw.aborted = true;
		pthread_mutex_unlock(&S.mu);
		gaz_rpc_finish(call, NULL, GAZ_GRPC_UNKNOWN, "unexpected EOF");
		return;
	}
	pthread_mutex_lock(&S.mu);
	S.saw.commit_seen = true;
	commit.end = S.saw.total;
	pthread_mutex_unlock(&S.mu);
	r.status = (Protocol__Status)sc.append_status(n);
	r.header = &g_hdr;
	commit.journal = J;
	commit.compression_codec = PROTOCOL__COMPRESSION_CODEC__NONE;
	if (r.status == PROTOCOL__STATUS__OK) {
		r.commit = &commit;
		r.registers = &regs;
	}
	gaz_rpc_finish(call, &r.base, GAZ_GRPC_OK, NULL);
}

static void h_list(struct gaz_rpc_call *call, void *arg)
{
	Protocol__ListResponse first = PROTOCOL__LIST_RESPONSE__INIT, cont = PROTOCOL__LIST_RESPONSE__INIT;
	Protocol__ListResponse__Journal js[3], *p[3] = {&js[0], &js[1], &js[2]};
	Protocol__JournalSpec specs[3];
	Protocol__LabelSelector *sel = NULL;
	static const char *const names[] = {"a/one", "a/three", "a/two"};
	struct script sc = script();

	(void)arg;
	next_call();
	gaz_rpc_recv(call, &protocol__list_request__descriptor, (ProtobufCMessage **)&sel,
		     GAZ_DEADLINE_NEVER);
	protobuf_c_message_free_unpacked((ProtobufCMessage *)sel, NULL);
	for (int i = 0; i < 3; i++) {
		protocol__list_response__journal__init(&js[i]);
		init_spec(&specs[i], names[i], sc.list_mode == 2 && i == 1 ? 0 : 1);
		js[i].spec = &specs[i];
		js[i].mod_revision = 2;
		js[i].route = &g_route;
	}
	first.header = &g_hdr;
	first.n_journals = 2;
	first.journals = p;
	cont.n_journals = sc.list_mode == 1 ? 0 : 1;
	cont.journals = p + 2;
	gaz_rpc_send(call, &first.base);
	gaz_rpc_send(call, &cont.base);
	gaz_rpc_finish(call, NULL, GAZ_GRPC_OK, NULL);
}

static void h_apply(struct gaz_rpc_call *call, void *arg)
{
	Protocol__ApplyResponse r = PROTOCOL__APPLY_RESPONSE__INIT;
	Protocol__ApplyRequest *req = NULL;
	Protocol__Header__Etcd etcd = g_etcd;
	Protocol__Header hdr = g_hdr;
	struct script sc = script();
	int n = next_call();

	(void)arg;
	gaz_rpc_recv(call, &protocol__apply_request__descriptor, (ProtobufCMessage **)&req,
		     GAZ_DEADLINE_NEVER);
	pthread_mutex_lock(&S.mu);
	if (S.saw.napply < 8)
		S.saw.apply_sizes[S.saw.napply++] = req->n_changes;
	pthread_mutex_unlock(&S.mu);
	protobuf_c_message_free_unpacked(&req->base, NULL);
	etcd.revision = 10 + n;
	hdr.etcd = &etcd;
	r.header = &hdr;
	r.status = (Protocol__Status)sc.apply_status;
	gaz_rpc_finish(call, &r.base, GAZ_GRPC_OK, NULL);
}

static void h_fragments(struct gaz_rpc_call *call, void *arg)
{
	Protocol__FragmentsResponse r = PROTOCOL__FRAGMENTS_RESPONSE__INIT;
	Protocol__FragmentsResponse__Fragment e = PROTOCOL__FRAGMENTS_RESPONSE____FRAGMENT__INIT, *ep = &e;
	Protocol__Fragment f = PROTOCOL__FRAGMENT__INIT;
	Protocol__FragmentsRequest *req = NULL;
	int64_t token;

	(void)arg;
	next_call();
	gaz_rpc_recv(call, &protocol__fragments_request__descriptor, (ProtobufCMessage **)&req,
		     GAZ_DEADLINE_NEVER);
	token = req->next_page_token;
	protobuf_c_message_free_unpacked(&req->base, NULL);
	pthread_mutex_lock(&S.mu);
	if (S.saw.nfrag < 8)
		S.saw.frag_tokens[S.saw.nfrag++] = token;
	pthread_mutex_unlock(&S.mu);
	f.journal = J;
	f.begin = token;
	f.end = token + 10;
	f.compression_codec = PROTOCOL__COMPRESSION_CODEC__GZIP;
	e.spec = &f;
	r.header = &g_hdr;
	r.n_fragments = 1;
	r.fragments = &ep;
	r.next_page_token = token < 20 ? token + 10 : 0;
	gaz_rpc_finish(call, &r.base, GAZ_GRPC_OK, NULL);
}

/* ---- Read scripts ---------------------------------------------------------- */

static void rs_basic(struct gaz_rpc_call *call, const Protocol__ReadRequest *req, int n)
{
	(void)req;
	(void)n;
	send_meta(call, 0, 0, 0, 10, NULL, true);
	send_chunk(call, 0, 5);
	send_chunk(call, 5, 5);
}

static void rs_jump(struct gaz_rpc_call *call, const Protocol__ReadRequest *req, int n)
{
	(void)req;
	(void)n;
	send_meta(call, 0, 15, 15, 20, NULL, true);
}

static void rs_tail(struct gaz_rpc_call *call, const Protocol__ReadRequest *req, int n)
{
	(void)req;
	(void)n;
	send_meta(call, PROTOCOL__STATUS__OFFSET_NOT_YET_AVAILABLE, 12, 0, 0, NULL, true);
}

static void rs_bad_chunk(struct gaz_rpc_call *call, const Protocol__ReadRequest *req, int n)
{
	Protocol__ReadResponse r = PROTOCOL__READ_RESPONSE__INIT;

	(void)req;
	(void)n;
	r.header = &g_hdr;
	r.content.data = (uint8_t *)g_data;
	r.content.len = 3;
	gaz_rpc_send(call, &r.base);
}

static void rs_below(struct gaz_rpc_call *call, const Protocol__ReadRequest *req, int n)
{
	(void)req;
	(void)n;
	send_meta(call, 0, 3, 0, 10, NULL, true);
}

/* Call 0 ends mid-fragment, call 1 resumes, call 2 reports the head. */
static void rs_retry(struct gaz_rpc_call *call, const Protocol__ReadRequest *req, int n)
{
	if (n == 0) {
		send_meta(call, 0, 0, 0, 10, NULL, true);
		send_chunk(call, 0, 5);
	} else if (n == 1) {
		send_meta(call, 0, req->offset, 0, 10, NULL, true);
		send_chunk(call, req->offset, (size_t)(10 - req->offset));
	} else {
		send_meta(call, PROTOCOL__STATUS__OFFSET_NOT_YET_AVAILABLE, 10, 0, 0, NULL, true);
	}
}

static void rs_not_found(struct gaz_rpc_call *call, const Protocol__ReadRequest *req, int n)
{
	(void)req;
	(void)n;
	send_meta(call, PROTOCOL__STATUS__JOURNAL_NOT_FOUND, 0, 0, 0, NULL, true);
}

static char g_endpoint[64];

/* Call 0: a non-member broker's answer naming the member's endpoint. */
static void rs_not_member(struct gaz_rpc_call *call, const Protocol__ReadRequest *req, int n)
{
	Protocol__ReadResponse r = PROTOCOL__READ_RESPONSE__INIT;
	Protocol__Route rt = g_route;
	Protocol__Header hdr = g_hdr;
	char *eps[1] = {g_endpoint};

	if (n > 0) {
		rs_retry(call, req, n == 1 ? 1 : 2);
		return;
	}
	rt.n_endpoints = 1;
	rt.endpoints = eps;
	hdr.route = &rt;
	r.status = PROTOCOL__STATUS__NOT_JOURNAL_BROKER;
	r.header = &hdr;
	gaz_rpc_send(call, &r.base);
}

static void rs_direct(struct gaz_rpc_call *call, const Protocol__ReadRequest *req, int n)
{
	(void)n;
	send_meta(call, 0, req->offset, 0, 20, "file:///frag.raw", true);
}

/* Read-ahead scripts: RA_NF persisted fragments of RA_FL bytes, each named
 * by a file:// URL to do_not_proxy reads, then the live spool [RA_NF *
 * RA_FL, RA_HEAD) streamed as content, then the write head. Byte x of
 * the journal is ra_byte(x). */
#define RA_NF 8
#define RA_FL 100
#define RA_HEAD (RA_NF * RA_FL + 57)

static uint8_t ra_byte(int64_t x)
{
	return (uint8_t)(x % 251 + x / 251);
}

static void rs_many(struct gaz_rpc_call *call, const Protocol__ReadRequest *req, int n)
{
	Protocol__ReadResponse r = PROTOCOL__READ_RESPONSE__INIT;
	int64_t o = req->offset, i = o / RA_FL;
	uint8_t live[RA_HEAD];
	char url[64];

	(void)n;
	if (o < RA_NF * RA_FL && req->do_not_proxy) {
		snprintf(url, sizeof(url), "file:///ra/f%lld.raw", (long long)i);
		send_meta(call, 0, o, i * RA_FL, (i + 1) * RA_FL, url, true);
		return;
	}
	send_meta(call, 0, o, RA_NF * RA_FL, RA_HEAD, NULL, true);
	for (int64_t x = o; x < RA_HEAD; x++)
		live[x] = ra_byte(x);
	for (int64_t at = o; at < RA_HEAD; at += 20) { /* content in chunks */
		r.offset = at;
		r.content.data = live + at;
		r.content.len = (size_t)(RA_HEAD - at < 20 ? RA_HEAD - at : 20);
		gaz_rpc_send(call, &r.base);
	}
	send_meta(call, PROTOCOL__STATUS__OFFSET_NOT_YET_AVAILABLE, RA_HEAD, 0, 0, NULL, true);
}

/* ra_files writes the fragment files; fragment `bad` is missing (short
 * < 0) or has only `short_len` bytes. */
static void ra_files(int bad, int short_len)
{
	char path[300];
	uint8_t b[RA_FL];

	snprintf(path, sizeof(path), "%s/ra", g_root);
	mkdir(path, 0755);
	for (int i = 0; i < RA_NF; i++) {
		int fd, len = i == bad ? short_len : RA_FL;
		snprintf(path, sizeof(path), "%s/ra/f%d.raw", g_root, i);
		unlink(path);
		if (len < 0)
			continue;
		for (int x = 0; x < RA_FL; x++)
			b[x] = ra_byte((int64_t)i * RA_FL + x);
		assert_true((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0);
		assert_int_equal(write(fd, b, (size_t)len), len);
		close(fd);
	}
}

/* ra_drain reads with a read-ahead ring of `ring` bytes (< 0: none) from
 * offset 0 in reads of 13 bytes, checking each byte against ra_byte at
 * its offset; returns the final event and the bytes and metadata events
 * seen. */
static int ra_drain(int64_t ring, bool retry, int64_t *got, int *metas, struct gaz_status *st)
{
	struct gaz_read_opts o = {.journal = J, .retry = retry, .do_not_proxy = true,
				  .read_ahead_bytes = ring};
	struct gaz_reader *r;
	uint8_t buf[13];
	size_t n;
	int rc;

	assert_int_equal(gaz_reader_new(g_client, &o, &r, st), 0);
	*got = 0;
	*metas = 0;
	while ((rc = gaz_reader_read(r, buf, sizeof(buf), &n, st)) == 0 || rc == GAZ_READ_META) {
		*metas += rc == GAZ_READ_META;
		for (size_t i = 0; i < n; i++)
			assert_int_equal(buf[i], ra_byte(*got + (int64_t)i));
		*got += (int64_t)n;
		assert_int_equal(gaz_reader_offset(r), *got);
	}
	gaz_reader_free(r);
	return rc;
}

/* Many persisted fragments, then the live spool: with read-ahead (a ring
 * smaller than a read, so it wraps and fills; and the default ring) and
 * without, every byte arrives once, in order, with one metadata event per
 * fragment; read-ahead asks for each next fragment from its own thread. */
static void test_read_ahead_many(void **state)
{
	static const int64_t rings[] = {7, 0, -1};
	struct gaz_status st = {0};
	int64_t got;
	int metas;

	(void)state;
	script_read(rs_many);
	ra_files(-1, 0);
	for (size_t k = 0; k < sizeof(rings) / sizeof(rings[0]); k++) {
		seen_reset();
		assert_int_equal(ra_drain(rings[k], true, &got, &metas, &st), GAZ_READ_TAIL);
		assert_int_equal(got, RA_HEAD);
		assert_int_equal(metas, RA_NF + 1);
		/* read-ahead: each fragment but the first, and the head, asked
		 * ahead; the head asked again by the reader */
		assert_int_equal(seen().calls, rings[k] < 0 ? RA_NF + 1 : RA_NF + 2);
	}
}

/* A reader freed mid-fragment, its read-ahead waiting on a full ring,
 * stops promptly; so does one of a cancelled client's. */
static void test_read_ahead_free(void **state)
{
	struct gaz_read_opts o = {.journal = J, .retry = true, .do_not_proxy = true,
				  .read_ahead_bytes = 5};
	struct gaz_status st = {0};
	struct gaz_reader *r;
	uint8_t buf[8];
	int64_t t0;
	size_t n;

	(void)state;
	script_read(rs_many);
	ra_files(-1, 0);
	assert_int_equal(gaz_reader_new(g_client, &o, &r, &st), 0);
	assert_int_equal(gaz_reader_read(r, buf, sizeof(buf), &n, &st), GAZ_READ_META);
	assert_int_equal(gaz_reader_read(r, buf, sizeof(buf), &n, &st), 0);
	usleep(50 * 1000); /* the read-ahead fills its ring and waits */
	t0 = gaz_mono_ns();
	gaz_reader_free(r);
	assert_true(gaz_mono_ns() - t0 < 500 * GAZ_NS_PER_MS);
}

/* ra_read_to_error reads a fresh reader (no retry: each fragment's end is
 * an EOF, read on) until an error other than META or EOF, checking every
 * byte; *off is where it stopped. Returns that error. */
static int ra_read_to_error(int64_t ring, int64_t *off, struct gaz_status *st)
{
	struct gaz_read_opts o = {.journal = J, .do_not_proxy = true, .read_ahead_bytes = ring};
	struct gaz_reader *r;
	uint8_t buf[64];
	size_t n;
	int rc;

	*off = 0;
	gaz_status_clear(st);
	assert_int_equal(gaz_reader_new(g_client, &o, &r, st), 0);
	while ((rc = gaz_reader_read(r, buf, sizeof(buf), &n, st)) == 0 || rc == GAZ_READ_META ||
	       rc == GAZ_EOF) {
		for (size_t i = 0; rc == 0 && i < n; i++)
			assert_int_equal(buf[i], ra_byte(*off + (int64_t)i));
		if (rc == 0)
			*off += (int64_t)n;
	}
	assert_int_equal(gaz_reader_offset(r), *off);
	gaz_reader_free(r);
	return rc;
}

/* A fragment whose fetch fails while it is read ahead: the bytes before it
 * arrive, then its metadata event, then the fetch's error, exactly where
 * a reader without read-ahead reports it. A body cut short fails after
 * the bytes it had. */
static void test_read_ahead_fetch_fails(void **state)
{
	struct gaz_status st = {0};
	int64_t got, off;
	int metas;

	(void)state;
	script_read(rs_many);
	for (int ring = 0; ring < 2; ring++) {
		int64_t size = ring ? -1 : 7;
		ra_files(3, -1); /* fragment 3 missing */
		gaz_status_clear(&st);
		assert_int_equal(ra_drain(size, false, &got, &metas, &st), GAZ_EOF);
		assert_int_equal(got, RA_FL); /* without retry: fragment 0, then EOF */
		assert_int_equal(ra_read_to_error(size, &off, &st), GAZ_ENOTFOUND);
		assert_non_null(strstr(st.msg, "404 Not Found"));
		assert_int_equal(off, 3 * RA_FL);
		ra_files(3, RA_FL / 2 + 1); /* fragment 3 cut short */
		assert_int_equal(ra_read_to_error(size, &off, &st), GAZ_EPROTO);
		assert_non_null(strstr(st.msg, "unexpected EOF"));
		assert_int_equal(off, 3 * RA_FL + RA_FL / 2 + 1);
	}
}

/* ---- Read tests ---------------------------------------------------------------- */

static struct gaz_reader *reader(int64_t offset, int64_t end, bool retry, bool dnp)
{
	struct gaz_read_opts o = {.journal = J, .offset = offset, .end_offset = end,
				  .retry = retry, .do_not_proxy = dnp};
	struct gaz_status st = {0};
	struct gaz_reader *r;

	assert_int_equal(gaz_reader_new(g_client, &o, &r, &st), 0);
	return r;
}

/* drain reads content into out until an event other than content/META;
 * returns that event and counts METAs. */
static int drain(struct gaz_reader *r, char *out, size_t *len, int *metas, struct gaz_status *st)
{
	size_t n;
	int rc;

	*len = 0;
	*metas = 0;
	while ((rc = gaz_reader_read(r, out + *len, 3, &n, st)) == 0 || rc == GAZ_READ_META) {
		*len += n;
		*metas += rc == GAZ_READ_META;
	}

	out[*len] = '\0';
	return rc;
}

static void test_read_basic(void **state)
{
	struct gaz_reader *r = reader(0, 0, false, false);
	struct gaz_status st = {0};
	char out[64];
	size_t len;
	int metas;

	(void)state;
	script_read(rs_basic);
	assert_int_equal(drain(r, out, &len, &metas, &st), GAZ_EOF);
	assert_string_equal(out, "0123456789");
	assert_int_equal(metas, 1);
	assert_int_equal(gaz_reader_offset(r), 10);
	assert_true(gaz_reader_meta(r)->has_fragment);
	assert_int_equal(gaz_reader_meta(r)->fragment.end, 10);
	assert_int_equal(gaz_reader_meta(r)->write_head, 10);
	gaz_reader_free(r);
}

static void test_read_jump_tail(void **state)
{
	struct gaz_status st = {0};
	struct gaz_reader *r = reader(0, 0, false, false);
	size_t n;

	(void)state;
	script_read(rs_jump);
	assert_int_equal(gaz_reader_read(r, NULL, 0, &n, &st), GAZ_READ_JUMP);
	assert_int_equal(gaz_reader_offset(r), 15);
	gaz_reader_free(r);

	script_read(rs_tail);
	r = reader(-1, 0, true, false);
	assert_int_equal(gaz_reader_read(r, NULL, 0, &n, &st), GAZ_READ_TAIL);
	assert_int_equal(gaz_reader_offset(r), 12);
	assert_int_equal(gaz_reader_meta(r)->status, PROTOCOL__STATUS__OFFSET_NOT_YET_AVAILABLE);
	gaz_reader_free(r);
}

static void test_read_invalid(void **state)
{
	struct gaz_status st = {0};
	struct gaz_reader *r = reader(0, 0, false, false);
	char buf[8];
	size_t n;

	(void)state;
	script_read(rs_bad_chunk);
	assert_int_equal(gaz_reader_read(r, buf, sizeof(buf), &n, &st), GAZ_EPROTO);
	assert_string_equal(st.msg, "validating broker response: unexpected Header with Content");
	gaz_reader_free(r);

	gaz_status_clear(&st);
	script_read(rs_below);
	r = reader(5, 0, false, false);
	assert_int_equal(gaz_reader_read(r, buf, sizeof(buf), &n, &st), GAZ_EPROTO);
	assert_non_null(strstr(st.msg, "invalid ReadResponse offset (3; expected >= 5)"));
	gaz_reader_free(r);
}

static void test_read_retry(void **state)
{
	struct gaz_reader *r = reader(0, 0, true, false);
	struct gaz_status st = {0};
	struct seen v;
	char out[64];
	size_t len;
	int metas;

	(void)state;
	script_read(rs_retry);
	assert_int_equal(drain(r, out, &len, &metas, &st), GAZ_READ_TAIL);
	assert_string_equal(out, "0123456789");
	assert_int_equal(metas, 2);
	v = seen();
	assert_int_equal(v.calls, 3);
	assert_int_equal(v.read_offsets[1], 5); /* resumed where the first left off */
	assert_int_equal(v.read_offsets[2], 10);
	gaz_reader_free(r);
}

static void test_read_not_found(void **state)
{
	struct gaz_reader *r = reader(0, 0, false, false);
	struct gaz_status st = {0};
	int64_t t0;
	size_t n;

	(void)state;
	script_read(rs_not_found);
	assert_int_equal(gaz_reader_read(r, NULL, 0, &n, &st), GAZ_ENOTFOUND);
	assert_string_equal(st.msg, "journal \"a/journal\": JOURNAL_NOT_FOUND");
	gaz_reader_free(r);

	/* RetryReader: attempts 0..4, backoffs 50+50+100+100 ms. */
	gaz_status_clear(&st);
	seen_reset();
	r = reader(0, 0, true, false);
	t0 = gaz_mono_ns();
	assert_int_equal(gaz_reader_read(r, NULL, 0, &n, &st), GAZ_ENOTFOUND);
	assert_int_equal(seen().calls, 5);
	assert_true(gaz_mono_ns() - t0 >= 300 * GAZ_NS_PER_MS);
	gaz_reader_free(r);
}

static void test_read_end_offset(void **state)
{
	struct gaz_reader *r = reader(0, 5, true, false);
	struct gaz_status st = {0};
	char out[64];
	size_t len;
	int metas;

	(void)state;
	script_read(rs_retry); /* sends [0, 5) then ends the stream */
	assert_int_equal(drain(r, out, &len, &metas, &st), GAZ_EOF);
	assert_string_equal(out, "01234");
	assert_int_equal(seen().calls, 1);
	gaz_reader_free(r);
}

static void test_read_direct(void **state)
{
	struct gaz_reader *r = reader(4, 0, false, true);
	struct gaz_status st = {0};
	char path[256], out[64];
	size_t len;
	int metas, fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/frag.raw", g_root);
	assert_true((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0);
	assert_int_equal(write(fd, g_data, 20), 20);
	close(fd);
	script_read(rs_direct);
	assert_int_equal(drain(r, out, &len, &metas, &st), GAZ_EOF);
	assert_string_equal(out, "456789abcdefghij");
	assert_true(seen().read_dnp);
	assert_string_equal(gaz_reader_meta(r)->fragment_url, "file:///frag.raw");
	gaz_reader_free(r);
}

/* A do_not_proxy read told NOT_JOURNAL_BROKER restarts at the member's
 * endpoint (here the same server, through a second channel). */
static void test_read_not_member(void **state)
{
	struct gaz_reader *r = reader(0, 0, true, true);
	struct gaz_status st = {0};
	char out[64];
	size_t len;
	int metas;

	(void)state;
	script_read(rs_not_member);
	assert_int_equal(drain(r, out, &len, &metas, &st), GAZ_READ_TAIL);
	assert_string_equal(out, "0123456789");
	assert_int_equal(seen().calls, 3);
	assert_non_null(g_client->peers[0].endpoint);
	assert_string_equal(g_client->peers[0].endpoint, g_endpoint);
	assert_null(g_client->peers[1].endpoint);
	gaz_reader_free(r);
}

/* ---- Append tests --------------------------------------------------------------- */

static int as_ok(int n)
{
	(void)n;
	return PROTOCOL__STATUS__OK;
}

static int as_primary_then_ok(int n)
{
	return n == 0 ? PROTOCOL__STATUS__NOT_JOURNAL_PRIMARY_BROKER : PROTOCOL__STATUS__OK;
}

static int as_wrong_offset(int n)
{
	(void)n;
	return PROTOCOL__STATUS__WRONG_APPEND_OFFSET;
}

static void test_append_chunks(void **state)
{
	size_t len = 2 * GAZ_APPEND_CHUNK_MAX + GAZ_APPEND_CHUNK_MAX / 2;
	char *buf = calloc(1, len);
	struct gaz_append_opts o = {.journal = J};
	struct gaz_append_src src = {.buf = buf, .len = len, .fd = -1};
	Protocol__AppendResponse *resp = NULL;
	struct gaz_status st = {0};
	struct seen v;

	(void)state;
	script_append(as_ok);
	assert_int_equal(gaz_client_append(g_client, &o, &src, &resp, &st), 0);
	v = seen();
	assert_string_equal(v.append_journal, J);
	assert_int_equal(v.nchunks, 3);
	assert_int_equal(v.chunks[0], GAZ_APPEND_CHUNK_MAX);
	assert_int_equal(v.chunks[2], GAZ_APPEND_CHUNK_MAX / 2);
	assert_true(v.commit_seen);
	assert_int_equal(resp->commit->end, (int64_t)len);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	free(buf);
}

static void test_append_retry(void **state)
{
	struct gaz_append_opts o = {.journal = J};
	struct gaz_append_src src = {.buf = "hello", .len = 5, .fd = -1};
	struct gaz_status st = {0};
	int p[2];

	(void)state;
	script_append(as_primary_then_ok);
	assert_int_equal(gaz_client_append(g_client, &o, &src, NULL, &st), 0);
	assert_int_equal(seen().calls, 2);

	/* A pipe cannot be read again: no retry. */
	seen_reset();
	assert_int_equal(pipe(p), 0);
	assert_int_equal(write(p[1], "hello", 5), 5);
	close(p[1]);
	src.fd = p[0];
	assert_int_equal(gaz_client_append(g_client, &o, &src, NULL, &st), GAZ_EUNAVAIL);
	assert_string_equal(st.msg, "journal \"a/journal\": NOT_JOURNAL_PRIMARY_BROKER");
	assert_int_equal(seen().calls, 1);
	close(p[0]);
}

static void test_append_status_and_abort(void **state)
{
	struct gaz_append_opts o = {.journal = J, .offset = 7};
	Protocol__AppendResponse *resp = NULL;
	struct gaz_appender *a;
	struct gaz_status st = {0};

	(void)state;
	script_append(as_wrong_offset);
	assert_int_equal(gaz_appender_begin(g_client, &o, &a, &st), 0);
	assert_int_equal(gaz_appender_write(a, "abc", 3, &st), 0);
	assert_int_equal(gaz_appender_commit(a, &resp, &st), GAZ_ERANGE);
	assert_string_equal(st.msg, "journal \"a/journal\": WRONG_APPEND_OFFSET");
	assert_int_equal(resp->status, PROTOCOL__STATUS__WRONG_APPEND_OFFSET);
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	assert_int_equal(gaz_appender_begin(g_client, &o, &a, &st), 0);
	assert_int_equal(gaz_appender_write(a, "abc", 3, &st), 0);
	gaz_appender_abort(a);
	assert_true(seen().aborted);

	/* Invalid requests never reach the broker. */
	gaz_status_clear(&st);
	o.journal = "/abs";
	assert_int_equal(gaz_appender_begin(g_client, &o, &a, &st), GAZ_EINVAL);
	assert_non_null(strstr(st.msg, "invalid AppendRequest: Journal"));
}

/* ---- List, Apply, ListFragments --------------------------------------------------- */

static void test_list(void **state)
{
	Protocol__ListResponse *resp = NULL;
	struct gaz_status st = {0};

	(void)state;
	script_list(0);
	assert_int_equal(gaz_client_list(g_client, NULL, &resp, &st), 0);
	assert_int_equal(resp->n_journals, 3);
	assert_string_equal(resp->journals[2]->spec->name, "a/two");
	assert_int_equal(resp->header->etcd->revision, 3);
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	script_list(1);
	assert_int_equal(gaz_client_list(g_client, NULL, &resp, &st), GAZ_EPROTO);
	assert_string_equal(st.msg, "unexpected empty ListResponse.Journals in unary listing");
	assert_null(resp);

	gaz_status_clear(&st);
	script_list(2);
	assert_int_equal(gaz_client_list(g_client, NULL, &resp, &st), GAZ_EPROTO);
	assert_non_null(strstr(st.msg, "validating broker response: Journals[1].Spec"));
}

static void test_apply_batches(void **state)
{
	Protocol__ApplyRequest req = PROTOCOL__APPLY_REQUEST__INIT;
	Protocol__ApplyRequest__Change ch[5], *p[5];
	struct gaz_status st = {0};
	struct seen v;
	int64_t rev = 0;
	int status = -1;

	(void)state;
	for (int i = 0; i < 5; i++) {
		protocol__apply_request__change__init(&ch[i]);
		ch[i].delete_ = "a/journal";
		ch[i].expect_mod_revision = -1;
		p[i] = &ch[i];
	}
	req.n_changes = 5;
	req.changes = p;
	script_apply(0);
	assert_int_equal(gaz_client_apply(g_client, &req, 2, &rev, &status, &st), 0);
	v = seen();
	assert_int_equal(v.napply, 3);
	assert_int_equal(v.apply_sizes[0], 2);
	assert_int_equal(v.apply_sizes[2], 1);
	assert_int_equal(rev, 12);

	script_apply(PROTOCOL__STATUS__ETCD_TRANSACTION_FAILED);
	assert_int_equal(gaz_client_apply(g_client, &req, 0, &rev, &status, &st), GAZ_EEXIST);
	assert_string_equal(st.msg, "ETCD_TRANSACTION_FAILED");
	assert_int_equal(status, PROTOCOL__STATUS__ETCD_TRANSACTION_FAILED);
}

static void test_fragments_paging(void **state)
{
	struct gaz_fragments_opts o = {.journal = J, .signature_ttl_ns = GAZ_NS_PER_S};
	Protocol__FragmentsResponse *resp = NULL;
	struct gaz_status st = {0};
	struct seen v;

	(void)state;
	assert_int_equal(gaz_client_list_fragments(g_client, &o, &resp, &st), 0);
	assert_int_equal(resp->n_fragments, 3);
	assert_int_equal(resp->fragments[2]->spec->begin, 20);
	v = seen();
	assert_int_equal(v.nfrag, 3);
	assert_int_equal(v.frag_tokens[1], 10);
	assert_int_equal(v.frag_tokens[2], 20);
	assert_int_equal(resp->next_page_token, 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	o.end_mod_time = 1;
	o.begin_mod_time = 2;
	assert_int_equal(gaz_client_list_fragments(g_client, &o, &resp, &st), GAZ_EINVAL);
}

/* ---- fixture ---------------------------------------------------------------------- */

/* Each test gets its own scripted broker and client: a call a test leaves
 * in flight (a read-ahead cancelled by gaz_reader_free may still reach
 * the server) lands on that test's server, which is freed with it, and
 * never counts as a call of the next test. */
static int setup(void **state)
{
	struct gaz_client_opts o = {0};
	struct gaz_status st = {0};
	char addr[64];
	int port = 0;

	(void)state;
	seen_reset();
	if (!(g_srv = gaz_rpc_server_new(NULL)))
		return -1;
	gaz_rpc_server_register(g_srv, P("Read"), h_read, NULL);
	gaz_rpc_server_register(g_srv, P("Append"), h_append, NULL);
	gaz_rpc_server_register(g_srv, P("List"), h_list, NULL);
	gaz_rpc_server_register(g_srv, P("Apply"), h_apply, NULL);
	gaz_rpc_server_register(g_srv, P("ListFragments"), h_fragments, NULL);
	if (gaz_rpc_server_start(g_srv, "127.0.0.1:0", &port))
		return -1;
	snprintf(addr, sizeof(addr), "http://127.0.0.1:%d", port);
	snprintf(g_endpoint, sizeof(g_endpoint), "http://127.0.0.1:%d", port);
	o.broker_address = addr;
	o.file_root = g_root;
	return gaz_client_new(&o, &g_client, &st);
}

/* teardown frees the client (joining its read-ahead threads), then the
 * server (which waits for its handlers). */
static int teardown(void **state)
{
	(void)state;
	gaz_client_free(g_client);
	g_client = NULL;
	gaz_rpc_server_free(g_srv);
	g_srv = NULL;
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	init_header();
	return !mkdtemp(g_root) || gaz_rpc_init(1) ? -1 : 0;
}

static int group_teardown(void **state)
{
	char cmd[128];

	(void)state;
	gaz_rpc_shutdown();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g_root);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_read_basic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_jump_tail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_invalid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_retry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_not_found, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_end_offset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_direct, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_not_member, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_ahead_many, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_ahead_free, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_ahead_fetch_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_append_chunks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_append_retry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_append_status_and_abort, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_apply_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fragments_paging, setup, teardown),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
