/*
 * client_fetch.c - direct reads of persisted fragments from the URL a
 * broker hands out with a do_not_proxy Read (facts §7.3): the client GETs
 * the fragment file itself, decompresses it per codec, skips to the read
 * offset and yields content up to exactly the fragment's end.
 *
 *   file://  mapped under the client's file root, as Go's
 *            InstallFileTransport(http.Dir(root)) does (gazctl --file-root)
 *   http(s)  libcurl, HTTP/1.1 only; Accept-Encoding: identity for
 *            GZIP_OFFLOAD_DECOMPRESSION (decoded as GZIP only if the store
 *            still answers Content-Encoding: gzip), gzip for GZIP (so no
 *            layer decodes it for us); a status other than 200 fails with
 *            `!OK fetching (404 Not Found, "<url>")`.
 *
 * The curl transfer runs on the reading thread through the multi interface:
 * its write callback fills a bounded buffer and pauses the transfer when
 * the buffer is full; reads drain it and resume. This is the only file of
 * the client that calls libcurl.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/lib/client_int.h"
#include "fragment/codec.h"

#define HTTP_BUF_BYTES (256 * 1024)
#define HTTP_BUF_MAX (64u << 20)
#define DISCARD_BYTES (64 * 1024)

/* ---- file:// URLs ------------------------------------------------------- */

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch |= 0x20;
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* unescape percent-decodes [s, s+n) into out[cap]; 0 or GAZ_EINVAL. */
static int unescape(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int ch = (unsigned char)s[i];

		if (ch == '%') {
			int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
			int lo = hi >= 0 ? hexval(s[i + 2]) : -1;
			if (lo < 0 || (ch = hi << 4 | lo) == 0)
				return GAZ_EINVAL;
			i += 2;
		}
		if (o + 1 >= cap)
			return GAZ_ERANGE;
		out[o++] = (char)ch;
	}
	out[o] = '\0';
	return 0;
}

