/* statsrv.c: answers smcr-stat (tools/smcr-stat): this process's connections, link groups,
 * devices and counters, read from outside (statsrv.h has the model). */
#define _GNU_SOURCE
#include "sock/statsrv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* struct tcp_info with the byte counts */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sock/fdtab.h"
#include "sock/progress.h"
#include "sock/sig.h"
#include "sock/sock.h"
#include "sock/stats.h"
#include "sock/sys.h"
#include "smcr/smcr.h"
#include "util/log.h"

#define REQ_WAIT_MS 100	    /* a client's request must come within this */
#define REPLY_MAX (1u << 22) /* 4 MiB: about 8000 connections in JSON */

/* Whether this process's server was started (or was off by SMCR_STAT_SOCKET=0): set
 * under srv_lock, read without it by statsrv_ensure's fast path; false again in a forked
 * child (statsrv_atfork_child). */
static _Atomic bool started;
static pthread_mutex_t srv_lock = PTHREAD_MUTEX_INITIALIZER;
/* The listening socket: written under srv_lock (statsrv_ensure, the fork child), read by the
 * progress thread (on_accept, reply_build) without it; stored before the watch that lets
 * that thread see it is registered. */
static _Atomic int srv_fd = -1;
static struct prog_watch *srv_watch; /* (srv_lock) */
static struct stats_snap base;	     /* (srv_lock) counters at the last --reset */
static bool have_base;		     /* (srv_lock) */

/* ---- a growing reply buffer ---- */

struct buf {
	char *p;
	size_t len, cap;
	bool bad;
};

static void bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(struct buf *b, const char *fmt, ...)
{
	if (b->bad)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->bad = true;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 65536;
		while (cap - b->len <= (size_t)n)
			cap *= 2;
		char *q = cap <= REPLY_MAX ? realloc(b->p, cap) : NULL;
		if (!q) {
			b->bad = true;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
}

/* ---- what is reported ---- */

static void addr_str(const struct sockaddr_storage *ss, char *out, size_t n)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;
		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		port = ntohs(a->sin_port);
		snprintf(out, n, "%s:%u", ip, port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		port = ntohs(a->sin6_port);
		snprintf(out, n, "[%s]:%u", ip, port);
	} else {
		snprintf(out, n, "-");
	}
}

/* tcp_info's tcpi_state values (the kernel's TCP states; <netinet/tcp.h> names them but
 * cannot be included beside <linux/tcp.h>) */
enum { ST_FIN_WAIT2 = 5, ST_TIME_WAIT = 6, ST_CLOSE = 7, ST_CLOSE_WAIT = 8, ST_LAST_ACK = 9,
       ST_CLOSING = 11 };

struct conn_row {
	int fd;
	struct smcr_info in;
	char local[64], peer[64];
	uint64_t tcp_sent, tcp_received; /* TCP mode: the kernel's counts (TCP_INFO) */
};

static bool row_of(int fd, struct conn_row *r)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	socklen_t len = sizeof(r->in);
	if (smcr_getsockopt(fd, SOL_SMCR, SMCR_INFO, &r->in, &len) < 0)
		return false;
	struct sockaddr_storage l, p;
	socklen_t ll = sizeof(l), pl = sizeof(p);
	memset(&l, 0, sizeof(l));
	memset(&p, 0, sizeof(p));
	if (smcr_getsockname(fd, (struct sockaddr *)&l, &ll) < 0)
		l.ss_family = AF_UNSPEC;
	if (smcr_getpeername(fd, (struct sockaddr *)&p, &pl) < 0)
		p.ss_family = AF_UNSPEC;
	addr_str(&l, r->local, sizeof(r->local));
	addr_str(&p, r->peer, sizeof(r->peer));
	if (r->in.mode == SMCR_MODE_TCP) {
		struct tcp_info ti;
		socklen_t tl = sizeof(ti);
		memset(&ti, 0, sizeof(ti));
		if (sock_sys.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0) {
			/* The kernel counts sequence space: an active opener's SYN is in its
			 * bytes_acked, our FIN once acknowledged, the peer's FIN once
			 * received. Payload bytes only, as the SMC-R counts are. */
			uint8_t st = ti.tcpi_state;
			bool fin_acked = st == ST_FIN_WAIT2 || st == ST_TIME_WAIT ||
					 st == ST_CLOSE;
			bool fin_rcvd = st == ST_CLOSE_WAIT || st == ST_LAST_ACK ||
					st == ST_TIME_WAIT || st == ST_CLOSING;
			uint64_t ctl = (r->in.role == SMCR_ROLE_CLIENT) + fin_acked;
			r->tcp_sent = ti.tcpi_bytes_acked > ctl ? ti.tcpi_bytes_acked - ctl : 0;
			r->tcp_received = ti.tcpi_bytes_received > fin_rcvd
						  ? ti.tcpi_bytes_received - fin_rcvd : 0;
		}
	}
	return true;
}

