/*
 * shard.c - one local shard's life (Gazette's consumer shard.go), as a
 * machine run in steps on the consumer's shard pool (common/steps.h): no
 * thread of its own, however many shards a process holds. Its states
 * (enum shard_state below) are:
 *   - as a standby: it announces STANDBY in its assignment at once (its
 *     store needs no recovery log to tail) and waits for slot 0;
 *   - as primary: it opens the application's store (retrying while the
 *     store is unavailable), restores the checkpoint, which fences off any
 *     earlier primary's store, announces PRIMARY, and runs transactions
 *     (txn.c) until it stops or fails;
 *   - failed: FAILED with the error in its assignment, until the
 *     assignment goes (the allocator moves a failed primary, or
 *     `gazctl shards unassign --failed` removes it). A primary whose
 *     commit the store fenced (a new primary restored) is not failed: its
 *     assignment has left slot 0 and the resolver replaces it; if the
 *     keyspace still gives it slot 0 after FENCED_GRACE_MS, the fencer was
 *     a replica that promoted itself on a keyspace a revision behind, and
 *     this primary recovers the checkpoint again (a new term).
 * A shard whose spec names a recovery log fails at once: this runtime's
 * stores commit checkpoints themselves and keep no recovery log.
 *
 * Locking (runtime_int.h): s->mu guards slot, stop, store_ready,
 * primary_done, the store's claims (store_busy, store_borrowed,
 * borrowers_waiting) and the client pointer handed to stop; progress_mu
 * guards the progress offsets. The shard's steps alone own the
 * primary's client, append service, publisher and store, except that an
 * application's method may borrow the store between transactions
 * (gaz_shard_store_borrow): its steps then wait for it at its next
 * transaction and, before it ends, until it was given back (the store is
 * closed once its steps ended). Whatever a waiting state waits for
 * kicks the shard (gaz_shard_kick): its slot, its stop, its store given
 * back, its sources' wakes and its ACKs (txn.c). A store that is
 * unavailable and a status that etcd did not take are retried from timed
 * states (OPEN_STORE, RESTORE, STATUS): no step sleeps.
 */
#include "consumer/runtime_int.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "etcd/txn.h"
#include "gazette/append_service.h"

/* How long a fenced primary waits for the keyspace to move it before it
 * reports FAILED. */
#define FENCED_GRACE_MS 10000

/* Gazette's backoff for status updates and store retries (shard.go). */
static int64_t backoff_ms(int attempt)
{
	return attempt < 2 ? 50 : attempt < 4 ? 100 : attempt < 6 ? 1000 : 5000;
}

/* ---- progress ------------------------------------------------------------ */

int gaz_offsets_set(struct gaz_offsets *o, const char *journal, int64_t offset)
{
	for (size_t i = 0; i < o->n; i++) {
		if (!strcmp(o->journal[i], journal)) {
			o->offset[i] = offset;
			return 0;
		}
	}
	char **j = realloc(o->journal, (o->n + 1) * sizeof(*j));
	if (j)
		o->journal = j;
	int64_t *off = realloc(o->offset, (o->n + 1) * sizeof(*off));
	if (off)
		o->offset = off;
	if (!j || !off || !(o->journal[o->n] = strdup(journal)))
		return GAZ_ENOMEM;
	o->offset[o->n++] = offset;
	return 0;
}

int64_t gaz_offsets_get(const struct gaz_offsets *o, const char *journal)
{
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->journal[i], journal))
			return o->offset[i];
	return 0;
}

void gaz_offsets_release(struct gaz_offsets *o)
{
	for (size_t i = 0; i < o->n; i++)
		free(o->journal[i]);
	free(o->journal);
	free(o->offset);
	*o = (struct gaz_offsets){0};
}

void gaz_shard_signal_progress(struct gaz_shard *s)
{
	gaz_notifier_broadcast(&s->progress);
}

/* ---- status ------------------------------------------------------------------ */

/* Our assignment of the shard now: its key (malloc'd), mod revision and
 * status (a copy; NULL for IDLE), or NULL when we hold none. */
