/* test_err.c - status text rules and errno symbols. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "common/err.h"

static void test_errno_name(void **state)
{
	(void)state;
	assert_string_equal(gaz_errno_name(ENOENT), "ENOENT");
	assert_string_equal(gaz_errno_name(ENOSPC), "ENOSPC");
	assert_string_equal(gaz_errno_name(EIO), "EIO");
	assert_string_equal(gaz_errno_name(-1), "EUNKNOWN");
	assert_string_equal(gaz_errno_name(100000), "EUNKNOWN");
}

static void test_first_error_wins(void **state)
{
	struct gaz_status st = {0};

	(void)state;
	assert_int_equal(gaz_status_set(&st, GAZ_EIO, "first %d", 1), GAZ_EIO);
	assert_int_equal(gaz_status_set(&st, GAZ_EINVAL, "second"), GAZ_EINVAL);
	assert_int_equal(st.code, GAZ_EIO);
	assert_string_equal(st.msg, "first 1");
	gaz_status_prefix(&st, "ctx: ");
	assert_string_equal(st.msg, "ctx: first 1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errno_name),
		cmocka_unit_test(test_first_error_wins),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
