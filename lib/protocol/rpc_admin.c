/*
 * rpc_admin.c - validation of List, Apply, ListFragments and
 * FragmentStoreHealth requests and responses (gazette-facts §3.8), in
 * Gazette's check order and wording. See rpc_check.c for Read, Append and
 * Replicate.
 */
#include "protocol/labels.h"
#include "protocol/url.h"
#include "protocol/validate.h"
#include "protocol/vctx.h"

#include "common/duration.h"

#include <string.h>

/* Status then (non-nullable) Header. */
static int status_header(int status, const Protocol__Header *h, struct gaz_status *st)
{
	GAZ__VCTX(cs, NULL, "Status", -1);
	GAZ__VCTX(ch, NULL, "Header", -1);

	if (gaz__validate_status(status, &cs, st))
		return GAZ_EINVAL;
	return gaz__validate_header(h, &ch, st);
}

/* ---- List ------------------------------------------------------------------------ */

/* Every "prefix" value of `set` ends in '/'. */
static int prefix_values(const Protocol__LabelSet *set, const char *side, struct gaz_status *st)
{
	size_t first, n = gaz_labelset_find(set, "prefix", &first);

	for (size_t i = first; n && i < first + n; i++) {
		const char *v = gaz__str(set->labels[i]->value);
		size_t len = strlen(v);

		if (len == 0 || v[len - 1] != '/')
			return gaz__verr(st, NULL,
					 "Selector.%s.Labels[\"prefix\"]: expected trailing '/' (%s)", side,
					 v);
	}
	return 0;
}

int gaz_validate_list_request(const Protocol__ListRequest *r, struct gaz_status *st)
{
	GAZ__VCTX(c, NULL, "Selector", -1);
	const Protocol__LabelSelector *sel = r->selector;

	if (gaz__validate_selector(sel, &c, st))
		return GAZ_EINVAL;
	if (sel && (prefix_values(sel->include, "Include", st) ||
		    prefix_values(sel->exclude, "Exclude", st)))
		return GAZ_EINVAL;
	return 0;
}

static int list_journal(const Protocol__ListResponse__Journal *j, const struct gaz__vctx *c,
			struct gaz_status *st)
{
	GAZ__VCTX(cs, c, "Spec", -1);
	GAZ__VCTX(cr, c, "Route", -1);
	int rc = gaz__validate_journal_spec(j ? j->spec : NULL, &cs, st);

	if (rc)
		return rc;
	if (!j || j->mod_revision <= 0)
		return gaz__verr(st, c, "invalid ModRevision (%lld; expected > 0)",
				 (long long)(j ? j->mod_revision : 0));
	return gaz__validate_route(j->route, &cr, st);
}

int gaz_validate_list_journal(const Protocol__ListResponse__Journal *j, struct gaz_status *st)
{
	return list_journal(j, NULL, st);
}

int gaz_validate_list_response(const Protocol__ListResponse *r, struct gaz_status *st)
{
	int rc = status_header((int)r->status, r->header, st);

	for (size_t i = 0; !rc && i < r->n_journals; i++) {
		GAZ__VCTX(c, NULL, "Journals", (long)i);

		rc = list_journal(r->journals[i], &c, st);
	}
	return rc;
}

/* ---- Apply ----------------------------------------------------------------------- */

static int apply_change(const Protocol__ApplyRequest__Change *ch, const struct gaz__vctx *c,
			struct gaz_status *st)
{
	GAZ__VCTX(cu, c, "Upsert", -1);
	GAZ__VCTX(cd, c, "Delete", -1);
	const char *del = gaz__str(ch->delete_);
	long long rev = (long long)ch->expect_mod_revision;

	if (ch->upsert) {
		if (del[0])
			return gaz__verr(st, c, "both Upsert and Delete are set (expected exactly one)");
		if (gaz__validate_journal_spec(ch->upsert, &cu, st))
			return GAZ_EINVAL;
		if (rev < 0 && rev != -1)
			return gaz__verr(st, c, "invalid ExpectModRevision (%lld; expected >= 0 or -1)",
					 rev);
		return 0;
	}
	if (!del[0])
		return gaz__verr(st, c, "neither Upsert nor Delete are set (expected exactly one)");
	if (gaz__validate_journal(del, &cd, st))
		return GAZ_EINVAL;
	if (rev <= 0 && rev != -1)
		return gaz__verr(st, c, "invalid ExpectModRevision (%lld; expected > 0 or -1)", rev);
	return 0;
}

int gaz_validate_apply_change(const Protocol__ApplyRequest__Change *ch, struct gaz_status *st)
{
	return apply_change(ch, NULL, st);
}

