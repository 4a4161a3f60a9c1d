/*
 * rpc_int.h - internals shared by the lib/rpc sources (rpc.c, server.c,
 * client.c, listen.c). Never included outside lib/rpc: it pulls in grpc.
 *
 * Invariants: every tag handed to grpc points at a struct whose first member
 * is a struct gaz__tag, so pollers dispatch without knowing the tag's type
 * (style.md "Concurrency"). Completion functions run on poller threads and
 * never block: they lock, record, signal, or start the next batch.
 */
#ifndef GAZ_RPC_RPC_INT_H
#define GAZ_RPC_RPC_INT_H

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>
#include <pthread.h>

#include "rpc/rpc.h"

/* The first member of every grpc tag. `ok` is grpc_event.success. */
struct gaz__tag {
	void (*cb)(void *tag, int ok);
};

/* ThreadSanitizer sees no synchronisation inside grpc (Debian's grpc is
 * not instrumented), so a completion looked to it like a race between the
 * thread that started a batch and the poller that runs its callback. A
 * tag is therefore released to TSan when it goes to grpc
 * (gaz__rpc_tag_give, before every grpc call that takes a tag) and
 * acquired when a poller takes it from the queue (gaz__rpc_tag_take):
 * the happens-before grpc's completion queue provides. The give is the
 * last access to the tag before grpc takes it: what is read of the tag
 * after it is unordered with the completion (which may free it), so a
 * caller reads what it needs of the tag first. No-ops otherwise. */
#if defined(__SANITIZE_THREAD__)
#define GAZ__RPC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GAZ__RPC_TSAN 1
#endif
#endif
#ifdef GAZ__RPC_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
static inline void gaz__rpc_tag_give(void *tag)
{
	__tsan_release(tag);
}
static inline void gaz__rpc_tag_take(void *tag)
{
	__tsan_acquire(tag);
}
#else
static inline void gaz__rpc_tag_give(void *tag)
{
	(void)tag;
}
static inline void gaz__rpc_tag_take(void *tag)
{
	(void)tag;
}
#endif

/* gaz__rpc_start_batch is grpc_call_start_batch with the tag given as
 * above; every batch of lib/rpc starts through it. */
static inline grpc_call_error gaz__rpc_start_batch(grpc_call *gc, const grpc_op *ops, size_t n,
						   void *tag)
{
	gaz__rpc_tag_give(tag);
	return grpc_call_start_batch(gc, ops, n, tag, NULL);
}

/* gaz__rpc_cq: the process-wide completion queue (valid between
 * gaz_rpc_init and gaz_rpc_shutdown). */
grpc_completion_queue *gaz__rpc_cq(void);

/* gaz__rpc_on_poller: the calling thread is one of the pollers, which
 * must never wait for a completion (they deliver them). */
bool gaz__rpc_on_poller(void);

/* A message packed once (rpc.h's gaz_rpc_pack_msg): each send makes a
 * byte buffer holding its own reference to the slice. */
struct gaz_rpc_packed {
	grpc_slice slice;
};

/* gaz__rpc_pack serializes `msg` into a new byte buffer (caller destroys it
 * with grpc_byte_buffer_destroy once the SEND_MESSAGE op completed). */
grpc_byte_buffer *gaz__rpc_pack(const ProtobufCMessage *msg);

/* gaz__rpc_unpack unpacks `bb` (borrowed) with `desc` into *out. Returns 0
 * or GAZ_EPROTO (st may be NULL). */
int gaz__rpc_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc,
		    ProtobufCMessage **out, struct gaz_status *st);

/* gaz__rpc_copy_out copies the bytes of `bb` (borrowed) into a malloc'd
 * buffer (*buf, *len; *buf non-NULL even when empty). Returns 0 or
 * GAZ_ENOMEM. */
int gaz__rpc_copy_out(grpc_byte_buffer *bb, uint8_t **buf, size_t *len);

