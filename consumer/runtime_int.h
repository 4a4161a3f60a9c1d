/*
 * runtime_int.h - the consumer runtime's internals (runtime.h is the
 * application's view).
 *
 *   service.c    the process: flags, etcd, the member key on a lease, the
 *                keyspace of the application's prefix, the allocator over
 *                shards, the gRPC server, the exit
 *   resolver.c   this member's assignments -> local shards (started,
 *                promoted, stopped), and the resolution of Shard API calls
 *   shard.c      one shard's life: standby, primary (store, checkpoint),
 *                failed; its ReplicaStatus in its assignment
 *   txn.c        a primary's transactions over its sources
 *   shard_api.c  the consumer.Shard service (Stat, List, Apply, GetHints,
 *                Unassign), and the resolution and proxying of shards that
 *                an application's own methods use (runtime.h)
 *
 * Lock order: consumer->mu before a shard's mu; the keyspace's read lock
 * is taken with neither held, or after consumer->mu (never after a
 * shard's). Each lock guards what its comment says; everything else is
 * set before the threads start and read-only after.
 *
 * A primary's store is used by one thread at a time: its shard's steps
 * from a transaction's begin to its commit or abort (store_busy), or an
 * application's method that borrowed it between transactions
 * (store_borrowed). Both flags live under the shard's mu, which is never
 * held while the store is used; a borrower waiting goes before the next
 * transaction (borrowers_waiting).
 */
#ifndef GAZ_CONSUMER_RUNTIME_INT_H
#define GAZ_CONSUMER_RUNTIME_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/steps.h"
#include "etcd/etcd.h"
#include "gazette/client.h"
#include "gazette/runtime.h"
#include "keyspace/allocator.h"
#include "keyspace/journals.h"
#include "rpc/rpc.h"

struct gaz_consumer_cfg {
	char *zone, *id, *host, *port;
	int64_t limit, max_hot_standbys;
	int64_t watch_delay_ns, exit_timeout_ns;
	char *broker_address, *broker_file_root;
	/* TLS files (Gazette's runconsumer: mbp.ServiceConfig for the
	 * consumer's own port and its peers, mbp.ClientConfig for brokers);
	 * "" = not set. */
	char *server_cert_file, *server_cert_key_file, *server_ca_file;
	char *peer_cert_file, *peer_cert_key_file, *peer_ca_file;
	char *broker_cert_file, *broker_cert_key_file, *broker_trusted_ca_file;
	int64_t broker_cache_size, broker_cache_ttl_ns;
	char *etcd_address, *etcd_prefix;
	char *etcd_cert_file, *etcd_cert_key_file, *etcd_trusted_ca_file; /* "" = not set */
	int64_t etcd_lease_ns;
	char *log_level, *log_format;
	char *auth_keys;               /* --consumer.auth-keys: the Shard service's */
	char *broker_auth_keys, *broker_auth_token; /* the broker client's */
};

struct gaz_consumer {
	struct gaz_consumer_cfg cfg;
	bool tls;                      /* our port serves TLS (https:// endpoint) */
	struct gaz_rpc_tls peer_tls;   /* for proxying to other members */
	const struct gaz_consumer_app *app;
	struct gaz_message_type type;  /* the app's, or JSON's */
	struct gaz_message_type publish_type; /* the app's, or `type` */
	char *root;                    /* --etcd.prefix, no trailing slash */
	char *member_key, *endpoint;

	struct gaz_etcd *etcd;
	int64_t lease_id;
	struct gaz_etcd_keepalive *keepalive;
	struct gaz_keyspace *ks;
	struct gaz_allocator *allocator;
	struct gaz_rpc_server *srv;
	struct gaz_rpc_channel *self;  /* to our own endpoint: loopback of proxied calls */
	struct gaz_auth *auth;         /* --consumer.auth-keys, or NULL: set by
	                                * configure, immutable after */
	struct gaz_client *client;     /* the app's (gaz_consumer_client), made before init */
	sigset_t *sigs;                /* SIGTERM and SIGINT, blocked: gaz_consumer_sleep */
	struct gaz_consumer_app_method *app_methods; /* the app's methods as registered */
	bool app_inited;               /* init succeeded: stop is due */
	atomic_bool ks_ready;          /* ks is made and loaded: handlers may read it */
	struct gaz_shard_api_gate {    /* the Shard service's methods behind ks_ready */
		gaz_rpc_handler_fn fn;
		struct gaz_consumer *c;
	} api_gates[5];

