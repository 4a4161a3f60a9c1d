/*
 * store.c - FragmentStore URLs, backend dispatch, path rewriting, and the
 * operations built on the backend interface (fragment listing, health).
 *
 * Every public operation rewrites its path the same way (find/replace on
 * the journal-relative path, Gazette's RewriterConfig) before calling the
 * backend, so put, get, list and sign_get can never disagree on a key.
 *
 * Must not call: grpc, etcd. Backends do their own I/O; this file only
 * allocates and formats.
 */
#include "store/store.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"

#include <pthread.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---------------------------------------------------------------- URLs */

static int hexv(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decodes s[0:n) into a new string; '+' becomes ' ' if plus_space.
 * Returns NULL with *bad set for an invalid escape, or NULL on OOM. */
static char *pct_decode(const char *s, size_t n, bool plus_space, bool *bad)
{
	char *out = malloc(n + 1), *o = out;

	*bad = false;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%') {
			if (i + 2 >= n || hexv(s[i + 1]) < 0 || hexv(s[i + 2]) < 0) {
				*bad = true;
				break;
			}
			*o++ = (char)(hexv(s[i + 1]) << 4 | hexv(s[i + 2]));
			i += 2;
		} else {
			*o++ = plus_space && s[i] == '+' ? ' ' : s[i];
		}
	}
	if (*bad) {
		free(out);
		return NULL;
	}
	*o = 0;
	return out;
}

void gaz_store_url_release(struct gaz_store_url *u)
{
	free(u->raw);
	free(u->scheme);
	free(u->host);
	free(u->path);
	free(u->query);
	memset(u, 0, sizeof(*u));
}

