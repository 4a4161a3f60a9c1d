/*
 * listen.c - one listening port for gRPC (h2c) and HTTP/1.1, as Gazette's
 * cmux does (gazette-facts §1.1), by peeking at each connection's first
 * bytes and handing HTTP/2 connections to grpc through
 * gaz_rpc_server_add_fd (grpc-core.md §7, rules R1-R6).
 *
 * Threads: one accept thread; then one detached thread per connection that
 * sniffs, and either hands the fd to grpc (and ends) or serves HTTP/1 on it
 * through http_fn. Under TLS (gaz_rpc_listen_tls) that thread first
 * handshakes the TCP connection (tls.c), and from then on sniffs and serves
 * one end of a socketpair whose other end a pump thread (tls.c) joins to
 * the TLS connection: everything after the handshake is the plain path.
 *
 * Invariants:
 * - Only ever peek before the handover (R1); SO_RCVLOWAT is back at 1 when
 *   the fd leaves the sniffer (R6); handed fds are O_NONBLOCK (R3) and
 *   TCP_NODELAY (R5).
 * - Every live connection thread is on l->conns and counted until it ends;
 *   gaz_rpc_listener_close waits for the count to reach 0, so after it no
 *   sniffer can still call into grpc (R2).
 * - A connection's fd number stays ours (open) while it is on the list, so
 *   shutdown(2) at close never hits a reused number: grpc gets the fd only
 *   after it left the list, and http_fn gets a dup that it closes itself.
 *   Under TLS, c->fd is the TCP fd during the handshake and the socketpair
 *   end after it; it changes under l->mu, as the pump then owns the TCP fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "rpc/rpc_int.h"

#define SNIFF_NS (7500 * GAZ_NS_PER_MS) /* Gazette's sniff read timeout */

static const char h2_preface[24] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

struct conn {
	struct gaz_rpc_listener *l;
	struct conn *prev, *next;
	int fd;
	char peer[80];
};

struct gaz_rpc_listener {
	int lfd;
	char *unix_path; /* unlinked at close */
	struct gaz_rpc_server *srv;
	gaz_http_conn_fn http_fn;
	void *http_arg;
	struct gaz__tls_server *tls; /* NULL: plain */
	pthread_t accept_thr;

	pthread_mutex_t mu; /* guards closing, conns, nconns */
	pthread_cond_t cv;  /* nconns dropped */
	bool closing;
	struct conn *conns;
	int nconns;
};

enum sniff { SNIFF_H2, SNIFF_HTTP1, SNIFF_DROP };

/* peer_name formats the remote address as grpc does ("ipv4:a.b.c.d:p"). */
static void peer_name(int fd, char *out, size_t n)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN];

	snprintf(out, n, "unknown");
	if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
		return;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		snprintf(out, n, "ipv4:%s:%u", host, ntohs(a->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) { /* dual-stack listener */
			inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], host, sizeof(host));
			snprintf(out, n, "ipv4:%s:%u", host, ntohs(a->sin6_port));
			return;
		}
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		snprintf(out, n, "ipv6:[%s]:%u", host, ntohs(a->sin6_port));
	} else if (ss.ss_family == AF_UNIX) {
		snprintf(out, n, "unix:");
	}
}

/* ---- sniffing --------------------------------------------------------- */

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * GAZ_NS_PER_MS};

	nanosleep(&ts, NULL);
}

static bool listener_closing(struct gaz_rpc_listener *l)
{
	bool c;

	pthread_mutex_lock(&l->mu);
	c = l->closing;
	pthread_mutex_unlock(&l->mu);
	return c;
}

/* sniff_wait waits for more than `have` peekable bytes, or the deadline.
 * Returns false once the peer hung up (a partial preface cannot grow). */
