/*
 * keyspace.h - a decoded, sorted mirror of one etcd prefix, kept current by
 * a watch, with the revision it reflects (Gazette's KeySpace, facts §4.5).
 *
 * Every broker decision reads this mirror; only etcd transactions change
 * it. Values are decoded once, on arrival, by the owner's decode function;
 * a key whose value fails to decode is logged and left out, as Gazette
 * does. The mirror's revision only advances on changes under the prefix.
 *
 * Locking: readers hold gaz_keyspace_rlock around any use of entries (and
 * of their decoded values); the watch thread takes the write lock to apply
 * a response. After each applied response the notifier is broadcast and
 * the observer (if any) runs on the watch thread, without the lock held;
 * with a watch delay (gaz_keyspace_set_watch_delay) the observer runs once
 * per delay window, on the keyspace's publisher thread.
 */
#ifndef GAZ_KEYSPACE_KEYSPACE_H
#define GAZ_KEYSPACE_KEYSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/notify.h"
#include "etcd/etcd.h"

struct gaz_ks_entry {
	char *key;                /* full etcd key, NUL-terminated */
	int64_t create_revision;
	int64_t mod_revision;
	int64_t version;
	int64_t lease;
	void *decoded;            /* owned by the keyspace; see gaz_ks_decode_fn */
};

/* Decodes one value. Returns a heap object (freed later with free_fn), or
 * NULL with st set when the key or value is invalid (the key is then
 * ignored, with a warning). `key` is the full key. */
typedef void *(*gaz_ks_decode_fn)(void *arg, const char *key, const uint8_t *val, size_t len,
				  struct gaz_status *st);
typedef void (*gaz_ks_free_fn)(void *arg, void *decoded);
/* Runs on the watch thread after each applied update, lock not held. */
typedef void (*gaz_ks_observer_fn)(void *arg);

/* A key's change between two applied states of the mirror. */
enum gaz_ks_change {
	GAZ_KS_CREATED, /* absent before, present after */
	GAZ_KS_UPDATED, /* present before and after (a new value or lease) */
	GAZ_KS_DELETED, /* present before, absent after */
};
/* Called by gaz_keyspace_changes for each change; `key` is borrowed. */
typedef void (*gaz_ks_change_fn)(void *arg, const char *key, enum gaz_ks_change kind);

struct gaz_etcd_header {
	uint64_t cluster_id, member_id, raft_term;
	int64_t revision;
};

struct gaz_keyspace;

/* gaz_keyspace_new creates an empty mirror of `prefix` (e.g.
 * "/gazette/cluster/", with its trailing slash). `etcd` is borrowed and
 * must outlive the keyspace. Returns NULL on allocation failure. */
struct gaz_keyspace *gaz_keyspace_new(struct gaz_etcd *etcd, const char *prefix,
				      gaz_ks_decode_fn decode, gaz_ks_free_fn free_fn, void *arg);

/* gaz_keyspace_set_cleanup: `fn(arg)` runs at gaz_keyspace_free, after every
 * decoded value was freed (to release the decoder's own context). */
void gaz_keyspace_set_cleanup(struct gaz_keyspace *ks, void (*fn)(void *arg));

/* gaz_keyspace_set_watch_delay (before gaz_keyspace_watch): watch
 * responses are still applied as they arrive and wake revision waiters
 * and the notifier at once, but the observer is called once `delay_ns`
 * after the first response it has not seen, so a burst of changes costs
 * the observer's work once. Gazette's KeySpace.WatchApplyDelay
 * (--broker.watch-delay, default 30ms) batches too, applying at the end
 * of the window; a request waiting on a revision is not held for it
 * here (ours pulses its journals one after another: a 30 ms hold on each
 * route write made 5,000 new journals take minutes to pulse). 0 (the
 * default) calls the observer on each response. */
void gaz_keyspace_set_watch_delay(struct gaz_keyspace *ks, int64_t delay_ns);

/* gaz_keyspace_set_observer installs the observer; before load only. */
void gaz_keyspace_set_observer(struct gaz_keyspace *ks, gaz_ks_observer_fn fn, void *arg);

/* gaz_keyspace_set_change_log keeps the last `cap` key changes (before
 * load; 0, the default, keeps none), for readers that follow changes
 * rather than rescan the mirror (gaz_keyspace_changes). Costs a copy of
 * each changed key, up to `cap` of them. */
