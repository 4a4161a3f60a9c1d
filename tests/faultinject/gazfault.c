/*
 * gazfault.c - an LD_PRELOAD shim that injects file-system faults into a
 * real process (a broker) on command, for tests/integration/
 * test_fault_injection.py. Never linked into a product binary.
 *
 * Arming: the process starts with GAZ_FAULT_CTL=<path> in its
 * environment. The test writes lines to that file at any time, each
 *
 *     <op> <fault> <count> <path prefix>
 *
 *   op      write | pwrite | fsync | fdatasync  (pwrite covers pwrite64,
 *           fsync does not cover fdatasync: name each one you mean)
 *   fault   short  (write, pwrite: the call writes half of what it was
 *                   asked, at least 1 byte, and returns that count; a
 *                   1-byte call is passed through)
 *           E<NAME> (EIO, ENOSPC, ...: the call does nothing and fails
 *                   with that errno)
 *   count   how many calls get the fault, then the rule is spent
 *   prefix  the fault applies only to fds whose /proc/self/fd link starts
 *           with it (an O_TMPFILE spool reads "<dir>/#NNN (deleted)")
 *
 * e.g. "pwrite short 1 /tmp/x/scratch" or "fsync EIO 1 /tmp/x/fragments".
 *
 * Rules:
 * - Unarmed (no GAZ_FAULT_CTL, no file, or every rule spent) every call
 *   passes through untouched; the only cost is a stat(2) of the control
 *   file per intercepted call while GAZ_FAULT_CTL is set.
 * - The file is re-read only when its mtime, size or inode change; the
 *   counts restart from what it says then. Writing it again (even the
 *   same line) re-arms.
 * - Each injected fault writes one line "gazfault: <op> <fault> on
 *   <target> (...)" to fd 2 (with the real write), so the test sees in the
 *   process's log that, when and where it fired.
 * - Thread and async-signal safety: the state is guarded by an atomic
 *   flag taken with a bounded spin, never a mutex; a call that cannot
 *   take it (another thread is inside, or a signal handler interrupted
 *   the holder) passes through. Inside, only async-signal-safe calls are
 *   made (stat, open, read, close, readlink, write); nothing allocates.
 *   The real functions are resolved with dlsym(RTLD_NEXT) in a
 *   constructor, before the process's threads start.
 * - Sanitizer runtimes intercept the same symbols; this shim is not
 *   meant to load under them (the tests skip there).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_RULES 8
#define CTL_MAX 4096
#define PREFIX_MAX 1024
#define SPIN_MAX 1000

enum op { OP_WRITE, OP_PWRITE, OP_FSYNC, OP_FDATASYNC, OP_N };
static const char *const op_names[OP_N] = {"write", "pwrite", "fsync", "fdatasync"};

struct rule {
	enum op op;
	int err;  /* errno to fail with; 0 = short write */
	long left; /* calls still to fault */
	char prefix[PREFIX_MAX];
};

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);

static char ctl_path[PREFIX_MAX]; /* "" = never armed */
static atomic_flag busy = ATOMIC_FLAG_INIT;
/* Guarded by busy. */
static struct rule rules[MAX_RULES];
static int n_rules;
static struct timespec ctl_mtime;
static off_t ctl_size = -1;
static ino_t ctl_ino;

static void resolve(void)
{
	real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
	real_pwrite64 = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
	real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
	real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
}

__attribute__((constructor)) static void gazfault_init(void)
{
	const char *p = getenv("GAZ_FAULT_CTL");

	resolve();
	if (p && *p && strlen(p) < sizeof(ctl_path))
		memcpy(ctl_path, p, strlen(p) + 1);
}

/* ------------------------------------------------- parsing (busy held) */

static const struct {
	const char *name;
	int err;
} errnos[] = {
	{"EIO", EIO},       {"ENOSPC", ENOSPC}, {"EDQUOT", EDQUOT}, {"EROFS", EROFS},
	{"ENOENT", ENOENT}, {"EACCES", EACCES}, {"EBADF", EBADF},   {"EINTR", EINTR},
	{"EAGAIN", EAGAIN}, {"EFBIG", EFBIG},   {"EPERM", EPERM},
};