static bool sniff_wait(int fd, int have, int prev, int64_t deadline_ns)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
	int64_t left = deadline_ns - gaz_mono_ns();
	int lowat = have + 1;

	if (left <= 0)
		return true;
	/* poll ignores SO_RCVLOWAT on AF_UNIX: a repeat of the same partial
	 * peek means poll returned early, so back off instead of spinning. */
	if (have > 0 && have == prev) {
		sleep_ms(2);
		return true;
	}
	if (have > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
	if (poll(&p, 1, (int)((left + GAZ_NS_PER_MS - 1) / GAZ_NS_PER_MS)) > 0 &&
	    (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return false;
	return true;
}

/* sniff peeks (never reads: R1) until the bytes decide the protocol. */
static enum sniff sniff(struct gaz_rpc_listener *l, int fd)
{
	int64_t deadline = gaz_mono_ns() + SNIFF_NS;
	char buf[sizeof(h2_preface)];
	int prev = -1, one = 1;
	enum sniff v = SNIFF_DROP;

	while (!listener_closing(l) && gaz_mono_ns() < deadline) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break; /* EOF or error before a verdict */
		if (n < 0)
			n = 0;
		if (memcmp(buf, h2_preface, (size_t)n) != 0) {
			v = SNIFF_HTTP1;
			break;
		}
		if (n == (ssize_t)sizeof(h2_preface)) {
			v = SNIFF_H2;
			break;
		}
		if (!sniff_wait(fd, (int)n, prev, deadline))
			break;
		prev = (int)n;
	}
	if (prev > 0) /* R6: a raised low-water mark starves grpc of PINGs */
		setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
	return v;
}

/* ---- connections ------------------------------------------------------ */

static void conn_unlink(struct conn *c)
{
	struct gaz_rpc_listener *l = c->l;

	if (c->prev)
		c->prev->next = c->next;
	else
		l->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

/* conn_end drops c from the listener (closing its fd if still ours). */
static void conn_end(struct conn *c, bool close_fd)
{
	struct gaz_rpc_listener *l = c->l;

	pthread_mutex_lock(&l->mu);
	if (c->prev || c->next || l->conns == c)
		conn_unlink(c);
	if (close_fd)
		close(c->fd);
	l->nconns--;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	free(c);
}

static void conn_http(struct conn *c)
{
	struct gaz_rpc_listener *l = c->l;
	int dfd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);

	if (dfd < 0) {
		gaz_warn("cannot dup http connection", "peer=%s errno=%d", c->peer, errno);
		return;
	}
	l->http_fn(dfd, c->peer, l->http_arg);
}

/* conn_tls terminates TLS on c's TCP fd; c->fd becomes the plain end. */
static bool conn_tls(struct conn *c)
{
	struct gaz_rpc_listener *l = c->l;
	int plain = -1;

	/* The handshake shares the sniff's bound: a silent client ends it. */
	if (gaz__tls_accept(l->tls, c->fd, c->peer, gaz_mono_ns() + SNIFF_NS, &plain))
		return false;
	pthread_mutex_lock(&l->mu);
	c->fd = plain; /* the TCP fd is the pump's from here */
	pthread_mutex_unlock(&l->mu);
	return true;
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct gaz_rpc_listener *l = c->l;
	enum sniff v;

	pthread_setname_np(pthread_self(), "gaz-rpc-conn");
	v = l->tls && !conn_tls(c) ? SNIFF_DROP : sniff(l, c->fd);

	if (v == SNIFF_HTTP1 && l->http_fn) {
		conn_http(c);
	} else if (v == SNIFF_H2) {
		/* Off the list first: from here grpc owns the fd number. The
		 * thread stays counted until add_fd returned (R2). */
		pthread_mutex_lock(&l->mu);
		conn_unlink(c);
		pthread_mutex_unlock(&l->mu);
		gaz_rpc_server_add_fd(l->srv, c->fd, c->peer);
		conn_end(c, false);
		return NULL;
	}
	conn_end(c, true);
	return NULL;
}

/* conn_start registers an accepted fd and starts its thread. */
static void conn_start(struct gaz_rpc_listener *l, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));
	int one = 1;

	if (!c) {
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* R5 */
	c->l = l;
	c->fd = fd;
	peer_name(fd, c->peer, sizeof(c->peer));
	pthread_mutex_lock(&l->mu);
	c->next = l->conns;
	if (l->conns)
		l->conns->prev = c;
	l->conns = c;
	l->nconns++;
	pthread_mutex_unlock(&l->mu);
	if (gaz__rpc_spawn(conn_main, c) != 0) {
		gaz_warn("cannot start connection thread", "peer=%s", c->peer);
		conn_end(c, true);
	}
}

static void *accept_main(void *arg)
{
	struct gaz_rpc_listener *l = arg;

	pthread_setname_np(pthread_self(), "gaz-rpc-accept");
	for (;;) {
		int fd = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (listener_closing(l)) {
			if (fd >= 0)
				close(fd);
			break;
		}
		if (fd >= 0) {
			conn_start(l, fd);
		} else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			   errno == ENOMEM) {
			gaz_warn("accept failed: out of resources", "errno=%d", errno);
			sleep_ms(10);
		}
	}
	return NULL;
}

/* ---- binding ---------------------------------------------------------- */

static int bind_unix(const char *path, struct gaz_status *st)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return gaz_status_set(st, GAZ_EINVAL, "unix socket path too long: \"%s\"", path);
	strcpy(sa.sun_path, path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return gaz_status_set(st, GAZ_EIO, "socket failed: %s", strerror(errno));
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, SOMAXCONN) != 0) {
		gaz_status_set(st, GAZ_EIO, "listen on \"%s\" failed: %s", path, strerror(errno));
		close(fd);
		return GAZ_EIO;
	}
	return fd;
}

