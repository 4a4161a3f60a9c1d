/*
 * summer.c - stream-sum's summer in C (Gazette's examples/stream-sum
 * Summer) on the gazette-c consumer runtime: each shard reads Chunks from
 * its source journals, keeps every stream's running CRC-64 in PostgreSQL
 * (committed with the shard's checkpoint, in the same transaction), and
 * when a stream's last (empty) chunk arrives publishes its final Sum to
 * examples/stream-sum/sums inside the transaction. Gazette's chunker
 * (or ours, bin/stream-sum-chunker) verifies every sum.
 *
 *   stream-sum-summer serve [runconsumer flags] --summer.postgres CONNINFO
 *
 * Its messages are byte-compatible with Gazette's (stream_sum.h), so
 * Gazette's summers and this one may serve the same chunk journals (not
 * the same shards: Gazette's keep SQLite/RocksDB stores on recovery logs,
 * this one PostgreSQL). A shard's label "store", when present, must be
 * "postgres", as Gazette's summer insists on a known store.
 *
 * A shard caches the sums of its open streams across transactions: read
 * from the table once (none is read for a stream's first chunk), changed
 * in memory, written back at finalize in one statement, and dropped once
 * a stream's final sum was committed. Only the shard's primary writes its
 * rows (the store's fence refuses any other), so the cache stays the
 * table's view until a transaction fails, which empties it. Gazette's
 * summer caches within a transaction only: its stores are local.
 * The table:
 *   stream_sums (shard TEXT, id BYTEA, seq_no BIGINT, value BIGINT: the
 *                uint64 sum's bits, PRIMARY KEY (shard, id))
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "gazette/runtime.h"
#include "gazette/store.h"
#include "protocol/labels.h"
#include "stream_sum.h"

static char *postgres;

static const struct gaz_flag summer_flags[] = {
	{.name = "summer.postgres", .env = "SUMMER_POSTGRES", .type = GAZ_FLAG_STRING, .def = "",
	 .help = "libpq conninfo of the PostgreSQL database holding the shards' sums and checkpoints",
	 .ptr = &postgres, .group = "Summer"},
	{0},
};

/* ---- a shard's cache of the current transaction's sums -------------------- */

struct cache {
	struct stream_sum_sum *slot; /* open addressing by stream id */
	bool *used;                  /* slot[i] holds a sum */
	bool *dirty;                 /* changed this transaction */
	bool *done;                  /* its final sum is in this transaction */
	size_t cap, n, n_dirty;
	bool any_done;               /* a stream ended this transaction */
};

static void cache_free(void *p)
{
	struct cache *c = p;
	if (!c)
		return;
	free(c->slot);
	free(c->used);
	free(c->dirty);
	free(c->done);
	free(c);
}

static uint64_t id_hash(const uint8_t *id)
{
	uint64_t h;
	memcpy(&h, id, sizeof(h)); /* stream ids are random bytes */
	return h;
}

static struct stream_sum_sum *cache_find(struct cache *c, const uint8_t *id, bool *found)
{
	size_t i = id_hash(id) & (c->cap - 1);

	while (c->used[i] && memcmp(c->slot[i].id, id, STREAM_SUM_ID_LEN))
		i = (i + 1) & (c->cap - 1);
	*found = c->used[i];
	return &c->slot[i];
}

/* cache_rebuild moves the sums into a table of `cap` slots (a power of
 * two), leaving out finished streams when `drop_done`. */
static int cache_rebuild(struct cache *c, size_t cap, bool drop_done)
{
	struct cache next = {.cap = cap};
	bool found;

	if (!(next.slot = calloc(cap, sizeof(*next.slot))) || !(next.used = calloc(cap, sizeof(*next.used))) ||
	    !(next.dirty = calloc(cap, sizeof(*next.dirty))) || !(next.done = calloc(cap, sizeof(*next.done)))) {
		free(next.slot), free(next.used), free(next.dirty);
		return GAZ_ENOMEM;
	}
	for (size_t i = 0; i < c->cap; i++) {
		if (!c->used[i] || (drop_done && c->done[i]))
			continue;
		struct stream_sum_sum *s = cache_find(&next, c->slot[i].id, &found);
		*s = c->slot[i];
		next.used[s - next.slot] = true;
		next.dirty[s - next.slot] = c->dirty[i];
		next.done[s - next.slot] = c->done[i];
		next.n++;
		next.n_dirty += c->dirty[i];
	}
	free(c->slot), free(c->used), free(c->dirty), free(c->done);
	*c = next;
	return 0;
}

