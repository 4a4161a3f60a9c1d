/*
 * lifecycle.c - bucket lifecycle rules from JournalSpecs' retention.
 *
 * Gazette's brokers never delete fragments; `fragment.retention` is meant
 * to be enforced by the store's own lifecycle policy or by `gazctl
 * journals prune` (k8s.md §4.3). For each s3:// store of a journal whose
 * retention is positive, the operator keeps one rule in the bucket:
 *
 *   ID      "gazette-operator/" + the filter prefix (or, past 255 bytes,
 *           "gazette-operator/sha256-" + hex SHA-256 of it)
 *   Filter  Prefix = store path prefix + journal (find/replace applied,
 *           as the store names fragments) + "/"
 *   Expiration Days = retention rounded up to whole days
 *
 * and none for a recovery log (label content-type
 * application/x-gazette-recoverylog: its fragments are needed for as long
 * as a shard's hints reference them, whatever their age; Gazette's docs
 * say never to age-expire them), nor without retention. Each sync reads
 * the bucket's configuration, merges (store/lifecycle.h: other owners'
 * rules kept verbatim), and writes it back only if it changed; more than
 * S3's 1,000 rules is refused with condition Lifecycle=False RuleLimit.
 * status.lifecycle.rules lists what was applied, so a store, retention or
 * label change, and the resource's deletion, remove rules no longer
 * wanted. Runs on the operator's one worker thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "operator/lifecycle.h"
#include "operator/operator.h"
#include "protocol/labels.h"
#include "store/lifecycle.h"
#include "store/sigv4.h"

#define NS_PER_DAY (86400LL * 1000000000LL)
#define RECOVERY_LOG "application/x-gazette-recoverylog"

/* One rule, wanted or previously applied. */
struct want {
	const char *store;        /* borrowed */
	char id[GAZ_LC_ID_MAX + 1];
	char prefix[2048];
	int64_t days;
};

static int64_t retention_ns(const Protocol__JournalSpec *spec)
{
	const Google__Protobuf__Duration *d = spec && spec->fragment ? spec->fragment->retention : NULL;

	return d ? d->seconds * 1000000000LL + d->nanos : 0;
}

/* Why a journal gets no rules, or NULL when it may. */
static const char *excluded(const Protocol__JournalSpec *spec, size_t *n_s3)
{
	const char *ct = spec ? gaz_labelset_value_of(spec->labels, "content-type") : NULL;

	*n_s3 = 0;
	for (size_t i = 0; spec && spec->fragment && i < spec->fragment->n_stores; i++)
		*n_s3 += !strncmp(spec->fragment->stores[i], "s3://", 5);
	if (!spec)
		return "resource deleted";
	if (ct && !strcmp(ct, RECOVERY_LOG))
		return "RecoveryLog";
	if (retention_ns(spec) <= 0)
		return "NoRetention";
	if (!*n_s3)
		return "NoS3Store";
	return NULL;
}

static void rule_id(const char *prefix, char out[GAZ_LC_ID_MAX + 1])
{
	static const char own[] = GAZ_LIFECYCLE_ID_PREFIX, hashed[] = GAZ_LIFECYCLE_ID_PREFIX "sha256-";
	size_t n = strlen(prefix);

	if (sizeof(own) - 1 + n <= GAZ_LC_ID_MAX) {
		memcpy(out, own, sizeof(own) - 1);
		memcpy(out + sizeof(own) - 1, prefix, n + 1);
		return;
	}
	memcpy(out, hashed, sizeof(hashed) - 1);
	gaz_sigv4_sha256_hex(prefix, n, out + sizeof(hashed) - 1); /* 64 hex + NUL */
}

/* The rule journal `spec` wants in store `url` (already known to be s3). */
static int wanted(const Protocol__JournalSpec *spec, const char *url, struct want *w,
		  struct gaz_status *st)
{
	struct gaz_lc_bucket *b;
	int rc;

