/*
 * route.c - validation of processes, brokers, endpoints, routes, headers and
 * fragments (gazette-facts §3.5, §3.7) and of Status values.
 *
 * A NULL sub-message is its zero value: protobuf-c leaves absent
 * non-nullable Gazette fields (Header.route, Header.etcd, ...) NULL, and Go
 * validates their zero value, e.g. an absent Header.etcd fails with
 * "invalid ClusterId (expected != 0)".
 */
#include "protocol/url.h"
#include "protocol/validate.h"
#include "protocol/vctx.h"

#include <string.h>

static const Protocol__ProcessSpec__ID zero_id = PROTOCOL__PROCESS_SPEC__ID__INIT;

static int process_id(const Protocol__ProcessSpec__ID *id, const struct gaz__vctx *c,
		      struct gaz_status *st)
{
	GAZ__VCTX(cz, c, "Zone", -1);
	GAZ__VCTX(cs, c, "Suffix", -1);
	const char *zone, *suffix;

	if (!id)
		id = &zero_id;
	zone = gaz__str(id->zone);
	suffix = gaz__str(id->suffix);
	if (gaz__validate_token(zone, strlen(zone), GAZ_TOKEN_SYMBOLS, GAZ_ZONE_MIN, GAZ_ZONE_MAX,
				&cz, st))
		return GAZ_EINVAL;
	return gaz__validate_token(suffix, strlen(suffix), GAZ_TOKEN_SYMBOLS, GAZ_SUFFIX_MIN,
				   GAZ_SUFFIX_MAX, &cs, st);
}

int gaz_validate_process_id(const Protocol__ProcessSpec__ID *id, struct gaz_status *st)
{
	return process_id(id, NULL, st);
}

int gaz__validate_endpoint(const char *raw, const struct gaz__vctx *c, struct gaz_status *st)
{
	struct gaz_status ps = {0};
	struct gaz_url u;
	int rc;

	raw = gaz__str(raw);
	rc = gaz_url_parse(raw, &u, &ps);
	if (rc == GAZ_ENOMEM)
		return gaz_status_set(st, GAZ_ENOMEM, "%s", ps.msg);
	if (rc)
		return gaz__verr(st, c, "%s", ps.msg);
	if (!gaz_url_is_abs(&u))
		rc = gaz__verr(st, c, "not absolute: %s", raw);
	else if (!u.host[0])
		rc = gaz__verr(st, c, "missing host: %s", raw);
	gaz_url_release(&u);
	return rc;
}

int gaz_validate_endpoint(const char *url, struct gaz_status *st)
{
	return gaz__validate_endpoint(url, NULL, st);
}

static int process_spec(const Protocol__ProcessSpec *ps, const struct gaz__vctx *c,
			struct gaz_status *st)
{
	GAZ__VCTX(ci, c, "Id", -1);
	GAZ__VCTX(ce, c, "Endpoint", -1);
	int rc = process_id(ps ? ps->id : NULL, &ci, st);

	return rc ? rc : gaz__validate_endpoint(ps ? ps->endpoint : NULL, &ce, st);
}

int gaz_validate_process_spec(const Protocol__ProcessSpec *ps, struct gaz_status *st)
{
	return process_spec(ps, NULL, st);
}

int gaz_validate_broker_spec(const Protocol__BrokerSpec *bs, struct gaz_status *st)
{
	/* The ProcessSpec is embedded in Go: its errors carry no extra context. */
	int rc = process_spec(bs ? bs->process_spec : NULL, NULL, st);

	if (rc)
		return rc;
	if (bs && bs->journal_limit > GAZ_JOURNAL_LIMIT_MAX)
		return gaz__verr(st, NULL,
				 "invalid JournalLimit (%u; expected 0 <= JournalLimit <= %u)",
				 (unsigned)bs->journal_limit, GAZ_JOURNAL_LIMIT_MAX);
	return 0;
}

/* (zone, suffix) byte order; NULL is the zero ID. */
static int id_cmp(const Protocol__ProcessSpec__ID *a, const Protocol__ProcessSpec__ID *b)
{
	int c;

	a = a ? a : &zero_id;
	b = b ? b : &zero_id;
	c = strcmp(gaz__str(a->zone), gaz__str(b->zone));
	return c ? c : strcmp(gaz__str(a->suffix), gaz__str(b->suffix));
}

static int route_members(const Protocol__Route *rt, const struct gaz__vctx *c,
			 struct gaz_status *st)
{
	for (size_t i = 0; i < rt->n_members; i++) {
		const Protocol__ProcessSpec__ID *a = i ? rt->members[i - 1] : NULL, *b = rt->members[i];
		GAZ__VCTX(cm, c, "Members", (long)i);

		if (process_id(b, &cm, st))
			return GAZ_EINVAL;
		if (i && id_cmp(a, b) >= 0)
			return gaz__verr(st, c,
					 "Members not in unique, sorted order (index %zu; {Zone:%s Suffix:%s} <= {Zone:%s Suffix:%s})",
					 i, gaz__str(a->zone), gaz__str(a->suffix), gaz__str(b->zone),
					 gaz__str(b->suffix));
	}
	return 0;
}

