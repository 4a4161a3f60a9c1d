/*
 * publisher.c - publishing messages with UUIDs, committed or inside a
 * transaction, and the ACK intents that commit it (Gazette's
 * message.Publisher).
 *
 * A message's UUID is built after its journal is chosen and just before
 * its frame is queued on the append service, on the publishing thread;
 * the service commits appends of a journal in queue order, so the clocks
 * a publisher writes to a journal increase along the journal, which the
 * read-committed reader relies on.
 *
 * Every append is tracked until gaz_publisher_wait_pending: the last
 * handle of each journal published to, which tells whether all of them
 * committed (the service commits a journal's appends in order and a
 * failure is sticky), so a consumer commits its checkpoint only after
 * everything its transaction published is written.
 *
 * Single-threaded: one thread owns a publisher (its clock may be shared).
 */
#include <stdlib.h>
#include <string.h>

#include "common/strset.h"
#include "gazette/append_service.h"
#include "gazette/message.h"

struct intent {
	char *journal;
	enum gaz_framing framing;
};

struct gaz_publisher {
	struct gaz_append_service *appends;
	const struct gaz_message_type *type;
	gaz_clock own_clock;
	gaz_clock *clock;
	bool auto_update; /* moves own_clock to the wall time at each publish */
	gaz_producer_id producer;
	struct intent *intents; /* journals published to uncommitted, in order */
	size_t n_intents, cap_intents;
	struct gaz_strset intent_set;
	/* Appends not waited for yet: the last handle per journal. */
	struct pending {
		char *journal;
		struct gaz_append_handle *last;
	} *pending;
	size_t n_pending, cap_pending;
};

/* track keeps `h` (a new reference) as journal's last pending append. */
static int track(struct gaz_publisher *p, const char *journal, struct gaz_append_handle *h, struct gaz_status *st)
{
	for (size_t i = 0; i < p->n_pending; i++) {
		if (!strcmp(p->pending[i].journal, journal)) {
			gaz_append_handle_free(p->pending[i].last);
			p->pending[i].last = h;
			return 0;
		}
	}
	if (p->n_pending == p->cap_pending) {
		size_t cap = p->cap_pending ? p->cap_pending * 2 : 8;
		struct pending *np = realloc(p->pending, cap * sizeof *np);
		if (!np)
			goto oom;
		p->pending = np;
		p->cap_pending = cap;
	}
	char *j = strdup(journal);
	if (!j)
		goto oom;
	p->pending[p->n_pending++] = (struct pending){j, h};
	return 0;
oom:
	/* Untracked, it could not be waited for: wait now. */
	gaz_append_handle_wait(h, -1, NULL, NULL);
	gaz_append_handle_free(h);
	return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
}

int gaz_publisher_wait_pending(struct gaz_publisher *p, struct gaz_status *st)
{
	int first = 0;

	for (size_t i = 0; i < p->n_pending; i++) {
		struct gaz_status ast = {0};
		int rc = gaz_append_handle_wait(p->pending[i].last, -1, NULL, &ast);
		if (rc && !first)
			first = gaz_status_set(st, rc, "appending to %s: %s", p->pending[i].journal, ast.msg);
		gaz_append_handle_free(p->pending[i].last);
		free(p->pending[i].journal);
	}
	p->n_pending = 0;
	return first;
}

int gaz_publisher_new(const struct gaz_publisher_opts *opts, struct gaz_publisher **out, struct gaz_status *st)
{
	if (!opts || !opts->appends || !opts->type)
		return gaz_status_set(st, GAZ_EINVAL, "a publisher needs an append service and a message type");
	struct gaz_publisher *p = calloc(1, sizeof *p);
	if (!p)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	if (gaz_producer_id_new(&p->producer) != 0) {
		free(p);
		return gaz_status_set(st, GAZ_EIO, "no randomness for a ProducerID");
	}
	p->appends = opts->appends;
	p->type = opts->type;
	p->clock = opts->clock ? opts->clock : &p->own_clock;
	p->auto_update = !opts->clock;
	*out = p;
	return 0;
}

gaz_producer_id gaz_publisher_producer(const struct gaz_publisher *p)
{
	return p->producer;
}

