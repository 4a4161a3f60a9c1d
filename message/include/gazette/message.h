/*
 * gazette/message.h - the message layer: UUIDs, clocks and producers, and
 * the read-committed sequencer (Gazette's package `message`).
 *
 * Brokers never parse messages; this layer lives in clients. Each message
 * carries a UUID (RFC 4122 version 1) whose node field is the 6-byte
 * ProducerID of its publisher, whose 60-bit timestamp and 4-bit clock
 * sequence are the publisher's Clock, and whose low 10 bits of the clock
 * sequence field are flags: OUTSIDE_TXN (committed at once), CONTINUE_TXN
 * (part of an open transaction) or ACK_TXN (commits the producer's
 * earlier CONTINUE_TXN messages of that journal up to its clock). A
 * read-committed reader queues every message it reads into a sequencer,
 * which delivers each committed message once, in journal order, and
 * drops duplicates and rolled-back messages.
 *
 * Byte layout of a UUID from producer P, clock C and flags F
 * (spec/gazette-facts.md §10.1, Gazette's message.BuildUUID):
 *
 *   bytes 0-3    big-endian uint32(C >> 4)          time_low
 *   bytes 4-5    big-endian uint16(C >> 36)         time_mid
 *   bytes 6-7    big-endian uint16(C >> 52) | 0x1000  time_hi, version 1
 *   bytes 8-9    big-endian ((C & 0xF) << 10) | F | 0x8000
 *                                 variant 10, clock sequence, flags
 *   bytes 10-15  P                                 node
 *
 * Thread safety: a gaz_clock may be ticked and updated from any thread
 * (atomics). A gaz_sequencer belongs to one thread (the reader's).
 */
#ifndef GAZETTE_MESSAGE_H
#define GAZETTE_MESSAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* ---- UUIDs, clocks, producers ----------------------------------------- */

/* A message UUID, 16 bytes in RFC 4122 order. */
typedef struct gaz_uuid {
	uint8_t b[16];
} gaz_uuid;

/* A publisher's identity: 6 random bytes with the multicast bit set, as
 * RFC 4122 §4.5 asks of a node id that is not a MAC address. */
typedef struct gaz_producer_id {
	uint8_t b[6];
} gaz_producer_id;

/* A Clock: the 60-bit RFC 4122 timestamp (100 ns since 1582-10-15) in the
 * high bits, a 4-bit sequence counter in the low 4 (Gazette's
 * message.Clock). Clocks of one producer only move forward. */
typedef uint64_t gaz_clock_t;

/* A clock shared by threads (a publisher's). Zero-initialised is 0. */
typedef _Atomic uint64_t gaz_clock;

enum {
	GAZ_FLAG_OUTSIDE_TXN = 0x0,
	GAZ_FLAG_CONTINUE_TXN = 0x1,
	GAZ_FLAG_ACK_TXN = 0x2,
	GAZ_FLAGS_MASK = 0x3FF, /* the 10 bits a UUID carries */
};

/* Length of a UUID's canonical text, 8-4-4-4-12 lowercase hex, without
 * the NUL. */
#define GAZ_UUID_STR_LEN 36

/* gaz_producer_id_new fills *out from the system's cryptographic random
 * source (OpenSSL RAND_bytes) and sets the multicast bit (b[0] |= 1), as
 * Gazette's NewProducerID. Returns 0, or GAZ_EIO when no randomness is
 * available (out untouched). One per publishing process. */
int gaz_producer_id_new(gaz_producer_id *out);

/* gaz_clock_from_unix: the Clock of a wall time (seconds and nanoseconds
 * since the Unix epoch; nsec in [0, 1e9)), precise to 100 ns, sequence
 * counter 0 (Gazette's message.NewClock). Times before 1582 are not
 * representable and give 0. */
gaz_clock_t gaz_clock_from_unix(int64_t sec, int64_t nsec);

/* gaz_clock_to_unix: the wall time of a Clock, to 100 ns; the sequence
 * counter is ignored (Gazette's Clock.AsTime). */
void gaz_clock_to_unix(gaz_clock_t c, int64_t *sec, int64_t *nsec);

/* gaz_clock_update moves *c forward to the wall time (sec, nsec) when that
 * is later than its value, resetting the sequence counter; it never moves
 * a clock back (Gazette's Clock.Update). Thread-safe. */
void gaz_clock_update(gaz_clock *c, int64_t sec, int64_t nsec);

/* gaz_clock_update_now: gaz_clock_update with CLOCK_REALTIME. */
void gaz_clock_update_now(gaz_clock *c);

/* gaz_clock_tick advances *c by 1 µs (160 Clock units: the timestamp moves
 * 10 steps of 100 ns and the counter stays) and returns the new value
 * (Gazette's Clock.Tick). Each UUID a publisher builds takes one tick, so
 * its clocks are unique and increasing. Thread-safe. */
gaz_clock_t gaz_clock_tick(gaz_clock *c);

/* gaz_uuid_build: the UUID of (producer, clock, flags) in the layout
 * above. Returns GAZ_EINVAL if flags has bits beyond GAZ_FLAGS_MASK (out
 * untouched), else 0. */
int gaz_uuid_build(gaz_uuid *out, const gaz_producer_id *producer, gaz_clock_t clock, unsigned flags);

/* The parts of a UUID (Gazette's GetClock, GetFlags, GetProducerID). Any
 * 16 bytes decode; a zero UUID has clock 0. */
gaz_clock_t gaz_uuid_clock(const gaz_uuid *u);
unsigned gaz_uuid_flags(const gaz_uuid *u);
gaz_producer_id gaz_uuid_producer(const gaz_uuid *u);
bool gaz_uuid_is_zero(const gaz_uuid *u);

/* gaz_uuid_format writes the canonical text (8-4-4-4-12, lowercase) and a
 * NUL into out, which holds at least GAZ_UUID_STR_LEN + 1 bytes. */
void gaz_uuid_format(const gaz_uuid *u, char out[GAZ_UUID_STR_LEN + 1]);

/* gaz_uuid_parse reads the text forms Go's github.com/google/uuid accepts
 * (so messages written by Gazette's applications parse): canonical
 * 8-4-4-4-12, with "urn:uuid:" before it, in braces, or 32 hex digits
 * without dashes; either case. `len` bytes of `s` (no NUL needed).
 * Returns 0, or GAZ_EINVAL with a reason in st (out untouched). */
int gaz_uuid_parse(const char *s, size_t len, gaz_uuid *out, struct gaz_status *st);

#endif
