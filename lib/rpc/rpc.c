/*
 * rpc.c - the grpc runtime of gazette-c: grpc_init, the one process-wide
 * NEXT completion queue, its poller threads, and the small helpers shared by
 * server.c, client.c and listen.c (packing, deadlines, condvars).
 *
 * Invariants: pollers only dispatch (grpc-core.md §2): each event's tag is a
 * struct gaz__tag whose cb runs on the poller and must not block. The queue
 * lives from gaz_rpc_init to gaz_rpc_shutdown; everything bound to it
 * (servers, channels, calls) must be gone before shutdown, as grpc requires
 * for grpc_completion_queue_shutdown.
 */
#include "rpc/rpc_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

#define MAX_POLLERS 2

static grpc_completion_queue *g_cq;
static pthread_t g_pollers[MAX_POLLERS];
static int g_npollers;

static int wait_spawned(int64_t timeout_ns);

grpc_completion_queue *gaz__rpc_cq(void)
{
	return g_cq;
}

/* Pollers drain the queue until grpc_completion_queue_shutdown has been
 * called and every pending event delivered. */
static _Thread_local bool on_poller;

bool gaz__rpc_on_poller(void)
{
	return on_poller;
}

static void *poller_main(void *arg)
{
	(void)arg;
	on_poller = true;
	pthread_setname_np(pthread_self(), "gaz-rpc-poller");
	for (;;) {
		grpc_event ev = grpc_completion_queue_next(
			g_cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type == GRPC_OP_COMPLETE) {
			struct gaz__tag *t = ev.tag;
			gaz__rpc_tag_take(t);
			t->cb(t, ev.success);
		}
	}
	return NULL;
}

/* grpc core's own lines (gpr_log) come here and go out as ours: one line
 * with grpc's text as the message, component=grpc and file=<name>:<line>,
 * grpc's DEBUG, INFO and ERROR as our debug, info and error.
 *
 * Which lines grpc hands us is its own choice, as grpc documents
 * (doc/environment_variables.md): GRPC_VERBOSITY (DEBUG, INFO or ERROR, the
 * default) and GRPC_TRACE, whose tracers log at INFO and DEBUG. We never
 * call gpr_set_log_verbosity, which would make grpc ignore GRPC_VERBOSITY
 * (gpr_log_verbosity_init keeps a verbosity already set). When
 * GRPC_VERBOSITY is set, grpc's lines also pass over our --log.level: the
 * variable asked for them, and traces would otherwise need a matching
 * --log.level too. Unset, our level applies to grpc's errors as to ours. */
static bool g_grpc_verbosity_env;

void gaz__rpc_log(gpr_log_func_args *a)
{
	enum gaz_log_level lvl = a->severity == GPR_LOG_SEVERITY_DEBUG  ? GAZ_LOG_DEBUG
				 : a->severity == GPR_LOG_SEVERITY_INFO ? GAZ_LOG_INFO
									: GAZ_LOG_ERROR;
	const char *file = a->file ? a->file : "", *slash = strrchr(file, '/');
	char msg[2048];
	size_t n;

	if ((int)lvl < gaz_log_level_cur && !g_grpc_verbosity_env)
		return;
	/* grpc's messages may end in a newline: one line per event. */
	n = (size_t)snprintf(msg, sizeof(msg), "%s", a->message ? a->message : "");
	n = n < sizeof(msg) ? n : sizeof(msg) - 1;
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r' || msg[n - 1] == ' '))
		msg[--n] = 0;
	gaz_log_emit(lvl, msg, "component=grpc file=%s:%d", slash ? slash + 1 : file, a->line);
}

/* Debian builds abseil without NDEBUG, so every absl::Mutex grpc takes
 * (a few per completion, per call op) also maintains abseil's lock-order
 * graph for deadlock detection: 2-4% of an idle broker's samples. That is
 * a debugging aid of abseil's, not something grpc relies on; the mode
 * abseil's release builds have (kIgnore, 0) is set here, before grpc
 * creates its first mutex. The setter is looked up by its mangled name in
 * abseil's inline namespaces (Debian's and upstream's); a build without
 * it is left as it is. Source: absl/synchronization/mutex.h,
 * SetMutexDeadlockDetectionMode. */
