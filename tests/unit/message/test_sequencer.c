/* test_sequencer.c - read-committed sequencing (Gazette's Sequencer rules,
 * spec/gazette-facts.md §10.4): transactions committed and rolled back,
 * duplicates dropped, messages without UUIDs, a transaction longer than
 * the ring re-read from the journal, replay errors, checkpoints that a
 * new sequencer resumes from (duplicates across the recovery, an ACK read
 * before its messages are re-read), a producer that restarts under a new
 * ProducerID, and pruning. Every message is a counted allocation, so each
 * test also proves the sequencer frees each message exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gazette/message.h"

#define J "test/journal"
#define MAXLOG 256

/* A journal of envelopes, each 10 bytes, and counts of live messages. */
struct journal {
	struct gaz_envelope log[MAXLOG];
	size_t n;
	int64_t write_head;
	int live; /* messages allocated and not yet freed */
};

static struct journal jr;

struct msg {
	int id; /* index in jr.log */
};

static void free_msg(void *m, void *arg)
{
	(void)arg;
	jr.live--;
	free(m);
}

static const gaz_producer_id A = {{0xa1, 1, 1, 1, 1, 1}};
static const gaz_producer_id B = {{0xb1, 2, 2, 2, 2, 2}};

/* gen appends a message of producer p, clock c and flags f to the
 * journal and returns its index. */
static int gen(const gaz_producer_id *p, gaz_clock_t c, unsigned f)
{
	assert_true(jr.n < MAXLOG);
	struct gaz_envelope *e = &jr.log[jr.n];
	e->journal = J;
	e->begin = jr.write_head;
	e->end = jr.write_head += 10;
	if (p)
		assert_int_equal(gaz_uuid_build(&e->uuid, p, c, f), 0);
	else
		memset(&e->uuid, 0, sizeof e->uuid);
	return (int)jr.n++;
}

/* envelope i as read: a fresh copy of its message. */
static struct gaz_envelope read_env(int i)
{
	struct gaz_envelope e = jr.log[i];
	struct msg *m = malloc(sizeof *m);
	assert_non_null(m);
	m->id = i;
	e.msg = m;
	jr.live++;
	return e;
}

static enum gaz_queue_outcome queue(struct gaz_sequencer *s, int i)
{
	struct gaz_envelope e = read_env(i);
	enum gaz_queue_outcome o;
	assert_int_equal(gaz_sequencer_queue(s, &e, &o), 0);
	return o;
}

/* dequeue steps through a commit, writing the ids delivered into got (up
 * to max); returns how many, or -1 on an error other than EOF. */
static int dequeue(struct gaz_sequencer *s, int *got, int max)
{
	int n = 0;
	const struct gaz_envelope *d;
	int rc;
	while ((rc = gaz_sequencer_step(s, &d)) == 0) {
		assert_true(n < max);
		assert_string_equal(d->journal, J);
		got[n++] = ((struct msg *)d->msg)->id;
	}
	return rc == GAZ_EOF ? n : -1;
}

#define EXPECT_DEQUEUE(s, ...)                                                   \
	do {                                                                     \
		int want_[] = {__VA_ARGS__}, got_[64];                           \
		int n_ = dequeue((s), got_, 64);                                 \
		assert_int_equal(n_, (int)(sizeof want_ / sizeof want_[0]));     \
		assert_memory_equal(got_, want_, sizeof want_);                  \
	} while (0)

static struct gaz_sequencer *new_seq(size_t ring, const struct gaz_sequencer_checkpoint *cp)
{
	struct gaz_sequencer_opts o = {.ring_size = ring, .free_msg = free_msg};
	struct gaz_sequencer *s;
	assert_int_equal(gaz_sequencer_new(&o, cp ? cp->offsets : NULL, cp ? cp->n_offsets : 0,
					   cp ? cp->states : NULL, cp ? cp->n_states : 0, &s),
			 0);
	return s;
}

static int setup(void **state)
{
	(void)state;
	memset(&jr, 0, sizeof jr);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_int_equal(jr.live, 0); /* every message freed, once */
	return 0;
}

static int64_t read_through(const struct gaz_sequencer_checkpoint *cp)
{
	for (size_t i = 0; i < cp->n_offsets; i++)
		if (strcmp(cp->offsets[i].journal, J) == 0)
			return cp->offsets[i].offset;
	return -1;
}

