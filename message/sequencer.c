/*
 * sequencer.c - read-committed sequencing of uncommitted messages
 * (Gazette's message.Sequencer; spec/gazette-facts.md §10.4).
 *
 * A reader queues every message it reads, in each journal's order. Per
 * (journal, producer) a *partial* keeps the exclusive lower bound of
 * clocks still to deliver (min_clock: the last ACK), the largest clock of
 * the open transaction (max_clock), the offset where that transaction's
 * first message begins (begin, -1 when none) and its envelopes that are
 * still in the ring (ring_start..ring_stop, linked through slot.next in
 * ring order). The ring holds the last ring_size envelopes of open
 * transactions; the oldest is evicted when a new one needs its slot.
 *
 * An ACK commits the producer's messages with clocks in (min_clock, ack];
 * they are dequeued in journal order: first those re-read from the
 * journal when the transaction began before its oldest envelope left in
 * the ring (the replay of [begin, ring[ring_start].begin)), then the
 * ring's, then the ACK itself. min_clock moves to each message's clock
 * only at the step after it was dequeued, so a message is delivered once
 * even when a replay returns messages the ring also held.
 *
 * Invariants:
 *   - a partial's ring_start == ring_stop iff slot[ring_start].next == -1;
 *   - a live slot holds an envelope whose msg the sequencer owns;
 *   - emit != NULL while a commit is being dequeued, and no envelope may
 *     be queued then.
 *
 * Single-threaded: one reader owns a sequencer. Logs only (no I/O).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "gazette/message.h"

struct jrec { /* a journal seen, and its read-through offset */
	char *name;
	int64_t read_through;
	bool has_offset;
	gaz_clock_t prune; /* gaz_sequencer_checkpoint's, while it runs */
	struct jrec *hnext;
};

struct partial {
	struct jrec *j;
	gaz_producer_id producer;
	gaz_clock_t min_clock; /* exclusive: at or below is delivered or dropped */
	gaz_clock_t max_clock; /* inclusive: the open span's largest clock */
	int64_t begin;         /* offset of the span's first message, or -1 */
	long ring_start, ring_stop;
	bool pending;          /* began a span since the last checkpoint */
	struct partial *hnext;
};

struct slot {
	struct gaz_envelope env;
	long next; /* the next slot of the same partial, or -1 */
	bool live;
};

struct gaz_sequencer {
	struct gaz_sequencer_opts opts;
	struct slot *ring;
	size_t ring_cap, head;
	struct jrec **jb; /* journals, chained by hash */
	size_t jcap, jn;
	struct partial **pb; /* partials, chained by hash */
	size_t pcap, pn;
	size_t n_pending;
	struct partial *emit; /* the commit being dequeued */
	struct partial zero;  /* the partial of a clock-0 envelope */
	struct gaz_envelope *dq; /* the envelope last dequeued, or NULL */
	gaz_clock_t dq_clock;
	gaz_replay_next_fn replay;
	void *replay_arg;
	struct gaz_envelope replay_env;
	bool replay_live; /* replay_env holds a message the sequencer owns */
};

const char *gaz_queue_outcome_str(enum gaz_queue_outcome o)
{
	switch (o) {
	case GAZ_QUEUE_OUTSIDE_ALREADY_ACKED: return "outsideAlreadyAcked";
	case GAZ_QUEUE_OUTSIDE_COMMIT: return "outsideCommit";
	case GAZ_QUEUE_CONTINUE_ALREADY_ACKED: return "continueAlreadyAcked";
	case GAZ_QUEUE_CONTINUE_CLOCK_LARGER: return "continueRingClockLarger";
	case GAZ_QUEUE_CONTINUE_BEGIN_SPAN: return "continueBeginSpan";
	case GAZ_QUEUE_CONTINUE_EXTEND_SPAN: return "continueExtendSpan";
	case GAZ_QUEUE_ACK_ROLLBACK: return "ackRollback";
	case GAZ_QUEUE_ACK_EMPTY: return "ackEmpty";
	case GAZ_QUEUE_ACK_COMMIT_RING: return "ackCommitRing";
	case GAZ_QUEUE_ACK_COMMIT_REPLAY: return "ackCommitReplay";
	}
	return "invalidOutcome";
}

static void free_msg(struct gaz_sequencer *s, void *msg)
{
	if (msg && s->opts.free_msg)
		s->opts.free_msg(msg, s->opts.arg);
}

/* ---- tables ---------------------------------------------------------- */

static uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	return h;
}

#define FNV_BASIS 14695981039346656037ULL

static uint64_t partial_hash(const struct jrec *j, const gaz_producer_id *p)
{
	return fnv1a(p->b, 6, fnv1a(&j, sizeof j, FNV_BASIS));
}

/* grow doubles a chained table of `cap` buckets (0: 16) once n reaches
 * cap; `link` is the offset of the chain pointer, `hash` rehashes. */
static int grow_journals(struct gaz_sequencer *s)
{
	if (s->jn < s->jcap)
		return 0;
	size_t cap = s->jcap ? s->jcap * 2 : 16;
	struct jrec **nb = calloc(cap, sizeof *nb);
	if (!nb)
		return GAZ_ENOMEM;
	for (size_t i = 0; i < s->jcap; i++) {
		for (struct jrec *j = s->jb[i], *next; j; j = next) {
			next = j->hnext;
			size_t h = fnv1a(j->name, strlen(j->name), FNV_BASIS) & (cap - 1);
			j->hnext = nb[h];
			nb[h] = j;
		}
	}
	free(s->jb);
	s->jb = nb;
	s->jcap = cap;
	return 0;
}

static struct jrec *journal_find(const struct gaz_sequencer *s, const char *name)
{
	if (!s->jcap)
		return NULL;
	size_t h = fnv1a(name, strlen(name), FNV_BASIS) & (s->jcap - 1);
	for (struct jrec *j = s->jb[h]; j; j = j->hnext)
		if (strcmp(j->name, name) == 0)
			return j;
	return NULL;
}

/* journal_intern: the record of `name`, added when new; NULL when out of
 * memory. */
static struct jrec *journal_intern(struct gaz_sequencer *s, const char *name)
{
	struct jrec *j = journal_find(s, name);
	if (j)
		return j;
	if (grow_journals(s) != 0 || !(j = calloc(1, sizeof *j)) || !(j->name = strdup(name))) {
		free(j);
		return NULL;
	}
	size_t h = fnv1a(name, strlen(name), FNV_BASIS) & (s->jcap - 1);
	j->hnext = s->jb[h];
	s->jb[h] = j;
	s->jn++;
	return j;
}

static int grow_partials(struct gaz_sequencer *s)
{
	if (s->pn < s->pcap)
		return 0;
	size_t cap = s->pcap ? s->pcap * 2 : 16;
	struct partial **nb = calloc(cap, sizeof *nb);
	if (!nb)
		return GAZ_ENOMEM;
	for (size_t i = 0; i < s->pcap; i++) {
		for (struct partial *p = s->pb[i], *next; p; p = next) {
			next = p->hnext;
			size_t h = partial_hash(p->j, &p->producer) & (cap - 1);
			p->hnext = nb[h];
			nb[h] = p;
		}
	}
	free(s->pb);
	s->pb = nb;
	s->pcap = cap;
	return 0;
}

static struct partial *partial_find(const struct gaz_sequencer *s, const struct jrec *j,
				    const gaz_producer_id *producer)
{
	if (!s->pcap)
		return NULL;
	size_t h = partial_hash(j, producer) & (s->pcap - 1);
	for (struct partial *p = s->pb[h]; p; p = p->hnext)
		if (p->j == j && memcmp(p->producer.b, producer->b, 6) == 0)
			return p;
	return NULL;
}

/* partial_add: a new partial whose last ACK was `last_ack`; NULL when out
 * of memory. */
static struct partial *partial_add(struct gaz_sequencer *s, struct jrec *j, const gaz_producer_id *producer,
				   gaz_clock_t last_ack, int64_t begin)
{
	struct partial *p;
	if (grow_partials(s) != 0 || !(p = calloc(1, sizeof *p)))
		return NULL;
	*p = (struct partial){.j = j, .producer = *producer, .min_clock = last_ack, .max_clock = last_ack,
			      .begin = begin, .ring_start = -1, .ring_stop = -1};
	size_t h = partial_hash(j, producer) & (s->pcap - 1);
	p->hnext = s->pb[h];
	s->pb[h] = p;
	s->pn++;
	return p;
}

static void set_pending(struct gaz_sequencer *s, struct partial *p, bool pending)
{
	if (p->pending != pending && p != &s->zero)
		s->n_pending += pending ? 1 : (size_t)-1;
	p->pending = pending;
}

/* ---- the ring -------------------------------------------------------- */

/* evict_at_head frees the oldest slot (the one the next envelope takes),
 * stepping its partial past it. */
