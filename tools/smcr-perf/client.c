/* client.c: the four tests of `smcr-perf client` (issue 6), over one transport.
 *
 * Every run: a control connection (which, over SMC-R, also brings up the link group, so
 * the measured connections reuse it), BEGIN, the test, END. Throughput is the byte count
 * the SERVER received divided by the time from the first write to the END reply (which
 * the server sends only after every data connection reached EOF), so data still in
 * flight is never counted; the client also checks that the server received exactly what
 * it sent. Latency is measured per round trip with CLOCK_MONOTONIC. */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "proc.h"
#include "proto.h"
#include "util/clock.h"

#define CLI_RCVTIMEO_S 40       /* above the server's END wait (30 s) */
#define CLI_SETTLE_MS 2000      /* conns: the longest wait for late frees (proc.h) */
#define CLI_SETTLE_TOL_KIB 256u /* ... "settled": under this change in 20 ms */
#define CLI_WARMUP_RTTS 10      /* pingpong round trips not recorded */
#define CLI_SAMPLES_MAX (10u * 1000 * 1000)

struct cli {
	const struct perf_client_cfg *cfg;
	const struct perf_tr *tr;
	uint64_t session;
	int ctrl;
	char *err;
	size_t elen;
	/* mode of the measured connections, as the engine reports them */
	enum perf_mode mode;
	int raw_mode;
	uint32_t local_reason, peer_reason;
	unsigned first_contacts;
	unsigned seen;                    /* measured connections queried */
	uint32_t rmbe, peer_rmbe, sndbuf; /* of the first one */
};

static int cfail(struct cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes the message; errno is kept for the caller. */
static int cfail(struct cli *c, const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err, c->elen, fmt, ap);
	va_end(ap);
	errno = e;
	return -1;
}