static char *our_assignment(struct gaz_shard *s, int64_t *mod_revision, Consumer__ReplicaStatus **status)
{
	struct gaz_consumer *c = s->c;
	char *prefix = NULL, *key = NULL;
	size_t lo, hi;

	*status = NULL;
	/* This replica's own assignment, at its slot: a primary that the
	 * allocator moved to another slot is replaced by a new standby, and
	 * what the old one still reports must not land on the new one's key
	 * (Gazette's updateStatus writes the shard's resolved assignment). */
	pthread_mutex_lock(&s->mu);
	int64_t slot = s->slot;
	pthread_mutex_unlock(&s->mu);
	if (asprintf(&prefix, "%s/assign/%s#%s#%s#%lld", c->root, s->id, c->cfg.zone, c->cfg.id, (long long)slot) < 0)
		return NULL;
	gaz_keyspace_rlock(c->ks);
	gaz_keyspace_prefix(c->ks, prefix, &lo, &hi);
	while (lo < hi && strcmp(gaz_keyspace_at(c->ks, lo)->key, prefix)) /* #1 is a prefix of #10 */
		lo++;
	if (lo < hi) {
		const struct gaz_ks_entry *e = gaz_keyspace_at(c->ks, lo);
		const struct gaz_ks_value *v = e->decoded;
		key = strdup(e->key);
		*mod_revision = e->mod_revision;
		if (v->status)
			*status = (Consumer__ReplicaStatus *)gaz_pb_copy(&v->status->base);
	}
	gaz_keyspace_runlock(c->ks);
	free(prefix);
	return key;
}

/* One attempt of Gazette's updateStatus: `code` and `err` reduced with
 * the stored status (the larger code; errors appended), written under a
 * compare of the assignment's mod revision, keeping its lease. Returns 0
 * once the keyspace reflects it. */
static int update_status_once(struct gaz_shard *s, Consumer__ReplicaStatus__Code code, const char *err)
{
	struct gaz_consumer *c = s->c;
	Consumer__ReplicaStatus *cur = NULL, next = CONSUMER__REPLICA_STATUS__INIT;
	struct gaz_status st = {0};
	struct gaz_txn t;
	int64_t mod = 0, rev = 0;
	bool ok = false;
	char *key = our_assignment(s, &mod, &cur), **errors = NULL;
	int rc = GAZ_ENOTFOUND;

	if (!key)
		return rc;
	next.code = cur && cur->code > code ? cur->code : code;
	size_t n_err = (cur ? cur->n_errors : 0) + (err ? 1 : 0);
	if (n_err && !(errors = calloc(n_err, sizeof(*errors))))
		goto out;
	for (size_t i = 0; cur && i < cur->n_errors; i++)
		errors[next.n_errors++] = cur->errors[i];
	if (err)
		errors[next.n_errors++] = (char *)err;
	next.errors = errors;
	size_t len = consumer__replica_status__get_packed_size(&next);
	uint8_t *val = malloc(len ? len : 1);
	if (!val)
		goto out;
	consumer__replica_status__pack(&next, val);
	gaz_txn_init(&t);
	gaz_txn_compare_mod(&t, key, mod);
	gaz_txn_put(&t, key, val, len, 0, true);
	free(val);
	rc = gaz_txn_commit(c->etcd, &t, &ok, &rev, &st);
	gaz_txn_release(&t);
	if (!rc && !ok)
		rc = GAZ_EEXIST; /* the assignment changed meanwhile: look again */
	if (!rc)
		gaz_keyspace_wait_revision(c->ks, rev, gaz_deadline_in(10000));
	else if (rc != GAZ_EEXIST)
		gaz_debug("writing shard status failed", "shard=%s err=%s", s->id, st.msg);
out:
	free(errors);
	free(key);
	if (cur)
		protobuf_c_message_free_unpacked(&cur->base, NULL);
	return rc;
}

/* ---- the primary ------------------------------------------------------------ */

/* One attempt to open the application's store: 0, GAZ_EUNAVAIL (logged;
 * the caller retries after a backoff) or an error. */
static int open_store_once(struct gaz_shard *s, struct gaz_status *st)
{
	const struct gaz_consumer_app *app = s->c->app;
	int rc = app->new_store(app->arg, s, &s->store, st);

	if (rc == GAZ_EUNAVAIL) {
		gaz_warn("shard store unavailable; retrying", "shard=%s err=%s", s->id, st->msg);
		gaz_status_clear(st);
	}
	return rc;
}