static void test_transactions(void **state)
{
	(void)state;
	struct gaz_sequencer *s = new_seq(0, NULL);
	int a1 = gen(&A, 100, GAZ_FLAG_CONTINUE_TXN), b1 = gen(&B, 200, GAZ_FLAG_CONTINUE_TXN),
	    a2 = gen(&A, 300, GAZ_FLAG_CONTINUE_TXN), a3 = gen(&A, 400, GAZ_FLAG_CONTINUE_TXN),
	    ackA = gen(&A, 350, GAZ_FLAG_ACK_TXN); /* commits a1, a2, not a3 */
	assert_int_equal(queue(s, a1), GAZ_QUEUE_CONTINUE_BEGIN_SPAN);
	assert_true(gaz_sequencer_has_pending(s));
	assert_int_equal(queue(s, b1), GAZ_QUEUE_CONTINUE_BEGIN_SPAN);
	assert_int_equal(queue(s, a2), GAZ_QUEUE_CONTINUE_EXTEND_SPAN);
	assert_int_equal(queue(s, a3), GAZ_QUEUE_CONTINUE_EXTEND_SPAN);
	/* Queueing while a commit waits to be dequeued is refused. */
	assert_int_equal(queue(s, ackA), GAZ_QUEUE_ACK_COMMIT_RING);
	struct gaz_envelope e = read_env(a1);
	enum gaz_queue_outcome o;
	assert_int_equal(gaz_sequencer_queue(s, &e, &o), GAZ_EINVAL);
	free_msg(e.msg, NULL);
	EXPECT_DEQUEUE(s, a1, a2, ackA);

	/* Duplicates: a re-sent a1 and a2 are below the ACK. */
	assert_int_equal(queue(s, a1), GAZ_QUEUE_CONTINUE_ALREADY_ACKED);
	/* a3 (400) was above the ACK; the span restarts after it. A second
	 * copy of a message already in the span is dropped. */
	int a4 = gen(&A, 500, GAZ_FLAG_CONTINUE_TXN);
	assert_int_equal(queue(s, a4), GAZ_QUEUE_CONTINUE_BEGIN_SPAN);
	assert_int_equal(queue(s, a4), GAZ_QUEUE_CONTINUE_CLOCK_LARGER);
	/* An ACK at the last ACK's clock rolls a4 back. */
	int rollA = gen(&A, 350, GAZ_FLAG_ACK_TXN);
	assert_int_equal(queue(s, rollA), GAZ_QUEUE_ACK_ROLLBACK);
	/* B's span commits with its ACK; a re-read ACK commits nothing. */
	int ackB = gen(&B, 250, GAZ_FLAG_ACK_TXN);
	assert_int_equal(queue(s, ackB), GAZ_QUEUE_ACK_COMMIT_RING);
	EXPECT_DEQUEUE(s, b1, ackB);
	assert_int_equal(queue(s, ackB), GAZ_QUEUE_ACK_ROLLBACK);
	/* An ACK with no span: only the ACK is dequeued. */
	int ackB2 = gen(&B, 260, GAZ_FLAG_ACK_TXN);
	assert_int_equal(queue(s, ackB2), GAZ_QUEUE_ACK_EMPTY);
	EXPECT_DEQUEUE(s, ackB2);
	assert_false(gaz_sequencer_has_pending(s));

	struct gaz_sequencer_checkpoint cp;
	assert_int_equal(gaz_sequencer_checkpoint(s, 0, &cp), 0);
	assert_true(read_through(&cp) == jr.log[ackB2].end);
	assert_int_equal(cp.n_states, 2);
	for (size_t i = 0; i < cp.n_states; i++) {
		bool is_a = memcmp(cp.states[i].producer.b, A.b, 6) == 0;
		assert_true(cp.states[i].last_ack == (is_a ? 350u : 260u));
		assert_true(cp.states[i].begin == -1);
	}
	gaz_sequencer_checkpoint_release(&cp);
	gaz_sequencer_free(s);
}