int gaz__validate_route(const Protocol__Route *rt, const struct gaz__vctx *c,
			struct gaz_status *st)
{
	static const Protocol__Route zero = PROTOCOL__ROUTE__INIT;
	int rc;

	if (!rt)
		rt = &zero;
	if ((rc = route_members(rt, c, st)))
		return rc;
	if (rt->primary < -1 || (int64_t)rt->primary >= (int64_t)rt->n_members)
		return gaz__verr(st, c, "invalid Primary (%d; expected -1 <= Primary < %zu)",
				 (int)rt->primary, rt->n_members);
	if (rt->n_endpoints != 0 && rt->n_endpoints != rt->n_members)
		return gaz__verr(st, c, "len(Endpoints) != 0, and != len(Members) (%zu vs %zu)",
				 rt->n_endpoints, rt->n_members);
	for (size_t i = 0; i < rt->n_endpoints; i++) {
		GAZ__VCTX(ce, c, "Endpoints", (long)i);

		if (gaz__str(rt->endpoints[i])[0] &&
		    (rc = gaz__validate_endpoint(rt->endpoints[i], &ce, st)))
			return rc;
	}
	return 0;
}

int gaz_validate_route(const Protocol__Route *rt, struct gaz_status *st)
{
	return gaz__validate_route(rt, NULL, st);
}

static int header_etcd(const Protocol__Header__Etcd *e, const struct gaz__vctx *c,
		       struct gaz_status *st)
{
	static const Protocol__Header__Etcd zero = PROTOCOL__HEADER__ETCD__INIT;

	if (!e)
		e = &zero;
	if (e->cluster_id == 0)
		return gaz__verr(st, c, "invalid ClusterId (expected != 0)");
	if (e->member_id == 0)
		return gaz__verr(st, c, "invalid MemberId (expected != 0)");
	if (e->revision <= 0)
		return gaz__verr(st, c, "invalid Revision (%lld; expected 0 < revision)",
				 (long long)e->revision);
	if (e->raft_term == 0)
		return gaz__verr(st, c, "invalid RaftTerm (expected != 0)");
	return 0;
}

int gaz__validate_header(const Protocol__Header *hdr, const struct gaz__vctx *c,
			 struct gaz_status *st)
{
	static const Protocol__Header zero = PROTOCOL__HEADER__INIT;
	GAZ__VCTX(cp, c, "ProcessId", -1);
	GAZ__VCTX(cr, c, "Route", -1);
	GAZ__VCTX(ce, c, "Etcd", -1);
	int rc;

	if (!hdr)
		hdr = &zero;
	if (id_cmp(hdr->process_id, &zero_id) != 0 && process_id(hdr->process_id, &cp, st))
		return GAZ_EINVAL;
	if ((rc = gaz__validate_route(hdr->route, &cr, st)))
		return rc;
	return header_etcd(hdr->etcd, &ce, st);
}

int gaz_validate_header(const Protocol__Header *hdr, struct gaz_status *st)
{
	return gaz__validate_header(hdr, NULL, st);
}

int gaz__validate_fragment(const Protocol__Fragment *f, const struct gaz__vctx *c,
			   struct gaz_status *st)
{
	static const Protocol__Fragment zero = PROTOCOL__FRAGMENT__INIT;
	GAZ__VCTX(cj, c, "Journal", -1);
	GAZ__VCTX(cc, c, "CompressionCodec", -1);
	GAZ__VCTX(cp, c, "PathPostfix", -1);
	const char *postfix;

	if (!f)
		f = &zero;
	if (gaz__validate_journal(f->journal, &cj, st))
		return GAZ_EINVAL;
	if (f->begin > f->end)
		return gaz__verr(st, c, "expected Begin <= End (have %lld, %lld)",
				 (long long)f->begin, (long long)f->end);
	if (gaz__validate_codec((int)f->compression_codec, &cc, st))
		return GAZ_EINVAL;
	postfix = gaz__str(f->path_postfix);
	return gaz__validate_path_component(postfix, strlen(postfix), 0, GAZ_JOURNAL_NAME_MAX, &cp,
					    st);
}

int gaz_validate_fragment(const Protocol__Fragment *frag, struct gaz_status *st)
{
	return gaz__validate_fragment(frag, NULL, st);
}

int gaz__validate_status(int status, const struct gaz__vctx *c, struct gaz_status *st)
{
	if (protobuf_c_enum_descriptor_get_value(&protocol__status__descriptor, status))
		return 0;
	return gaz__verr(st, c, "invalid status (%d)", status);
}

int gaz_validate_status(int status, struct gaz_status *st)
{
	return gaz__validate_status(status, NULL, st);
}
