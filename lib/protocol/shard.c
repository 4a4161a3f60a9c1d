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

static int recovery_log(const Consumer__ShardSpec *s, struct gaz_status *st)
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
	GAZ__VCTX(c, NULL, "RecoveryLogPrefix", -1);
	rc = gaz__validate_journal(log, &c, st);
	free(log);
	return rc;
}

static int hints_and_durations(const Consumer__ShardSpec *s, struct gaz_status *st)
{
	const char *prefix = gaz__str(s->recovery_log_prefix), *hints = gaz__str(s->hint_prefix);
	int64_t min = gaz__duration_ns(s->min_txn_duration), max = gaz__duration_ns(s->max_txn_duration);

	if (!*prefix && *hints)
		return gaz__verr(st, NULL, "invalid non-empty HintPrefix with empty RecoveryLogPrefix (%s)",
				 hints);
	if (*prefix && !absolute_clean_path(hints))
		return gaz__verr(st, NULL,
				 "HintPrefix is not an absolute, clean, non-directory path (%s)", hints);
	if (s->hint_backups < 0)
		return gaz__verr(st, NULL, "invalid HintBackups (%d; expected >= 0)", s->hint_backups);
	if (min < 0)
		return gaz__verr(st, NULL, "invalid MinTxnDuration (%lld; expected >= 0)", (long long)min);
	if (max <= 0)
		return gaz__verr(st, NULL, "invalid MaxTxnDuration (%lld; expected > 0)", (long long)max);
	return 0;
}

static int labels(const Protocol__LabelSet *ls, struct gaz_status *st)
{
	GAZ__VCTX(c, NULL, "LabelSet", -1);

	if (gaz__validate_labelset(ls, false, &c, st))
		return GAZ_EINVAL;
	if (gaz_validate_single_value_labels(ls, st)) {
		if (st)
			gaz_status_prefix(st, "LabelSet: ");
		return GAZ_EINVAL;
	}
	if (gaz_labelset_value_of(ls, "id"))
		return gaz__verr(st, NULL, "Labels cannot include label \"id\"");
	return 0;
}

static int sources(const Consumer__ShardSpec *s, struct gaz_status *st)
{
	for (size_t i = 0; i < s->n_sources; i++) {
		const Consumer__ShardSpec__Source *src = s->sources[i];
		const char *j = gaz__str(src->journal);
		GAZ__VCTX(c, NULL, "Sources", (long)i);
		GAZ__VCTX(cj, &c, "Journal", -1);

		if (gaz__validate_journal(j, &cj, st))
			return GAZ_EINVAL;
		if (src->min_offset < 0)
			return gaz__verr(st, &c, "invalid MinOffset (%lld; expected > 0)",
					 (long long)src->min_offset);
		if (i && strcmp(j, gaz__str(s->sources[i - 1]->journal)) <= 0)
			return gaz__verr(st, NULL,
					 "Sources.Journal not in unique, sorted order (index %zu; %s <= %s)",
					 i, j, gaz__str(s->sources[i - 1]->journal));
	}
	return 0;
}

int gaz_validate_shard_spec(const Consumer__ShardSpec *s, struct gaz_status *st)
{
	static const Consumer__ShardSpec zero = CONSUMER__SHARD_SPEC__INIT;
	GAZ__VCTX(cid, NULL, "Id", -1);
	const char *id;

	s = s ? s : &zero;
	id = gaz__str(s->id);
	if (gaz__validate_token(id, strlen(id), GAZ_TOKEN_SYMBOLS, GAZ_SHARD_ID_MIN,
				GAZ_SHARD_ID_MAX, &cid, st))
		return GAZ_EINVAL;
	if (recovery_log(s, st) || hints_and_durations(s, st) || labels(s->labels, st))
		return st && st->code ? st->code : GAZ_EINVAL;
	return sources(s, st);
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

int gaz_validate_shard_apply_change(const Consumer__ApplyRequest__Change *ch, struct gaz_status *st)
{
	const char *del = gaz__str(ch->delete_);

	if (ch->upsert) {
		if (*del)
			return gaz__verr(st, NULL,
					 "both Upsert and Delete are set (expected exactly one)");
		if (gaz_validate_shard_spec(ch->upsert, st)) {
			gaz_status_prefix(st, "Upsert: ");
			return GAZ_EINVAL;
		}
		if (ch->expect_mod_revision < -1)
			return gaz__verr(st, NULL, "invalid ExpectModRevision (%lld; expected >= 0 or -1)",
					 (long long)ch->expect_mod_revision);
		return 0;
	}
	if (!*del)
		return gaz__verr(st, NULL, "neither Upsert nor Delete are set (expected exactly one)");
	if (gaz_validate_shard_id(del, st)) {
		gaz_status_prefix(st, "Delete: ");
		return GAZ_EINVAL;
	}
	if (ch->expect_mod_revision <= 0 && ch->expect_mod_revision != -1)
		return gaz__verr(st, NULL, "invalid ExpectModRevision (%lld; expected > 0 or -1)",
				 (long long)ch->expect_mod_revision);
	if (ch->primary_hints)
		return gaz__verr(st, NULL, "hints may be set only with an upsert, not a delete");
	return 0;
}

int gaz_validate_shard_apply_request(const Consumer__ApplyRequest *req, struct gaz_status *st)
{
	for (size_t i = 0; i < req->n_changes; i++) {
		if (gaz_validate_shard_apply_change(req->changes[i], st)) {
			gaz_status_prefix(st, "Changes[%zu]: ", i);
			return GAZ_EINVAL;
		}
	}
	return 0;
}

static int list_shard(const Consumer__ListResponse__Shard *s, struct gaz_status *st)
{
	size_t members = s->route ? s->route->n_members : 0;

	if (gaz_validate_shard_spec(s->spec, st)) {
		gaz_status_prefix(st, "Spec: ");
		return GAZ_EINVAL;
	}
	if (s->mod_revision <= 0)
		return gaz__verr(st, NULL, "invalid ModRevision (%lld; expected > 0)",
				 (long long)s->mod_revision);
	if (gaz_validate_route(s->route, st)) {
		gaz_status_prefix(st, "Route: ");
		return GAZ_EINVAL;
	}
	if (members != s->n_status)
		return gaz__verr(st, NULL,
				 "length of Route.Members and Status are not equal (%zu vs %zu)",
				 members, s->n_status);
	for (size_t k = 0; k < s->n_status; k++) {
		if (gaz_validate_replica_status(s->status[k], st)) {
			gaz_status_prefix(st, "Status[%zu]: ", k);
			return GAZ_EINVAL;
		}
	}
	return 0;
}

int gaz_validate_shard_list_response(const Consumer__ListResponse *resp, struct gaz_status *st)
{
	if (gaz_validate_consumer_status((int)resp->status, st)) {
		gaz_status_prefix(st, "Status: ");
		return GAZ_EINVAL;
	}
	if (gaz_validate_header(resp->header, st)) {
		gaz_status_prefix(st, "Header: ");
		return GAZ_EINVAL;
	}
	for (size_t i = 0; i < resp->n_shards; i++) {
		if (list_shard(resp->shards[i], st)) {
			gaz_status_prefix(st, "Shards[%zu]: ", i);
			return GAZ_EINVAL;
		}
	}
	return 0;
}
