/*
 * spool.h - the spool: the open fragment of one journal replica on a broker
 * (Gazette broker/fragment Spool, facts §6.1-§6.2).
 *
 * A spool is an unlinked scratch file (it vanishes when the last fd closes)
 * holding the committed bytes [begin, end) of `fragment` at file offsets
 * [0, end - begin), followed by `delta` uncommitted bytes. A running SHA-1
 * covers [begin, end + delta); a copy taken at each commit makes rollback a
 * context copy. Registers and the compressed shadow file belong to the
 * broker, not here.
 *
 *   append*  -> delta grows, SHA-1 runs on
 *   commit   -> end += delta, sum = SHA-1 [begin, end), delta = 0
 *   rollback -> delta = 0, SHA-1 back to the commit
 *   roll     -> completed file handed out (if it had content); empty
 *               fragment {begin = end = new offset, codec} with no file
 *
 * Invariants: the committed fragment's backing_store, mod_time and
 * path_postfix are always empty; an empty fragment has the zero sum; the
 * file exists only once something was appended since the last roll.
 *
 * Thread safety: one owner at a time (the RPC holding the replica's spool
 * token). Readers may pread the shared file (gaz_spool_file) concurrently
 * for committed offsets: those bytes are never rewritten.
 */
#ifndef GAZ_FRAGMENT_SPOOL_H
#define GAZ_FRAGMENT_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "common/err.h"
#include "fragment/fragment.h"

struct gaz_spool {
	struct gaz_fragment fragment;   /* last commit (owned strings) */
	int64_t delta;                  /* uncommitted bytes after fragment.end */
	int64_t first_append_ns;        /* wall ns of the first commit; 0 = none */
	struct gaz_fragment_file *file; /* one reference, or NULL */
	char *dir;                      /* owned scratch directory */
	EVP_MD_CTX *sha;                /* over [begin, end + delta) */
	EVP_MD_CTX *sha_commit;         /* over [begin, end): the rollback point */
	EVP_MD_CTX *sha_tmp;            /* scratch for finalizing copies */
	bool sha_broken;                /* a context copy failed: `sha` must be
					 * rebuilt from the file before use */
};

/* A fragment completed by a roll, for the persister. */
struct gaz_spool_done {
	struct gaz_fragment fragment;   /* owned */
	struct gaz_fragment_file *file; /* one reference; the file holds exactly
					 * [begin, end) at offsets [0, end-begin) */
	int64_t first_append_ns;        /* wall ns of its first commit */
};

/* gaz_spool_init makes the brand-new spool of journal `journal` (copied):
 * {begin 0, end 0, codec NONE, zero sum}. Scratch files go in `dir`
 * (copied; NULL = $TMPDIR, else /tmp, as Go's os.TempDir), which is made
 * again if it goes missing (gaz_spool_tmpfile). Returns 0,
 * GAZ_ENOMEM. Release with gaz_spool_release. */
int gaz_spool_init(struct gaz_spool *s, const char *journal, const char *dir,
		   struct gaz_status *st);

/* gaz_spool_tmpfile opens an unlinked read-write file in `dir` (O_TMPFILE,
 * or mkostemp then unlink where the file system lacks it) into *fd, owned
 * by the caller (close it). If `dir` is missing (ENOENT) it is created
 * again, with its missing parents, mode 0700, once, with a warning naming
 * it, and the open is tried once more. `journal` and `what` ("spool
 * file") only name the file in messages. Returns 0 or GAZ_EIO, the text
 * naming what, the journal, dir and the errno as text and symbol:
 * `creating spool file of "a/b" in "/tmp/x" failed: No space left on
 * device (ENOSPC)`. Thread-safe. */
int gaz_spool_tmpfile(const char *dir, const char *journal, const char *what, int *fd,
		      struct gaz_status *st);

/* gaz_spool_release drops the file reference and frees everything. */
void gaz_spool_release(struct gaz_spool *s);

/* gaz_spool_append writes `len` bytes at content offset (end-begin)+delta,
 * creating the scratch file on first use, then adds them to the running
 * SHA-1 and to delta. On failure nothing changed, so the caller may retry
 * the same append (Gazette retries local FS errors every 5 s). Returns 0,
 * GAZ_EIO (file create/write; the text names the journal, the directory
 * and the errno as text and symbol), GAZ_ENOMEM. */
int gaz_spool_append(struct gaz_spool *s, const void *data, size_t len, struct gaz_status *st);

/* gaz_spool_next fills `next` (holding no owned strings) with the fragment
 * a commit would produce: end += delta, sum = SHA-1 over [begin, end+delta)
 * (the zero sum if that is empty). The spool is unchanged. This is what
 * replicas compare proposals against (facts §6.2 step 3). Returns 0,
 * GAZ_ENOMEM, GAZ_EIO (digest failure). */
int gaz_spool_next(struct gaz_spool *s, struct gaz_fragment *next, struct gaz_status *st);

/* gaz_spool_commit commits delta: fragment.end += delta, fragment.sum =
 * SHA-1 over the new [begin, end), rollback point saved, first_append_ns set
 * if unset. No-op when delta is 0. Returns 0 or GAZ_EIO (digest failure;
 * nothing changed). */
int gaz_spool_commit(struct gaz_spool *s, struct gaz_status *st);

/* gaz_spool_rollback discards uncommitted bytes (they are overwritten by
 * later appends) and restores the SHA-1 of the last commit. */
void gaz_spool_rollback(struct gaz_spool *s);

/* gaz_spool_roll ends the current fragment and starts an empty one at
 * `new_offset` with `codec`, discarding any delta. If the fragment had
 * content, `done` receives it with the file (truncated to the committed
 * length) and done->file != NULL; otherwise done is zeroed. Release `done`
 * with gaz_spool_done_release. Returns 0, GAZ_EINVAL (negative offset or
 * invalid codec; nothing changed), GAZ_ENOMEM. */
int gaz_spool_roll(struct gaz_spool *s, int64_t new_offset, int codec,
		   struct gaz_spool_done *done, struct gaz_status *st);

/* gaz_spool_done_release frees a completed fragment and its file reference. */
void gaz_spool_done_release(struct gaz_spool_done *done);

/* gaz_spool_pread reads committed bytes at absolute journal offset `off`
 * into buf[len]: 0 with 1 <= *n <= len; GAZ_EOF when off == end (nothing
 * committed there yet); GAZ_EINVAL when off is outside [begin, end];
 * GAZ_EIO. */
int gaz_spool_pread(const struct gaz_spool *s, int64_t off, void *buf, size_t len, size_t *n,
		    struct gaz_status *st);

/* gaz_spool_file: the current scratch file, borrowed (take a reference to
 * keep it), or NULL while nothing was appended since the last roll. */
struct gaz_fragment_file *gaz_spool_file(const struct gaz_spool *s);

#endif
