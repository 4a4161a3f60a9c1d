/*
 * persister.h - uploads completed spools to the journal's first fragment
 * store (facts §5.5). A bounded pool of worker threads takes completed
 * fragments from a queue; a failed upload is retried with backoff; at exit
 * the queue is drained (gaz_persister_drain) before the process ends, and
 * then a store that refuses us is passed over for the journal's next
 * stores, as Gazette's exiting persister does.
 */
#ifndef GAZ_BROKER_PERSISTER_H
#define GAZ_BROKER_PERSISTER_H

#include "broker/broker.h"
#include "fragment/spool.h"

struct gaz_persister *gaz_persister_start(struct gaz_broker *b, int workers);

/* gaz_persister_enqueue takes `done` (consumed: its fragment and file
 * reference move into the queue) of the replica `r` (a reference is taken).
 * With `at_once` it is persisted at once. Without (a replica's fragment
 * whose exact content the primary confirmed holding: the primary uploads
 * it), the fragment is only checked for, from 1 s on at doubling
 * intervals, and counts as persisted once the primary's upload is found;
 * it is uploaded from here if none landed within
 * GAZ_REPLICA_PERSIST_DELAY_S (Gazette's replicas wait likewise, facts
 * §5.5: their queue turns over every minute and attempts after two to
 * three). Draining at exit, and gaz_persister_expedite once that primary
 * is gone, end the delay. `sole`: no peer holds the content (a primary's
 * route of one), so an exit waits for it (gaz_persister_drain's count).
 * Never blocks on I/O. */
#define GAZ_REPLICA_PERSIST_DELAY_S 150
void gaz_persister_enqueue(struct gaz_persister *p, struct gaz_replica *r,
			   struct gaz_spool_done *done, bool at_once, bool sole);

/* gaz_persister_expedite ends the delay of replica `r`'s fragments (`r`
 * borrowed; `p` may be NULL: nothing happens): the primary under which
 * they completed left the route (killed, exited or moved), so its upload
 * may never come and this broker may hold the only copy. Each is uploaded
 * now unless found in the store. Never blocks on I/O. */
void gaz_persister_expedite(struct gaz_persister *p, const struct gaz_replica *r);

/* gaz_persister_pending: fragments queued or in flight. */
size_t gaz_persister_pending(struct gaz_persister *p);

/* gaz_persister_pending_for: fragments of `journal` queued or in flight to
 * be uploaded from here (a replica's delayed existence checks are not
 * counted: the primary uploads those). */
size_t gaz_persister_pending_for(struct gaz_persister *p, const char *journal);

/* gaz_persister_drain, at exit: from its first call every queued fragment
 * is uploaded from here without delay, failures retried with a back-off
 * of at most 8 s, and an authorisation failure (GAZ_EPERM) of a store
 * falls back to the journal's next store. Waits until nothing is pending
 * or deadline_ns (monotonic) passes; may be called again to wait longer.
 * Returns the fragments still pending, and in *sole (may be NULL) how
 * many of them no peer holds. Thread-safe. */
size_t gaz_persister_drain(struct gaz_persister *p, int64_t deadline_ns, size_t *sole);

/* gaz_persister_report logs each pending fragment at error level:
 * journal, range, whether it is the sole copy, attempts, the store of the
 * last failed attempt and its error. Thread-safe. */
void gaz_persister_report(struct gaz_persister *p);

/* gaz_persister_stop stops the workers (an upload in progress ends first)
 * and frees; what is still pending is reported and dropped. Returns the
 * number of fragments left unpersisted. */
size_t gaz_persister_stop(struct gaz_persister *p);

#endif