static void absl_deadlock_detection_off(void)
{
	static const char *const names[] = {
		"_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
		"_ZN4absl12lts_2022062329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
		"_ZN4absl29SetMutexDeadlockDetectionModeENS_15OnDeadlockCycleE",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *sym = dlsym(RTLD_DEFAULT, names[i]);
		if (sym) {
			void (*set_mode)(int);
			memcpy(&set_mode, &sym, sizeof(set_mode));
			set_mode(0); /* absl::OnDeadlockCycle::kIgnore */
			return;
		}
	}
}

int gaz_rpc_init(int pollers)
{
	const char *v = getenv("GRPC_VERBOSITY");

	if (pollers < 1 || pollers > MAX_POLLERS || g_cq)
		return GAZ_EINVAL;
	g_grpc_verbosity_env = v && *v;
	gpr_set_log_function(gaz__rpc_log);
	absl_deadlock_detection_off();
	grpc_init();
	g_cq = grpc_completion_queue_create_for_next(NULL);
	for (g_npollers = 0; g_npollers < pollers; g_npollers++) {
		if (pthread_create(&g_pollers[g_npollers], NULL, poller_main, NULL) != 0)
			break;
	}
	if (g_npollers == 0) {
		grpc_completion_queue_shutdown(g_cq);
		grpc_completion_queue_destroy(g_cq);
		g_cq = NULL;
		grpc_shutdown();
		return GAZ_ENOMEM;
	}
	return 0;
}

int gaz_rpc_default_pollers(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 1;
	return CPU_COUNT(&set) >= 4 ? 2 : 1;
}

void gaz_rpc_shutdown(void)
{
	if (!g_cq)
		return;
	grpc_completion_queue_shutdown(g_cq);
	for (int i = 0; i < g_npollers; i++)
		pthread_join(g_pollers[i], NULL);
	g_npollers = 0;
	grpc_completion_queue_destroy(g_cq);
	g_cq = NULL;
	/* Called from an application thread, this cleans up synchronously. */
	grpc_shutdown();
	/* With the servers' transports gone, TLS pumps see their plain side
	 * close and end, and listener connections finish their hand-off:
	 * let them, so that the process does not exit while one is halfway
	 * through freeing a connection (LeakSanitizer, which checks at exit
	 * while other threads still run, reports the half-freed parts). A
	 * thread still blocked after 2 s is left to the exit. */
	int live = wait_spawned(2000 * GAZ_NS_PER_MS);
	if (live)
		gaz_debug("exiting with connection threads still running", "threads=%d", live);
}

grpc_byte_buffer *gaz__rpc_pack(const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	grpc_slice s = grpc_slice_malloc(len);
	grpc_byte_buffer *bb;

	protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(s));
	bb = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s);
	return bb;
}

int gaz__rpc_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc,
		    ProtobufCMessage **out, struct gaz_status *st)
{
	grpc_byte_buffer_reader r;
	grpc_slice s;

	*out = NULL;
	if (!grpc_byte_buffer_reader_init(&r, bb))
		return gaz_status_set(st, GAZ_EPROTO, "message failed to decompress");
	s = grpc_byte_buffer_reader_readall(&r);
	grpc_byte_buffer_reader_destroy(&r);
	*out = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(s),
					 GRPC_SLICE_START_PTR(s));
	grpc_slice_unref(s);
	if (!*out)
		return gaz_status_set(st, GAZ_EPROTO, "message failed to unpack as %s",
				      desc->name);
	return 0;
}

int gaz__rpc_copy_out(grpc_byte_buffer *bb, uint8_t **buf, size_t *len)
{
	grpc_byte_buffer_reader r;
	grpc_slice s;
	size_t n = grpc_byte_buffer_length(bb), off = 0;

	*buf = malloc(n ? n : 1);
	*len = 0;
	if (!*buf)
		return GAZ_ENOMEM;
	if (!grpc_byte_buffer_reader_init(&r, bb)) {
		free(*buf);
		*buf = NULL;
		return GAZ_EPROTO;
	}
	/* Slice by slice: one copy instead of readall's plus ours. */
	while (grpc_byte_buffer_reader_next(&r, &s)) {
		size_t sl = GRPC_SLICE_LENGTH(s);
		if (off + sl <= n)
			memcpy(*buf + off, GRPC_SLICE_START_PTR(s), sl);
		off += sl;
		grpc_slice_unref(s);
	}
	grpc_byte_buffer_reader_destroy(&r);
	*len = off < n ? off : n;
	return 0;
}

