/*
 * txn.c - a primary shard's consumer transactions (Gazette's
 * consumer/transaction.go), in the shard's steps (shard.c): gaz_txn_step
 * runs until the transaction would wait and returns when to run again.
 *
 * Each source journal is read uncommitted, from the checkpoint's
 * read-through offset (at least the source's min_offset), by the shard's
 * steps themselves: they try its sources round robin
 * (gaz_message_reader_try_next) and wait until a source's wake from the
 * client's pollers kicks the shard, so a shard holds no thread and
 * reads messages only as it consumes them (Gazette's read_channel_size,
 * the bound of its read-ahead channel, has nothing to bound here). The
 * shard's steps queue every envelope on the shard's sequencer, which holds
 * transactional messages until their producer's ACK and drops duplicates,
 * and hands each committed message to the application. A transaction:
 *   - begins with its first message (the store's begin, then the
 *     application's begin_txn; the shard's clock moves to now);
 *   - takes messages while any arrive, for at least min_txn_duration, and
 *     past it while a producer's transaction begun since the checkpoint is
 *     still open (unless disable_wait_for_ack), but never past
 *     max_txn_duration;
 *   - never commits before the previous transaction's ACKs are written
 *     (its barrier);
 *   - commits: the application's finalize; the sequencer's checkpoint and
 *     the publisher's ACK intents encoded as a consumer.Checkpoint; every
 *     message published waited for; the store's commit of the checkpoint
 *     with the application's changes (the fence refuses a zombie's); then
 *     the ACK intents written, which become the next one's barrier.
 * When the barrier resolves, the shard's progress (what Stat waits on)
 * moves to the committed read-through offsets and the ACKs' offsets.
 * At start the checkpoint's own ACK intents are written again first: a
 * primary that died after its commit and before its ACKs leaves them to
 * its successor.
 *
 * A transaction claims the shard's store from its begin to its commit or
 * abort (gaz_shard_store_claim), so that an application's method that
 * borrowed the store between transactions is never inside one; a
 * transaction about to begin while one has it waits for a kick.
 *
 * The previous transaction's ACKs are waited for without a thread: each
 * ACK's completion (an append worker's notify) counts down the barrier,
 * and the last one kicks the shard. A step runs for at most
 * TXN_SLICE_NS before the pool's other shards go.
 *
 * Locking: the wakes' mutex guards the sources' `ready` flags
 * and the barrier's count and `done`; the source wakes (client pollers)
 * and ACK notifies (append workers) touch only those. Everything else
 * here belongs to the shard's steps. Progress is written under the
 * shard's progress_mu; the store's claim under the shard's mu (shard.c).
 */
#include "consumer/runtime_int.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "gazette/append_service.h"
#include "gazette/consumer.h"

/* Gazette's messageSequencerPruneHorizon: producers silent this long
 * leave the checkpoint. */
#define PRUNE_HORIZON_NS (24LL * 3600 * GAZ_NS_PER_S)
/* A step runs a shard's transactions for at most this long before the
 * pool's other shards go (it goes on at its next step). */
#define TXN_SLICE_NS (20 * GAZ_NS_PER_MS)

/* ---- the shard's wakes: sources and the barrier -------------------------- */

struct read_item {
	struct gaz_envelope env; /* msg owned by the item */
	int rc;                  /* a source's error (env unused) */
	char *err;
};

/* What the shard's steps wait for: its sources' and its barrier's
 * wakes, which come from client pollers and append workers. Each wake
 * kicks the shard under mu, so that once the shard's steps have seen it
 * under mu the waker no longer touches the wakes nor the shard; a wake
 * that comes while a step runs makes the pool run the next one
 * (common/steps.h), so a step that found nothing may return at once. */
struct wakes {
	pthread_mutex_t mu;
	pthread_cond_t cond;     /* the barrier done (barrier_wait, at the end) */
	bool barrier_done;       /* the barrier's ACKs all completed */
	size_t barrier_left;     /* its ACKs not completed yet */
	struct gaz_shard *shard; /* kicked */
};

static void wakes_init(struct wakes *q, struct gaz_shard *shard)
{
	*q = (struct wakes){.barrier_done = true, .shard = shard};
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cond, NULL);
}

static void wakes_release(struct wakes *q)
{
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->mu);
}

