/*
 * codec.c - streaming encoders and decoders for fragment codecs.
 *
 * Layout: I/O adapters; CRC-32C; then per codec an encoder half and a
 * decoder half; then the dispatching API. Every decoder pulls compressed
 * input into dec->in[in_off, in_len) through the source callback and
 * inflates straight into the caller's buffer (snappy through one 64 KiB
 * block, since a framed chunk decompresses as a whole).
 *
 * Snappy framing format (github.com/google/snappy framing_format.txt), as
 * written by Go's snappy.NewBufferedWriter:
 *
 *   chunk   = type:u8  length:u24le  body[length]
 *   0xff    stream identifier, body "sNaPpY" (must come first; may repeat)
 *   0x00    compressed:   crc:u32le  snappy_block   (block inflates <= 64 KiB)
 *   0x01    uncompressed: crc:u32le  bytes[<= 64 KiB]
 *   0x02-0x7f reserved, unskippable (error); 0x80-0xfe skippable (padding)
 *   crc     = masked CRC-32C of the UNcompressed bytes:
 *             ((c >> 15) | (c << 17)) + 0xa282ead8
 *
 * Invariants: an encoder writes only complete members/frames/chunks at
 * finish; a decoder's error is sticky and it never returns GAZ_EOF unless
 * the input ended exactly at the end of a member, frame or chunk.
 */
#include "fragment/codec.h"

#include "fragment/fragment.h"

#include <errno.h>
#include <pthread.h>
#include <snappy-c.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#define GZIP_OUT_CAP (64 * 1024)
#define DEC_IN_CAP (128 * 1024)
#define SZ_BLOCK 65536
#define SZ_HDR 8 /* type + u24 length + u32 crc */

enum {
	C_NONE = PROTOCOL__COMPRESSION_CODEC__NONE,
	C_GZIP = PROTOCOL__COMPRESSION_CODEC__GZIP,
	C_ZSTD = PROTOCOL__COMPRESSION_CODEC__ZSTANDARD,
	C_SNAPPY = PROTOCOL__COMPRESSION_CODEC__SNAPPY,
	C_GZOD = PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION,
};

static const uint8_t sz_stream_id[10] = {0xff, 0x06, 0x00, 0x00, 's', 'N', 'a', 'P', 'p', 'Y'};

/* ------------------------------------------------------------------ I/O */

int gaz_fd_src_read(void *arg, void *buf, size_t cap, size_t *n, struct gaz_status *st)
{
	struct gaz_fd_src *src = arg;
	ssize_t r;

	*n = 0;
	if (src->end >= 0 && src->off >= src->end)
		return GAZ_EOF;
	if (src->end >= 0 && (uint64_t)cap > (uint64_t)(src->end - src->off))
		cap = (size_t)(src->end - src->off);
	if (cap == 0)
		return GAZ_EOF;
	do
		r = pread(src->fd, buf, cap, src->off);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return gaz_status_set(st, GAZ_EIO, "reading fd %d at %lld failed: %s", src->fd,
				      (long long)src->off, strerror(errno));
	if (r == 0)
		return GAZ_EOF;
	src->off += r;
	*n = (size_t)r;
	return 0;
}

int gaz_fd_sink_write(void *arg, const void *buf, size_t len, struct gaz_status *st)
{
	struct gaz_fd_sink *sink = arg;
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t w = write(sink->fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return gaz_status_set(st, GAZ_EIO, "writing fd %d failed: %s", sink->fd,
					      w < 0 ? strerror(errno) : "no progress");
		p += w;
		len -= (size_t)w;
		sink->written += w;
	}
	return 0;
}

int gaz_mem_src_read(void *arg, void *buf, size_t cap, size_t *n, struct gaz_status *st)
{
	struct gaz_mem_src *src = arg;
	size_t left = src->len - src->off;

	(void)st;
	*n = cap < left ? cap : left;
	if (*n == 0)
		return GAZ_EOF;
	memcpy(buf, src->data + src->off, *n);
	src->off += *n;
	return 0;
}

