/*
 * file.c - the file:// fragment store: objects are files under
 * <file root><url path>, keys are paths below it (facts §5.6).
 *
 *   base   = <file_root> + <url path>            ("/srv/gz" + "/frag/" )
 *   object = base + key                           ("/srv/gz/frag/a/j/<name>")
 *
 * Uploads write "<dir>/.partial-<name>.XXXXXX" then rename(2), so a reader
 * or lister never sees a half-written fragment under its real name; those
 * temp files are hidden from listings. The base directory must exist for
 * puts: a missing base is how an unmounted or mistyped store shows up, and
 * it is classed with authorization errors (GAZ_EPERM) as Gazette does.
 *
 * Keys are checked to be clean relative paths (no "." or ".." segments, no
 * empty segments, no leading '/'), so neither a journal name nor a
 * find/replace rewrite can reach outside the base directory.
 *
 * Stateless after open; every operation is safe to run concurrently.
 */
#include "store/store.h"

#include "fragment/codec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct file_store {
	char *base; /* ends in '/' */
};

static const char *base_of(const struct gaz_store *s)
{
	return ((const struct file_store *)s->impl)->base;
}

static int errno_code(int err)
{
	return err == EACCES || err == EPERM || err == EROFS ? GAZ_EPERM : GAZ_EIO;
}

/* A clean relative path: segments non-empty and not "." or "..". A
 * listing prefix ends in '/' and may be empty (the store root). */
static bool key_ok(const char *key, bool dir_prefix)
{
	size_t len = strlen(key);
	const char *p = key, *end;

	if (len == 0)
		return dir_prefix;
	if (dir_prefix && key[--len] != '/')
		return false;
	if (len == 0)
		return false;
	end = key + len;
	while (p <= end) {
		const char *q = memchr(p, '/', (size_t)(end - p));
		size_t n;

		q = q ? q : end;
		n = (size_t)(q - p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p = q + 1;
	}
	return true;
}

static int object_path(const struct gaz_store *s, const char *key, char *out, size_t cap,
		       struct gaz_status *st)
{
	int n;

	if (!key_ok(key, false))
		return gaz_status_set(st, GAZ_EINVAL, "invalid store key \"%s\"", key);
	n = snprintf(out, cap, "%s%s", base_of(s), key);
	if (n < 0 || (size_t)n >= cap)
		return gaz_status_set(st, GAZ_EINVAL, "store path of \"%s\" too long", key);
	return 0;
}

/* ---------------------------------------------------------------- list */

struct entry {
	char *path;
	int64_t size;
	int64_t mod_time;
};

struct walk {
	const char *prefix; /* listing prefix, to spot the store-level .test/ */
	struct entry *v;
	size_t len, cap;
};

static int walk_add(struct walk *w, const char *rel, const struct stat *sb, struct gaz_status *st)
{
	struct entry *v;

	if (w->len == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		if (!(v = realloc(w->v, cap * sizeof(*v))))
			return gaz_status_set(st, GAZ_ENOMEM, "listing: out of memory");
		w->v = v;
		w->cap = cap;
	}
	if (!(w->v[w->len].path = strdup(rel)))
		return gaz_status_set(st, GAZ_ENOMEM, "listing: out of memory");
	w->v[w->len].size = (int64_t)sb->st_size;
	w->v[w->len].mod_time = (int64_t)sb->st_mtim.tv_sec;
	w->len++;
	return 0;
}

static int walk_dir(struct walk *w, int dfd, char *rel, size_t rel_len, struct gaz_status *st);

/* Handles one directory entry `name` found in dfd at relative path rel. */
static int walk_entry(struct walk *w, int dfd, const char *name, char *rel, size_t rel_len,
		      struct gaz_status *st)
{
	struct stat sb;
	size_t n = strlen(name);
	int sub, rc;

	if (rel_len + n + 2 > GAZ_STORE_KEY_MAX)
		return gaz_status_set(st, GAZ_EIO, "listing: path under \"%s\" too long", rel);
	memcpy(rel + rel_len, name, n + 1);
	/* Follow symlinks to files, never into directories (no loops). */
	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
	    (S_ISLNK(sb.st_mode) && (fstatat(dfd, name, &sb, 0) != 0 || !S_ISREG(sb.st_mode))))
		return 0; /* vanished or dangling: not an object */
	if (S_ISREG(sb.st_mode))
		return strncmp(name, ".partial-", 9) ? walk_add(w, rel, &sb, st) : 0;
	if (!S_ISDIR(sb.st_mode) || (!*w->prefix && rel_len == 0 && !strcmp(name, ".test")))
		return 0;
	sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return errno == ENOENT ? 0 : gaz_status_set(st, errno_code(errno),
							    "listing \"%s\" failed: %s", rel,
							    strerror(errno));
	rel[rel_len + n] = '/';
	rel[rel_len + n + 1] = 0;
	rc = walk_dir(w, sub, rel, rel_len + n + 1, st);
	rel[rel_len] = 0;
	return rc;
}

