/*
 * fragments_api.c - ListFragments and FragmentStoreHealth (facts §2.6,
 * §2.7): paging over a journal's fragment index, and the tracked health of
 * a store (stores.c) with the optional delete probe.
 */
#include "broker/broker.h"
#include "protocol/auth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "broker/proxy.h"
#include "broker/replica.h"
#include "broker/stores.h"
#include "common/clock.h"
#include "common/log.h"
#include "protocol/validate.h"

/* FragmentStoreHealth waits this long for a store's first check (Gazette
 * waits for it within the request's context; a check is bounded at 1 min). */
#define HEALTH_WAIT_MS 60000

struct page {
	Protocol__FragmentsResponse__Fragment **v;
	size_t n;
	int64_t next_token;
};

static void page_release(struct page *p)
{
	for (size_t i = 0; i < p->n; i++) {
		Protocol__FragmentsResponse__Fragment *f = p->v[i];
		free(f->spec->journal);
		free(f->spec->backing_store);
		free(f->spec->path_postfix);
		free(f->spec->sum);
		free(f->spec);
		if (f->signed_url != protobuf_c_empty_string)
			free(f->signed_url);
		free(f);
	}
	free(p->v);
}

static bool in_window(const struct gaz_fragment *f, const Protocol__FragmentsRequest *q)
{
	if (f->mod_time && f->mod_time < q->begin_mod_time)
		return false;
	if (q->end_mod_time && (!f->mod_time || f->mod_time > q->end_mod_time))
		return false;
	return true;
}

static Protocol__FragmentsResponse__Fragment *page_entry(const struct gaz_fragment *f)
{
	Protocol__FragmentsResponse__Fragment *e = calloc(1, sizeof(*e));
	Protocol__Fragment *pf = calloc(1, sizeof(*pf));
	Protocol__SHA1Sum *sum = calloc(1, sizeof(*sum));

	if (!e || !pf || !sum) {
		free(e), free(pf), free(sum);
		return NULL;
	}
	protocol__fragments_response____fragment__init(e);
	protocol__fragment__init(pf);
	protocol__sha1_sum__init(sum);
	gaz_fragment_to_proto(f, pf, sum);
	/* Own the strings: the index may change once its lock is dropped. */
	pf->journal = strdup(pf->journal);
	pf->backing_store = strdup(pf->backing_store);
	pf->path_postfix = strdup(pf->path_postfix);
	pf->sum = sum;
	e->spec = pf;
	return e;
}

/* Collects one page from the index (replica mu held). */
static int collect(struct gaz_replica *r, const Protocol__FragmentsRequest *q, struct page *p)
{
	int32_t limit = q->page_limit ? q->page_limit : 1000;
	size_t i = 0;

	p->v = calloc((size_t)limit + 1, sizeof(*p->v));
	if (!p->v)
		return GAZ_ENOMEM;
	while (i < r->index.len && r->index.v[i].frag.begin < q->next_page_token)
		i++;
	for (; i < r->index.len; i++) {
		const struct gaz_fragment *f = &r->index.v[i].frag;
		if ((int32_t)p->n == limit)
			break;
		if (!in_window(f, q) || (q->end_mod_time && r->index.v[i].file))
			continue;
		if (!(p->v[p->n] = page_entry(f)))
			return GAZ_ENOMEM;
		p->n++;
	}
	p->next_token = i < r->index.len ? r->index.v[i].frag.begin : 0;
	return 0;
}

static void sign_page(struct gaz_broker *b, const Protocol__FragmentsRequest *q, struct page *p)
{
	for (size_t i = 0; q->signaturettl && i < p->n; i++) {
		Protocol__Fragment *pf = p->v[i]->spec;
		struct gaz_fragment f = {0};
		struct gaz_status st = {0};
		char *url = NULL;
		if (!pf->backing_store[0] || gaz_fragment_from_proto(&f, pf, &st))
			continue;
		if (gaz_stores_sign(b, &f, q->signaturettl->seconds, &url, &st) == 0)
			p->v[i]->signed_url = url;
		gaz_fragment_release(&f);
	}
}