static void test_outside_and_zero(void **state)
{
	(void)state;
	struct gaz_sequencer *s = new_seq(0, NULL);
	int o1 = gen(&A, 100, GAZ_FLAG_OUTSIDE_TXN), o2 = gen(&A, 200, GAZ_FLAG_OUTSIDE_TXN);
	int z = gen(NULL, 0, 0);
	int odd = gen(&B, 100, 0x10); /* unknown flags: taken as OUTSIDE_TXN */
	assert_int_equal(queue(s, o1), GAZ_QUEUE_OUTSIDE_COMMIT);
	EXPECT_DEQUEUE(s, o1);
	assert_int_equal(queue(s, o1), GAZ_QUEUE_OUTSIDE_ALREADY_ACKED);
	assert_int_equal(queue(s, o2), GAZ_QUEUE_OUTSIDE_COMMIT);
	EXPECT_DEQUEUE(s, o2);
	/* No UUID: delivered every time it is read. */
	assert_int_equal(queue(s, z), GAZ_QUEUE_OUTSIDE_COMMIT);
	EXPECT_DEQUEUE(s, z);
	assert_int_equal(queue(s, z), GAZ_QUEUE_OUTSIDE_COMMIT);
	EXPECT_DEQUEUE(s, z);
	assert_int_equal(queue(s, odd), GAZ_QUEUE_OUTSIDE_COMMIT);
	EXPECT_DEQUEUE(s, odd);
	/* Mixed use: an OUTSIDE_TXN after an open span delivers itself only. */
	int c1 = gen(&A, 300, GAZ_FLAG_CONTINUE_TXN), o3 = gen(&A, 400, GAZ_FLAG_OUTSIDE_TXN);
	assert_int_equal(queue(s, c1), GAZ_QUEUE_CONTINUE_BEGIN_SPAN);
	assert_int_equal(queue(s, o3), GAZ_QUEUE_OUTSIDE_COMMIT);
	EXPECT_DEQUEUE(s, o3);
	gaz_sequencer_free(s);
}

/* Replay: an iterator over [from, to) of the journal. */
struct replay {
	int64_t from, to;
	size_t at;
	const char *journal; /* NULL: the log's */
	int64_t shift;       /* added to begin (a wrong range) */
	int64_t end_shift;   /* added to end */
};

static int replay_next(void *arg, struct gaz_envelope *out)
{
	struct replay *r = arg;
	while (r->at < jr.n && jr.log[r->at].begin < r->from)
		r->at++;
	if (r->at >= jr.n || jr.log[r->at].begin >= r->to)
		return GAZ_EOF;
	*out = read_env((int)r->at++);
	if (r->journal)
		out->journal = r->journal;
	out->begin += r->shift;
	out->end += r->end_shift;
	return 0;
}

static void test_ring_overflow_replays(void **state)
{
	(void)state;
	/* A ring of 3: A's five-message transaction interleaves with B's
	 * messages, so its start is evicted before the ACK. */
	struct gaz_sequencer *s = new_seq(3, NULL);
	int a[5], b[3];
	a[0] = gen(&A, 100, GAZ_FLAG_CONTINUE_TXN);
	b[0] = gen(&B, 100, GAZ_FLAG_CONTINUE_TXN);
	a[1] = gen(&A, 200, GAZ_FLAG_CONTINUE_TXN);
	b[1] = gen(&B, 200, GAZ_FLAG_CONTINUE_TXN);
	a[2] = gen(&A, 300, GAZ_FLAG_CONTINUE_TXN);
	a[3] = gen(&A, 400, GAZ_FLAG_CONTINUE_TXN);
	b[2] = gen(&B, 300, GAZ_FLAG_CONTINUE_TXN);
	a[4] = gen(&A, 500, GAZ_FLAG_CONTINUE_TXN);
	int ack = gen(&A, 600, GAZ_FLAG_ACK_TXN);
	for (int i = 0; i < ack; i++)
		assert_true(queue(s, i) <= GAZ_QUEUE_CONTINUE_EXTEND_SPAN);
	assert_int_equal(queue(s, ack), GAZ_QUEUE_ACK_COMMIT_REPLAY);
	/* Stepping without the replay is refused. */
	const struct gaz_envelope *d;
	assert_int_equal(gaz_sequencer_step(s, &d), GAZ_EINVAL);
	const char *j;
	int64_t from, to;
	assert_true(gaz_sequencer_replay_range(s, &j, &from, &to));
	assert_string_equal(j, J);
	assert_true(from == jr.log[a[0]].begin);
	assert_true(to == jr.log[a[4]].begin); /* a[4] and the ACK are still in the ring */
	struct replay r = {.from = from, .to = to};
	gaz_sequencer_start_replay(s, replay_next, &r);
	assert_false(gaz_sequencer_replay_range(s, &j, &from, &to));
	EXPECT_DEQUEUE(s, a[0], a[1], a[2], a[3], a[4], ack);

	/* B's commit also starts before its ring entries (all evicted). */
	int ackB = gen(&B, 400, GAZ_FLAG_ACK_TXN);
	assert_int_equal(queue(s, ackB), GAZ_QUEUE_ACK_COMMIT_REPLAY);
	assert_true(gaz_sequencer_replay_range(s, &j, &from, &to));
	assert_true(from == jr.log[b[0]].begin && to == jr.log[ackB].begin);
	r = (struct replay){.from = from, .to = to};
	gaz_sequencer_start_replay(s, replay_next, &r);
	EXPECT_DEQUEUE(s, b[0], b[1], b[2], ackB);
	gaz_sequencer_free(s);
}