static void set_timeo(struct cli *c, int fd, int seconds)
{
	struct timeval tv = {.tv_sec = seconds, .tv_usec = 0};
	(void)c->tr->setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* Connects and sends the header (plus extra bytes in the same write). Returns the fd or -1
 * (message in c->err). */
static int open_conn(struct cli *c, enum proto_kind kind, const void *extra, size_t elen)
{
	const struct perf_tr *tr = c->tr;
	struct proto_hdr h = {.kind = kind, .size = (uint32_t)c->cfg->size, .session = c->session};
	uint8_t stackbuf[PROTO_HDR_LEN + 4096];
	uint8_t *buf = stackbuf;
	int fd = tr->socket(c->cfg->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return cfail(c, "socket: %s", strerror(errno));
	if (kind == PROTO_KIND_PINGPONG || kind == PROTO_KIND_CONNECT) {
		int one = 1;
		(void)tr->setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	if (kind != PROTO_KIND_CTRL && c->cfg->window) {
		/* before connect: smcr sizes the send buffer and RMBE at the handshake */
		int w = (int)c->cfg->window;
		if (tr->setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &w, sizeof(w)) < 0 ||
		    tr->setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &w, sizeof(w)) < 0) {
			int e = errno;
			tr->close(fd);
			errno = e;
			return cfail(c, "setting the window: %s", strerror(e));
		}
	}
	if (tr->connect(fd, (const struct sockaddr *)&c->cfg->addr, c->cfg->addrlen) < 0) {
		int e = errno;
		char a[80];
		tr->close(fd);
		errno = e;
		return cfail(c, "connect to %s (%s): %s",
		             tr_fmt_addr((const struct sockaddr *)&c->cfg->addr, a, sizeof(a)),
		             tr->name, strerror(e));
	}
	if (PROTO_HDR_LEN + elen > sizeof(stackbuf)) {
		buf = malloc(PROTO_HDR_LEN + elen);
		if (!buf) {
			tr->close(fd);
			return cfail(c, "out of memory");
		}
	}
	proto_hdr_encode(&h, buf);
	if (elen)
		memcpy(buf + PROTO_HDR_LEN, extra, elen);
	int rc = tr_send_all(tr, fd, buf, PROTO_HDR_LEN + elen);
	int e = errno;
	if (buf != stackbuf)
		free(buf);
	if (rc < 0) {
		tr->close(fd);
		return cfail(c, "sending the header: %s", strerror(e));
	}
	return fd;
}

/* Reads the engine's word on a measured connection and folds it into the run's mode:
 * the run is "smcr" only if every measured connection is; otherwise the first connection
 * of the worst kind gives the mode and the reasons. */
static void note_mode(struct cli *c, int fd)
{
	struct tr_conn_info ci;
	if (c->tr->query(fd, &ci) < 0) {
		memset(&ci, 0, sizeof(ci));
		ci.mode = PERF_MODE_UNKNOWN;
		ci.raw_mode = -1;
	}
	c->first_contacts += ci.first_contact;
	if (c->seen++ == 0) {
		c->rmbe = ci.rmbe;
		c->peer_rmbe = ci.peer_rmbe;
		c->sndbuf = ci.sndbuf;
	}
	if (perf_mode_rank(ci.mode) <= perf_mode_rank(c->mode))
		return;
	c->mode = ci.mode;
	c->raw_mode = ci.raw_mode;
	c->local_reason = ci.local_reason;
	c->peer_reason = ci.peer_reason;
}

static int ctrl_call(struct cli *c, enum proto_op op, uint32_t arg, struct proto_reply *rep)
{
	uint8_t out[PROTO_REQ_LEN], in[PROTO_REPLY_LEN];
	struct proto_req req = {.op = op, .arg = arg};
	proto_req_encode(&req, out);
	if (tr_send_all(c->tr, c->ctrl, out, sizeof(out)) < 0)
		return cfail(c, "control: send: %s", strerror(errno));
	int rc = tr_recv_all(c->tr, c->ctrl, in, sizeof(in));
	if (rc != 1)
		return cfail(c, "control: %s",
		             rc == 0 ? "server closed the connection" : strerror(errno));
	rc = proto_reply_decode(in, sizeof(in), rep);
	if (rc < 0)
		return cfail(c, "control: bad reply: %s", proto_err_name(rc));
	if (rep->status == PROTO_ST_TIMEOUT)
		return cfail(c,
		             "server: the data connections did not end in time "
		             "(%u of %u seen, %u open)",
		             rep->conns, arg, rep->open);
	if (rep->status != PROTO_ST_OK)
		return cfail(c, "server rejected a control request");
	return 0;
}

static double secs(uint64_t a, uint64_t b)
{
	return (double)(b - a) / 1e9;
}

static int run_stream(struct cli *c, struct perf_result *r, uint64_t *t0, uint64_t *sent)
{
	size_t size = c->cfg->size;
	char *buf = malloc(size);
	if (!buf)
		return cfail(c, "out of memory");
	for (size_t i = 0; i < size; i++)
		buf[i] = (char)(i * 131u + 7u);
	int fd = open_conn(c, PROTO_KIND_STREAM, NULL, 0);
	if (fd < 0) {
		free(buf);
		return -1;
	}
	note_mode(c, fd);
	uint64_t dl = 0;
	*t0 = smcr_now_ns();
	dl = *t0 + (uint64_t)(c->cfg->duration * 1e9);
	*sent = 0;
	int rc = 0;
	while (smcr_now_ns() < dl) {
		if (tr_send_all(c->tr, fd, buf, size) < 0) {
			rc = cfail(c, "stream: send: %s", strerror(errno));
			break;
		}
		*sent += size;
	}
	free(buf);
	if (rc == 0 && c->tr->shutdown(fd, SHUT_WR) < 0)
		rc = cfail(c, "stream: shutdown: %s", strerror(errno));
	struct proto_reply rep;
	if (rc == 0)
		rc = ctrl_call(c, PROTO_OP_END, 1, &rep);
	uint64_t t1 = smcr_now_ns();
	c->tr->close(fd);
	if (rc < 0)
		return -1;
	if (rep.bytes != *sent)
		return cfail(c, "stream: the server received %llu bytes, %llu were sent",
		             (unsigned long long)rep.bytes, (unsigned long long)*sent);
	r->bytes = rep.bytes;
	r->seconds = secs(*t0, t1);
	r->value = (double)rep.bytes * 8.0 / r->seconds / 1e9;
	r->conns = 1;
	r->server_smcr = rep.conns_smcr;
	r->server_fallback = rep.conns_fallback;
	r->cpu_server_s = (double)rep.cpu_us / 1e6;
	return 0;
}

static int run_pingpong(struct cli *c, struct perf_result *r)
{
	size_t size = c->cfg->size;
	char *out = malloc(size), *in = malloc(size);
	size_t cap = 65536, n = 0;
	double *samp = malloc(cap * sizeof(*samp));
	int rc = 0, fd = -1;
	uint64_t ops = 0, t0 = 0, t1 = 0;
	if (!out || !in || !samp) {
		rc = cfail(c, "out of memory");
		goto out;
	}
	memset(out, 0x5a, size);
	fd = open_conn(c, PROTO_KIND_PINGPONG, NULL, 0);
	if (fd < 0) {
		rc = -1;
		goto out;
	}
	set_timeo(c, fd, CLI_RCVTIMEO_S);
	note_mode(c, fd);
	uint64_t dl = 0;
	for (uint64_t i = 0;; i++) {
		/* the first bytes carry the round-trip number, checked on the echo */
		size_t tag = size < sizeof(i) ? size : sizeof(i);
		memcpy(out, &i, tag);
		uint64_t a = smcr_now_ns();
		if (i == CLI_WARMUP_RTTS) {
			t0 = a;
			dl = a + (uint64_t)(c->cfg->duration * 1e9);
		} else if (i > CLI_WARMUP_RTTS && a >= dl) {
			t1 = a;
			break;
		}
		if (tr_send_all(c->tr, fd, out, size) < 0) {
			rc = cfail(c, "pingpong: send: %s", strerror(errno));
			goto out;
		}
		int got = tr_recv_all(c->tr, fd, in, size);
		uint64_t b = smcr_now_ns();
		if (got != 1) {
			rc = cfail(c, "pingpong: %s",
			           got == 0 ? "server closed the connection" : strerror(errno));
			goto out;
		}
		if (memcmp(in, out, tag) != 0) {
			rc = cfail(c, "pingpong: the echo of round trip %llu is wrong",
			           (unsigned long long)i);
			goto out;
		}
		if (i < CLI_WARMUP_RTTS)
			continue;
		ops++;
		if (n == cap && cap < CLI_SAMPLES_MAX) {
			double *m = realloc(samp, cap * 2 * sizeof(*samp));
			if (m) {
				samp = m;
				cap *= 2;
			}
		}
		if (n < cap)
			samp[n++] = (double)(b - a) / 1e3;
	}
	if (c->tr->shutdown(fd, SHUT_WR) < 0) {
		rc = cfail(c, "pingpong: shutdown: %s", strerror(errno));
		goto out;
	}
	struct proto_reply rep;
	rc = ctrl_call(c, PROTO_OP_END, 1, &rep);
	if (rc < 0)
		goto out;
	perf_sort(samp, n);
	r->value = perf_percentile(samp, n, 50.0);
	r->p99 = perf_percentile(samp, n, 99.0);
	r->p999 = perf_percentile(samp, n, 99.9);
	r->ops = ops;
	r->seconds = secs(t0, t1);
	r->conns = 1;
	r->server_smcr = rep.conns_smcr;
	r->server_fallback = rep.conns_fallback;
	r->cpu_server_s = (double)rep.cpu_us / 1e6;
out:
	if (fd >= 0)
		c->tr->close(fd);
	free(out);
	free(in);
	free(samp);
	return rc;
}

static int run_connect(struct cli *c, struct perf_result *r)
{
	size_t size = c->cfg->size;
	char *out = malloc(size), *in = malloc(size);
	int rc = 0;
	uint64_t count = 0;
	if (!out || !in) {
		free(out);
		free(in);
		return cfail(c, "out of memory");
	}
	memset(out, 0xa5, size);
	uint64_t t0 = smcr_now_ns(), dl = t0 + (uint64_t)(c->cfg->duration * 1e9), t1 = t0;
	do {
		int fd = open_conn(c, PROTO_KIND_CONNECT, out, size);
		if (fd < 0) {
			rc = -1;
			break;
		}
		set_timeo(c, fd, CLI_RCVTIMEO_S);
		note_mode(c, fd);
		int got = tr_recv_all(c->tr, fd, in, size);
		int e = errno;
		c->tr->close(fd);
		count++;
		if (got != 1) {
			rc = cfail(c, "connect: %s",
			           got == 0 ? "server closed before answering" : strerror(e));
			break;
		}
		t1 = smcr_now_ns();
	} while (t1 < dl);
	free(out);
	free(in);
	if (rc < 0)
		return -1;
	struct proto_reply rep;
	if (ctrl_call(c, PROTO_OP_END, (uint32_t)count, &rep) < 0)
		return -1;
	r->ops = count;
	r->seconds = secs(t0, t1);
	r->value = (double)count / r->seconds;
	r->conns = (unsigned)(count > UINT32_MAX ? UINT32_MAX : count);
	r->server_smcr = rep.conns_smcr;
	r->server_fallback = rep.conns_fallback;
	r->cpu_server_s = (double)rep.cpu_us / 1e6;
	return 0;
}

/* KiB grown since the base (BEGIN; over smcr the session's / server's start, see
 * perf_client_run): client PSS + server PSS + the kernel's slab and TCP buffers (proc.h:
 * the sockets' own objects, in no PSS). */
static double mem_growth(const struct proto_reply *rep, uint64_t rss0, uint64_t kmem0)
{
	return (double)perf_rss_kib() - (double)rss0 + (double)rep->rss_kib -
	       (double)rep->rss_base_kib + (double)perf_kernel_mem_kib() - (double)kmem0;
}

static int run_conns(struct cli *c, struct perf_result *r, uint64_t rss0, uint64_t kmem0)
{
	unsigned n = c->cfg->conns, open = 0;
	size_t size = c->cfg->size;
	int *fds = calloc(n, sizeof(*fds));
	char *buf = malloc(size);
	int ep = -1, rc = 0;
	uint64_t sent = 0, t0 = 0, t1 = 0;
	struct proto_reply rep;
	if (!fds || !buf) {
		rc = cfail(c, "out of memory");
		goto out;
	}
	memset(buf, 0x3c, size);
	for (; open < n; open++) {
		fds[open] = open_conn(c, PROTO_KIND_CONNS, NULL, 0);
		if (fds[open] < 0) {
			char m[200];
			snprintf(m, sizeof(m), "%s", c->err);
			rc = cfail(c, "conns: connection %u of %u: %s", open + 1, n, m);
			goto out;
		}
		note_mode(c, fds[open]);
	}
	/* memory: both ends' growth for n connections, before any payload */
	if (ctrl_call(c, PROTO_OP_MEM, 0, &rep) < 0) {
		rc = -1;
		goto out;
	}
	r->idle_mem_per_conn_kib = mem_growth(&rep, rss0, kmem0) / n;

	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		rc = cfail(c, "epoll_create1: %s", strerror(errno));
		goto out;
	}
	for (unsigned i = 0; i < n; i++) {
		struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = i};
		if (c->tr->set_nonblock(fds[i], true) < 0 ||
		    c->tr->epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) < 0) {
			rc = cfail(c, "conns: epoll set-up: %s", strerror(errno));
			goto out;
		}
	}
	struct epoll_event evs[256];
	t0 = smcr_now_ns();
	uint64_t dl = t0 + (uint64_t)(c->cfg->duration * 1e9);
	uint64_t half = t0 + (dl - t0) / 2;
	bool sampled = false;
	for (uint64_t now = t0; now < dl; now = smcr_now_ns()) {
		if (!sampled && now >= half) {
			sampled = true;
			if (ctrl_call(c, PROTO_OP_MEM, 0, &rep) < 0) {
				rc = -1;
				goto out;
			}
			r->mem_per_conn_kib = mem_growth(&rep, rss0, kmem0) / n;
		}
		int ms = (int)((dl - now) / 1000000u) + 1;
		int k = c->tr->epoll_wait(ep, evs, 256, ms);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			rc = cfail(c, "epoll_wait: %s", strerror(errno));
			goto out;
		}
		for (int j = 0; j < k; j++) {
			int fd = fds[evs[j].data.u32];
			ssize_t w = c->tr->send(fd, buf, size, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w > 0) {
				sent += (uint64_t)w;
			} else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
			           errno != EINTR) {
				rc = cfail(c, "conns: send: %s", strerror(errno));
				goto out;
			}
		}
	}
	for (unsigned i = 0; i < n; i++) {
		if (c->tr->shutdown(fds[i], SHUT_WR) < 0) {
			rc = cfail(c, "conns: shutdown: %s", strerror(errno));
			goto out;
		}
	}
	if (ctrl_call(c, PROTO_OP_END, n, &rep) < 0) {
		rc = -1;
		goto out;
	}
	t1 = smcr_now_ns();
	if (rep.bytes != sent) {
		rc = cfail(c, "conns: the server received %llu bytes, %llu were sent",
		           (unsigned long long)rep.bytes, (unsigned long long)sent);
		goto out;
	}
	r->bytes = rep.bytes;
	r->seconds = secs(t0, t1);
	r->value = (double)rep.bytes * 8.0 / r->seconds / 1e9;
	r->conns = n;
	r->server_smcr = rep.conns_smcr;
	r->server_fallback = rep.conns_fallback;
	r->cpu_server_s = (double)rep.cpu_us / 1e6;
