/*
 * vcheck.h - shared assertions of the lib/protocol unit tests: a validator
 * result is either success (want == NULL) or GAZ_EINVAL with exactly the
 * Gazette message `want`.
 */
#ifndef GAZ_TEST_PROTOCOL_VCHECK_H
#define GAZ_TEST_PROTOCOL_VCHECK_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/err.h"

static void vcheck_at(int rc, const struct gaz_status *st, const char *want, const char *what,
		      int line)
{
	if (!want && rc != 0)
		fail_msg("line %d (%s): unexpected error %d: %s", line, what, rc, st->msg);
	if (want && rc != GAZ_EINVAL)
		fail_msg("line %d (%s): expected error \"%s\", got rc %d", line, what, want, rc);
	if (want && strcmp(st->msg, want) != 0)
		fail_msg("line %d (%s): expected \"%s\"\n                 got \"%s\"", line, what, want,
			 st->msg);
	if (want && st->code != GAZ_EINVAL)
		fail_msg("line %d (%s): status code %d", line, what, st->code);
}

/* VCHECK(validator_call_using_&st, want): declares its own status. */
#define VCHECK(call, want)                                                   \
	do {                                                                 \
		struct gaz_status st = {0};                                  \
		int rc_ = (call);                                            \
		vcheck_at(rc_, &st, (want), #call, __LINE__);                \
	} while (0)

/* A string of `n` copies of `c` in a static buffer (n < 2048). */
static const char *rep(char c, size_t n)
{
	static char buf[4][2048];
	static int k;
	char *b = buf[k++ % 4];

	memset(b, c, n);
	b[n] = '\0';
	return b;
}

#endif
