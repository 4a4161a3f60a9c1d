/*
 * broker.h - the gazette broker's shared state and the mechanisms each
 * broker/ file implements. One file per mechanism:
 *
 *   main.c        flags, start-up, signals, graceful exit
 *   announce.c    member lease, BrokerSpec announcement, exiting
 *   allocator.c   leader-only assignment of journals to members (§4.7)
 *   resolver.c    journal resolution against the keyspace (§2.0)
 *   replica.c     local replicas: spool, index, registers, lifecycle
 *   maintain.c    the maintenance loop: replica reconcile, index refresh
 *   pulse.c       pulses: an empty append per primary journal that syncs
 *                 new peers, writes consistent routes, closes idle fragments
 *   persister.c   completed spools to the fragment store
 *   append_fsm.c  the Append RPC      read.c  the Read RPC
 *   list_apply.c  List and Apply      fragments_api.c  ListFragments,
 *                                     FragmentStoreHealth
 *   proxy.c       channels to peers   http.c  debug endpoints, gateway
 *
 * Lock order: keyspace read lock, then a replica's mu. Never take the
 * keyspace lock while holding a replica's mu.
 */
#ifndef GAZ_BROKER_BROKER_H
#define GAZ_BROKER_BROKER_H

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/flags.h"
#include "common/notify.h"
#include "common/strset.h"
#include "etcd/etcd.h"
#include "keyspace/journals.h"
#include "protocol.pb-c.h"
#include "rpc/rpc.h"

struct gaz_replica;
struct gaz_persister;

struct gaz_broker_config {
	char *zone, *id, *host, *port;
	char *file_root;
	int64_t limit, max_replication, min_append_rate, max_append_rate;
	int64_t max_grpc_recv_size;
	/* Bounds on open Read streams, in all and per client connection
	 * (0 = none; ours, Gazette has none). */
	int64_t max_read_streams, max_read_streams_per_conn;
	int64_t watch_delay_ns;
	char *etcd_address, *etcd_prefix;
	int64_t etcd_lease_ns;
	/* TLS files (facts §8.2): "" = not set. */
	char *server_cert_file, *server_cert_key_file, *server_ca_file;
	char *peer_cert_file, *peer_cert_key_file, *peer_ca_file;
	char *etcd_cert_file, *etcd_cert_key_file, *etcd_trusted_ca_file;
	char *log_level, *log_format;
	int64_t exit_timeout_ns;   /* bound on a graceful exit (ours; Gazette waits forever) */
	bool auto_suspend;         /* pulses may suspend idle, fully-persisted journals */
	int64_t store_read_nice;   /* niceness of the threads streaming persisted
	                            * fragments from a store (0: on the handler
	                            * thread; default 10) */
	struct gaz_strlist allow_origin; /* CORS origins of the /v1/ gateway */
	char *auth_keys;           /* --broker.auth-keys ("" = no authorization) */
};

struct gaz_allocator;

struct gaz_broker {
	struct gaz_broker_config cfg;
	char *root;                    /* etcd prefix, no trailing slash */
	char *endpoint;                /* advertised http(s)://host:port */
	bool tls;                      /* the listener serves TLS (https://) */
	struct gaz_rpc_tls peer_tls;   /* for channels to peers and to ourselves:
	                                * cfg's --broker.peer-* files */
	char *member_key;
	struct gaz_etcd *etcd;
	struct gaz_keyspace *ks;
	int64_t lease_id;
	struct gaz_etcd_keepalive *keepalive;
	struct gaz_rpc_server *srv;
	struct gaz_rpc_listener *listener;
	struct gaz_persister *persister;
	char *spool_dir;               /* $TMPDIR */
	struct gaz_auth *auth;         /* the keys, or NULL: no authorization (auth.c) */

	pthread_mutex_t mu;            /* guards replicas, and the wake flag */
	pthread_cond_t cond;           /* maintenance wake-ups */
	struct gaz_replica **replicas; /* sorted by journal name */
	size_t n_replicas, cap_replicas;
	bool maintain_wake;
	/* Journals maintenance is asked to look at (gaz_maintain_look), taken
	 * by its next pass; maintain_mu guards these two only and is a leaf
	 * lock. */
	pthread_mutex_t maintain_mu;
	struct gaz_strset maintain_journals;
	bool maintain_look_all;