/* ---- source readers ---------------------------------------------------------- */

/* A source journal, read by the shard's steps with tries
 * (gaz_message_reader_try_next): no thread of its own. `ready` (under
 * the wakes' mu) says its reader's wake came, or it has buffered
 * messages, or it was never tried: try it. */
struct source {
	struct wakes *q;
	struct gaz_message_reader *r;
	struct gaz_reader_wake w;
	bool ready;
	bool ended;              /* cancelled: nothing more comes */
	int64_t retry_at;        /* a retry's backoff ends (monotonic), or NEVER */
};

static void source_woken(void *arg)
{
	struct source *src = arg;

	pthread_mutex_lock(&src->q->mu);
	src->ready = true;
	gaz_shard_kick(src->q->shard);
	pthread_mutex_unlock(&src->q->mu);
}

/* Tries the source once, if it is ready or its backoff is over: 1 with
 * *it (a message, or an error to report), 0 when it has nothing now (its
 * wake armed, or its backoff set). */
static int source_try(struct source *src, int64_t now, struct read_item *it)
{
	struct gaz_status st = {0};
	bool ready;
	int rc;

	pthread_mutex_lock(&src->q->mu);
	ready = src->ready;
	src->ready = false;
	pthread_mutex_unlock(&src->q->mu);
	if (src->ended || (!ready && src->retry_at > now))
		return 0;
	src->retry_at = GAZ_DEADLINE_NEVER;
	*it = (struct read_item){0};
	rc = gaz_message_reader_try_next(src->r, &it->env, &src->w, &st);
	if (rc == GAZ_READ_WAIT) {
		src->retry_at = src->w.at_ns;
		return 0;
	}
	if (rc == GAZ_ECANCELLED) { /* the shard stops: its loop sees it */
		src->ended = true;
		return 0;
	}
	if (rc == 0) { /* more may be buffered: try it first next time */
		pthread_mutex_lock(&src->q->mu);
		src->ready = true;
		pthread_mutex_unlock(&src->q->mu);
		return 1;
	}
	src->ended = true;
	*it = (struct read_item){.rc = rc > 0 ? GAZ_EPROTO : rc, .err = strdup(st.msg)};
	return 1;
}

/* ---- the barrier: the previous transaction's ACKs ------------------------ */

struct barrier {
	struct wakes *q;
	struct gaz_append_handle **acks;
	char **journals;
	size_t n;
	bool running;            /* ACKs are out: wait for barrier_done */
	/* The committed read-through offsets, which become the shard's
	 * progress once the ACKs are written. */
	struct gaz_sequencer_checkpoint cp;
};

/* An ACK's append completed (an append worker, or barrier_start). */
static void ack_done(void *arg)
{
	struct wakes *q = arg;

	pthread_mutex_lock(&q->mu);
	if (--q->barrier_left == 0) {
		q->barrier_done = true;
		pthread_cond_broadcast(&q->cond); /* barrier_wait */
		gaz_shard_kick(q->shard);
	}
	pthread_mutex_unlock(&q->mu);
}

/* Waits until every ACK's notify has run (they name the wakes). */
static void barrier_wait(struct barrier *b)
{
	pthread_mutex_lock(&b->q->mu);
	while (b->running && !b->q->barrier_done)
		pthread_cond_wait(&b->q->cond, &b->q->mu);
	pthread_mutex_unlock(&b->q->mu);
	b->running = false;
}

static void barrier_clear(struct barrier *b)
{
	for (size_t i = 0; i < b->n; i++) {
		gaz_append_handle_free(b->acks[i]);
		free(b->journals[i]);
	}
	free(b->acks), free(b->journals);
	gaz_sequencer_checkpoint_release(&b->cp);
	struct wakes *q = b->q;
	*b = (struct barrier){.q = q};
}

/* barrier_start writes the ACK intents (n; journals may not exist when
 * `lenient`, as for recovered intents); their completions wake the
 * shard (barrier_done, and a kick). Takes ownership of *cp. */
