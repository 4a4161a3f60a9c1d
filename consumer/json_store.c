/*
 * json_store.c - a consumer store kept as one JSON file per shard:
 * {"shard": FQN, "fence": N, "checkpoint": BASE64, "state": {...}}.
 *
 * Invariants:
 *   - The file at `path` is always a whole document: it is only ever
 *     replaced by rename(2) of a fully written and fsync'd temporary
 *     file, and the directory is fsync'd after, so a crash at any point
 *     leaves the previous commit or the new one, never a mix.
 *   - Every read-modify-write of the file (restore's fence bump, commit's
 *     fence check and replace) holds an exclusive flock on `lock_path`,
 *     so instances sharing the directory are serialised; the temporary
 *     file name is fixed because only the lock holder writes it (a crash
 *     leaves it behind; the next commit truncates it).
 *   - `committed` is a deep copy of the state in the last document this
 *     instance restored or wrote; `state` is the application's object,
 *     never replaced, only refilled from `committed`.
 *   - fence is 0 until restore_checkpoint, then the fence in the file as
 *     this instance left it.
 *
 * Only the local file system and jansson are called here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "gazette/store.h"

#define NAME_MAX_ESCAPED 240

struct json_store {
	struct gaz_store base; /* first: what callers hold */
	char *fqn;
	char *dir;
	char *path;            /* <dir>/<escaped fqn>.json */
	char *tmp_path;        /* path + ".tmp" */
	char *lock_path;       /* path + ".lock" */
	int lock_fd;
	json_t *state;         /* the application's object */
	json_t *committed;     /* deep copy of the committed state */
	int64_t fence;         /* installed by restore; 0 before */
};

static const struct gaz_store_ops json_ops;

/* A test's way to stop a commit between the temporary file's fsync and
 * its rename (tests/unit/consumer/test_json_store.c kills itself there). */
static void (*json_store_before_rename)(const char *tmp_path);

static struct json_store *js(struct gaz_store *s)
{
	return s && s->ops == &json_ops ? (struct json_store *)s : NULL;
}

/* escape writes fqn's file name into out (cap bytes): [A-Za-z0-9_.-] as
 * they are (a leading '.' escaped, so no name is "." or hidden), every
 * other byte %XX. Returns its length, or -1 when it does not fit. */
static int escape(const char *fqn, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)fqn; *p; p++) {
		bool keep = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			    *p == '_' || *p == '-' || (*p == '.' && p != (const unsigned char *)fqn);
		if (o + (keep ? 1 : 3) >= cap)
			return -1;
		if (keep) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = 0;
	return (int)o;
}

static char *join(const char *a, const char *b, const char *c)
{
	size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
	char *s = malloc(n);
	if (s)
		snprintf(s, n, "%s%s%s", a, b, c);
	return s;
}

static void free_store(struct json_store *s)
{
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	json_decref(s->state);
	json_decref(s->committed);
	free(s->fqn), free(s->dir), free(s->path), free(s->tmp_path), free(s->lock_path);
	free(s);
}

struct gaz_store *gaz_json_store_open(const char *dir, const char *shard_fqn, struct gaz_status *st)
{
	char name[NAME_MAX_ESCAPED + 1];
	struct json_store *s;

