/*
 * rpc_check.c - validation of the protocol.Journal requests and responses
 * (gazette-facts §3.8, §2.9), in Gazette's check order and wording.
 *
 * Where Gazette prints a whole sub-message ("unexpected Header with Content
 * (<proto text>)") we print the sentence without the dump. Presence of a
 * bytes field is data != NULL || len > 0 (see validate.h).
 */
#include "protocol/labels.h"
#include "protocol/url.h"
#include "protocol/validate.h"
#include "protocol/vctx.h"

#include "common/duration.h"

#include <string.h>

static bool has_bytes(ProtobufCBinaryData b)
{
	return b.data != NULL || b.len > 0;
}

/* Header `h` if present, under context "Header". */
static int opt_header(const Protocol__Header *h, struct gaz_status *st)
{
	GAZ__VCTX(c, NULL, "Header", -1);

	return h ? gaz__validate_header(h, &c, st) : 0;
}

/* Status then (non-nullable) Header, the start of most responses. */
static int status_header(int status, const Protocol__Header *h, struct gaz_status *st)
{
	GAZ__VCTX(cs, NULL, "Status", -1);
	GAZ__VCTX(ch, NULL, "Header", -1);

	if (gaz__validate_status(status, &cs, st))
		return GAZ_EINVAL;
	return gaz__validate_header(h, &ch, st);
}

/* `raw` parses as a URL, else the parse error under context `name`. */
static int url_parses(const char *raw, const char *name, struct gaz_status *st)
{
	GAZ__VCTX(c, NULL, name, -1);
	struct gaz_status ps = {0};
	struct gaz_url u;
	int rc = gaz_url_parse(raw, &u, &ps);

	if (rc == GAZ_ENOMEM)
		return gaz_status_set(st, GAZ_ENOMEM, "%s", ps.msg);
	if (rc)
		return gaz__verr(st, &c, "%s", ps.msg);
	gaz_url_release(&u);
	return 0;
}

/* ---- Read ------------------------------------------------------------------------ */

int gaz_validate_read_request(const Protocol__ReadRequest *r, struct gaz_status *st)
{
	GAZ__VCTX(cj, NULL, "Journal", -1);

	if (opt_header(r->header, st) || gaz__validate_journal(r->journal, &cj, st))
		return GAZ_EINVAL;
	if (r->offset < -1)
		return gaz__verr(st, NULL, "invalid Offset (%lld; expected -1 <= Offset <= MaxInt64)",
				 (long long)r->offset);
	if (r->end_offset < 0 || (r->end_offset != 0 && r->end_offset < r->offset))
		return gaz__verr(st, NULL, "invalid EndOffset (%lld; expected 0 or Offset <= EndOffset)",
				 (long long)r->end_offset);
	return 0;
}

static int read_chunk(const Protocol__ReadResponse *r, struct gaz_status *st)
{
	char name[32];

	if (r->status != PROTOCOL__STATUS__OK)
		return gaz__verr(st, NULL, "unexpected Status with Content (%s)",
				 gaz__enum_name(&protocol__status__descriptor, (int)r->status, name,
						sizeof(name)));
	if (r->header)
		return gaz__verr(st, NULL, "unexpected Header with Content");
	if (r->write_head != 0)
		return gaz__verr(st, NULL, "unexpected WriteHead with Content (%lld)",
				 (long long)r->write_head);
	if (r->fragment)
		return gaz__verr(st, NULL, "unexpected Fragment with Content");
	if (gaz__str(r->fragment_url)[0])
		return gaz__verr(st, NULL, "unexpected FragmentUrl with Content (%s)", r->fragment_url);
	return 0;
}

static int read_fragment(const Protocol__ReadResponse *r, struct gaz_status *st)
{
	const Protocol__Fragment *f = r->fragment;
	GAZ__VCTX(cf, NULL, "Fragment", -1);

	if (gaz__validate_fragment(f, &cf, st))
		return GAZ_EINVAL;
	if (r->offset < f->begin || r->offset >= f->end)
		return gaz__verr(st, NULL, "invalid Offset (%lld; expected %lld <= offset < %lld)",
				 (long long)r->offset, (long long)f->begin, (long long)f->end);
	if (r->write_head < f->end)
		return gaz__verr(st, NULL, "invalid WriteHead (%lld; expected >= %lld)",
				 (long long)r->write_head, (long long)f->end);
	if (gaz__str(r->fragment_url)[0])
		return url_parses(r->fragment_url, "FragmentUrl", st);
	return 0;
}