static int barrier_start(struct barrier *b, struct gaz_shard *s, const struct gaz_ack_intent *intents, size_t n,
			 struct gaz_sequencer_checkpoint *cp, struct gaz_status *st)
{
	barrier_clear(b);
	b->cp = *cp;
	*cp = (struct gaz_sequencer_checkpoint){0};
	if (n && (!(b->acks = calloc(n, sizeof(*b->acks))) || !(b->journals = calloc(n, sizeof(*b->journals)))))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct gaz_append_opts ao = {.journal = intents[i].journal};
		int rc = gaz_append_service_append(s->appends, &ao, intents[i].intent, intents[i].len, &b->acks[b->n], st);
		if (rc)
			return gaz_status_set(st, rc, "writing ACK of %s: %s", intents[i].journal, st->msg);
		if (!(b->journals[b->n++] = strdup(intents[i].journal)))
			return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&b->q->mu);
	b->q->barrier_left = b->n + 1; /* + 1: ours, until every notify is armed */
	b->q->barrier_done = false;
	pthread_mutex_unlock(&b->q->mu);
	b->running = true;
	for (size_t i = 0; i < b->n; i++)
		gaz_append_handle_notify(b->acks[i], ack_done, b->q);
	ack_done(b->q);
	return 0;
}

/* barrier_resolved: every ACK completed (the wakes said so). Checks
 * them (those of journals that no longer exist are dropped with a
 * warning when `lenient`), and moves the shard's progress. Returns 0 or
 * the first ACK's error. */
static int barrier_resolved(struct barrier *b, struct gaz_shard *s, bool lenient, struct gaz_status *st)
{
	struct gaz_append_result res;
	int rc = 0;

	b->running = false;
	for (size_t i = 0; i < b->n && !rc; i++) {
		struct gaz_status ast = {0};
		int arc = gaz_append_handle_wait(b->acks[i], 0, NULL, &ast);
		if (arc == GAZ_ENOTFOUND && lenient)
			gaz_warn("discarding recovered ACK intent of a journal that does not exist", "journal=%s",
				 b->journals[i]);
		else if (arc)
			rc = gaz_status_set(st, arc, "writing ACK of %s: %s", b->journals[i], ast.msg);
	}
	if (!rc) {
		pthread_mutex_lock(&s->progress_mu);
		for (size_t i = 0; i < b->cp.n_offsets; i++)
			gaz_offsets_set(&s->read_through, b->cp.offsets[i].journal, b->cp.offsets[i].offset);
		for (size_t i = 0; i < b->n; i++)
			if (gaz_append_handle_wait(b->acks[i], 0, &res, NULL) == 0)
				gaz_offsets_set(&s->publish_at, b->journals[i], res.end);
		pthread_mutex_unlock(&s->progress_mu);
		gaz_shard_signal_progress(s);
	}
	barrier_clear(b);
	return rc;
}

/* ---- replays ------------------------------------------------------------------ */

struct replay {
	struct gaz_message_reader *r;
	struct gaz_status st;
};

static int replay_next(void *arg, struct gaz_envelope *out)
{
	struct replay *rp = arg;
	return gaz_message_reader_next(rp->r, out, &rp->st);
}

/* ---- the transaction loop ----------------------------------------------------- */

struct gaz_txns {
	struct gaz_shard *s;
	const struct gaz_consumer_app *app;
	struct wakes q;
	struct source *sources;
	size_t n_sources, next_source;
	struct gaz_sequencer *seq;
	const struct gaz_envelope *dequeued;
	struct replay replay;
	struct barrier barrier;
	bool barrier_pending, recovered_acks;
	int64_t min_dur_ns, max_dur_ns;
	bool wait_for_ack;
	/* The current transaction. */
	int64_t consumed, began_ns, min_at, max_at; /* min_at/max_at: -1 once elapsed */
	bool reading;
	bool store_claimed;     /* the transaction has the store (begin to commit) */
};

static int64_t duration_ns(const Google__Protobuf__Duration *d)
{
	return d ? d->seconds * GAZ_NS_PER_S + d->nanos : 0;
}

static void free_msg(void *msg, void *arg)
{
	const struct gaz_message_type *t = arg;
	t->free_msg(msg, t->arg);
}

