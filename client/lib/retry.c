/*
 * retry.c - which failures the client retries, in one place and as pure
 * functions (see client_int.h), so the policies can be read side by side
 * with Gazette's broker/client (appender.go Append, append_service.go
 * serveAppends, retry_reader.go Read) and unit tested without a broker.
 * The delays between attempts are gaz_client_backoff_ms (client_core.c).
 */
#include "client/lib/client_int.h"

bool gaz__append_retryable(const struct gaz__failure *f)
{
	if (f->rc == GAZ_ERPC)
		return f->grpc == GAZ_GRPC_UNAVAILABLE;
	switch (f->status) {
	case PROTOCOL__STATUS__NOT_JOURNAL_PRIMARY_BROKER:
	case PROTOCOL__STATUS__NO_JOURNAL_PRIMARY_BROKER:
	case PROTOCOL__STATUS__INSUFFICIENT_JOURNAL_BROKERS:
		return true;
	default:
		return false;
	}
}

bool gaz__service_retryable(const struct gaz__failure *f, bool check_registers)
{
	if (f->rc == GAZ_ECANCELLED || f->rc == GAZ_EINVAL)
		return false;
	switch (f->status) {
	case PROTOCOL__STATUS__FRAGMENT_STORE_UNHEALTHY:
	case PROTOCOL__STATUS__INDEX_HAS_GREATER_OFFSET:
	case PROTOCOL__STATUS__JOURNAL_NOT_FOUND:
	case PROTOCOL__STATUS__NOT_ALLOWED:
	case PROTOCOL__STATUS__REGISTER_MISMATCH:
	case PROTOCOL__STATUS__WRONG_APPEND_OFFSET:
		return check_registers;
	default:
		return true;
	}
}

enum gaz__read_verdict gaz__read_policy(int rc, int status, bool block, int *attempt)
{
	if (rc == GAZ_ECANCELLED || rc == GAZ_EINVAL)
		return GAZ__READ_SURFACE;
	if (rc == GAZ_READ_TAIL)
		return block ? GAZ__READ_RETRY_QUIET : GAZ__READ_SURFACE;
	if (rc == GAZ_EOF) {
		/* The broker closed an established stream (a route change, a
		 * shutdown): routine, and not a failed attempt. */
		*attempt = -1;
		return GAZ__READ_RETRY_QUIET;
	}
	switch (status) {
	case PROTOCOL__STATUS__INSUFFICIENT_JOURNAL_BROKERS:
	case PROTOCOL__STATUS__NOT_JOURNAL_BROKER:
		/* Expected while a new journal is being assigned. */
		return *attempt == 0 ? GAZ__READ_RETRY_QUIET : GAZ__READ_RETRY;
	case PROTOCOL__STATUS__JOURNAL_NOT_FOUND:
		/* A journal just created may not have reached every broker. */
		return *attempt > 3 ? GAZ__READ_SURFACE : GAZ__READ_RETRY;
	case PROTOCOL__STATUS__SUSPENDED:
		return GAZ__READ_SURFACE;
	default:
		return GAZ__READ_RETRY;
	}
}
