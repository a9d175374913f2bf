/* server.c: `smcr-perf server`: serves TCP and SMC-R clients alike (issue 6).
 *
 * Threads
 *   - the accept thread (the caller of perf_server_run): accepts, reads each connection's
 *     header (proto.h) with a receive timeout, records the mode the engine gave the
 *     connection, and dispatches it: control, stream and pingpong connections get a
 *     detached thread each (blocking I/O: the natural fast path of both transports);
 *     connect connections are answered inline (one exchange, then close); conns
 *     connections are handed to the sink thread.
 *   - the sink thread (started with the first conns connection): one epoll over every
 *     conns connection, reading and discarding, so 1000 connections need no 1000 threads.
 * Memory: a struct srv_conn belongs to the thread serving it (the accept thread hands it
 * over and never touches it again); it is freed by conn_end(). A session is shared by its
 * control thread and its data connections: reference counted under srv.lock.
 * Lock: srv.lock protects the session list and every session's counters (one lock: the
 * counters change once per connection, never per byte). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"
#include "proc.h"
#include "proto.h"
#include "server.h"
#include "tr.h"
#include "util/log.h"

#define SRV_HDR_TIMEOUT_S 5  /* a connection must send its header within this */
#define SRV_END_TIMEOUT_S 30 /* END waits at most this long for the data to end */
#define SRV_THREAD_STACK (256u * 1024u)
#define SRV_RECV_BUF (256u * 1024u)

struct srv_session {
	uint64_t id;
	unsigned refs; /* srv.lock */
	/* counters since BEGIN, srv.lock */
	uint64_t bytes;
	uint32_t conns, conns_smcr, conns_fallback, open;
	pthread_cond_t changed; /* with srv.lock: open or conns changed */
	/* written and read by the session's control thread only */
	uint64_t cpu_base_us, rss_base_kib;
	struct srv_session *next; /* srv.lock */
};

struct srv {
	const struct perf_tr *tr;
	int lfd;
	bool once;
	atomic_bool stop;     /* --once: set by the control thread that ended */
	pthread_mutex_t lock; /* sessions and their counters; sink start */
	struct srv_session *sessions;
	int sink_ep; /* epoll of the sink thread, -1 until started (lock) */
	uint64_t mem_start_kib; /* resident memory at start, before any connection (read-only) */
};

struct srv_conn {
	struct srv *s;
	int fd;
	struct proto_hdr h;
	struct srv_session *sess; /* held (session_get), put by conn_end */
	uint64_t bytes;           /* payload received; the serving thread only */
};

static void session_put(struct srv *s, struct srv_session *x);

/* Finds or creates the session with that id and holds it; session_put releases. */
static struct srv_session *session_get(struct srv *s, uint64_t id)
{
	pthread_mutex_lock(&s->lock);
	struct srv_session *x = s->sessions;
	while (x && x->id != id)
		x = x->next;
	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		x->id = id;
		pthread_cond_init(&x->changed, NULL);
		x->next = s->sessions;
		s->sessions = x;
	}
	x->refs++;
	pthread_mutex_unlock(&s->lock);
	return x;
}

static void session_put(struct srv *s, struct srv_session *x)
{
	pthread_mutex_lock(&s->lock);
	if (--x->refs > 0) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	struct srv_session **pp = &s->sessions;
	while (*pp != x)
		pp = &(*pp)->next;
	*pp = x->next;
	pthread_mutex_unlock(&s->lock);
	pthread_cond_destroy(&x->changed);
	free(x);
}

/* The end of a data connection: its bytes count, it is no longer open. */
static void conn_end(struct srv_conn *c)
{
	struct srv *s = c->s;
	s->tr->close(c->fd);
	if (c->h.kind != PROTO_KIND_CTRL) {
		pthread_mutex_lock(&s->lock);
		c->sess->bytes += c->bytes;
		c->sess->open--;
		pthread_cond_broadcast(&c->sess->changed);
		pthread_mutex_unlock(&s->lock);
	}
	session_put(s, c->sess);
	free(c);
}

static void fill_reply(struct srv *s, struct srv_session *x, struct proto_reply *r)
{
	memset(r, 0, sizeof(*r));
	r->transport = (uint32_t)s->tr->kind;
	r->cpu_us = perf_cpu_us() - x->cpu_base_us;
	r->rss_kib = perf_rss_kib();
	r->rss_base_kib = x->rss_base_kib;
	pthread_mutex_lock(&s->lock);
	r->bytes = x->bytes;
	r->conns = x->conns;
	r->conns_smcr = x->conns_smcr;
	r->conns_fallback = x->conns_fallback;
	r->open = x->open;
	pthread_mutex_unlock(&s->lock);
}