static void respond(struct gaz_rpc_call *call, struct gaz_broker *b,
		    const struct gaz_resolution *res, int status, struct page *p)
{
	Protocol__FragmentsResponse resp = PROTOCOL__FRAGMENTS_RESPONSE__INIT;
	Protocol__Header *h = gaz_header_build(b, res);

	resp.status = status;
	resp.header = h;
	if (p) {
		resp.fragments = p->v;
		resp.n_fragments = p->n;
		resp.next_page_token = p->next_token;
	}
	gaz_rpc_finish(call, &resp.base, GAZ_GRPC_OK, NULL);
	gaz_header_free(h);
}

static void proxy_fragments(struct gaz_broker *b, struct gaz_rpc_call *call,
			    Protocol__FragmentsRequest *q, const struct gaz_resolution *res)
{
	struct gaz_status st = {0};
	ProtobufCMessage *resp = NULL;
	struct gaz_rpc_channel *ch;
	int idx;
	const char *ep = gaz_proxy_pick(b, res, &idx);
	Protocol__Header *h = gaz_header_build(b, res);
	char *auth;

	if (!ep || !h || !(ch = gaz_peer_channel(b, ep))) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_UNAVAILABLE, "no route member to proxy to");
		gaz_header_free(h);
		return;
	}
	q->header = h;
	auth = gaz_broker_sign(b, GAZ_CAP_READ, q->journal);
	if (gaz_rpc_unary(ch, "/protocol.Journal/ListFragments", &q->base,
			  &protocol__fragments_response__descriptor, &resp, gaz_deadline_in(60000),
			  false, auth, &st))
		gaz_rpc_finish(call, NULL, st.grpc ? st.grpc : GAZ_GRPC_UNAVAILABLE, st.msg);
	else
		gaz_rpc_finish(call, resp, GAZ_GRPC_OK, NULL);
	free(auth);
	q->header = NULL;
	gaz_header_free(h);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
}

static void serve_fragments(struct gaz_broker *b, struct gaz_rpc_call *call,
			    Protocol__FragmentsRequest *q, struct gaz_resolution *res)
{
	struct page p = {0};
	int rc;

	if (gaz_replica_wait_ready(res->replica, call)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_CANCELLED, "cancelled waiting for the index");
		return;
	}
	pthread_mutex_lock(&res->replica->mu);
	rc = collect(res->replica, q, &p);
	pthread_mutex_unlock(&res->replica->mu);
	if (rc) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_RESOURCE_EXHAUSTED, "out of memory");
	} else {
		sign_page(b, q, &p);
		respond(call, b, res, PROTOCOL__STATUS__OK, &p);
	}
	page_release(&p);
}

void gaz_handle_list_fragments(struct gaz_rpc_call *call, void *arg)
{
	struct gaz_broker *b = arg;
	Protocol__FragmentsRequest *q = NULL;
	struct gaz_resolution res = {.route.primary = -1};
	struct gaz_status st = {0};
	int rc;

	if (gaz_rpc_recv_request(call, &protocol__fragments_request__descriptor, (ProtobufCMessage **)&q, "FragmentsRequest"))
		return;
	if (gaz_validate_fragments_request(q, &st)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT, st.msg);
		goto out;
	}
	struct gaz_resolve_opts o = {.may_proxy = !q->do_not_proxy, .read_only = true,
				     .proxy_header = q->header, .call = call};
	if ((rc = gaz_resolve(b, q->journal, &o, &res, &st))) {
		gaz_rpc_finish(call, NULL, rc == GAZ_ECANCELLED ? GAZ_GRPC_CANCELLED : rc == GAZ_EUNAVAIL ? GAZ_GRPC_UNAVAILABLE : GAZ_GRPC_UNKNOWN,
			       st.msg);
	} else if (res.status != PROTOCOL__STATUS__OK) {
		gaz_rpc_set_outcome(call, res.status); /* Gazette's RPC label */
		respond(call, b, &res, res.status, NULL);
	} else if (!gaz_journal_may_read(res.spec->flags)) {
		respond(call, b, &res, PROTOCOL__STATUS__NOT_ALLOWED, NULL);
	} else if (!res.replica) {
		proxy_fragments(b, call, q, &res);
	} else {
		serve_fragments(b, call, q, &res);
	}