static void test_replay_errors(void **state)
{
	(void)state;
	struct replay cases[] = {
		{.journal = "other/journal"}, /* another journal */
		{.shift = -5},                /* before the range */
		{.end_shift = 100},           /* past its end */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		memset(&jr, 0, sizeof jr);
		struct gaz_sequencer *s = new_seq(1, NULL);
		(void)gen(&A, 100, GAZ_FLAG_CONTINUE_TXN);
		(void)gen(&A, 200, GAZ_FLAG_CONTINUE_TXN);
		int ack = gen(&A, 300, GAZ_FLAG_ACK_TXN);
		for (int k = 0; k < ack; k++)
			(void)queue(s, k);
		assert_int_equal(queue(s, ack), GAZ_QUEUE_ACK_COMMIT_REPLAY);
		const char *j;
		int64_t from, to;
		assert_true(gaz_sequencer_replay_range(s, &j, &from, &to));
		struct replay r = cases[i];
		r.from = from;
		r.to = to;
		gaz_sequencer_start_replay(s, replay_next, &r);
		const struct gaz_envelope *d;
		assert_int_equal(gaz_sequencer_step(s, &d), GAZ_EPROTO);
		gaz_sequencer_free(s);
		assert_int_equal(jr.live, 0);
	}
}

/* A consumer checkpoints mid-transaction, dies, and a new sequencer
 * resumes from the checkpoint: the reader starts again at read-through,
 * reads the ACK first (its span is before read-through and so in no
 * ring), and the span is replayed from the producer's begin. */
static void test_resume_ack_before_reread(void **state)
{
	(void)state;
	struct gaz_sequencer *s = new_seq(0, NULL);
	int a0 = gen(&A, 100, GAZ_FLAG_CONTINUE_TXN), o = gen(&B, 100, GAZ_FLAG_OUTSIDE_TXN),
	    a1 = gen(&A, 200, GAZ_FLAG_CONTINUE_TXN);
	assert_int_equal(queue(s, a0), GAZ_QUEUE_CONTINUE_BEGIN_SPAN);
	assert_int_equal(queue(s, o), GAZ_QUEUE_OUTSIDE_COMMIT);
	EXPECT_DEQUEUE(s, o);
	assert_int_equal(queue(s, a1), GAZ_QUEUE_CONTINUE_EXTEND_SPAN);
	struct gaz_sequencer_checkpoint cp;
	assert_int_equal(gaz_sequencer_checkpoint(s, 0, &cp), 0);
	assert_true(read_through(&cp) == jr.log[a1].end);
	for (size_t i = 0; i < cp.n_states; i++)
		if (memcmp(cp.states[i].producer.b, A.b, 6) == 0)
			assert_true(cp.states[i].begin == jr.log[a0].begin && cp.states[i].last_ack == 99);
	gaz_sequencer_free(s);

	/* The new one reads on from read-through: first the ACK. */
	int ack = gen(&A, 300, GAZ_FLAG_ACK_TXN);
	s = new_seq(0, &cp);
	gaz_sequencer_checkpoint_release(&cp);
	assert_int_equal(queue(s, ack), GAZ_QUEUE_ACK_COMMIT_REPLAY);
	const char *j;
	int64_t from, to;
	assert_true(gaz_sequencer_replay_range(s, &j, &from, &to));
	assert_true(from == jr.log[a0].begin && to == jr.log[ack].begin);
	struct replay r = {.from = from, .to = to};
	gaz_sequencer_start_replay(s, replay_next, &r);
	/* B's OUTSIDE_TXN in the range is another producer's: skipped. */
	EXPECT_DEQUEUE(s, a0, a1, ack);
	gaz_sequencer_free(s);
}

