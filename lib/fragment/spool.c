/*
 * spool.c - the open fragment of a journal replica: scratch file, commit,
 * rollback and roll (facts §6.1-§6.2). See spool.h for the state machine.
 *
 * File layout: content offset c (journal offset begin + c) lives at file
 * offset c. Writes use pwrite at (end - begin) + delta, so a failed or
 * rolled-back write is simply overwritten later and the file position is
 * never shared state. The file is created unlinked (O_TMPFILE, or mkstemp
 * then unlink) so a crashed broker leaves nothing behind, like Gazette's
 * spools under $TMPDIR. A scratch directory found missing when a file is
 * created (a tmp cleaner removed it) is made again, once, with a warning.
 * Every failure's text names the journal, the directory and the errno as
 * text and symbol.
 *
 * Must not call: the store, the index or anything that blocks on a lock.
 */
#include "fragment/spool.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int sha_reset(struct gaz_spool *s, struct gaz_status *st)
{
	if (EVP_DigestInit_ex(s->sha, gaz_sha1_md(), NULL) != 1 ||
	    EVP_MD_CTX_copy_ex(s->sha_commit, s->sha) != 1)
		return gaz_status_set(st, GAZ_EIO, "initialising SHA-1 of spool \"%s\" failed",
				      s->fragment.journal);
	return 0;
}

int gaz_spool_init(struct gaz_spool *s, const char *journal, const char *dir,
		   struct gaz_status *st)
{
	const char *tmp = getenv("TMPDIR");

	memset(s, 0, sizeof(*s));
	if (!dir)
		dir = tmp && *tmp ? tmp : "/tmp";
	s->fragment.codec = PROTOCOL__COMPRESSION_CODEC__NONE;
	s->dir = strdup(dir);
	s->sha = EVP_MD_CTX_new();
	s->sha_commit = EVP_MD_CTX_new();
	s->sha_tmp = EVP_MD_CTX_new();
	if (!s->dir || !s->sha || !s->sha_commit || !s->sha_tmp ||
	    gaz_fragment_set_str(&s->fragment.journal, journal, st)) {
		gaz_spool_release(s);
		return gaz_status_set(st, GAZ_ENOMEM, "allocating spool of \"%s\" failed", journal);
	}
	if (sha_reset(s, st)) {
		gaz_spool_release(s);
		return GAZ_EIO;
	}
	return 0;
}

void gaz_spool_release(struct gaz_spool *s)
{
	gaz_fragment_file_unref(s->file);
	gaz_fragment_release(&s->fragment);
	EVP_MD_CTX_free(s->sha);
	EVP_MD_CTX_free(s->sha_commit);
	EVP_MD_CTX_free(s->sha_tmp);
	free(s->dir);
	memset(s, 0, sizeof(*s));
}

/* Creates `dir` and its missing parents, mode 0700 (a spool directory
 * holds journal content: private to the broker's user). Sets *created to
 * whether this call made `dir` itself (false when another thread's call
 * made it first). Returns 0 or an errno value. */
static int mkdir_parents(const char *dir, bool *created)
{
	char path[4096];
	size_t n = strlen(dir);

	*created = false;
	if (n == 0 || n >= sizeof(path))
		return n ? ENAMETOOLONG : ENOENT;
	memcpy(path, dir, n + 1);
	for (char *p = path + 1;; p++) {
		char c = *p;
		if (c != '/' && c != 0)
			continue;
		*p = 0;
		if (mkdir(path, 0700) == 0)
			*created = (c == 0);
		else if (errno != EEXIST)
			return errno;
		if (c == 0)
			return 0;
		*p = c;
	}
}

/* One try at an unlinked file in `dir`. Returns 0 or an errno value. */
static int tmpfile_once(const char *dir, int *fd_out)
{
	char path[4096];
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		/* File systems without O_TMPFILE: create, then unlink at once. */
		if (snprintf(path, sizeof(path), "%s/gazette-spool-XXXXXX", dir) >= (int)sizeof(path))
			return ENAMETOOLONG;
		fd = mkostemp(path, O_CLOEXEC);
		if (fd >= 0)
			unlink(path);
	}
	if (fd < 0)
		return errno;
	*fd_out = fd;
	return 0;
}

int gaz_spool_tmpfile(const char *dir, const char *journal, const char *what, int *fd,
		      struct gaz_status *st)
{
	int err = tmpfile_once(dir, fd), mk;
	bool created;