static bool wanted(enum statsrv_what w, const struct smcr_info *in)
{
	switch (w) {
	case STATSRV_CONNS:
		return in->mode == SMCR_MODE_SMCR || in->mode == SMCR_MODE_TCP;
	case STATSRV_LISTEN:
		return in->mode == SMCR_MODE_LISTEN;
	case STATSRV_ALL:
		return true;
	case STATSRV_LGS:
	case STATSRV_DEVS:
	case STATSRV_STATS:
		break;
	}
	return false;
}

static const char *role_name(uint8_t r)
{
	return r == SMCR_ROLE_CLIENT ? "client" : r == SMCR_ROLE_SERVER ? "server" : "-";
}

static void gid_str(const uint8_t g[16], char out[INET6_ADDRSTRLEN])
{
	if (!inet_ntop(AF_INET6, g, out, INET6_ADDRSTRLEN))
		snprintf(out, INET6_ADDRSTRLEN, "-");
}

static void conn_json(struct buf *b, const struct conn_row *r, bool first)
{
	const struct smcr_info *in = &r->in;
	bool smc = in->mode == SMCR_MODE_SMCR;
	char lg_[INET6_ADDRSTRLEN] = "-", pg_[INET6_ADDRSTRLEN] = "-";
	if (in->lgr_id) {
		gid_str(in->local_gid, lg_);
		gid_str(in->peer_gid, pg_);
	}
	bprintf(b,
		"%s{\"fd\":%d,\"mode\":\"%s\",\"role\":\"%s\",\"local\":\"%s\",\"peer\":\"%s\","
		"\"local_reason\":\"%s\",\"peer_reason\":\"%s\",\"lgr\":%u,\"link\":%u,"
		"\"lgr_links\":%u,\"lgr_conns\":%u,\"local_qpn\":%u,\"peer_qpn\":%u,"
		"\"local_gid\":\"%s\",\"peer_gid\":\"%s\","
		"\"rmbe\":%u,\"peer_rmbe\":%u,\"sndbuf\":%u,"
		"\"tx_prod\":[%u,%u],\"tx_cons\":[%u,%u],\"rx_prod\":[%u,%u],\"rx_cons\":[%u,%u],"
		"\"bytes_sent\":%llu,\"bytes_received\":%llu}",
		first ? "" : ",", r->fd, smcr_mode_name(in->mode), role_name(in->role), r->local,
		r->peer, smcr_reason_name(in->local_reason), smcr_reason_name(in->peer_reason),
		in->lgr_id, in->link_id, in->lgr_links, in->lgr_conns, in->local_qpn,
		in->peer_qpn, lg_, pg_, in->rmbe_size, in->peer_rmbe_size, in->sndbuf_size,
		in->tx_prod.wrap, in->tx_prod.count, in->tx_cons.wrap, in->tx_cons.count,
		in->rx_prod.wrap, in->rx_prod.count, in->rx_cons.wrap, in->rx_cons.count,
		(unsigned long long)(smc ? in->bytes_sent : r->tcp_sent),
		(unsigned long long)(smc ? in->bytes_received : r->tcp_received));
}

static void conn_text(struct buf *b, const struct conn_row *r, const char *prog)
{
	const struct smcr_info *in = &r->in;
	bool smc = in->mode == SMCR_MODE_SMCR;
	char reason[64] = "-", lg[32] = "-";
	if (in->mode == SMCR_MODE_TCP || in->local_reason || in->peer_reason)
		snprintf(reason, sizeof(reason), "%s/%s", smcr_reason_name(in->local_reason),
			 smcr_reason_name(in->peer_reason));
	if (in->lgr_id)
		snprintf(lg, sizeof(lg), "%u/%u", in->lgr_id, in->link_id);
	bprintf(b, "%-7d %-15.15s %-4d %-9s %-6s %-22s %-22s %-7s %-23s %12llu %12llu\n",
		(int)getpid(), prog, r->fd, smcr_mode_name(in->mode), role_name(in->role),
		r->local, r->peer, lg, reason,
		(unsigned long long)(smc ? in->bytes_sent : r->tcp_sent),
		(unsigned long long)(smc ? in->bytes_received : r->tcp_received));
}

static void counters_of(struct buf *b, bool reset)
{
	char line[8192];
	struct stats_snap now;
	stats_snapshot(&now);
	pthread_mutex_lock(&srv_lock);
	size_t n = stats_format_since(line, sizeof(line), "query", have_base ? &base : NULL);
	if (reset) {
		base = now;
		have_base = true;
	}
	pthread_mutex_unlock(&srv_lock);
	if (n) {
		line[n - 1] = 0; /* the newline */
		bprintf(b, "%s", line);
	} else {
		bprintf(b, "{}");
	}
}

