/*
 * s3_lifecycle.c - bucket lifecycle configurations (see lifecycle.h):
 * the document (parse with libexpat keeping foreign rules byte for byte,
 * merge, render) and the three bucket calls (GET, PUT, DELETE
 * ?lifecycle) on libcurl, signed with sigv4.c using the s3:// store's own
 * configuration (s3_config.c).
 *
 * Input is outside data: the document is bounded (GAZ_LC_DOC_MAX), text
 * of an element is bounded, and a malformed document is GAZ_EPROTO.
 * The calls are one-shot (no connection pool, a few attempts): lifecycle
 * changes are rare, unlike fragment traffic.
 */
#include "store/lifecycle.h"

#include <errno.h>
#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "common/log.h"
#include "store/s3_int.h"

#define TEXT_MAX 4096
#define ATTEMPTS 3
#define CALL_TIMEOUT_MS 30000L
#define S3_NS "http://s3.amazonaws.com/doc/2006-03-01/"

/* ---- the document ------------------------------------------------------------ */

struct lc_parse {
	XML_Parser p;
	const char *xml;
	struct gaz_lc_doc *doc;
	int depth;
	char names[5][32];        /* element names by depth (1-based), "" past 4 */
	char text[TEXT_MAX + 1];
	size_t text_len;
	/* the rule being read */
	long rule_start;
	char id[GAZ_LC_ID_MAX + 1], prefix[TEXT_MAX + 1], status[16];
	int64_t days;
	bool has_id, plain;
	int rc;
	char err[200];
};

static void stop(struct lc_parse *lp, int rc, const char *why)
{
	if (!lp->rc) {
		lp->rc = rc;
		snprintf(lp->err, sizeof(lp->err), "%s", why);
	}
	XML_StopParser(lp->p, XML_FALSE);
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct lc_parse *lp = ud;

	(void)attrs;
	lp->depth++;
	lp->text_len = 0;
	if (strchr(name, ':'))
		return stop(lp, GAZ_EPROTO, "namespace prefixes are not supported");
	if (lp->depth <= 4)
		snprintf(lp->names[lp->depth], sizeof(lp->names[0]), "%s", name);
	if (lp->depth == 1 && strcmp(name, "LifecycleConfiguration"))
		return stop(lp, GAZ_EPROTO, "not a LifecycleConfiguration");
	if (lp->depth == 2) {
		if (strcmp(name, "Rule"))
			return stop(lp, GAZ_EPROTO, "an element other than Rule in the configuration");
		lp->rule_start = (long)XML_GetCurrentByteIndex(lp->p);
		lp->id[0] = lp->prefix[0] = lp->status[0] = 0;
		lp->days = 0;
		lp->has_id = false;
		lp->plain = true;
	}
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
	struct lc_parse *lp = ud;

	if (lp->text_len + (size_t)len > TEXT_MAX)
		return stop(lp, GAZ_EPROTO, "element text too long");
	memcpy(lp->text + lp->text_len, s, (size_t)len);
	lp->text_len += (size_t)len;
}

/* Notes one element of a rule (depth 3 or 4). */
static void rule_field(struct lc_parse *lp, const char *name, const char *text)
{
	const char *parent = lp->names[lp->depth - 1];

	if (lp->depth == 3 && !strcmp(name, "ID")) {
		size_t n = strlen(text);
		if (n > GAZ_LC_ID_MAX)
			return stop(lp, GAZ_EPROTO, "rule ID longer than 255 bytes");
		memcpy(lp->id, text, n + 1);
		lp->has_id = true;
	} else if ((lp->depth == 3 && !strcmp(name, "Prefix")) ||
		   (lp->depth == 4 && !strcmp(parent, "Filter") && !strcmp(name, "Prefix"))) {
		snprintf(lp->prefix, sizeof(lp->prefix), "%s", text);
	} else if (lp->depth == 3 && !strcmp(name, "Status")) {
		snprintf(lp->status, sizeof(lp->status), "%.15s", text);
	} else if (lp->depth == 4 && !strcmp(parent, "Expiration") && !strcmp(name, "Days")) {
		char *end;
		long long d = strtoll(text, &end, 10);
		lp->days = *end || d < 0 ? 0 : d;
	} else if (!(lp->depth == 3 && (!strcmp(name, "Filter") || !strcmp(name, "Expiration")))) {
		lp->plain = false; /* And, Tag, Transition, Date, ...: not a rule we write */
	}
}