/* Starts the readers and the sequencer from the checkpoint. */
static int start_reading(struct gaz_txns *x, const struct gaz_sequencer_checkpoint *cp, struct gaz_status *st)
{
	struct gaz_shard *s = x->s;
	const Consumer__ShardSpec *spec = s->spec;
	struct gaz_sequencer_opts so = {.ring_size = spec->ring_buffer_size, .free_msg = free_msg,
					.arg = (void *)&s->c->type};
	int rc;

	if ((rc = gaz_sequencer_new(&so, cp->offsets, cp->n_offsets, cp->states, cp->n_states, &x->seq)))
		return gaz_status_set(st, rc, "out of memory");
	if (spec->n_sources && !(x->sources = calloc(spec->n_sources, sizeof(*x->sources))))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	for (size_t i = 0; i < spec->n_sources; i++) {
		const Consumer__ShardSpec__Source *src = spec->sources[i];
		int64_t offset = src->min_offset;
		for (size_t k = 0; k < cp->n_offsets; k++)
			if (!strcmp(cp->offsets[k].journal, src->journal) && cp->offsets[k].offset > offset)
				offset = cp->offsets[k].offset;
		struct gaz_message_reader_opts ro = {.client = s->client, .journal = src->journal, .offset = offset,
						     .block = true, .type = &s->c->type};
		struct source *so_ = &x->sources[x->n_sources];
		*so_ = (struct source){.q = &x->q, .ready = true, .retry_at = GAZ_DEADLINE_NEVER,
				       .w = {.fn = source_woken, .arg = so_}};
		if ((rc = gaz_message_reader_new(&ro, &so_->r, st)))
			return gaz_status_set(st, rc, "reading source %s: %s", src->journal, st->msg);
		x->n_sources++;
	}
	return 0;
}

/* next_item takes the next message of a ready source, round robin (1,
 * *out). Otherwise it returns 0 once deadline_ns (monotonic) has passed,
 * or GAZ_TXN_WAIT with *wake_at, the earliest of deadline_ns and the sources'
 * backoffs: a source's wake or the barrier's end kicks the shard before.
 * Not `reading`, it reads nothing. */
static int next_item(struct gaz_txns *x, bool reading, int64_t deadline_ns, struct read_item *out,
		     int64_t *wake_at)
{
	int64_t now = gaz_mono_ns();

	*wake_at = deadline_ns;
	for (size_t k = 0; reading && k < x->n_sources; k++) {
		struct source *src = &x->sources[(x->next_source + k) % x->n_sources];

		if (source_try(src, now, out)) {
			x->next_source = (x->next_source + k + 1) % x->n_sources;
			return 1;
		}
		if (src->retry_at < *wake_at)
			*wake_at = src->retry_at;
	}
	return now >= deadline_ns ? 0 : GAZ_TXN_WAIT;
}

/* Stops reading (the shard's client is cancelled: the shard stops, or
 * failed) and frees everything reading needed, once the barrier's ACKs
 * completed (the cancel fails those still out). */
static void stop_reading(struct gaz_txns *x)
{
	gaz_client_cancel(x->s->client);
	barrier_wait(&x->barrier);
	barrier_clear(&x->barrier);
	/* A source's wake may still run until its reader's stream is freed. */
	for (size_t i = 0; i < x->n_sources; i++)
		gaz_message_reader_free(x->sources[i].r);
	free(x->sources);
	gaz_message_reader_free(x->replay.r);
	gaz_sequencer_free(x->seq);
	wakes_release(&x->q);
}

/* Dequeues the first message of a commit the sequencer released. */
static int step(struct gaz_txns *x, struct gaz_status *st)
{
	int rc = gaz_sequencer_step(x->seq, &x->dequeued);

	if (rc == GAZ_EOF) {
		x->dequeued = NULL;
		return 0;
	}
	if (rc)
		return gaz_status_set(st, rc, "sequencer.Step: %s",
				      x->replay.st.msg[0] ? x->replay.st.msg : gaz_err_str(rc));
	return 0;
}

