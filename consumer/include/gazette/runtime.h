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
 * Callbacks of one shard run one at a time, in order; those of different
 * shards run concurrently. A shard has no thread of its own: its steps
 * run on the consumer's pool, so one transaction's callbacks may run on
 * different threads (each sees what the one before it wrote). Keep state
 * of a shard or of its transaction in gaz_shard_state, never in
 * thread-local storage. What a callback is handed is
 * borrowed for the call unless said otherwise.
 *
 * An application may serve gRPC services of its own on the consumer's
 * port, beside consumer.Shard (Gazette's applications register theirs in
 * InitApplication): a table of methods in the app, each a lib/rpc
 * handler (rpc/rpc.h). A handler resolves a shard as the Shard service
 * does (gaz_consumer_resolve): the local primary's store, borrowed while
 * no transaction has it open, or the primary to proxy the call to
 * (gaz_consumer_proxy).
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
struct gaz_consumer; /* the consumer process */
struct gaz_rpc_call; /* a server call of lib/rpc (rpc/rpc.h) */

/* Returned by consume to put the envelope off to the next transaction
 * (Gazette's ErrDeferToNextTransaction); an error on a transaction's
 * first message. */
#define GAZ_CONSUMER_DEFER 2 /* positive: not an error (GAZ_EOF is 1) */

/* A method of the application's own gRPC service, on the consumer's
 * port. `fn` is a lib/rpc server handler (rpc/rpc.h, gaz_rpc_handler_fn):
 * it runs on a handler thread with the call accepted and its request not
 * yet received (gaz_rpc_recv_request), and ends the call with
 * gaz_rpc_finish exactly once before it returns. `arg` is the app's arg.
 * Handlers run concurrently with each other and with every shard's
 * callbacks; they may use the gaz_consumer_* calls below. */
struct gaz_consumer_method {
	const char *path; /* "/<package>.<Service>/<Method>", e.g. "/word_count.NGram/Query" */
	void (*fn)(void *arg, struct gaz_consumer *c, struct gaz_rpc_call *call);
};

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

	/* Methods served beside consumer.Shard, ended by a NULL path; NULL
	 * for none. A path already served (consumer.Shard's) is refused at
	 * start. */
	const struct gaz_consumer_method *methods;

	/* init: once, on the main thread, after flags are parsed and before
	 * the consumer serves or runs any shard (Gazette's InitApplication):
	 * `c` gives the process's journal client. An error ends the process
	 * (exit 1, the reason logged). Optional. */
	int (*init)(void *arg, struct gaz_consumer *c, struct gaz_status *st);
	/* stop: once at exit, when init succeeded, after every shard stopped
	 * and the gRPC server shut down (no method runs any more), with the
	 * process's journal client already cancelled: release what init
	 * made. Optional. */
	void (*stop)(void *arg, struct gaz_consumer *c);
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
 * with free_fn (may be NULL) once the shard ended; one state per
 * shard, replaced (the old one freed) by another call. gaz_shard_state
 * returns it (NULL if none). */
void gaz_shard_set_state(struct gaz_shard *s, void *state, void (*free_fn)(void *state));
void *gaz_shard_state(const struct gaz_shard *s);

/* gaz_shard_publisher: the shard's publisher (its clock moves with each
 * transaction), e.g. for mappings that need its journals. */
struct gaz_publisher *gaz_shard_publisher(struct gaz_shard *s);


/* ---- for init and the application's methods --------------------------- */

/* gaz_consumer_client: the process's journal client (Gazette's
 * Service.Journals), made from the --broker.* flags before init. Borrowed:
 * valid until the app's stop returns; cancelled before stop, so appends
 * and reads of it still pending fail then. Thread-safe. */
struct gaz_client *gaz_consumer_client(struct gaz_consumer *c);

/* gaz_consumer_sleep sleeps `ms` milliseconds, or less when the process
 * is signalled to exit (SIGTERM, SIGINT): returns 0, or GAZ_ECANCELLED
 * then (the signal is taken: init should fail with it). For init's waits
 * (Gazette's counter waits for its partitions); on init's thread only. */
