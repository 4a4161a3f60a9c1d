/*
 * codec.h - streaming compression of fragment files, per CompressionCodec
 * (facts §5.2), over callbacks so the same code runs on a local file, a
 * memory buffer or an HTTP body.
 *
 *   NONE                        bytes as they are
 *   GZIP                        RFC 1952 members; the encoder closes a member
 *                               after each write that brings it to >= 1 MiB
 *                               of input (as Gazette's primary does); the
 *                               decoder reads any number of members
 *   ZSTANDARD                   zstd frames (any number when decoding)
 *   SNAPPY                      the Snappy framing format ("sNaPpY" stream
 *                               identifier, chunks of <= 64 KiB with masked
 *                               CRC-32C), not raw snappy blocks
 *   GZIP_OFFLOAD_DECOMPRESSION  one gzip member. Decoding it is gzip; a
 *                               caller whose HTTP layer already removed the
 *                               Content-Encoding reads it as NONE instead.
 *
 * Decoders never report a clean end for damaged input: a truncated stream
 * (missing trailer, a cut chunk or frame) or trailing bytes that are not a
 * further member/frame/chunk end in GAZ_EPROTO, so a reader never skips
 * offsets as if a fragment were complete (cases BR-12).
 *
 * An encoder or decoder is used by one thread at a time; distinct ones are
 * independent.
 */
#ifndef GAZ_FRAGMENT_CODEC_H
#define GAZ_FRAGMENT_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Input bytes after which a GZIP encoder closes its current member. */
#define GAZ_GZIP_MEMBER_BYTES (1024 * 1024)

/* A source: reads up to `cap` bytes into buf. Returns 0 with *n > 0, GAZ_EOF
 * with *n == 0 at the clean end, or a negative GAZ_E* code. */
typedef int (*gaz_read_fn)(void *arg, void *buf, size_t cap, size_t *n,
			   struct gaz_status *st);

/* A sink: consumes all `len` bytes or fails. Returns 0 or a negative code. */
typedef int (*gaz_write_fn)(void *arg, const void *buf, size_t len, struct gaz_status *st);

/* Source over a file descriptor with pread(2), so it never moves a shared
 * file position: bytes [off, end) (end < 0: to end of file). `off` advances. */
struct gaz_fd_src {
	int fd;
	int64_t off;
	int64_t end;
};
int gaz_fd_src_read(void *src, void *buf, size_t cap, size_t *n, struct gaz_status *st);

/* Sink appending to a file descriptor with write(2) (retrying short writes
 * and EINTR); `written` counts bytes. Errors: GAZ_EIO. */
struct gaz_fd_sink {
	int fd;
	int64_t written;
};
int gaz_fd_sink_write(void *sink, const void *buf, size_t len, struct gaz_status *st);

/* Source over borrowed memory data[off, len). */
struct gaz_mem_src {
	const uint8_t *data;
	size_t len;
	size_t off;
};
int gaz_mem_src_read(void *src, void *buf, size_t cap, size_t *n, struct gaz_status *st);

/* Sink growing an owned heap buffer up to `max` bytes (0 = no limit set:
 * SIZE_MAX). Beyond max: GAZ_ERANGE. Free `data` with free() or
 * gaz_mem_sink_release. Zero-initialise, then set max. */
struct gaz_mem_sink {
	uint8_t *data;
	size_t len;
	size_t cap;
	size_t max;
};
int gaz_mem_sink_write(void *sink, const void *buf, size_t len, struct gaz_status *st);
void gaz_mem_sink_release(struct gaz_mem_sink *s);

struct gaz_encoder;
struct gaz_decoder;

/* gaz_encoder_new makes an encoder for `codec` writing to `write(arg, ...)`
 * (borrowed until gaz_encoder_free). Nothing is written until data or
 * finish. Returns 0 and *out (free with gaz_encoder_free), GAZ_EINVAL for an
 * invalid codec, GAZ_ENOMEM. */
int gaz_encoder_new(int codec, gaz_write_fn write, void *arg, struct gaz_encoder **out,
		    struct gaz_status *st);

/* gaz_encoder_write compresses `len` bytes. Errors from the sink are
 * returned as they are; GAZ_EINVAL after finish; GAZ_ENOMEM/GAZ_EIO from
 * the compressor. After an error the encoder can only be freed. */
int gaz_encoder_write(struct gaz_encoder *enc, const void *buf, size_t len,
		      struct gaz_status *st);

/* gaz_encoder_finish writes everything pending and the stream's end (a
 * gzip member is always written, so an empty GZIP file is still valid).
 * Idempotent. Returns as gaz_encoder_write. */
int gaz_encoder_finish(struct gaz_encoder *enc, struct gaz_status *st);

/* gaz_encoder_bytes_in: uncompressed bytes accepted so far. */
int64_t gaz_encoder_bytes_in(const struct gaz_encoder *enc);

/* gaz_encoder_free releases the encoder (NULL ignored); it does not finish
 * the stream. */
void gaz_encoder_free(struct gaz_encoder *enc);

/* gaz_encoder_write_cb adapts an encoder to a gaz_write_fn (arg = encoder). */
int gaz_encoder_write_cb(void *enc, const void *buf, size_t len, struct gaz_status *st);

/* gaz_decoder_new makes a decoder of `codec` pulling compressed bytes from
 * `read(arg, ...)` (borrowed until gaz_decoder_free). Returns 0 and *out
 * (free with gaz_decoder_free), GAZ_EINVAL for an invalid codec, GAZ_ENOMEM. */
int gaz_decoder_new(int codec, gaz_read_fn read, void *arg, struct gaz_decoder **out,
		    struct gaz_status *st);

/* gaz_decoder_read returns decompressed bytes: 0 with 1 <= *n <= cap,
 * GAZ_EOF at the clean end of the stream, GAZ_EPROTO for corrupt, truncated
 * or trailing-garbage input, or the source's error. An empty source is a
 * clean, empty stream for every codec but GZIP and GZIP_OFFLOAD_DECOMPRESSION
 * (as `gzip -d`, which rejects an empty file). Errors are sticky. */
int gaz_decoder_read(struct gaz_decoder *dec, void *buf, size_t cap, size_t *n,
		     struct gaz_status *st);

/* gaz_decoder_read_cb adapts a decoder to a gaz_read_fn (arg = decoder). */
int gaz_decoder_read_cb(void *dec, void *buf, size_t cap, size_t *n, struct gaz_status *st);

/* gaz_decoder_free releases the decoder (NULL ignored). */
void gaz_decoder_free(struct gaz_decoder *dec);

/* gaz_codec_compress_file compresses all of `in_fd` (read with pread from
 * offset 0 to end of file) and appends the result to `out_fd` with write(2).
 * For NONE the bytes are copied. Returns 0, GAZ_EINVAL (codec), GAZ_EIO,
 * GAZ_ENOMEM. */
int gaz_codec_compress_file(int codec, int in_fd, int out_fd, struct gaz_status *st);

/* gaz_crc32c: CRC-32C (Castagnoli) of buf, continuing from `crc` (0 to
 * start). Thread-safe. */
uint32_t gaz_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