static int add_rule(struct lc_parse *lp, long end)
{
	struct gaz_lc_doc *d = lp->doc;
	const char *pfx = d->id_prefix;

	if (!lp->has_id || !lp->id[0]) {
		stop(lp, GAZ_EPROTO, "a rule without an ID");
		return GAZ_EPROTO;
	}
	if (!strncmp(lp->id, pfx, strlen(pfx))) {
		struct gaz_lc_rule *r = realloc(d->owned, (d->n_owned + 1) * sizeof(*r));
		if (!r)
			return GAZ_ENOMEM;
		d->owned = r;
		r += d->n_owned;
		*r = (struct gaz_lc_rule){.id = strdup(lp->id), .prefix = strdup(lp->prefix),
					  .days = lp->days, .enabled = !strcmp(lp->status, "Enabled"),
					  .plain = lp->plain};
		d->n_owned++;
		return r->id && r->prefix ? 0 : GAZ_ENOMEM;
	}
	char **f = realloc(d->foreign, (d->n_foreign + 1) * sizeof(*f));
	if (!f)
		return GAZ_ENOMEM;
	d->foreign = f;
	if (!(f[d->n_foreign] = strndup(lp->xml + lp->rule_start, (size_t)(end - lp->rule_start))))
		return GAZ_ENOMEM;
	d->n_foreign++;
	return 0;
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	struct lc_parse *lp = ud;
	int rc;

	lp->text[lp->text_len] = 0;
	if (lp->depth == 2) {
		long end = (long)XML_GetCurrentByteIndex(lp->p) + XML_GetCurrentByteCount(lp->p);
		if ((rc = add_rule(lp, end)) == GAZ_ENOMEM)
			stop(lp, rc, "out of memory");
	} else if (lp->depth >= 3) {
		rule_field(lp, name, lp->text);
	}
	lp->depth--;
	lp->text_len = 0;
}

int gaz_lc_doc_parse(const char *xml, size_t len, const char *id_prefix, struct gaz_lc_doc *doc,
		     struct gaz_status *st)
{
	struct lc_parse *lp;
	int rc = 0;