static void evict_at_head(struct gaz_sequencer *s)
{
	struct slot *sl = &s->ring[s->head];
	if (!sl->live)
		return;
	struct jrec *j = journal_find(s, sl->env.journal);
	gaz_producer_id producer = gaz_uuid_producer(&sl->env.uuid);
	struct partial *p = j ? partial_find(s, j, &producer) : NULL;
	if (p && p->ring_start == (long)s->head) {
		if (p->ring_start == p->ring_stop) {
			GAZ_BUG_ON(sl->next != -1);
			p->ring_start = p->ring_stop = -1;
		} else {
			GAZ_BUG_ON(sl->next == -1);
			p->ring_start = sl->next;
		}
	}
	free_msg(s, sl->env.msg);
	*sl = (struct slot){.next = -1};
}

/* add_at_head puts env (its journal already interned) in the head slot,
 * at the end of p's chain. */
static void add_at_head(struct gaz_sequencer *s, const struct gaz_envelope *env, struct partial *p)
{
	struct slot *sl = &s->ring[s->head];
	*sl = (struct slot){.env = *env, .next = -1, .live = true};
	if (p->ring_stop == -1)
		p->ring_start = (long)s->head;
	else
		s->ring[p->ring_stop].next = (long)s->head;
	p->ring_stop = (long)s->head;
	s->head = (s->head + 1) % s->ring_cap;
}

/* ---- lifecycle ------------------------------------------------------- */

int gaz_sequencer_new(const struct gaz_sequencer_opts *opts, const struct gaz_read_through *offsets,
		      size_t n_offsets, const struct gaz_producer_state *states, size_t n_states,
		      struct gaz_sequencer **out)
{
	struct gaz_sequencer *s = calloc(1, sizeof *s);
	if (!s)
		return GAZ_ENOMEM;
	if (opts)
		s->opts = *opts;
	s->ring_cap = s->opts.ring_size ? s->opts.ring_size : 8192;
	if (!(s->ring = calloc(s->ring_cap, sizeof *s->ring)))
		goto oom;
	for (size_t i = 0; i < s->ring_cap; i++)
		s->ring[i].next = -1;
	for (size_t i = 0; i < n_offsets; i++) {
		struct jrec *j = journal_intern(s, offsets[i].journal);
		if (!j)
			goto oom;
		j->read_through = offsets[i].offset;
		j->has_offset = true;
	}
	for (size_t i = 0; i < n_states; i++) {
		struct jrec *j = journal_intern(s, states[i].journal);
		if (!j || !partial_add(s, j, &states[i].producer, states[i].last_ack, states[i].begin))
			goto oom;
	}
	*out = s;
	return 0;
oom:
	gaz_sequencer_free(s);
	return GAZ_ENOMEM;
}

void gaz_sequencer_free(struct gaz_sequencer *s)
{
	if (!s)
		return;
	if (s->dq && s->dq != &s->replay_env) /* delivered, not yet released */
		free_msg(s, s->dq->msg);
	if (s->replay_live)
		free_msg(s, s->replay_env.msg);
	for (size_t i = 0; s->ring && i < s->ring_cap; i++)
		if (s->ring[i].live && &s->ring[i].env != s->dq)
			free_msg(s, s->ring[i].env.msg);
	for (size_t i = 0; i < s->pcap; i++)
		for (struct partial *p = s->pb[i], *next; p; p = next) {
			next = p->hnext;
			free(p);
		}
	for (size_t i = 0; i < s->jcap; i++)
		for (struct jrec *j = s->jb[i], *next; j; j = next) {
			next = j->hnext;
			free(j->name);
			free(j);
		}
	free(s->pb);
	free(s->jb);
	free(s->ring);
	free(s);
}

/* ---- queueing -------------------------------------------------------- */

static void log_error(const struct gaz_envelope *env, const struct partial *p, const char *msg)
{
	char id[GAZ_UUID_STR_LEN + 1];
	gaz_uuid_format(&env->uuid, id);
	gaz_error(msg, "journal=%s begin=%lld end=%lld uuid=%s flags=%u minClock=%llu maxClock=%llu begin=%lld",
		  env->journal, (long long)env->begin, (long long)env->end, id, gaz_uuid_flags(&env->uuid),
		  (unsigned long long)p->min_clock, (unsigned long long)p->max_clock, (long long)p->begin);
}