int gaz_validate_read_response(const Protocol__ReadResponse *r, struct gaz_status *st)
{
	GAZ__VCTX(cs, NULL, "Status", -1);

	if (gaz__validate_status((int)r->status, &cs, st))
		return GAZ_EINVAL;
	if (has_bytes(r->content))
		return read_chunk(r, st);
	if (opt_header(r->header, st))
		return GAZ_EINVAL;
	if (r->write_head < 0)
		return gaz__verr(st, NULL, "invalid WriteHead (%lld; expected >= 0)",
				 (long long)r->write_head);
	if (r->fragment)
		return read_fragment(r, st);
	if (r->status == PROTOCOL__STATUS__OK && r->offset != 0)
		return gaz__verr(st, NULL, "unexpected Offset without Fragment or Content (%lld)",
				 (long long)r->offset);
	if (gaz__str(r->fragment_url)[0])
		return gaz__verr(st, NULL, "unexpected FragmentUrl without Fragment (%s)",
				 r->fragment_url);
	return 0;
}

/* ---- Append ---------------------------------------------------------------------- */

static int append_first(const Protocol__AppendRequest *r, struct gaz_status *st)
{
	GAZ__VCTX(cj, NULL, "Journal", -1);
	GAZ__VCTX(cc, NULL, "CheckRegisters", -1);
	GAZ__VCTX(cu, NULL, "UnionRegisters", -1);
	GAZ__VCTX(cs, NULL, "SubtractRegisters", -1);
	GAZ__VCTX(cp, NULL, "Suspend", -1);

	if (opt_header(r->header, st) || gaz__validate_journal(r->journal, &cj, st))
		return GAZ_EINVAL;
	if (r->offset < 0)
		return gaz__verr(st, NULL, "invalid Offset (%lld; expected >= 0)",
				 (long long)r->offset);
	if (r->content.len != 0)
		return gaz__verr(st, NULL, "unexpected Content");
	if ((r->check_registers && gaz__validate_selector(r->check_registers, &cc, st)) ||
	    (r->union_registers && gaz__validate_labelset(r->union_registers, false, &cu, st)) ||
	    (r->subtract_registers &&
	     gaz__validate_labelset(r->subtract_registers, false, &cs, st)))
		return GAZ_EINVAL;
	if ((int)r->suspend < 0 || r->suspend > PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_KEEP)
		return gaz__verr(st, &cp, "invalid Suspend variant (%d)", (int)r->suspend);
	return 0;
}

int gaz_validate_append_request(const Protocol__AppendRequest *r, struct gaz_status *st)
{
	char name[32];

	if (gaz__str(r->journal)[0])
		return append_first(r, st);
	if (r->header)
		return gaz__verr(st, NULL, "unexpected Header");
	if (r->do_not_proxy)
		return gaz__verr(st, NULL, "unexpected DoNotProxy");
	if (r->offset != 0)
		return gaz__verr(st, NULL, "unexpected Offset");
	if (r->check_registers)
		return gaz__verr(st, NULL, "unexpected CheckRegisters");
	if (r->union_registers)
		return gaz__verr(st, NULL, "unexpected UnionRegisters");
	if (r->subtract_registers)
		return gaz__verr(st, NULL, "unexpected SubtractRegisters");
	if (r->suspend != PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_RESUME)
		return gaz__verr(st, NULL, "unexpected Suspend (%s; expected SUSPEND_RESUMED)",
				 gaz__enum_name(&protocol__append_request__suspend__descriptor,
						(int)r->suspend, name, sizeof(name)));
	return 0;
}

