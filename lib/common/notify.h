/*
 * notify.h - a list of waiters to wake when something changes.
 *
 * A blocked stream handler (a Read at the write head, an Apply waiting for
 * its revision) registers a waiter whose wake function signals its own call
 * (gaz_rpc_wake). The producer (a commit, a keyspace update) calls
 * gaz_notifier_broadcast after changing state. The waiter re-checks state
 * after waking, so spurious wakes are harmless and no wake is lost if the
 * waiter re-checks after registering.
 *
 * Thread-safe. Wake functions are called with the notifier's mutex held:
 * they must only signal (never block, never touch the notifier).
 */
#ifndef GAZ_COMMON_NOTIFY_H
#define GAZ_COMMON_NOTIFY_H

#include <pthread.h>

struct gaz_waiter {
	void (*wake)(void *arg);
	void *arg;
	struct gaz_waiter *prev, *next; /* owned by the notifier while added */
};

struct gaz_notifier {
	pthread_mutex_t mu;
	struct gaz_waiter *head;
};

void gaz_notifier_init(struct gaz_notifier *n);
void gaz_notifier_release(struct gaz_notifier *n);

/* gaz_notifier_add registers `w` (caller-owned, must stay valid until
 * gaz_notifier_remove). */
void gaz_notifier_add(struct gaz_notifier *n, struct gaz_waiter *w);

/* gaz_notifier_remove unregisters `w`; after it returns `w` is never woken. */
void gaz_notifier_remove(struct gaz_notifier *n, struct gaz_waiter *w);

/* gaz_notifier_broadcast calls every registered waiter's wake function. */
void gaz_notifier_broadcast(struct gaz_notifier *n);

#endif
