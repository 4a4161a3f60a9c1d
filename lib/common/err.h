/*
 * err.h - the one table of gazette-c error codes.
 *
 * Functions return 0 on success or a negative GAZ_E* code. Detail text goes
 * into a caller-supplied struct gaz_status (bounded, never heap). There is no
 * thread-local "last error": work hops threads. Each code maps to a gRPC
 * status code (gaz_err_grpc_code) so that handlers answer consistently.
 */
#ifndef GAZ_COMMON_ERR_H
#define GAZ_COMMON_ERR_H

#include <stdarg.h>
#include <stddef.h>

enum {
	GAZ_OK = 0,
	GAZ_EOF = 1,           /* not an error: end of a stream */
	GAZ_EINVAL = -1,       /* invalid argument or malformed input */
	GAZ_ENOMEM = -2,       /* allocation failed */
	GAZ_ECANCELLED = -3,   /* the call or operation was cancelled */
	GAZ_ETIMEDOUT = -4,    /* a deadline passed */
	GAZ_EIO = -5,          /* local I/O failed (errno in the status text) */
	GAZ_ERPC = -6,         /* a remote call failed; grpc code in status */
	GAZ_ENOTFOUND = -7,    /* the named thing does not exist */
	GAZ_EEXIST = -8,       /* the named thing already exists */
	GAZ_EPROTO = -9,       /* the peer broke the stream protocol */
	GAZ_EUNAVAIL = -10,    /* a dependency (etcd, store, peer) is unreachable */
	GAZ_ESTOPPED = -11,    /* the component is shutting down */
	GAZ_EPERM = -12,       /* permission or authorization failure */
	GAZ_ERANGE = -13,      /* a size or count exceeds a limit */
	GAZ_EFENCED = -14,     /* another instance took over (a newer fence) */
};

/* Bounded detail for an error. `code` is a GAZ_E* value; `grpc` the gRPC
 * status code the failure maps to (0 = derive from `code`). */
struct gaz_status {
	int code;
	int grpc;
	char msg[512];
};

/* gaz_status_set formats `fmt` into st->msg (truncating) and sets st->code.
 * A NULL `st` is allowed and ignored. Returns `code` so callers can write
 * `return gaz_status_set(st, GAZ_EINVAL, "...")`. Never overwrites an
 * existing non-zero code with a different one unless `st->code` is 0:
 * the first, lowest error wins (libgit2 practice). */
int gaz_status_set(struct gaz_status *st, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* gaz_status_prefix prepends context ("append to \"a/b\": ") to st->msg. */
void gaz_status_prefix(struct gaz_status *st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* gaz_status_clear resets st to success. */
void gaz_status_clear(struct gaz_status *st);

/* gaz_err_str returns a static name for a GAZ_E* code. */
const char *gaz_err_str(int code);

/* gaz_errno_name returns the symbol of errno value `err` ("ENOSPC"), a
 * static string, never NULL ("EUNKNOWN" for a value the C library does not
 * name). Messages carry it next to strerror's text, which is
 * localised and not greppable: `failed: No space left on device (ENOSPC)`.
 * Thread-safe (glibc's strerrorname_np). */
const char *gaz_errno_name(int err);

/* gaz_err_grpc_code maps a GAZ_E* code to the gRPC status code to answer
 * with (grpc_status_code values; 0 for GAZ_OK). */
int gaz_err_grpc_code(int code);

#endif