	struct gaz_steps *shard_pool;  /* runs every local shard's steps */
	pthread_mutex_t mu;            /* guards shards, resolve_wake, stopping, reaping */
	pthread_cond_t cond;           /* the resolver's wake-ups; a reaper's end */
	int reaping;                   /* reaper threads joining stopped shards */
	struct gaz_shard **shards;     /* local shards, sorted by id */
	size_t n_shards, cap_shards;
	bool resolve_wake, stopping;
	pthread_t resolver;
	bool resolver_started;

	atomic_bool announced, exiting, lease_lost;
};

/* A shard's progress (Stat), guarded by the shard's progress_mu: what
 * its last completed transaction read through and published at. */
struct gaz_offsets {
	char **journal;
	int64_t *offset;
	size_t n;
};

struct gaz_shard {
	struct gaz_consumer *c;
	char *id, *fqn;
	Consumer__ShardSpec *spec;     /* as of start; read-only */
	int64_t item_create_revision;

	pthread_mutex_t mu;            /* guards slot, stop, primary_done, store_ready,
	                                * store_busy, store_borrowed, borrowers_waiting */
	pthread_cond_t cond;           /* a borrowed store returned (primary_release);
	                                * the steps are kicked instead */
	int64_t slot;                  /* of our assignment (0: primary) */
	bool stop;                     /* assignment gone, or the process stops */
	bool store_ready;              /* primary with its checkpoint restored */
	bool primary_done;             /* primary ended (failed, or stopped) */
	bool store_busy;               /* a transaction has the store */
	bool store_borrowed;           /* an application's method has it */
	int borrowers_waiting;         /* methods waiting to borrow it */
	atomic_bool stopping;          /* stop, readable without mu */
	int refs;                      /* consumer->mu: the resolver's and API calls' */

	/* The shard's life in steps on the consumer's shard pool (shard.c):
	 * touched only by its steps, which never run two at a time. */
	struct gaz_step_task task;
	int state;                     /* enum shard_state */
	int rc;                        /* the primary's outcome */
	struct gaz_status st;
	bool moved;                    /* slot 0 moved before the restore */
	int64_t fenced_until;          /* the fenced grace's end (monotonic) */
	int attempt;                   /* of the store's open or restore, or a status write */
	int status_code;               /* SHARD_STATUS: what to write (a ReplicaStatus code), */
	char *status_err;              /* with its error (or NULL), */
	int status_after;              /* and the state after */
	int64_t retry_at;              /* its next try (monotonic), or 0 */
	uint8_t *cp;                   /* the restored checkpoint, until served */
	size_t cp_len;
	struct gaz_txns *txns;         /* the primary's transactions */

	/* Of the primary, owned by the shard's steps: */
	struct gaz_client *client;     /* cancelled at stop */
	struct gaz_append_service *appends;
	struct gaz_publisher *publisher;
	struct gaz_store *store;
	gaz_clock clock;
	void *app_state;               /* gaz_shard_set_state */
	void (*app_state_free)(void *);

	pthread_mutex_t progress_mu;   /* guards read_through, publish_at */
	struct gaz_offsets read_through, publish_at;
	struct gaz_notifier progress;  /* broadcast on each progress change */
};

/* txn.c: a primary's transactions, run in steps on the shard pool. */
struct gaz_txns;
/* A step's result: the shard waits for a kick or a time. */
#define GAZ_TXN_WAIT 2
/* gaz_txn_begin starts reading the shard's sources from the restored
 * checkpoint (cp_bytes, borrowed) and writes its recovered ACK intents.
 * Returns 0 and *out, or an error (nothing left to end). */
int gaz_txn_begin(struct gaz_shard *s, const uint8_t *cp_bytes, size_t cp_len, struct gaz_txns **out,
		  struct gaz_status *st);
/* gaz_txn_step runs transactions until they would wait: GAZ_TXN_WAIT
 * with *wake_at (a monotonic time, or GAZ_DEADLINE_NEVER: until the
 * shard is kicked), or their end: GAZ_ECANCELLED (the shard stops), or
 * an error with st filled. */