/* Duplicates across a recovery: a consumer checkpoints after a commit,
 * then re-reads (its read-through was older in the store) the same
 * messages; a new sequencer from the checkpoint drops them. */
static void test_duplicates_across_recovery(void **state)
{
	(void)state;
	struct gaz_sequencer *s = new_seq(0, NULL);
	int a0 = gen(&A, 100, GAZ_FLAG_CONTINUE_TXN), a1 = gen(&A, 200, GAZ_FLAG_CONTINUE_TXN),
	    ack = gen(&A, 300, GAZ_FLAG_ACK_TXN), o = gen(&B, 50, GAZ_FLAG_OUTSIDE_TXN);
	(void)queue(s, a0);
	(void)queue(s, a1);
	assert_int_equal(queue(s, ack), GAZ_QUEUE_ACK_COMMIT_RING);
	EXPECT_DEQUEUE(s, a0, a1, ack);
	assert_int_equal(queue(s, o), GAZ_QUEUE_OUTSIDE_COMMIT);
	EXPECT_DEQUEUE(s, o);
	struct gaz_sequencer_checkpoint cp;
	assert_int_equal(gaz_sequencer_checkpoint(s, 0, &cp), 0);
	gaz_sequencer_free(s);

	s = new_seq(0, &cp);
	gaz_sequencer_checkpoint_release(&cp);
	assert_int_equal(queue(s, a0), GAZ_QUEUE_CONTINUE_ALREADY_ACKED);
	assert_int_equal(queue(s, a1), GAZ_QUEUE_CONTINUE_ALREADY_ACKED);
	assert_int_equal(queue(s, ack), GAZ_QUEUE_ACK_ROLLBACK);
	assert_int_equal(queue(s, o), GAZ_QUEUE_OUTSIDE_ALREADY_ACKED);
	/* New messages still flow. */
	int a2 = gen(&A, 400, GAZ_FLAG_OUTSIDE_TXN);
	assert_int_equal(queue(s, a2), GAZ_QUEUE_OUTSIDE_COMMIT);
	EXPECT_DEQUEUE(s, a2);
	gaz_sequencer_free(s);
}

/* A publisher restarts under a new ProducerID: its old producer's open
 * transaction stays uncommitted while the new one's commit; the old one's
 * span commits when its ACK arrives (as a consumer re-sends the ACK
 * intents of its last checkpoint). */
static void test_new_producer_id(void **state)
{
	(void)state;
	static const gaz_producer_id A2 = {{0xa3, 9, 9, 9, 9, 9}};
	struct gaz_sequencer *s = new_seq(0, NULL);
	int a0 = gen(&A, 100, GAZ_FLAG_CONTINUE_TXN), a1 = gen(&A, 200, GAZ_FLAG_CONTINUE_TXN);
	int n0 = gen(&A2, 50, GAZ_FLAG_CONTINUE_TXN), nack = gen(&A2, 60, GAZ_FLAG_ACK_TXN);
	int ack = gen(&A, 300, GAZ_FLAG_ACK_TXN);
	(void)queue(s, a0);
	(void)queue(s, a1);
	assert_int_equal(queue(s, n0), GAZ_QUEUE_CONTINUE_BEGIN_SPAN);
	assert_int_equal(queue(s, nack), GAZ_QUEUE_ACK_COMMIT_RING);
	EXPECT_DEQUEUE(s, n0, nack);
	assert_true(gaz_sequencer_has_pending(s)); /* A's span */
	assert_int_equal(queue(s, ack), GAZ_QUEUE_ACK_COMMIT_RING);
	EXPECT_DEQUEUE(s, a0, a1, ack);
	assert_false(gaz_sequencer_has_pending(s));
	gaz_sequencer_free(s);
}

/* step1: one step, which must dequeue message i. */
static void step1(struct gaz_sequencer *s, int i)
{
	const struct gaz_envelope *d;
	assert_int_equal(gaz_sequencer_step(s, &d), 0);
	assert_int_equal(((struct msg *)d->msg)->id, i);
}

/* replay_all starts the replay the commit needs, which must be [from,
 * to) of the journal. */