/* Walks directory dfd (consumed) whose relative path is rel[0:rel_len). */
static int walk_dir(struct walk *w, int dfd, char *rel, size_t rel_len, struct gaz_status *st)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		close(dfd);
		return gaz_status_set(st, GAZ_EIO, "listing: fdopendir failed: %s", strerror(errno));
	}
	while (rc == 0 && (errno = 0, de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		rc = walk_entry(w, dirfd(d), de->d_name, rel, rel_len, st);
	}
	if (rc == 0 && errno)
		rc = gaz_status_set(st, GAZ_EIO, "listing: readdir failed: %s", strerror(errno));
	closedir(d);
	return rc;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->path, ((const struct entry *)b)->path);
}

static void walk_free(struct walk *w)
{
	for (size_t i = 0; i < w->len; i++)
		free(w->v[i].path);
	free(w->v);
}

static int fs_list(struct gaz_store *s, const char *prefix, gaz_store_list_fn cb, void *arg,
		   struct gaz_status *st)
{
	struct walk w = {.prefix = prefix};
	char dir[GAZ_STORE_KEY_MAX + 512], rel[GAZ_STORE_KEY_MAX];
	int fd, rc = 0;

	if (!key_ok(prefix, true))
		return gaz_status_set(st, GAZ_EINVAL, "invalid list prefix \"%s\"", prefix);
	if (snprintf(dir, sizeof(dir), "%s%s", base_of(s), prefix) >= (int)sizeof(dir))
		return gaz_status_set(st, GAZ_EINVAL, "list prefix \"%s\" too long", prefix);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return 0; /* nothing stored under it yet */
	if (fd < 0)
		return gaz_status_set(st, errno_code(errno), "listing \"%s\" failed: %s", dir,
				      strerror(errno));
	rel[0] = 0;
	rc = walk_dir(&w, fd, rel, 0, st);
	if (rc == 0 && w.len > 1)
		qsort(w.v, w.len, sizeof(w.v[0]), entry_cmp);
	for (size_t i = 0; rc == 0 && i < w.len; i++) {
		struct gaz_store_obj obj = {w.v[i].path, w.v[i].size, w.v[i].mod_time};
		rc = cb(arg, &obj, st);
	}
	walk_free(&w);
	return rc;
}

/* ---------------------------------------------------------- exists/get */

static int fs_exists(struct gaz_store *s, const char *key, bool *exists, struct gaz_status *st)
{
	char path[GAZ_STORE_KEY_MAX + 512];
	struct stat sb;
	int rc = object_path(s, key, path, sizeof(path), st);

	if (rc)
		return rc;
	if (stat(path, &sb) == 0) {
		*exists = true;
		return 0;
	}
	if (errno == ENOENT || errno == ENOTDIR)
		return 0;
	return gaz_status_set(st, errno_code(errno), "stat \"%s\" failed: %s", path, strerror(errno));
}

struct file_reader {
	struct gaz_store_reader base; /* first: the public view */
	struct gaz_fd_src src;
};

static int file_reader_read(struct gaz_store_reader *r, void *buf, size_t cap, size_t *n,
			    struct gaz_status *st)
{
	return gaz_fd_src_read(&((struct file_reader *)r)->src, buf, cap, n, st);
}

static void file_reader_close(struct gaz_store_reader *r)
{
	close(r->fd);
	free(r);
}

static int fs_get(struct gaz_store *s, const char *key, int64_t off,
		  struct gaz_store_reader **out, struct gaz_status *st)
{
	char path[GAZ_STORE_KEY_MAX + 512];
	struct file_reader *r;
	struct stat sb;
	int fd, rc = object_path(s, key, path, sizeof(path), st);

