/*
 * test_retry.c - the client's retry policies (client/lib/retry.c) and
 * backoff table, checked against Gazette's broker/client: which failures
 * the one-shot Append retries (appender.go Append), which ones
 * AppendService gives up on (append_service.go serveAppends, with its
 * check_registers exception), and the RetryReader's decisions
 * (retry_reader.go Read).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client/lib/client_int.h"

#define ST(name) PROTOCOL__STATUS__##name

static struct gaz__failure rpc(int grpc)
{
	return (struct gaz__failure){.rc = GAZ_ERPC, .grpc = grpc, .status = -1};
}

static struct gaz__failure status(int s)
{
	return (struct gaz__failure){.rc = gaz_client_status_err(s), .status = s};
}

static struct gaz__failure local(int rc)
{
	return (struct gaz__failure){.rc = rc, .status = -1};
}

static void test_append_retryable(void **state)
{
	struct gaz__failure f;
	const int no[] = {ST(JOURNAL_NOT_FOUND),   ST(NOT_JOURNAL_BROKER), ST(WRONG_APPEND_OFFSET),
			  ST(INDEX_HAS_GREATER_OFFSET), ST(REGISTER_MISMATCH), ST(SUSPENDED),
			  ST(NOT_ALLOWED),         ST(FRAGMENT_STORE_UNHEALTHY),
			  ST(ETCD_TRANSACTION_FAILED)};

	(void)state;
	f = rpc(GAZ_GRPC_UNAVAILABLE);
	assert_true(gaz__append_retryable(&f));
	f = rpc(GAZ_GRPC_CANCELLED); /* the broker's client went away: not ours */
	assert_false(gaz__append_retryable(&f));
	f = rpc(GAZ_GRPC_UNKNOWN); /* e.g. a replica pipeline failure */
	assert_false(gaz__append_retryable(&f));
	f = rpc(GAZ_GRPC_INVALID_ARGUMENT);
	assert_false(gaz__append_retryable(&f));
	f = rpc(GAZ_GRPC_UNAUTHENTICATED);
	assert_false(gaz__append_retryable(&f));
	f = status(ST(NOT_JOURNAL_PRIMARY_BROKER));
	assert_true(gaz__append_retryable(&f));
	f = status(ST(NO_JOURNAL_PRIMARY_BROKER));
	assert_true(gaz__append_retryable(&f));
	f = status(ST(INSUFFICIENT_JOURNAL_BROKERS));
	assert_true(gaz__append_retryable(&f));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		f = status(no[i]);
		assert_false(gaz__append_retryable(&f));
	}
	f = local(GAZ_ECANCELLED);
	assert_false(gaz__append_retryable(&f));
	f = local(GAZ_EINVAL);
	assert_false(gaz__append_retryable(&f));
	f = local(GAZ_EIO); /* the caller's input failed */
	assert_false(gaz__append_retryable(&f));
}

static void test_service_retryable(void **state)
{
	struct gaz__failure f;
	const int terminal[] = {ST(FRAGMENT_STORE_UNHEALTHY), ST(INDEX_HAS_GREATER_OFFSET),
				ST(JOURNAL_NOT_FOUND),        ST(NOT_ALLOWED),
				ST(REGISTER_MISMATCH),        ST(WRONG_APPEND_OFFSET)};
	const int retried[] = {ST(NOT_JOURNAL_PRIMARY_BROKER), ST(NO_JOURNAL_PRIMARY_BROKER),
			       ST(INSUFFICIENT_JOURNAL_BROKERS), ST(SUSPENDED),
			       ST(NOT_JOURNAL_BROKER)};

	(void)state;
	for (size_t i = 0; i < sizeof(terminal) / sizeof(terminal[0]); i++) {
		f = status(terminal[i]);
		assert_false(gaz__service_retryable(&f, false));
		assert_true(gaz__service_retryable(&f, true)); /* fenced: forever */
	}
	for (size_t i = 0; i < sizeof(retried) / sizeof(retried[0]); i++) {
		f = status(retried[i]);
		assert_true(gaz__service_retryable(&f, false));
	}
	f = rpc(GAZ_GRPC_UNAVAILABLE);
	assert_true(gaz__service_retryable(&f, false));
	f = rpc(GAZ_GRPC_UNKNOWN);
	assert_true(gaz__service_retryable(&f, false));
	f = local(GAZ_EPROTO);
	assert_true(gaz__service_retryable(&f, false));
	f = local(GAZ_ECANCELLED);
	assert_false(gaz__service_retryable(&f, false));
	assert_false(gaz__service_retryable(&f, true));
	f = local(GAZ_EINVAL);
	assert_false(gaz__service_retryable(&f, true));
}