int gaz_validate_apply_request(const Protocol__ApplyRequest *r, struct gaz_status *st)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < r->n_changes; i++) {
		GAZ__VCTX(c, NULL, "Changes", (long)i);

		rc = apply_change(r->changes[i], &c, st);
	}
	return rc;
}

int gaz_validate_apply_response(const Protocol__ApplyResponse *r, struct gaz_status *st)
{
	return status_header((int)r->status, r->header, st);
}

/* ---- ListFragments --------------------------------------------------------------- */

int gaz_validate_fragments_request(const Protocol__FragmentsRequest *r, struct gaz_status *st)
{
	GAZ__VCTX(ch, NULL, "Header", -1);
	GAZ__VCTX(cj, NULL, "Journal", -1);
	int64_t ttl = gaz__duration_ns(r->signaturettl);
	char d[GAZ_DURATION_STR_MAX];

	if ((r->header && gaz__validate_header(r->header, &ch, st)) ||
	    gaz__validate_journal(r->journal, &cj, st))
		return GAZ_EINVAL;
	if (r->end_mod_time != 0 && r->end_mod_time < r->begin_mod_time)
		return gaz__verr(st, NULL, "invalid EndModTime (%lld must be after %lld)",
				 (long long)r->end_mod_time, (long long)r->begin_mod_time);
	if (r->next_page_token < 0)
		return gaz__verr(st, NULL, "invalid NextPageToken (%lld; must be >= 0)",
				 (long long)r->next_page_token);
	if (r->page_limit < 0 || r->page_limit > GAZ_PAGE_LIMIT_MAX)
		return gaz__verr(st, NULL, "invalid PageLimit (%d; must be >= 0 and <= %d)",
				 (int)r->page_limit, GAZ_PAGE_LIMIT_MAX);
	if (r->signaturettl && ttl <= 0)
		return gaz__verr(st, NULL, "invalid SignatureTTL (%s; must be > 0s)",
				 gaz_duration_format(ttl, d));
	return 0;
}

static int fragments_entry(const Protocol__FragmentsResponse__Fragment *f,
			   const struct gaz__vctx *c, struct gaz_status *st)
{
	GAZ__VCTX(cs, c, "Spec", -1);
	GAZ__VCTX(cu, c, "SignedUrl", -1);
	struct gaz_status ps = {0};
	struct gaz_url u;
	int rc;

	if (gaz__validate_fragment(f ? f->spec : NULL, &cs, st))
		return GAZ_EINVAL;
	rc = gaz_url_parse(f->signed_url, &u, &ps);
	if (rc == GAZ_ENOMEM)
		return gaz_status_set(st, GAZ_ENOMEM, "%s", ps.msg);
	if (rc)
		return gaz__verr(st, &cu, "%s", ps.msg);
	gaz_url_release(&u);
	return 0;
}

int gaz_validate_fragments_response(const Protocol__FragmentsResponse *r, struct gaz_status *st)
{
	int rc = status_header((int)r->status, r->header, st);

	for (size_t i = 0; !rc && i < r->n_fragments; i++) {
		GAZ__VCTX(c, NULL, "Fragments", (long)i);

		rc = fragments_entry(r->fragments[i], &c, st);
	}
	return rc;
}

/* ---- FragmentStoreHealth ----------------------------------------------------------- */

static int delete_prefix(const char *prefix, struct gaz_status *st)
{
	GAZ__VCTX(c, NULL, "CheckDeletePrefix", -1);
	size_t n = strlen(prefix);

	if (prefix[n - 1] != '/')
		return gaz__verr(st, &c, "must end in '/' (%s)", prefix);
	n--; /* trimmed of its trailing '/' */
	if ((n == 2 && !strncmp(prefix, "..", 2)) || (n >= 3 && !strncmp(prefix, "../", 3)))
		return gaz__verr(st, &c, "cannot traverse outside the store (%s)", prefix);
	return gaz__validate_path_component(prefix, n, 1, GAZ_JOURNAL_NAME_MAX, &c, st);
}

int gaz_validate_store_health_request(const Protocol__FragmentStoreHealthRequest *r,
				      struct gaz_status *st)
{
	GAZ__VCTX(cf, NULL, "FragmentStore", -1);
	GAZ__VCTX(cp, NULL, "CheckDeletePrefix", -1);
	const char *prefix = gaz__str(r->check_delete_prefix);
	int rc = gaz__validate_fragment_store(r->fragment_store, &cf, st);

	if (rc)
		return rc;
	if (prefix[0] && !r->check_delete)
		return gaz__verr(st, &cp, "cannot be set when CheckDelete is false");
	return prefix[0] ? delete_prefix(prefix, st) : 0;
}

int gaz_validate_store_health_response(const Protocol__FragmentStoreHealthResponse *r,
				       struct gaz_status *st)
{
	return status_header((int)r->status, r->header, st);
}