/* Splits "scheme://authority/path?query#frag" into owned parts of u. */
static int url_split(const char *url, struct gaz_store_url *u, struct gaz_status *st)
{
	const char *p = url, *auth, *path, *q, *end;
	bool bad = false;

	if (!isalpha((unsigned char)*p))
		return gaz_status_set(st, GAZ_EINVAL, "not absolute (%s)", url);
	while (isalnum((unsigned char)*p) || *p == '+' || *p == '-' || *p == '.')
		p++;
	if (*p != ':')
		return gaz_status_set(st, GAZ_EINVAL, "not absolute (%s)", url);
	if (strncmp(p + 1, "//", 2) != 0)
		return gaz_status_set(st, GAZ_EINVAL, "expected scheme://host/path/ (%s)", url);
	auth = p + 3;
	path = auth + strcspn(auth, "/?#");
	q = path + strcspn(path, "?#");
	end = q + strcspn(q, "#");
	if (!(u->scheme = strndup(url, (size_t)(p - url))))
		return GAZ_ENOMEM;
	for (char *c = u->scheme; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	if (memchr(auth, '@', (size_t)(path - auth)))
		auth = (const char *)memrchr(auth, '@', (size_t)(path - auth)) + 1;
	u->host = pct_decode(auth, (size_t)(path - auth), false, &bad);
	if (!bad && u->host)
		u->path = pct_decode(path, (size_t)(q - path), false, &bad);
	if (bad)
		return gaz_status_set(st, GAZ_EINVAL, "invalid URL escape (%s)", url);
	if (!u->host || !u->path)
		return GAZ_ENOMEM;
	u->query = *q == '?' ? strndup(q + 1, (size_t)(end - q - 1)) : strdup("");
	return u->query ? 0 : GAZ_ENOMEM;
}

/* Scheme-specific host and path rules of facts §3.6. */
static int url_check(const struct gaz_store_url *u, struct gaz_status *st)
{
	static const char *schemes[] = {"s3", "gs", "azure", "azure-ad", "file"};
	const char *s = u->scheme, *acct, *cont;
	bool known = false;

	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		known = known || !strcmp(s, schemes[i]);
	if (!known)
		return gaz_status_set(st, GAZ_EINVAL, "invalid scheme (%s)", s);
	if (!strcmp(s, "file") && *u->host)
		return gaz_status_set(st, GAZ_EINVAL, "file scheme cannot have host (%s)", u->host);
	if (strcmp(s, "file") && !*u->host)
		return gaz_status_set(st, GAZ_EINVAL, "missing bucket (%s scheme requires a host)", s);
	if (!*u->path || u->path[strlen(u->path) - 1] != '/')
		return gaz_status_set(st, GAZ_EINVAL, "path component doesn't end in '/' (%s)",
				      u->path);
	if (!strcmp(s, "azure-ad")) {
		acct = u->path + 1;
		cont = strchr(acct, '/');
		if (cont == acct || !cont || cont[1] == '/' || cont[1] == 0)
			return gaz_status_set(st, GAZ_EINVAL,
					      "azure-ad path must be /<account>/<container>/ (%s)",
					      u->path);
	}
	return 0;
}

int gaz_store_url_parse(const char *url, struct gaz_store_url *out, struct gaz_status *st)
{
	struct gaz_status local = {0};
	int rc;

	memset(out, 0, sizeof(*out));
	for (const char *c = url; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return gaz_status_set(st, GAZ_EINVAL,
					      "invalid fragment store URL: invalid control character");
	if (!(out->raw = strdup(url)))
		rc = GAZ_ENOMEM;
	else if (!(rc = url_split(url, out, &local)))
		rc = url_check(out, &local);
	if (rc == GAZ_ENOMEM && !local.code)
		gaz_status_set(&local, rc, "parsing store URL: out of memory");
	if (rc) {
		gaz_store_url_release(out);
		return gaz_status_set(st, rc, "invalid fragment store URL \"%s\": %s", url, local.msg);
	}
	return 0;
}

void gaz_store_params_free(struct gaz_store_param *params, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(params[i].key);
		free(params[i].value);
	}
	free(params);
}

/* Decodes one "k=v" (or "k") pair into params[*n]. */
static int param_add(const char *kv, size_t len, struct gaz_store_param *params, size_t *n,
		     struct gaz_status *st)
{
	const char *eq = memchr(kv, '=', len);
	size_t klen = eq ? (size_t)(eq - kv) : len;
	struct gaz_store_param *p = &params[*n];
	bool bad = false;

	p->key = pct_decode(kv, klen, true, &bad);
	if (!bad && p->key)
		p->value = eq ? pct_decode(eq + 1, len - klen - 1, true, &bad) : strdup("");
	if (bad || !p->key || !p->value) {
		free(p->key);
		free(p->value);
		return bad ? gaz_status_set(st, GAZ_EINVAL, "invalid escape in store URL query")
			   : gaz_status_set(st, GAZ_ENOMEM, "decoding store URL query: out of memory");
	}
	for (char *c = p->key; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	(*n)++;
	return 0;
}

int gaz_store_url_params(const struct gaz_store_url *u, struct gaz_store_param **params,
			 size_t *n, struct gaz_status *st)
{
	const char *q = u->query;
	size_t cap = 1, i = 0;
	int rc = 0;

	*params = NULL;
	*n = 0;
	if (strchr(q, ';'))
		return gaz_status_set(st, GAZ_EINVAL, "invalid semicolon separator in store URL query");
	for (const char *c = q; *c; c++)
		cap += *c == '&';
	if (!(*params = calloc(cap, sizeof(**params))))
		return gaz_status_set(st, GAZ_ENOMEM, "decoding store URL query: out of memory");
	while (*q && rc == 0) {
		size_t len = strcspn(q, "&");
		if (len)
			rc = param_add(q, len, *params, &i, st);
		q += len + (q[len] == '&');
	}
	if (rc) {
		gaz_store_params_free(*params, i);
		*params = NULL;
		return rc;
	}
	*n = i;
	return 0;
}

/* -------------------------------------------------------------- opening */

struct backend {
	const char *scheme;
	const char *params[10]; /* accepted query parameters, beyond find/replace */
	int (*open)(struct gaz_store *s, const char *file_root, struct gaz_status *st);
};

static const struct backend backends[] = {
	{"file", {NULL}, gaz__store_file_open},
	/* Gazette's, then ours: stalltimeout (s3_int.h, docs/decisions.md). */
	{"s3", {"profile", "endpoint", "region", "acl", "storageclass", "sse", "ssekmskeyid",
		"stalltimeout"},
	 gaz__store_s3_open},
	{"gs", {NULL}, NULL},
	{"azure", {NULL}, NULL},
	{"azure-ad", {NULL}, NULL},
};

static bool param_known(const struct backend *b, const char *key)
{
	if (!strcmp(key, "find") || !strcmp(key, "replace"))
		return true;
	for (size_t i = 0; i < sizeof(b->params) / sizeof(b->params[0]) && b->params[i]; i++)
		if (!strcmp(key, b->params[i]))
			return true;
	return false;
}

static int store_params(struct gaz_store *s, const struct backend *b, struct gaz_status *st)
{
	int rc = gaz_store_url_params(&s->url, &s->params, &s->nparams, st);
	const char *v;

	if (rc)
		return rc;
	for (size_t i = 0; i < s->nparams; i++)
		if (!param_known(b, s->params[i].key))
			return gaz_status_set(st, GAZ_EINVAL,
					      "parsing store URL arguments: unknown parameter \"%s\"",
					      s->params[i].key);
	if ((v = gaz_store_param(s, "find")) && *v && !(s->find = strdup(v)))
		return GAZ_ENOMEM;
	v = gaz_store_param(s, "replace");
	if (!(s->replace = strdup(v ? v : "")))
		return GAZ_ENOMEM;
	return 0;
}

static const struct backend *backend_of(const char *scheme)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (!strcmp(backends[i].scheme, scheme))
			return &backends[i];
	return NULL;
}

int gaz_store_open(const char *url, const char *file_root, struct gaz_store **out,
		   struct gaz_status *st)
{
	struct gaz_store *s = calloc(1, sizeof(*s));
	const struct backend *b;
	int rc;

	*out = NULL;
	if (!s)
		return gaz_status_set(st, GAZ_ENOMEM, "opening store: out of memory");
	atomic_init(&s->refs, 1);
	if ((rc = gaz_store_url_parse(url, &s->url, st)))
		goto fail;
	b = backend_of(s->url.scheme);
	if ((rc = store_params(s, b, st)))
		goto fail;
	if (!b->open) {
		rc = gaz_status_set(st, GAZ_EINVAL, "fragment store \"%s\": %s:// not supported yet",
				    url, b->scheme);
		goto fail;
	}
	if ((rc = b->open(s, file_root, st)))
		goto fail;
	*out = s;
	return 0;
fail:
	if (rc == GAZ_ENOMEM)
		gaz_status_set(st, rc, "opening store \"%s\": out of memory", url);
	gaz_store_unref(s);
	return rc;
}

struct gaz_store *gaz_store_ref(struct gaz_store *s)
{
	if (s)
		atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	return s;
}

void gaz_store_unref(struct gaz_store *s)
{
	if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (s->ops && s->ops->destroy)
		s->ops->destroy(s);
	gaz_store_url_release(&s->url);
	gaz_store_params_free(s->params, s->nparams);
	free(s->find);
	free(s->replace);
	free(s);
}

const char *gaz_store_param(const struct gaz_store *s, const char *key)
{
	for (size_t i = 0; i < s->nparams; i++)
		if (!strcmp(s->params[i].key, key))
			return s->params[i].value;
	return NULL;
}

/* ------------------------------------------------------------ operations */

/* The backend key of `path`: first occurrence of find replaced. */
static int rewrite(const struct gaz_store *s, const char *path, char *key, struct gaz_status *st)
{
	const char *hit = s->find ? strstr(path, s->find) : NULL;
	int n;

	if (!hit)
		n = snprintf(key, GAZ_STORE_KEY_MAX, "%s", path);
	else
		n = snprintf(key, GAZ_STORE_KEY_MAX, "%.*s%s%s", (int)(hit - path), path, s->replace,
			     hit + strlen(s->find));
	if (n < 0 || n >= GAZ_STORE_KEY_MAX)
		return gaz_status_set(st, GAZ_EINVAL, "store path \"%.64s...\" too long", path);
	return 0;
}

/* ------------------------------------------------------------- metrics */

/* Gazette's store metrics (broker/stores/stores.go; facts §5.7), labelled
 * by the store URL as given. Families are registered on first use in the
 * process-wide registry, so every program linking the store gets them. */
static struct gaz_metric *m_op_total, *m_op_seconds, *m_put_bytes, *m_list_items;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;

static void metrics_init(void)
{
	static const double secs[] = {0.01, 0.04, 0.16, 0.64, 2.56, 10.24};
	static const double items[] = {10, 40, 160, 640, 2560, 10240};
	struct gaz_metrics *r = gaz_metrics_default();

	m_op_total = gaz_metrics_counter(r, "gazette_store_operation_total",
					 "Total number of store operations", "store,operation,status");
	m_op_seconds = gaz_metrics_histogram(r, "gazette_store_operation_duration_seconds",
					     "Duration of store operations in seconds",
					     "store,operation,status", secs, 6);
	m_put_bytes = gaz_metrics_counter(r, "gazette_store_put_bytes_total",
					  "Total number of bytes put to the store", "store,encoding");
	m_list_items = gaz_metrics_histogram(r, "gazette_store_list_items_count",
					     "Number of items returned by list operations", "store",
					     items, 6);
}

/* Records one operation that started at `t0_ns` (monotonic) and ended
 * with `rc`; returns rc. */
static int op_done(struct gaz_store *s, const char *op, int64_t t0_ns, int rc)
{
	const char *status = rc ? "error" : "success";

	pthread_once(&metrics_once, metrics_init);
	gaz_metric_inc(gaz_metric_with(m_op_total, s->url.raw, op, status));
	gaz_metric_observe(gaz_metric_with(m_op_seconds, s->url.raw, op, status),
			   (double)(gaz_mono_ns() - t0_ns) / 1e9);
	return rc;
}

void gaz__store_attempt_failed(struct gaz_store *s, const char *op, int64_t t0_ns)
{
	(void)op_done(s, op, t0_ns, GAZ_EIO);
}

/* Counts listed objects for gazette_store_list_items_count. */
struct list_count {
	gaz_store_list_fn cb;
	void *arg;
	int64_t n;
};

static int list_count_cb(void *arg, const struct gaz_store_obj *obj, struct gaz_status *st)
{
	struct list_count *lc = arg;

	lc->n++;
	return lc->cb(lc->arg, obj, st);
}

int gaz_store_list(struct gaz_store *s, const char *prefix, gaz_store_list_fn cb, void *arg,
		   struct gaz_status *st)
{
	char key[GAZ_STORE_KEY_MAX];
	int rc = rewrite(s, prefix, key, st);

	if (rc)
		return rc;
	if (*key && key[strlen(key) - 1] != '/')
		return gaz_status_set(st, GAZ_EINVAL, "list prefix \"%s\" must end in '/'", key);
	struct list_count lc = {cb, arg, 0};
	int64_t t0 = gaz_mono_ns();
	rc = op_done(s, "list", t0, s->ops->list(s, key, list_count_cb, &lc, st));
	gaz_metric_observe(gaz_metric_with(m_list_items, s->url.raw), (double)lc.n);
	return rc;
}

int gaz_store_exists(struct gaz_store *s, const char *path, bool *exists, struct gaz_status *st)
{
	char key[GAZ_STORE_KEY_MAX];
	int rc = rewrite(s, path, key, st);

	int64_t t0 = gaz_mono_ns();

	*exists = false;
	return rc ? rc : op_done(s, "exists", t0, s->ops->exists(s, key, exists, st));
}

int gaz_store_get(struct gaz_store *s, const char *path, int64_t off,
		  struct gaz_store_reader **out, struct gaz_status *st)
{
	char key[GAZ_STORE_KEY_MAX];
	int rc = rewrite(s, path, key, st);

	*out = NULL;
	if (!rc && off < 0)
		rc = gaz_status_set(st, GAZ_EINVAL, "negative offset %lld", (long long)off);
	int64_t t0 = gaz_mono_ns();
	return rc ? rc : op_done(s, "get", t0, s->ops->get(s, key, off, out, st));
}

int gaz_store_reader_read(void *r, void *buf, size_t cap, size_t *n, struct gaz_status *st)
{
	struct gaz_store_reader *rd = r;
	return rd->read(rd, buf, cap, n, st);
}

void gaz_store_reader_close(struct gaz_store_reader *r)
{
	if (r)
		r->close(r);
}

int gaz_store_put(struct gaz_store *s, const char *path, int fd, int64_t len,
		  const char *content_encoding, struct gaz_status *st)
{
	char key[GAZ_STORE_KEY_MAX];
	int rc = rewrite(s, path, key, st);

	if (!rc && len < 0)
		rc = gaz_status_set(st, GAZ_EINVAL, "negative length %lld", (long long)len);
	if (rc)
		return rc;
	int64_t t0 = gaz_mono_ns();
	rc = op_done(s, "put", t0, s->ops->put(s, key, fd, len, content_encoding, st));
	if (!rc)
		gaz_metric_add(gaz_metric_with(m_put_bytes, s->url.raw,
					       content_encoding && *content_encoding ? content_encoding
										    : "none"),
			       len);
	return rc;
}

int gaz_store_remove(struct gaz_store *s, const char *path, struct gaz_status *st)
{
	char key[GAZ_STORE_KEY_MAX];
	int rc = rewrite(s, path, key, st);

	int64_t t0 = gaz_mono_ns();
	return rc ? rc : op_done(s, "remove", t0, s->ops->remove(s, key, st));
}

int gaz_store_sign_get(struct gaz_store *s, const char *path, int64_t ttl_s, char **url,
		       struct gaz_status *st)
{
	char key[GAZ_STORE_KEY_MAX];
	int rc = rewrite(s, path, key, st);

	*url = NULL;
	if (!rc && ttl_s <= 0)
		rc = gaz_status_set(st, GAZ_EINVAL, "signature TTL must be positive");
	int64_t t0 = gaz_mono_ns();
	return rc ? rc : op_done(s, "signget", t0, s->ops->sign_get(s, key, ttl_s, url, st));
}

/* ------------------------------------------------------------ list_all */

struct collect {
	struct gaz_store_entry *v;
	size_t len, cap, max;
};

static int collect_cb(void *arg, const struct gaz_store_obj *obj, struct gaz_status *st)
{
	struct collect *c = arg;
	struct gaz_store_entry *v;

	if (c->len == c->max)
		return gaz_status_set(st, GAZ_ERANGE, "listing exceeds %zu objects", c->max);
	if (c->len == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		if (!(v = realloc(c->v, cap * sizeof(*v))))
			return gaz_status_set(st, GAZ_ENOMEM, "listing: out of memory");
		c->v = v;
		c->cap = cap;
	}
	if (!(c->v[c->len].path = strdup(obj->path)))
		return gaz_status_set(st, GAZ_ENOMEM, "listing: out of memory");
	c->v[c->len].size = obj->size;
	c->v[c->len].mod_time = obj->mod_time;
	c->len++;
	return 0;
}

int gaz_store_list_all(struct gaz_store *s, const char *prefix, size_t max,
		       struct gaz_store_entry **out, size_t *n, struct gaz_status *st)
{
	struct collect c = {.max = max ? max : 1000000};
	int rc = gaz_store_list(s, prefix, collect_cb, &c, st);

	*out = NULL;
	*n = 0;
	if (rc) {
		gaz_store_entries_free(c.v, c.len);
		return rc;
	}
	*out = c.v;
	*n = c.len;
	return 0;
}

void gaz_store_entries_free(struct gaz_store_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(e[i].path);
	free(e);
}

/* ------------------------------------------------------ list_fragments */

struct frag_list {
	struct gaz_store *store;
	const char *journal;
	gaz_store_fragment_fn cb;
	void *arg;
};

static int frag_list_cb(void *arg, const struct gaz_store_obj *obj, struct gaz_status *st)
{
	struct frag_list *fl = arg;
	struct gaz_status perr = {0};
	struct gaz_fragment f;
	size_t len = strlen(obj->path);
	int rc;

	if (len == 0 || obj->path[len - 1] == '/')
		return 0; /* directory placeholder objects */
	rc = gaz_fragment_parse_path(fl->journal, obj->path, &f, &perr);
	if (rc == GAZ_EINVAL) {
		gaz_warn("parsing fragment", "journal=%s name=%s store=%s", fl->journal,
			 obj->path, fl->store->url.raw);
		return 0;
	}
	if (rc)
		return gaz_status_set(st, rc, "%s", perr.msg);
	if (obj->size == 0 && f.end > f.begin) {
		gaz_warn("zero-length fragment", "journal=%s name=%s store=%s", fl->journal,
			 obj->path, fl->store->url.raw);
		gaz_fragment_release(&f);
		return 0;
	}
	f.mod_time = obj->mod_time;
	rc = gaz_fragment_set_str(&f.backing_store, fl->store->url.raw, st);
	if (!rc)
		rc = fl->cb(fl->arg, &f, st);
	gaz_fragment_release(&f);
	return rc;
}

int gaz_store_list_fragments(struct gaz_store *s, const char *journal,
			     gaz_store_fragment_fn cb, void *arg, struct gaz_status *st)
{
	struct frag_list fl = {s, journal, cb, arg};
	char prefix[GAZ_JOURNAL_MAX + 2];

	if (snprintf(prefix, sizeof(prefix), "%s/", journal) >= (int)sizeof(prefix) || !*journal)
		return gaz_status_set(st, GAZ_EINVAL, "invalid journal \"%.64s\"", journal);
	return gaz_store_list(s, prefix, frag_list_cb, &fl, st);
}

/* --------------------------------------------------------- health check */

#define HEALTH_PATH ".test/health-check"
static const char health_body[] = "health-check\n";

static int health_put(struct gaz_store *s, struct gaz_status *st)
{
	size_t len = sizeof(health_body) - 1;
	int fd = memfd_create("gazette-health-check", MFD_CLOEXEC), rc;

	if (fd < 0)
		return gaz_status_set(st, GAZ_EIO, "creating health-check body failed");
	if (write(fd, health_body, len) != (ssize_t)len)
		rc = gaz_status_set(st, GAZ_EIO, "writing health-check body failed");
	else
		rc = gaz_store_put(s, HEALTH_PATH, fd, (int64_t)len, NULL, st);
	close(fd);
	return rc;
}

static int health_get(struct gaz_store *s, struct gaz_status *st)
{
	struct gaz_store_reader *r;
	char buf[64];
	size_t got = 0, n;
	int rc = gaz_store_get(s, HEALTH_PATH, 0, &r, st);

	if (rc)
		return rc;
	while (got < sizeof(buf) && (rc = gaz_store_reader_read(r, buf + got, sizeof(buf) - got, &n, st)) == 0)
		got += n;
	gaz_store_reader_close(r);
	if (rc < 0)
		return rc;
	if (got != sizeof(health_body) - 1 || memcmp(buf, health_body, got))
		return gaz_status_set(st, GAZ_EIO, "read back %zu unexpected bytes", got);
	return 0;
}

static int health_list_cb(void *arg, const struct gaz_store_obj *obj, struct gaz_status *st)
{
	(void)st;
	if (!strcmp(obj->path, "health-check"))
		*(bool *)arg = true;
	return 0;
}

static int health_fetch(struct gaz_store *s, const char *url, struct gaz_status *st)
{
	char buf[64];
	size_t n = 0;
	int rc = s->ops->fetch(s, url, buf, sizeof(buf), &n, st);

	if (!rc && (n != sizeof(health_body) - 1 || memcmp(buf, health_body, n)))
		rc = gaz_status_set(st, GAZ_EIO, "signed URL answered %zu unexpected bytes", n);
	return rc;
}

int gaz_store_health_check(struct gaz_store *s, struct gaz_status *st)
{
	struct gaz_status local = {0};
	const char *step;
	bool listed = false;
	char *url = NULL;
	int rc;

	step = "put";
	rc = health_put(s, &local);
	if (!rc) {
		step = "get";
		rc = health_get(s, &local);
	}
	if (!rc) {
		step = "list";
		rc = gaz_store_list(s, ".test/", health_list_cb, &listed, &local);
		if (!rc && !listed)
			rc = gaz_status_set(&local, GAZ_EIO, "\"health-check\" missing from the listing");
	}
	if (!rc) {
		step = "sign";
		rc = gaz_store_sign_get(s, HEALTH_PATH, 300, &url, &local);
	}
	if (!rc && s->ops->fetch && !strncmp(url, "http", 4)) {
		step = "fetch signed URL";
		rc = health_fetch(s, url, &local);
	}
	free(url);
	if (rc)
		return gaz_status_set(st, rc, "fragment store \"%s\" health check failed at %s: %s",
				      s->url.raw, step, local.msg);
	return 0;
}
