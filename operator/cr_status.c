/*
 * cr_status.c - writes to JournalSpec and ShardSpec resources: our finalizer (a merge
 * patch carrying metadata.resourceVersion, so a concurrent edit makes it
 * fail with 409 instead of being overwritten) and the status subresource
 * (a merge patch written only when something other than lastSyncTime
 * changed, so a resync of an unchanged journal writes nothing and does
 * not wake watchers). Conditions follow metav1.Condition.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "operator/operator.h"

static bool is_shard(const json_t *obj)
{
	return !strcmp(json_string_value(json_object_get(obj, "kind")) ?: "", "ShardSpec");
}

static const char *finalizer(const json_t *obj)
{
	return is_shard(obj) ? GAZ_OP_SHARD_FINALIZER : GAZ_OP_FINALIZER;
}

void gaz_cr_path(const json_t *obj, const char *suffix, char *buf, size_t cap)
{
	const json_t *md = json_object_get(obj, "metadata");

	snprintf(buf, cap, GAZ_OP_API_PATH "/namespaces/%s/%s/%s%s",
		 json_string_value(json_object_get(md, "namespace")) ?: "",
		 is_shard(obj) ? "shardspecs" : "journalspecs",
		 json_string_value(json_object_get(md, "name")) ?: "", suffix);
}

static bool same(const json_t *a, const json_t *b)
{
	return (!a && !b) || (a && b && json_equal((json_t *)a, (json_t *)b));
}

bool gaz_cr_needs_reconcile(const json_t *old, const json_t *obj)
{
	const json_t *mo = json_object_get(old, "metadata"), *mn = json_object_get(obj, "metadata");

	if (!old || !obj)
		return true;
	return !same(json_object_get(mo, "generation"), json_object_get(mn, "generation")) ||
	       !same(json_object_get(mo, "deletionTimestamp"), json_object_get(mn, "deletionTimestamp")) ||
	       !same(json_object_get(mo, "finalizers"), json_object_get(mn, "finalizers"));
}

bool gaz_cr_has_finalizer(const json_t *obj)
{
	const json_t *fins = json_object_get(json_object_get(obj, "metadata"), "finalizers"), *f;
	size_t i;

	json_array_foreach(fins, i, f) {
		if (json_is_string(f) && !strcmp(json_string_value(f), finalizer(obj)))
			return true;
	}
	return false;
}

int gaz_cr_set_finalizer(struct gaz_op *op, const json_t *obj, bool add, struct gaz_status *st)
{
	const json_t *md = json_object_get(obj, "metadata");
	const json_t *fins = json_object_get(md, "finalizers"), *f;
	json_t *list = json_array(), *patch;
	char path[1024];
	size_t i;
	int rc;

	json_array_foreach(fins, i, f) {
		if (!json_is_string(f) || strcmp(json_string_value(f), finalizer(obj)))
			json_array_append(list, (json_t *)f);
	}
	if (add)
		json_array_append_new(list, json_string(finalizer(obj)));
	patch = json_pack("{s:{s:O?, s:o}}", "metadata", "resourceVersion",
			  json_object_get(md, "resourceVersion"), "finalizers", list);
	if (!patch)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	gaz_cr_path(obj, "", path, sizeof(path));
	rc = gaz_kube_requestj(op->kube, "PATCH", path, "application/merge-patch+json", patch, NULL,
			       NULL, st);
	json_decref(patch);
	return rc;
}

void gaz_cr_condition(json_t *status, const json_t *old_status, const char *type,
		      const char *cstatus, const char *reason, const char *message,
		      int64_t generation)
{
	json_t *conds = json_object_get(status, "conditions"), *c;
	const json_t *old = NULL, *oc;
	char now[40];
	size_t i;

	json_array_foreach(json_object_get(old_status, "conditions"), i, oc) {
		if (!strcmp(json_string_value(json_object_get(oc, "type")) ?: "", type))
			old = oc;
	}
	if (!conds) {
		conds = json_array();
		json_object_set_new(status, "conditions", conds);
	}
	const char *since = json_string_value(json_object_get(old, "lastTransitionTime"));
	if (!old || !since || strcmp(json_string_value(json_object_get(old, "status")) ?: "", cstatus))
		since = gaz_kube_now_rfc3339(now, sizeof(now), false);
	c = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "type", type, "status", cstatus, "reason",
		      reason, "message", message, "observedGeneration", (json_int_t)generation,
		      "lastTransitionTime", since);
	for (i = 0; i < json_array_size(conds); i++)
		if (!strcmp(json_string_value(json_object_get(json_array_get(conds, i), "type")) ?: "",
			    type)) {
			json_array_set_new(conds, i, c);
			return;
		}
	json_array_append_new(conds, c);
}

/* A deep copy of `status` without lastSyncTime, for comparing. */
static json_t *comparable(const json_t *status)
{
	json_t *c = status ? json_deep_copy(status) : json_object();

	json_object_del(c, "lastSyncTime");
	return c;
}

int gaz_cr_patch_status(struct gaz_op *op, const json_t *obj, json_t *status, bool *written,
			struct gaz_status *st)
{
	const json_t *old = json_object_get(obj, "status"), *v;
	json_t *a = comparable(old), *b = comparable(status), *patch;
	char path[1024], now[40];
	const char *key;
	bool same = json_equal(a, b);
	int rc;

	json_decref(a);
	json_decref(b);
	*written = false;
	if (same)
		return 0;
	json_object_set_new(status, "lastSyncTime", json_string(gaz_kube_now_rfc3339(now, sizeof(now), false)));
	/* A merge patch keeps keys it does not mention: null the ones we dropped. */
	patch = json_deep_copy(status);
	json_object_foreach((json_t *)old, key, v) {
		if (!json_object_get(status, key))
			json_object_set_new(patch, key, json_null());
	}
	json_t *body = json_pack("{s:o}", "status", patch);
	if (!body)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	gaz_cr_path(obj, "/status", path, sizeof(path));
	rc = gaz_kube_requestj(op->kube, "PATCH", path, "application/merge-patch+json", body, NULL,
			       NULL, st);
	json_decref(body);
	*written = rc == 0;
	return rc;
}
