/*
 * fuzz.h - helpers shared by the libFuzzer targets in tests/fuzz/.
 *
 * Each target is one file defining LLVMFuzzerTestOneInput; `make fuzz`
 * builds every tests/fuzz/<name>.c into build-fuzz/fuzz/<name> and runs it over
 * tests/fuzz/corpus/<name>/ (docs/fuzzing.md). Targets are deterministic,
 * touch no network or files, and free everything they allocate, so that
 * LeakSanitizer's report at the end of a run is a finding.
 *
 * Conventions: when one target covers several decoders, the input's first
 * byte picks the decoder (modulo their count) and the rest is the input
 * proper; a NUL-terminated C string is made with fuzz_str (caller frees).
 */
#ifndef GAZ_TESTS_FUZZ_H
#define GAZ_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "common/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A NUL-terminated heap copy of data[0..n) (owned: free()); aborts on OOM,
 * which libFuzzer reports. Embedded NULs stay: C string parsers see the
 * prefix, as they would from a C caller. */
static inline char *fuzz_str(const uint8_t *data, size_t n)
{
	char *s = malloc(n + 1);

	if (!s)
		abort();
	if (n)
		memcpy(s, data, n);
	s[n] = '\0';
	return s;
}

/* Splits data[0..n) at the first '\n' into two owned strings: *a before it
 * and *b after it (all of it in *a, "" in *b, when there is none). */
static inline void fuzz_split2(const uint8_t *data, size_t n, char **a, char **b)
{
	const uint8_t *nl = n ? memchr(data, '\n', n) : NULL;
	size_t k = nl ? (size_t)(nl - data) : n;

	*a = fuzz_str(data, k);
	*b = nl ? fuzz_str(nl + 1, n - k - 1) : fuzz_str(data, 0);
}

/* fuzz_pack encodes `m` as the RPC would send it and drops the bytes:
 * what a parsed and validated message must survive. */
static inline void fuzz_pack(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(n ? n : 1);

	if (!buf)
		abort();
	protobuf_c_message_pack(m, buf);
	free(buf);
}

/* A message a target unpacks, and the checks the receiver runs on it. */
struct fuzz_pb_kind {
	const ProtobufCMessageDescriptor *desc;
	int (*check)(const ProtobufCMessage *m, struct gaz_status *st);
};

/* fuzz_pb_kinds: byte 0 of data[0..size) picks one of kinds[0..n), the
 * rest is unpacked as its message (as lib/rpc unpacks a request) and,
 * when it unpacks, checked and freed. Returns 0 for libFuzzer. */
static inline int fuzz_pb_kinds(const struct fuzz_pb_kind *kinds, size_t n, const uint8_t *data, size_t size)
{
	struct gaz_status st = {0};
	ProtobufCMessage *m;
	size_t k;

	if (size < 1)
		return 0;
	k = data[0] % n;
	if (!(m = protobuf_c_message_unpack(kinds[k].desc, NULL, size - 1, data + 1)))
		return 0;
	kinds[k].check(m, &st);
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}

#endif