gpr_timespec gaz__rpc_to_gpr(int64_t deadline_ns)
{
	int64_t left;

	if (deadline_ns == GAZ_DEADLINE_NEVER)
		return gpr_inf_future(GPR_CLOCK_MONOTONIC);
	left = deadline_ns - gaz_mono_ns();
	if (left < 0)
		left = 0;
	return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
			    gpr_time_from_nanos(left, GPR_TIMESPAN));
}

int64_t gaz__rpc_from_gpr(gpr_timespec t)
{
	gpr_timespec left;
	int64_t now = gaz_mono_ns();

	if (t.tv_sec == INT64_MAX)
		return GAZ_DEADLINE_NEVER;
	if (t.tv_sec == INT64_MIN)
		return now;
	/* gpr's monotonic clock has its own epoch: carry over the time left. */
	t = gpr_convert_clock_type(t, GPR_CLOCK_MONOTONIC);
	left = gpr_time_sub(t, gpr_now(GPR_CLOCK_MONOTONIC));
	if (left.tv_sec < 0)
		return now;
	if (left.tv_sec > (INT64_MAX - now) / GAZ_NS_PER_S - 1)
		return GAZ_DEADLINE_NEVER;
	return now + left.tv_sec * GAZ_NS_PER_S + left.tv_nsec;
}

void gaz__rpc_cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

bool gaz__rpc_timedwait(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns)
{
	struct timespec ts;

	if (deadline_ns == GAZ_DEADLINE_NEVER) {
		pthread_cond_wait(cv, mu);
		return false;
	}
	if (gaz_mono_ns() >= deadline_ns)
		return true;
	ts = gaz_abstime_of(deadline_ns);
	return pthread_cond_timedwait(cv, mu, &ts) == ETIMEDOUT && gaz_mono_ns() >= deadline_ns;
}

const char *gaz__rpc_unix_path(const char *addr)
{
	const char *p;

	if (!addr || strncmp(addr, "unix:", 5) != 0)
		return NULL;
	p = addr + 5;
	if (strncmp(p, "//", 2) == 0) /* "unix://host/path": skip the host */
		p = strchr(p + 2, '/');
	return p && p[0] == '/' && p[1] != '\0' ? p : NULL;
}

/* Threads gaz__rpc_spawn started that are still running (listener
 * connections, TLS pumps, server workers), guarded by spawn_mu; the last
 * one to end signals spawn_cond (gaz_rpc_shutdown waits for them). */
static pthread_mutex_t spawn_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t spawn_cond = PTHREAD_COND_INITIALIZER;
static int spawn_live;

struct spawned {
	void *(*fn)(void *);
	void *arg;
};

static void *spawned_main(void *arg)
{
	struct spawned sp = *(struct spawned *)arg;

	free(arg);
	sp.fn(sp.arg);
	pthread_mutex_lock(&spawn_mu);
	if (--spawn_live == 0)
		pthread_cond_broadcast(&spawn_cond);
	pthread_mutex_unlock(&spawn_mu);
	return NULL;
}

/* wait_spawned waits until every spawned thread has ended or
 * `timeout_ns` passed; returns how many still run. */
static int wait_spawned(int64_t timeout_ns)
{
	int64_t deadline = gaz_mono_ns() + timeout_ns;
	struct timespec ts = {0};
	int live;

	pthread_mutex_lock(&spawn_mu);
	while (spawn_live > 0 && gaz_mono_ns() < deadline) {
		/* spawn_cond uses the realtime clock (static initializer). */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&spawn_cond, &spawn_mu, &ts);
	}
	live = spawn_live;
	pthread_mutex_unlock(&spawn_mu);
	return live;
}

int gaz__rpc_spawn(void *(*fn)(void *), void *arg)
{
#if defined(__SANITIZE_ADDRESS__)
	const size_t stack = 2u << 20; /* ASan frames are several times larger */
#else
	const size_t stack = 256u << 10;
#endif
	pthread_attr_t a;
	pthread_t t;
	int rc;

	struct spawned *sp = malloc(sizeof(*sp));

	if (!sp)
		return ENOMEM;
	*sp = (struct spawned){fn, arg};
	pthread_mutex_lock(&spawn_mu);
	spawn_live++;
	pthread_mutex_unlock(&spawn_mu);
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, stack);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &a, spawned_main, sp);
	pthread_attr_destroy(&a);
	if (rc) {
		free(sp);
		pthread_mutex_lock(&spawn_mu);
		spawn_live--;
		pthread_mutex_unlock(&spawn_mu);
	}
	return rc;
}