static void test_read_policy(void **state)
{
	int attempt;

	(void)state;
	attempt = 2;
	assert_int_equal(gaz__read_policy(GAZ_ECANCELLED, -1, true, &attempt), GAZ__READ_SURFACE);
	assert_int_equal(gaz__read_policy(GAZ_EINVAL, -1, true, &attempt), GAZ__READ_SURFACE);
	/* The tail: surfaced by a non-blocking read, waited out by a blocking one. */
	assert_int_equal(gaz__read_policy(GAZ_READ_TAIL, ST(OFFSET_NOT_YET_AVAILABLE), false, &attempt),
			 GAZ__READ_SURFACE);
	assert_int_equal(gaz__read_policy(GAZ_READ_TAIL, ST(OFFSET_NOT_YET_AVAILABLE), true, &attempt),
			 GAZ__READ_RETRY_QUIET);
	/* A clean stream end restarts quietly and resets the attempts. */
	assert_int_equal(gaz__read_policy(GAZ_EOF, -1, false, &attempt), GAZ__READ_RETRY_QUIET);
	assert_int_equal(attempt, -1);
	/* Routing statuses: quiet on the first attempt only. */
	attempt = 0;
	assert_int_equal(gaz__read_policy(GAZ_EUNAVAIL, ST(NOT_JOURNAL_BROKER), false, &attempt),
			 GAZ__READ_RETRY_QUIET);
	attempt = 1;
	assert_int_equal(gaz__read_policy(GAZ_EUNAVAIL, ST(INSUFFICIENT_JOURNAL_BROKERS), false,
					  &attempt),
			 GAZ__READ_RETRY);
	/* JOURNAL_NOT_FOUND: retried through attempt 3, then surfaced. */
	attempt = 3;
	assert_int_equal(gaz__read_policy(GAZ_ENOTFOUND, ST(JOURNAL_NOT_FOUND), false, &attempt),
			 GAZ__READ_RETRY);
	attempt = 4;
	assert_int_equal(gaz__read_policy(GAZ_ENOTFOUND, ST(JOURNAL_NOT_FOUND), false, &attempt),
			 GAZ__READ_SURFACE);
	assert_int_equal(gaz__read_policy(GAZ_EPERM, ST(SUSPENDED), true, &attempt), GAZ__READ_SURFACE);
	/* Transport and validation failures are retried. */
	attempt = 9;
	assert_int_equal(gaz__read_policy(GAZ_ERPC, -1, true, &attempt), GAZ__READ_RETRY);
	assert_int_equal(gaz__read_policy(GAZ_EPROTO, -1, true, &attempt), GAZ__READ_RETRY);
	assert_int_equal(gaz__read_policy(GAZ_EUNAVAIL, ST(FRAGMENT_STORE_UNHEALTHY), true, &attempt),
			 GAZ__READ_RETRY);
	assert_int_equal(attempt, 9);
}

static void test_backoff(void **state)
{
	const int64_t want[] = {50, 50, 100, 100, 1000, 1000, 5000, 5000};

	(void)state;
	assert_int_equal(gaz_client_backoff_ms(-1), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(gaz_client_backoff_ms(i), want[i]);
	assert_int_equal(gaz_client_backoff_ms(1000), 5000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_retryable),
		cmocka_unit_test(test_service_retryable),
		cmocka_unit_test(test_read_policy),
		cmocka_unit_test(test_backoff),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