int gaz_consumer_sleep(struct gaz_consumer *c, int64_t ms);

/* gaz_consumer_shard_with_source: the first shard, in id order, that
 * reads `journal` (one of its sources), as the keyspace has it now
 * (Gazette's Resolver.ShardsWithSource(journal)[0]). *id is malloc'd
 * (free()). Returns 0, GAZ_ENOTFOUND when no shard reads it, GAZ_EUNAVAIL
 * before the consumer has loaded its keyspace, GAZ_ENOMEM. Thread-safe. */
int gaz_consumer_shard_with_source(struct gaz_consumer *c, const char *journal, char **id, struct gaz_status *st);

/* What gaz_consumer_resolve found (Gazette's consumer.Resolution). */
struct gaz_consumer_resolution {
	/* OK, or SHARD_NOT_FOUND, NO_SHARD_PRIMARY, NOT_SHARD_PRIMARY (a
	 * proxied request that reached a member that is not the primary),
	 * SHARD_STOPPED (the local primary ended while we waited). */
	Consumer__Status status;
	/* The etcd header, the shard's route and, when OK, the primary's
	 * process id (else ours, as Gazette's): what a proxied request
	 * carries. Owned by the resolution. */
	Protocol__Header *header;
	/* OK and another member is primary: its endpoint (owned). */
	char *endpoint;
	/* OK and we are primary: the shard and its store, borrowed by this
	 * call alone until gaz_consumer_resolution_release (the shard's
	 * transactions wait meanwhile, so release it soon). The store has no
	 * transaction open: what it holds is committed. The shard's state
	 * (gaz_shard_state) stays its callbacks': do not touch it. */
	struct gaz_shard *shard;
	struct gaz_store *store;
};

/* gaz_consumer_resolve resolves shard `shard_id` for a call of an
 * application's method, as the Shard service resolves Stat (Gazette's
 * Resolver.Resolve with MayProxy = !proxy_header): `proxy_header` is the
 * request's header when another member proxied it here (then the etcd
 * cluster and our process id must match it, our keyspace waits for its
 * revision, and a shard whose primary is not us is NOT_SHARD_PRIMARY),
 * NULL for a client's request. When we are the primary it waits for the
 * shard to be ready, then for its store to be free of any transaction,
 * and borrows it. *out is filled in every case of 0 (release it with
 * gaz_consumer_resolution_release); errors: GAZ_EINVAL (a bad shard id,
 * a header that does not match: reason in st), GAZ_EUNAVAIL (the
 * consumer is still starting), GAZ_ECANCELLED or GAZ_ETIMEDOUT (the call
 * ended or passed its deadline while waiting), GAZ_ENOMEM. */
int gaz_consumer_resolve(struct gaz_consumer *c, struct gaz_rpc_call *call, const char *shard_id,
			 const Protocol__Header *proxy_header, struct gaz_consumer_resolution *out,
			 struct gaz_status *st);

/* gaz_consumer_resolution_release gives the borrowed store back and
 * frees what *r holds. */
void gaz_consumer_resolution_release(struct gaz_consumer_resolution *r);

/* gaz_consumer_proxy answers `call` with the answer of the shard's
 * primary (r OK and remote) to the same request: `req` is sent to method
 * `path` of r->endpoint with r's header in the request's header field
 * (*req_header, set for the call and put back to NULL), within the call's
 * deadline, and the primary's response (unpacked as `resp_desc`) or its
 * error status ends the call (UNAVAILABLE when it cannot be reached), as
 * the Shard service proxies Stat. Returns 0 once the call is finished. */
int gaz_consumer_proxy(struct gaz_rpc_call *call, const struct gaz_consumer_resolution *r, const char *path,
		       ProtobufCMessage *req, Protocol__Header **req_header, const ProtobufCMessageDescriptor *resp_desc);

#endif