/* An envelope read: queue it on the sequencer and act on the outcome. */
static int txn_read(struct gaz_txns *x, struct read_item *it, struct gaz_status *st)
{
	enum gaz_queue_outcome outcome;
	const char *journal;
	int64_t begin, end, env_end = it->env.end;
	char *env_journal = NULL;
	int rc;

	if (it->rc) {
		rc = gaz_status_set(st, it->rc, "readMessage: %s", it->err ? it->err : gaz_err_str(it->rc));
		free(it->err);
		return rc;
	}
	if (!(env_journal = strdup(it->env.journal)))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	if ((rc = gaz_sequencer_queue(x->seq, &it->env, &outcome))) {
		free(env_journal);
		return gaz_status_set(st, rc, "sequencer.QueueUncommitted: %s", gaz_err_str(rc));
	}
	switch (outcome) {
	case GAZ_QUEUE_ACK_COMMIT_REPLAY:
		gaz_sequencer_replay_range(x->seq, &journal, &begin, &end);
		gaz_message_reader_free(x->replay.r);
		x->replay = (struct replay){0};
		struct gaz_message_reader_opts ro = {.client = x->s->client, .journal = journal, .offset = begin,
						     .end_offset = end, .block = true, .type = &x->s->c->type};
		if ((rc = gaz_message_reader_new(&ro, &x->replay.r, st))) {
			free(env_journal);
			return gaz_status_set(st, rc, "replaying %s [%lld, %lld): %s", journal, (long long)begin,
					      (long long)end, st->msg);
		}
		gaz_sequencer_start_replay(x->seq, replay_next, &x->replay);
		/* fallthrough */
	case GAZ_QUEUE_ACK_COMMIT_RING:
	case GAZ_QUEUE_ACK_EMPTY:
	case GAZ_QUEUE_OUTSIDE_COMMIT:
		rc = step(x, st);
		break;
	case GAZ_QUEUE_CONTINUE_BEGIN_SPAN:
	case GAZ_QUEUE_CONTINUE_EXTEND_SPAN:
		rc = 0;
		break;
	default:
		/* A duplicate, or a rollback: no transaction begins of it. Idle,
		 * the shard has still read it: Stat must not wait on it. */
		rc = 0;
		if (x->consumed == 0 && !x->barrier_pending) {
			pthread_mutex_lock(&x->s->progress_mu);
			gaz_offsets_set(&x->s->read_through, env_journal, env_end);
			pthread_mutex_unlock(&x->s->progress_mu);
			gaz_shard_signal_progress(x->s);
		} else if (x->consumed == 0) {
			/* Reported when the previous transaction's barrier
			 * resolves, with its offsets. */
			struct gaz_sequencer_checkpoint *cp = &x->barrier.cp;
			for (size_t i = 0; i < cp->n_offsets; i++)
				if (!strcmp(cp->offsets[i].journal, env_journal))
					cp->offsets[i].offset = env_end;
		}
		break;
	}
	free(env_journal);
	return rc;
}

/* Consumes the dequeued message; GAZ_TXN_WAIT when it begins a transaction
 * while an application's method has the store (its return kicks). */
static int txn_consume(struct gaz_txns *x, struct gaz_status *st)
{
	struct gaz_shard *s = x->s;
	int rc;

	if (x->consumed == 0) {
		bool stopped;
		if (!x->store_claimed && !gaz_shard_store_claim(s, &stopped))
			return stopped ? gaz_status_set(st, GAZ_ECANCELLED, "stopped") : GAZ_TXN_WAIT;
		x->store_claimed = true;
		if ((rc = s->store->ops->begin(s->store, st)))
			return gaz_status_set(st, rc, "store.Begin: %s", st->msg);
		if (x->app->begin_txn && (rc = x->app->begin_txn(x->app->arg, s, s->store, st)))
			return gaz_status_set(st, rc, "app.BeginTxn: %s", st->msg);
		x->began_ns = gaz_mono_ns();
		x->min_at = x->began_ns + x->min_dur_ns;
		x->max_at = x->began_ns + x->max_dur_ns;
		gaz_clock_update_now(&s->clock);
	}
	rc = x->app->consume(x->app->arg, s, s->store, x->dequeued, s->publisher, st);
	if (rc == GAZ_CONSUMER_DEFER) {
		if (x->consumed == 0)
			return gaz_status_set(st, GAZ_EINVAL,
					      "consumer transaction is empty, but application deferred the first message");
		x->reading = false; /* the message waits, dequeued, for the next one */
		return 0;
	}
	if (rc)
		return gaz_status_set(st, rc, "app.ConsumeMessage: %s", st->msg);
	x->consumed++;
	return step(x, st);
}