	memset(doc, 0, sizeof(*doc));
	if (!(doc->id_prefix = strdup(id_prefix)))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	if (!xml || !len)
		return 0;
	if (len > GAZ_LC_DOC_MAX)
		return gaz_status_set(st, GAZ_EPROTO, "lifecycle configuration of %zu bytes is too large", len);
	if (!(lp = calloc(1, sizeof(*lp))) || !(lp->p = XML_ParserCreate(NULL))) {
		free(lp);
		gaz_lc_doc_release(doc);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	lp->xml = xml;
	lp->doc = doc;
	XML_SetUserData(lp->p, lp);
	XML_SetElementHandler(lp->p, on_start, on_end);
	XML_SetCharacterDataHandler(lp->p, on_text);
	if (XML_Parse(lp->p, xml, (int)len, XML_TRUE) == XML_STATUS_ERROR && !lp->rc)
		stop(lp, GAZ_EPROTO, XML_ErrorString(XML_GetErrorCode(lp->p)));
	if (lp->rc)
		rc = gaz_status_set(st, lp->rc, "lifecycle configuration: %s", lp->err);
	XML_ParserFree(lp->p);
	free(lp);
	if (rc)
		gaz_lc_doc_release(doc);
	return rc;
}

static ssize_t find_owned(const struct gaz_lc_doc *doc, const char *id)
{
	for (size_t i = 0; i < doc->n_owned; i++)
		if (!strcmp(doc->owned[i].id, id))
			return (ssize_t)i;
	return -1;
}

const struct gaz_lc_rule *gaz_lc_doc_find(const struct gaz_lc_doc *doc, const char *id)
{
	ssize_t i = find_owned(doc, id);

	return i < 0 ? NULL : &doc->owned[i];
}

int gaz_lc_doc_set(struct gaz_lc_doc *doc, const char *id, const char *prefix, int64_t days,
		   bool *changed, struct gaz_status *st)
{
	ssize_t i = find_owned(doc, id);
	char *nid, *npfx;

	*changed = false;
	if (strncmp(id, doc->id_prefix, strlen(doc->id_prefix)) || strlen(id) > GAZ_LC_ID_MAX || days < 1)
		return gaz_status_set(st, GAZ_EINVAL, "lifecycle rule \"%s\": bad ID or days %lld", id,
				      (long long)days);
	if (i >= 0) {
		struct gaz_lc_rule *r = &doc->owned[i];
		if (!strcmp(r->prefix, prefix) && r->days == days && r->enabled && r->plain)
			return 0;
		if (!(npfx = strdup(prefix)))
			return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
		free(r->prefix);
		*r = (struct gaz_lc_rule){.id = r->id, .prefix = npfx, .days = days, .enabled = true,
					  .plain = true};
		*changed = true;
		return 0;
	}
	struct gaz_lc_rule *rs = realloc(doc->owned, (doc->n_owned + 1) * sizeof(*rs));
	if (!rs)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	doc->owned = rs;
	nid = strdup(id);
	npfx = strdup(prefix);
	if (!nid || !npfx) {
		free(nid);
		free(npfx);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	doc->owned[doc->n_owned++] = (struct gaz_lc_rule){.id = nid, .prefix = npfx, .days = days,
							  .enabled = true, .plain = true};
	*changed = true;
	return 0;
}

void gaz_lc_doc_remove(struct gaz_lc_doc *doc, const char *id, bool *changed)
{
	ssize_t i = find_owned(doc, id);

	*changed = i >= 0;
	if (i < 0)
		return;
	free(doc->owned[i].id);
	free(doc->owned[i].prefix);
	memmove(&doc->owned[i], &doc->owned[i + 1], (doc->n_owned - (size_t)i - 1) * sizeof(doc->owned[0]));
	doc->n_owned--;
}

size_t gaz_lc_doc_count(const struct gaz_lc_doc *doc)
{
	return doc->n_foreign + doc->n_owned;
}

int gaz_lc_xml_escape(const char *s, char *out, size_t cap)
{
	size_t n = 0;

	for (; *s; s++) {
		const char *e = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;"
			      : *s == '"' ? "&quot;" : *s == '\'' ? "&apos;" : NULL;
		size_t el = e ? strlen(e) : 1;
		if (n + el >= cap)
			return -1;
		memcpy(out + n, e ? e : s, el);
		n += el;
	}
	out[n] = 0;
	return (int)n;
}

static int rule_cmp(const void *a, const void *b)
{
	return strcmp(((const struct gaz_lc_rule *)a)->id, ((const struct gaz_lc_rule *)b)->id);
}

int gaz_lc_doc_render(const struct gaz_lc_doc *doc, char **xml, size_t *len, struct gaz_status *st)
{
	char id[GAZ_LC_ID_MAX * 6 + 1], pfx[TEXT_MAX * 6 + 1];
	FILE *f = open_memstream(xml, len);
	int bad = !f;

	if (doc->n_owned > 1)
		qsort(doc->owned, doc->n_owned, sizeof(doc->owned[0]), rule_cmp);
	if (!bad)
		bad |= fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
				  "<LifecycleConfiguration xmlns=\"" S3_NS "\">") < 0;
	for (size_t i = 0; !bad && i < doc->n_foreign; i++)
		bad |= fputs(doc->foreign[i], f) < 0;
	for (size_t i = 0; !bad && i < doc->n_owned; i++) {
		const struct gaz_lc_rule *r = &doc->owned[i];
		bad |= gaz_lc_xml_escape(r->id, id, sizeof(id)) < 0 ||
		       gaz_lc_xml_escape(r->prefix, pfx, sizeof(pfx)) < 0 ||
		       fprintf(f, "<Rule><ID>%s</ID><Filter><Prefix>%s</Prefix></Filter><Status>%s"
				  "</Status><Expiration><Days>%lld</Days></Expiration></Rule>",
			       id, pfx, r->enabled ? "Enabled" : "Disabled", (long long)r->days) < 0;
	}
	if (!bad)
		bad |= fputs("</LifecycleConfiguration>\n", f) < 0;
	if (f && fclose(f))
		bad = 1;
	if (bad) {
		if (f)
			free(*xml);
		*xml = NULL;
		return gaz_status_set(st, GAZ_ENOMEM, "rendering the lifecycle configuration failed");
	}
	return 0;
}

void gaz_lc_doc_release(struct gaz_lc_doc *doc)
{
	for (size_t i = 0; i < doc->n_foreign; i++)
		free(doc->foreign[i]);
	for (size_t i = 0; i < doc->n_owned; i++) {
		free(doc->owned[i].id);
		free(doc->owned[i].prefix);
	}
	free(doc->foreign);
	free(doc->owned);
	free(doc->id_prefix);
	memset(doc, 0, sizeof(*doc));
}

/* ---- the bucket calls -------------------------------------------------------------- */

struct gaz_lc_bucket {
	struct gaz_s3_config cfg;
	char *find, *replace;     /* the store's path rewrite ("" = none) */
};

int gaz_lc_bucket_open(const char *store_url, struct gaz_lc_bucket **out, struct gaz_status *st)
{
	struct gaz_store *s = NULL;
	struct gaz_lc_bucket *b;
	int rc;

	*out = NULL;
	if (strncmp(store_url, "s3://", 5))
		return gaz_status_set(st, GAZ_EINVAL, "store %s is not s3://", store_url);
	if ((rc = gaz_store_open(store_url, NULL, &s, st)))
		return rc;
	if (!(b = calloc(1, sizeof(*b)))) {
		gaz_store_unref(s);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	rc = gaz__s3_config_resolve(s, &b->cfg, st);
	b->find = strdup(s->find ? s->find : "");
	b->replace = strdup(s->replace ? s->replace : "");
	gaz_store_unref(s);
	if (!rc && (!b->find || !b->replace))
		rc = gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	if (rc) {
		if (b->cfg.bucket)
			gaz__s3_config_release(&b->cfg);
		free(b->find);
		free(b->replace);
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}

void gaz_lc_bucket_close(struct gaz_lc_bucket *b)
{
	if (!b)
		return;
	gaz__s3_config_release(&b->cfg);
	free(b->find);
	free(b->replace);
	free(b);
}

const char *gaz_lc_bucket_name(const struct gaz_lc_bucket *b)
{
	return b->cfg.bucket;
}

int gaz_lc_bucket_key_prefix(const struct gaz_lc_bucket *b, const char *journal, char *out,
			     size_t cap, struct gaz_status *st)
{
	const char *hit = *b->find ? strstr(journal, b->find) : NULL;
	int n;

	if (hit)
		n = snprintf(out, cap, "%s%.*s%s%s/", b->cfg.prefix, (int)(hit - journal), journal,
			     b->replace, hit + strlen(b->find));
	else
		n = snprintf(out, cap, "%s%s/", b->cfg.prefix, journal);
	if (n < 0 || (size_t)n >= cap)
		return gaz_status_set(st, GAZ_EINVAL, "key prefix of journal %s too long", journal);
	return 0;
}

struct body {
	char *p;
	size_t len;
	bool over;
};

static size_t on_body(char *d, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t add = size * n;
	char *p;

	if (b->len + add > GAZ_LC_DOC_MAX || !(p = realloc(b->p, b->len + add + 1))) {
		b->over = true;
		return 0;
	}
	memcpy(p + b->len, d, add);
	b->p = p;
	b->len += add;
	b->p[b->len] = 0;
	return add;
}

/* Base64 of the MD5 of data (Content-MD5) into out[32]. */
static void content_md5(const char *data, size_t len, char out[32])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	EVP_Digest(data, len, md, &n, EVP_md5(), NULL);
	EVP_EncodeBlock((unsigned char *)out, md, (int)n);
}

/* The signed header list of one call (free with curl_slist_free_all). */
static struct curl_slist *sign(struct gaz_lc_bucket *b, const char *method, const char *path,
			       const char *hash, const char *md5, struct gaz_status *st)
{
	const struct gaz_s3_config *c = &b->cfg;
	struct gaz_sigv4_kv q[] = {{"lifecycle", ""}}, h[6];
	struct gaz_sigv4_out *o = malloc(sizeof(*o));
	struct curl_slist *l = NULL, *t;
	char date[17], line[GAZ_SIGV4_MAX + 64];
	time_t now = time(NULL);
	size_t n = 0;

	if (!o) {
		gaz_status_set(st, GAZ_ENOMEM, "out of memory");
		return NULL;
	}
	gaz_sigv4_amz_date(now, date);
	h[n++] = (struct gaz_sigv4_kv){"host", c->host};
	h[n++] = (struct gaz_sigv4_kv){"x-amz-content-sha256", hash};
	h[n++] = (struct gaz_sigv4_kv){"x-amz-date", date};
	if (md5)
		h[n++] = (struct gaz_sigv4_kv){"content-md5", md5};
	if (c->creds.session_token[0])
		h[n++] = (struct gaz_sigv4_kv){"x-amz-security-token", c->creds.session_token};
	struct gaz_sigv4_req req = {method, path, q, 1, h, n, hash, c->region, "s3", now};
	if (gaz_sigv4_sign(&req, &c->creds, o, st)) {
		free(o);
		return NULL;
	}
	for (size_t i = 0; i <= n + 2; i++) {
		if (i < n)
			snprintf(line, sizeof(line), "%s: %s", h[i].key, h[i].value);
		else if (i == n)
			snprintf(line, sizeof(line), "Authorization: %s", o->authorization);
		else if (i == n + 1)
			snprintf(line, sizeof(line), "Content-Type: application/xml");
		else
			snprintf(line, sizeof(line), "Expect:");
		if (!(t = curl_slist_append(l, line))) {
			curl_slist_free_all(l);
			free(o);
			gaz_status_set(st, GAZ_ENOMEM, "out of memory");
			return NULL;
		}
		l = t;
	}
	free(o);
	return l;
}

struct call {
	const char *method;
	const char *body;
	size_t len;
	size_t sent;
	long status;
	struct body resp;
	char err[CURL_ERROR_SIZE];
	CURLcode cc;
};

static size_t on_send(char *buf, size_t size, size_t n, void *arg)
{
	struct call *c = arg;
	size_t want = size * n, left = c->len - c->sent;

	if (want > left)
		want = left;
	memcpy(buf, c->body + c->sent, want);
	c->sent += want;
	return want;
}

static int perform(struct gaz_lc_bucket *b, struct call *c, struct gaz_status *st)
{
	const struct gaz_s3_config *cfg = &b->cfg;
	char path[1024], url[2048], hash[65], md5[32];
	struct curl_slist *hdrs;
	CURL *e;

	snprintf(path, sizeof(path), "%s/", cfg->path_prefix);
	if (*cfg->path_prefix)
		path[strlen(path) - 1] = 0; /* "/bucket", as the store's bucket calls */
	snprintf(url, sizeof(url), "%s%s?lifecycle=", cfg->base_url, path);
	gaz_sigv4_sha256_hex(c->body ? c->body : "", c->len, hash);
	if (c->body)
		content_md5(c->body, c->len, md5);
	if (!(hdrs = sign(b, c->method, path, hash, c->body ? md5 : NULL, st)))
		return st->code ? st->code : GAZ_EINVAL;
	if (!(e = curl_easy_init())) {
		curl_slist_free_all(hdrs);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	free(c->resp.p);
	memset(&c->resp, 0, sizeof(c->resp));
	c->sent = 0;
	c->err[0] = 0;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, CALL_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->err);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &c->resp);
	if (c->body) {
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)c->len);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_send);
		curl_easy_setopt(e, CURLOPT_READDATA, c);
	}
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, c->method);
	c->cc = curl_easy_perform(e);
	c->status = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &c->status);
	curl_easy_cleanup(e);
	curl_slist_free_all(hdrs);
	return 0;
}