void gaz_keyspace_set_change_log(struct gaz_keyspace *ks, size_t cap);

/* gaz_keyspace_changes (read lock held) calls fn(arg, key, kind) for each
 * key changed after revision `since` (a revision the mirror reflected),
 * in the order applied, and returns true; it calls nothing and returns
 * false when the log no longer reaches back to `since` (it overflowed, the
 * mirror was reloaded, or no log is kept): the reader must then rescan. */
bool gaz_keyspace_changes(const struct gaz_keyspace *ks, int64_t since, gaz_ks_change_fn fn, void *arg);

/* gaz_keyspace_load range-reads the whole prefix (at `revision`, or the
 * current one if 0), in pages of one revision, and replaces the mirror.
 * The change log restarts at that revision. Returns 0, GAZ_EUNAVAIL, or
 * GAZ_ERPC. */
int gaz_keyspace_load(struct gaz_keyspace *ks, int64_t revision, struct gaz_status *st);

/* gaz_keyspace_watch starts the watch from revision + 1. Returns 0 or an
 * error from gaz_etcd_watch_start. */
int gaz_keyspace_watch(struct gaz_keyspace *ks, struct gaz_status *st);

/* gaz_keyspace_free stops the watch and frees everything. */
void gaz_keyspace_free(struct gaz_keyspace *ks);

void gaz_keyspace_rlock(struct gaz_keyspace *ks);
void gaz_keyspace_runlock(struct gaz_keyspace *ks);

/* gaz_keyspace_revision_now: the revision the mirror reflects, taking the
 * read lock itself (for threads that only poll whether anything moved). */
int64_t gaz_keyspace_revision_now(struct gaz_keyspace *ks);

/* With the read lock held: */
int64_t gaz_keyspace_revision(const struct gaz_keyspace *ks);
struct gaz_etcd_header gaz_keyspace_header(const struct gaz_keyspace *ks);
size_t gaz_keyspace_len(const struct gaz_keyspace *ks);
const struct gaz_ks_entry *gaz_keyspace_at(const struct gaz_keyspace *ks, size_t i);
/* gaz_keyspace_get: the entry with exactly `key`, or NULL. */
const struct gaz_ks_entry *gaz_keyspace_get(const struct gaz_keyspace *ks, const char *key);
/* gaz_keyspace_prefix sets [*begin, *end) to the entries whose key starts
 * with `prefix` (binary search). */
void gaz_keyspace_prefix(const struct gaz_keyspace *ks, const char *prefix, size_t *begin,
			 size_t *end);

/* gaz_keyspace_notifier: broadcast after every applied update. */
struct gaz_notifier *gaz_keyspace_notifier(struct gaz_keyspace *ks);

/* gaz_keyspace_wait_revision blocks (without the read lock) until the
 * mirror reflects at least `revision` (an etcd revision), or deadline_ns
 * (monotonic ns; GAZ_DEADLINE_NEVER: none). Returns 0 or GAZ_ETIMEDOUT.
 * For threads that are not RPC handlers (handlers use
 * gaz_keyspace_wait_call, so that cancellation wakes them). */
int gaz_keyspace_wait_revision(struct gaz_keyspace *ks, int64_t revision, int64_t deadline_ns);

struct gaz_rpc_call;
/* gaz_keyspace_wait_call is gaz_keyspace_wait_revision for an RPC
 * handler: it waits on the call (gaz_rpc_wait), woken only by the update
 * that brings the mirror to `revision` (not by every update), so the
 * call's cancellation ends the wait too; `call` is borrowed and must
 * outlive the wait. deadline_ns as gaz_keyspace_wait_revision's. Without
 * a call (NULL) it is gaz_keyspace_wait_revision. Returns 0,
 * GAZ_ETIMEDOUT or GAZ_ECANCELLED (the call ended). */
int gaz_keyspace_wait_call(struct gaz_keyspace *ks, struct gaz_rpc_call *call, int64_t revision,
			   int64_t deadline_ns);

/* gaz_keyspace_watch_failed: whether the watch ended for good (the broker
 * treats that as fatal, as Gazette does). */
bool gaz_keyspace_watch_failed(struct gaz_keyspace *ks);

#endif