/* The base of the memory figure: over smcr the server's start, since RMBs stay in the link
 * group's pool between runs (a base taken at BEGIN would leave out the RMBs this run's
 * connections reuse); TCP frees its buffers with its sockets, so BEGIN. */
static uint64_t mem_base(const struct srv *s)
{
	return s->tr->kind == PERF_TR_SMCR ? s->mem_start_kib : perf_rss_kib();
}

static void *ctrl_main(void *arg)
{
	struct srv_conn *c = arg;
	struct srv *s = c->s;
	struct srv_session *x = c->sess;
	uint8_t in[PROTO_REQ_LEN], out[PROTO_REPLY_LEN];
	struct proto_req req;
	struct proto_reply rep;

	x->cpu_base_us = perf_cpu_us();
	x->rss_base_kib = mem_base(s);
	while (tr_recv_all(s->tr, c->fd, in, sizeof(in)) == 1) {
		int rc = proto_req_decode(in, sizeof(in), &req);
		if (rc < 0) {
			fprintf(stderr, "smcr-perf server: control: %s\n", proto_err_name(rc));
			memset(&rep, 0, sizeof(rep));
			rep.status = PROTO_ST_BAD;
			proto_reply_encode(&rep, out);
			(void)tr_send_all(s->tr, c->fd, out, sizeof(out));
			break;
		}
		uint32_t status = PROTO_ST_OK;
		switch (req.op) {
		case PROTO_OP_BEGIN:
			pthread_mutex_lock(&s->lock);
			x->bytes = 0;
			x->conns = x->conns_smcr = x->conns_fallback = 0;
			pthread_mutex_unlock(&s->lock);
			x->cpu_base_us = perf_cpu_us();
			x->rss_base_kib = mem_base(s);
			break;
		case PROTO_OP_END: {
			struct timespec dl;
			clock_gettime(CLOCK_REALTIME, &dl);
			dl.tv_sec += SRV_END_TIMEOUT_S;
			pthread_mutex_lock(&s->lock);
			while (x->conns < req.arg || x->open > 0) {
				int w = pthread_cond_timedwait(&x->changed, &s->lock, &dl);
				if (w == ETIMEDOUT) {
					status = PROTO_ST_TIMEOUT;
					break;
				}
			}
			pthread_mutex_unlock(&s->lock);
			break;
		}
		case PROTO_OP_MEM:
			break;
		}
		fill_reply(s, x, &rep);
		rep.status = status;
		proto_reply_encode(&rep, out);
		if (tr_send_all(s->tr, c->fd, out, sizeof(out)) < 0)
			break;
	}
	conn_end(c);
	if (s->once) {
		/* the session was the server's whole job: its link going down now is expected */
		if (!getenv("SMCR_LOG"))
			smcr_log_set_level(SMCR_LOG_ERROR);
		atomic_store(&s->stop, true);
		/* wakes the blocking accept (EINVAL), which then sees stop */
		s->tr->shutdown(s->lfd, SHUT_RDWR);
	}
	return NULL;
}