static int errno_of(const char *name)
{
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (!strcmp(errnos[i].name, name))
			return errnos[i].err;
	return -1;
}

/* Splits off the next space-separated word of *p into w[cap]. */
static bool word(char **p, char *w, size_t cap)
{
	size_t n = 0;

	while (**p == ' ' || **p == '\t')
		(*p)++;
	while (**p && **p != ' ' && **p != '\t' && n + 1 < cap)
		w[n++] = *(*p)++;
	w[n] = 0;
	return n > 0;
}

static bool parse_line(char *line, struct rule *r)
{
	char op[16], fault[16], count[24];
	char *end;
	int i;

	if (!word(&line, op, sizeof(op)) || !word(&line, fault, sizeof(fault)) ||
	    !word(&line, count, sizeof(count)) || !word(&line, r->prefix, sizeof(r->prefix)))
		return false;
	for (i = 0; i < OP_N && strcmp(op, op_names[i]); i++)
		;
	if (i == OP_N)
		return false;
	r->op = (enum op)i;
	if (!strcmp(fault, "short"))
		r->err = 0;
	else if ((r->err = errno_of(fault)) < 0)
		return false;
	if (r->err == 0 && r->op != OP_WRITE && r->op != OP_PWRITE)
		return false;
	r->left = strtol(count, &end, 10);
	return *end == 0 && r->left > 0;
}

static void load(void)
{
	char buf[CTL_MAX], *line, *nl;
	ssize_t n = 0, got;
	int fd = open(ctl_path, O_RDONLY | O_CLOEXEC);

	n_rules = 0;
	if (fd < 0)
		return;
	while (n < (ssize_t)sizeof(buf) - 1 && (got = read(fd, buf + n, sizeof(buf) - 1 - (size_t)n)) > 0)
		n += got;
	close(fd);
	buf[n] = 0;
	for (line = buf; line && *line && n_rules < MAX_RULES; line = nl) {
		if ((nl = strchr(line, '\n')))
			*nl++ = 0;
		if (parse_line(line, &rules[n_rules]))
			n_rules++;
	}
}

/* Re-reads the control file if it changed since the last look. */
static void refresh(void)
{
	struct stat sb;

	if (stat(ctl_path, &sb) != 0) {
		n_rules = 0;
		ctl_size = -1;
		return;
	}
	if (sb.st_mtim.tv_sec == ctl_mtime.tv_sec && sb.st_mtim.tv_nsec == ctl_mtime.tv_nsec &&
	    sb.st_size == ctl_size && sb.st_ino == ctl_ino)
		return;
	ctl_mtime = sb.st_mtim;
	ctl_size = sb.st_size;
	ctl_ino = sb.st_ino;
	load();
}

/* ---------------------------------------------------------- injecting */

/* The fault to inject for `op` on `fd`: 0 none, -1 short write, else an
 * errno. The rule's count is taken. `target` receives the fd's link. */
static int take_fault(enum op op, int fd, char *target, size_t cap)
{
	int fault = 0, spins = 0;
	ssize_t n = -2;

	if (!ctl_path[0])
		return 0;
	while (atomic_flag_test_and_set_explicit(&busy, memory_order_acquire)) {
		if (++spins > SPIN_MAX)
			return 0;
		sched_yield();
	}
	refresh();
	for (int i = 0; i < n_rules && !fault; i++) {
		struct rule *r = &rules[i];
		char proc[64] = "/proc/self/fd/";
		size_t k = strlen(proc), plen = strlen(r->prefix);
		if (r->op != op || r->left <= 0)
			continue;
		if (n == -2) {
			/* fd in decimal after "/proc/self/fd/" */
			char d[16];
			int m = 0;
			unsigned v = (unsigned)fd;
			do
				d[m++] = (char)('0' + v % 10);
			while ((v /= 10) && m < (int)sizeof(d));
			while (m)
				proc[k++] = d[--m];
			proc[k] = 0;
			n = readlink(proc, target, cap - 1);
			target[n > 0 ? n : 0] = 0;
		}
		if (n > 0 && (size_t)n >= plen && !strncmp(target, r->prefix, plen)) {
			r->left--;
			fault = r->err ? r->err : -1;
		}
	}
	atomic_flag_clear_explicit(&busy, memory_order_release);
	return fault;
}