/* split_hostport splits "host:port" / "[v6]:port" into buffers. */
static int split_hostport(const char *addr, char *host, size_t hn, char *port, size_t pn)
{
	const char *colon = strrchr(addr, ':');
	size_t len;

	if (!colon || strlen(colon + 1) >= pn || colon[1] == '\0')
		return GAZ_EINVAL;
	len = (size_t)(colon - addr);
	if (len >= 2 && addr[0] == '[' && addr[len - 1] == ']') {
		addr++;
		len -= 2;
	}
	if (len >= hn)
		return GAZ_EINVAL;
	memcpy(host, addr, len);
	host[len] = '\0';
	strcpy(port, colon + 1);
	return 0;
}

static int bind_tcp_one(const struct addrinfo *ai)
{
	int one = 1, fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int bind_tcp(const char *addr, int *port_out, struct gaz_status *st)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res, *ai;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[256], port[16];
	int fd = -1, rc;

	if (split_hostport(addr, host, sizeof(host), port, sizeof(port)) != 0)
		return gaz_status_set(st, GAZ_EINVAL, "malformed listen address \"%s\"", addr);
	if ((rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res)) != 0)
		return gaz_status_set(st, GAZ_EINVAL, "cannot resolve \"%s\": %s", addr,
				      gai_strerror(rc));
	for (ai = res; ai && fd < 0; ai = ai->ai_next)
		fd = bind_tcp_one(ai);
	freeaddrinfo(res);
	if (fd < 0)
		return gaz_status_set(st, GAZ_EIO, "listen on \"%s\" failed: %s", addr,
				      strerror(errno));
	getsockname(fd, (struct sockaddr *)&ss, &len);
	*port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						   : ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

struct gaz_rpc_listener *gaz_rpc_listen(const char *addr, struct gaz_rpc_server *srv,
					gaz_http_conn_fn http_fn, void *http_arg, int *port_out,
					struct gaz_status *st)
{
	return gaz_rpc_listen_tls(addr, srv, http_fn, http_arg, NULL, port_out, st);
}

struct gaz_rpc_listener *gaz_rpc_listen_tls(const char *addr, struct gaz_rpc_server *srv,
					    gaz_http_conn_fn http_fn, void *http_arg,
					    const struct gaz_rpc_tls *tls, int *port_out,
					    struct gaz_status *st)
{
	const char *upath = gaz__rpc_unix_path(addr);
	struct gaz__tls_server *ts = NULL;
	struct gaz_rpc_listener *l;
	int port = 0;

	if (!addr || !srv) {
		gaz_status_set(st, GAZ_EINVAL, "cannot listen without an address and a server");
		return NULL;
	}
	if (tls && !(ts = gaz__tls_server_new(tls, st)))
		return NULL;
	if (!(l = calloc(1, sizeof(*l)))) {
		gaz__tls_server_free(ts);
		gaz_status_set(st, GAZ_ENOMEM, "out of memory");
		return NULL;
	}
	l->tls = ts;
	if (!strncmp(addr, "unix:", 5) && !upath)
		l->lfd = gaz_status_set(st, GAZ_EINVAL, "malformed unix address \"%s\"", addr);
	else
		l->lfd = upath ? bind_unix(upath, st) : bind_tcp(addr, &port, st);
	if (l->lfd < 0 || (upath && !(l->unix_path = strdup(upath)))) {
		if (l->lfd >= 0)
			close(l->lfd);
		gaz__tls_server_free(ts);
		free(l);
		gaz_status_set(st, GAZ_ENOMEM, "out of memory");
		return NULL;
	}
	l->srv = srv;
	l->http_fn = http_fn;
	l->http_arg = http_arg;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	if (pthread_create(&l->accept_thr, NULL, accept_main, l) != 0) {
		gaz_status_set(st, GAZ_ENOMEM, "cannot start accept thread");
		close(l->lfd);
		pthread_cond_destroy(&l->cv);
		pthread_mutex_destroy(&l->mu);
		gaz__tls_server_free(ts);
		free(l->unix_path);
		free(l);
		return NULL;
	}
	if (port_out)
		*port_out = port;
	return l;
}

void gaz_rpc_listener_close(struct gaz_rpc_listener *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->closing = true;
	pthread_mutex_unlock(&l->mu);
	shutdown(l->lfd, SHUT_RDWR); /* wakes accept4 */
	pthread_join(l->accept_thr, NULL);
	close(l->lfd);
	if (l->unix_path)
		unlink(l->unix_path);
	pthread_mutex_lock(&l->mu);
	/* Wake sniffers (poll sees EOF) and HTTP readers; fds still ours. */
	for (struct conn *c = l->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RD);
	while (l->nconns > 0)
		pthread_cond_wait(&l->cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	gaz__tls_server_free(l->tls);
	free(l->unix_path);
	free(l);
}