out:
	if (ep >= 0)
		close(ep);
	for (unsigned i = 0; i < open; i++)
		c->tr->close(fds[i]);
	free(fds);
	free(buf);
	return rc;
}

int perf_session_open(const struct perf_tr *tr, const struct sockaddr_storage *addr,
                      socklen_t addrlen, struct perf_session *sess, char *err, size_t elen)
{
	struct perf_client_cfg cfg = {.tr = tr, .addr = *addr, .addrlen = addrlen, .size = 1};
	struct cli c = {.cfg = &cfg,
	                .tr = tr,
	                .session = perf_random64(),
	                .ctrl = -1,
	                .err = err,
	                .elen = elen};
	struct proto_reply rep;

	err[0] = 0;
	sess->tr = tr;
	sess->id = c.session;
	sess->mem_base_kib = perf_rss_kib();
	sess->ctrl = open_conn(&c, PROTO_KIND_CTRL, NULL, 0);
	if (sess->ctrl >= 0) {
		set_timeo(&c, sess->ctrl, CLI_RCVTIMEO_S);
		c.ctrl = sess->ctrl;
		/* a first BEGIN proves the server speaks smcr-perf on this transport */
		if (ctrl_call(&c, PROTO_OP_BEGIN, 0, &rep) == 0)
			return 0;
		tr->close(sess->ctrl);
		sess->ctrl = -1;
	}
	if (tr->kind == PERF_TR_SMCR && errno != ECONNREFUSED && strlen(err) + 1 < elen) {
		size_t n = strlen(err);
		snprintf(err + n, elen - n,
		         " (an smcr client proposes SMC-R in its first bytes: "
		         "the server must be an smcr one, not --transport tcp)");
	}
	return -1;
}

