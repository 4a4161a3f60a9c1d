/*
 * partitions.c - a polled list of journals by label selector, and the
 * mappings that pick one of them for a message (Gazette's PolledList and
 * Random/Modulo/RendezvousMapping).
 *
 * Lock rule: `mu` guards `snap` and `stopping`. The polling thread lists
 * without the lock and swaps the new snapshot in under it; mappings copy
 * what they pick out under it. A snapshot is immutable once published.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "common/log.h"
#include "gazette/client.h"
#include "gazette/message.h"
#include "protocol/labels.h"

struct part {
	char *journal;
	int framing_rc; /* 0, or why its content-type has no framing */
	enum gaz_framing framing;
	uint32_t name_hash;
};

struct snapshot {
	struct part *parts;
	size_t n;
};

struct gaz_partitions {
	struct gaz_client *client;
	Protocol__LabelSelector *sel;
	int64_t interval_ms;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stopping;
	struct snapshot *snap;
};

uint32_t gaz_fnv1a32(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 16777619u;
	return h;
}

static void snapshot_free(struct snapshot *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->parts[i].journal);
	free(s->parts);
	free(s);
}

/* list_snapshot: a snapshot of the journals the selector matches now. */
static int list_snapshot(struct gaz_partitions *p, struct snapshot **out, struct gaz_status *st)
{
	Protocol__ListResponse *lr;
	int rc = gaz_client_list(p->client, p->sel, &lr, st);
	if (rc)
		return rc;
	struct snapshot *s = calloc(1, sizeof *s);
	if (!s || !(s->parts = calloc(lr->n_journals ? lr->n_journals : 1, sizeof *s->parts))) {
		free(s);
		protobuf_c_message_free_unpacked(&lr->base, NULL);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory listing partitions");
	}
	for (size_t i = 0; i < lr->n_journals; i++) {
		const Protocol__JournalSpec *spec = lr->journals[i]->spec;
		struct part *pt = &s->parts[s->n];
		if (!(pt->journal = strdup(spec->name))) {
			snapshot_free(s);
			protobuf_c_message_free_unpacked(&lr->base, NULL);
			return gaz_status_set(st, GAZ_ENOMEM, "out of memory listing partitions");
		}
		s->n++;
		pt->name_hash = gaz_fnv1a32(spec->name, strlen(spec->name));
		pt->framing_rc = gaz_framing_for_content_type(gaz_labelset_value_of(spec->labels, "content-type"),
							      &pt->framing, NULL);
	}
	protobuf_c_message_free_unpacked(&lr->base, NULL);
	*out = s;
	return 0;
}

static void *poll_main(void *arg)
{
	struct gaz_partitions *p = arg;
	pthread_mutex_lock(&p->mu);
	while (!p->stopping) {
		struct timespec at;
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_sec += p->interval_ms / 1000;
		at.tv_nsec += (p->interval_ms % 1000) * 1000000;
		if (at.tv_nsec >= 1000000000) {
			at.tv_sec++;
			at.tv_nsec -= 1000000000;
		}
		while (!p->stopping && pthread_cond_timedwait(&p->cv, &p->mu, &at) == 0)
			;
		if (p->stopping)
			break;
		pthread_mutex_unlock(&p->mu);
		struct gaz_status st = {0};
		struct snapshot *s = NULL;
		if (list_snapshot(p, &s, &st) != 0)
			gaz_warn("polling partitions failed (keeping the last list)", "err=%s", st.msg);
		pthread_mutex_lock(&p->mu);
		if (s) {
			snapshot_free(p->snap);
			p->snap = s;
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int gaz_partitions_new(struct gaz_client *c, const char *selector, int64_t interval_ms,
		       struct gaz_partitions **out, struct gaz_status *st)
{
	struct gaz_partitions *p = calloc(1, sizeof *p);
	if (!p)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	p->client = c;
	p->interval_ms = interval_ms > 0 ? interval_ms : 30000;
	int rc = gaz_selector_parse(selector ? selector : "", &p->sel, st);
	if (rc) {
		free(p);
		return rc;
	}
	if ((rc = list_snapshot(p, &p->snap, st))) {
		gaz_selector_free(p->sel);
		free(p);
		return rc;
	}
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&p->mu, NULL);
	if (pthread_create(&p->thread, NULL, poll_main, p) != 0) {
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		snapshot_free(p->snap);
		gaz_selector_free(p->sel);
		free(p);
		return gaz_status_set(st, GAZ_ENOMEM, "starting the partitions' poller failed");
	}
	*out = p;
	return 0;
}

size_t gaz_partitions_count(struct gaz_partitions *p)
{
	pthread_mutex_lock(&p->mu);
	size_t n = p->snap->n;
	pthread_mutex_unlock(&p->mu);
	return n;
}

void gaz_partitions_free(struct gaz_partitions *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	snapshot_free(p->snap);
	gaz_selector_free(p->sel);
	free(p);
}

/* pick copies partition i of the current snapshot out (under mu). */
static int pick(const struct snapshot *s, size_t i, struct gaz_mapped *out, struct gaz_status *st)
{
	const struct part *pt = &s->parts[i];
	if (pt->framing_rc)
		return gaz_status_set(st, GAZ_EINVAL, "journal \"%s\" has no message framing for its content-type",
				      pt->journal);
	snprintf(out->journal, sizeof out->journal, "%s", pt->journal);
	out->framing = pt->framing;
	return 0;
}

enum mapping { MODULO, RENDEZVOUS, RANDOM };

static int map(struct gaz_partitions *p, enum mapping how, const void *key, size_t key_len,
	       struct gaz_mapped *out, struct gaz_status *st)
{
	uint32_t h = how == RANDOM ? 0 : gaz_fnv1a32(key, key_len);
	uint32_t r = 0;
	if (how == RANDOM && RAND_bytes((unsigned char *)&r, sizeof r) != 1)
		r = (uint32_t)random();
	pthread_mutex_lock(&p->mu);
	const struct snapshot *s = p->snap;
	int rc;
	if (s->n == 0) {
		rc = gaz_status_set(st, GAZ_ENOTFOUND, "empty ListResponse");
	} else if (how == MODULO) {
		rc = pick(s, h % s->n, out, st);
	} else if (how == RANDOM) {
		rc = pick(s, r % s->n, out, st);
	} else {
		size_t best = 0;
		uint32_t hrw = 0;
		for (size_t i = 0; i < s->n; i++) {
			uint32_t w = h ^ s->parts[i].name_hash;
			if (w > hrw) {
				hrw = w;
				best = i;
			}
		}
		rc = pick(s, best, out, st);
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int gaz_map_modulo(struct gaz_partitions *p, const void *key, size_t key_len, struct gaz_mapped *out,
		   struct gaz_status *st)
{
	return map(p, MODULO, key, key_len, out, st);
}

int gaz_map_rendezvous(struct gaz_partitions *p, const void *key, size_t key_len, struct gaz_mapped *out,
		       struct gaz_status *st)
{
	return map(p, RENDEZVOUS, key, key_len, out, st);
}

int gaz_map_random(struct gaz_partitions *p, struct gaz_mapped *out, struct gaz_status *st)
{
	return map(p, RANDOM, NULL, 0, out, st);
}
