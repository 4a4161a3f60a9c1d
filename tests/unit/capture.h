/*
 * capture.h - unit tests read what the code under test writes to stderr
 * (log lines). Include after cmocka.h; the functions are static, one copy
 * per test binary.
 *
 *   cap_begin();  ...code that logs...  out = cap_end();
 *
 * cap_end returns what was written (at most 1 MiB, NUL-terminated) in
 * static storage, valid until the next cap_end. Not thread-safe: one
 * capture at a time.
 */
#ifndef GAZ_TESTS_UNIT_CAPTURE_H
#define GAZ_TESTS_UNIT_CAPTURE_H

#include <stdio.h>
#include <unistd.h>

static char cap_buf[1 << 20];
static int cap_saved = -1;
static FILE *cap_file;

static void cap_begin(void)
{
	fflush(stderr);
	cap_file = tmpfile();
	assert_non_null(cap_file);
	cap_saved = dup(STDERR_FILENO);
	assert_true(dup2(fileno(cap_file), STDERR_FILENO) >= 0);
}

static const char *cap_end(void)
{
	size_t n;

	dup2(cap_saved, STDERR_FILENO);
	close(cap_saved);
	rewind(cap_file);
	n = fread(cap_buf, 1, sizeof(cap_buf) - 1, cap_file);
	cap_buf[n] = 0;
	fclose(cap_file);
	return cap_buf;
}

#endif
