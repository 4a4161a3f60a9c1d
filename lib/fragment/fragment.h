/*
 * fragment.h - journal fragments: the value type, its protobuf form, and
 * the names fragments carry in a fragment store.
 *
 * A fragment is the byte range [begin, end) of one journal, its SHA-1, the
 * codec its stored file is written with and, once persisted, the store
 * holding it (Gazette broker/protocol Fragment, facts §1.4, §3.7, §5.1).
 *
 * Invariants of a valid fragment: 0 <= begin <= end; codec is one of the
 * Protocol__CompressionCodec values NONE..GZIP_OFFLOAD_DECOMPRESSION; an
 * empty fragment (begin == end) carries the all-zero sum (facts §1.2);
 * mod_time is 0 and backing_store NULL/"" for a fragment only held locally.
 *
 * This module only names and converts; it does no I/O. Not thread-safe per
 * value (values are owned by one holder); the functions keep no state.
 */
#ifndef GAZ_FRAGMENT_FRAGMENT_H
#define GAZ_FRAGMENT_FRAGMENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "protocol.pb-c.h"

/* Bytes in a SHA-1 digest, and in its lowercase hex spelling. */
#define GAZ_SHA1_LEN 20
#define GAZ_SHA1_HEX_LEN 40

/* Room for a content name: 16 + 1 + 16 + 1 + 40 + ".raw" + NUL, rounded. */
#define GAZ_FRAGMENT_NAME_MAX 96
/* Room for a content path: journal (<= 512) "/" postfix (<= 512) "/" name. */
#define GAZ_FRAGMENT_PATH_MAX 1152
/* Longest journal name and path postfix Gazette accepts (facts §3.2, §3.7). */
#define GAZ_JOURNAL_MAX 512
#define GAZ_POSTFIX_MAX 512

struct gaz_fragment {
	char *journal;        /* owned; NULL reads as "" */
	int64_t begin;        /* first offset, inclusive */
	int64_t end;          /* offset after the last byte */
	uint8_t sum[GAZ_SHA1_LEN]; /* SHA-1 of the uncompressed [begin, end) */
	int codec;            /* a Protocol__CompressionCodec value */
	char *backing_store;  /* owned store URL; NULL/"" = local only */
	int64_t mod_time;     /* store last-modified, unix seconds; 0 = local */
	char *path_postfix;   /* owned; NULL/"" = none */
};

/* A local fragment file shared between a spool, the fragment index and
 * readers: an fd closed when the last reference goes. Thread-safe refcount;
 * the fd is only read with pread(2) by sharers (no shared file position). */
struct gaz_fragment_file {
	int fd;
	atomic_int refs;
};

/* gaz_fragment_file_new wraps `fd` (consumed, even on error) with one
 * reference. Returns 0 and *out, or GAZ_ENOMEM (fd closed). */
int gaz_fragment_file_new(int fd, struct gaz_fragment_file **out, struct gaz_status *st);

/* gaz_fragment_file_ref adds a reference; returns `f` (NULL passes). */
struct gaz_fragment_file *gaz_fragment_file_ref(struct gaz_fragment_file *f);

/* gaz_fragment_file_unref drops a reference, closing and freeing at zero.
 * NULL is ignored. */
void gaz_fragment_file_unref(struct gaz_fragment_file *f);

/* gaz_fragment_release frees the owned strings and zeroes `f`. Idempotent;
 * NULL is ignored. */
void gaz_fragment_release(struct gaz_fragment *f);

/* gaz_fragment_copy makes `dst` a deep copy of `src`. `dst` must not hold
 * owned strings (release it first). Returns 0 or GAZ_ENOMEM (dst zeroed). */
int gaz_fragment_copy(struct gaz_fragment *dst, const struct gaz_fragment *src,
		      struct gaz_status *st);

/* gaz_fragment_set_str replaces the owned string in *slot with a copy of `s`
 * (NULL or "" stores NULL). Returns 0 or GAZ_ENOMEM (slot unchanged). */
int gaz_fragment_set_str(char **slot, const char *s, struct gaz_status *st);

/* gaz_fragment_equal: all fields equal, NULL and "" strings alike (the
 * comparison Gazette's spool makes of proposals, facts §6.2). */
bool gaz_fragment_equal(const struct gaz_fragment *a, const struct gaz_fragment *b);

/* gaz_fragment_sum_is_zero: the sum is the all-zero "no content" sum. */
bool gaz_fragment_sum_is_zero(const struct gaz_fragment *f);

/* gaz_sha1_md: OpenSSL's SHA-1, fetched once for the process (an
 * EVP_sha1() digest is looked up again on every init under OpenSSL 3,
 * which costs more than hashing a small append). Never NULL; borrowed. */