	/* The bound TCP port (0 while unbound, and for a unix socket): set
	 * once by start_serving, read by HTTP handlers calling this broker's
	 * own gRPC service, which may run as soon as the listener accepts. */
	atomic_int listen_port;
	atomic_bool ks_ready;          /* ks set: RPCs and HTTP gateways may use it */
	atomic_bool announced;         /* member key written */
	atomic_bool exiting;           /* SIGTERM seen; member marked exiting */
	atomic_bool stopping;          /* replicas are being shut down */
	atomic_bool lease_lost;
	atomic_llong append_prefetched; /* content bytes appends read ahead (append_batch.c) */
	/* The pulse thread sleeps on pulse_cond until a kick
	 * (gaz_pulse_kick, gaz_pulse_kick_journal), its earliest timer, or a
	 * second; pulse_mu guards pulse_kicked and pulse_journals only and is
	 * a leaf lock (a kick may come with a replica's mu held). */
	pthread_mutex_t pulse_mu;
	pthread_cond_t pulse_cond;
	bool pulse_kicked, pulse_kick_all;
	struct gaz_strset pulse_journals; /* kicked journals (pulse_mu) */
	pthread_t maintain_thread, pulse_thread;
	/* The allocator (allocator.c): set once at start, read by any thread
	 * kicking it; freed after the keyspace (whose observer kicks it). */
	_Atomic(struct gaz_allocator *) allocator;
	bool threads_started;
	size_t unpersisted;            /* fragments left unpersisted at exit (main thread) */

	/* What an exiting broker still waits for, as /debug/ready's body says
	 * it: written by the main thread during the exit, read by HTTP
	 * handlers, under exit_mu. NULL while serving. */
	pthread_mutex_t exit_mu;
	char *exit_report;
};

/* gaz_broker_exit_report copies what an exiting broker still waits for
 * (one line of text, malloc'd: the caller frees it), or returns NULL while
 * it is not exiting or when out of memory. Thread-safe (exit_mu). */
char *gaz_broker_exit_report(struct gaz_broker *b);

/* ---- authorization (auth.c) -------------------------------------------- */

struct gaz_auth;

/* A call's verification and its claims' selector are rpc/authorize.h's
 * (gaz_rpc_authorize, gaz_rpc_claims_selector), with b->auth as keys. */

/* gaz_journal_visible: `journal` exists and the call's claims match it
 * (its labels plus name=<journal>), as resolution decides (§11). Takes
 * the keyspace read lock. */
bool gaz_journal_visible(struct gaz_broker *b, struct gaz_rpc_call *call, const char *journal);

/* gaz_broker_sign returns "Bearer <token>" (malloc'd) with claims {cap,
 * name=<journal>} (or an empty selector for a NULL journal) for an hour,
 * signed with the broker's first key, for a call it makes on a client's
 * behalf; NULL when the broker has no keys (or out of memory, logged). */
char *gaz_broker_sign(struct gaz_broker *b, uint32_t cap, const char *journal);

/* ---- resolution (resolver.c) ------------------------------------------- */

struct gaz_resolve_opts {
	bool may_proxy;
	bool require_primary;
	int64_t min_etcd_revision;
	const Protocol__Header *proxy_header;   /* the request's header or NULL */
	struct gaz_rpc_call *call;              /* waits are cancelled with it; may be NULL */
	bool read_only;                         /* Read or Fragments: a sealed replica
						 * (gaz_replica_archive) of a stopping
						 * broker still serves it */
	bool no_wait;                           /* never block: no revision waits, and a
						 * missing or stale local replica is left
						 * NULL instead of created */
};

/* The outcome of resolving a journal: owned copies, release with
 * gaz_resolution_release. */