/* Whether etcd, read now (linearizably), still gives this process slot 0
 * of the shard. A replica promotes itself on its keyspace, which may be a
 * revision behind the allocator's move of slot 0 to another replica;
 * restoring then would fence off the primary the keyspace already names.
 * Asked once just before the checkpoint's restore, it closes most of that
 * window (the store's fence settles the rest, see term_ended).
 * Returns 0 (slot 0 is ours), GAZ_ESTOPPED (it is not) or an etcd error
 * (retryable: GAZ_EUNAVAIL). */
static int confirm_primary(struct gaz_shard *s, struct gaz_status *st)
{
	struct gaz_consumer *c = s->c;
	Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse *resp = NULL;
	char *key = NULL;
	int rc;

	if (asprintf(&key, "%s/assign/%s#%s#%s#0", c->root, s->id, c->cfg.zone, c->cfg.id) < 0)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	rr.key.data = (uint8_t *)key;
	rr.key.len = strlen(key);
	rr.count_only = true;
	rc = gaz_etcd_range(c->etcd, &rr, &resp, st);
	free(key);
	if (rc)
		return rc;
	rc = resp->count > 0 ? 0 : GAZ_ESTOPPED;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

/* One attempt to restore the checkpoint (*cp, *len: malloc'd) after
 * confirming slot 0: 0, GAZ_ESTOPPED (slot 0 moved), GAZ_EUNAVAIL (logged;
 * the caller retries after a backoff) or an error. */
static int restore_once(struct gaz_shard *s, uint8_t **cp, size_t *len, struct gaz_status *st)
{
	int rc = confirm_primary(s, st);

	if (rc == GAZ_ESTOPPED)
		return gaz_status_set(st, rc, "no longer primary in etcd: slot 0 moved before the restore");
	if (rc == 0)
		rc = s->store->ops->restore_checkpoint(s->store, cp, len, st);
	if (rc == GAZ_EUNAVAIL) {
		gaz_warn("restoring the checkpoint: etcd or the store unavailable; retrying", "shard=%s err=%s", s->id,
			 st->msg);
		gaz_status_clear(st);
	}
	return rc;
}

/* Releases what a primary term built (its store, publisher, appends,
 * client and application state), in a step after the term ended or
 * on the joiner's thread after the steps are over. */
static void primary_release(struct gaz_shard *s)
{
	struct gaz_client *client;

	pthread_mutex_lock(&s->mu);
	client = s->client;
	s->client = NULL; /* gaz_shard_stop cancels it under mu */
	s->store_ready = false; /* no borrower comes after this */
	while (s->store_borrowed)
		pthread_cond_wait(&s->cond, &s->mu);
	pthread_mutex_unlock(&s->mu);
	if (s->store)
		s->store->ops->close(s->store);
	s->store = NULL;
	gaz_publisher_free(s->publisher);
	s->publisher = NULL;
	gaz_append_service_free(s->appends);
	s->appends = NULL;
	gaz_client_free(client);
	gaz_shard_set_state(s, NULL, NULL);
}

/* A primary term's start: its client, appends and publisher. */
static int primary_start(struct gaz_shard *s, struct gaz_status *st)
{
	struct gaz_consumer *c = s->c;
	struct gaz_client_opts co = gaz_consumer_client_opts(c);
	struct gaz_client *client = NULL;
	int rc;

	gaz_info("promoted to primary", "shard=%s", s->id);
	if ((rc = gaz_client_new(&co, &client, st)))
		return rc;
	pthread_mutex_lock(&s->mu);
	s->client = client;
	if (s->stop)
		gaz_client_cancel(client);
	pthread_mutex_unlock(&s->mu);
	struct gaz_publisher_opts po = {.type = &c->publish_type, .clock = &s->clock};
	if ((rc = gaz_append_service_new(client, NULL, &s->appends, st)))
		return rc;
	po.appends = s->appends;
	return gaz_publisher_new(&po, &s->publisher, st);
}

/* The restored primary, announced, lends its store and begins its
 * transactions from the checkpoint (taken). */
static int primary_begin(struct gaz_shard *s, struct gaz_status *st)
{
	int rc;

	pthread_mutex_lock(&s->mu);
	s->store_ready = true;
	pthread_mutex_unlock(&s->mu);
	gaz_shard_signal_progress(s);
	rc = gaz_txn_begin(s, s->cp, s->cp_len, &s->txns, st);
	free(s->cp);
	s->cp = NULL;
	return rc;
}

/* The states of a shard's life, in the order a reader follows them;
 * each step below runs one and names the next. */
enum shard_state {
	SHARD_START,         /* announce STANDBY (or fail: a recovery log) */
	SHARD_STATUS,        /* write a status into our assignment (retried), then status_after */
	SHARD_STANDBY,       /* wait for slot 0, or the stop */
	SHARD_PRIMARY,       /* start a primary term (client, appends) */
	SHARD_OPEN_STORE,    /* the application's store (retried while unavailable) */
	SHARD_RESTORE,       /* slot 0 confirmed, the checkpoint restored (retried) */
	SHARD_SERVE,         /* announce PRIMARY */
	SHARD_BEGIN,         /* lend the store, begin transactions */
	SHARD_TRANSACTIONS,  /* run transactions until they end */
	SHARD_FENCED,        /* a commit was fenced: wait for our slot to move */
	SHARD_ENDED,         /* report how the primary ended (FAILED: SHARD_STATUS) */
	SHARD_GIVE_BACK,     /* no primary from now on: wait for a borrowed store */
	SHARD_FAILED_IDLE,   /* keep the assignment (FAILED) until the stop */
};

/* A primary term ended with rc: the fenced grace, or its end. */
static enum shard_state term_ended(struct gaz_shard *s, int rc)
{
	s->rc = rc;
	if (rc != GAZ_EFENCED || atomic_load(&s->stopping))
		return SHARD_ENDED;
	/* Fenced: another replica restored the checkpoint after we did.
	 * A new primary moved us off slot 0 and the keyspace says so in a
	 * moment, stopping this replica. If it does not, we still hold slot
	 * 0 and the fencer was a replica that lagged the keyspace, promoted
	 * itself a moment before the allocator moved slot 0 to us, and has
	 * stopped since: the primary is still ours, so it recovers the
	 * store's checkpoint again. */
	gaz_warn("fenced by a new primary; waiting for our assignment to change", "shard=%s", s->id);
	s->fenced_until = gaz_mono_ns() + FENCED_GRACE_MS * GAZ_NS_PER_MS;
	return SHARD_FENCED;
}

/* Whether the shard is asked to stop, and (*slot0) whether it holds
 * slot 0, read together. */
static bool stop_or_slot0(struct gaz_shard *s, bool *slot0)
{
	bool stop;

	pthread_mutex_lock(&s->mu);
	stop = s->stop;
	*slot0 = s->slot == 0;
	pthread_mutex_unlock(&s->mu);
	return stop;
}

/* Names the status to write in SHARD_STATUS, and the state after it. */
static int write_status(struct gaz_shard *s, Consumer__ReplicaStatus__Code code, const char *err, int after)
{
	free(s->status_err);
	s->status_err = err ? strdup(err) : NULL;
	s->status_code = code;
	s->status_after = after;
	s->attempt = 0;
	s->retry_at = 0;
	return SHARD_STATUS;
}

/* Runs the shard's states until one waits: returns when to run again
 * (GAZ_DEADLINE_NEVER: when kicked) or GAZ_STEP_DONE. */
static int64_t shard_step(struct gaz_step_task *t)
{
	struct gaz_shard *s = (struct gaz_shard *)((char *)t - offsetof(struct gaz_shard, task));
	int64_t wake_at;
	bool stop, primary, borrowed;
	int rc;

	for (;;) {
		switch ((enum shard_state)s->state) {
		case SHARD_START:
			if (s->spec->recovery_log_prefix && s->spec->recovery_log_prefix[0]) {
				s->rc = gaz_status_set(
					&s->st, GAZ_EINVAL,
					"shard names a recovery log (%s/%s): gazette-c consumers keep state in stores "
					"that commit checkpoints themselves (PostgreSQL, JSON file), not in recovery logs",
					s->spec->recovery_log_prefix, s->id);
				s->state = SHARD_ENDED;
				break;
			}
			s->state = write_status(s, CONSUMER__REPLICA_STATUS__CODE__STANDBY, NULL, SHARD_STANDBY);
			break;
		case SHARD_STATUS:
			/* Gazette's updateStatus, retried with its backoff until
			 * written or the shard stops. */
			if (atomic_load(&s->stopping)) {
				s->state = s->status_after;
				break;
			}
			if (gaz_mono_ns() < s->retry_at)
				return s->retry_at; /* gaz_shard_stop kicks */
			if (update_status_once(s, (Consumer__ReplicaStatus__Code)s->status_code, s->status_err) == 0) {
				s->state = s->status_after;
				break;
			}
			if (s->attempt > 1)
				gaz_warn("failed to advertise shard status (will retry)", "shard=%s attempt=%d", s->id,
					 s->attempt);
			s->retry_at = gaz_mono_ns() + backoff_ms(++s->attempt) * GAZ_NS_PER_MS;
			break;
		case SHARD_STANDBY:
			stop = stop_or_slot0(s, &primary);
			if (!stop && !primary)
				return GAZ_DEADLINE_NEVER; /* gaz_shard_set_slot kicks */
			s->state = stop ? SHARD_ENDED : SHARD_PRIMARY;
			break;
		case SHARD_PRIMARY:
			rc = primary_start(s, &s->st);
			s->attempt = 0;
			s->state = rc ? term_ended(s, rc) : SHARD_OPEN_STORE;
			break;
		case SHARD_OPEN_STORE:
		case SHARD_RESTORE:
			if (atomic_load(&s->stopping)) {
				s->state = term_ended(s, gaz_status_set(&s->st, GAZ_ECANCELLED, "stopped while %s",
									s->state == SHARD_OPEN_STORE ? "opening the store"
												     : "restoring the checkpoint"));
				break;
			}
			if (gaz_mono_ns() < s->retry_at)
				return s->retry_at; /* gaz_shard_stop kicks */
			rc = s->state == SHARD_OPEN_STORE ? open_store_once(s, &s->st)
							  : restore_once(s, &s->cp, &s->cp_len, &s->st);
			if (rc == GAZ_EUNAVAIL) {
				s->retry_at = gaz_mono_ns() + backoff_ms(s->attempt++ + 4) * GAZ_NS_PER_MS;
				break;
			}
			s->attempt = 0;
			s->retry_at = 0;
			if (rc && s->state == SHARD_OPEN_STORE) {
				gaz_status_prefix(&s->st, "opening the store: ");
			} else if (rc) {
				s->moved = rc == GAZ_ESTOPPED;
				gaz_status_prefix(&s->st, "store.RestoreCheckpoint: ");
			}
			s->state = rc ? term_ended(s, rc) : s->state == SHARD_OPEN_STORE ? SHARD_RESTORE : SHARD_SERVE;
			break;
		case SHARD_SERVE:
			s->state = write_status(s, CONSUMER__REPLICA_STATUS__CODE__PRIMARY, NULL, SHARD_BEGIN);
			break;
		case SHARD_BEGIN:
			rc = primary_begin(s, &s->st);
			s->state = rc ? term_ended(s, rc) : SHARD_TRANSACTIONS;
			break;
		case SHARD_TRANSACTIONS:
			rc = gaz_txn_step(s->txns, &wake_at, &s->st);
			if (rc == GAZ_TXN_WAIT)
				return wake_at;
			rc = gaz_txn_end(s->txns, rc);
			s->txns = NULL;
			s->state = term_ended(s, rc);
			break;
		case SHARD_FENCED:
			stop = stop_or_slot0(s, &primary);
			if (!stop && gaz_mono_ns() < s->fenced_until)
				return s->fenced_until;
			if (stop || !primary) {
				s->state = SHARD_ENDED;
				break;
			}
			gaz_warn("still primary after the fence moved: the fencing replica has stopped; recovering the "
				 "checkpoint again", "shard=%s", s->id);
			primary_release(s);
			gaz_status_clear(&s->st);
			s->rc = 0;
			s->state = SHARD_PRIMARY;
			break;
		case SHARD_ENDED:
			if (s->moved) {
				/* Slot 0 moved before we restored: the resolver stops us. */
				gaz_info("not restoring: no longer primary", "shard=%s", s->id);
				s->rc = 0;
			}
			s->state = SHARD_GIVE_BACK;
			if (s->rc && !atomic_load(&s->stopping)) {
				gaz_error("shard failed", "shard=%s err=%s", s->id, s->st.msg);
				s->state = write_status(s, CONSUMER__REPLICA_STATUS__CODE__FAILED, s->st.msg,
							SHARD_GIVE_BACK);
			} else if (s->rc && s->rc != GAZ_ECANCELLED) {
				gaz_info("shard stopped on an error", "shard=%s err=%s", s->id, s->st.msg);
			}
			break;
		case SHARD_GIVE_BACK:
			pthread_mutex_lock(&s->mu);
			s->primary_done = true; /* no new borrower comes */
			borrowed = s->store_borrowed;
			pthread_mutex_unlock(&s->mu);
			if (borrowed)
				return GAZ_DEADLINE_NEVER; /* gaz_shard_store_return kicks */
			gaz_shard_signal_progress(s);
			s->state = SHARD_FAILED_IDLE;
			break;
		case SHARD_FAILED_IDLE:
			/* A failed shard keeps its assignment (FAILED) until it is
			 * removed; a stopped one goes at once. */
			pthread_mutex_lock(&s->mu);
			stop = s->stop;
			pthread_mutex_unlock(&s->mu);
			return stop ? GAZ_STEP_DONE : GAZ_DEADLINE_NEVER;
		}
	}
}

void gaz_shard_kick(struct gaz_shard *s)
{
	gaz_steps_kick(&s->task);
}

/* ---- lifecycle ------------------------------------------------------------ */

struct gaz_shard *gaz_shard_new(struct gaz_consumer *c, const char *id, const Consumer__ShardSpec *spec,
				int64_t create_revision, int64_t slot)
{
	struct gaz_shard *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;

	if (!s)
		return NULL;
	s->c = c;
	s->id = strdup(id);
	s->fqn = gaz_ks_item_key(c->root, id);
	s->spec = (Consumer__ShardSpec *)gaz_pb_copy(&spec->base);
	s->item_create_revision = create_revision;
	s->slot = slot;
	s->refs = 1;
	if (!s->id || !s->fqn || !s->spec) {
		gaz_shard_free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&s->progress_mu, NULL);
	gaz_notifier_init(&s->progress);
	s->state = SHARD_START;
	s->task.step = shard_step;
	gaz_info("shard assigned", "shard=%s slot=%lld", id, (long long)slot);
	gaz_steps_add(c->shard_pool, &s->task);
	return s;
}

bool gaz_shard_set_slot(struct gaz_shard *s, int64_t slot)
{
	bool ok;

	pthread_mutex_lock(&s->mu);
	ok = s->slot != 0 || slot == 0;
	if (ok && s->slot != slot) {
		s->slot = slot;
		gaz_shard_kick(s);
	}
	pthread_mutex_unlock(&s->mu);
	return ok;
}

void gaz_shard_stop(struct gaz_shard *s)
{
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	atomic_store(&s->stopping, true);
	if (s->client)
		gaz_client_cancel(s->client);
	gaz_shard_kick(s);
	pthread_mutex_unlock(&s->mu);
	gaz_shard_signal_progress(s);
}

void gaz_shard_join(struct gaz_shard *s)
{
	gaz_steps_join(&s->task);
	/* Its steps are over: its primary's parts are ours to release. */
	primary_release(s);
	gaz_info("shard stopped", "shard=%s", s->id);
}

void gaz_shard_free(struct gaz_shard *s)
{
	if (!s)
		return;
	if (s->spec) {
		pthread_cond_destroy(&s->cond);
		pthread_mutex_destroy(&s->mu);
		pthread_mutex_destroy(&s->progress_mu);
		gaz_notifier_release(&s->progress);
		protobuf_c_message_free_unpacked(&s->spec->base, NULL);
	}
	gaz_offsets_release(&s->read_through);
	gaz_offsets_release(&s->publish_at);
	free(s->cp);
	free(s->status_err);
	free(s->id);
	free(s->fqn);
	free(s);
}

static void wake_call(void *arg)
{
	gaz_rpc_wake(arg);
}

int gaz_shard_wait_ready(struct gaz_shard *s, struct gaz_rpc_call *call)
{
	struct gaz_waiter w = {.wake = wake_call, .arg = call};
	int rc = 0;

	gaz_notifier_add(&s->progress, &w);
	for (;;) {
		bool ready, done;
		pthread_mutex_lock(&s->mu);
		ready = s->store_ready && !s->primary_done && !s->stop;
		done = s->primary_done || s->stop;
		pthread_mutex_unlock(&s->mu);
		if (ready || done) {
			rc = ready ? 0 : GAZ_ESTOPPED;
			break;
		}
		if ((rc = gaz_rpc_wait(call, gaz_rpc_deadline(call))))
			break;
	}
	gaz_notifier_remove(&s->progress, &w);
	return rc;
}

/* ---- the store's claims -------------------------------------------------- */

int gaz_shard_store_borrow(struct gaz_shard *s, struct gaz_rpc_call *call, struct gaz_store **out)
{
	struct gaz_waiter w = {.wake = wake_call, .arg = call};
	bool waiting = false;
	int rc = 0;

	*out = NULL;
	gaz_notifier_add(&s->progress, &w);
	pthread_mutex_lock(&s->mu);
	for (;;) {
		if (!s->store_ready || s->primary_done || s->stop) {
			rc = GAZ_ESTOPPED;
			break;
		}
		if (!s->store_busy && !s->store_borrowed) {
			s->store_borrowed = true;
			*out = s->store;
			break;
		}
		if (!waiting)
			s->borrowers_waiting++, waiting = true;
		pthread_mutex_unlock(&s->mu);
		rc = gaz_rpc_wait(call, gaz_rpc_deadline(call));
		pthread_mutex_lock(&s->mu);
		if (rc)
			break;
	}
	if (waiting) {
		s->borrowers_waiting--;
		gaz_shard_kick(s); /* a transaction may wait on us */
	}
	pthread_mutex_unlock(&s->mu);
	gaz_notifier_remove(&s->progress, &w);
	return rc;
}

void gaz_shard_store_return(struct gaz_shard *s)
{
	pthread_mutex_lock(&s->mu);
	s->store_borrowed = false;
	pthread_cond_broadcast(&s->cond); /* primary_release */
	gaz_shard_kick(s); /* a transaction, or a shard that ended, waits for it */
	pthread_mutex_unlock(&s->mu);
	gaz_shard_signal_progress(s); /* the next borrower */
}

bool gaz_shard_store_claim(struct gaz_shard *s, bool *stopped)
{
	bool ok;

	pthread_mutex_lock(&s->mu);
	*stopped = s->stop;
	if ((ok = !s->stop && !s->store_borrowed && !s->borrowers_waiting))
		s->store_busy = true;
	pthread_mutex_unlock(&s->mu);
	return ok;
}

void gaz_shard_store_unclaim(struct gaz_shard *s)
{
	pthread_mutex_lock(&s->mu);
	s->store_busy = false;
	pthread_mutex_unlock(&s->mu);
	gaz_shard_signal_progress(s); /* borrowers waiting */
}

/* ---- accessors (runtime.h) ----------------------------------------------- */

const char *gaz_shard_id(const struct gaz_shard *s)
{
	return s->id;
}

const char *gaz_shard_fqn(const struct gaz_shard *s)
{
	return s->fqn;
}

const Consumer__ShardSpec *gaz_shard_spec(const struct gaz_shard *s)
{
	return s->spec;
}

struct gaz_client *gaz_shard_client(struct gaz_shard *s)
{
	return s->client;
}

void gaz_shard_set_state(struct gaz_shard *s, void *state, void (*free_fn)(void *state))
{
	if (s->app_state && s->app_state_free)
		s->app_state_free(s->app_state);
	s->app_state = state;
	s->app_state_free = free_fn;
}

void *gaz_shard_state(const struct gaz_shard *s)
{
	return s->app_state;
}

struct gaz_publisher *gaz_shard_publisher(struct gaz_shard *s)
{
	return s->publisher;
}