/* clean_rooted rewrites `p` in place as Go's path.Clean("/" + p). */
static void clean_rooted(char *p)
{
	char *dst = p + 1, *seg, *save = NULL;
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", p);
	p[0] = '/';
	p[1] = '\0';
	for (seg = strtok_r(tmp, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		if (!strcmp(seg, "."))
			continue;
		if (!strcmp(seg, "..")) {
			char *slash = strrchr(p, '/');
			dst = slash == p ? p + 1 : slash;
			*dst = '\0';
			continue;
		}
		if (dst > p + 1)
			*dst++ = '/';
		dst = stpcpy(dst, seg);
	}
}

int gaz__file_url_path(const char *root, const char *url, char *out, size_t cap,
		       struct gaz_status *st)
{
	char path[PATH_MAX];
	const char *p, *end;
	int rc;

	if (strncasecmp(url, "file://", 7) != 0)
		return gaz_status_set(st, GAZ_EINVAL, "not a file:// URL (%s)", url);
	p = strchr(url + 7, '/'); /* the host, if any, is ignored */
	if (!p)
		p = url + strlen(url);
	end = p + strcspn(p, "?#");
	if ((rc = unescape(p, (size_t)(end - p), path, sizeof(path))))
		return gaz_status_set(st, rc, "invalid file URL path (%s)", url);
	clean_rooted(path);
	if (!*root)
		root = "."; /* http.Dir("") serves the current directory */
	rc = snprintf(out, cap, "%s%s", root, root[strlen(root) - 1] == '/' ? path + 1 : path);
	if (rc < 0 || (size_t)rc >= cap)
		return gaz_status_set(st, GAZ_ERANGE, "file URL path too long (%s)", url);
	return 0;
}

/* ---- http(s) via libcurl -------------------------------------------------- */

struct http_src {
	struct gaz_client *c;
	const atomic_bool *stop; /* also ends the transfer when set; NULL ok */
	CURL *easy;
	CURLM *multi;
	struct curl_slist *hdrs;
	uint8_t *buf;          /* body bytes [off, len) not yet read */
	size_t off, len, cap;
	bool paused;           /* the write callback paused the transfer */
	bool done;
	CURLcode result;
	bool gzip_encoded;     /* final response had Content-Encoding: gzip */
	char reason[64];       /* reason phrase of the final status line */
	char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t http_write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
	struct http_src *h = arg;
	size_t n = size * nmemb;

	if (h->off == h->len)
		h->off = h->len = 0;
	if (h->cap - h->len < n) {
		if (h->off < h->len) { /* drain first */
			h->paused = true;
			return CURL_WRITEFUNC_PAUSE;
		}
		if (n > HTTP_BUF_MAX)
			return 0; /* fails the transfer */
		uint8_t *grown = realloc(h->buf, n);
		if (!grown)
			return 0;
		h->buf = grown;
		h->cap = n;
	}
	memcpy(h->buf + h->len, data, n);
	h->len += n;
	return n;
}

static size_t http_header_cb(char *data, size_t size, size_t nmemb, void *arg)
{
	struct http_src *h = arg;
	size_t n = size * nmemb;
	int len = n > 200 ? 200 : (int)n;
	char line[201];

	memcpy(line, data, (size_t)len);
	line[len] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	if (!strncmp(line, "HTTP/", 5)) { /* a new response (after redirects) */
		const char *sp = strchr(line, ' ');
		h->gzip_encoded = false;
		sp = sp ? strchr(sp + 1, ' ') : NULL;
		snprintf(h->reason, sizeof(h->reason), "%s", sp ? sp + 1 : "");
	} else if (!strncasecmp(line, "content-encoding:", 17)) {
		const char *v = line + 17;
		v += strspn(v, " \t");
		h->gzip_encoded = !strncasecmp(v, "gzip", 4);
	}
	return n;
}

/* http_pump runs the transfer until body bytes are buffered or it ended. */
static int http_pump(struct http_src *h, struct gaz_status *st)
{
	CURLMsg *msg;
	int running, left;

	while (h->off == h->len && !h->done) {
		if (gaz_client_cancelled(h->c) || (h->stop && atomic_load(h->stop)))
			return gaz_status_set(st, GAZ_ECANCELLED, "cancelled");
		if (h->paused) {
			h->paused = false;
			curl_easy_pause(h->easy, CURLPAUSE_CONT);
		}
		if (curl_multi_perform(h->multi, &running) != CURLM_OK)
			return gaz_status_set(st, GAZ_EIO, "fetching fragment: curl multi failed");
		while ((msg = curl_multi_info_read(h->multi, &left)))
			if (msg->msg == CURLMSG_DONE) {
				h->done = true;
				h->result = msg->data.result;
			}
		if (h->off == h->len && !h->done && !h->paused)
			curl_multi_poll(h->multi, NULL, 0, GAZ__CLIENT_POLL_MS, NULL);
	}
	return 0;
}

/* http_read is the gaz_read_fn over the response body. */
static int http_read(void *arg, void *buf, size_t cap, size_t *n, struct gaz_status *st)
{
	struct http_src *h = arg;
	int rc = http_pump(h, st);

	*n = 0;
	if (rc)
		return rc;
	if (h->off < h->len) {
		*n = h->len - h->off < cap ? h->len - h->off : cap;
		memcpy(buf, h->buf + h->off, *n);
		h->off += *n;
		return 0;
	}
	if (h->result != CURLE_OK)
		return gaz_status_set(st, GAZ_EIO, "fetching fragment: %s",
				      h->errbuf[0] ? h->errbuf : curl_easy_strerror(h->result));
	return GAZ_EOF;
}

static void http_free(struct http_src *h)
{
	if (!h)
		return;
	if (h->multi && h->easy)
		curl_multi_remove_handle(h->multi, h->easy);
	if (h->easy)
		curl_easy_cleanup(h->easy);
	if (h->multi)
		curl_multi_cleanup(h->multi);
	curl_slist_free_all(h->hdrs);
	free(h->buf);
	free(h);
}

/* http_setup configures the GET of `url` with the codec's Accept-Encoding. */
static int http_setup(struct http_src *h, const char *url, int codec)
{
	const char *ae = codec == PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION
				 ? "Accept-Encoding: identity"
			 : codec == PROTOCOL__COMPRESSION_CODEC__GZIP ? "Accept-Encoding: gzip"
								       : NULL;

	if (!(h->easy = curl_easy_init()) || !(h->multi = curl_multi_init()) ||
	    !(h->buf = malloc(HTTP_BUF_BYTES)))
		return GAZ_ENOMEM;
	h->cap = HTTP_BUF_BYTES;
	if (ae && !(h->hdrs = curl_slist_append(NULL, ae)))
		return GAZ_ENOMEM;
	curl_easy_setopt(h->easy, CURLOPT_URL, url);
	curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, h->hdrs);
	curl_easy_setopt(h->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h->easy, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h->easy, CURLOPT_MAXREDIRS, 10L);
	curl_easy_setopt(h->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h->easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h->easy, CURLOPT_ERRORBUFFER, h->errbuf);
	curl_easy_setopt(h->easy, CURLOPT_WRITEFUNCTION, http_write_cb);
	curl_easy_setopt(h->easy, CURLOPT_WRITEDATA, h);
	curl_easy_setopt(h->easy, CURLOPT_HEADERFUNCTION, http_header_cb);
	curl_easy_setopt(h->easy, CURLOPT_HEADERDATA, h);
	return curl_multi_add_handle(h->multi, h->easy) == CURLM_OK ? 0 : GAZ_ENOMEM;
}

