/*
 * fragment_codec.c - fuzz target: fragment file content as readers and the
 * broker decompress it from a store (lib/fragment/codec.c decoders over
 * zlib, libzstd and libsnappy with Snappy's framing format): NONE, GZIP,
 * ZSTANDARD, SNAPPY and GZIP_OFFLOAD_DECOMPRESSION, read to the end, to an
 * error, or to 64 MiB of output (a bomb bound; the decoders stream).
 *
 * Input: byte 0 picks the codec (1 + byte % 5: the CompressionCodec
 * values), the rest is the stored file. Seeds: tests/fuzz/seeds/codec_seeds.c.
 */
#include "fuzz.h"

#include "fragment/codec.h"

#define OUT_MAX (64u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[65536];
	struct gaz_mem_src src;
	struct gaz_decoder *dec = NULL;
	struct gaz_status st = {0};
	size_t total = 0, n = 0;

	if (size < 1)
		return 0;
	src = (struct gaz_mem_src){.data = data + 1, .len = size - 1, .off = 0};
	if (gaz_decoder_new(1 + data[0] % 5, gaz_mem_src_read, &src, &dec, &st))
		return 0;
	/* Reads of two sizes, as readers (64 KiB) and the SHA-1 check (small) do. */
	for (int i = 0; total < OUT_MAX; i++) {
		size_t cap = i % 2 ? sizeof(buf) : 777;
		if (gaz_decoder_read(dec, buf, cap, &n, &st))
			break;
		if (n < 1 || n > cap)
			abort(); /* the contract: 1 <= n <= cap on success */
		total += n;
	}
	gaz_decoder_free(dec);
	return 0;
}