int gaz_mem_sink_write(void *arg, const void *buf, size_t len, struct gaz_status *st)
{
	struct gaz_mem_sink *s = arg;
	size_t max = s->max ? s->max : SIZE_MAX, cap = s->cap ? s->cap : 4096;
	uint8_t *d;

	if (len == 0)
		return 0;
	if (len > max - s->len)
		return gaz_status_set(st, GAZ_ERANGE, "memory sink exceeds %zu bytes", max);
	if (s->len + len > s->cap) {
		while (cap < s->len + len)
			cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
		d = realloc(s->data, cap);
		if (!d)
			return gaz_status_set(st, GAZ_ENOMEM, "growing memory sink to %zu failed", cap);
		s->data = d;
		s->cap = cap;
	}
	memcpy(s->data + s->len, buf, len);
	s->len += len;
	return 0;
}

void gaz_mem_sink_release(struct gaz_mem_sink *s)
{
	free(s->data);
	s->data = NULL;
	s->len = s->cap = 0;
}

/* ------------------------------------------------------------- CRC-32C */

static uint32_t crc32c_table[256];
static bool crc32c_have_hw;
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1; /* reflected Castagnoli */
		crc32c_table[i] = c;
	}
#if defined(__x86_64__)
	crc32c_have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc32c_sw(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len--)
		crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

/* SSE4.2's CRC32 instruction computes the same reflected CRC-32C, 8 bytes
 * an instruction: snappy fragments carry a CRC of every inflated block, so
 * the byte-wise table was most of a direct read's CPU (bench/README.md,
 * Backfill). The table stays for other CPUs. */