	if (!dir || !*dir || !shard_fqn || !*shard_fqn) {
		gaz_status_set(st, GAZ_EINVAL, "json store: a directory and a shard FQN are required");
		return NULL;
	}
	if (escape(shard_fqn, name, sizeof name) < 0) {
		gaz_status_set(st, GAZ_ERANGE, "json store for shard \"%s\": the escaped name exceeds %d bytes",
			       shard_fqn, NAME_MAX_ESCAPED);
		return NULL;
	}
	if (!(s = calloc(1, sizeof *s))) {
		gaz_status_set(st, GAZ_ENOMEM, "json store for shard \"%s\": out of memory", shard_fqn);
		return NULL;
	}
	s->base.ops = &json_ops;
	s->lock_fd = -1;
	s->fqn = strdup(shard_fqn);
	s->dir = strdup(dir);
	s->path = join(dir, "/", name);
	if (s->path) {
		char *p = s->path;
		s->path = join(p, ".json", "");
		free(p);
	}
	s->tmp_path = s->path ? join(s->path, ".tmp", "") : NULL;
	s->lock_path = s->path ? join(s->path, ".lock", "") : NULL;
	s->state = json_object();
	s->committed = json_object();
	if (!s->fqn || !s->dir || !s->path || !s->tmp_path || !s->lock_path || !s->state || !s->committed) {
		gaz_status_set(st, GAZ_ENOMEM, "json store for shard \"%s\": out of memory", shard_fqn);
		goto fail;
	}
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		gaz_status_set(st, GAZ_EIO, "json store for shard \"%s\": cannot create directory %s: %s", shard_fqn,
			       dir, strerror(errno));
		goto fail;
	}
	if ((s->lock_fd = open(s->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
		gaz_status_set(st, GAZ_EIO, "json store for shard \"%s\": cannot open %s: %s", shard_fqn,
			       s->lock_path, strerror(errno));
		goto fail;
	}
	return &s->base;
fail:
	free_store(s);
	return NULL;
}

json_t *gaz_json_store_state(struct gaz_store *gs)
{
	struct json_store *s = js(gs);
	return s ? s->state : NULL;
}

static int lock(struct json_store *s, const char *what, struct gaz_status *st)
{
	while (flock(s->lock_fd, LOCK_EX) != 0)
		if (errno != EINTR)
			return gaz_status_set(st, GAZ_EIO, "%s of shard \"%s\" failed: flock %s: %s", what, s->fqn,
					      s->lock_path, strerror(errno));
	return 0;
}

static void unlock(struct json_store *s)
{
	flock(s->lock_fd, LOCK_UN);
}

/* refill puts copies of the committed state's members into the
 * application's object (the object itself stays). */
static int refill(struct json_store *s)
{
	const char *k;
	json_t *v;

	json_object_clear(s->state);
	json_object_foreach (s->committed, k, v)
		if (json_object_set_new(s->state, k, json_deep_copy(v)) != 0)
			return GAZ_ENOMEM;
	return 0;
}

/* ---- the document ----------------------------------------------------- */

/* A document read back: fence, checkpoint bytes (malloc'd) and state
 * (a reference into doc). */
struct doc {
	json_t *doc;
	int64_t fence;
	uint8_t *cp;
	size_t cp_len;
	json_t *state;
};

static void doc_release(struct doc *d)
{
	json_decref(d->doc);
	free(d->cp);
	memset(d, 0, sizeof *d);
}

/* b64_decode: standard base64 with padding (what EVP_EncodeBlock writes). */
static int b64_decode(const char *b64, uint8_t **out, size_t *len)
{
	size_t n = strlen(b64);
	*out = NULL, *len = 0;
	if (n == 0)
		return 0;
	if (n % 4 || n > 0x7fffffff || !(*out = malloc(n / 4 * 3)))
		return n % 4 || n > 0x7fffffff ? GAZ_EINVAL : GAZ_ENOMEM;
	int got = EVP_DecodeBlock(*out, (const unsigned char *)b64, (int)n);
	if (got < 0) {
		free(*out);
		*out = NULL;
		return GAZ_EINVAL;
	}
	/* EVP_DecodeBlock counts the padding's zero bytes too. */
	*len = (size_t)got - (b64[n - 1] == '=') - (b64[n - 2] == '=');
	return 0;
}

/* read_doc loads the file into *d; an absent file leaves d->doc NULL. */
static int read_doc(struct json_store *s, const char *what, struct doc *d, struct gaz_status *st)
{
	json_error_t je;
	json_t *f, *c;
	int rc;

	memset(d, 0, sizeof *d);
	if (access(s->path, F_OK) != 0 && errno == ENOENT)
		return 0;
	if (!(d->doc = json_load_file(s->path, 0, &je)))
		return gaz_status_set(st, GAZ_EINVAL, "%s of shard \"%s\" failed: cannot read %s: %s (line %d)", what,
				      s->fqn, s->path, je.text, je.line);
	f = json_object_get(d->doc, "fence");
	c = json_object_get(d->doc, "checkpoint");
	d->state = json_object_get(d->doc, "state");
	if (!json_is_integer(f) || json_integer_value(f) < 1 || !json_is_string(c) || !json_is_object(d->state)) {
		doc_release(d);
		return gaz_status_set(st, GAZ_EINVAL,
				      "%s of shard \"%s\" failed: %s is not a store file (want a fence >= 1, a "
				      "checkpoint string and a state object)",
				      what, s->fqn, s->path);
	}
	d->fence = json_integer_value(f);
	if ((rc = b64_decode(json_string_value(c), &d->cp, &d->cp_len)) != 0) {
		doc_release(d);
		return gaz_status_set(st, rc, "%s of shard \"%s\" failed: %s: the checkpoint is not base64", what,
				      s->fqn, s->path);
	}
	return 0;
}

static int write_all(int fd, const char *b, size_t n)
{
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		b += w, n -= (size_t)w;
	}
	return 0;
}

