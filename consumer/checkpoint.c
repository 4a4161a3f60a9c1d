/*
 * checkpoint.c - a shard's checkpoint to and from Gazette's
 * consumer.Checkpoint protobuf (BuildCheckpoint, FlattenReadThrough and
 * FlattenProducerStates of consumer/protocol). Pure conversions; the
 * protobuf structs built here borrow the caller's strings.
 */
#include <stdlib.h>
#include <string.h>

#include "consumer.pb-c.h"
#include "gazette/consumer.h"

/* One source being built: a journal, its offset, its producers. */
struct src {
	const char *journal;
	Consumer__Checkpoint__Source pb;
	Consumer__Checkpoint__SourcesEntry entry;
};

static int by_journal(const void *a, const void *b)
{
	return strcmp(((const struct src *)a)->journal, ((const struct src *)b)->journal);
}

static int by_ack_journal(const void *a, const void *b)
{
	return strcmp((*(Consumer__Checkpoint__AckIntentsEntry *const *)a)->key,
		      (*(Consumer__Checkpoint__AckIntentsEntry *const *)b)->key);
}

/* find_src: the source of journal among n (sorted), or NULL. */
static struct src *find_src(struct src *s, size_t n, const char *journal)
{
	struct src key = {.journal = journal};
	return bsearch(&key, s, n, sizeof *s, by_journal);
}

int gaz_checkpoint_encode(const struct gaz_sequencer_checkpoint *seq, const struct gaz_ack_intent *acks,
			  size_t n_acks, uint8_t **out, size_t *len, struct gaz_status *st)
{
	int rc = GAZ_ENOMEM;
	size_t cap = seq->n_offsets + seq->n_states, n = 0;
	struct src *srcs = calloc(cap ? cap : 1, sizeof *srcs);
	Consumer__Checkpoint__SourcesEntry **entries = calloc(cap ? cap : 1, sizeof *entries);
	Consumer__Checkpoint__Source__ProducerEntry *pe = calloc(seq->n_states ? seq->n_states : 1, sizeof *pe);
	Consumer__Checkpoint__ProducerState *ps = calloc(seq->n_states ? seq->n_states : 1, sizeof *ps);
	Consumer__Checkpoint__Source__ProducerEntry **pep = calloc(seq->n_states ? seq->n_states : 1, sizeof *pep);
	Consumer__Checkpoint__AckIntentsEntry *ae = calloc(n_acks ? n_acks : 1, sizeof *ae);
	Consumer__Checkpoint__AckIntentsEntry **aep = calloc(n_acks ? n_acks : 1, sizeof *aep);
	uint8_t *b = NULL;
	if (!srcs || !entries || !pe || !ps || !pep || !ae || !aep)
		goto done;
	/* Sources: every journal with an offset or a producer, once. */
	for (size_t i = 0; i < seq->n_offsets; i++)
		srcs[n++] = (struct src){.journal = seq->offsets[i].journal};
	for (size_t i = 0; i < seq->n_states; i++)
		srcs[n++] = (struct src){.journal = seq->states[i].journal};
	qsort(srcs, n, sizeof *srcs, by_journal);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (u == 0 || strcmp(srcs[u - 1].journal, srcs[i].journal) != 0)
			srcs[u++] = srcs[i];
	n = u;
	for (size_t i = 0; i < n; i++)
		consumer__checkpoint__source__init(&srcs[i].pb);
	for (size_t i = 0; i < seq->n_offsets; i++)
		find_src(srcs, n, seq->offsets[i].journal)->pb.read_through = seq->offsets[i].offset;
	/* Producers, grouped by journal in the order given: count, then place. */
	for (size_t i = 0; i < seq->n_states; i++)
		find_src(srcs, n, seq->states[i].journal)->pb.n_producers++;
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		srcs[i].pb.producers = pep + at;
		at += srcs[i].pb.n_producers;
		srcs[i].pb.n_producers = 0;
	}
	for (size_t i = 0; i < seq->n_states; i++) {
		const struct gaz_producer_state *s = &seq->states[i];
		consumer__checkpoint__producer_state__init(&ps[i]);
		ps[i].last_ack = s->last_ack;
		ps[i].begin = s->begin;
		consumer__checkpoint__source__producer_entry__init(&pe[i]);
		pe[i].id = (ProtobufCBinaryData){6, (uint8_t *)s->producer.b};
		pe[i].state = &ps[i];
		struct src *sr = find_src(srcs, n, s->journal);
		sr->pb.producers[sr->pb.n_producers++] = &pe[i];
	}
	for (size_t i = 0; i < n; i++) {
		consumer__checkpoint__sources_entry__init(&srcs[i].entry);
		srcs[i].entry.key = (char *)srcs[i].journal;
		srcs[i].entry.value = &srcs[i].pb;
		entries[i] = &srcs[i].entry;
	}
	for (size_t i = 0; i < n_acks; i++) {
		consumer__checkpoint__ack_intents_entry__init(&ae[i]);
		ae[i].key = acks[i].journal;
		ae[i].value = (ProtobufCBinaryData){acks[i].len, acks[i].intent};
		aep[i] = &ae[i];
	}
	qsort(aep, n_acks, sizeof *aep, by_ack_journal);
	Consumer__Checkpoint cp = CONSUMER__CHECKPOINT__INIT;
	cp.n_sources = n;
	cp.sources = entries;
	cp.n_ack_intents = n_acks;
	cp.ack_intents = aep;
	size_t sz = consumer__checkpoint__get_packed_size(&cp);
	if (!(b = malloc(sz ? sz : 1)))
		goto done;
	consumer__checkpoint__pack(&cp, b);
	*out = b;
	*len = sz;
	rc = 0;
