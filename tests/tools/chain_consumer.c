/*
 * chain_consumer.c - a consumer application for the integration tests
 * (tests/integration/test_consumer.py): one link of a chain of consumers,
 * each of whose shards reads its sources' JSON messages read-committed
 * and republishes each one, inside its transaction, to the journal its
 * ShardSpec's label "chain.output" names, with "hops" incremented and
 * the shard's id appended to "path". Its store counts the messages each
 * shard consumed and the last id per source, committed with the
 * checkpoint, so a lost or repeated effect shows both downstream and in
 * the store.
 *
 *   chain-consumer serve [runconsumer flags] [--chain.store-dir DIR | --chain.postgres CONNINFO]
 *
 * ACKs are skipped. A message without "id" fails the shard (a test's bad
 * input). CHAIN_FAIL_AFTER=N makes every shard fail its N-th message
 * (a failed primary). CHAIN_SLOW_MS=N sleeps N ms per message.
 * CHAIN_HOLD=FILE holds each transaction in finalize while FILE exists,
 * after creating FILE.held (a test stops the process there: a zombie
 * that commits once it wakes).
 */
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "gazette/message.h"
#include "gazette/runtime.h"
#include "gazette/store.h"
#include "protocol/labels.h"

static char *store_dir, *postgres;
static long fail_after, slow_ms;

static const struct gaz_flag chain_flags[] = {
	{.name = "chain.store-dir", .env = "CHAIN_STORE_DIR", .type = GAZ_FLAG_STRING, .def = "",
	 .help = "Directory of the shards' JSON-file stores", .ptr = &store_dir, .group = "Chain"},
	{.name = "chain.postgres", .env = "CHAIN_POSTGRES", .type = GAZ_FLAG_STRING, .def = "",
	 .help = "libpq conninfo of the shards' PostgreSQL store (instead of JSON files)", .ptr = &postgres,
	 .group = "Chain"},
	{0},
};

static int init(void *arg, struct gaz_consumer *c, struct gaz_status *st)
{
	const char *f = getenv("CHAIN_FAIL_AFTER"), *s = getenv("CHAIN_SLOW_MS");

	(void)arg, (void)c;
	fail_after = f ? atol(f) : 0;
	slow_ms = s ? atol(s) : 0;
	if (!store_dir[0] && !postgres[0])
		return gaz_status_set(st, GAZ_EINVAL, "one of --chain.store-dir or --chain.postgres is required");
	return 0;
}

static int new_store(void *arg, struct gaz_shard *shard, struct gaz_store **out, struct gaz_status *st)
{
	(void)arg;
	*out = postgres[0] ? gaz_pg_store_open(postgres, gaz_shard_fqn(shard), st)
			   : gaz_json_store_open(store_dir, gaz_shard_fqn(shard), st);
	if (!*out)
		return st->code ? st->code : GAZ_EIO;
	int rc = postgres[0] ? gaz_pg_store_create_table(*out, "chain_counts",
							 "CREATE TABLE IF NOT EXISTS chain_counts (shard TEXT PRIMARY KEY, "
							 "consumed BIGINT NOT NULL)",
							 st)
			     : 0;
	if (rc) {
		(*out)->ops->close(*out);
		*out = NULL;
	}
	return rc;
}

/* The output journal, chosen by the shard's label. */
static int to_output(const void *msg, void *arg, struct gaz_mapped *out, struct gaz_status *st)
{
	const char *journal = arg;

	(void)msg;
	if (!journal)
		return gaz_status_set(st, GAZ_EINVAL, "shard has no chain.output label");
	snprintf(out->journal, sizeof(out->journal), "%s", journal);
	out->framing = GAZ_FRAMING_JSON;
	return 0;
}

/* A shard's counts, in its gaz_shard_state: a transaction's callbacks
 * may run on different threads of the consumer's pool. The transaction's
 * count is kept in the JSON store's state or written to PostgreSQL at
 * finalize. */
struct counts {
	long txn_consumed; /* this transaction's messages */
	long total;        /* messages consumed since the shard started */
};