/* Runs c (a few attempts on transport failures and 5xx). 0 on 2xx, and
 * GAZ_ENOTFOUND for NoSuchLifecycleConfiguration. */
static int run(struct gaz_lc_bucket *b, struct call *c, struct gaz_status *st)
{
	char code[128] = "", msg[256] = "";
	int rc;

	for (int i = 0; i < ATTEMPTS; i++) {
		if (i) {
			struct timespec ts = {0, 200000000L << i};
			nanosleep(&ts, NULL);
		}
		if ((rc = perform(b, c, st)))
			return rc;
		if (c->cc == CURLE_OK && c->status >= 200 && c->status < 300)
			return 0;
		if (c->cc == CURLE_OK && c->status < 500 && c->status != 429)
			break;
	}
	if (c->cc != CURLE_OK)
		return gaz_status_set(st, GAZ_EUNAVAIL, "s3 %s lifecycle of bucket \"%s\" failed: %s (%s)",
				      c->method, b->cfg.bucket, c->err[0] ? c->err : curl_easy_strerror(c->cc),
				      b->cfg.base_url);
	gaz__s3_parse_error(c->resp.p, c->resp.len, code, sizeof(code), msg, sizeof(msg));
	if (!strcmp(code, "NoSuchLifecycleConfiguration"))
		return GAZ_ENOTFOUND;
	if (!strcmp(code, "NoSuchBucket"))
		return gaz_status_set(st, GAZ_ENOTFOUND, "s3 bucket \"%s\" does not exist (NoSuchBucket at %s)",
				      b->cfg.bucket, b->cfg.base_url);
	rc = c->status == 403 || !strcmp(code, "AccessDenied") ||
			     !strcmp(code, "InvalidAccessKeyId") || !strcmp(code, "SignatureDoesNotMatch")
		     ? GAZ_EPERM
	     : c->status >= 500 || c->status == 429 ? GAZ_EUNAVAIL
						    : GAZ_EIO;
	return gaz_status_set(st, rc, "s3 %s lifecycle of bucket \"%s\" failed: HTTP %ld%s%s%s%s",
			      c->method, b->cfg.bucket, c->status, *code ? " " : "", code,
			      *msg ? ": " : "", msg);
}

