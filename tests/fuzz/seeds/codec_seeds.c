/*
 * codec_seeds.c - writes the fragment_codec fuzz target's seeds: real
 * fragment files of every codec, encoded by our own encoder (lib/fragment/
 * codec.c, the one the broker's persister uses), each prefixed with its
 * codec byte. Not a fuzz target (tests/fuzz/seeds/ is not built by make
 * fuzz); after `make fuzz` built build-fuzz/libgaz.a, from the top:
 *   clang-14 -std=c11 -D_GNU_SOURCE -Ibuild-fuzz/gen -Ilib -I. \
 *     $(pkg-config --cflags libprotobuf-c) -fsanitize=fuzzer-no-link,address,undefined \
 *     tests/fuzz/seeds/codec_seeds.c build-fuzz/libgaz.a -lgrpc -lgpr \
 *     $(pkg-config --libs libprotobuf-c openssl libzstd zlib libcurl jansson yaml-0.1 expat) \
 *     -lsnappy -lm -pthread -o /tmp/codec_seeds
 *   /tmp/codec_seeds tests/fuzz/corpus/fragment_codec
 * (the 200 KB NONE seed it writes, seed-codec1-2, is not committed: it
 * would raise the target's input length bound for little coverage).
 */
#include <stdio.h>
#include <string.h>

#include "fragment/codec.h"

static const char *const texts[] = {
	"{\"_meta\":{\"uuid\":\"9f2952f3-c6a3-11ea-8802-080607050309\"},\"key\":\"a\",\"n\":1}\n"
	"{\"_meta\":{\"uuid\":\"9f2952f4-c6a3-11ea-8802-080607050309\"},\"key\":\"b\",\"n\":2}\n",
	"",
	NULL, /* a long, repetitive body: several blocks */
};

int main(int argc, char **argv)
{
	static char big[200000];
	const char *dir = argc > 1 ? argv[1] : ".";

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = "the quick brown fox jumps over the lazy dog\n"[i % 44] + (char)(i / 5000 % 3);
	for (int codec = 1; codec <= 5; codec++) {
		for (int t = 0; t < 3; t++) {
			struct gaz_mem_sink sink = {0};
			struct gaz_encoder *enc = NULL;
			struct gaz_status st = {0};
			const char *text = texts[t] ? texts[t] : big;
			size_t len = texts[t] ? strlen(text) : sizeof(big);
			char path[512];
			FILE *f;

			if (gaz_encoder_new(codec, gaz_mem_sink_write, &sink, &enc, &st) ||
			    gaz_encoder_write(enc, text, len, &st) || gaz_encoder_finish(enc, &st)) {
				fprintf(stderr, "codec %d: %s\n", codec, st.msg);
				return 1;
			}
			gaz_encoder_free(enc);
			snprintf(path, sizeof(path), "%s/seed-codec%d-%d", dir, codec, t);
			if (!(f = fopen(path, "wb")))
				return 1;
			fputc(codec, f);
			fwrite(sink.data, 1, sink.len, f);
			fclose(f);
			gaz_mem_sink_release(&sink);
		}
	}
	return 0;
}
