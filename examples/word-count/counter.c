/*
 * counter.c - word-count's counter in C (Gazette's examples/word-count
 * Counter at v0.103.0) on the gazette-c consumer runtime:
 *
 *   word-count-counter serve [runconsumer flags] --wordcount.N N \
 *       --wordcount.postgres CONNINFO
 *
 * At start it lists the journals labelled app.gazette.dev/message-type=
 * word_count.NGramCount (the deltas partitions, polled every second),
 * waiting until there is one, and serves word_count.NGram beside
 * consumer.Shard on its port:
 *   Publish  splits the text into N-grams (word_count.h: Gazette's words
 *            and padding) and publishes each as NGramCount{n_gram,
 *            count 1}, committed, to the partition the modulo of its bytes
 *            picks; answers once every append committed (Gazette's).
 *   Query    the shard asked for, or when none the first shard reading
 *            the partition the prefix maps to; proxied to its primary when
 *            that is another member; else every (n_gram, count) of the
 *            shard's store whose n_gram starts with the prefix, in byte
 *            order of the n_grams (Gazette's RocksDB iteration).
 * Its shards read NGramCounts (fixed protobuf frames) from their deltas
 * partitions and keep each N-gram's total in PostgreSQL, committed with
 * the shard's checkpoint: exactly once, through the store's fence.
 *
 * The table:
 *   word_counts (shard TEXT: the shard's FQN, ngram BYTEA, count BIGINT,
 *                PRIMARY KEY (shard, ngram))
 * bytea keeps an N-gram's bytes and their order whatever the database's
 * encoding and collation. A transaction's counts are summed in memory per
 * N-gram (a shard's delta cache) and added to the table at finalize in
 * one upsert; so no count is read to change it (Gazette's counter reads
 * each N-gram's count from RocksDB on a cache miss and writes the total).
 * A count held as BIGINT fails its transaction past 2^63 - 1, where
 * Gazette's uint64 would run on.
 *
 * Locking: counter.pub_mu guards the publisher, which every Publish call
 * shares (a gaz_publisher is not thread-safe). The rest of `counter` is
 * set by init before the server starts and read-only until stop. A
 * shard's delta cache belongs to its thread (consume, finalize,
 * finished); Query reads only the store it borrowed from the runtime
 * (gaz_consumer_resolve), between the shard's transactions.
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "gazette/append_service.h"
#include "gazette/runtime.h"
#include "gazette/store.h"
#include "rpc/rpc.h"
#include "word_count.h"

/* Gazette's labels.MessageType of the deltas partitions. */
#define DELTAS_SELECTOR "app.gazette.dev/message-type=word_count.NGramCount"
/* How often the partitions are listed again (Gazette watches them). */
#define PARTITIONS_POLL_MS 1000
/* How often Publish looks whether its caller went away while it waits. */
#define APPEND_WAIT_SLICE_MS 200

static struct {
	int64_t n;            /* --wordcount.N */
	char *postgres;       /* --wordcount.postgres */
	struct gaz_message_type type;
	struct gaz_partitions *parts;
	struct gaz_append_service *appends;
	pthread_mutex_t pub_mu; /* guards pub */
	struct gaz_publisher *pub;
} counter = {.pub_mu = PTHREAD_MUTEX_INITIALIZER};

static const struct gaz_flag counter_flags[] = {
	{.name = "wordcount.N", .type = GAZ_FLAG_INT64, .help = "Number of grams per N-gram",
	 .ptr = &counter.n, .group = "WordCount", .ini_name = "N"},
	{.name = "wordcount.postgres", .env = "WORDCOUNT_POSTGRES", .type = GAZ_FLAG_STRING, .def = "",
	 .help = "libpq conninfo of the PostgreSQL database holding the shards' counts and checkpoints",
	 .ptr = &counter.postgres, .group = "WordCount"},
	{0},
};

/* context: rc with `what` before the reason a callee gave in *st. */
static int context(struct gaz_status *st, int rc, const char *what)
{
	gaz_status_set(st, rc, "%s", gaz_err_str(rc)); /* when the callee gave none */
	gaz_status_prefix(st, "%s: ", what);
	return rc;
}

