/*
 * gazette/runtime.h - the consumer runtime an application links (Gazette's
 * consumer.Service with mainboilerplate/runconsumer): a process that joins
 * a consumer application's members in etcd, is assigned shards by the
 * same allocator the brokers use, serves the consumer.Shard API, and runs
 * each shard it is primary of as a loop of transactions that read the
 * shard's sources read-committed, call the application, and commit the
 * application's state with the shard's checkpoint in the shard's store.
 *
 * The application supplies a struct gaz_consumer_app; gaz_consumer_main
 * does everything else, with Gazette's runconsumer flags (--consumer.*,
 * --broker.*, --etcd.*, --log.*) and the application's own.
 *
 * Callbacks of one shard run on that shard's thread, one at a time; those
 * of different shards run concurrently. What a callback is handed is
 * borrowed for the call unless said otherwise.
 */
#ifndef GAZETTE_RUNTIME_H
#define GAZETTE_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/flags.h"
#include "consumer.pb-c.h"
#include "gazette/message.h"
#include "gazette/store.h"

struct gaz_shard;
struct gaz_client;

/* Returned by consume to put the envelope off to the next transaction
 * (Gazette's ErrDeferToNextTransaction); an error on a transaction's
 * first message. */
#define GAZ_CONSUMER_DEFER 2 /* positive: not an error (GAZ_EOF is 1) */

struct gaz_consumer_app {
	/* The application's name: the default --etcd.prefix is
	 * "/gazette/consumers/<name>". Required. */
	const char *name;
	/* The application's own flags (a table as flags.h's, ended by a NULL
	 * name), parsed with the runtime's; NULL for none. */
	const struct gaz_flag *flags;
	/* How source messages decode (and published ones encode); NULL is
	 * gaz_json_message_type(NULL): JSON with the UUID at /_meta/uuid. */
	const struct gaz_message_type *type;
	/* How published messages encode, when they are of another type than
	 * the sources' (stream-sum reads Chunks and publishes Sums); NULL is
	 * `type`. */
	const struct gaz_message_type *publish_type;
	void *arg; /* passed to every callback */

	/* init: once, after flags are parsed, before any shard. Optional. */
	int (*init)(void *arg, struct gaz_status *st);
	/* new_store: opens the store of a shard becoming primary (its
	 * gaz_shard_fqn names it), e.g. gaz_pg_store_open. GAZ_EUNAVAIL
	 * retries with backoff (a database still starting); other errors fail
	 * the shard. Required. */
	int (*new_store)(void *arg, struct gaz_shard *shard, struct gaz_store **out, struct gaz_status *st);
	/* begin_txn: a transaction begins, before its first message, after
	 * the store's begin. Optional. */
	int (*begin_txn)(void *arg, struct gaz_shard *shard, struct gaz_store *store, struct gaz_status *st);
	/* consume: one committed message (ACKs included: skip them by their
	 * UUID's flags, as Gazette's applications do). Publish downstream with
	 * gaz_publish_uncommitted on `pub`: the runtime acknowledges once the
	 * store committed. Returns 0, GAZ_CONSUMER_DEFER, or an error (fails
	 * the shard). Required. */
	int (*consume)(void *arg, struct gaz_shard *shard, struct gaz_store *store, const struct gaz_envelope *env,
		       struct gaz_publisher *pub, struct gaz_status *st);
	/* finalize: the transaction is about to commit: write what was kept
	 * in memory to the store. Required. */
	int (*finalize)(void *arg, struct gaz_shard *shard, struct gaz_store *store, struct gaz_publisher *pub,
			struct gaz_status *st);
	/* finished: the transaction committed (rc 0) or failed. Optional. */
	void (*finished)(void *arg, struct gaz_shard *shard, struct gaz_store *store, int rc);
};

/* gaz_consumer_main runs the consumer process: argv as the program's
 * ("serve" or "print-config", then flags), until SIGTERM or SIGINT, when it
 * marks itself exiting and returns once the allocator moved its shards
 * away (or --consumer.exit-timeout passed). Returns the process exit
 * status (0, or 1 with the reason logged). */
int gaz_consumer_main(const struct gaz_consumer_app *app, int argc, char **argv);

/* Of a shard handed to a callback: */
/* gaz_shard_id: the shard's id. */
const char *gaz_shard_id(const struct gaz_shard *s);
/* gaz_shard_fqn: its fully qualified name, the etcd key of its spec
 * ("<prefix>/items/<id>", Gazette's FQN), e.g. the SQL store's row key. */
const char *gaz_shard_fqn(const struct gaz_shard *s);
/* gaz_shard_spec: its ShardSpec as of the shard's start. */
const Consumer__ShardSpec *gaz_shard_spec(const struct gaz_shard *s);
/* gaz_shard_client: the shard's journal client (cancelled when the shard
 * stops), for applications that read or list journals themselves. */
struct gaz_client *gaz_shard_client(struct gaz_shard *s);
/* gaz_shard_set_state gives the shard the application's state of it
 * (e.g. a cache of the current transaction), which the runtime frees
 * with free_fn (may be NULL) once the shard's thread ended; one state per
 * shard, replaced (the old one freed) by another call. gaz_shard_state
 * returns it (NULL if none). */
void gaz_shard_set_state(struct gaz_shard *s, void *state, void (*free_fn)(void *state));
void *gaz_shard_state(const struct gaz_shard *s);

/* gaz_shard_publisher: the shard's publisher (its clock moves with each
 * transaction), e.g. for mappings that need its journals. */
struct gaz_publisher *gaz_shard_publisher(struct gaz_shard *s);

#endif