/* classify: the outcome of an envelope of clock c and flags f for p. */
static enum gaz_queue_outcome classify(const struct gaz_sequencer *s, const struct gaz_envelope *env,
				       const struct partial *p, gaz_clock_t c, unsigned f)
{
	switch (f) {
	case GAZ_FLAG_CONTINUE_TXN:
		if (c <= p->min_clock)
			return GAZ_QUEUE_CONTINUE_ALREADY_ACKED;
		if (c <= p->max_clock)
			return GAZ_QUEUE_CONTINUE_CLOCK_LARGER;
		return p->begin == -1 ? GAZ_QUEUE_CONTINUE_BEGIN_SPAN : GAZ_QUEUE_CONTINUE_EXTEND_SPAN;
	case GAZ_FLAG_ACK_TXN:
		if (c < p->min_clock)
			log_error(env, p, "unexpected ACK_TXN which is less than lastACK (loss of exactly-once semantics)");
		if (c <= p->min_clock)
			return GAZ_QUEUE_ACK_ROLLBACK;
		if (p->begin == -1)
			return GAZ_QUEUE_ACK_EMPTY;
		/* The whole span is in the ring only if its first envelope is. */
		if (p->ring_start == -1 || s->ring[p->ring_start].env.begin != p->begin)
			return GAZ_QUEUE_ACK_COMMIT_REPLAY;
		return GAZ_QUEUE_ACK_COMMIT_RING;
	default:
		/* Taken as OUTSIDE_TXN. */
		log_error(env, p, "unexpected UUID flags");
		/* fall through */
	case GAZ_FLAG_OUTSIDE_TXN:
		if (c <= p->min_clock)
			return GAZ_QUEUE_OUTSIDE_ALREADY_ACKED;
		if (p->begin != -1)
			log_error(env, p, "unexpected OUTSIDE_TXN with a preceding CONTINUE_TXN"
					  " (mixed use of PublishUncommitted and PublishCommitted to the same journal?)");
		return GAZ_QUEUE_OUTSIDE_COMMIT;
	}
}

int gaz_sequencer_queue(struct gaz_sequencer *s, struct gaz_envelope *env, enum gaz_queue_outcome *outcome)
{
	if (s->emit)
		return GAZ_EINVAL;
	evict_at_head(s);
	struct jrec *j = journal_intern(s, env->journal);
	if (!j) {
		free_msg(s, env->msg);
		return GAZ_ENOMEM;
	}
	struct gaz_envelope e = *env;
	e.journal = j->name;
	gaz_clock_t c = gaz_uuid_clock(&e.uuid);
	unsigned f = gaz_uuid_flags(&e.uuid);
	gaz_producer_id producer = gaz_uuid_producer(&e.uuid);
	struct partial *p;
	if (c == 0) {
		/* Delivered at once, never deduplicated: a partial of its own. */
		p = &s->zero;
		*p = (struct partial){.j = j, .producer = producer, .begin = -1, .ring_start = -1, .ring_stop = -1};
		f = GAZ_FLAG_OUTSIDE_TXN;
		c = 1;
	} else if (!(p = partial_find(s, j, &producer)) && !(p = partial_add(s, j, &producer, c - 1, -1))) {
		free_msg(s, e.msg);
		return GAZ_ENOMEM;
	}
	enum gaz_queue_outcome o = classify(s, &e, p, c, f);
	switch (o) {
	case GAZ_QUEUE_OUTSIDE_ALREADY_ACKED:
	case GAZ_QUEUE_CONTINUE_ALREADY_ACKED:
	case GAZ_QUEUE_CONTINUE_CLOCK_LARGER:
		free_msg(s, e.msg);
		break;
	case GAZ_QUEUE_CONTINUE_BEGIN_SPAN:
		p->begin = e.begin;
		set_pending(s, p, true);
		/* fall through */
	case GAZ_QUEUE_CONTINUE_EXTEND_SPAN:
		add_at_head(s, &e, p);
		p->max_clock = c;
		break;
	case GAZ_QUEUE_ACK_ROLLBACK:
		free_msg(s, e.msg);
		p->min_clock = p->max_clock = c;
		p->begin = -1;
		p->ring_start = p->ring_stop = -1;
		set_pending(s, p, false);
		break;
	case GAZ_QUEUE_OUTSIDE_COMMIT:
	case GAZ_QUEUE_ACK_EMPTY:
	case GAZ_QUEUE_ACK_COMMIT_RING:
	case GAZ_QUEUE_ACK_COMMIT_REPLAY:
		add_at_head(s, &e, p);
		if (o == GAZ_QUEUE_OUTSIDE_COMMIT) {
			/* Only this message; a span left open (mixed use) is dropped. */
			p->begin = e.begin;
			p->ring_start = p->ring_stop;
		} else if (o == GAZ_QUEUE_ACK_EMPTY) {
			p->begin = e.begin;
		}
		p->max_clock = c;
		s->emit = p;
		*outcome = o;
		return 0; /* the read-through moves when the commit is dequeued */
	}
	j->read_through = e.end;
	j->has_offset = true;
	*outcome = o;
	return 0;
}