int gaz_txn_step(struct gaz_txns *x, int64_t *wake_at, struct gaz_status *st);
/* gaz_txn_end stops reading, aborts a transaction under way and frees
 * x; returns rc, or 0 for a stop's GAZ_ECANCELLED. */
int gaz_txn_end(struct gaz_txns *x, int rc);

/* resolver.c */
int gaz_consumer_resolver_start(struct gaz_consumer *c);
void gaz_consumer_resolver_wake(struct gaz_consumer *c);
/* Stops every shard and the resolver, waiting for them. */
void gaz_consumer_resolver_stop(struct gaz_consumer *c);
/* gaz_consumer_local_shards: how many shards this process runs now. */
size_t gaz_consumer_local_shards(struct gaz_consumer *c);
/* gaz_consumer_shard_get: the local shard of `id` with a reference the
 * caller drops with gaz_shard_unref (it stays allocated meanwhile), or
 * NULL. */
struct gaz_shard *gaz_consumer_shard_get(struct gaz_consumer *c, const char *id);
void gaz_shard_unref(struct gaz_shard *s);

/* shard.c */
struct gaz_shard *gaz_shard_new(struct gaz_consumer *c, const char *id, const Consumer__ShardSpec *spec,
				int64_t create_revision, int64_t slot);
/* gaz_shard_set_slot: our assignment moved; true when the shard takes it
 * (a standby's new slot, a promotion to 0), false when a primary would
 * leave slot 0, which the resolver answers with a new replica. */
bool gaz_shard_set_slot(struct gaz_shard *s, int64_t slot);
/* gaz_shard_kick runs the shard's next step (a wake of its transactions,
 * its slot, its stop, its store given back). Thread-safe; may be called
 * under the caller's locks. */
void gaz_shard_kick(struct gaz_shard *s);
/* gaz_shard_stop asks the shard to stop (cancelling its reads), without
 * waiting; gaz_shard_join waits for its thread and frees it. */
void gaz_shard_stop(struct gaz_shard *s);
void gaz_shard_join(struct gaz_shard *s);
/* gaz_shard_free frees a joined shard (its last reference is gone). */
void gaz_shard_free(struct gaz_shard *s);
/* gaz_shard_wait_ready waits until the shard is primary with its store
 * restored (0), its primary ended (GAZ_ESTOPPED), or the call ends. */
int gaz_shard_wait_ready(struct gaz_shard *s, struct gaz_rpc_call *call);
/* gaz_shard_store_borrow waits until the shard is a ready primary whose
 * store no transaction has open nor another call borrowed, and borrows
 * it for `call` (0, *out); GAZ_ESTOPPED once its primary ended or is
 * stopping; the call's GAZ_ECANCELLED or GAZ_ETIMEDOUT. Give it back with
 * gaz_shard_store_return. */
int gaz_shard_store_borrow(struct gaz_shard *s, struct gaz_rpc_call *call, struct gaz_store **out);
void gaz_shard_store_return(struct gaz_shard *s);
/* gaz_shard_store_claim: the shard's steps take its store for a
 * transaction, unless a borrower has it or waits for it: then false, and
 * the shard is kicked once the borrower returned it or gave up waiting
 * (no step waits for it); false with *stopped when the shard stops.
 * gaz_shard_store_unclaim gives it up after the commit or abort. */
bool gaz_shard_store_claim(struct gaz_shard *s, bool *stopped);
void gaz_shard_store_unclaim(struct gaz_shard *s);
/* Progress: set `journal`'s offset in *o (progress_mu held). */
int gaz_offsets_set(struct gaz_offsets *o, const char *journal, int64_t offset);
int64_t gaz_offsets_get(const struct gaz_offsets *o, const char *journal);
void gaz_offsets_release(struct gaz_offsets *o);
/* gaz_shard_signal_progress broadcasts after a progress change. */
void gaz_shard_signal_progress(struct gaz_shard *s);

/* shard_api.c */
int gaz_consumer_register_api(struct gaz_consumer *c);

/* service.c: the options of the process's journal clients (the app's and
 * each primary's), from the --broker.* flags. */
struct gaz_client_opts gaz_consumer_client_opts(const struct gaz_consumer *c);

/* service.c: an application's method bound to the process. */
struct gaz_consumer_app_method {
	struct gaz_consumer *c;
	const struct gaz_consumer_method *m;
};

#endif