/* http_open starts the GET and waits for the response status. */
static int http_open(struct gaz_client *c, const atomic_bool *stop, const char *url, int codec,
		     struct http_src **out, struct gaz_status *st)
{
	struct http_src *h = calloc(1, sizeof(*h));
	long code = 0;
	int rc;

	pthread_once(&curl_once, curl_init_once);
	if (!h || http_setup(h, url, codec)) {
		http_free(h);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory fetching fragment");
	}
	h->c = c;
	h->stop = stop;
	if ((rc = http_pump(h, st)) == 0 && h->done && h->result != CURLE_OK)
		rc = gaz_status_set(st, GAZ_EIO, "fetching fragment %s: %s", url,
				    h->errbuf[0] ? h->errbuf : curl_easy_strerror(h->result));
	curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &code);
	if (!rc && code != 200)
		rc = gaz_status_set(st, code == 404 ? GAZ_ENOTFOUND : GAZ_EIO,
				    "!OK fetching (%ld %s, \"%s\")", code, h->reason, url);
	if (rc) {
		http_free(h);
		return rc;
	}
	*out = h;
	return 0;
}

/* ---- the fragment reader --------------------------------------------------- */

struct gaz__frag_reader {
	int64_t begin, end;     /* the fragment's span */
	int64_t offset;         /* next offset yielded */
	int fd;                 /* file:// source, or -1 */
	struct gaz_fd_src fsrc;
	struct http_src *http;  /* http(s) source, or NULL */
	struct gaz_decoder *dec;
	struct gaz_status err;  /* sticky error */
};