const struct evp_md_st *gaz_sha1_md(void);

/* gaz_sha1 writes the SHA-1 of data[0, len) to sum. Returns 0, or
 * GAZ_ENOMEM when OpenSSL could not allocate its context. */
int gaz_sha1(const void *data, size_t len, uint8_t sum[GAZ_SHA1_LEN]);

/* gaz_sha1sum_to_proto splits a digest into SHA1Sum: part1 = big-endian
 * d[0:8], part2 = d[8:16], part3 = d[16:20] (facts §1.2). `pb` must have been
 * initialised with PROTOCOL__SHA1_SUM__INIT. */
void gaz_sha1sum_to_proto(const uint8_t sum[GAZ_SHA1_LEN], Protocol__SHA1Sum *pb);

/* gaz_sha1sum_from_proto is the inverse; a NULL `pb` (absent on the wire)
 * gives the zero sum. */
void gaz_sha1sum_from_proto(const Protocol__SHA1Sum *pb, uint8_t sum[GAZ_SHA1_LEN]);

/* gaz_fragment_to_proto fills `pb` (initialised by the caller with
 * PROTOCOL__FRAGMENT__INIT) and `sum_pb` (PROTOCOL__SHA1_SUM__INIT, linked as
 * pb->sum, always set because gogo emits the non-nullable sum). The strings
 * of `pb` are BORROWED from `f`: valid while `f` is, never free pb with
 * protobuf_c_message_free_unpacked. The sum is copied as is: producers keep
 * empty fragments at the zero sum. */
void gaz_fragment_to_proto(const struct gaz_fragment *f, Protocol__Fragment *pb,
			   Protocol__SHA1Sum *sum_pb);

/* gaz_fragment_from_proto deep-copies `pb` into `f` (which must hold no
 * owned strings). Absent sum = zero sum. Does not validate. Returns 0 or
 * GAZ_ENOMEM. */
int gaz_fragment_from_proto(struct gaz_fragment *f, const Protocol__Fragment *pb,
			    struct gaz_status *st);

/* gaz_codec_ext is the file extension written for `codec` (".raw", ".gz",
 * ".zst", ".sz", "" for GZIP_OFFLOAD_DECOMPRESSION, facts §5.1), or NULL for
 * INVALID or an unknown value. Static string. */
const char *gaz_codec_ext(int codec);

/* gaz_codec_valid: codec is NONE..GZIP_OFFLOAD_DECOMPRESSION. */
bool gaz_codec_valid(int codec);

/* gaz_fragment_content_name writes
 * "%016x-%016x-<40 lowercase hex sum><ext>" into buf[cap] (facts §5.1).
 * Returns 0, GAZ_EINVAL for negative offsets, begin > end or an invalid
 * codec, or GAZ_ERANGE if cap is too small (GAZ_FRAGMENT_NAME_MAX suffices). */
int gaz_fragment_content_name(const struct gaz_fragment *f, char *buf, size_t cap,
			      struct gaz_status *st);

/* gaz_fragment_postfix_valid: `p` (NUL-terminated) may be a fragment's
 * path postfix: "" or a clean relative path of path components ("-_+.=%",
 * letters, digits) of at most GAZ_POSTFIX_MAX bytes (facts §3.1, §3.7). */
bool gaz_fragment_postfix_valid(const char *p);

/* gaz_fragment_content_path writes journal "/" [postfix "/"] name into
 * buf[cap]: Gazette's path.Join(journal, postfix, name) for valid parts.
 * Errors as gaz_fragment_content_name; GAZ_FRAGMENT_PATH_MAX suffices. */
int gaz_fragment_content_path(const struct gaz_fragment *f, char *buf, size_t cap,
			      struct gaz_status *st);

/* gaz_fragment_parse_path parses a store object path relative to
 * "<store prefix><journal>/" into `f` (which must hold no owned strings):
 * postfix = dirname (none if no '/'), base name = begin "-" end "-" sum
 * [ext], begin/end hex int64 with begin <= end, sum exactly 40 hex digits,
 * ext case-insensitively one of .raw .gz .gzip .zst .zstandard .sz .snappy
 * .gzod or none (GZIP_OFFLOAD_DECOMPRESSION), postfix a clean path of at most
 * 512 bytes. backing_store and mod_time are left empty for the caller.
 * Because store listings are recursive, fragments of journal "a/b/c" parse
 * under journal "a/b" with postfix "c" (Gazette quirk, facts §5.1).
 * Returns 0; GAZ_EINVAL for anything else (foreign objects, keys ending in
 * '/'), which listing callers skip with a warning; GAZ_ENOMEM. */
int gaz_fragment_parse_path(const char *journal, const char *rel_path,
			    struct gaz_fragment *f, struct gaz_status *st);

#endif