int gaz_lc_bucket_get(struct gaz_lc_bucket *b, char **xml, size_t *len, struct gaz_status *st)
{
	struct call c = {.method = "GET"};
	int rc = run(b, &c, st);

	*xml = NULL;
	*len = 0;
	if (rc == GAZ_ENOTFOUND) {
		free(c.resp.p);
		return 0;
	}
	if (rc) {
		free(c.resp.p);
		return rc;
	}
	if (c.resp.over) {
		free(c.resp.p);
		return gaz_status_set(st, GAZ_EPROTO, "lifecycle configuration of bucket \"%s\" is too large",
				      b->cfg.bucket);
	}
	*xml = c.resp.p ? c.resp.p : strdup("");
	*len = c.resp.len;
	return *xml ? 0 : gaz_status_set(st, GAZ_ENOMEM, "out of memory");
}

int gaz_lc_bucket_put(struct gaz_lc_bucket *b, const char *xml, size_t len, struct gaz_status *st)
{
	struct call c = {.method = "PUT", .body = xml, .len = len};
	int rc = run(b, &c, st);

	free(c.resp.p);
	return rc;
}

int gaz_lc_bucket_delete(struct gaz_lc_bucket *b, struct gaz_status *st)
{
	struct call c = {.method = "DELETE"};
	int rc = run(b, &c, st);

	free(c.resp.p);
	return rc == GAZ_ENOTFOUND ? 0 : rc;
}