int gaz_validate_append_response(const Protocol__AppendResponse *r, struct gaz_status *st)
{
	GAZ__VCTX(cc, NULL, "Commit", -1);
	GAZ__VCTX(cr, NULL, "Registers", -1);
	bool ok = r->status == PROTOCOL__STATUS__OK;

	if (status_header((int)r->status, r->header, st))
		return GAZ_EINVAL;
	if (ok && !r->commit)
		return gaz__verr(st, NULL, "expected Commit");
	if ((ok || r->status == PROTOCOL__STATUS__REGISTER_MISMATCH) && !r->registers)
		return gaz__verr(st, NULL, "expected Registers");
	if (r->commit && gaz__validate_fragment(r->commit, &cc, st))
		return GAZ_EINVAL;
	if (r->registers && gaz__validate_labelset(r->registers, false, &cr, st))
		return GAZ_EINVAL;
	return 0;
}

/* ---- Replicate ------------------------------------------------------------------- */

static int replicate_proposal(const Protocol__ReplicateRequest *r, struct gaz_status *st)
{
	GAZ__VCTX(cp, NULL, "Proposal", -1);
	GAZ__VCTX(cr, NULL, "Registers", -1);
	const char *dj = gaz__str(r->deprecated_journal);

	if (opt_header(r->header, st))
		return GAZ_EINVAL;
	if (r->header && !r->acknowledge)
		return gaz__verr(st, NULL, "expected Acknowledge with Header");
	if (gaz__validate_fragment(r->proposal, &cp, st) ||
	    gaz__validate_labelset(r->registers, false, &cr, st))
		return GAZ_EINVAL;
	if (has_bytes(r->content))
		return gaz__verr(st, NULL, "unexpected Content with Proposal (len %zu)",
				 r->content.len);
	if (r->content_delta != 0)
		return gaz__verr(st, NULL, "unexpected ContentDelta with Proposal (%lld)",
				 (long long)r->content_delta);
	if (dj[0] && strcmp(dj, gaz__str(r->proposal->journal)))
		return gaz__verr(st, NULL,
				 "DeprecatedJournal and Proposal.Journal mismatch (%s vs %s)", dj,
				 gaz__str(r->proposal->journal));
	return 0;
}

int gaz_validate_replicate_request(const Protocol__ReplicateRequest *r, struct gaz_status *st)
{
	if (r->proposal)
		return replicate_proposal(r, st);
	if (!has_bytes(r->content))
		return gaz__verr(st, NULL, "expected Content or Proposal");
	if (r->content_delta < 0)
		return gaz__verr(st, NULL, "invalid ContentDelta (%lld; expected >= 0)",
				 (long long)r->content_delta);
	if (r->header)
		return gaz__verr(st, NULL, "unexpected Header with Content");
	if (r->registers)
		return gaz__verr(st, NULL, "unexpected Registers with Content");
	if (r->acknowledge)
		return gaz__verr(st, NULL, "unexpected Acknowledge with Content");
	if (gaz__str(r->deprecated_journal)[0])
		return gaz__verr(st, NULL, "unexpected DeprecatedJournal with Content");
	return 0;
}

int gaz_validate_replicate_response(const Protocol__ReplicateResponse *r, struct gaz_status *st)
{
	GAZ__VCTX(cs, NULL, "Status", -1);
	GAZ__VCTX(ch, NULL, "Header", -1);
	GAZ__VCTX(cf, NULL, "Fragment", -1);
	GAZ__VCTX(cr, NULL, "Registers", -1);

	if (gaz__validate_status((int)r->status, &cs, st))
		return GAZ_EINVAL;
	if (r->status == PROTOCOL__STATUS__WRONG_ROUTE) {
		if (!r->header)
			return gaz__verr(st, NULL, "expected Header");
		if (gaz__validate_header(r->header, &ch, st))
			return GAZ_EINVAL;
	} else if (r->header) {
		return gaz__verr(st, NULL, "unexpected Header");
	}
	if (r->status != PROTOCOL__STATUS__PROPOSAL_MISMATCH) {
		if (r->fragment)
			return gaz__verr(st, NULL, "unexpected Fragment");
		if (r->registers)
			return gaz__verr(st, NULL, "unexpected Registers");
		return 0;
	}
	if (!r->fragment)
		return gaz__verr(st, NULL, "expected Fragment");
	if (gaz__validate_fragment(r->fragment, &cf, st))
		return GAZ_EINVAL;
	if (!r->registers)
		return gaz__verr(st, NULL, "expected Registers");
	return gaz__validate_labelset(r->registers, false, &cr, st);
}