/* The transaction's timer: min_txn_duration, then max_txn_duration. */
static int64_t timer_at(const struct gaz_txns *x)
{
	if (x->consumed == 0 && !x->began_ns)
		return GAZ_DEADLINE_NEVER;
	return x->min_at >= 0 ? x->min_at : x->max_at >= 0 ? x->max_at : GAZ_DEADLINE_NEVER;
}

static void txn_tick(struct gaz_txns *x, int64_t now)
{
	if (x->min_at >= 0 && now >= x->min_at)
		x->min_at = -1;
	if (x->min_at < 0 && x->max_at >= 0 && now >= x->max_at) {
		x->max_at = -1;
		x->reading = false; /* stop reading: commit what we have */
	}
}

/* Gazette's txnBlocks: whether the transaction must wait for more. */
static bool txn_blocks(const struct gaz_txns *x)
{
	if (x->barrier_pending)
		return true;
	if (!x->reading && x->consumed == 0)
		return false;
	return x->consumed == 0 || x->min_at >= 0 ||
	       (x->wait_for_ack && x->reading && x->max_at >= 0 && gaz_sequencer_has_pending(x->seq));
}

/* Commits the transaction: finalize, checkpoint, waits, store commit,
 * ACKs. */
static int txn_commit(struct gaz_txns *x, struct gaz_status *st)
{
	struct gaz_shard *s = x->s;
	struct gaz_sequencer_checkpoint cp = {0};
	struct gaz_ack_intent *acks = NULL;
	size_t n_acks = 0, cp_len = 0;
	uint8_t *cp_bytes = NULL;
	int rc;

	if ((rc = x->app->finalize(x->app->arg, s, s->store, s->publisher, st))) {
		rc = gaz_status_set(st, rc, "app.FinalizeTxn: %s", st->msg);
		goto out;
	}
	if ((rc = gaz_sequencer_checkpoint(x->seq, PRUNE_HORIZON_NS, &cp)) ||
	    (rc = gaz_publisher_build_ack_intents(s->publisher, &acks, &n_acks, st)) ||
	    (rc = gaz_checkpoint_encode(&cp, acks, n_acks, &cp_bytes, &cp_len, st))) {
		rc = gaz_status_set(st, rc, "building the checkpoint: %s", st->msg[0] ? st->msg : gaz_err_str(rc));
		goto out;
	}
	/* Everything this transaction published is written before its
	 * checkpoint commits: the ACKs it holds must not commit lost
	 * messages. */
	if ((rc = gaz_publisher_wait_pending(s->publisher, st)))
		goto out;
	if ((rc = s->store->ops->commit(s->store, cp_bytes, cp_len, st))) {
		rc = gaz_status_set(st, rc, "store.StartCommit: %s", st->msg);
		if (rc == GAZ_EFENCED) /* worth a line even if we are stopping */
			gaz_warn("store commit refused: another primary took over", "shard=%s err=%s", s->id, st->msg);
		goto out;
	}
	if (x->app->finished)
		x->app->finished(x->app->arg, s, s->store, 0);
	rc = barrier_start(&x->barrier, s, acks, n_acks, &cp, st);
	x->barrier_pending = rc == 0;
out:
	if (rc) {
		s->store->ops->abort(s->store);
		if (x->app->finished)
			x->app->finished(x->app->arg, s, s->store, rc);
	}
	x->store_claimed = false;
	gaz_shard_store_unclaim(s);
	gaz_sequencer_checkpoint_release(&cp);
	gaz_ack_intents_free(acks, n_acks);
	free(cp_bytes);
	return rc;
}

/* txn_reset readies x for the next transaction. */
static void txn_reset(struct gaz_txns *x)
{
	x->consumed = 0;
	x->began_ns = 0;
	x->min_at = x->max_at = -1;
	x->reading = true;
}

/* Runs the current transaction (or begins the next) until it committed
 * (0), failed, or would wait (GAZ_TXN_WAIT, *wake_at), or the step's
 * slice ended at slice_end (GAZ_TXN_WAIT with *wake_at now: the pool's
 * other shards go first). */