	if ((rc = gaz_lc_bucket_open(url, &b, st)))
		return rc;
	rc = gaz_lc_bucket_key_prefix(b, spec->name, w->prefix, sizeof(w->prefix), st);
	gaz_lc_bucket_close(b);
	if (rc)
		return rc;
	w->store = url;
	rule_id(w->prefix, w->id);
	w->days = (retention_ns(spec) + NS_PER_DAY - 1) / NS_PER_DAY;
	return 0;
}

/* Brings one bucket (of store `url`) in line: `set` rules present,
 * `drop` ids absent. */
static int sync_bucket(const char *url, const struct want *set, size_t n_set,
		       const char *const *drop, size_t n_drop, bool *limit, struct gaz_status *st)
{
	struct gaz_lc_bucket *b = NULL;
	struct gaz_lc_doc doc = {0};
	char *xml = NULL, *out = NULL;
	size_t len = 0, olen = 0;
	bool changed = false, ch;
	int rc;

	*limit = false;
	if ((rc = gaz_lc_bucket_open(url, &b, st)) || (rc = gaz_lc_bucket_get(b, &xml, &len, st)) ||
	    (rc = gaz_lc_doc_parse(xml, len, GAZ_LIFECYCLE_ID_PREFIX, &doc, st)))
		goto out;
	for (size_t i = 0; i < n_drop; i++) {
		gaz_lc_doc_remove(&doc, drop[i], &ch);
		changed |= ch;
	}
	for (size_t i = 0; i < n_set && !rc; i++) {
		rc = gaz_lc_doc_set(&doc, set[i].id, set[i].prefix, set[i].days, &ch, st);
		changed |= ch;
	}
	if (rc || !changed)
		goto out;
	if (gaz_lc_doc_count(&doc) > GAZ_LC_RULES_MAX) {
		*limit = true;
		rc = gaz_status_set(st, GAZ_EINVAL, "bucket \"%s\" would hold %zu lifecycle rules, more than "
				    "S3's %d (%zu of other owners, %zu of gazette-operator)",
				    gaz_lc_bucket_name(b), gaz_lc_doc_count(&doc), GAZ_LC_RULES_MAX,
				    doc.n_foreign, doc.n_owned);
		goto out;
	}
	if (!gaz_lc_doc_count(&doc))
		rc = gaz_lc_bucket_delete(b, st);
	else if (!(rc = gaz_lc_doc_render(&doc, &out, &olen, st)))
		rc = gaz_lc_bucket_put(b, out, olen, st);
	if (!rc)
		gaz_info("bucket lifecycle written", "bucket=%s rules=%zu owned=%zu", gaz_lc_bucket_name(b),
			 gaz_lc_doc_count(&doc), doc.n_owned);
out:
	free(out);
	free(xml);
	gaz_lc_doc_release(&doc);
	gaz_lc_bucket_close(b);
	return rc;
}

static json_t *rule_json(const struct want *w, const char *bucket)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:I}", "store", w->store, "bucket", bucket, "id", w->id,
			 "prefix", w->prefix, "expirationDays", (json_int_t)w->days);
}

/* The bucket name of an s3:// URL ("s3://name/..."), into out. */
static const char *bucket_of(const char *url, char *out, size_t cap)
{
	const char *b = url + 5, *e = strchr(b, '/');

	snprintf(out, cap, "%.*s", e ? (int)(e - b) : (int)strlen(b), b);
	return out;
}

/* Stores named by `want` or by the previous status, each once. */
static size_t store_set(const struct want *w, size_t nw, const json_t *prev, const char **out,
			size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < nw + json_array_size(prev) && n < cap; i++) {
		const char *s = i < nw ? w[i].store
				       : json_string_value(json_object_get(json_array_get(prev, i - nw), "store"));
		bool seen = !s;
		for (size_t j = 0; j < n && !seen; j++)
			seen = !strcmp(out[j], s);
		if (!seen)
			out[n++] = s;
	}
	return n;
}

/* One store: its wanted rules set, its previously applied ones no longer
 * wanted removed; what now stands is appended to `applied`. */