	if (err != ENOENT)
		goto out;
	/* The directory went away under us (a tmp cleaner, an operator):
	 * make it again once. Files already open live on unlinked. Two
	 * threads may find it missing at once (a new spool and a persister's
	 * compressed copy); the one that makes it warns. */
	if ((mk = mkdir_parents(dir, &created)) != 0)
		return gaz_status_set(st, GAZ_EIO,
				      "creating %s of \"%s\" in \"%s\" failed: %s (%s); re-creating the "
				      "directory failed: %s (%s)", what, journal, dir, strerror(err),
				      gaz_errno_name(err), strerror(mk), gaz_errno_name(mk));
	if (created)
		gaz_warn("spool directory was missing; re-created it", "dir=%s journal=%s", dir,
			 journal);
	err = tmpfile_once(dir, fd);
out:
	if (err)
		return gaz_status_set(st, GAZ_EIO, "creating %s of \"%s\" in \"%s\" failed: %s (%s)",
				      what, journal, dir, strerror(err), gaz_errno_name(err));
	return 0;
}

static int pwrite_all(int fd, const uint8_t *p, size_t len, int64_t off)
{
	while (len > 0) {
		ssize_t w = pwrite(fd, p, len, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : ENOSPC;
		p += w;
		len -= (size_t)w;
		off += w;
	}
	return 0;
}

/* Rebuilds the running SHA-1 from the committed bytes in the file, after a
 * context copy failed (allocation) and left it unknown. */
static int sha_recover(struct gaz_spool *s, struct gaz_status *st)
{
	uint8_t buf[64 * 1024];
	int64_t off = s->fragment.begin;
	size_t n;
	int rc;

	if (!s->sha_broken)
		return 0;
	if (EVP_DigestInit_ex(s->sha, gaz_sha1_md(), NULL) != 1)
		return gaz_status_set(st, GAZ_EIO, "resetting SHA-1 of spool \"%s\" failed",
				      s->fragment.journal);
	while ((rc = gaz_spool_pread(s, off, buf, sizeof(buf), &n, st)) == 0) {
		if (EVP_DigestUpdate(s->sha, buf, n) != 1)
			return gaz_status_set(st, GAZ_EIO, "SHA-1 of spool \"%s\" failed",
					      s->fragment.journal);
		off += (int64_t)n;
	}
	if (rc != GAZ_EOF)
		return rc;
	if (EVP_MD_CTX_copy_ex(s->sha_commit, s->sha) != 1)
		return gaz_status_set(st, GAZ_ENOMEM, "saving SHA-1 of spool \"%s\" failed",
				      s->fragment.journal);
	s->sha_broken = false;
	return 0;
}

int gaz_spool_append(struct gaz_spool *s, const void *data, size_t len, struct gaz_status *st)
{
	int64_t at = s->fragment.end - s->fragment.begin + s->delta;
	int fd, rc, err;

	if (len == 0)
		return 0;
	if ((rc = sha_recover(s, st)))
		return rc;
	if (!s->file) {
		if ((rc = gaz_spool_tmpfile(s->dir, s->fragment.journal, "spool file", &fd, st)) ||
		    (rc = gaz_fragment_file_new(fd, &s->file, st)))
			return rc;
	}
	err = pwrite_all(s->file->fd, data, len, at);
	if (err)
		return gaz_status_set(st, GAZ_EIO,
				      "writing spool of \"%s\" in \"%s\" at offset %lld failed: %s (%s)",
				      s->fragment.journal, s->dir, (long long)(s->fragment.begin + at),
				      strerror(err), gaz_errno_name(err));
	if (EVP_DigestUpdate(s->sha, data, len) != 1) {
		/* The digest may be half-updated: drop the uncommitted tail and
		 * rebuild the digest of the commit on next use. */
		s->delta = 0;
		s->sha_broken = true;
		return gaz_status_set(st, GAZ_EIO, "SHA-1 of spool \"%s\" failed; uncommitted content dropped",
				      s->fragment.journal);
	}
	s->delta += (int64_t)len;
	return 0;
}

/* SHA-1 of [begin, end + delta) without disturbing the running context. */
static int sum_running(struct gaz_spool *s, uint8_t sum[GAZ_SHA1_LEN], struct gaz_status *st)
{
	unsigned int n = 0;

	if (EVP_MD_CTX_copy_ex(s->sha_tmp, s->sha) != 1 ||
	    EVP_DigestFinal_ex(s->sha_tmp, sum, &n) != 1 || n != GAZ_SHA1_LEN)
		return gaz_status_set(st, GAZ_EIO, "finalising SHA-1 of spool \"%s\" failed",
				      s->fragment.journal);
	return 0;
}

int gaz_spool_next(struct gaz_spool *s, struct gaz_fragment *next, struct gaz_status *st)
{
	int rc = sha_recover(s, st);

	if (rc || (rc = gaz_fragment_copy(next, &s->fragment, st)) || s->delta == 0)
		return rc;
	next->end += s->delta;
	if ((rc = sum_running(s, next->sum, st)))
		gaz_fragment_release(next);
	return rc;
}

int gaz_spool_commit(struct gaz_spool *s, struct gaz_status *st)
{
	uint8_t sum[GAZ_SHA1_LEN];
	int rc;

	if (s->delta == 0)
		return 0;
	if ((rc = sha_recover(s, st)) || (rc = sum_running(s, sum, st)))
		return rc;
	if (EVP_MD_CTX_copy_ex(s->sha_commit, s->sha) != 1)
		return gaz_status_set(st, GAZ_EIO, "saving SHA-1 of spool \"%s\" failed",
				      s->fragment.journal);
	memcpy(s->fragment.sum, sum, GAZ_SHA1_LEN);
	s->fragment.end += s->delta;
	s->delta = 0;
	if (!s->first_append_ns)
		s->first_append_ns = gaz_wall_ns();
	return 0;
}

void gaz_spool_rollback(struct gaz_spool *s)
{
	if (s->delta == 0)
		return;
	s->delta = 0;
	/* A copy fails only on allocation; then the next use rehashes the
	 * committed bytes rather than ever keeping a wrong running sum. */
	if (EVP_MD_CTX_copy_ex(s->sha, s->sha_commit) != 1)
		s->sha_broken = true;
}

/* Hands the completed fragment and file to `done`; the spool keeps none. */
static int hand_over(struct gaz_spool *s, struct gaz_spool_done *done, struct gaz_status *st)
{
	int64_t len = s->fragment.end - s->fragment.begin;
	int rc = gaz_fragment_copy(&done->fragment, &s->fragment, st);

	if (rc)
		return rc;
	/* Drop uncommitted bytes so the file is exactly the fragment. */
	if (ftruncate(s->file->fd, len) != 0)
		gaz_warn("truncating completed spool failed", "journal=%s dir=%s end=%lld err=%s (%s)",
			 s->fragment.journal, s->dir, (long long)s->fragment.end, strerror(errno),
			 gaz_errno_name(errno));
	done->file = s->file;
	done->first_append_ns = s->first_append_ns;
	s->file = NULL;
	return 0;
}

int gaz_spool_roll(struct gaz_spool *s, int64_t new_offset, int codec,
		   struct gaz_spool_done *done, struct gaz_status *st)
{
	int rc;

	memset(done, 0, sizeof(*done));
	if (new_offset < 0 || !gaz_codec_valid(codec))
		return gaz_status_set(st, GAZ_EINVAL, "rolling spool of \"%s\" to offset %lld codec %d: invalid",
				      s->fragment.journal, (long long)new_offset, codec);
	if (s->fragment.end > s->fragment.begin && s->file && (rc = hand_over(s, done, st)))
		return rc;
	gaz_fragment_file_unref(s->file);
	s->file = NULL;
	s->fragment.begin = s->fragment.end = new_offset;
	s->fragment.codec = codec;
	memset(s->fragment.sum, 0, GAZ_SHA1_LEN);
	s->delta = 0;
	s->first_append_ns = 0;
	s->sha_broken = false;
	return sha_reset(s, st);
}

void gaz_spool_done_release(struct gaz_spool_done *done)
{
	gaz_fragment_release(&done->fragment);
	gaz_fragment_file_unref(done->file);
	memset(done, 0, sizeof(*done));
}

int gaz_spool_pread(const struct gaz_spool *s, int64_t off, void *buf, size_t len, size_t *n,
		    struct gaz_status *st)
{
	int64_t left = s->fragment.end - off;
	ssize_t r;

	*n = 0;
	if (off < s->fragment.begin || off > s->fragment.end)
		return gaz_status_set(st, GAZ_EINVAL, "offset %lld is outside spool \"%s\" [%lld, %lld]",
				      (long long)off, s->fragment.journal,
				      (long long)s->fragment.begin, (long long)s->fragment.end);
	if (left == 0 || len == 0)
		return GAZ_EOF;
	if ((int64_t)len > left)
		len = (size_t)left;
	do
		r = pread(s->file->fd, buf, len, off - s->fragment.begin);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return gaz_status_set(st, GAZ_EIO, "reading spool \"%s\" in \"%s\" at %lld failed: %s (%s)",
				      s->fragment.journal, s->dir, (long long)off, strerror(errno),
				      gaz_errno_name(errno));
	if (r == 0)
		return gaz_status_set(st, GAZ_EIO, "reading spool \"%s\" in \"%s\" at %lld failed: the file "
				      "ends before the committed offset %lld", s->fragment.journal, s->dir,
				      (long long)off, (long long)s->fragment.end);
	*n = (size_t)r;
	return 0;
}

struct gaz_fragment_file *gaz_spool_file(const struct gaz_spool *s)
{
	return s->file;
}
