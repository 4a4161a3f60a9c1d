/*
 * shard.c - consumer ShardSpec validation (see shard.h). Built on the
 * broker-protocol validators through their context-taking forms
 * (vctx.h), so nested failures read as Gazette's do.
 */
#include "protocol/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/labels.h"
#include "protocol/validate.h"
#include "protocol/vctx.h"

int gaz_validate_shard_id(const char *id, struct gaz_status *st)
{
	id = gaz__str(id);
	return gaz__validate_token(id, strlen(id), GAZ_TOKEN_SYMBOLS, GAZ_SHARD_ID_MIN,
				   GAZ_SHARD_ID_MAX, NULL, st);
}

/* Go's path.IsAbs(p) && path.Clean(p) == p && path.Base(p) != "": "/" and
 * "/a/b" pass; "", "a", "/a/", "//a", "/a/./b" do not. */
static bool absolute_clean_path(const char *p)
{
	return p[0] == '/' && gaz_path_is_clean(p, strlen(p));
}

static int recovery_log(const Consumer__ShardSpec *s, const struct gaz__vctx *c,
			struct gaz_status *st)
{
	const char *prefix = gaz__str(s->recovery_log_prefix), *id = gaz__str(s->id);
	size_t n = strlen(prefix) + 1 + strlen(id) + 1;
	char *log;
	int rc;

	if (!*prefix)
		return 0;
	if (!(log = malloc(n)))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	snprintf(log, n, "%s/%s", prefix, id);
	GAZ__VCTX(cl, c, "RecoveryLogPrefix", -1);
	rc = gaz__validate_journal(log, &cl, st);
	free(log);
	return rc;
}

static int hints_and_durations(const Consumer__ShardSpec *s, const struct gaz__vctx *c,
			       struct gaz_status *st)
{
	const char *prefix = gaz__str(s->recovery_log_prefix), *hints = gaz__str(s->hint_prefix);
	int64_t min = gaz__duration_ns(s->min_txn_duration), max = gaz__duration_ns(s->max_txn_duration);

	if (!*prefix && *hints)
		return gaz__verr(st, c, "invalid non-empty HintPrefix with empty RecoveryLogPrefix (%s)",
				 hints);
	if (*prefix && !absolute_clean_path(hints))
		return gaz__verr(st, c,
				 "HintPrefix is not an absolute, clean, non-directory path (%s)", hints);
	if (s->hint_backups < 0)
		return gaz__verr(st, c, "invalid HintBackups (%d; expected >= 0)", s->hint_backups);
	if (min < 0)
		return gaz__verr(st, c, "invalid MinTxnDuration (%lld; expected >= 0)", (long long)min);
	if (max <= 0)
		return gaz__verr(st, c, "invalid MaxTxnDuration (%lld; expected > 0)", (long long)max);
	return 0;
}

static int labels(const Protocol__LabelSet *ls, const struct gaz__vctx *c, struct gaz_status *st)
{
	struct gaz_status sub = {0};
	GAZ__VCTX(cl, c, "LabelSet", -1);

	if (gaz__validate_labelset(ls, false, &cl, st))
		return GAZ_EINVAL;
	if (gaz_validate_single_value_labels(ls, &sub))
		return gaz__verr(st, &cl, "%s", sub.msg);
	if (gaz_labelset_value_of(ls, "id"))
		return gaz__verr(st, c, "Labels cannot include label \"id\"");
	return 0;
}

static int sources(const Consumer__ShardSpec *s, const struct gaz__vctx *c, struct gaz_status *st)
{
	for (size_t i = 0; i < s->n_sources; i++) {
		const Consumer__ShardSpec__Source *src = s->sources[i];
		const char *j = gaz__str(src->journal);
		GAZ__VCTX(cs, c, "Sources", (long)i);
		GAZ__VCTX(cj, &cs, "Journal", -1);

		if (gaz__validate_journal(j, &cj, st))
			return GAZ_EINVAL;
		if (src->min_offset < 0)
			return gaz__verr(st, &cs, "invalid MinOffset (%lld; expected > 0)",
					 (long long)src->min_offset);
		if (i && strcmp(j, gaz__str(s->sources[i - 1]->journal)) <= 0)
			return gaz__verr(st, c,
					 "Sources.Journal not in unique, sorted order (index %zu; %s <= %s)",
					 i, j, gaz__str(s->sources[i - 1]->journal));
	}
	return 0;
}

/* shard_spec validates `s` under context `c` (NULL: none). */
static int shard_spec(const Consumer__ShardSpec *s, const struct gaz__vctx *c, struct gaz_status *st)
{
	static const Consumer__ShardSpec zero = CONSUMER__SHARD_SPEC__INIT;
	GAZ__VCTX(cid, c, "Id", -1);
	const char *id;

	s = s ? s : &zero;
	id = gaz__str(s->id);
	if (gaz__validate_token(id, strlen(id), GAZ_TOKEN_SYMBOLS, GAZ_SHARD_ID_MIN,
				GAZ_SHARD_ID_MAX, &cid, st))
		return GAZ_EINVAL;
	if (recovery_log(s, c, st) || hints_and_durations(s, c, st) || labels(s->labels, c, st))
		return st && st->code ? st->code : GAZ_EINVAL;
	return sources(s, c, st);
}