/* Deadline conversions between monotonic ns (clock.h) and grpc time.
 * GAZ_DEADLINE_NEVER maps to and from infinite future. */
gpr_timespec gaz__rpc_to_gpr(int64_t deadline_ns);
int64_t gaz__rpc_from_gpr(gpr_timespec t);

/* gaz__rpc_cond_init initializes a condvar on CLOCK_MONOTONIC, so that
 * gaz_abstime_of deadlines work with pthread_cond_timedwait. */
void gaz__rpc_cond_init(pthread_cond_t *cv);

/* gaz__rpc_timedwait waits on cv until signalled or deadline_ns; returns
 * true when the deadline has passed. */
bool gaz__rpc_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns);

/* gaz__rpc_unix_path returns the absolute socket path inside a unix target
 * or address ("unix:///p", "unix://host/p", "unix:/p"), borrowed from
 * `addr`; NULL when `addr` is not a unix address or has no absolute path. */
const char *gaz__rpc_unix_path(const char *addr);

/* gaz__rpc_spawn starts a detached thread with a small stack (256 KiB; more
 * under sanitizers, whose frames are larger). Returns 0 or an errno. */
int gaz__rpc_spawn(void *(*fn)(void *), void *arg);

/* gaz__rpc_log is the log function gaz_rpc_init installs in grpc core
 * (gpr_set_log_function): it writes grpc's line `a` (borrowed) through
 * common/log. Called by grpc from any of its threads; exposed for tests. */
void gaz__rpc_log(gpr_log_func_args *a);

/* ---- TLS (tls.c) ------------------------------------------------------- */

/* The PEM text of a struct gaz_rpc_tls's files (each NULL when not set),
 * owned: release with gaz__tls_pems_free. */
struct gaz__tls_pems {
	char *cert, *key, *ca;
};

/* gaz__tls_pems_read reads and checks the files of `t` (NULL = none): the
 * certificate and key are given together, parse, and match; the CA file
 * holds at least one certificate; `need_cert` requires a certificate.
 * Returns 0, GAZ_EINVAL (st names the file and the reason), GAZ_ENOMEM. */
int gaz__tls_pems_read(const struct gaz_rpc_tls *t, bool need_cert, struct gaz__tls_pems *out,
		       struct gaz_status *st);
void gaz__tls_pems_free(struct gaz__tls_pems *p);

/* gaz__tls_system_roots: the PEM text of OpenSSL's default CA bundle
 * ($SSL_CERT_FILE or /usr/lib/ssl/cert.pem), malloc'd, or NULL when it
 * cannot be read (grpc then uses its own default roots). */
char *gaz__tls_system_roots(void);

/* A listener's TLS: the server SSL_CTX of a cert/key/CA file set, rebuilt
 * when the files change (tls.c). */
struct gaz__tls_server;

/* gaz__tls_server_new loads the files of `t` (cert and key required; a
 * CA makes client certificates required). NULL with st set on failure. */
struct gaz__tls_server *gaz__tls_server_new(const struct gaz_rpc_tls *t, struct gaz_status *st);
void gaz__tls_server_free(struct gaz__tls_server *s);

/* gaz__tls_accept handshakes the accepted TCP `fd` (made non-blocking)
 * until deadline_ns (monotonic), then starts a pump thread that owns `fd`
 * and moves bytes between the TLS connection and one end of a new
 * socketpair, whose other end goes to *plain_fd (the caller's to serve
 * and close: closing it ends the pump). On failure (handshake refused or
 * timed out: logged at info with `peer`; or out of resources) returns
 * GAZ_EPROTO or GAZ_ENOMEM and `fd` stays the caller's. Shutting `fd`
 * down for reading from another thread ends a handshake in progress. */
int gaz__tls_accept(struct gaz__tls_server *s, int fd, const char *peer, int64_t deadline_ns,
		    int *plain_fd);

#endif