/* Appends s to b[*n, cap). */
static void put(char *b, size_t *n, size_t cap, const char *s)
{
	while (*s && *n + 1 < cap)
		b[(*n)++] = *s++;
}

static void put_num(char *b, size_t *n, size_t cap, unsigned long long v)
{
	char d[24];
	int m = 0;

	do
		d[m++] = (char)('0' + v % 10);
	while ((v /= 10) && m < (int)sizeof(d));
	while (m && *n + 1 < cap)
		b[(*n)++] = d[--m];
}

/* Says on fd 2 which fault fired where. */
static void report(enum op op, int fault, const char *target, size_t asked, size_t did)
{
	char b[PREFIX_MAX + 256];
	size_t n = 0;
	const char *name = "short";

	for (size_t i = 0; fault > 0 && i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (errnos[i].err == fault)
			name = errnos[i].name;
	put(b, &n, sizeof(b), "gazfault: ");
	put(b, &n, sizeof(b), op_names[op]);
	put(b, &n, sizeof(b), " ");
	put(b, &n, sizeof(b), name);
	put(b, &n, sizeof(b), " on ");
	put(b, &n, sizeof(b), target);
	if (fault < 0) {
		put(b, &n, sizeof(b), " (wrote ");
		put_num(b, &n, sizeof(b), did);
		put(b, &n, sizeof(b), " of ");
		put_num(b, &n, sizeof(b), asked);
		put(b, &n, sizeof(b), " bytes)");
	}
	b[n++] = '\n';
	if (real_write)
		(void)!real_write(2, b, n);
}

/* A write-like call: `len` is what was asked; *len_out what to pass on.
 * Returns 0 to go on, or -1 with errno set to fail without calling. */
static int before_write(enum op op, int fd, size_t len, size_t *len_out, char *target, size_t cap,
			int *fault)
{
	*len_out = len;
	*fault = len > 1 ? take_fault(op, fd, target, cap) : 0;
	if (*fault > 0) {
		report(op, *fault, target, len, 0);
		errno = *fault;
		return -1;
	}
	if (*fault < 0)
		*len_out = len / 2;
	return 0;
}

ssize_t write(int fd, const void *buf, size_t len)
{
	char target[PREFIX_MAX];
	size_t n;
	int fault, saved;
	ssize_t w;

	if (!real_write)
		resolve();
	if (before_write(OP_WRITE, fd, len, &n, target, sizeof(target), &fault))
		return -1;
	w = real_write(fd, buf, n);
	if (fault < 0) {
		saved = errno;
		report(OP_WRITE, fault, target, len, w > 0 ? (size_t)w : 0);
		errno = saved;
	}
	return w;
}

static ssize_t do_pwrite(ssize_t (*real)(int, const void *, size_t, off_t), int fd,
			 const void *buf, size_t len, off_t off)
{
	char target[PREFIX_MAX];
	size_t n;
	int fault, saved;
	ssize_t w;

	if (before_write(OP_PWRITE, fd, len, &n, target, sizeof(target), &fault))
		return -1;
	w = real(fd, buf, n, off);
	if (fault < 0) {
		saved = errno;
		report(OP_PWRITE, fault, target, len, w > 0 ? (size_t)w : 0);
		errno = saved;
	}
	return w;
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	if (!real_pwrite)
		resolve();
	return do_pwrite(real_pwrite, fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
	if (!real_pwrite64)
		resolve();
	return do_pwrite(real_pwrite64, fd, buf, len, off);
}

static int do_sync(enum op op, int (*real)(int), int fd)
{
	char target[PREFIX_MAX];
	int fault = take_fault(op, fd, target, sizeof(target));

	if (fault > 0) {
		report(op, fault, target, 0, 0);
		errno = fault;
		return -1;
	}
	return real(fd);
}

int fsync(int fd)
{
	if (!real_fsync)
		resolve();
	return do_sync(OP_FSYNC, real_fsync, fd);
}

int fdatasync(int fd)
{
	if (!real_fdatasync)
		resolve();
	return do_sync(OP_FDATASYNC, real_fdatasync, fd);
}