done:
	free(srcs);
	free(entries);
	free(pe);
	free(ps);
	free(pep);
	free(ae);
	free(aep);
	return rc ? gaz_status_set(st, rc, "out of memory encoding a checkpoint") : 0;
}

int gaz_checkpoint_decode(const uint8_t *b, size_t n, struct gaz_sequencer_checkpoint *seq,
			  struct gaz_ack_intent **acks, size_t *n_acks, struct gaz_status *st)
{
	*seq = (struct gaz_sequencer_checkpoint){0};
	if (acks) {
		*acks = NULL;
		*n_acks = 0;
	}
	Consumer__Checkpoint *cp = consumer__checkpoint__unpack(NULL, n, b);
	if (!cp)
		return gaz_status_set(st, GAZ_EINVAL, "checkpoint does not decode (%zu bytes)", n);
	struct gaz_sequencer_checkpoint out = {0};
	struct gaz_ack_intent *a = NULL;
	size_t n_states = 0;
	int rc = GAZ_ENOMEM;
	for (size_t i = 0; i < cp->n_sources; i++)
		n_states += cp->sources[i]->value ? cp->sources[i]->value->n_producers : 0;
	out.offsets = calloc(cp->n_sources ? cp->n_sources : 1, sizeof *out.offsets);
	out.states = calloc(n_states ? n_states : 1, sizeof *out.states);
	a = calloc(cp->n_ack_intents ? cp->n_ack_intents : 1, sizeof *a);
	if (!out.offsets || !out.states || !a)
		goto fail;
	for (size_t i = 0; i < cp->n_sources; i++) {
		const Consumer__Checkpoint__Source *s = cp->sources[i]->value;
		if (!(out.offsets[out.n_offsets].journal = strdup(cp->sources[i]->key)))
			goto fail;
		out.offsets[out.n_offsets++].offset = s ? s->read_through : 0;
		for (size_t k = 0; s && k < s->n_producers; k++) {
			const Consumer__Checkpoint__Source__ProducerEntry *p = s->producers[k];
			if (p->id.len != 6) {
				rc = gaz_status_set(st, GAZ_EINVAL, "checkpoint of \"%s\" has a producer id of %zu bytes",
						    cp->sources[i]->key, p->id.len);
				goto fail;
			}
			struct gaz_producer_state *ps = &out.states[out.n_states];
			if (!(ps->journal = strdup(cp->sources[i]->key)))
				goto fail;
			out.n_states++;
			memcpy(ps->producer.b, p->id.data, 6);
			ps->last_ack = p->state ? p->state->last_ack : 0;
			ps->begin = p->state ? p->state->begin : 0;
		}
	}
	size_t na = 0;
	for (size_t i = 0; acks && i < cp->n_ack_intents; i++) {
		const Consumer__Checkpoint__AckIntentsEntry *e = cp->ack_intents[i];
		if (!(a[na].journal = strdup(e->key)) || !(a[na].intent = malloc(e->value.len ? e->value.len : 1))) {
			free(a[na].journal);
			a[na].journal = NULL; /* the cleanup below stops at the first NULL */
			goto fail;
		}
		if (e->value.len) /* an empty value's data is NULL: no memcpy from it */
			memcpy(a[na].intent, e->value.data, e->value.len);
		a[na++].len = e->value.len;
	}
	consumer__checkpoint__free_unpacked(cp, NULL);
	*seq = out;
	if (acks) {
		*acks = a;
		*n_acks = na;
	} else {
		free(a);
	}
	return 0;
fail:
	if (a) {
		for (size_t i = 0; i < cp->n_ack_intents && a[i].journal; i++)
			free(a[i].journal), free(a[i].intent);
		free(a);
	}
	consumer__checkpoint__free_unpacked(cp, NULL);
	gaz_sequencer_checkpoint_release(&out);
	return rc == GAZ_ENOMEM ? gaz_status_set(st, GAZ_ENOMEM, "out of memory decoding a checkpoint") : rc;
}