/* remember_intent records journal as published to uncommitted. */
static int remember_intent(struct gaz_publisher *p, const struct gaz_mapped *m, struct gaz_status *st)
{
	if (gaz_strset_has(&p->intent_set, m->journal))
		return 0;
	if (p->n_intents == p->cap_intents) {
		size_t cap = p->cap_intents ? p->cap_intents * 2 : 8;
		struct intent *ni = realloc(p->intents, cap * sizeof *ni);
		if (!ni)
			return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
		p->intents = ni;
		p->cap_intents = cap;
	}
	char *j = strdup(m->journal);
	if (!j || gaz_strset_add(&p->intent_set, m->journal) < 0) {
		free(j);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	p->intents[p->n_intents++] = (struct intent){.journal = j, .framing = m->framing};
	return 0;
}

static int publish(struct gaz_publisher *p, gaz_mapping_fn map, void *map_arg, void *msg, unsigned flags,
		   struct gaz_mapped *m, struct gaz_append_handle **h, struct gaz_status *st)
{
	if (p->auto_update)
		gaz_clock_update_now(p->clock);
	int rc = map(msg, map_arg, m, st);
	if (rc)
		return rc;
	/* Remembered first: an ACK of a journal that took no message is an
	 * empty commit, while a message without its ACK is never delivered. */
	if (flags == GAZ_FLAG_CONTINUE_TXN && (rc = remember_intent(p, m, st)))
		return rc;
	gaz_uuid u;
	gaz_uuid_build(&u, &p->producer, gaz_clock_tick(p->clock), flags);
	if ((rc = p->type->set_uuid(msg, &u, p->type->arg)))
		return gaz_status_set(st, rc, "setting the UUID of a message for \"%s\" failed", m->journal);
	uint8_t *frame;
	size_t len;
	if ((rc = gaz_message_frame(m->framing, p->type, msg, &frame, &len, st)))
		return rc;
	struct gaz_append_opts ao = {.journal = m->journal};
	struct gaz_append_handle *mine = NULL;
	rc = gaz_append_service_append(p->appends, &ao, frame, len, &mine, st);
	free(frame);
	if (rc)
		return rc;
	if (h)
		*h = gaz_append_handle_ref(mine);
	return track(p, m->journal, mine, st);
}

int gaz_publish_committed(struct gaz_publisher *p, gaz_mapping_fn map, void *map_arg, void *msg,
			  struct gaz_append_handle **h, struct gaz_status *st)
{
	struct gaz_mapped m;
	return publish(p, map, map_arg, msg, GAZ_FLAG_OUTSIDE_TXN, &m, h, st);
}

int gaz_publish_uncommitted(struct gaz_publisher *p, gaz_mapping_fn map, void *map_arg, void *msg,
			    struct gaz_append_handle **h, struct gaz_status *st)
{
	struct gaz_mapped m;
	return publish(p, map, map_arg, msg, GAZ_FLAG_CONTINUE_TXN, &m, h, st);
}

void gaz_ack_intents_free(struct gaz_ack_intent *a, size_t n)
{
	for (size_t i = 0; a && i < n; i++) {
		free(a[i].journal);
		free(a[i].intent);
	}
	free(a);
}

/* build_ack frames journal's ACK message with a fresh clock. */
static int build_ack(struct gaz_publisher *p, const struct intent *in, struct gaz_ack_intent *out,
		     struct gaz_status *st)
{
	void *ack = p->type->new_ack(in->journal, p->type->arg);
	if (!ack)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	gaz_uuid u;
	gaz_uuid_build(&u, &p->producer, gaz_clock_tick(p->clock), GAZ_FLAG_ACK_TXN);
	int rc = p->type->set_uuid(ack, &u, p->type->arg);
	if (rc == 0)
		rc = gaz_message_frame(in->framing, p->type, ack, &out->intent, &out->len, st);
	else
		gaz_status_set(st, rc, "setting the UUID of an ACK for \"%s\" failed", in->journal);
	p->type->free_msg(ack, p->type->arg);
	if (rc == 0 && !(out->journal = strdup(in->journal))) {
		free(out->intent);
		rc = gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	return rc;
}

int gaz_publisher_build_ack_intents(struct gaz_publisher *p, struct gaz_ack_intent **out, size_t *n,
				    struct gaz_status *st)
{
	struct gaz_ack_intent *a = calloc(p->n_intents ? p->n_intents : 1, sizeof *a);
	if (!a)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	for (size_t i = 0; i < p->n_intents; i++) {
		int rc = build_ack(p, &p->intents[i], &a[i], st);
		if (rc) {
			gaz_ack_intents_free(a, i);
			return rc;
		}
	}
	*out = a;
	*n = p->n_intents;
	for (size_t i = 0; i < p->n_intents; i++)
		free(p->intents[i].journal);
	p->n_intents = 0;
	gaz_strset_clear(&p->intent_set);
	return 0;
}

void gaz_publisher_free(struct gaz_publisher *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_intents; i++)
		free(p->intents[i].journal);
	free(p->intents);
	gaz_strset_release(&p->intent_set);
	for (size_t i = 0; i < p->n_pending; i++) {
		gaz_append_handle_free(p->pending[i].last);
		free(p->pending[i].journal);
	}
	free(p->pending);
	free(p);
}