static void reply_build(struct buf *b, enum statsrv_what w, bool json, bool reset)
{
	const char *prog = program_invocation_short_name ? program_invocation_short_name : "?";
	const char *devs = getenv("SMCR_DEVICES") ? getenv("SMCR_DEVICES") : "shm";
	struct core_engine_stats es;
	memset(&es, 0, sizeof(es));
	struct core_engine *e = sock_engine_if_up();
	if (e && (w == STATSRV_LGS || w == STATSRV_DEVS || json))
		core_engine_stats(e, &es);
	if (json) {
		bprintf(b, "{\"pid\":%d,\"program\":\"", (int)getpid());
		for (const char *p = prog; *p; p++)
			bprintf(b, (*p == '"' || *p == '\\') ? "\\%c" : "%c", *p);
		bprintf(b, "\",\"uid\":%u,\"devices\":{\"spec\":\"", (unsigned)geteuid());
		for (const char *p = devs; *p; p++)
			bprintf(b, (*p == '"' || *p == '\\') ? "\\%c" : "%c", *p);
		bprintf(b, "\",\"open\":%u},"
			   "\"engine\":{\"lgs\":%u,\"links\":%u,\"conns\":%u,\"rmb_bytes\":%llu},",
			es.ndevices, es.lgs, es.links, es.conns, (unsigned long long)es.rmb_bytes);
		bprintf(b, "\"counters\":");
		counters_of(b, reset);
		bprintf(b, ",\"conns\":[");
	} else if (w == STATSRV_STATS) {
		bprintf(b, "%d %s ", (int)getpid(), prog);
		counters_of(b, reset);
		bprintf(b, "\n");
		return;
	} else if (w == STATSRV_DEVS) {
		bprintf(b, "%-7d %-15.15s %-16s %7u %4u %6u %12llu\n", (int)getpid(), prog,
			devs, es.ndevices, es.lgs,
			es.links, (unsigned long long)es.rmb_bytes);
		return;
	}
	bool first = true;
	for (int fd = fdtab_next(0); fd >= 0; fd = fdtab_next(fd + 1)) {
		if (w == STATSRV_LGS && !json)
			break;
		if (fd == atomic_load_explicit(&srv_fd, memory_order_relaxed))
			continue;
		struct conn_row r;
		if (!row_of(fd, &r))
			continue;
		if (json) {
			if (wanted(STATSRV_ALL, &r.in)) {
				conn_json(b, &r, first);
				first = false;
			}
		} else if (wanted(w, &r.in)) {
			conn_text(b, &r, prog);
		}
	}
	if (!json && w != STATSRV_LGS)
		return;
	/* link groups and their links: the engine's own list (core_lgr_list), idle groups
	 * (no connection now) included */
	enum { MAXLG = 256 };
	struct core_lgr_info *lgs = e ? calloc(MAXLG, sizeof(*lgs)) : NULL;
	int nlg = lgs ? core_lgr_list(e, lgs, MAXLG) : 0;
	if (nlg > MAXLG)
		nlg = MAXLG;
	if (json)
		bprintf(b, "],\"lgs\":[");
	for (int i = 0; i < nlg; i++) {
		const struct core_lgr_info *g = &lgs[i];
		const char *role = g->role == CORE_CLIENT ? "client" : "server";
		if (json)
			bprintf(b, "%s{\"id\":%u,\"role\":\"%s\",\"state\":\"%s\",\"version\":%u,"
				   "\"conns\":%u,\"failovers\":%llu,\"links\":[", i ? "," : "", g->id,
				role, g->state, g->smc_version, g->conns,
				(unsigned long long)g->failovers);
		for (int k = 0; k < g->nlinks; k++) {
			const struct core_link_info *l = &g->links[k];
			char lgid[INET6_ADDRSTRLEN], pgid[INET6_ADDRSTRLEN];
			gid_str(l->gid_local, lgid);
			gid_str(l->gid_peer, pgid);
			if (json)
				bprintf(b, "%s{\"link\":%u,\"state\":\"%s\",\"device\":\"%s\","
					   "\"conns\":%u,\"local_qpn\":%u,\"peer_qpn\":%u,"
					   "\"local_gid\":\"%s\",\"peer_gid\":\"%s\"}",
					k ? "," : "", l->link_num, l->state, l->dev, l->conns,
					l->qpn_local, l->qpn_peer, lgid, pgid);
			else
				bprintf(b, "%-7d %-15.15s %4u %-6s %-6s %5u %4u %-6s %-12.12s %5u %8u %8u "
					   "%9llu %s %s\n",
					(int)getpid(), prog, g->id, role, g->state, g->conns,
					l->link_num, l->state, l->dev, l->conns, l->qpn_local,
					l->qpn_peer, (unsigned long long)g->failovers, lgid, pgid);
		}
		if (json)
			bprintf(b, "]}");
	}
	free(lgs);
	if (json)
		bprintf(b, "]}\n");
}