/* ---- a shard's delta cache: this transaction's count of each N-gram ------- */

struct cache {
	char **ngram;     /* open addressing by FNV-1a; NULL: free slot */
	uint64_t *delta;
	size_t cap, n;
};

static void cache_clear(struct cache *c)
{
	for (size_t i = 0; i < c->cap; i++) {
		free(c->ngram[i]);
		c->ngram[i] = NULL;
	}
	c->n = 0;
}

static void cache_free(void *p)
{
	struct cache *c = p;

	if (!c)
		return;
	cache_clear(c);
	free(c->ngram);
	free(c->delta);
	free(c);
}

static size_t cache_slot(const struct cache *c, const char *ngram)
{
	size_t i = gaz_fnv1a32(ngram, strlen(ngram)) & (c->cap - 1);

	while (c->ngram[i] && strcmp(c->ngram[i], ngram))
		i = (i + 1) & (c->cap - 1);
	return i;
}

static int cache_grow(struct cache *c)
{
	struct cache next = {.cap = c->cap ? c->cap * 2 : 1024};

	if (!(next.ngram = calloc(next.cap, sizeof(*next.ngram))) ||
	    !(next.delta = calloc(next.cap, sizeof(*next.delta)))) {
		free(next.ngram);
		return GAZ_ENOMEM;
	}
	for (size_t i = 0; i < c->cap; i++) {
		if (!c->ngram[i])
			continue;
		size_t k = cache_slot(&next, c->ngram[i]);
		next.ngram[k] = c->ngram[i];
		next.delta[k] = c->delta[i];
		next.n++;
	}
	free(c->ngram);
	free(c->delta);
	*c = next;
	return 0;
}

static int cache_add(struct cache *c, const char *ngram, uint64_t count)
{
	if ((c->n + 1) * 2 > c->cap && cache_grow(c))
		return GAZ_ENOMEM;
	size_t i = cache_slot(c, ngram);
	if (!c->ngram[i]) {
		if (!(c->ngram[i] = strdup(ngram)))
			return GAZ_ENOMEM;
		c->delta[i] = 0;
		c->n++;
	}
	c->delta[i] += count;
	return 0;
}

/* ---- the store's table --------------------------------------------------------- */

static int exec_ok(PGconn *pg, PGresult *r, ExecStatusType want, const char *what, struct gaz_status *st)
{
	int rc = PQresultStatus(r) == want ? 0 : gaz_status_set(st, GAZ_EIO, "%s: %s", what, PQerrorMessage(pg));
	PQclear(r);
	return rc;
}

static int put_hex(struct word_count_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	char two[2];
	int rc = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p && !rc; p++) {
		two[0] = hex[*p >> 4], two[1] = hex[*p & 15];
		rc = word_count_buf_put(b, two, 2);
	}
	return rc;
}

/* store_deltas adds the cached deltas to the table in one upsert, the
 * rows as two array parameters (text forms of bytea[] and bigint[]). */
static int store_deltas(PGconn *pg, const char *shard, const struct cache *c, struct gaz_status *st)
{
	struct word_count_buf ngrams = {0}, counts = {0};
	char num[32];
	int rc = 0;

	if (!c->n)
		return 0;
	rc = word_count_buf_put(&ngrams, "{", 1) || word_count_buf_put(&counts, "{", 1);
	for (size_t i = 0, first = 1; i < c->cap && !rc; i++) {
		if (!c->ngram[i])
			continue;
		int n = snprintf(num, sizeof num, "%s%lld", first ? "" : ",", (long long)(int64_t)c->delta[i]);
		rc = word_count_buf_put(&ngrams, first ? "\"\\\\x" : ",\"\\\\x", first ? 4 : 5) ||
		     put_hex(&ngrams, c->ngram[i]) || word_count_buf_put(&ngrams, "\"", 1) ||
		     word_count_buf_put(&counts, num, (size_t)n);
		first = 0;
	}
	rc = rc || word_count_buf_put(&ngrams, "}", 1) || word_count_buf_put(&counts, "}", 1);
	if (rc) {
		rc = gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	} else {
		const char *params[3] = {shard, ngrams.p, counts.p};
		rc = exec_ok(pg,
			     PQexecParams(pg,
					  "INSERT INTO word_counts (shard, ngram, count) "
					  "SELECT $1, * FROM unnest($2::bytea[], $3::bigint[]) "
					  "ON CONFLICT (shard, ngram) DO UPDATE SET count = word_counts.count + EXCLUDED.count",
					  3, NULL, params, NULL, NULL, 0),
			     PGRES_COMMAND_OK, "writing counts", st);
	}
	word_count_buf_release(&ngrams);
	word_count_buf_release(&counts);
	return rc;
}