static int cache_grow(struct cache *c)
{
	return cache_rebuild(c, c->cap ? c->cap * 2 : 256, false);
}

static void cache_clear(struct cache *c)
{
	memset(c->used, 0, c->cap * sizeof(*c->used));
	memset(c->dirty, 0, c->cap * sizeof(*c->dirty));
	memset(c->done, 0, c->cap * sizeof(*c->done));
	c->n = c->n_dirty = 0;
	c->any_done = false;
}

/* ---- the store's table ------------------------------------------------------ */

static int exec_ok(PGconn *pg, PGresult *r, ExecStatusType want, const char *what, struct gaz_status *st)
{
	int rc = PQresultStatus(r) == want ? 0 : gaz_status_set(st, GAZ_EIO, "%s: %s", what, PQerrorMessage(pg));
	PQclear(r);
	return rc;
}

/* The sum of stream `id` as the store has it (a new one when absent). */
static int load_sum(PGconn *pg, const char *shard, const uint8_t *id, struct stream_sum_sum *out, struct gaz_status *st)
{
	const char *params[2] = {shard, (const char *)id};
	int lens[2] = {0, STREAM_SUM_ID_LEN}, fmts[2] = {0, 1};
	PGresult *r = PQexecParams(pg, "SELECT seq_no, value FROM stream_sums WHERE shard = $1 AND id = $2", 2, NULL,
				   params, lens, fmts, 0);

	memset(out, 0, sizeof(*out));
	memcpy(out->id, id, STREAM_SUM_ID_LEN);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return exec_ok(pg, r, PGRES_TUPLES_OK, "reading a sum", st);
	if (PQntuples(r) == 1) {
		out->seq_no = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		out->value = (uint64_t)strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	}
	PQclear(r);
	return 0;
}

/* Appends text to a growing buffer. */
static int append(char **b, size_t *len, size_t *cap, const char *text, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t want = *cap ? *cap * 2 : 4096;
		while (want < *len + n + 1)
			want *= 2;
		char *p = realloc(*b, want);
		if (!p)
			return GAZ_ENOMEM;
		*b = p;
		*cap = want;
	}
	memcpy(*b + *len, text, n);
	*len += n;
	(*b)[*len] = '\0';
	return 0;
}

/* store_dirty writes every sum changed this transaction in one upsert, the
 * rows as three array parameters (text forms of bytea[] and bigint[]). */
static int store_dirty(PGconn *pg, const char *shard, struct cache *c, struct gaz_status *st)
{
	char *arr[3] = {0}, num[48];
	size_t len[3] = {0}, cap[3] = {0};
	int rc = 0;

	if (!c->n_dirty)
		return 0;
	for (int k = 0; k < 3 && !rc; k++)
		rc = append(&arr[k], &len[k], &cap[k], "{", 1);
	for (size_t i = 0, first = 1; i < c->cap && !rc; i++) {
		if (!c->used[i] || !c->dirty[i])
			continue;
		const struct stream_sum_sum *s = &c->slot[i];
		char hex[2 * STREAM_SUM_ID_LEN + 1];
		stream_sum_id_hex(s->id, hex);
		int n = snprintf(num, sizeof num, "%s\"\\\\x%s\"", first ? "" : ",", hex);
		rc = append(&arr[0], &len[0], &cap[0], num, (size_t)n);
		n = snprintf(num, sizeof num, "%s%lld", first ? "" : ",", (long long)s->seq_no);
		rc = rc ? rc : append(&arr[1], &len[1], &cap[1], num, (size_t)n);
		n = snprintf(num, sizeof num, "%s%lld", first ? "" : ",", (long long)(int64_t)s->value);
		rc = rc ? rc : append(&arr[2], &len[2], &cap[2], num, (size_t)n);
		first = 0;
	}
	for (int k = 0; k < 3 && !rc; k++)
		rc = append(&arr[k], &len[k], &cap[k], "}", 1);
	if (rc) {
		rc = gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	} else {
		const char *params[4] = {shard, arr[0], arr[1], arr[2]};
		rc = exec_ok(pg,
			     PQexecParams(pg,
					  "INSERT INTO stream_sums (shard, id, seq_no, value) "
					  "SELECT $1, * FROM unnest($2::bytea[], $3::bigint[], $4::bigint[]) "
					  "ON CONFLICT (shard, id) DO UPDATE SET seq_no = EXCLUDED.seq_no, value = EXCLUDED.value",
					  4, NULL, params, NULL, NULL, 0),
			     PGRES_COMMAND_OK, "writing sums", st);
	}
	free(arr[0]), free(arr[1]), free(arr[2]);
	return rc;
}

