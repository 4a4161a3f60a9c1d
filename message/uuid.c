/*
 * uuid.c - message UUIDs, Clocks and ProducerIDs (gazette/message.h has
 * the byte layout). Pure functions over 16-byte values, except the clock's
 * atomics and the producer's randomness.
 */
#include <openssl/rand.h>
#include <strings.h>
#include <string.h>
#include <time.h>

#include "common/hex.h"
#include "gazette/message.h"

/* 100 ns intervals from the Gregorian reform (1582-10-15) to the Unix
 * epoch (RFC 4122 §4.1.4). */
#define GREGORIAN_TO_UNIX_100NS 122192928000000000ULL
#define CLOCK_UNITS_PER_US 160u

int gaz_producer_id_new(gaz_producer_id *out)
{
	gaz_producer_id id;
	if (RAND_bytes(id.b, (int)sizeof id.b) != 1)
		return GAZ_EIO;
	id.b[0] |= 0x01;
	*out = id;
	return 0;
}

gaz_clock_t gaz_clock_from_unix(int64_t sec, int64_t nsec)
{
	/* In 100 ns steps; negative results (before 1582) have no Clock. */
	__int128 t = (__int128)sec * 10000000 + nsec / 100 + (__int128)GREGORIAN_TO_UNIX_100NS;
	if (t < 0 || t >= ((__int128)1 << 60))
		return 0;
	return (gaz_clock_t)t << 4;
}

void gaz_clock_to_unix(gaz_clock_t c, int64_t *sec, int64_t *nsec)
{
	int64_t ticks = (int64_t)((c >> 4) - GREGORIAN_TO_UNIX_100NS);
	int64_t s = ticks / 10000000, rem = ticks % 10000000;
	if (rem < 0) { /* floor, so nsec stays in [0, 1e9) before 1970 */
		rem += 10000000;
		s--;
	}
	*sec = s;
	*nsec = rem * 100;
}

void gaz_clock_update(gaz_clock *c, int64_t sec, int64_t nsec)
{
	uint64_t next = gaz_clock_from_unix(sec, nsec);
	uint64_t prev = atomic_load(c);
	while (next > prev && !atomic_compare_exchange_weak(c, &prev, next))
		;
}

void gaz_clock_update_now(gaz_clock *c)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	gaz_clock_update(c, ts.tv_sec, ts.tv_nsec);
}

gaz_clock_t gaz_clock_tick(gaz_clock *c)
{
	return atomic_fetch_add(c, CLOCK_UNITS_PER_US) + CLOCK_UNITS_PER_US;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

int gaz_uuid_build(gaz_uuid *out, const gaz_producer_id *producer, gaz_clock_t clock, unsigned flags)
{
	if (flags & ~(unsigned)GAZ_FLAGS_MASK)
		return GAZ_EINVAL;
	gaz_uuid u;
	put_be32(u.b, (uint32_t)(clock >> 4));
	put_be16(u.b + 4, (uint16_t)(clock >> 36));
	put_be16(u.b + 6, (uint16_t)((clock >> 52) | 0x1000));
	put_be16(u.b + 8, (uint16_t)(((clock & 0xF) << 10) | flags | 0x8000));
	memcpy(u.b + 10, producer->b, 6);
	*out = u;
	return 0;
}

gaz_clock_t gaz_uuid_clock(const gaz_uuid *u)
{
	/* time_hi's version nibble shifts out past bit 63. */
	return (uint64_t)be32(u->b) << 4 | (uint64_t)be16(u->b + 4) << 36 | (uint64_t)be16(u->b + 6) << 52 |
	       (uint64_t)((u->b[8] >> 2) & 0xF);
}

unsigned gaz_uuid_flags(const gaz_uuid *u)
{
	return be16(u->b + 8) & GAZ_FLAGS_MASK;
}

gaz_producer_id gaz_uuid_producer(const gaz_uuid *u)
{
	gaz_producer_id p;
	memcpy(p.b, u->b + 10, 6);
	return p;
}

bool gaz_uuid_is_zero(const gaz_uuid *u)
{
	static const gaz_uuid zero;
	return memcmp(u->b, zero.b, 16) == 0;
}

void gaz_uuid_format(const gaz_uuid *u, char out[GAZ_UUID_STR_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	char *p = out;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[u->b[i] >> 4];
		*p++ = hex[u->b[i] & 0xF];
	}
	*p = '\0';
}

int gaz_uuid_parse(const char *s, size_t len, gaz_uuid *out, struct gaz_status *st)
{
	bool dashed = true;
	if (len == 36 + 9 && strncasecmp(s, "urn:uuid:", 9) == 0) {
		s += 9;
		len -= 9;
	} else if (len == 38 && s[0] == '{' && s[37] == '}') {
		s++;
		len -= 2;
	} else if (len == 32) {
		dashed = false;
	}
	if (len != (dashed ? 36u : 32u))
		return gaz_status_set(st, GAZ_EINVAL, "invalid UUID length %zu", len);
	if (dashed && (s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-'))
		return gaz_status_set(st, GAZ_EINVAL, "invalid UUID format %.*s", (int)len, s);
	gaz_uuid u;
	size_t at = 0;
	for (int i = 0; i < 16; i++) {
		if (dashed && (at == 8 || at == 13 || at == 18 || at == 23))
			at++;
		int hi = gaz_hex_digit(s[at]), lo = gaz_hex_digit(s[at + 1]);
		if (hi < 0 || lo < 0)
			return gaz_status_set(st, GAZ_EINVAL, "invalid UUID format %.*s", (int)len, s);
		u.b[i] = (uint8_t)(hi << 4 | lo);
		at += 2;
	}
	*out = u;
	return 0;
}