bool gaz_sequencer_replay_range(const struct gaz_sequencer *s, const char **journal, int64_t *begin,
				int64_t *end)
{
	const struct partial *p = s->emit;
	if (!p || s->dq || s->replay || p->ring_start == -1 || s->ring[p->ring_start].env.begin == p->begin)
		return false;
	*journal = p->j->name;
	*begin = p->begin;
	*end = s->ring[p->ring_start].env.begin;
	return true;
}

void gaz_sequencer_start_replay(struct gaz_sequencer *s, gaz_replay_next_fn next, void *arg)
{
	s->replay = next;
	s->replay_arg = arg;
}

/* ---- dequeueing ------------------------------------------------------ */

/* release_env frees the message of an envelope the sequencer owns (a
 * ring slot's or the replay's) and marks its holder empty: after it was
 * delivered, or when it is skipped. */
static void release_env(struct gaz_sequencer *s, struct gaz_envelope *env)
{
	free_msg(s, env->msg);
	env->msg = NULL;
	if (env == &s->replay_env)
		s->replay_live = false;
	else
		((struct slot *)((char *)env - offsetof(struct slot, env)))->live = false;
}

/* next_candidate: the next envelope of the commit, from the replay or the
 * ring, in *env (owned by the sequencer); 1 when one is there, 0 when the
 * commit's envelopes are exhausted, or an error. */
static int next_candidate(struct gaz_sequencer *s, struct gaz_envelope **env)
{
	struct partial *p = s->emit;
	while (s->replay) {
		struct gaz_envelope r = {0};
		int rc = s->replay(s->replay_arg, &r);
		if (rc == GAZ_EOF) {
			s->replay = NULL;
			break;
		}
		if (rc < 0)
			return rc;
		int64_t ring_begin = s->ring[p->ring_start].env.begin;
		const char *why = !r.journal || strcmp(r.journal, p->j->name) != 0 ? "replay of wrong journal"
				  : r.begin < p->begin					 ? "replay has wrong begin"
				  : r.end > ring_begin					 ? "replay has wrong end"
											 : NULL;
		if (why) {
			gaz_error(why, "journal=%s expect_journal=%s begin=%lld end=%lld expect_begin=%lld expect_end=%lld",
				  r.journal ? r.journal : "", p->j->name, (long long)r.begin, (long long)r.end,
				  (long long)p->begin, (long long)ring_begin);
			free_msg(s, r.msg);
			return GAZ_EPROTO;
		}
		gaz_producer_id producer = gaz_uuid_producer(&r.uuid);
		if (memcmp(producer.b, p->producer.b, 6) != 0) {
			free_msg(s, r.msg); /* another producer's */
			continue;
		}
		r.journal = p->j->name;
		s->replay_env = r;
		s->replay_live = true;
		*env = &s->replay_env;
		return 1;
	}
	if (p->ring_start == -1)
		return 0;
	struct slot *sl = &s->ring[p->ring_start];
	p->ring_start = sl->next;
	if (p->ring_start == -1)
		p->ring_stop = -1;
	*env = &sl->env;
	return 1;
}