/* file_open opens a file:// fragment under the client's file root. */
static int file_open(struct gaz_client *c, const char *url, int *fd, struct gaz_status *st)
{
	char path[PATH_MAX];
	struct stat sb;
	int rc;

	if (!c->file_root)
		return gaz_status_set(st, GAZ_EINVAL,
				      "cannot read %s: no file root is configured (--file-root)",
				      url);
	if ((rc = gaz__file_url_path(c->file_root, url, path, sizeof(path), st)))
		return rc;
	if ((*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return gaz_status_set(st, GAZ_ENOTFOUND,
					      "!OK fetching (404 Not Found, \"%s\")", url);
		return gaz_status_set(st, GAZ_EIO, "open of \"%s\" failed: %s", path,
				      strerror(errno));
	}
	if (fstat(*fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		close(*fd);
		*fd = -1;
		return gaz_status_set(st, GAZ_EIO, "fragment file \"%s\" is not a regular file",
				      path);
	}
	return 0;
}

/* frag_source opens the URL and makes the decoder over it. */
static int frag_source(struct gaz_client *c, const atomic_bool *stop, struct gaz__frag_reader *fr,
		       int codec, const char *url, struct gaz_status *st)
{
	int rc;

	if (!strncasecmp(url, "file://", 7)) {
		if ((rc = file_open(c, url, &fr->fd, st)))
			return rc;
		if (codec == PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION)
			codec = PROTOCOL__COMPRESSION_CODEC__GZIP; /* stored gzip bytes */
		fr->fsrc = (struct gaz_fd_src){.fd = fr->fd, .off = 0, .end = -1};
		return gaz_decoder_new(codec, gaz_fd_src_read, &fr->fsrc, &fr->dec, st);
	}
	if (strncasecmp(url, "http://", 7) && strncasecmp(url, "https://", 8))
		return gaz_status_set(st, GAZ_EINVAL, "unsupported fragment URL scheme (%s)", url);
	if ((rc = http_open(c, stop, url, codec, &fr->http, st)))
		return rc;
	if (codec == PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION)
		codec = fr->http->gzip_encoded ? PROTOCOL__COMPRESSION_CODEC__GZIP
					       : PROTOCOL__COMPRESSION_CODEC__NONE;
	return gaz_decoder_new(codec, http_read, fr->http, &fr->dec, st);
}

/* discard reads and drops content until fr->offset == target. */
static int discard(struct gaz__frag_reader *fr, int64_t target, struct gaz_status *st)
{
	uint8_t *scratch = malloc(DISCARD_BYTES);
	int rc = scratch ? 0 : gaz_status_set(st, GAZ_ENOMEM, "out of memory");

	while (!rc && fr->offset < target) {
		int64_t want = target - fr->offset;
		size_t n = 0;

		rc = gaz__frag_read(fr, scratch, want < DISCARD_BYTES ? (size_t)want : DISCARD_BYTES,
				    &n, st);
		if (rc == GAZ_EOF)
			rc = gaz_status_set(st, GAZ_EPROTO, "unexpected EOF");
	}
	free(scratch);
	return rc;
}

int gaz__frag_open(struct gaz_client *c, const struct gaz_fragment *f, int64_t offset,
		   const char *url, const atomic_bool *stop, struct gaz__frag_reader **out,
		   struct gaz_status *st)
{
	struct gaz__frag_reader *fr = calloc(1, sizeof(*fr));
	int rc;

	if (!fr)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	fr->fd = -1;
	fr->begin = fr->offset = f->begin;
	fr->end = f->end;
	if (offset < f->begin || offset > f->end)
		rc = gaz_status_set(st, GAZ_EINVAL, "offset %lld is outside fragment [%lld, %lld)",
				    (long long)offset, (long long)f->begin, (long long)f->end);
	else if (!(rc = frag_source(c, stop, fr, f->codec, url, st)))
		rc = discard(fr, offset, st);
	if (rc) {
		gaz__frag_close(fr);
		return rc;
	}
	*out = fr;
	return 0;
}

int gaz__frag_read(struct gaz__frag_reader *fr, void *buf, size_t cap, size_t *n,
		   struct gaz_status *st)
{
	int rc;

	*n = 0;
	if (fr->err.code)
		return gaz_status_set(st, fr->err.code, "%s", fr->err.msg);
	rc = gaz_decoder_read(fr->dec, buf, cap, n, &fr->err);
	if (rc == GAZ_EOF && fr->offset == fr->end)
		return GAZ_EOF;
	if (rc == GAZ_EOF)
		gaz_status_set(&fr->err, GAZ_EPROTO,
			       "unexpected EOF reading fragment [%lld, %lld) at offset %lld",
			       (long long)fr->begin, (long long)fr->end, (long long)fr->offset);
	else if (rc == 0 && fr->offset + (int64_t)*n > fr->end) {
		*n = (size_t)(fr->end - fr->offset);
		gaz_status_set(&fr->err, GAZ_EPROTO, "did not read EOF at expected Fragment.End");
	} else if (rc < 0 && !fr->err.code) {
		gaz_status_set(&fr->err, rc, "reading fragment failed");
	}
	fr->offset += (int64_t)*n;
	if (rc == 0 && *n > 0)
		return 0;
	return gaz_status_set(st, fr->err.code, "%s", fr->err.msg);
}

int64_t gaz__frag_offset(const struct gaz__frag_reader *fr)
{
	return fr->offset;
}

void gaz__frag_close(struct gaz__frag_reader *fr)
{
	if (!fr)
		return;
	gaz_decoder_free(fr->dec);
	http_free(fr->http);
	if (fr->fd >= 0)
		close(fr->fd);
	free(fr);
}
