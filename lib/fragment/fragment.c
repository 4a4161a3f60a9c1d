/*
 * fragment.c - fragment values, SHA1Sum conversion and content names.
 *
 * Names are the only contract between brokers and the bytes in a bucket, so
 * the format here is exactly Gazette's (facts §5.1):
 *
 *   <begin %016x> '-' <end %016x> '-' <sha1 as 40 lowercase hex> <ext>
 *
 * Parsing is deliberately tolerant where Gazette's is (any hex case, any
 * number of leading zeros, the alternative extensions) and strict where a
 * wrong guess would corrupt the index (exactly 20 sum bytes, begin <= end,
 * no signs, a clean postfix). No I/O happens here.
 */
#include "common/hex.h"
#include "fragment/fragment.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int gaz_fragment_file_new(int fd, struct gaz_fragment_file **out, struct gaz_status *st)
{
	struct gaz_fragment_file *f = malloc(sizeof(*f));

	if (!f) {
		close(fd);
		return gaz_status_set(st, GAZ_ENOMEM, "allocating fragment file failed");
	}
	f->fd = fd;
	atomic_init(&f->refs, 1);
	*out = f;
	return 0;
}

struct gaz_fragment_file *gaz_fragment_file_ref(struct gaz_fragment_file *f)
{
	if (f)
		atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
	return f;
}

void gaz_fragment_file_unref(struct gaz_fragment_file *f)
{
	if (!f)
		return;
	/* acq_rel: the closer must see every sharer's last use of the fd. */
	if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (f->fd >= 0)
		close(f->fd);
	free(f);
}

void gaz_fragment_release(struct gaz_fragment *f)
{
	if (!f)
		return;
	free(f->journal);
	free(f->backing_store);
	free(f->path_postfix);
	memset(f, 0, sizeof(*f));
}

int gaz_fragment_set_str(char **slot, const char *s, struct gaz_status *st)
{
	char *dup = NULL;

	if (s && *s) {
		dup = strdup(s);
		if (!dup)
			return gaz_status_set(st, GAZ_ENOMEM, "copying fragment field failed");
	}
	free(*slot);
	*slot = dup;
	return 0;
}

int gaz_fragment_copy(struct gaz_fragment *dst, const struct gaz_fragment *src,
		      struct gaz_status *st)
{
	*dst = *src;
	dst->journal = dst->backing_store = dst->path_postfix = NULL;
	if (gaz_fragment_set_str(&dst->journal, src->journal, st) ||
	    gaz_fragment_set_str(&dst->backing_store, src->backing_store, st) ||
	    gaz_fragment_set_str(&dst->path_postfix, src->path_postfix, st)) {
		gaz_fragment_release(dst);
		return GAZ_ENOMEM;
	}
	return 0;
}

static const char *str_or_empty(const char *s)
{
	return s ? s : "";
}

bool gaz_fragment_equal(const struct gaz_fragment *a, const struct gaz_fragment *b)
{
	return a->begin == b->begin && a->end == b->end && a->codec == b->codec &&
	       a->mod_time == b->mod_time && !memcmp(a->sum, b->sum, GAZ_SHA1_LEN) &&
	       !strcmp(str_or_empty(a->journal), str_or_empty(b->journal)) &&
	       !strcmp(str_or_empty(a->backing_store), str_or_empty(b->backing_store)) &&
	       !strcmp(str_or_empty(a->path_postfix), str_or_empty(b->path_postfix));
}

bool gaz_fragment_sum_is_zero(const struct gaz_fragment *f)
{
	static const uint8_t zero[GAZ_SHA1_LEN];
	return !memcmp(f->sum, zero, GAZ_SHA1_LEN);
}

/* --- SHA1Sum: three big-endian words of the digest (facts §1.2) --- */