int gaz_sequencer_step(struct gaz_sequencer *s, const struct gaz_envelope **dequeued)
{
	struct partial *p = s->emit;
	if (!p)
		return GAZ_EOF;
	if (!s->dq && !s->replay && p->ring_start != -1 && s->ring[p->ring_start].env.begin != p->begin)
		return GAZ_EINVAL; /* the caller had to start the replay */
	int64_t last_end = -1;
	if (s->dq) {
		p->min_clock = s->dq_clock;
		last_end = s->dq->end;
		release_env(s, s->dq);
		s->dq = NULL;
	}
	for (;;) {
		struct gaz_envelope *env;
		int rc = next_candidate(s, &env);
		if (rc < 0)
			return rc;
		if (rc == 0)
			break;
		gaz_clock_t c = gaz_uuid_clock(&env->uuid);
		/* At or below what was delivered, or past what the ACK commits. */
		if ((c != 0 && c <= p->min_clock) || c > p->max_clock) {
			last_end = env->end;
			release_env(s, env);
			continue;
		}
		p->begin = env->begin;
		s->dq = env;
		s->dq_clock = c;
		*dequeued = env;
		return 0;
	}
	/* The commit is dequeued: the read-through passes its last envelope
	 * (the ACK, or the OUTSIDE_TXN message). */
	GAZ_BUG_ON(last_end < 0);
	p->j->read_through = last_end;
	p->j->has_offset = true;
	p->max_clock = p->min_clock;
	p->begin = -1;
	p->ring_start = p->ring_stop = -1;
	set_pending(s, p, false);
	s->emit = NULL;
	s->dq_clock = 0;
	return GAZ_EOF;
}

bool gaz_sequencer_has_pending(const struct gaz_sequencer *s)
{
	return s->n_pending != 0;
}

/* ---- checkpoints ----------------------------------------------------- */

void gaz_sequencer_checkpoint_release(struct gaz_sequencer_checkpoint *cp)
{
	for (size_t i = 0; i < cp->n_offsets; i++)
		free(cp->offsets[i].journal);
	for (size_t i = 0; i < cp->n_states; i++)
		free(cp->states[i].journal);
	free(cp->offsets);
	free(cp->states);
	*cp = (struct gaz_sequencer_checkpoint){0};
}

/* set_prune_clocks sets each journal's prune clock: its newest last-ACK
 * less the horizon (Gazette's pruning rule); 0 keeps every producer. */
static void set_prune_clocks(struct gaz_sequencer *s, int64_t horizon_ns)
{
	for (size_t i = 0; i < s->jcap; i++)
		for (struct jrec *j = s->jb[i]; j; j = j->hnext)
			j->prune = 0;
	if (horizon_ns <= 0)
		return;
	for (size_t i = 0; i < s->pcap; i++)
		for (struct partial *p = s->pb[i]; p; p = p->hnext)
			if (p->min_clock > p->j->prune)
				p->j->prune = p->min_clock;
	gaz_clock_t horizon = (gaz_clock_t)(horizon_ns / 100) << 4;
	for (size_t i = 0; i < s->jcap; i++)
		for (struct jrec *j = s->jb[i]; j; j = j->hnext)
			j->prune = j->prune > horizon ? j->prune - horizon : 0;
}

int gaz_sequencer_checkpoint(struct gaz_sequencer *s, int64_t prune_horizon_ns, struct gaz_sequencer_checkpoint *out)
{
	struct gaz_sequencer_checkpoint cp = {0};
	cp.offsets = calloc(s->jn ? s->jn : 1, sizeof *cp.offsets);
	cp.states = calloc(s->pn ? s->pn : 1, sizeof *cp.states);
	if (!cp.offsets || !cp.states)
		goto oom;
	for (size_t i = 0; i < s->jcap; i++)
		for (struct jrec *j = s->jb[i]; j; j = j->hnext) {
			if (!j->has_offset)
				continue;
			if (!(cp.offsets[cp.n_offsets].journal = strdup(j->name)))
				goto oom;
			cp.offsets[cp.n_offsets++].offset = j->read_through;
		}
	/* First decide, then change: nothing is forgotten if memory runs out. */
	set_prune_clocks(s, prune_horizon_ns);
	for (size_t i = 0; i < s->pcap; i++)
		for (struct partial *p = s->pb[i]; p; p = p->hnext) {
			if (p->max_clock < p->j->prune)
				continue;
			struct gaz_producer_state *st = &cp.states[cp.n_states];
			if (!(st->journal = strdup(p->j->name)))
				goto oom;
			st->producer = p->producer;
			st->last_ack = p->min_clock;
			st->begin = p->begin;
			cp.n_states++;
		}
	for (size_t i = 0; i < s->pcap; i++) {
		struct partial **link = &s->pb[i];
		while (*link) {
			struct partial *p = *link;
			if (p != s->emit && p->max_clock < p->j->prune) {
				*link = p->hnext;
				s->pn--;
				free(p);
				continue;
			}
			p->pending = false;
			link = &p->hnext;
		}
	}
	s->n_pending = 0;
	*out = cp;
	return 0;
oom:
	gaz_sequencer_checkpoint_release(&cp);
	return GAZ_ENOMEM;
}