#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p,
							    size_t len)
{
	uint64_t c = crc;

	for (; len && ((uintptr_t)p & 7); len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	for (; len >= 8; len -= 8, p += 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	for (; len; len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#else
static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t len)
{
	return crc32c_sw(crc, p, len);
}
#endif

uint32_t gaz_crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc32c_once, crc32c_init);
	crc = ~crc;
	crc = crc32c_have_hw ? crc32c_hw(crc, buf, len) : crc32c_sw(crc, buf, len);
	return ~crc;
}

static uint32_t sz_masked_crc(const void *buf, size_t len)
{
	uint32_t c = gaz_crc32c(0, buf, len);
	return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void le_store(uint8_t *p, int n, uint32_t v)
{
	for (int i = 0; i < n; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint32_t le_load(const uint8_t *p, int n)
{
	uint32_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* ------------------------------------------------------------ encoders */

struct gaz_encoder {
	int codec;
	gaz_write_fn write;
	void *arg;
	bool finished;
	int err;            /* sticky first error */
	int64_t bytes_in;
	uint8_t *out;       /* compressor output scratch */
	size_t out_cap;
	union {
		struct {
			z_stream zs;
			bool zinit, in_member, any_member;
			int64_t member_in;
		} gz;
		struct {
			ZSTD_CCtx *cctx;
		} zstd;
		struct {
			uint8_t *blk;
			size_t blk_len;
			bool id_sent;
		} sz;
	} u;
};

/* Runs deflate over data with `flush` until input is consumed (and, for
 * Z_FINISH, the member's trailer is out), handing output to the sink. */
static int gz_deflate(struct gaz_encoder *e, const void *data, size_t len, int flush,
		      struct gaz_status *st)
{
	z_stream *zs = &e->u.gz.zs;
	int zr, rc;

	zs->next_in = (Bytef *)data;
	zs->avail_in = (uInt)len;
	do {
		zs->next_out = e->out;
		zs->avail_out = (uInt)e->out_cap;
		zr = deflate(zs, flush);
		if (zr == Z_STREAM_ERROR)
			return gaz_status_set(st, GAZ_EIO, "gzip compression failed");
		if (e->out_cap - zs->avail_out &&
		    (rc = e->write(e->arg, e->out, e->out_cap - zs->avail_out, st)))
			return rc;
	} while (zs->avail_in > 0 || zs->avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
	return 0;
}

static int gz_member_begin(struct gaz_encoder *e, struct gaz_status *st)
{
	int zr;

	if (e->u.gz.zinit)
		zr = deflateReset(&e->u.gz.zs);
	else
		zr = deflateInit2(&e->u.gz.zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
				  Z_DEFAULT_STRATEGY);
	if (zr != Z_OK)
		return gaz_status_set(st, zr == Z_MEM_ERROR ? GAZ_ENOMEM : GAZ_EIO,
				      "starting gzip member failed (zlib %d)", zr);
	e->u.gz.zinit = true;
	e->u.gz.in_member = true;
	e->u.gz.member_in = 0;
	return 0;
}

static int gz_member_end(struct gaz_encoder *e, struct gaz_status *st)
{
	int rc = gz_deflate(e, NULL, 0, Z_FINISH, st);

	e->u.gz.in_member = false;
	e->u.gz.any_member = true;
	return rc;
}

static int gz_enc_write(struct gaz_encoder *e, const void *buf, size_t len,
			struct gaz_status *st)
{
	int rc;

	/* Input is fed in uInt-sized pieces; zlib counts in 32 bits. */
	while (len > 0) {
		size_t piece = len > (1u << 30) ? (1u << 30) : len;
		if (!e->u.gz.in_member && (rc = gz_member_begin(e, st)))
			return rc;
		if ((rc = gz_deflate(e, buf, piece, Z_NO_FLUSH, st)))
			return rc;
		buf = (const uint8_t *)buf + piece;
		len -= piece;
		e->u.gz.member_in += (int64_t)piece;
	}
	/* GZIP closes a member per >= 1 MiB batch, as Gazette's primary does;
	 * GZIP_OFFLOAD_DECOMPRESSION must stay one member for store transcoding. */
	if (e->codec == C_GZIP && e->u.gz.in_member && e->u.gz.member_in >= GAZ_GZIP_MEMBER_BYTES)
		return gz_member_end(e, st);
	return 0;
}

static int gz_enc_finish(struct gaz_encoder *e, struct gaz_status *st)
{
	int rc;

	if (!e->u.gz.in_member && !e->u.gz.any_member && (rc = gz_member_begin(e, st)))
		return rc;
	return e->u.gz.in_member ? gz_member_end(e, st) : 0;
}

static int zstd_enc_run(struct gaz_encoder *e, const void *buf, size_t len,
			ZSTD_EndDirective mode, struct gaz_status *st)
{
	ZSTD_inBuffer in = {buf, len, 0};
	size_t left;
	int rc;

	do {
		ZSTD_outBuffer out = {e->out, e->out_cap, 0};
		left = ZSTD_compressStream2(e->u.zstd.cctx, &out, &in, mode);
		if (ZSTD_isError(left))
			return gaz_status_set(st, GAZ_EIO, "zstd compression failed: %s",
					      ZSTD_getErrorName(left));
		if (out.pos && (rc = e->write(e->arg, e->out, out.pos, st)))
			return rc;
	} while (in.pos < in.size || (mode == ZSTD_e_end && left != 0));
	return 0;
}

/* Writes e->u.sz.blk as one chunk (after the stream identifier, once). */
static int sz_emit(struct gaz_encoder *e, struct gaz_status *st)
{
	size_t n = e->u.sz.blk_len, clen = e->out_cap - SZ_HDR;
	bool compressed;
	int rc;

	if (!e->u.sz.id_sent) {
		if ((rc = e->write(e->arg, sz_stream_id, sizeof(sz_stream_id), st)))
			return rc;
		e->u.sz.id_sent = true;
	}
	if (n == 0)
		return 0;
	if (snappy_compress((const char *)e->u.sz.blk, n, (char *)e->out + SZ_HDR, &clen) !=
	    SNAPPY_OK)
		return gaz_status_set(st, GAZ_EIO, "snappy compression failed");
	/* Keep the compressed form only when it saves at least 1/8. */
	compressed = clen < n - n / 8;
	if (!compressed) {
		memcpy(e->out + SZ_HDR, e->u.sz.blk, n);
		clen = n;
	}
	e->out[0] = compressed ? 0x00 : 0x01;
	le_store(e->out + 1, 3, (uint32_t)(clen + 4));
	le_store(e->out + 4, 4, sz_masked_crc(e->u.sz.blk, n));
	e->u.sz.blk_len = 0;
	return e->write(e->arg, e->out, SZ_HDR + clen, st);
}

static int sz_enc_write(struct gaz_encoder *e, const void *buf, size_t len,
			struct gaz_status *st)
{
	const uint8_t *p = buf;
	int rc;

	while (len > 0) {
		size_t take = SZ_BLOCK - e->u.sz.blk_len;
		if (take > len)
			take = len;
		memcpy(e->u.sz.blk + e->u.sz.blk_len, p, take);
		e->u.sz.blk_len += take;
		p += take;
		len -= take;
		if (e->u.sz.blk_len == SZ_BLOCK && (rc = sz_emit(e, st)))
			return rc;
	}
	return 0;
}

static int enc_setup(struct gaz_encoder *e, struct gaz_status *st)
{
	switch (e->codec) {
	case C_NONE:
		return 0;
	case C_GZIP:
	case C_GZOD:
		e->out_cap = GZIP_OUT_CAP;
		break;
	case C_ZSTD:
		e->out_cap = ZSTD_CStreamOutSize();
		if (!(e->u.zstd.cctx = ZSTD_createCCtx()))
			return gaz_status_set(st, GAZ_ENOMEM, "creating zstd context failed");
		/* Frame checksums make a damaged fragment fail loudly; every
		 * zstd reader (Go's included) verifies them when present. */
		ZSTD_CCtx_setParameter(e->u.zstd.cctx, ZSTD_c_checksumFlag, 1);
		break;
	case C_SNAPPY:
		e->out_cap = SZ_HDR + snappy_max_compressed_length(SZ_BLOCK);
		if (!(e->u.sz.blk = malloc(SZ_BLOCK)))
			return gaz_status_set(st, GAZ_ENOMEM, "allocating snappy block failed");
		break;
	}
	if (!(e->out = malloc(e->out_cap)))
		return gaz_status_set(st, GAZ_ENOMEM, "allocating encoder buffer failed");
	return 0;
}

int gaz_encoder_new(int codec, gaz_write_fn write, void *arg, struct gaz_encoder **out,
		    struct gaz_status *st)
{
	struct gaz_encoder *e;
	int rc;

	*out = NULL;
	if (!gaz_codec_valid(codec))
		return gaz_status_set(st, GAZ_EINVAL, "invalid compression codec %d", codec);
	if (!(e = calloc(1, sizeof(*e))))
		return gaz_status_set(st, GAZ_ENOMEM, "allocating encoder failed");
	e->codec = codec;
	e->write = write;
	e->arg = arg;
	if ((rc = enc_setup(e, st))) {
		gaz_encoder_free(e);
		return rc;
	}
	*out = e;
	return 0;
}

static int enc_fail(struct gaz_encoder *e, int rc)
{
	if (rc < 0 && !e->err)
		e->err = rc;
	return rc;
}

int gaz_encoder_write(struct gaz_encoder *e, const void *buf, size_t len,
		      struct gaz_status *st)
{
	int rc = 0;

	if (e->err)
		return gaz_status_set(st, e->err, "encoder failed earlier");
	if (e->finished)
		return gaz_status_set(st, GAZ_EINVAL, "write to a finished encoder");
	if (len == 0)
		return 0;
	switch (e->codec) {
	case C_NONE: rc = e->write(e->arg, buf, len, st); break;
	case C_GZIP:
	case C_GZOD: rc = gz_enc_write(e, buf, len, st); break;
	case C_ZSTD: rc = zstd_enc_run(e, buf, len, ZSTD_e_continue, st); break;
	case C_SNAPPY: rc = sz_enc_write(e, buf, len, st); break;
	}
	if (rc == 0)
		e->bytes_in += (int64_t)len;
	return enc_fail(e, rc);
}

int gaz_encoder_finish(struct gaz_encoder *e, struct gaz_status *st)
{
	int rc = 0;

	if (e->err)
		return gaz_status_set(st, e->err, "encoder failed earlier");
	if (e->finished)
		return 0;
	switch (e->codec) {
	case C_NONE: break;
	case C_GZIP:
	case C_GZOD: rc = gz_enc_finish(e, st); break;
	case C_ZSTD: rc = zstd_enc_run(e, NULL, 0, ZSTD_e_end, st); break;
	case C_SNAPPY: rc = sz_emit(e, st); break;
	}
	e->finished = rc == 0;
	return enc_fail(e, rc);
}

int64_t gaz_encoder_bytes_in(const struct gaz_encoder *e)
{
	return e->bytes_in;
}

void gaz_encoder_free(struct gaz_encoder *e)
{
	if (!e)
		return;
	if ((e->codec == C_GZIP || e->codec == C_GZOD) && e->u.gz.zinit)
		deflateEnd(&e->u.gz.zs);
	if (e->codec == C_ZSTD)
		ZSTD_freeCCtx(e->u.zstd.cctx);
	if (e->codec == C_SNAPPY)
		free(e->u.sz.blk);
	free(e->out);
	free(e);
}

int gaz_encoder_write_cb(void *enc, const void *buf, size_t len, struct gaz_status *st)
{
	return gaz_encoder_write(enc, buf, len, st);
}

/* ------------------------------------------------------------ decoders */

struct gaz_decoder {
	int codec;
	gaz_read_fn read;
	void *arg;
	int err;                 /* sticky first error */
	struct gaz_status fail;  /* its detail, repeated on later calls */
	uint8_t *in;
	size_t in_off, in_len;
	bool in_eof;
	union {
		struct {
			z_stream zs;
			bool zinit, member_done;
		} gz;
		struct {
			ZSTD_DCtx *dctx;
			bool frame_done;
		} zstd;
		struct {
			uint8_t *blk;
			size_t blk_off, blk_len;
			bool seen_id;
		} sz;
	} u;
};

static int dec_corrupt(struct gaz_decoder *d, const char *what, struct gaz_status *st)
{
	static const char *names[] = {"", "raw", "gzip", "zstd", "snappy", "gzip"};
	return gaz_status_set(st, GAZ_EPROTO, "decoding %s failed: %s", names[d->codec], what);
}

/* Moves unread input to the front and reads once more from the source.
 * Returns 0 (some bytes may have arrived), GAZ_EOF (source ended) or error. */
static int dec_refill(struct gaz_decoder *d, struct gaz_status *st)
{
	size_t n = 0;
	int rc;

	if (d->in_eof)
		return GAZ_EOF;
	if (d->in_off > 0) {
		memmove(d->in, d->in + d->in_off, d->in_len - d->in_off);
		d->in_len -= d->in_off;
		d->in_off = 0;
	}
	if (d->in_len == DEC_IN_CAP)
		return 0;
	rc = d->read(d->arg, d->in + d->in_len, DEC_IN_CAP - d->in_len, &n, st);
	if (rc == GAZ_EOF) {
		d->in_eof = true;
		return GAZ_EOF;
	}
	if (rc < 0)
		return rc;
	d->in_len += n;
	return 0;
}

/* Ensures `need` (<= DEC_IN_CAP) unread bytes unless the source ends first.
 * Returns 0 when they are there, GAZ_EOF when not, or an error. */
static int dec_fill(struct gaz_decoder *d, size_t need, struct gaz_status *st)
{
	while (d->in_len - d->in_off < need) {
		int rc = dec_refill(d, st);
		if (rc == GAZ_EOF)
			return GAZ_EOF;
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int gz_dec_read(struct gaz_decoder *d, uint8_t *buf, size_t cap, size_t *n,
		       struct gaz_status *st)
{
	z_stream *zs = &d->u.gz.zs;
	int rc, zr;

	for (;;) {
		rc = dec_fill(d, 1, st);
		if (rc < 0)
			return rc;
		if (rc == GAZ_EOF)
			return d->u.gz.member_done ? GAZ_EOF : dec_corrupt(d, "unexpected EOF", st);
		if (d->u.gz.member_done) {
			/* More bytes after a member: they must be another member. */
			inflateReset(zs);
			d->u.gz.member_done = false;
		}
		zs->next_in = d->in + d->in_off;
		zs->avail_in = (uInt)(d->in_len - d->in_off);
		zs->next_out = buf;
		zs->avail_out = (uInt)(cap > (1u << 30) ? (1u << 30) : cap);
		zr = inflate(zs, Z_NO_FLUSH);
		d->in_off = d->in_len - zs->avail_in;
		*n = (size_t)(zs->next_out - buf);
		if (zr == Z_STREAM_END)
			d->u.gz.member_done = true;
		else if (zr == Z_MEM_ERROR)
			return gaz_status_set(st, GAZ_ENOMEM, "decoding gzip: out of memory");
		else if (zr != Z_OK && zr != Z_BUF_ERROR)
			return dec_corrupt(d, zs->msg ? zs->msg : "invalid data", st);
		if (*n)
			return 0;
	}
}

static int zstd_dec_read(struct gaz_decoder *d, uint8_t *buf, size_t cap, size_t *n,
			 struct gaz_status *st)
{
	for (;;) {
		int rc = dec_fill(d, 1, st);
		ZSTD_inBuffer in = {d->in + d->in_off, d->in_len - d->in_off, 0};
		ZSTD_outBuffer out = {buf, cap, 0};
		size_t ret;

		if (rc < 0)
			return rc;
		/* At the source's end, still drain what zstd holds decoded. */
		ret = ZSTD_decompressStream(d->u.zstd.dctx, &out, &in);
		if (ZSTD_isError(ret))
			return dec_corrupt(d, ZSTD_getErrorName(ret), st);
		d->in_off += in.pos;
		if (in.pos || out.pos || ret == 0)
			d->u.zstd.frame_done = ret == 0;
		*n = out.pos;
		if (*n)
			return 0;
		if (rc == GAZ_EOF)
			return d->u.zstd.frame_done ? GAZ_EOF : dec_corrupt(d, "unexpected EOF", st);
	}
}

/* Consumes `len` bytes of a skippable chunk body, however large. */
static int sz_skip(struct gaz_decoder *d, size_t len, struct gaz_status *st)
{
	while (len > 0) {
		size_t avail = d->in_len - d->in_off, take;
		if (avail == 0) {
			int rc = dec_refill(d, st);
			if (rc == GAZ_EOF)
				return dec_corrupt(d, "unexpected EOF in skippable chunk", st);
			if (rc < 0)
				return rc;
			continue;
		}
		take = avail < len ? avail : len;
		d->in_off += take;
		len -= take;
	}
	return 0;
}

/* Decodes a data chunk body (crc + payload) into the block buffer. */
static int sz_data_chunk(struct gaz_decoder *d, int type, const uint8_t *body, size_t len,
			 struct gaz_status *st)
{
	size_t out_len = SZ_BLOCK;

	if (len < 4)
		return dec_corrupt(d, "chunk too short for its checksum", st);
	if (type == 0x01) {
		if (len - 4 > SZ_BLOCK)
			return dec_corrupt(d, "uncompressed chunk exceeds 65536 bytes", st);
		memcpy(d->u.sz.blk, body + 4, len - 4);
		out_len = len - 4;
	} else if (snappy_uncompressed_length((const char *)body + 4, len - 4, &out_len) !=
			   SNAPPY_OK ||
		   out_len > SZ_BLOCK ||
		   snappy_uncompress((const char *)body + 4, len - 4, (char *)d->u.sz.blk,
				     &out_len) != SNAPPY_OK) {
		return dec_corrupt(d, "invalid compressed chunk", st);
	}
	if (sz_masked_crc(d->u.sz.blk, out_len) != le_load(body, 4))
		return dec_corrupt(d, "chunk checksum mismatch", st);
	d->u.sz.blk_off = 0;
	d->u.sz.blk_len = out_len;
	return 0;
}

/* Reads the next chunk. GAZ_EOF only at a chunk boundary. */
static int sz_next_chunk(struct gaz_decoder *d, struct gaz_status *st)
{
	const uint8_t *h;
	size_t len;
	int type, rc = dec_fill(d, 4, st);

	if (rc == GAZ_EOF)
		return d->in_len == d->in_off ? GAZ_EOF : dec_corrupt(d, "unexpected EOF", st);
	if (rc < 0)
		return rc;
	h = d->in + d->in_off;
	type = h[0];
	len = le_load(h + 1, 3);
	if (type != 0xff && !d->u.sz.seen_id)
		return dec_corrupt(d, "missing stream identifier", st);
	if (type >= 0x80 && type != 0xff) {
		d->in_off += 4;
		return sz_skip(d, len, st); /* padding and reserved skippable */
	}
	if (type > 0x01 && type != 0xff)
		return dec_corrupt(d, "reserved unskippable chunk", st);
	if (len > DEC_IN_CAP - 4)
		return dec_corrupt(d, "chunk too large", st);
	if ((rc = dec_fill(d, 4 + len, st)) == GAZ_EOF)
		return dec_corrupt(d, "unexpected EOF", st);
	if (rc < 0)
		return rc;
	h = d->in + d->in_off;
	d->in_off += 4 + len;
	if (type == 0xff) {
		if (len != 6 || memcmp(h + 4, sz_stream_id + 4, 6))
			return dec_corrupt(d, "invalid stream identifier", st);
		d->u.sz.seen_id = true;
		return 0;
	}
	return sz_data_chunk(d, type, h + 4, len, st);
}

static int sz_dec_read(struct gaz_decoder *d, uint8_t *buf, size_t cap, size_t *n,
		       struct gaz_status *st)
{
	while (d->u.sz.blk_off == d->u.sz.blk_len) {
		int rc = sz_next_chunk(d, st);
		if (rc)
			return rc;
	}
	*n = d->u.sz.blk_len - d->u.sz.blk_off;
	if (*n > cap)
		*n = cap;
	memcpy(buf, d->u.sz.blk + d->u.sz.blk_off, *n);
	d->u.sz.blk_off += *n;
	return 0;
}

static int dec_setup(struct gaz_decoder *d, struct gaz_status *st)
{
	int zr;

	if (d->codec == C_NONE)
		return 0;
	if (!(d->in = malloc(DEC_IN_CAP)))
		return gaz_status_set(st, GAZ_ENOMEM, "allocating decoder buffer failed");
	switch (d->codec) {
	case C_GZIP:
	case C_GZOD:
		zr = inflateInit2(&d->u.gz.zs, 15 + 16); /* gzip wrapper only */
		if (zr != Z_OK)
			return gaz_status_set(st, GAZ_ENOMEM, "starting gzip decoder failed");
		d->u.gz.zinit = true;
		break;
	case C_ZSTD:
		if (!(d->u.zstd.dctx = ZSTD_createDCtx()))
			return gaz_status_set(st, GAZ_ENOMEM, "creating zstd context failed");
		d->u.zstd.frame_done = true; /* no input yet: an empty stream */
		break;
	case C_SNAPPY:
		if (!(d->u.sz.blk = malloc(SZ_BLOCK)))
			return gaz_status_set(st, GAZ_ENOMEM, "allocating snappy block failed");
		break;
	}
	return 0;
}

int gaz_decoder_new(int codec, gaz_read_fn read, void *arg, struct gaz_decoder **out,
		    struct gaz_status *st)
{
	struct gaz_decoder *d;
	int rc;

	*out = NULL;
	if (!gaz_codec_valid(codec))
		return gaz_status_set(st, GAZ_EINVAL, "invalid compression codec %d", codec);
	if (!(d = calloc(1, sizeof(*d))))
		return gaz_status_set(st, GAZ_ENOMEM, "allocating decoder failed");
	d->codec = codec;
	d->read = read;
	d->arg = arg;
	if ((rc = dec_setup(d, st))) {
		gaz_decoder_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

int gaz_decoder_read(struct gaz_decoder *d, void *buf, size_t cap, size_t *n,
		     struct gaz_status *st)
{
	struct gaz_status local = {0};
	int rc = GAZ_EINVAL;

	*n = 0;
	if (d->err) {
		if (st && !st->code)
			*st = d->fail;
		return d->err;
	}
	if (cap == 0)
		return gaz_status_set(st, GAZ_EINVAL, "decoder read with an empty buffer");
	switch (d->codec) {
	case C_NONE: rc = d->read(d->arg, buf, cap, n, &local); break;
	case C_GZIP:
	case C_GZOD: rc = gz_dec_read(d, buf, cap, n, &local); break;
	case C_ZSTD: rc = zstd_dec_read(d, buf, cap, n, &local); break;
	case C_SNAPPY: rc = sz_dec_read(d, buf, cap, n, &local); break;
	}
	if (rc < 0) {
		*n = 0;
		d->err = rc;
		d->fail = local;
	}
	if (rc < 0 && st && !st->code)
		*st = local;
	return rc;
}

int gaz_decoder_read_cb(void *dec, void *buf, size_t cap, size_t *n, struct gaz_status *st)
{
	return gaz_decoder_read(dec, buf, cap, n, st);
}

void gaz_decoder_free(struct gaz_decoder *d)
{
	if (!d)
		return;
	if ((d->codec == C_GZIP || d->codec == C_GZOD) && d->u.gz.zinit)
		inflateEnd(&d->u.gz.zs);
	if (d->codec == C_ZSTD)
		ZSTD_freeDCtx(d->u.zstd.dctx);
	if (d->codec == C_SNAPPY)
		free(d->u.sz.blk);
	free(d->in);
	free(d);
}

/* ------------------------------------------------------------ files */

int gaz_codec_compress_file(int codec, int in_fd, int out_fd, struct gaz_status *st)
{
	struct gaz_fd_src src = {.fd = in_fd, .off = 0, .end = -1};
	struct gaz_fd_sink sink = {.fd = out_fd};
	struct gaz_encoder *enc = NULL;
	size_t cap = 256 * 1024, n;
	uint8_t *buf = malloc(cap);
	int rc;

	if (!buf)
		return gaz_status_set(st, GAZ_ENOMEM, "allocating compression buffer failed");
	rc = gaz_encoder_new(codec, gaz_fd_sink_write, &sink, &enc, st);
	while (rc == 0 && (rc = gaz_fd_src_read(&src, buf, cap, &n, st)) == 0)
		rc = gaz_encoder_write(enc, buf, n, st);
	if (rc == GAZ_EOF)
		rc = gaz_encoder_finish(enc, st);
	gaz_encoder_free(enc);
	free(buf);
	return rc;
}