struct gaz_resolution {
	int status;                         /* Protocol__Status */
	char *journal;                      /* without ;meta */
	Protocol__JournalSpec *spec;        /* copy of the item, or NULL */
	int64_t item_create_revision, item_mod_revision;
	struct gaz_route route;
	int local_index;                    /* our index in route, or -1 */
	int process_index;                  /* route index of process_id, or -1 (self when status != OK) */
	struct gaz_etcd_header etcd;
	struct gaz_replica *replica;        /* referenced local replica, or NULL */
};

/* gaz_resolve mirrors Gazette's resolver (facts §2.0). Returns 0 with `res`
 * filled (res->status says the broker-level outcome), or a negative code
 * for errors answered as plain gRPC errors (cluster id mismatch,
 * cancelled). */
int gaz_resolve(struct gaz_broker *b, const char *journal, const struct gaz_resolve_opts *o,
		struct gaz_resolution *res, struct gaz_status *st);
void gaz_resolution_release(struct gaz_resolution *res);

/* gaz_header_build makes the response Header for a resolution (process_id
 * per §2.0 step 8/11, route with endpoints, etcd). Free with
 * gaz_header_free. Strings are borrowed from `res`. */
Protocol__Header *gaz_header_build(struct gaz_broker *b, const struct gaz_resolution *res);
/* gaz_header_unrouted: List/Apply style header (route {primary -1}). */
Protocol__Header *gaz_header_unrouted(struct gaz_broker *b, int64_t revision);

/* gaz_wait_revision waits until the keyspace reflects `rev`, waking on
 * cancellation of `call` (may be NULL). Returns 0, GAZ_ECANCELLED or
 * GAZ_ETIMEDOUT (deadline_ns). */
int gaz_wait_revision(struct gaz_broker *b, struct gaz_rpc_call *call, int64_t rev,
		      int64_t deadline_ns);

/* ---- lifecycle --------------------------------------------------------- */

/* gaz_announce grants the member lease (--etcd.lease), keeps it alive (a
 * lost lease logs and raises SIGTERM) and puts our BrokerSpec under the
 * member key if absent, retrying every 10 s while an older process's key
 * holds it (facts §4.2). Returns 0, or the etcd error (st set). Main
 * thread, once. */
int gaz_announce(struct gaz_broker *b, struct gaz_status *st);
/* gaz_announce_exiting rewrites our BrokerSpec with exiting = true, keeping
 * its lease, so the allocator moves our journals. Returns 0 or the etcd
 * error. */
int gaz_announce_exiting(struct gaz_broker *b, struct gaz_status *st);
/* gaz_broker_lease_valid: whether our member lease is surely still alive
 * (the last keep-alive answer is younger than the TTL, with a margin). A
 * primary commits only while it holds: a broker paused past its lease has
 * had its journals moved, and must not acknowledge anything on waking
 * before it notices (cases BR-18). Thread-safe. */
bool gaz_broker_lease_valid(struct gaz_broker *b);
/* gaz_broker_allocator_start starts the allocator over the broker's
 * keyspace (allocator.c). Returns 0 or GAZ_ENOMEM. */
int gaz_broker_allocator_start(struct gaz_broker *b);
/* gaz_pulse_kick wakes the pulse thread (pulse.c): after a keyspace
 * change, or at stopping. gaz_pulse_kick_journal also has it look at
 * `journal` (its spool got its first content, its index its first
 * listing, it became primary): a pulse may be due that neither the
 * keyspace nor a timer announces. Any thread, any lock held. */
void gaz_pulse_kick(struct gaz_broker *b);
void gaz_pulse_kick_journal(struct gaz_broker *b, const char *journal);
void *gaz_maintain_thread(void *arg);
void *gaz_pulse_thread(void *arg);
/* gaz_broker_kick wakes the maintenance and allocator threads (after a
 * keyspace change). Thread-safe. */
void gaz_broker_kick(struct gaz_broker *b);
/* gaz_maintain_look has maintenance look at `journal` at its next pass,
 * woken at once, even if the keyspace has not moved since its last one:
 * its replica is reconciled with our assignment of it (created, torn
 * down, promoted) and its stores listed if due. For a replica created
 * outside maintenance (the resolver), one whose primacy came and went
 * between passes, or one a reader hurries. Thread-safe, any lock held. */