static struct counts *counts_of(struct gaz_shard *shard)
{
	struct counts *c = gaz_shard_state(shard);

	if (!c && (c = calloc(1, sizeof(*c))))
		gaz_shard_set_state(shard, c, free);
	return c;
}

static int begin_txn(void *arg, struct gaz_shard *shard, struct gaz_store *store, struct gaz_status *st)
{
	struct counts *c = counts_of(shard);

	(void)arg, (void)store;
	if (!c)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	c->txn_consumed = 0;
	return 0;
}

static int consume(void *arg, struct gaz_shard *shard, struct gaz_store *store, const struct gaz_envelope *env,
		   struct gaz_publisher *pub, struct gaz_status *st)
{
	json_t *in = env->msg, *id = json_object_get(in, "id");
	const Consumer__ShardSpec *spec = gaz_shard_spec(shard);
	struct counts *c = gaz_shard_state(shard); /* made by begin_txn */

	(void)arg;
	if (gaz_uuid_flags(&env->uuid) == GAZ_FLAG_ACK_TXN)
		return 0;
	if (!json_is_integer(id))
		return gaz_status_set(st, GAZ_EINVAL, "message at %s:%lld has no integer \"id\"", env->journal,
				      (long long)env->begin);
	if (fail_after && ++c->total >= fail_after)
		return gaz_status_set(st, GAZ_EIO, "failing as told after %ld messages (CHAIN_FAIL_AFTER)", fail_after);
	if (slow_ms)
		usleep((useconds_t)slow_ms * 1000);
	json_t *out = json_deep_copy(in);
	json_t *path = json_object_get(out, "path");
	if (!out)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	json_object_del(out, "_meta");
	json_object_set_new(out, "hops", json_integer(json_integer_value(json_object_get(in, "hops")) + 1));
	if (!json_is_array(path)) {
		path = json_array();
		json_object_set_new(out, "path", path);
	}
	json_array_append_new(path, json_string(spec->id));
	const char *output = gaz_labelset_value_of(spec->labels, "chain.output");
	int rc = gaz_publish_uncommitted(pub, to_output, (void *)output, out, NULL, st);
	json_decref(out);
	if (rc)
		return rc;
	c->txn_consumed++;
	if (!postgres[0]) {
		json_t *state = gaz_json_store_state(store);
		json_object_set_new(state, "consumed",
				    json_integer(json_integer_value(json_object_get(state, "consumed")) + 1));
	}
	return 0;
}

static int finalize(void *arg, struct gaz_shard *shard, struct gaz_store *store, struct gaz_publisher *pub,
		    struct gaz_status *st)
{
	const char *hold = getenv("CHAIN_HOLD");

	(void)arg, (void)pub;
	if (hold && access(hold, F_OK) == 0) {
		char held[4096];
		snprintf(held, sizeof(held), "%s.held", hold);
		FILE *f = fopen(held, "w");
		if (f)
			fclose(f);
		while (access(hold, F_OK) == 0)
			usleep(10 * 1000);
	}
	if (!postgres[0])
		return 0;
	PGconn *pg = gaz_pg_store_conn(store);
	char n[32];
	const char *params[2] = {gaz_shard_fqn(shard), n};
	snprintf(n, sizeof(n), "%ld", ((struct counts *)gaz_shard_state(shard))->txn_consumed);
	PGresult *r = PQexecParams(pg,
				   "INSERT INTO chain_counts (shard, consumed) VALUES ($1, $2) "
				   "ON CONFLICT (shard) DO UPDATE SET consumed = chain_counts.consumed + EXCLUDED.consumed",
				   2, NULL, params, NULL, NULL, 0);
	bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	return ok ? 0 : gaz_status_set(st, GAZ_EIO, "writing chain_counts: %s", PQerrorMessage(pg));
}

int main(int argc, char **argv)
{
	static const struct gaz_consumer_app app = {
		.name = "chain",
		.flags = chain_flags,
		.init = init,
		.new_store = new_store,
		.begin_txn = begin_txn,
		.consume = consume,
		.finalize = finalize,
	};

	return gaz_consumer_main(&app, argc, argv);
}