out:
	gaz_resolution_release(&res);
	protobuf_c_message_free_unpacked(&q->base, NULL);
}

/* The delete probe of §2.7 step 4. Its body is held in an anonymous
 * memory file (memfd): no directory of the host is needed, as Gazette's
 * probe PUTs it from memory. */
static int delete_probe(struct gaz_store *s, const char *prefix, struct gaz_status *st)
{
	static const char body[] = "gazette-delete-probe\n";
	char path[1100];
	int fd, rc;

	if ((fd = memfd_create("gaz-delete-probe", MFD_CLOEXEC)) < 0)
		return gaz_status_set(st, GAZ_EIO, "delete-probe PUT failed: memfd_create: %s",
				      strerror(errno));
	if (write(fd, body, sizeof(body) - 1) != (ssize_t)(sizeof(body) - 1)) {
		rc = gaz_status_set(st, GAZ_EIO, "delete-probe PUT failed: staging its body: %s",
				    strerror(errno));
		close(fd);
		return rc;
	}
	snprintf(path, sizeof(path), "%s.gazette-delete-probe", prefix);
	if ((rc = gaz_store_put(s, path, fd, sizeof(body) - 1, NULL, st)))
		gaz_status_prefix(st, "delete-probe PUT failed: ");
	close(fd);
	if (!rc && (rc = gaz_store_remove(s, path, st)))
		gaz_status_prefix(st, "delete-probe DELETE failed: ");
	return rc;
}

void gaz_handle_store_health(struct gaz_rpc_call *call, void *arg)
{
	struct gaz_broker *b = arg;
	Protocol__FragmentStoreHealthRequest *q = NULL;
	Protocol__FragmentStoreHealthResponse resp = PROTOCOL__FRAGMENT_STORE_HEALTH_RESPONSE__INIT;
	struct gaz_status st = {0};
	struct gaz_store *s = NULL;
	int rc;

	if (gaz_rpc_recv_request(call, &protocol__fragment_store_health_request__descriptor, (ProtobufCMessage **)&q, "FragmentStoreHealthRequest"))
		return;
	if (gaz_validate_store_health_request(q, &st)) {
		gaz_rpc_finish(call, NULL, GAZ_GRPC_INVALID_ARGUMENT, st.msg);
		protobuf_c_message_free_unpacked(&q->base, NULL);
		return;
	}
	/* The store's tracked health (its periodic checks, the first awaited),
	 * then the optional delete probe, run now (facts §2.7). */
	rc = gaz_stores_health(b, q->fragment_store, HEALTH_WAIT_MS, &st);
	if (!rc && q->check_delete && !(rc = gaz_stores_get(b, q->fragment_store, &s, &st)))
		rc = delete_probe(s, q->check_delete_prefix, &st);
	gaz_store_unref(s);
	resp.status = rc ? PROTOCOL__STATUS__FRAGMENT_STORE_UNHEALTHY : PROTOCOL__STATUS__OK;
	resp.store_health_error = rc ? st.msg : (char *)protobuf_c_empty_string;
	resp.header = gaz_header_unrouted(b, 0);
	gaz_rpc_finish(call, &resp.base, GAZ_GRPC_OK, NULL);
	gaz_header_free(resp.header);
	protobuf_c_message_free_unpacked(&q->base, NULL);
}