void gaz_maintain_look(struct gaz_broker *b, const char *journal);
/* gaz_broker_is_local: (zone, suffix) names this broker. */
bool gaz_broker_is_local(const struct gaz_broker *b, const char *zone, const char *suffix);

/* ---- RPC handlers ------------------------------------------------------ */



/* protocol.Journal handlers (arg: the broker), registered in main.c. Each
 * validates its request before touching state and ends its call. */
void gaz_handle_append(struct gaz_rpc_call *call, void *arg);

/* gaz_append_fast is the Append fast path (append_batch.c; a lib/rpc
 * gaz_rpc_fast_fn run on a poller once the request is read): a complete,
 * plain request for a journal this broker is primary of, arriving while
 * another append holds the journal's token, is parked in the replica's
 * group-commit queue with no thread of its own, and the token holder
 * answers it. Returns true when parked. Never blocks. */
bool gaz_append_fast(struct gaz_rpc_call *call, struct gaz_broker *b);

/* The outcome of gaz_append_pulse_fast: ok when every peer acknowledged. */
typedef void (*gaz_pulse_done_fn)(void *arg, bool ok);

/* gaz_append_pulse_fast runs the periodic pulse of `r` (an empty,
 * acknowledged proposal of its spool's fragment to its peers: Gazette's
 * health check) without a thread: the caller proposes, and the pollers
 * gather the acknowledgements and call done(arg, ok) (on a poller, or
 * in this call). Only a pulse that would do nothing else takes it: this
 * broker the primary at the keyspace's revision, the route consistent and
 * at the desired replication, the journal writable and not suspended,
 * the pipeline built for the route and idle, the token free, the index
 * listed, the store healthy, no roll due (append_local.c's ready_now).
 * Returns true when taken, or false, nothing done, for the handler's
 * path (pulse.c's runners). Never waits for another append. *pln is
 * set, before the proposal goes out, to the pipeline the pulse is
 * gathered on (alive until done is called; gaz_pipeline_cancel ends a
 * gather that takes too long). */
struct gaz_pipeline;
bool gaz_append_pulse_fast(struct gaz_broker *b, struct gaz_replica *r, gaz_pulse_done_fn done,
			   void *arg, struct gaz_pipeline **pln);
void gaz_handle_read(struct gaz_rpc_call *call, void *arg);
void gaz_handle_list(struct gaz_rpc_call *call, void *arg);
void gaz_handle_apply(struct gaz_rpc_call *call, void *arg);
void gaz_handle_list_fragments(struct gaz_rpc_call *call, void *arg);
void gaz_handle_store_health(struct gaz_rpc_call *call, void *arg);
void gaz_handle_replicate(struct gaz_rpc_call *call, void *arg);

/* HTTP/1 connections on the service port (http.c): serves the connection
 * on the caller's thread and closes `fd`; `peer` is borrowed. */
void gaz_http_conn(int fd, const char *peer, void *arg);

struct gaz_http_req;
struct gaz_http_resp;
/* gaz_http_v1 serves /v1/journals/list and /v1/journals/read as Gazette's
 * grpc-gateway does (http_v1.c). `arg` is the struct gaz_broker. Runs on the
 * connection's thread; returns as a gaz_http_handler_fn. */
int gaz_http_v1(struct gaz_http_req *req, struct gaz_http_resp *resp, void *arg);

/* ---- peers (proxy.c) ---------------------------------------------------- */

/* gaz_peer_channel returns a cached channel to a peer endpoint (borrowed;
 * lives until gaz_peers_close). NULL on a bad endpoint. */
struct gaz_rpc_channel *gaz_peer_channel(struct gaz_broker *b, const char *endpoint);
void gaz_peers_close(void);

/* gaz_self_channel returns the cached channel to this broker's own gRPC
 * service over its listener (borrowed, as gaz_peer_channel), for the HTTP
 * gateways; NULL before the listener is bound. Thread-safe. */
struct gaz_rpc_channel *gaz_self_channel(struct gaz_broker *b);

#endif