	if (rc)
		return rc;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return gaz_status_set(st, errno == ENOENT || errno == ENOTDIR ? GAZ_ENOTFOUND
									      : errno_code(errno),
				      "opening \"%s\" failed: %s", path, strerror(errno));
	if (fstat(fd, &sb) != 0)
		rc = gaz_status_set(st, GAZ_EIO, "stat \"%s\" failed: %s", path, strerror(errno));
	else if (!S_ISREG(sb.st_mode))
		rc = gaz_status_set(st, GAZ_ENOTFOUND, "\"%s\" is not a file", path);
	else if (off > sb.st_size)
		rc = gaz_status_set(st, GAZ_EINVAL, "offset %lld is beyond \"%s\" (%lld bytes)",
				    (long long)off, path, (long long)sb.st_size);
	if (rc) {
		close(fd);
		return rc;
	}
	if (!(r = calloc(1, sizeof(*r)))) {
		close(fd);
		return gaz_status_set(st, GAZ_ENOMEM, "opening \"%s\": out of memory", path);
	}
	r->base = (struct gaz_store_reader){file_reader_read, file_reader_close,
					    (int64_t)sb.st_size - off, "", fd};
	r->src = (struct gaz_fd_src){fd, off, (int64_t)sb.st_size};
	*out = &r->base;
	return 0;
}

/* ----------------------------------------------------------------- put */

/* Creates the directories of `path` below the base, mode 0750. */
static int mkdirs(const struct gaz_store *s, char *path, struct gaz_status *st)
{
	size_t base_len = strlen(base_of(s));
	char *slash = path + base_len;

	while ((slash = strchr(slash, '/')) != NULL) {
		*slash = 0;
		int rc = mkdir(path, 0750);
		int err = errno;
		*slash = '/';
		if (rc != 0 && err != EEXIST)
			return gaz_status_set(st, errno_code(err), "creating directory for \"%s\" failed: %s",
					      path, strerror(err));
		slash++;
	}
	return 0;
}

/* Copies fd[0, len) to out_fd. */
static int copy_range(int fd, int64_t len, int out_fd, struct gaz_status *st)
{
	struct gaz_fd_src src = {fd, 0, len};
	struct gaz_fd_sink sink = {out_fd, 0};
	size_t cap = 256 * 1024, n;
	uint8_t *buf = malloc(cap);
	int rc;

	if (!buf)
		return gaz_status_set(st, GAZ_ENOMEM, "put: out of memory");
	while ((rc = gaz_fd_src_read(&src, buf, cap, &n, st)) == 0 &&
	       (rc = gaz_fd_sink_write(&sink, buf, n, st)) == 0)
		;
	free(buf);
	if (rc == GAZ_EOF && sink.written != len)
		return gaz_status_set(st, GAZ_EIO, "put: source holds %lld of %lld bytes",
				      (long long)sink.written, (long long)len);
	return rc == GAZ_EOF ? 0 : rc;
}

static int check_base(const struct gaz_store *s, struct gaz_status *st)
{
	struct stat sb;

	if (stat(base_of(s), &sb) == 0 && S_ISDIR(sb.st_mode))
		return 0;
	if (errno == EACCES || errno == EPERM)
		return gaz_status_set(st, GAZ_EPERM, "fragment store base directory \"%s\": %s",
				      base_of(s), strerror(errno));
	return gaz_status_set(st, GAZ_EPERM,
			      "fragment store base directory \"%s\" does not exist (check "
			      "--broker.file-root and the store URL)", base_of(s));
}

/* Sets st to "<what> \"<path>\" failed: <strerror> (<ENAME>)" for errno
 * value err, classed by errno_code. */
static int put_error(struct gaz_status *st, int err, const char *what, const char *path)
{
	return gaz_status_set(st, errno_code(err), "%s \"%s\" failed: %s (%s)", what, path,
			      strerror(err), gaz_errno_name(err));
}

/* fsyncs the directory holding `path` (name = its base name) so the
 * rename survives a crash: once put returns, the spool may be dropped. */
static int sync_dir(const char *path, const char *name, struct gaz_status *st)
{
	char dir[GAZ_STORE_KEY_MAX + 512];
	int fd, rc = 0;

	snprintf(dir, sizeof(dir), "%.*s", (int)(name - path), path);
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fsync(fd) != 0)
		rc = put_error(st, errno, "syncing directory", dir);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Writes fd[0, len) to the new file `tmp` and makes it durable. A failed
 * fsync (EIO) is final for this file: the kernel may have dropped the
 * dirty pages it could not write and a second fsync would report
 * success for lost data, so the caller discards the file and a retry
 * writes everything again from the spool. */
