/*
 * read_fanout.h - blocking readers parked at a journal's write head share
 * one delivery per commit (issue 39): the new bytes are read from the
 * spool and packed once, and the same packed responses go to every reader
 * of the replica's head group. See read_fanout.c for the states and locks.
 */
#ifndef GAZ_BROKER_READ_FANOUT_H
#define GAZ_BROKER_READ_FANOUT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/notify.h"

struct gaz_replica;
struct gaz_rpc_call;

/* A Read's content chunk at most, in bytes: 32 KiB - 32, as Gazette's
 * (read.c's own reads and the head group's deliveries alike). */
#define GAZ_READ_CHUNK 32736

/* A Read parked at the write head, as its head group sees it; embedded in
 * read.c's state of the read. While `member` is set, the group owns
 * `offset` and sends on `call`; the read itself touches neither until it
 * left (gaz_head_leave). Fields under the group's mu. */
struct gaz_head_reader {
	struct gaz_head_reader *prev, *next; /* in the group */
	struct gaz_rpc_call *call;
	int64_t offset; /* the read's next offset: its group's offset */
	bool member;
};

/* The head group of one replica (embedded in struct gaz_replica). */
struct gaz_head_group {
	struct gaz_replica *r;
	pthread_mutex_t mu;              /* guards the fields below it */
	pthread_cond_t cv;               /* a round's slice ran on a poller */
	struct gaz_head_reader *members; /* between rounds, all wait at `offset` */
	atomic_size_t n;                 /* members (written under mu) */
	int64_t offset;                  /* meaningful while n > 0 */
	/* A round under way (read_fanout.c's send_round), which lets go of
	 * mu between slices of members: `cursor` is the next member it
	 * serves, and nothing joins until it ends. */
	bool in_round;
	struct gaz_head_reader *cursor;
	/* Scheduling, under the fan-out queue's own lock (read_fanout.c). */
	bool queued, running, again;
	struct gaz_head_group *next_queued;
	struct gaz_waiter w;             /* in the replica's notifier for its life */
};

/* gaz_head_group_init readies `g` for replica `r` and registers it with
 * r->notifier (initialised before): every broadcast (a commit, an index
 * change, teardown) schedules a delivery while the group has members. */
void gaz_head_group_init(struct gaz_head_group *g, struct gaz_replica *r);

/* gaz_head_group_release frees `g`'s lock: the replica's last reference is
 * gone, so the group has no member and no delivery scheduled. */
void gaz_head_group_release(struct gaz_head_group *g);

/* gaz_head_join makes `hr` a member waiting at `offset` when the group
 * waits there too (or is empty). The caller holds the replica's mu, under
 * which it found `offset` to be the write head, and has sent the read's
 * first response (its header). Returns whether `hr` joined; if so the
 * read leaves the replica's notifier (still under mu: commits reach it
 * through the group, and a broadcast does not visit it) and parks
 * without a further check. */
bool gaz_head_join(struct gaz_head_group *g, struct gaz_head_reader *hr, int64_t offset);

/* gaz_head_leave takes `hr` out of the group if it is still in (a
 * delivery may have sent it away already) and returns the read's next
 * offset: where the group's deliveries took it. The read calls it first
 * whenever it resumes after joining, and joins the notifier again before
 * it looks at the replica. */
int64_t gaz_head_leave(struct gaz_head_group *g, struct gaz_head_reader *hr);

/* gaz_read_fanout_stop ends the delivery threads (started on first use)
 * once the broker's calls are all gone; no delivery runs after it. */
void gaz_read_fanout_stop(void);

#endif