void perf_session_close(struct perf_session *sess)
{
	if (sess->ctrl >= 0)
		sess->tr->close(sess->ctrl);
	sess->ctrl = -1;
}

int perf_client_run(const struct perf_client_cfg *cfg, struct perf_session *sess,
                    struct perf_result *r, char *err, size_t elen)
{
	struct cli c = {
	    .cfg = cfg,
	    .tr = cfg->tr,
	    .session = sess->id,
	    .ctrl = sess->ctrl,
	    .err = err,
	    .elen = elen,
	    .raw_mode = -1,
	    .mode = cfg->tr->kind == PERF_TR_SMCR ? PERF_MODE_SMCR : PERF_MODE_TCP,
	};
	struct proto_reply rep;
	uint64_t sent = 0, t0 = 0;

	memset(r, 0, sizeof(*r));
	r->test = cfg->test;
	r->size = cfg->size;
	r->p99 = r->p999 = r->cpu = r->mem_per_conn_kib = r->idle_mem_per_conn_kib = NAN;
	err[0] = 0;
	if (sess->tr != cfg->tr || sess->ctrl < 0)
		return cfail(&c, "internal: the session is closed or of another transport");
	/* conns measures memory: let what an earlier run freed late go first (proc.h) */
	if (cfg->test == PERF_TEST_CONNS)
		(void)perf_mem_settle(CLI_SETTLE_MS, CLI_SETTLE_TOL_KIB);
	if (ctrl_call(&c, PROTO_OP_BEGIN, 0, &rep) < 0)
		return -1;
	uint64_t cpu0 = perf_cpu_us(), rss0 = perf_rss_kib(), kmem0 = perf_kernel_mem_kib();
	/* smcr keeps RMBs in its link group's pool (and its send rings' heap) after a run's
	 * connections close, so a later run's growth since BEGIN would leave out exactly the
	 * buffers its connections use: over smcr the base is the session's start (the server
	 * does the same). TCP frees its buffers with its sockets: BEGIN is its base. */
	if (cfg->tr->kind == PERF_TR_SMCR)
		rss0 = sess->mem_base_kib;
	int rc = -1;
	switch (cfg->test) {
	case PERF_TEST_STREAM:
		rc = run_stream(&c, r, &t0, &sent);
		break;
	case PERF_TEST_PINGPONG:
		rc = run_pingpong(&c, r);
		break;
	case PERF_TEST_CONNECT:
		rc = run_connect(&c, r);
		break;
	case PERF_TEST_CONNS:
		rc = run_conns(&c, r, rss0, kmem0);
		break;
	case PERF_TEST_COUNT:
		rc = cfail(&c, "no such test");
		break;
	}
	uint64_t cpu1 = perf_cpu_us();
	if (rc < 0)
		return -1;
	/* the server read its own end's mode from its engine: both ends must agree */
	if (c.mode == PERF_MODE_SMCR && r->server_fallback > 0) {
		fprintf(stderr,
		        "smcr-perf: the client's engine says smcr, the server's says "
		        "tcp-fallback for %u connection(s)\n",
		        r->server_fallback);
		c.mode = PERF_MODE_UNKNOWN;
	}
	r->mode = c.mode;
	r->raw_mode = c.raw_mode;
	r->first_contacts = c.first_contacts;
	r->rmbe = c.rmbe;
	r->peer_rmbe = c.peer_rmbe;
	r->sndbuf = c.sndbuf;
	r->local_reason = c.local_reason;
	r->peer_reason = c.peer_reason;
	r->cpu_client_s = (double)(cpu1 - cpu0) / 1e6;
	double cpu_s = r->cpu_client_s + r->cpu_server_s;
	if (cfg->test == PERF_TEST_STREAM || cfg->test == PERF_TEST_CONNS)
		r->cpu = r->bytes ? cpu_s / ((double)r->bytes / 1e9) : NAN;
	else
		r->cpu = r->ops ? cpu_s * 1e6 / (double)r->ops : NAN;
	return 0;
}