static int txn_run(struct gaz_txns *x, int64_t slice_end, int64_t *wake_at, struct gaz_status *st)
{
	struct gaz_shard *s = x->s;
	int rc;

	for (;;) {
		struct read_item it;
		if (atomic_load(&s->stopping))
			return GAZ_ECANCELLED;
		if (gaz_mono_ns() >= slice_end) {
			*wake_at = gaz_mono_ns();
			return GAZ_TXN_WAIT;
		}
		if (x->reading && x->dequeued) {
			if (timer_at(x) <= gaz_mono_ns())
				txn_tick(x, gaz_mono_ns());
			else if ((rc = txn_consume(x, st))) {
				*wake_at = GAZ_DEADLINE_NEVER; /* read only at GAZ_TXN_WAIT */
				return rc;
			}
			continue;
		}
		if (x->barrier_pending) {
			bool done;
			pthread_mutex_lock(&x->q.mu);
			done = x->q.barrier_done;
			pthread_mutex_unlock(&x->q.mu);
			if (done) {
				x->barrier_pending = false;
				if ((rc = barrier_resolved(&x->barrier, s, x->recovered_acks, st)))
					return rc;
				x->recovered_acks = false;
				continue;
			}
		}
		bool blocks = txn_blocks(x);
		int64_t deadline = blocks ? timer_at(x) : gaz_mono_ns();
		rc = next_item(x, x->reading, deadline, &it, wake_at);
		if (rc == GAZ_TXN_WAIT)
			return rc;
		if (rc) {
			if ((rc = txn_read(x, &it, st)))
				return rc;
			continue;
		}
		if (timer_at(x) <= gaz_mono_ns()) {
			txn_tick(x, gaz_mono_ns());
			continue;
		}
		if (blocks || x->consumed == 0)
			continue; /* the timer moved, or nothing began */
		rc = txn_commit(x, st);
		txn_reset(x);
		return rc;
	}
}

int gaz_txn_begin(struct gaz_shard *s, const uint8_t *cp_bytes, size_t cp_len, struct gaz_txns **out,
		  struct gaz_status *st)
{
	struct gaz_txns *x = calloc(1, sizeof(*x));
	struct gaz_sequencer_checkpoint cp = {0};
	struct gaz_ack_intent *acks = NULL;
	size_t n_acks = 0;
	int rc;

	*out = NULL;
	if (!x)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	*x = (struct gaz_txns){.s = s, .app = s->c->app};
	x->min_dur_ns = duration_ns(s->spec->min_txn_duration);
	x->max_dur_ns = duration_ns(s->spec->max_txn_duration);
	x->wait_for_ack = !s->spec->disable_wait_for_ack;
	if ((rc = gaz_checkpoint_decode(cp_bytes, cp_len, &cp, &acks, &n_acks, st))) {
		free(x);
		return gaz_status_set(st, rc, "decoding the restored checkpoint: %s", st->msg);
	}
	wakes_init(&x->q, s);
	txn_reset(x);
	x->barrier.q = &x->q;
	rc = start_reading(x, &cp, st);
	/* The recovered ACK intents first, as the barrier of a transaction
	 * that committed before we started (Gazette lets them name journals
	 * deleted since). Its offsets are the checkpoint's. */
	if (!rc && !(rc = barrier_start(&x->barrier, s, acks, n_acks, &cp, st))) {
		x->barrier_pending = true;
		x->recovered_acks = true;
	}
	gaz_sequencer_checkpoint_release(&cp);
	gaz_ack_intents_free(acks, n_acks);
	if (rc) {
		gaz_txn_end(x, rc);
		return rc;
	}
	*out = x;
	return 0;
}

int gaz_txn_step(struct gaz_txns *x, int64_t *wake_at, struct gaz_status *st)
{
	int64_t slice_end = gaz_mono_ns() + TXN_SLICE_NS; /* for all its transactions */
	int rc;

	while ((rc = txn_run(x, slice_end, wake_at, st)) == 0)
		;
	return rc;
}

int gaz_txn_end(struct gaz_txns *x, int rc)
{
	struct gaz_shard *s = x->s;

	if (x->store_claimed) { /* a transaction failed or stopped before its commit */
		s->store->ops->abort(s->store);
		gaz_shard_store_unclaim(s);
	}
	stop_reading(x);
	free(x);
	return rc == GAZ_ECANCELLED && atomic_load(&s->stopping) ? 0 : rc;
}