/* ---- the consumer application ---------------------------------------------------- */

static int new_store(void *arg, struct gaz_shard *shard, struct gaz_store **out, struct gaz_status *st)
{
	struct cache *c = NULL;

	(void)arg;
	if (!(*out = gaz_pg_store_open(counter.postgres, gaz_shard_fqn(shard), st)))
		return st->code ? st->code : GAZ_EIO;
	int rc = gaz_pg_store_create_table(*out, "word_counts",
					   "CREATE TABLE IF NOT EXISTS word_counts (shard TEXT NOT NULL, ngram BYTEA NOT NULL, "
					   "count BIGINT NOT NULL, PRIMARY KEY (shard, ngram))",
					   st);
	if (rc || !(c = calloc(1, sizeof(*c))) || cache_grow(c)) {
		free(c);
		(*out)->ops->close(*out);
		*out = NULL;
		return rc ? rc : gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	gaz_shard_set_state(shard, c, cache_free);
	return 0;
}

static int consume(void *arg, struct gaz_shard *shard, struct gaz_store *store, const struct gaz_envelope *env,
		   struct gaz_publisher *pub, struct gaz_status *st)
{
	const WordCount__NGramCount *m = env->msg;

	(void)arg, (void)store, (void)pub;
	if (gaz_uuid_flags(&env->uuid) == GAZ_FLAG_ACK_TXN)
		return 0;
	if (cache_add(gaz_shard_state(shard), m->n_gram, m->count))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	return 0;
}

static int finalize(void *arg, struct gaz_shard *shard, struct gaz_store *store, struct gaz_publisher *pub,
		    struct gaz_status *st)
{
	(void)arg, (void)pub;
	return store_deltas(gaz_pg_store_conn(store), gaz_shard_fqn(shard), gaz_shard_state(shard), st);
}

/* Committed or not, the transaction's deltas are done with: added to the
 * table, or rolled back with the shard's failed transaction. */
static void finished(void *arg, struct gaz_shard *shard, struct gaz_store *store, int rc)
{
	struct cache *c = gaz_shard_state(shard);

	(void)arg, (void)store, (void)rc;
	if (c)
		cache_clear(c);
}

/* ---- the mapping: an N-gram's bytes, modulo the partitions ------------------------ */

static int map_ngram(const void *msg, void *arg, struct gaz_mapped *out, struct gaz_status *st)
{
	const WordCount__NGramCount *m = msg;
	int rc = gaz_map_modulo(counter.parts, m->n_gram, strlen(m->n_gram), out, st);

	if (!rc && arg) /* the journal it went to */
		memcpy(arg, out->journal, sizeof(out->journal));
	return rc;
}

/* ---- Publish ------------------------------------------------------------------------- */

/* The last append of each journal a Publish call appended to: appends
 * of a journal commit in order, and a failed one fails every later one. */
struct pending {
	char (*journal)[GAZ_MESSAGE_JOURNAL_MAX + 1];
	struct gaz_append_handle **h;
	size_t n, cap;
};

static int pending_put(struct pending *p, const char *journal, struct gaz_append_handle *h)
{
	for (size_t i = 0; i < p->n; i++) {
		if (!strcmp(p->journal[i], journal)) {
			gaz_append_handle_free(p->h[i]);
			p->h[i] = h;
			return 0;
		}
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 8;
		void *j = realloc(p->journal, cap * sizeof(*p->journal));
		if (j)
			p->journal = j;
		void *hs = j ? realloc(p->h, cap * sizeof(*p->h)) : NULL;
		if (!hs) {
			gaz_append_handle_free(h);
			return GAZ_ENOMEM;
		}
		p->h = hs;
		p->cap = cap;
	}
	snprintf(p->journal[p->n], sizeof(p->journal[p->n]), "%s", journal);
	p->h[p->n++] = h;
	return 0;
}

static void pending_release(struct pending *p)
{
	for (size_t i = 0; i < p->n; i++)
		gaz_append_handle_free(p->h[i]);
	free(p->journal);
	free(p->h);
}

/* Waits for every pending append, a slice at a time while the caller is
 * still there. 0, GAZ_ECANCELLED, or the first append's error. */
static int pending_wait(struct pending *p, struct gaz_rpc_call *call, struct gaz_status *st)
{
	for (size_t i = 0; i < p->n; i++) {
		int rc;
		while ((rc = gaz_append_handle_wait(p->h[i], APPEND_WAIT_SLICE_MS, NULL, st)) == GAZ_ETIMEDOUT)
			if (gaz_rpc_cancelled(call))
				return gaz_status_set(st, GAZ_ECANCELLED, "the caller went away");
		if (rc) {
			char what[GAZ_MESSAGE_JOURNAL_MAX + 32];
			snprintf(what, sizeof(what), "appending to %s", p->journal[i]);
			return context(st, rc, what);
		}
	}
	return 0;
}

/* Publishes the N-grams of `words`, each committed with a count of 1. */
static int publish_ngrams(const struct word_count_words *words, struct pending *p, struct gaz_status *st)
{
	WordCount__NGramCount m = WORD_COUNT__NGRAM_COUNT__INIT;
	struct word_count_buf ngram = {0};
	char journal[GAZ_MESSAGE_JOURNAL_MAX + 1];
	int rc = 0;

	m.count = 1;
	for (size_t i = 0; i < word_count_ngrams(words, (size_t)counter.n) && !rc; i++) {
		struct gaz_append_handle *h = NULL;
		if ((rc = word_count_ngram(words, (size_t)counter.n, i, &ngram))) {
			rc = gaz_status_set(st, rc, "out of memory");
			break;
		}
		m.n_gram = ngram.p;
		pthread_mutex_lock(&counter.pub_mu);
		rc = gaz_publish_committed(counter.pub, map_ngram, journal, &m, &h, st);
		pthread_mutex_unlock(&counter.pub_mu);
		if (!rc && (rc = pending_put(p, journal, h)))
			gaz_status_set(st, rc, "out of memory");
	}
	free(m.uuid.data);
	word_count_buf_release(&ngram);
	return rc;
}

static void handle_publish(void *arg, struct gaz_consumer *c, struct gaz_rpc_call *call)
{
	WordCount__PublishRequestBytes *req = NULL;
	WordCount__PublishResponse resp = WORD_COUNT__PUBLISH_RESPONSE__INIT;
	struct word_count_words words = {0};
	struct pending p = {0};
	struct gaz_status st = {0};
	int rc;

	(void)arg, (void)c;
	if (gaz_rpc_recv_request(call, &word_count__publish_request_bytes__descriptor, (ProtobufCMessage **)&req,
				 "PublishRequest"))
		return;
	if ((rc = word_count_split((const char *)req->text.data, req->text.len, &words)))
		gaz_status_set(&st, rc, "out of memory");
	else if (!(rc = publish_ngrams(&words, &p, &st)))
		rc = pending_wait(&p, call, &st);
	/* Gazette's errors are plain: UNKNOWN with the text. */
	if (rc)
		gaz_rpc_finish(call, NULL, rc == GAZ_ECANCELLED ? GAZ_GRPC_CANCELLED : GAZ_GRPC_UNKNOWN, st.msg);
	else
		gaz_rpc_finish(call, &resp.base, GAZ_GRPC_OK, NULL);
	pending_release(&p);
	word_count_words_release(&words);
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* ---- Query --------------------------------------------------------------------------- */

/* The least byte string above every string starting with prefix[0..len):
 * the prefix without its trailing 0xFF bytes, its last byte plus one.
 * *out_len 0 when there is none (the prefix is empty or all 0xFF). */
static void prefix_end(const char *prefix, size_t len, char *out, size_t *out_len)
{
	while (len && (unsigned char)prefix[len - 1] == 0xFF)
		len--;
	memcpy(out, prefix, len);
	if (len)
		out[len - 1] = (char)((unsigned char)out[len - 1] + 1);
	*out_len = len;
}

static void query_response_free(WordCount__QueryResponse *resp)
{
	for (size_t i = 0; i < resp->n_grams; i++) {
		free(resp->grams[i]->n_gram);
		free(resp->grams[i]);
	}
	free(resp->grams);
}

static uint64_t be64(const char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | (unsigned char)p[i];
	return v;
}

/* Every (ngram, count) of the shard in the store with ngram starting
 * with `prefix`, in byte order (bytea compares as memcmp). An empty
 * prefix starts at 0x01, as Gazette's iteration skips RocksDB's meta
 * keys. */
static int query_store(struct gaz_store *store, const char *shard, const char *prefix, WordCount__QueryResponse *resp,
		       struct gaz_status *st)
{
	PGconn *pg = gaz_pg_store_conn(store);
	size_t plen = strlen(prefix), elen = 0;
	char *end = malloc(plen + 1);
	int rc = 0;

	if (!end)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	prefix_end(prefix, plen, end, &elen);
	const char *params[3] = {shard, plen ? prefix : "\x01", end};
	int lens[3] = {0, plen ? (int)plen : 1, (int)elen}, fmts[3] = {0, 1, 1};
	PGresult *r = PQexecParams(pg,
				   elen ? "SELECT ngram, count FROM word_counts WHERE shard = $1 AND ngram >= $2 "
					  "AND ngram < $3 ORDER BY ngram"
					: "SELECT ngram, count FROM word_counts WHERE shard = $1 AND ngram >= $2 ORDER BY ngram",
				   elen ? 3 : 2, NULL, params, lens, fmts, 1);
	free(end);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return exec_ok(pg, r, PGRES_TUPLES_OK, "reading counts", st);
	int rows = PQntuples(r);
	if (rows && !(resp->grams = calloc((size_t)rows, sizeof(*resp->grams))))
		rc = gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	for (int i = 0; i < rows && !rc; i++) {
		WordCount__NGramCount *g = malloc(sizeof(*g));
		char *ngram = g ? strndup(PQgetvalue(r, i, 0), (size_t)PQgetlength(r, i, 0)) : NULL;
		if (!ngram || PQgetlength(r, i, 1) != 8) {
			free(g);
			rc = gaz_status_set(st, ngram ? GAZ_EIO : GAZ_ENOMEM, ngram ? "reading counts: not a bigint" : "out of memory");
			free(ngram);
			break;
		}
		word_count__ngram_count__init(g);
		g->n_gram = ngram;
		g->count = be64(PQgetvalue(r, i, 1));
		resp->grams[resp->n_grams++] = g;
	}
	PQclear(r);
	return rc;
}

/* Query's shard when the request names none: the first shard reading
 * the partition the prefix maps to (Gazette's mapNGramToShard). */
static int shard_of_prefix(struct gaz_consumer *c, const char *prefix, char **shard, struct gaz_status *st)
{
	WordCount__NGramCount m = WORD_COUNT__NGRAM_COUNT__INIT;
	struct gaz_mapped to;
	int rc;

	m.n_gram = (char *)prefix;
	if ((rc = map_ngram(&m, NULL, &to, st)))
		return rc;
	if ((rc = gaz_consumer_shard_with_source(c, to.journal, shard, st)) == GAZ_ENOTFOUND) {
		gaz_status_clear(st); /* Gazette's words */
		return gaz_status_set(st, rc, "no ShardSpec is consuming mapped journal %s", to.journal);
	}
	return rc;
}

static void handle_query(void *arg, struct gaz_consumer *c, struct gaz_rpc_call *call)
{
	WordCount__QueryRequest *req = NULL;
	WordCount__QueryResponse resp = WORD_COUNT__QUERY_RESPONSE__INIT;
	struct gaz_consumer_resolution res = {0};
	struct gaz_status st = {0};
	char *shard = NULL;
	int rc;

	(void)arg;
	if (gaz_rpc_recv_request(call, &word_count__query_request__descriptor, (ProtobufCMessage **)&req, "QueryRequest"))
		return;
	if (!req->shard[0] && (rc = shard_of_prefix(c, req->prefix, &shard, &st)))
		goto fail;
	if ((rc = gaz_consumer_resolve(c, call, shard ? shard : req->shard, req->header, &res, &st)))
		goto fail;
	if (res.status != CONSUMER__STATUS__OK) {
		/* Gazette answers the status's name as the error. */
		const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&consumer__status__descriptor,
										  (int)res.status);
		gaz_rpc_finish(call, NULL, GAZ_GRPC_UNKNOWN, v ? v->name : "unknown status");
	} else if (!res.store) {
		/* The primary answers for the shard we resolved (Gazette's
		 * request carries the shard it mapped). */
		char *asked = req->shard;
		req->shard = shard ? shard : asked;
		gaz_consumer_proxy(call, &res, "/word_count.NGram/Query", &req->base, &req->header,
				   &word_count__query_response__descriptor);
		req->shard = asked;
	} else if ((rc = query_store(res.store, gaz_shard_fqn(res.shard), req->prefix, &resp, &st))) {
		goto fail;
	} else {
		gaz_rpc_finish(call, &resp.base, GAZ_GRPC_OK, NULL);
	}
	goto out;
fail:
	gaz_rpc_finish(call, NULL, rc == GAZ_ECANCELLED ? GAZ_GRPC_CANCELLED : GAZ_GRPC_UNKNOWN,
		       st.msg[0] ? st.msg : gaz_err_str(rc));
out:
	query_response_free(&resp);
	gaz_consumer_resolution_release(&res);
	free(shard);
	protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* ---- init and stop ---------------------------------------------------------------- */

static void stop(void *arg, struct gaz_consumer *c)
{
	(void)arg, (void)c;
	gaz_publisher_free(counter.pub);
	gaz_append_service_free(counter.appends);
	gaz_partitions_free(counter.parts);
	counter.pub = NULL, counter.appends = NULL, counter.parts = NULL;
}

/* Gazette's InitApplication: the deltas partitions, waited for, and the
 * publisher of Publish. */
static int init(void *arg, struct gaz_consumer *c, struct gaz_status *st)
{
	struct gaz_publisher_opts po = {.type = &counter.type};
	int rc;

	if (counter.n == 0)
		return gaz_status_set(st, GAZ_EINVAL, "--wordcount.N must be specified");
	if (counter.n < 0)
		return gaz_status_set(st, GAZ_EINVAL, "--wordcount.N must be positive (got %lld)", (long long)counter.n);
	if (!counter.postgres[0])
		return gaz_status_set(st, GAZ_EINVAL, "--wordcount.postgres is required");
	if ((rc = gaz_partitions_new(gaz_consumer_client(c), DELTAS_SELECTOR, PARTITIONS_POLL_MS, &counter.parts, st)))
		return context(st, rc, "building NGramDeltaMapping");
	for (int i = 0; !rc && gaz_partitions_count(counter.parts) == 0; i++) {
		if (i % 10 == 0)
			gaz_info("waiting for delta partitions to be created", "selector=%s", DELTAS_SELECTOR);
		if (gaz_consumer_sleep(c, 500))
			rc = gaz_status_set(st, GAZ_ECANCELLED, "signalled while waiting for delta partitions");
	}
	if (!rc && !(rc = gaz_append_service_new(gaz_consumer_client(c), NULL, &counter.appends, st))) {
		po.appends = counter.appends;
		rc = gaz_publisher_new(&po, &counter.pub, st);
	}
	if (rc) {
		gaz_client_cancel(gaz_consumer_client(c));
		stop(arg, c);
	}
	return rc;
}

int main(int argc, char **argv)
{
	static const struct gaz_consumer_method methods[] = {
		{"/word_count.NGram/Publish", handle_publish},
		{"/word_count.NGram/Query", handle_query},
		{NULL, NULL},
	};
	static struct gaz_consumer_app app = {
		.name = "word-count",
		.flags = counter_flags,
		.methods = methods,
		.init = init,
		.stop = stop,
		.new_store = new_store,
		.consume = consume,
		.finalize = finalize,
		.finished = finished,
	};

	counter.type = word_count_ngram_count_type();
	app.type = &counter.type;
	return gaz_consumer_main(&app, argc, argv);
}
