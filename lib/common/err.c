/* err.c - error codes, bounded status text and the gRPC code mapping. */
#include "common/err.h"

#include <stdio.h>
#include <string.h>

int gaz_status_set(struct gaz_status *st, int code, const char *fmt, ...)
{
	va_list ap;

	if (!st || st->code != 0)
		return code;
	st->code = code;
	va_start(ap, fmt);
	vsnprintf(st->msg, sizeof(st->msg), fmt, ap);
	va_end(ap);
	return code;
}

void gaz_status_prefix(struct gaz_status *st, const char *fmt, ...)
{
	char old[sizeof(st->msg)];
	size_t n, m;
	va_list ap;
	int w;

	if (!st)
		return;
	memcpy(old, st->msg, sizeof(old));
	va_start(ap, fmt);
	w = vsnprintf(st->msg, sizeof(st->msg), fmt, ap);
	va_end(ap);
	n = w < 0 ? 0 : (size_t)w;
	if (n >= sizeof(st->msg) - 1)
		return;
	m = strnlen(old, sizeof(old) - 1);
	if (m > sizeof(st->msg) - 1 - n)
		m = sizeof(st->msg) - 1 - n;
	memcpy(st->msg + n, old, m);
	st->msg[n + m] = 0;
}

void gaz_status_clear(struct gaz_status *st)
{
	if (st)
		memset(st, 0, sizeof(*st));
}

const char *gaz_errno_name(int err)
{
	const char *name = strerrorname_np(err);

	return name ? name : "EUNKNOWN";
}

const char *gaz_err_str(int code)
{
	switch (code) {
	case GAZ_OK: return "ok";
	case GAZ_EOF: return "end of stream";
	case GAZ_EINVAL: return "invalid argument";
	case GAZ_ENOMEM: return "out of memory";
	case GAZ_ECANCELLED: return "cancelled";
	case GAZ_ETIMEDOUT: return "deadline exceeded";
	case GAZ_EIO: return "i/o error";
	case GAZ_ERPC: return "rpc failed";
	case GAZ_ENOTFOUND: return "not found";
	case GAZ_EEXIST: return "already exists";
	case GAZ_EPROTO: return "protocol violation";
	case GAZ_EUNAVAIL: return "unavailable";
	case GAZ_ESTOPPED: return "stopped";
	case GAZ_EPERM: return "permission denied";
	case GAZ_ERANGE: return "limit exceeded";
	case GAZ_EFENCED: return "fenced";
	}
	return "unknown error";
}

int gaz_err_grpc_code(int code)
{
	/* Values are grpc_status_code; spelled out to keep grpc out of common. */
	switch (code) {
	case GAZ_OK: return 0;
	case GAZ_ECANCELLED: return 1;  /* CANCELLED */
	case GAZ_EINVAL: return 3;      /* INVALID_ARGUMENT */
	case GAZ_ETIMEDOUT: return 4;   /* DEADLINE_EXCEEDED */
	case GAZ_ENOTFOUND: return 5;   /* NOT_FOUND */
	case GAZ_EEXIST: return 6;      /* ALREADY_EXISTS */
	case GAZ_EPERM: return 16;      /* UNAUTHENTICATED */
	case GAZ_ERANGE: return 8;      /* RESOURCE_EXHAUSTED */
	case GAZ_EUNAVAIL: return 14;   /* UNAVAILABLE */
	case GAZ_ESTOPPED: return 14;   /* UNAVAILABLE */
	case GAZ_EFENCED: return 9;     /* FAILED_PRECONDITION */
	}
	return 2; /* UNKNOWN, as Gazette answers plain errors */
}