int gaz_validate_shard_spec(const Consumer__ShardSpec *s, struct gaz_status *st)
{
	return shard_spec(s, NULL, st);
}

/* ---- consumer requests and responses --------------------------------------- */

int gaz_validate_consumer_status(int status, struct gaz_status *st)
{
	if (!protobuf_c_enum_descriptor_get_value(&consumer__status__descriptor, status))
		return gaz__verr(st, NULL, "invalid status (%d)", status);
	return 0;
}

int gaz_validate_replica_status(const Consumer__ReplicaStatus *rs, struct gaz_status *st)
{
	int code = rs ? (int)rs->code : 0;
	size_t n = rs ? rs->n_errors : 0;

	if (!protobuf_c_enum_descriptor_get_value(&consumer__replica_status__code__descriptor, code))
		return gaz__verr(st, NULL, "Code: invalid code (%d)", code);
	if (n == 0 && code == CONSUMER__REPLICA_STATUS__CODE__FAILED)
		return gaz__verr(st, NULL, "expected non-empty Errors with Code FAILED");
	if (n != 0 && code != CONSUMER__REPLICA_STATUS__CODE__FAILED)
		return gaz__verr(st, NULL, "expected Code FAILED with non-empty Errors");
	return 0;
}

static int apply_change(const Consumer__ApplyRequest__Change *ch, const struct gaz__vctx *c,
			struct gaz_status *st)
{
	const char *del = gaz__str(ch->delete_);
	GAZ__VCTX(cu, c, "Upsert", -1);
	GAZ__VCTX(cd, c, "Delete", -1);

	if (ch->upsert) {
		if (*del)
			return gaz__verr(st, c, "both Upsert and Delete are set (expected exactly one)");
		if (shard_spec(ch->upsert, &cu, st))
			return GAZ_EINVAL;
		if (ch->expect_mod_revision < -1)
			return gaz__verr(st, c, "invalid ExpectModRevision (%lld; expected >= 0 or -1)",
					 (long long)ch->expect_mod_revision);
		return 0;
	}
	if (!*del)
		return gaz__verr(st, c, "neither Upsert nor Delete are set (expected exactly one)");
	if (gaz__validate_token(del, strlen(del), GAZ_TOKEN_SYMBOLS, GAZ_SHARD_ID_MIN,
				GAZ_SHARD_ID_MAX, &cd, st))
		return GAZ_EINVAL;
	if (ch->expect_mod_revision <= 0 && ch->expect_mod_revision != -1)
		return gaz__verr(st, c, "invalid ExpectModRevision (%lld; expected > 0 or -1)",
				 (long long)ch->expect_mod_revision);
	if (ch->primary_hints)
		return gaz__verr(st, c, "hints may be set only with an upsert, not a delete");
	return 0;
}

int gaz_validate_shard_apply_change(const Consumer__ApplyRequest__Change *ch, struct gaz_status *st)
{
	return apply_change(ch, NULL, st);
}

int gaz_validate_shard_apply_request(const Consumer__ApplyRequest *req, struct gaz_status *st)
{
	for (size_t i = 0; i < req->n_changes; i++) {
		GAZ__VCTX(c, NULL, "Changes", (long)i);

		if (apply_change(req->changes[i], &c, st))
			return GAZ_EINVAL;
	}
	return 0;
}

static int list_shard(const Consumer__ListResponse__Shard *s, const struct gaz__vctx *c,
		      struct gaz_status *st)
{
	size_t members = s->route ? s->route->n_members : 0;
	GAZ__VCTX(cs, c, "Spec", -1);
	GAZ__VCTX(cr, c, "Route", -1);

	if (shard_spec(s->spec, &cs, st))
		return GAZ_EINVAL;
	if (s->mod_revision <= 0)
		return gaz__verr(st, c, "invalid ModRevision (%lld; expected > 0)",
				 (long long)s->mod_revision);
	if (gaz__validate_route(s->route, &cr, st))
		return GAZ_EINVAL;
	if (members != s->n_status)
		return gaz__verr(st, c, "length of Route.Members and Status are not equal (%zu vs %zu)",
				 members, s->n_status);
	for (size_t k = 0; k < s->n_status; k++) {
		struct gaz_status sub = {0};
		GAZ__VCTX(ck, c, "Status", (long)k);

		if (gaz_validate_replica_status(s->status[k], &sub))
			return gaz__verr(st, &ck, "%s", sub.msg);
	}
	return 0;
}

int gaz_validate_shard_list_response(const Consumer__ListResponse *resp, struct gaz_status *st)
{
	GAZ__VCTX(cs, NULL, "Status", -1);
	GAZ__VCTX(ch, NULL, "Header", -1);

	if (!protobuf_c_enum_descriptor_get_value(&consumer__status__descriptor, (int)resp->status))
		return gaz__verr(st, &cs, "invalid status (%d)", (int)resp->status);
	if (gaz__validate_header(resp->header, &ch, st))
		return GAZ_EINVAL;
	for (size_t i = 0; i < resp->n_shards; i++) {
		GAZ__VCTX(c, NULL, "Shards", (long)i);

		if (list_shard(resp->shards[i], &c, st))
			return GAZ_EINVAL;
	}
	return 0;
}
