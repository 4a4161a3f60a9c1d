/*
 * kube.c - HTTP requests to the Kubernetes API over libcurl: TLS and
 * credentials from a struct gaz_kube_config, JSON bodies, bounded response
 * buffers, a service-account token re-read whenever its file changes, and
 * watch streams split into events (framing and event decoding are pure
 * functions, unit-tested).
 *
 * One curl share handle keeps connections, DNS and TLS sessions across
 * requests and threads; each request has its own easy handle. Only this
 * file (in operator/) calls curl.
 *
 * Lock order: token_mu and the share locks are leaves (nothing else is
 * taken while holding them).
 */
#include "operator/kube.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/clock.h"
#include "common/log.h"

#define TOKEN_MAX 16384

struct gaz_kube {
	struct gaz_kube_config cfg;
	char *user_agent;
	int64_t timeout_ms;
	CURLSH *share;
	pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
	pthread_mutex_t token_mu;
	char *token;                   /* current bearer token (static or from file) */
	struct stat token_sb;          /* token file identity when last read */
	char cred[600];                /* the credentials in words, for 401s */
};

/* ---- share locks --------------------------------------------------------- */

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *arg)
{
	struct gaz_kube *k = arg;

	(void)h;
	(void)access;
	pthread_mutex_lock(&k->share_mu[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *arg)
{
	struct gaz_kube *k = arg;

	(void)h;
	pthread_mutex_unlock(&k->share_mu[data]);
}

struct gaz_kube *gaz_kube_new(struct gaz_kube_config *cfg, const char *user_agent,
			      int64_t timeout_ms, struct gaz_status *st)
{
	struct gaz_kube *k;

	if (!cfg->server || !*cfg->server) {
		gaz_status_set(st, GAZ_EINVAL, "no API server address");
		return NULL;
	}
	if (!(k = calloc(1, sizeof(*k))) || !(k->user_agent = strdup(user_agent)) ||
	    !(k->share = curl_share_init())) {
		if (k)
			free(k->user_agent);
		free(k);
		gaz_status_set(st, GAZ_ENOMEM, "out of memory");
		return NULL;
	}
	k->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	if (k->cfg.token_file)
		snprintf(k->cred, sizeof(k->cred), "bearer token from file %s (re-read when it changes)",
			 k->cfg.token_file);
	else if (k->cfg.token)
		snprintf(k->cred, sizeof(k->cred), "the kubeconfig's bearer token (read at start; a "
			 "new one needs a restart)");
	else if (k->cfg.cert_file || k->cfg.cert_data)
		snprintf(k->cred, sizeof(k->cred), "client certificate %s",
			 k->cfg.cert_file ? k->cfg.cert_file : "from the kubeconfig");
	else
		snprintf(k->cred, sizeof(k->cred), "no credentials");
	k->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&k->share_mu[i], NULL);
	pthread_mutex_init(&k->token_mu, NULL);
	curl_share_setopt(k->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(k->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(k->share, CURLSHOPT_USERDATA, k);
	curl_share_setopt(k->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(k->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(k->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	return k;
}

void gaz_kube_free(struct gaz_kube *k)
{
	if (!k)
		return;
	curl_share_cleanup(k->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&k->share_mu[i]);
	pthread_mutex_destroy(&k->token_mu);
	gaz_kube_config_release(&k->cfg);
	free(k->token);
	free(k->user_agent);
	free(k);
}

const char *gaz_kube_namespace(const struct gaz_kube *k)
{
	return k->cfg.namespace;
}

/* ---- credentials ---------------------------------------------------------- */

/* Re-reads the token file when its inode, size or mtime changed since the
 * last read (kubelet replaces the file atomically on rotation). On a read
 * failure the previous token is kept and the failure logged. */
static void token_refresh(struct gaz_kube *k)
{
	struct stat sb;
	char buf[TOKEN_MAX];
	FILE *f;
	size_t n;

	if (stat(k->cfg.token_file, &sb)) {
		gaz_warn("cannot stat service account token", "path=%s err=%m", k->cfg.token_file);
		return;
	}
	if (k->token && sb.st_ino == k->token_sb.st_ino && sb.st_size == k->token_sb.st_size &&
	    sb.st_mtim.tv_sec == k->token_sb.st_mtim.tv_sec &&
	    sb.st_mtim.tv_nsec == k->token_sb.st_mtim.tv_nsec)
		return;
	if (!(f = fopen(k->cfg.token_file, "r"))) {
		gaz_warn("cannot read service account token", "path=%s err=%m", k->cfg.token_file);
		return;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	while (n && isspace((unsigned char)buf[n - 1]))
		n--;
	buf[n] = '\0';
	char *t = strdup(buf);
	if (!t)
		return;
	free(k->token);
	k->token = t;
	k->token_sb = sb;
	gaz_debug("read service account token", "path=%s bytes=%zu", k->cfg.token_file, n);
}

/* Builds the Authorization header for this request, or NULL for none. */
static struct curl_slist *auth_header(struct gaz_kube *k, struct curl_slist *h)
{
	char *line = NULL;

	pthread_mutex_lock(&k->token_mu);
	if (k->cfg.token_file)
		token_refresh(k);
	const char *tok = k->token ? k->token : k->cfg.token;
	if (tok && *tok && asprintf(&line, "Authorization: Bearer %s", tok) < 0)
		line = NULL;
	pthread_mutex_unlock(&k->token_mu);
	if (line) {
		h = curl_slist_append(h, line);
		free(line);
	}
	return h;
}

static void set_blob(CURL *c, CURLoption opt, char *data, size_t len)
{
	struct curl_blob b = {.data = data, .len = len, .flags = CURL_BLOB_COPY};

	curl_easy_setopt(c, opt, &b);
}

static void set_tls(struct gaz_kube *k, CURL *c)
{
	const struct gaz_kube_config *g = &k->cfg;

	if (g->ca_data)
		set_blob(c, CURLOPT_CAINFO_BLOB, g->ca_data, g->ca_len);
	else if (g->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, g->ca_file);
	if (g->cert_data)
		set_blob(c, CURLOPT_SSLCERT_BLOB, g->cert_data, g->cert_len);
	else if (g->cert_file)
		curl_easy_setopt(c, CURLOPT_SSLCERT, g->cert_file);
	if (g->key_data)
		set_blob(c, CURLOPT_SSLKEY_BLOB, g->key_data, g->key_len);
	else if (g->key_file)
		curl_easy_setopt(c, CURLOPT_SSLKEY, g->key_file);
	curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
	curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
	if (g->insecure) {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
}

/* ---- one request ------------------------------------------------------------ */

struct body {
	char *buf;
	size_t len, cap;
	bool overflow;
};

static size_t body_write(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t add = size * n;

	if (b->len + add > GAZ_KUBE_BODY_MAX) {
		b->overflow = true;
		return 0;
	}
	if (b->len + add + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 16384;
		while (cap < b->len + add + 1)
			cap *= 2;
		char *nb = realloc(b->buf, cap);
		if (!nb)
			return 0;
		b->buf = nb;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, p, add);
	b->len += add;
	b->buf[b->len] = '\0';
	return add;
}

/* A new easy handle for `method path` with TLS, credentials and headers;
 * *hdrs receives the header list to free after the transfer. */
static CURL *easy(struct gaz_kube *k, const char *method, const char *path,
		  const char *content_type, struct curl_slist **hdrs)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	char *url = NULL, *ct = NULL;

	if (!c || asprintf(&url, "%s%s", k->cfg.server, path) < 0) {
		if (c)
			curl_easy_cleanup(c);
		return NULL;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	free(url);
	curl_easy_setopt(c, CURLOPT_SHARE, k->share);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(c, CURLOPT_USERAGENT, k->user_agent);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	set_tls(k, c);
	h = curl_slist_append(h, "Accept: application/json");
	if (asprintf(&ct, "Content-Type: %s", content_type ? content_type : "application/json") >= 0) {
		h = curl_slist_append(h, ct);
		free(ct);
	}
	h = auth_header(k, h);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	*hdrs = h;
	return c;
}

static int http_code_err(long code)
{
	switch (code) {
	case 400: case 422: return GAZ_EINVAL;
	case 401: case 403: return GAZ_EPERM;
	case 404: return GAZ_ENOTFOUND;
	case 409: return GAZ_EEXIST;
	case 410: return GAZ_ERANGE;
	}
	return GAZ_EPROTO;
}

/* Fills st for a non-2xx answer from the Status the server sent. */
static int http_error(const struct gaz_kube *k, const char *method, const char *path, long code,
		      const struct body *b, struct gaz_status *st)
{
	json_t *j = b->len ? json_loadb(b->buf, b->len, 0, NULL) : NULL;
	const char *msg = json_string_value(json_object_get(j, "message"));

	/* A 401 is about our credentials: say which were sent. */
	gaz_status_set(st, http_code_err(code), "%s %s: %ld: %s%s%s%s", method, path, code,
		       msg ? msg : (b->len ? b->buf : "no body"),
		       code == 401 ? " (credentials: " : "", code == 401 ? k->cred : "",
		       code == 401 ? ")" : "");
	json_decref(j);
	return http_code_err(code);
}

int gaz_kube_request(struct gaz_kube *k, const char *method, const char *path,
		     const char *content_type, const char *body, json_t **out, long *http_status,
		     struct gaz_status *st)
{
	struct curl_slist *hdrs = NULL;
	struct body b = {0};
	long code = 0;
	CURLcode cc;
	int rc = 0;
	CURL *c = easy(k, method, path, content_type, &hdrs);

	if (out)
		*out = NULL;
	if (!c)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)k->timeout_ms);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	if (cc != CURLE_OK) {
		code = 0;
		rc = gaz_status_set(st, b.overflow ? GAZ_ERANGE : GAZ_EUNAVAIL, "%s %s: %s", method,
				    path, b.overflow ? "response too large" : curl_easy_strerror(cc));
	} else if (code < 200 || code > 299) {
		rc = http_error(k, method, path, code, &b, st);
	} else if (out) {
		json_error_t je;
		*out = b.len ? json_loadb(b.buf, b.len, 0, &je) : json_null();
		if (!*out)
			rc = gaz_status_set(st, GAZ_EPROTO, "%s %s: response is not JSON: %s", method,
					    path, je.text);
	}
	if (http_status)
		*http_status = code;
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	free(b.buf);
	return rc;
}

int gaz_kube_requestj(struct gaz_kube *k, const char *method, const char *path,
		      const char *content_type, const json_t *body, json_t **out,
		      long *http_status, struct gaz_status *st)
{
	char *text = json_dumps(body, JSON_COMPACT);
	int rc;

	if (!text)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	rc = gaz_kube_request(k, method, path, content_type, text, out, http_status, st);
	free(text);
	return rc;
}

/* ---- watch framing and events -------------------------------------------------- */

/* Appends to the partial-line buffer, bounded by l->max. */
static int lines_append(struct gaz_kube_lines *l, const char *p, size_t n)
{
	if (l->len + n > l->max)
		return GAZ_ERANGE;
	if (l->len + n > l->cap) {
		size_t cap = l->cap ? l->cap : 4096;
		while (cap < l->len + n)
			cap *= 2;
		char *nb = realloc(l->buf, cap);
		if (!nb)
			return GAZ_ENOMEM;
		l->buf = nb;
		l->cap = cap;
	}
	memcpy(l->buf + l->len, p, n);
	l->len += n;
	return 0;
}

int gaz_kube_lines_feed(struct gaz_kube_lines *l, const char *data, size_t n, gaz_kube_line_fn fn,
			void *arg)
{
	size_t start = 0;
	int rc;

	for (size_t i = 0; i < n; i++) {
		const char *line = data + start;
		size_t len = i - start;

		if (data[i] != '\n')
			continue;
		if (l->len) { /* completes a buffered partial line */
			if ((rc = lines_append(l, line, len)))
				return rc;
			line = l->buf;
			len = l->len;
			l->len = 0;
		}
		start = i + 1;
		while (len && line[len - 1] == '\r')
			len--;
		if (len && (rc = fn(arg, line, len)))
			return rc;
	}
	return start < n ? lines_append(l, data + start, n - start) : 0;
}

void gaz_kube_lines_release(struct gaz_kube_lines *l)
{
	free(l->buf);
	l->buf = NULL;
	l->len = l->cap = 0;
}

static const char *const event_names[] = {
	[GAZ_KUBE_ADDED] = "ADDED",       [GAZ_KUBE_MODIFIED] = "MODIFIED",
	[GAZ_KUBE_DELETED] = "DELETED",   [GAZ_KUBE_BOOKMARK] = "BOOKMARK",
	[GAZ_KUBE_ERROR] = "ERROR",
};

int gaz_kube_event_parse(const char *line, size_t len, struct gaz_kube_event *ev,
			 struct gaz_status *st)
{
	json_error_t je;
	json_t *j = json_loadb(line, len, 0, &je), *obj;
	const char *type;

	memset(ev, 0, sizeof(*ev));
	if (!j)
		return gaz_status_set(st, GAZ_EPROTO, "watch event is not JSON: %s", je.text);
	type = json_string_value(json_object_get(j, "type"));
	obj = json_object_get(j, "object");
	for (int t = GAZ_KUBE_ADDED; type && t <= GAZ_KUBE_ERROR; t++)
		if (!strcmp(type, event_names[t]))
			ev->type = (enum gaz_kube_event_type)t;
	if (!ev->type || !json_is_object(obj)) {
		json_decref(j);
		return gaz_status_set(st, GAZ_EPROTO, "watch event has %s",
				      !ev->type ? "an unknown type" : "no object");
	}
	ev->object = json_incref(obj);
	json_decref(j);
	ev->resource_version = json_string_value(
		json_object_get(json_object_get(ev->object, "metadata"), "resourceVersion"));
	if (ev->type == GAZ_KUBE_ERROR)
		ev->code = (long)json_integer_value(json_object_get(ev->object, "code"));
	return 0;
}

void gaz_kube_event_release(struct gaz_kube_event *ev)
{
	json_decref(ev->object);
	memset(ev, 0, sizeof(*ev));
}

/* ---- watch transfer ---------------------------------------------------------- */

struct watch {
	CURL *c;
	struct gaz_kube_lines lines;
	gaz_kube_event_fn fn;
	void *arg;
	atomic_bool *stop;
	int rc;                /* first error or fn's return */
	bool fn_stopped;       /* rc came from fn, not from framing */
	long code;             /* HTTP status once known */
	struct body err;       /* body of a non-2xx answer */
	struct gaz_status *st;
};

static int watch_line(void *arg, const char *line, size_t len)
{
	struct watch *w = arg;
	struct gaz_kube_event ev;
	int rc;

	if ((rc = gaz_kube_event_parse(line, len, &ev, w->st)))
		return rc;
	rc = w->fn(w->arg, &ev);
	gaz_kube_event_release(&ev);
	w->fn_stopped = rc != 0;
	return rc;
}

static size_t watch_write(char *p, size_t size, size_t n, void *arg)
{
	struct watch *w = arg;

	if (!w->code)
		curl_easy_getinfo(w->c, CURLINFO_RESPONSE_CODE, &w->code);
	if (w->code < 200 || w->code > 299)
		return body_write(p, size, n, &w->err);
	w->rc = gaz_kube_lines_feed(&w->lines, p, size * n, watch_line, w);
	return w->rc ? 0 : size * n;
}

static int watch_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct watch *w = arg;

	(void)dt, (void)dn, (void)ut, (void)un;
	return w->stop && atomic_load(w->stop);
}

int gaz_kube_watch(struct gaz_kube *k, const char *path, int64_t idle_ms, gaz_kube_event_fn fn,
		   void *arg, atomic_bool *stop, struct gaz_status *st)
{
	struct curl_slist *hdrs = NULL;
	struct watch w = {.fn = fn, .arg = arg, .stop = stop, .st = st,
			  .lines = {.max = GAZ_KUBE_BODY_MAX}};
	CURLcode cc;
	int rc = 0;

	if (!(w.c = easy(k, "GET", path, NULL, &hdrs)))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	curl_easy_setopt(w.c, CURLOPT_WRITEFUNCTION, watch_write);
	curl_easy_setopt(w.c, CURLOPT_WRITEDATA, &w);
	curl_easy_setopt(w.c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(w.c, CURLOPT_XFERINFOFUNCTION, watch_progress);
	curl_easy_setopt(w.c, CURLOPT_XFERINFODATA, &w);
	curl_easy_setopt(w.c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(w.c, CURLOPT_LOW_SPEED_TIME, (long)(idle_ms > 1000 ? idle_ms / 1000 : 1));
	cc = curl_easy_perform(w.c);
	if (!w.code)
		curl_easy_getinfo(w.c, CURLINFO_RESPONSE_CODE, &w.code);
	if (w.rc == GAZ_ERANGE && !w.fn_stopped)
		rc = gaz_status_set(st, GAZ_EPROTO, "watch %s: event larger than %u bytes", path,
				    GAZ_KUBE_BODY_MAX);
	else if (w.rc)
		rc = w.rc; /* fn's return, or a parse error (st set) */
	else if (cc == CURLE_ABORTED_BY_CALLBACK)
		rc = gaz_status_set(st, GAZ_ECANCELLED, "watch %s: stopped", path);
	else if (w.code && (w.code < 200 || w.code > 299))
		rc = http_error(k, "GET", path, w.code, &w.err, st);
	else if (cc != CURLE_OK)
		rc = gaz_status_set(st, GAZ_EUNAVAIL, "watch %s: %s", path, curl_easy_strerror(cc));
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(w.c);
	gaz_kube_lines_release(&w.lines);
	free(w.err.buf);
	return rc;
}

/* ---- helpers ---------------------------------------------------------------------- */

char *gaz_kube_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(s) * 3 + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
			*o++ = (char)ch;
		} else {
			*o++ = '%';
			*o++ = hex[ch >> 4];
			*o++ = hex[ch & 15];
		}
	}
	*o = '\0';
	return out;
}

char *gaz_kube_now_rfc3339(char *buf, size_t cap, bool micro)
{
	struct timespec ts;
	struct tm tm;
	char base[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	if (micro)
		snprintf(buf, cap, "%s.%06ldZ", base, ts.tv_nsec / 1000);
	else
		snprintf(buf, cap, "%sZ", base);
	return buf;
}

void gaz_kube_event_post(struct gaz_kube *k, const json_t *obj, const char *type,
			 const char *reason, const char *component, const char *fmt, ...)
{
	const json_t *md = json_object_get(obj, "metadata");
	const char *ns = json_string_value(json_object_get(md, "namespace"));
	const char *name = json_string_value(json_object_get(md, "name"));
	char msg[1024], now[40], path[512], gen[300];
	struct gaz_status st = {0};
	va_list ap;

	if (!ns || !name)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	gaz_kube_now_rfc3339(now, sizeof(now), false);
	snprintf(gen, sizeof(gen), "%s.", name);
	json_t *ev = json_pack(
		"{s:s, s:s, s:{s:s, s:s}, s:{s:O?, s:O?, s:s, s:s, s:O?, s:O?}, s:s, s:s, s:s, "
		"s:{s:s}, s:s, s:s, s:i}",
		"apiVersion", "v1", "kind", "Event", "metadata", "generateName", gen, "namespace", ns,
		"involvedObject", "apiVersion", json_object_get(obj, "apiVersion"), "kind",
		json_object_get(obj, "kind"), "name", name, "namespace", ns, "uid",
		json_object_get(md, "uid"), "resourceVersion", json_object_get(md, "resourceVersion"),
		"reason", reason, "message", msg, "type", type, "source", "component", component,
		"firstTimestamp", now, "lastTimestamp", now, "count", 1);
	if (!ev)
		return;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", ns);
	if (gaz_kube_requestj(k, "POST", path, NULL, ev, NULL, NULL, &st))
		gaz_debug("posting an event failed", "reason=%s err=%s", reason, st.msg);
	json_decref(ev);
}