static int sync_store(const char *store, const struct want *w, size_t nw, const json_t *prev,
		      json_t *applied, bool *limit, struct gaz_status *st)
{
	struct want *set = calloc(nw ? nw : 1, sizeof(*set));
	const char *drop[256];
	size_t nset = 0, nd = 0, i;
	const json_t *r;
	char bucket[256];
	int rc;

	*limit = false;
	if (!set)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	for (i = 0; i < nw; i++)
		if (!strcmp(w[i].store, store))
			set[nset++] = w[i];
	json_array_foreach(prev, i, r) {
		const char *id = json_string_value(json_object_get(r, "id"));
		bool keep = false;
		if (!id || strcmp(json_string_value(json_object_get(r, "store")) ?: "", store))
			continue;
		for (size_t k = 0; k < nset && !keep; k++)
			keep = !strcmp(set[k].id, id);
		if (!keep && nd < sizeof(drop) / sizeof(drop[0]))
			drop[nd++] = id;
	}
	rc = sync_bucket(store, set, nset, drop, nd, limit, st);
	if (rc == GAZ_ENOTFOUND && !nset)
		rc = 0; /* the bucket is gone, and its rules with it */
	for (i = 0; !rc && i < nset; i++)
		json_array_append_new(applied, rule_json(&set[i], bucket_of(store, bucket, sizeof(bucket))));
	json_array_foreach(prev, i, r) { /* rules not yet removed stay listed, to retry */
		if (rc && !strcmp(json_string_value(json_object_get(r, "store")) ?: "", store))
			json_array_append_new(applied, json_deep_copy(r));
	}
	free(set);
	return rc;
}

static void set_condition(json_t *status, const json_t *old_status, int rc, bool limit,
			  const char *why, size_t n, const char *err, int64_t generation)
{
	char msg[1024];

	if (rc) {
		gaz_cr_condition(status, old_status, "Lifecycle", "False", limit ? "RuleLimit" : "S3Error",
				 err, generation);
		return;
	}
	snprintf(msg, sizeof(msg), "%zu rule(s)%s%s", n, why ? "; " : "",
		 !why ? "" : !strcmp(why, "RecoveryLog") ? "recovery logs are never age-expired"
			 : !strcmp(why, "NoRetention") ? "no retention"
			 : !strcmp(why, "NoS3Store") ? "no s3:// store" : why);
	gaz_cr_condition(status, old_status, "Lifecycle", "True", why ? why : "Applied", msg, generation);
}

int gaz_lifecycle_sync(const Protocol__JournalSpec *spec, const json_t *old_status, json_t *status,
		       int64_t generation, struct gaz_status *st)
{
	const json_t *prev = json_object_get(json_object_get(old_status, "lifecycle"), "rules");
	size_t n_s3, nw = 0, ns;
	const char *why = excluded(spec, &n_s3), *stores[64];
	struct want *w = calloc(n_s3 ? n_s3 : 1, sizeof(*w));
	json_t *applied = json_array(), *lc;
	int first_rc = 0;
	bool limit_hit = false;

	if (!w || !applied) {
		free(w);
		json_decref(applied);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	for (size_t i = 0; !why && i < spec->fragment->n_stores; i++) {
		const char *url = spec->fragment->stores[i];
		struct gaz_status ws = {0};
		if (strncmp(url, "s3://", 5))
			continue;
		if (wanted(spec, url, &w[nw], &ws) == 0)
			nw++;
		else if (!first_rc)
			first_rc = gaz_status_set(st, ws.code, "store %s: %s", url, ws.msg);
	}
	ns = store_set(w, nw, prev, stores, sizeof(stores) / sizeof(stores[0]));
	for (size_t s = 0; s < ns; s++) {
		struct gaz_status bs = {0};
		bool limit;
		int rc = sync_store(stores[s], w, nw, prev, applied, &limit, &bs);
		if (rc && !first_rc)
			first_rc = gaz_status_set(st, rc, "%s", bs.msg);
		limit_hit |= rc && limit;
	}
	lc = json_object();
	json_object_set_new(lc, "rules", applied);
	if (why && strcmp(why, "resource deleted"))
		json_object_set_new(lc, "excluded", json_string(why));
	json_object_set_new(status, "lifecycle", lc);
	set_condition(status, old_status, first_rc, limit_hit, why, json_array_size(applied),
		      first_rc ? st->msg : "", generation);
	free(w);
	return first_rc;
}