/* ---- the socket ---- */

static enum statsrv_what what_of(const char *w)
{
	static const char *const names[] = { "conns", "listen", "all", "lgs", "devs", "stats" };
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(w, names[i]))
			return (enum statsrv_what)i;
	return STATSRV_CONNS;
}

static void serve_one(int c)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	/* Only the same user, or root: another user learns nothing (not even an error). */
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
	    (cr.uid != geteuid() && cr.uid != 0))
		return;
	char req[64];
	size_t n = 0;
	struct pollfd pf = { c, POLLIN, 0 };
	while (n < sizeof(req) - 1 && sock_sys.poll(&pf, 1, REQ_WAIT_MS) > 0) {
		ssize_t k = sock_sys.recv(c, req + n, sizeof(req) - 1 - n, MSG_DONTWAIT);
		if (k <= 0)
			break;
		n += (size_t)k;
		if (memchr(req, '\n', n))
			break;
	}
	req[n] = 0;
	char *nl = strchr(req, '\n');
	if (!nl)
		return;
	*nl = 0;
	/* "json|text WHAT [reset]" */
	char fmt[8] = "", what[16] = "", rst[8] = "";
	if (sscanf(req, "%7s %15s %7s", fmt, what, rst) < 2)
		return;
	struct buf b = { 0 };
	reply_build(&b, what_of(what), !strcmp(fmt, "json"), !strcmp(rst, "reset"));
	if (!b.bad) {
		struct timeval tv = { 1, 0 };
		(void)sock_sys.setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		int fl = sock_sys.fcntl(c, F_GETFL);
		(void)sock_sys.fcntl(c, F_SETFL, fl & ~O_NONBLOCK);
		for (size_t o = 0; o < b.len;) {
			ssize_t k = sock_sys.send(c, b.p + o, b.len - o, MSG_NOSIGNAL);
			if (k <= 0)
				break;
			o += (size_t)k;
		}
	}
	free(b.p);
}

static void on_accept(void *arg, uint32_t events)
{
	(void)arg;
	(void)events;
	for (;;) {
		int c = sock_sys.accept4(atomic_load(&srv_fd), NULL, NULL,
					 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c < 0)
			return;
		serve_one(c);
		sock_sys.close(c);
	}
}

static void statsrv_atfork_child(void)
{
	/* The parent's socket: the parent's. Closing the copy lets its name go with it. The
	 * child opens its own at its next listen, connect or accept (statsrv_ensure), never
	 * here: a thread started by a child handler would run before the handlers registered
	 * after this one had reset their locks. */
	int old = atomic_exchange(&srv_fd, -1);
	if (old >= 0)
		sock_sys.close(old);
	if (srv_watch)
		progress_watch_forget_inherited(srv_watch);
	srv_watch = NULL;
	have_base = false;
	pthread_mutex_init(&srv_lock, NULL);
	atomic_store_explicit(&started, false, memory_order_relaxed);
}

/* At load, before any thread can exist: every fork from then on resets this file's state
 * in the child (the handlers' order is the order of the libraries' constructors). */
__attribute__((constructor)) static void statsrv_init(void)
{
	pthread_atfork(NULL, NULL, statsrv_atfork_child);
}

void statsrv_ensure(void)
{
	if (atomic_load_explicit(&started, memory_order_relaxed))
		return;
	pthread_mutex_lock(&srv_lock);
	if (atomic_load(&started)) {
		pthread_mutex_unlock(&srv_lock);
		return;
	}
	atomic_store(&started, true);
	int pid = getpid();
	const char *off = getenv("SMCR_STAT_SOCKET");
	if (off && !strcmp(off, "0")) {
		pthread_mutex_unlock(&srv_lock);
		return;
	}
	struct sockaddr_un a;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	int len = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, STATSRV_PREFIX "%u/%d",
			   (unsigned)geteuid(), pid);
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
	int fd = sock_sys.socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int h = fd >= 0 ? sock_fd_hide(fd) : -1; /* never a number a select() program sees */
	bool ok = h >= 0 && sock_sys.bind(h, (struct sockaddr *)&a, alen) == 0 &&
		  sock_sys.listen(h, 8) == 0;
	if (ok) {
		atomic_store(&srv_fd, h); /* before the thread can call on_accept */
		ok = progress_watch(h, EPOLLIN, on_accept, NULL, NULL, &srv_watch) == 0;
		if (!ok)
			atomic_store(&srv_fd, -1);
	}
	if (!ok) {
		LOG_INFO("stat", "no smcr-stat socket: %s", strerror(errno));
		if (h >= 0)
			sock_sys.close(h);
	}
	pthread_mutex_unlock(&srv_lock);
}