/* encode_doc renders the document (malloc'd text, or NULL: no memory). */
static char *encode_doc(struct json_store *s, int64_t fence, const uint8_t *cp, size_t len, json_t *state)
{
	char *b64 = malloc((len + 2) / 3 * 4 + 1), *text = NULL;
	json_t *doc;

	if (!b64 || len > 0x7fffffff)
		goto done;
	EVP_EncodeBlock((unsigned char *)b64, cp, (int)len);
	doc = json_pack("{s:s, s:I, s:s, s:O}", "shard", s->fqn, "fence", (json_int_t)fence, "checkpoint", b64,
			"state", state);
	if (doc)
		text = json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(doc);
done:
	free(b64);
	return text;
}

/* write_doc replaces the file: temporary file written and fsync'd,
 * renamed over the file, the directory fsync'd. */
static int write_doc(struct json_store *s, const char *what, int64_t fence, const uint8_t *cp, size_t len,
		     json_t *state, struct gaz_status *st)
{
	char *text = encode_doc(s, fence, cp, len, state);
	const char *step = "write";
	int fd = -1, dfd = -1, rc = 0;

	if (!text)
		return gaz_status_set(st, GAZ_ENOMEM, "%s of shard \"%s\" failed: out of memory", what, s->fqn);
	fd = open(s->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write_all(fd, text, strlen(text)) != 0 || write_all(fd, "\n", 1) != 0 ||
	    (step = "fsync", fsync(fd)) != 0 || (step = "close", close(fd)) != 0) {
		rc = gaz_status_set(st, GAZ_EIO, "%s of shard \"%s\" failed: %s %s: %s", what, s->fqn, step,
				    s->tmp_path, strerror(errno));
		if (fd >= 0 && strcmp(step, "close") != 0)
			close(fd);
		unlink(s->tmp_path);
		goto done;
	}
	if (json_store_before_rename)
		json_store_before_rename(s->tmp_path);
	if (rename(s->tmp_path, s->path) != 0) {
		rc = gaz_status_set(st, GAZ_EIO, "%s of shard \"%s\" failed: rename %s to %s: %s", what, s->fqn,
				    s->tmp_path, s->path, strerror(errno));
		unlink(s->tmp_path);
		goto done;
	}
	if ((dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fsync(dfd) != 0)
		rc = gaz_status_set(st, GAZ_EIO,
				    "%s of shard \"%s\" failed: fsync of directory %s after the rename (the new "
				    "file may be in place; restore tells): %s",
				    what, s->fqn, s->dir, strerror(errno));
	if (dfd >= 0)
		close(dfd);
done:
	free(text);
	return rc;
}

/* ---- the operations --------------------------------------------------- */

static int json_restore(struct gaz_store *gs, uint8_t **cp, size_t *len, struct gaz_status *st)
{
	struct json_store *s = js(gs);
	struct doc d = {0};
	json_t *state, *copy, *none = NULL;
	int rc;

	*cp = NULL, *len = 0;
	if ((rc = lock(s, "restore", st)) != 0)
		return rc;
	if ((rc = read_doc(s, "restore", &d, st)) != 0)
		goto done;
	/* No file yet: the first restore of the shard, an empty state. */
	if (!(state = d.doc ? d.state : (none = json_object()))) {
		rc = gaz_status_set(st, GAZ_ENOMEM, "restore of shard \"%s\" failed: out of memory", s->fqn);
		goto done;
	}
	/* Fence off every earlier instance: the bumped fence is on disk
	 * before this returns. */
	int64_t fence = d.doc ? d.fence + 1 : 1;
	if ((rc = write_doc(s, "restore", fence, d.cp, d.cp_len, state, st)) != 0)
		goto done;
	if (!(copy = json_deep_copy(state))) {
		rc = gaz_status_set(st, GAZ_ENOMEM, "restore of shard \"%s\" failed: out of memory", s->fqn);
		goto done;
	}
	json_decref(s->committed);
	s->committed = copy;
	if (refill(s) != 0) {
		rc = gaz_status_set(st, GAZ_ENOMEM, "restore of shard \"%s\" failed: out of memory", s->fqn);
		goto done;
	}
	s->fence = fence;
	*cp = d.cp, *len = d.cp_len;
	d.cp = NULL;
done:
	json_decref(none);
	doc_release(&d);
	unlock(s);
	return rc;
}

static int json_begin(struct gaz_store *gs, struct gaz_status *st)
{
	(void)gs, (void)st;
	return 0; /* the transaction is the in-memory state since the last commit */
}

static int json_commit(struct gaz_store *gs, const uint8_t *cp, size_t len, struct gaz_status *st)
{
	struct json_store *s = js(gs);
	struct doc d = {0};
	json_t *copy = NULL;
	int rc;

	if (s->fence == 0)
		return gaz_status_set(st, GAZ_EINVAL, "commit of shard \"%s\" failed: no restore_checkpoint before it",
				      s->fqn);
	if ((rc = lock(s, "commit", st)) != 0)
		goto fail;
	if ((rc = read_doc(s, "commit", &d, st)) != 0)
		goto fail;
	if (!d.doc || d.fence != s->fence) {
		rc = gaz_status_set(st, GAZ_EFENCED,
				    "commit of shard \"%s\" failed: checkpoint fence was updated (ie, by a new "
				    "primary): fence %lld in %s, %lld restored",
				    s->fqn, (long long)(d.doc ? d.fence : 0), s->path, (long long)s->fence);
		goto fail;
	}
	if (!(copy = json_deep_copy(s->state))) {
		rc = gaz_status_set(st, GAZ_ENOMEM, "commit of shard \"%s\" failed: out of memory", s->fqn);
		goto fail;
	}
	if ((rc = write_doc(s, "commit", s->fence, len ? cp : (const uint8_t *)"", len, s->state, st)) != 0)
		goto fail;
	json_decref(s->committed);
	s->committed = copy;
	doc_release(&d);
	unlock(s);
	return 0;
fail:
	json_decref(copy);
	doc_release(&d);
	unlock(s);
	refill(s);
	return rc;
}

static void json_abort(struct gaz_store *gs)
{
	refill(js(gs));
}

static void json_close(struct gaz_store *gs)
{
	struct json_store *s = js(gs);
	if (s)
		free_store(s);
}

static const struct gaz_store_ops json_ops = {
	.restore_checkpoint = json_restore,
	.begin = json_begin,
	.commit = json_commit,
	.abort = json_abort,
	.close = json_close,
};