/* ---- the application ------------------------------------------------------------ */

static int init(void *arg, struct gaz_consumer *c, struct gaz_status *st)
{
	(void)arg, (void)c;
	if (!postgres[0])
		return gaz_status_set(st, GAZ_EINVAL, "--summer.postgres is required");
	return 0;
}

static int new_store(void *arg, struct gaz_shard *shard, struct gaz_store **out, struct gaz_status *st)
{
	const Consumer__ShardSpec *spec = gaz_shard_spec(shard);
	const char *kind = spec->labels ? gaz_labelset_value_of(spec->labels, "store") : NULL;
	struct cache *c = NULL;

	(void)arg;
	if (kind && kind[0] && strcasecmp(kind, "postgres") && strcasecmp(kind, "postgresql"))
		return gaz_status_set(st, GAZ_EINVAL, "expected ShardSpec label 'store' to be 'postgres' (got \"%s\")", kind);
	if (!(*out = gaz_pg_store_open(postgres, gaz_shard_fqn(shard), st)))
		return st->code ? st->code : GAZ_EIO;
	int rc = gaz_pg_store_create_table(*out, "stream_sums",
					   "CREATE TABLE IF NOT EXISTS stream_sums (shard TEXT NOT NULL, id BYTEA NOT NULL, "
					   "seq_no BIGINT NOT NULL, value BIGINT NOT NULL, PRIMARY KEY (shard, id))",
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
	const struct stream_sum_chunk *chunk = env->msg;
	struct cache *c = gaz_shard_state(shard);
	struct stream_sum_sum *sum;
	bool found, done = false;
	int rc;

	(void)arg;
	if (gaz_uuid_flags(&env->uuid) == GAZ_FLAG_ACK_TXN)
		return 0;
	if (c->n * 2 >= c->cap && cache_grow(c))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	sum = cache_find(c, chunk->id, &found);
	if (!found) {
		/* A stream's first chunk starts it: nothing to read. */
		if (chunk->seq_no == 1) {
			memset(sum, 0, sizeof(*sum));
			memcpy(sum->id, chunk->id, STREAM_SUM_ID_LEN);
		} else if ((rc = load_sum(gaz_pg_store_conn(store), gaz_shard_fqn(shard), chunk->id, sum, st))) {
			return rc;
		}
		c->used[sum - c->slot] = true;
		c->n++;
	}
	/* A chunk out of order is a broken stream (Gazette's summer exits). */
	if ((rc = stream_sum_update(sum, chunk, &done, st)))
		return rc;
	if (!c->dirty[sum - c->slot]) {
		c->dirty[sum - c->slot] = true;
		c->n_dirty++;
	}
	if (done) {
		struct stream_sum_sum out = *sum;
		out.has_uuid = false;
		if ((rc = gaz_publish_uncommitted(pub, stream_sum_final_sums_mapping, NULL, &out, NULL, st)))
			return rc;
		c->done[sum - c->slot] = true; /* dropped after the commit */
		c->any_done = true;
	}
	return 0;
}

static int finalize(void *arg, struct gaz_shard *shard, struct gaz_store *store, struct gaz_publisher *pub,
		    struct gaz_status *st)
{
	struct cache *c = gaz_shard_state(shard);

	(void)arg, (void)pub;
	return store_dirty(gaz_pg_store_conn(store), gaz_shard_fqn(shard), c, st);
}

/* Committed: the written sums are the table's, finished streams go. A
 * failed transaction's cache is stale: the next reads the table again. */
static void finished(void *arg, struct gaz_shard *shard, struct gaz_store *store, int rc)
{
	struct cache *c = gaz_shard_state(shard);

	(void)arg, (void)store;
	if (!c)
		return;
	if (rc || (c->any_done && cache_rebuild(c, c->cap, true))) {
		cache_clear(c);
		return;
	}
	memset(c->dirty, 0, c->cap * sizeof(*c->dirty));
	memset(c->done, 0, c->cap * sizeof(*c->done));
	c->n_dirty = 0;
	c->any_done = false;
}

int main(int argc, char **argv)
{
	static struct gaz_message_type chunks, sums;
	chunks = stream_sum_chunk_type();
	sums = stream_sum_sum_type();
	static struct gaz_consumer_app app = {
		.name = "stream-sum",
		.flags = summer_flags,
		.init = init,
		.new_store = new_store,
		.consume = consume,
		.finalize = finalize,
		.finished = finished,
	};
	app.type = &chunks;
	app.publish_type = &sums;
	return gaz_consumer_main(&app, argc, argv);
}
