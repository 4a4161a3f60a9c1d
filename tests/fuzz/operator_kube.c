/*
 * operator_kube.c - fuzz target: the Kubernetes API JSON the operator
 * reads. A watch body is split into lines (operator/kube.c
 * gaz_kube_lines_feed) and each line decoded as a watch event
 * (gaz_kube_event_parse); a line that is no event is taken as a LIST
 * response and its items used (informer.c's list_page). Each object is
 * keyed (informer.c gaz_object_key) and then read as the reconcilers read
 * it: a JournalSpec custom resource's .spec (journal_cr.c: to a
 * JournalSpec, validated, its deletion policy, and back to a CR, which
 * must convert to an equal spec), a ShardSpec's (shard_cr.c, likewise),
 * and anything else as a pod by the drain (drain.c, included here: its
 * path, finalizer and drain annotation, its phase).
 *
 * Input: a watch response body (newline-separated JSON objects).
 */
#include "fuzz.h"

#include <stdio.h>

#include "../../operator/drain.c"
#include "operator/journal_cr.h"
#include "operator/kube.h"
#include "operator/shard_cr.h"
#include "protocol/shard.h"
#include "protocol/validate.h"

static void journal_cr(const json_t *spec)
{
	Protocol__JournalSpec *d = NULL, *back = NULL;
	struct gaz_status st = {0};

	gaz_journal_cr_policy(spec);
	if (gaz_journal_cr_to_spec(spec, &d, &st))
		return;
	if (gaz_validate_journal_spec(d, &st) == 0) {
		json_t *cr = gaz_journal_spec_to_cr(d);
		Protocol__JournalSpec__Suspend *sus = d->suspend;
		if (!cr || gaz_journal_cr_to_spec(cr, &back, &st)) {
			fprintf(stderr, "JournalSpec CR of a valid spec does not convert back: %s\n", st.msg);
			abort();
		}
		d->suspend = NULL; /* the CR has no suspend */
		if (!gaz_journal_spec_equal(d, back)) {
			fprintf(stderr, "JournalSpec CR round trip differs\n");
			abort();
		}
		d->suspend = sus;
		protobuf_c_message_free_unpacked(&back->base, NULL);
		json_decref(cr);
	}
	protobuf_c_message_free_unpacked(&d->base, NULL);
}

static void shard_cr(const json_t *spec)
{
	Consumer__ShardSpec *d = NULL, *back = NULL;
	struct gaz_status st = {0};

	if (gaz_shard_cr_to_spec(spec, &d, &st))
		return;
	if (gaz_validate_shard_spec(d, &st) == 0) {
		json_t *cr = gaz_shard_spec_to_cr(d);
		if (!cr || gaz_shard_cr_to_spec(cr, &back, &st)) {
			fprintf(stderr, "ShardSpec CR of a valid spec does not convert back: %s\n", st.msg);
			abort();
		}
		if (!gaz_shard_spec_equal(d, back)) {
			fprintf(stderr, "ShardSpec CR round trip differs\n");
			abort();
		}
		protobuf_c_message_free_unpacked(&back->base, NULL);
		json_decref(cr);
	}
	protobuf_c_message_free_unpacked(&d->base, NULL);
}

static void object(const json_t *obj)
{
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	char key[600], path[1024], msg[256];

	gaz_object_key(obj, key, sizeof(key));
	if (kind && !strcmp(kind, "JournalSpec")) {
		journal_cr(json_object_get(obj, "spec"));
	} else if (kind && !strcmp(kind, "ShardSpec")) {
		shard_cr(json_object_get(obj, "spec"));
	} else {
		pod_path(obj, path, sizeof(path));
		has_finalizer(obj);
		drain_annotation(obj);
		drain_phase(obj, NULL, msg, sizeof(msg));
	}
}

static int on_line(void *arg, const char *line, size_t len)
{
	struct gaz_kube_event ev = {0};
	struct gaz_status st = {0};
	json_t *list, *it;
	size_t i;

	(void)arg;
	if (gaz_kube_event_parse(line, len, &ev, &st) == 0) {
		if (ev.object)
			object(ev.object);
		gaz_kube_event_release(&ev);
		return 0;
	}
	if (!(list = json_loadb(line, len, 0, NULL)))
		return 0;
	json_array_foreach(json_object_get(list, "items"), i, it)
		object(it);
	json_decref(list);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gaz_kube_lines l = {.max = 1 << 20};

	gaz_kube_lines_feed(&l, (const char *)data, size, on_line, NULL);
	gaz_kube_lines_feed(&l, "\n", 1, on_line, NULL); /* the body's end ends its last line */
	gaz_kube_lines_release(&l);
	return 0;
}