static struct replay replay_all(struct gaz_sequencer *s, int64_t want_from, int64_t want_to)
{
	const char *j;
	int64_t from, to;
	assert_true(gaz_sequencer_replay_range(s, &j, &from, &to));
	assert_true(from == want_from && to == want_to);
	return (struct replay){.from = from, .to = to};
}

/* reload: a new sequencer from s's checkpoint, twice over (a checkpoint
 * round-trips unchanged). */
static struct gaz_sequencer *reload(struct gaz_sequencer *s)
{
	struct gaz_sequencer_checkpoint cp;
	assert_int_equal(gaz_sequencer_checkpoint(s, 0, &cp), 0);
	struct gaz_sequencer *s2 = new_seq(12, &cp);
	gaz_sequencer_checkpoint_release(&cp);
	assert_int_equal(gaz_sequencer_checkpoint(s2, 0, &cp), 0);
	struct gaz_sequencer *s3 = new_seq(12, &cp);
	gaz_sequencer_checkpoint_release(&cp);
	gaz_sequencer_free(s2);
	return s3;
}

/* A checkpoint taken partway through dequeueing a commit (the consumer
 * crashed there) resumes it from the first message not yet consumed
 * (Gazette's RoundTripDuringDequeue case). */
static void test_checkpoint_during_dequeue(void **state)
{
	(void)state;
	struct gaz_sequencer *s1 = new_seq(12, NULL);
	int a1 = gen(&A, 1, GAZ_FLAG_CONTINUE_TXN), a2 = gen(&A, 2, GAZ_FLAG_CONTINUE_TXN),
	    a3 = gen(&A, 3, GAZ_FLAG_ACK_TXN), a4 = gen(&A, 4, GAZ_FLAG_CONTINUE_TXN),
	    a5 = gen(&A, 5, GAZ_FLAG_CONTINUE_TXN), a6 = gen(&A, 6, GAZ_FLAG_ACK_TXN);
	(void)queue(s1, a1);
	(void)queue(s1, a2);
	assert_int_equal(queue(s1, a3), GAZ_QUEUE_ACK_COMMIT_RING);
	step1(s1, a1); /* dequeued, not consumed: crash */
	struct gaz_sequencer *s2 = reload(s1);
	struct gaz_sequencer_checkpoint cp;
	assert_int_equal(gaz_sequencer_checkpoint(s2, 0, &cp), 0);
	assert_true(read_through(&cp) == jr.log[a2].end);
	assert_int_equal(cp.n_states, 1);
	assert_true(cp.states[0].begin == jr.log[a1].begin && cp.states[0].last_ack == 0);
	gaz_sequencer_checkpoint_release(&cp);
	/* s2 reads the ACK again and replays a1, a2. */
	assert_int_equal(queue(s2, a3), GAZ_QUEUE_ACK_COMMIT_REPLAY);
	struct replay r = replay_all(s2, jr.log[a1].begin, jr.log[a3].begin);
	gaz_sequencer_start_replay(s2, replay_next, &r);
	EXPECT_DEQUEUE(s2, a1, a2, a3);
	EXPECT_DEQUEUE(s1, a2, a3);
	gaz_sequencer_free(s2);

	/* Again, crashing after a4 was consumed and a5 dequeued. */
	(void)queue(s1, a4);
	(void)queue(s1, a5);
	assert_int_equal(queue(s1, a6), GAZ_QUEUE_ACK_COMMIT_RING);
	step1(s1, a4);
	step1(s1, a5);
	s2 = reload(s1);
	assert_int_equal(gaz_sequencer_checkpoint(s2, 0, &cp), 0);
	assert_true(read_through(&cp) == jr.log[a5].end);
	assert_true(cp.states[0].begin == jr.log[a5].begin && cp.states[0].last_ack == 4);
	gaz_sequencer_checkpoint_release(&cp);
	assert_int_equal(queue(s2, a6), GAZ_QUEUE_ACK_COMMIT_REPLAY);
	r = replay_all(s2, jr.log[a5].begin, jr.log[a6].begin);
	gaz_sequencer_start_replay(s2, replay_next, &r);
	EXPECT_DEQUEUE(s2, a5, a6); /* not a4 */
	gaz_sequencer_free(s2);
	gaz_sequencer_free(s1);
}

/* Duplicates that straddle a checkpoint: the restored sequencer holds
 * them as the span's continuation, and its commit replays the originals
 * (Gazette's StraddleDuplicate case). */