static uint64_t be_load(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static void be_store(uint8_t *p, int n, uint64_t v)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

void gaz_sha1sum_to_proto(const uint8_t sum[GAZ_SHA1_LEN], Protocol__SHA1Sum *pb)
{
	pb->part1 = be_load(sum, 8);
	pb->part2 = be_load(sum + 8, 8);
	pb->part3 = (uint32_t)be_load(sum + 16, 4);
}

void gaz_sha1sum_from_proto(const Protocol__SHA1Sum *pb, uint8_t sum[GAZ_SHA1_LEN])
{
	if (!pb) {
		memset(sum, 0, GAZ_SHA1_LEN);
		return;
	}
	be_store(sum, 8, pb->part1);
	be_store(sum + 8, 8, pb->part2);
	be_store(sum + 16, 4, pb->part3);
}

/* protobuf-c packs char * fields; it never writes through them. */
static char *borrow(const char *s)
{
	return (char *)(s ? s : protobuf_c_empty_string);
}

void gaz_fragment_to_proto(const struct gaz_fragment *f, Protocol__Fragment *pb,
			   Protocol__SHA1Sum *sum_pb)
{
	pb->journal = borrow(f->journal);
	pb->begin = f->begin;
	pb->end = f->end;
	gaz_sha1sum_to_proto(f->sum, sum_pb);
	pb->sum = sum_pb;
	pb->compression_codec = (Protocol__CompressionCodec)f->codec;
	pb->backing_store = borrow(f->backing_store);
	pb->mod_time = f->mod_time;
	pb->path_postfix = borrow(f->path_postfix);
}

int gaz_fragment_from_proto(struct gaz_fragment *f, const Protocol__Fragment *pb,
			    struct gaz_status *st)
{
	memset(f, 0, sizeof(*f));
	f->begin = pb->begin;
	f->end = pb->end;
	gaz_sha1sum_from_proto(pb->sum, f->sum);
	f->codec = (int)pb->compression_codec;
	f->mod_time = pb->mod_time;
	if (gaz_fragment_set_str(&f->journal, pb->journal, st) ||
	    gaz_fragment_set_str(&f->backing_store, pb->backing_store, st) ||
	    gaz_fragment_set_str(&f->path_postfix, pb->path_postfix, st)) {
		gaz_fragment_release(f);
		return GAZ_ENOMEM;
	}
	return 0;
}

/* --- names --- */

bool gaz_codec_valid(int codec)
{
	return codec >= PROTOCOL__COMPRESSION_CODEC__NONE &&
	       codec <= PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION;
}

const char *gaz_codec_ext(int codec)
{
	switch (codec) {
	case PROTOCOL__COMPRESSION_CODEC__NONE: return ".raw";
	case PROTOCOL__COMPRESSION_CODEC__GZIP: return ".gz";
	case PROTOCOL__COMPRESSION_CODEC__ZSTANDARD: return ".zst";
	case PROTOCOL__COMPRESSION_CODEC__SNAPPY: return ".sz";
	/* Gazette writes no extension yet; ".gzod" is only parsed. */
	case PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION: return "";
	}
	return NULL;
}

int gaz_fragment_content_name(const struct gaz_fragment *f, char *buf, size_t cap,
			      struct gaz_status *st)
{
	const char *ext = gaz_codec_ext(f->codec);
	char hex[GAZ_SHA1_HEX_LEN + 1];
	int n;

	if (!ext)
		return gaz_status_set(st, GAZ_EINVAL, "fragment of \"%s\" has invalid codec %d",
				      str_or_empty(f->journal), f->codec);
	if (f->begin < 0 || f->begin > f->end)
		return gaz_status_set(st, GAZ_EINVAL,
				      "fragment of \"%s\" has invalid range [%" PRId64 ", %" PRId64 ")",
				      str_or_empty(f->journal), f->begin, f->end);
	for (int i = 0; i < GAZ_SHA1_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", f->sum[i]);
	n = snprintf(buf, cap, "%016" PRIx64 "-%016" PRIx64 "-%s%s", (uint64_t)f->begin,
		     (uint64_t)f->end, hex, ext);
	if (n < 0 || (size_t)n >= cap)
		return gaz_status_set(st, GAZ_ERANGE, "fragment name exceeds %zu bytes", cap);
	return 0;
}

int gaz_fragment_content_path(const struct gaz_fragment *f, char *buf, size_t cap,
			      struct gaz_status *st)
{
	char name[GAZ_FRAGMENT_NAME_MAX];
	const char *post = str_or_empty(f->path_postfix);
	int rc, n;

	rc = gaz_fragment_content_name(f, name, sizeof(name), st);
	if (rc)
		return rc;
	n = snprintf(buf, cap, "%s/%s%s%s", str_or_empty(f->journal), post, *post ? "/" : "",
		     name);
	if (n < 0 || (size_t)n >= cap)
		return gaz_status_set(st, GAZ_ERANGE, "fragment path exceeds %zu bytes", cap);
	return 0;
}

/* --- parsing --- */

struct ext_map {
	const char *ext;
	int codec;
};

static const struct ext_map parse_exts[] = {
	{".raw", PROTOCOL__COMPRESSION_CODEC__NONE},
	{".gz", PROTOCOL__COMPRESSION_CODEC__GZIP},
	{".gzip", PROTOCOL__COMPRESSION_CODEC__GZIP},
	{".zst", PROTOCOL__COMPRESSION_CODEC__ZSTANDARD},
	{".zstandard", PROTOCOL__COMPRESSION_CODEC__ZSTANDARD},
	{".sz", PROTOCOL__COMPRESSION_CODEC__SNAPPY},
	{".snappy", PROTOCOL__COMPRESSION_CODEC__SNAPPY},
	{".gzod", PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION},
};

/* Codec of a base name by its extension (from the last '.'); *stem_len
 * gets the length before it. Returns -1 for an unknown extension. */
static int codec_of_base(const char *base, size_t *stem_len)
{
	const char *dot = strrchr(base, '.');

	*stem_len = strlen(base);
	if (!dot)
		return PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION;
	*stem_len = (size_t)(dot - base);
	for (size_t i = 0; i < sizeof(parse_exts) / sizeof(parse_exts[0]); i++)
		if (!strcasecmp(dot, parse_exts[i].ext))
			return parse_exts[i].codec;
	return -1;
}

/* Hex digits s[0:n) as a non-negative int64 (no sign, no "0x"). */
static bool parse_hex_i64(const char *s, size_t n, int64_t *out)
{
	uint64_t v = 0;

	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		int d = gaz_hex_digit(s[i]);
		if (d < 0 || v > ((uint64_t)INT64_MAX >> 4))
			return false;
		v = v << 4 | (uint64_t)d;
	}
	if (v > (uint64_t)INT64_MAX)
		return false;
	*out = (int64_t)v;
	return true;
}

static bool parse_sum(const char *s, size_t n, uint8_t sum[GAZ_SHA1_LEN])
{
	if (n != GAZ_SHA1_HEX_LEN)
		return false;
	for (size_t i = 0; i < GAZ_SHA1_LEN; i++) {
		int hi = gaz_hex_digit(s[2 * i]), lo = gaz_hex_digit(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		sum[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

/* A path postfix must be a "path component" (facts §3.1): letters, digits,
 * "-_+/.=%" (bytes >= 0x80 are taken as UTF-8 letters), clean, relative. */
static bool postfix_valid(const char *p, size_t n)
{
	size_t seg = 0;

	if (n > GAZ_POSTFIX_MAX)
		return false;
	for (size_t i = 0; i <= n; i++) {
		unsigned char c = i < n ? (unsigned char)p[i] : '/';
		if (c == '/') {
			if (seg == 0 || (seg == 1 && p[i - 1] == '.') ||
			    (seg == 2 && p[i - 1] == '.' && p[i - 2] == '.'))
				return false;
			seg = 0;
			continue;
		}
		if (!isalnum(c) && c < 0x80 && !strchr("-_+.=%", c))
			return false;
		seg++;
	}
	return true;
}

bool gaz_fragment_postfix_valid(const char *p)
{
	return !*p || postfix_valid(p, strlen(p));
}

/* Splits "begin-end-sum" (the stem) into `f`; false if it is not one. */
static bool parse_stem(const char *s, size_t n, struct gaz_fragment *f)
{
	const char *d1 = memchr(s, '-', n), *d2;

	if (!d1)
		return false;
	d2 = memchr(d1 + 1, '-', n - (size_t)(d1 + 1 - s));
	if (!d2 || memchr(d2 + 1, '-', n - (size_t)(d2 + 1 - s)))
		return false;
	return parse_hex_i64(s, (size_t)(d1 - s), &f->begin) &&
	       parse_hex_i64(d1 + 1, (size_t)(d2 - d1 - 1), &f->end) &&
	       parse_sum(d2 + 1, n - (size_t)(d2 + 1 - s), f->sum) && f->begin <= f->end;
}

int gaz_fragment_parse_path(const char *journal, const char *rel_path,
			    struct gaz_fragment *f, struct gaz_status *st)
{
	const char *slash = strrchr(rel_path, '/');
	const char *base = slash ? slash + 1 : rel_path;
	size_t post_len = slash ? (size_t)(slash - rel_path) : 0, stem_len;
	int codec = codec_of_base(base, &stem_len);

	memset(f, 0, sizeof(*f));
	if (codec < 0 || !parse_stem(base, stem_len, f) || (slash && !postfix_valid(rel_path, post_len))) {
		memset(f, 0, sizeof(*f));
		return gaz_status_set(st, GAZ_EINVAL, "\"%s\" under journal \"%s\" is not a fragment",
				      rel_path, journal);
	}
	f->codec = codec;
	if (gaz_fragment_set_str(&f->journal, journal, st))
		goto nomem;
	if (post_len) {
		f->path_postfix = strndup(rel_path, post_len);
		if (!f->path_postfix)
			goto nomem;
	}
	return 0;
nomem:
	gaz_fragment_release(f);
	return gaz_status_set(st, GAZ_ENOMEM, "parsing fragment path failed: out of memory");
}

static const EVP_MD *sha1_md;
static pthread_once_t sha1_once = PTHREAD_ONCE_INIT;

static void sha1_fetch(void)
{
	EVP_MD *md = EVP_MD_fetch(NULL, "SHA1", NULL);

	sha1_md = md ? md : EVP_sha1(); /* kept for the process's life */
}

const EVP_MD *gaz_sha1_md(void)
{
	pthread_once(&sha1_once, sha1_fetch);
	return sha1_md;
}

int gaz_sha1(const void *data, size_t len, uint8_t sum[GAZ_SHA1_LEN])
{
	return EVP_Digest(data, len, sum, NULL, gaz_sha1_md(), NULL) == 1 ? 0 : GAZ_ENOMEM;
}