static void *stream_main(void *arg)
{
	struct srv_conn *c = arg;
	size_t cap = c->h.size > SRV_RECV_BUF ? c->h.size : SRV_RECV_BUF;
	if (cap > 4u * 1024 * 1024)
		cap = 4u * 1024 * 1024;
	char *buf = malloc(cap);
	while (buf) {
		ssize_t n = c->s->tr->recv(c->fd, buf, cap, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		c->bytes += (uint64_t)n;
	}
	free(buf);
	conn_end(c);
	return NULL;
}

static void *pingpong_main(void *arg)
{
	struct srv_conn *c = arg;
	char *buf = malloc(c->h.size);
	while (buf && tr_recv_all(c->s->tr, c->fd, buf, c->h.size) == 1) {
		c->bytes += c->h.size;
		if (tr_send_all(c->s->tr, c->fd, buf, c->h.size) < 0)
			break;
	}
	free(buf);
	conn_end(c);
	return NULL;
}

/* connect test: one exchange, answered by the accept thread itself, then close. */
static void connect_serve(struct srv_conn *c)
{
	char stackbuf[4096];
	char *buf = c->h.size <= sizeof(stackbuf) ? stackbuf : malloc(c->h.size);
	if (buf && tr_recv_all(c->s->tr, c->fd, buf, c->h.size) == 1) {
		c->bytes += c->h.size;
		(void)tr_send_all(c->s->tr, c->fd, buf, c->h.size);
	}
	if (buf != stackbuf)
		free(buf);
	conn_end(c);
}

static void *sink_main(void *arg)
{
	struct srv *s = arg;
	struct epoll_event ev[64];
	char *buf = malloc(SRV_RECV_BUF);
	if (!buf)
		return NULL;
	for (;;) {
		int n = s->tr->epoll_wait(s->sink_ep, ev, 64, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		for (int i = 0; i < n; i++) {
			struct srv_conn *c = ev[i].data.ptr;
			bool done = false;
			/* bounded per wake-up, so one busy connection cannot starve the rest */
			for (int k = 0; k < 16; k++) {
				ssize_t r = s->tr->recv(c->fd, buf, SRV_RECV_BUF, MSG_DONTWAIT);
				if (r > 0) {
					c->bytes += (uint64_t)r;
					continue;
				}
				if (r < 0 &&
				    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
					break;
				done = true; /* EOF or error */
				break;
			}
			if (done) {
				s->tr->epoll_ctl(s->sink_ep, EPOLL_CTL_DEL, c->fd, NULL);
				conn_end(c);
			}
		}
	}
	free(buf);
	return NULL;
}

static int spawn(void *(*fn)(void *), void *arg)
{
	pthread_attr_t a;
	pthread_t t;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, SRV_THREAD_STACK);
	int rc = pthread_create(&t, &a, fn, arg);
	pthread_attr_destroy(&a);
	return rc;
}

static int sink_add(struct srv *s, struct srv_conn *c)
{
	pthread_mutex_lock(&s->lock);
	if (s->sink_ep < 0) {
		s->sink_ep = epoll_create1(EPOLL_CLOEXEC);
		if (s->sink_ep < 0 || spawn(sink_main, s) != 0) {
			if (s->sink_ep >= 0)
				close(s->sink_ep);
			s->sink_ep = -1;
			pthread_mutex_unlock(&s->lock);
			return -1;
		}
	}
	int ep = s->sink_ep;
	pthread_mutex_unlock(&s->lock);
	if (s->tr->set_nonblock(c->fd, true) < 0)
		return -1;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
	/* after this the sink thread owns c */
	return s->tr->epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void set_rcvtimeo(struct srv *s, int fd, int seconds)
{
	struct timeval tv = {.tv_sec = seconds, .tv_usec = 0};
	(void)s->tr->setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* A new connection: header, mode, accounting, dispatch. Consumes fd. */
static void serve_new(struct srv *s, int fd)
{
	uint8_t hb[PROTO_HDR_LEN];
	struct proto_hdr h;
	struct tr_conn_info ci;

	set_rcvtimeo(s, fd, SRV_HDR_TIMEOUT_S);
	int rc = tr_recv_all(s->tr, fd, hb, sizeof(hb));
	if (rc != 1) {
		s->tr->close(fd);
		return;
	}
	rc = proto_hdr_decode(hb, sizeof(hb), &h);
	if (rc < 0) {
		fprintf(stderr, "smcr-perf server: dropping a connection: %s\n",
		        proto_err_name(rc));
		s->tr->close(fd);
		return;
	}
	/* a connect exchange is answered by this thread: it keeps the timeout, so a client
	 * that never sends its payload cannot stall the accept loop */
	if (h.kind != PROTO_KIND_CONNECT)
		set_rcvtimeo(s, fd, 0);
	if (s->tr->query(fd, &ci) < 0)
		ci.mode = PERF_MODE_UNKNOWN;
	struct srv_conn *c = calloc(1, sizeof(*c));
	struct srv_session *x = c ? session_get(s, h.session) : NULL;
	if (!x) {
		free(c);
		s->tr->close(fd);
		return;
	}
	c->s = s;
	c->fd = fd;
	c->h = h;
	c->sess = x;
	if (h.kind != PROTO_KIND_CTRL) {
		pthread_mutex_lock(&s->lock);
		x->conns++;
		x->open++;
		x->conns_smcr += ci.mode == PERF_MODE_SMCR;
		x->conns_fallback += ci.mode == PERF_MODE_FALLBACK;
		pthread_cond_broadcast(&x->changed);
		pthread_mutex_unlock(&s->lock);
	}
	if (h.kind == PROTO_KIND_PINGPONG || h.kind == PROTO_KIND_CONNECT) {
		int one = 1;
		(void)s->tr->setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	switch (h.kind) {
	case PROTO_KIND_CTRL:
		rc = spawn(ctrl_main, c);
		break;
	case PROTO_KIND_STREAM:
		rc = spawn(stream_main, c);
		break;
	case PROTO_KIND_PINGPONG:
		rc = spawn(pingpong_main, c);
		break;
	case PROTO_KIND_CONNECT:
		connect_serve(c);
		rc = 0;
		break;
	case PROTO_KIND_CONNS:
		rc = sink_add(s, c);
		break;
	}
	if (rc != 0) {
		fprintf(stderr, "smcr-perf server: cannot serve a connection: %s\n",
		        strerror(rc > 0 ? rc : errno));
		conn_end(c);
	}
}

int perf_server_run(const struct perf_opts *o, const struct perf_tr *tr, int report_fd, bool quiet)
{
	/* static: detached threads may still use it while the process exits (--once) */
	static struct srv s;
	struct sockaddr_storage ss;
	socklen_t sl;
	char err[256], abuf[80];

	memset(&s, 0, sizeof(s));
	s.tr = tr;
	s.once = o->once;
	s.sink_ep = -1;
	s.mem_start_kib = perf_rss_kib();
	atomic_init(&s.stop, false);
	pthread_mutex_init(&s.lock, NULL);
	signal(SIGPIPE, SIG_IGN);
	perf_raise_nofile();

	if (tr_resolve(o->bind, o->port, true, &ss, &sl, err, sizeof(err)) < 0) {
		fprintf(stderr, "smcr-perf server: %s\n", err);
		return 1;
	}
	if (tr->kind == PERF_TR_SMCR) {
		char rule[32];
		if (o->port)
			snprintf(rule, sizeof(rule), "*:%u", o->port);
		else
			snprintf(rule, sizeof(rule), "*");
		tr_smcr_rules("server", rule);
	}
	s.lfd = tr->socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s.lfd < 0) {
		fprintf(stderr, "smcr-perf server: socket: %s\n", strerror(errno));
		return 1;
	}
	int one = 1;
	(void)tr->setsockopt(s.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (o->window) {
		/* accepted TCP sockets inherit the listener's buffer sizes */
		int w = (int)o->window;
		if (tr->setsockopt(s.lfd, SOL_SOCKET, SO_SNDBUF, &w, sizeof(w)) < 0 ||
		    tr->setsockopt(s.lfd, SOL_SOCKET, SO_RCVBUF, &w, sizeof(w)) < 0)
			fprintf(stderr, "smcr-perf server: window: %s\n", strerror(errno));
	}
	if (tr->bind(s.lfd, (struct sockaddr *)&ss, sl) < 0 || tr->listen(s.lfd, 1024) < 0) {
		fprintf(stderr, "smcr-perf server: %s: %s\n",
		        tr_fmt_addr((struct sockaddr *)&ss, abuf, sizeof(abuf)), strerror(errno));
		tr->close(s.lfd);
		return 1;
	}
	sl = sizeof(ss);
	(void)tr->getsockname(s.lfd, (struct sockaddr *)&ss, &sl);
	tr_fmt_addr((struct sockaddr *)&ss, abuf, sizeof(abuf));
	if (!quiet)
		fprintf(stderr, "smcr-perf server: listening on %s, transport %s\n", abuf,
		        tr->name);
	if (report_fd >= 0) {
		/* compare: tell the parent the port the kernel chose */
		char line[16];
		int port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
		                                    : ntohs(((struct sockaddr_in *)&ss)->sin_port);
		int n = snprintf(line, sizeof(line), "%d\n", port);
		if (write(report_fd, line, (size_t)n) != n)
			return 1;
		close(report_fd);
	}
	while (!atomic_load(&s.stop)) {
		int fd = tr->accept(s.lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN ||
			    errno == ECONNRESET || errno == EPROTO)
				continue;
			if (atomic_load(&s.stop))
				break;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				fprintf(stderr, "smcr-perf server: accept: %s\n", strerror(errno));
				usleep(100000);
				continue;
			}
			fprintf(stderr, "smcr-perf server: accept: %s\n", strerror(errno));
			break;
		}
		serve_new(&s, fd);
	}
	tr->close(s.lfd);
	/* --once: the session is over; connection threads still running end with the process */
	return atomic_load(&s.stop) ? 0 : 1;
}