static int put_tmp(int out, const char *tmp, int fd, int64_t len, struct gaz_status *st)
{
	int rc = copy_range(fd, len, out, st);

	if (rc)
		gaz_status_prefix(st, "writing \"%s\": ", tmp);
	if (rc == 0 && fsync(out) != 0)
		rc = put_error(st, errno, "fsync", tmp);
	if (close(out) != 0 && rc == 0)
		rc = put_error(st, errno, "close", tmp);
	return rc;
}

static int fs_put(struct gaz_store *s, const char *key, int fd, int64_t len,
		  const char *content_encoding, struct gaz_status *st)
{
	char path[GAZ_STORE_KEY_MAX + 512], tmp[GAZ_STORE_KEY_MAX + 600];
	const char *name;
	int out, rc;

	(void)content_encoding; /* files carry no metadata; Gazette drops it too */
	if ((rc = object_path(s, key, path, sizeof(path), st)) || (rc = check_base(s, st)) ||
	    (rc = mkdirs(s, path, st)))
		return rc;
	name = strrchr(path, '/') + 1;
	snprintf(tmp, sizeof(tmp), "%.*s.partial-%s.XXXXXX", (int)(name - path), path, name);
	if ((out = mkostemp(tmp, O_CLOEXEC)) < 0)
		return put_error(st, errno, "creating", tmp);
	rc = put_tmp(out, tmp, fd, len, st);
	if (rc == 0 && rename(tmp, path) != 0)
		rc = put_error(st, errno, "renaming to", path);
	if (rc) {
		unlink(tmp);
		return rc;
	}
	return sync_dir(path, name, st);
}

/* --------------------------------------------------------- remove/sign */

static int fs_remove(struct gaz_store *s, const char *key, struct gaz_status *st)
{
	char path[GAZ_STORE_KEY_MAX + 512];
	int rc = object_path(s, key, path, sizeof(path), st);

	if (rc)
		return rc;
	if (unlink(path) == 0)
		return 0;
	return gaz_status_set(st, errno == ENOENT ? GAZ_ENOTFOUND : errno_code(errno),
			      "removing \"%s\" failed: %s", path, strerror(errno));
}

static int fs_sign_get(struct gaz_store *s, const char *key, int64_t ttl_s, char **url,
		       struct gaz_status *st)
{
	(void)ttl_s; /* unsigned: the reader resolves it under its own file root */
	if (!key_ok(key, false))
		return gaz_status_set(st, GAZ_EINVAL, "invalid store key \"%s\"", key);
	if (asprintf(url, "file://%s%s", s->url.path, key) < 0) {
		*url = NULL;
		return gaz_status_set(st, GAZ_ENOMEM, "signing: out of memory");
	}
	return 0;
}

static void fs_destroy(struct gaz_store *s)
{
	struct file_store *fs = s->impl;

	if (fs)
		free(fs->base);
	free(fs);
	s->impl = NULL;
}

static const struct gaz_store_ops file_ops = {
	.provider = "fs",
	.list = fs_list,
	.exists = fs_exists,
	.get = fs_get,
	.put = fs_put,
	.remove = fs_remove,
	.sign_get = fs_sign_get,
	.destroy = fs_destroy,
};

int gaz__store_file_open(struct gaz_store *s, const char *file_root, struct gaz_status *st)
{
	struct file_store *fs;
	size_t rlen;

	if (!file_root || !*file_root)
		return gaz_status_set(st, GAZ_EINVAL, "file:// store \"%s\" needs a file root",
				      s->url.raw);
	if (!key_ok(s->url.path + 1, true))
		return gaz_status_set(st, GAZ_EINVAL, "file:// store path \"%s\" is not clean",
				      s->url.path);
	rlen = strlen(file_root);
	while (rlen > 1 && file_root[rlen - 1] == '/')
		rlen--; /* the URL path supplies the separator */
	if (!(fs = calloc(1, sizeof(*fs))) ||
	    asprintf(&fs->base, "%.*s%s", (int)rlen, file_root, s->url.path) < 0) {
		free(fs);
		return gaz_status_set(st, GAZ_ENOMEM, "opening file store: out of memory");
	}
	if (rlen == 1 && file_root[0] == '/')
		memmove(fs->base, fs->base + 1, strlen(fs->base)); /* "/" + "/x/" */
	s->impl = fs;
	s->ops = &file_ops;
	return 0;
}