static void test_straddle_duplicate(void **state)
{
	(void)state;
	struct gaz_sequencer *s1 = new_seq(12, NULL);
	int a1 = gen(&A, 1, GAZ_FLAG_CONTINUE_TXN), a2 = gen(&A, 2, GAZ_FLAG_CONTINUE_TXN),
	    a3 = gen(&A, 3, GAZ_FLAG_CONTINUE_TXN), d1 = gen(&A, 1, GAZ_FLAG_CONTINUE_TXN),
	    d2 = gen(&A, 2, GAZ_FLAG_CONTINUE_TXN), d3 = gen(&A, 3, GAZ_FLAG_CONTINUE_TXN),
	    ack = gen(&A, 4, GAZ_FLAG_ACK_TXN);
	(void)queue(s1, a1);
	(void)queue(s1, a2);
	(void)queue(s1, a3);
	struct gaz_sequencer *s2 = reload(s1);
	assert_int_equal(d2, d1 + 1);
	for (int i = d1; i <= d3; i++) {
		assert_int_equal(queue(s1, i), GAZ_QUEUE_CONTINUE_CLOCK_LARGER);
		assert_int_equal(queue(s2, i), GAZ_QUEUE_CONTINUE_EXTEND_SPAN);
	}
	assert_int_equal(queue(s1, ack), GAZ_QUEUE_ACK_COMMIT_RING);
	assert_int_equal(queue(s2, ack), GAZ_QUEUE_ACK_COMMIT_REPLAY);
	struct replay r = replay_all(s2, jr.log[a1].begin, jr.log[d1].begin);
	gaz_sequencer_start_replay(s2, replay_next, &r);
	EXPECT_DEQUEUE(s1, a1, a2, a3, ack);
	EXPECT_DEQUEUE(s2, a1, a2, a3, ack);
	gaz_sequencer_free(s2);
	gaz_sequencer_free(s1);
}

static void test_pruning(void **state)
{
	(void)state;
	struct gaz_sequencer *s = new_seq(0, NULL);
	/* A last acknowledged at 1 s, B at 100 s (clock units: 1 s = 1e7 << 4). */
	gaz_clock_t sec = (gaz_clock_t)10000000 << 4;
	int a = gen(&A, 1 * sec, GAZ_FLAG_OUTSIDE_TXN), b = gen(&B, 100 * sec, GAZ_FLAG_OUTSIDE_TXN);
	(void)queue(s, a);
	EXPECT_DEQUEUE(s, a);
	(void)queue(s, b);
	EXPECT_DEQUEUE(s, b);
	struct gaz_sequencer_checkpoint cp;
	/* A horizon of 200 s keeps both, 50 s drops A. */
	assert_int_equal(gaz_sequencer_checkpoint(s, 200 * 1000000000LL, &cp), 0);
	assert_int_equal(cp.n_states, 2);
	gaz_sequencer_checkpoint_release(&cp);
	assert_int_equal(gaz_sequencer_checkpoint(s, 50 * 1000000000LL, &cp), 0);
	assert_int_equal(cp.n_states, 1);
	assert_memory_equal(cp.states[0].producer.b, B.b, 6);
	gaz_sequencer_checkpoint_release(&cp);
	/* A is forgotten: its old message is new again (at-least-once past
	 * the horizon, as in Gazette). */
	assert_int_equal(queue(s, a), GAZ_QUEUE_OUTSIDE_COMMIT);
	EXPECT_DEQUEUE(s, a);
	gaz_sequencer_free(s);
}

static void test_outcome_names(void **state)
{
	(void)state;
	assert_string_equal(gaz_queue_outcome_str(GAZ_QUEUE_ACK_COMMIT_RING), "ackCommitRing");
	assert_string_equal(gaz_queue_outcome_str(GAZ_QUEUE_CONTINUE_CLOCK_LARGER), "continueRingClockLarger");
	assert_string_equal(gaz_queue_outcome_str((enum gaz_queue_outcome)99), "invalidOutcome");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_transactions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_outside_and_zero, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ring_overflow_replays, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replay_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resume_ack_before_reread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicates_across_recovery, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_producer_id, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_during_dequeue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_straddle_duplicate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pruning, setup, teardown),
		cmocka_unit_test_setup_teardown(test_outcome_names, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
