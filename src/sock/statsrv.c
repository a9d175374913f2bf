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

static _Atomic int started_pid; /* the process whose server runs (0: none) */
static pthread_mutex_t srv_lock = PTHREAD_MUTEX_INITIALIZER;
static int srv_fd = -1;		     /* (srv_lock) the listening socket */
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
			r->tcp_sent = ti.tcpi_bytes_acked;
			r->tcp_received = ti.tcpi_bytes_received;
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

static void conn_json(struct buf *b, const struct conn_row *r, bool first)
{
	const struct smcr_info *in = &r->in;
	bool smc = in->mode == SMCR_MODE_SMCR;
	bprintf(b,
		"%s{\"fd\":%d,\"mode\":\"%s\",\"role\":\"%s\",\"local\":\"%s\",\"peer\":\"%s\","
		"\"local_reason\":\"%s\",\"peer_reason\":\"%s\",\"lgr\":%u,\"link\":%u,"
		"\"lgr_links\":%u,\"lgr_conns\":%u,\"local_qpn\":%u,\"peer_qpn\":%u,"
		"\"rmbe\":%u,\"peer_rmbe\":%u,\"sndbuf\":%u,"
		"\"tx_prod\":[%u,%u],\"tx_cons\":[%u,%u],\"rx_prod\":[%u,%u],\"rx_cons\":[%u,%u],"
		"\"bytes_sent\":%llu,\"bytes_received\":%llu}",
		first ? "" : ",", r->fd, smcr_mode_name(in->mode), role_name(in->role), r->local,
		r->peer, smcr_reason_name(in->local_reason), smcr_reason_name(in->peer_reason),
		in->lgr_id, in->link_id, in->lgr_links, in->lgr_conns, in->local_qpn,
		in->peer_qpn, in->rmbe_size, in->peer_rmbe_size, in->sndbuf_size,
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
	/* link groups: aggregated from the connections (one line per group) */
	struct lg_row {
		uint32_t id;
		unsigned conns, links;
		uint32_t local_qpn, peer_qpn;
		char peer[64];
	} lgs[64];
	unsigned nlg = 0;
	bool first = true;
	for (int fd = fdtab_next(0); fd >= 0; fd = fdtab_next(fd + 1)) {
		if (fd == srv_fd)
			continue;
		struct conn_row r;
		if (!row_of(fd, &r))
			continue;
		if (r.in.lgr_id && nlg < 64) {
			unsigned i = 0;
			while (i < nlg && lgs[i].id != r.in.lgr_id)
				i++;
			if (i == nlg) {
				memset(&lgs[i], 0, sizeof(lgs[i]));
				lgs[i].id = r.in.lgr_id;
				lgs[i].links = r.in.lgr_links;
				lgs[i].local_qpn = r.in.local_qpn;
				lgs[i].peer_qpn = r.in.peer_qpn;
				snprintf(lgs[i].peer, sizeof(lgs[i].peer), "%s", r.peer);
				nlg++;
			}
			lgs[i].conns++;
		}
		if (json) {
			if (wanted(STATSRV_ALL, &r.in)) {
				conn_json(b, &r, first);
				first = false;
			}
		} else if (wanted(w, &r.in)) {
			conn_text(b, &r, prog);
		}
	}
	/* each group's links with their state (two-link groups, docs/FAILOVER.md) */
	struct core_link_info li[32];
	unsigned nli = e && (json || w == STATSRV_LGS) ? core_engine_links(e, li, 32) : 0;
	if (nli > 32)
		nli = 32;
	if (json) {
		bprintf(b, "],\"lgs\":[");
		for (unsigned i = 0; i < nlg; i++) {
			bprintf(b, "%s{\"id\":%u,\"links\":%u,\"conns\":%u,\"local_qpn\":%u,"
				   "\"peer_qpn\":%u,\"peer\":\"%s\",\"link_list\":[",
				i ? "," : "", lgs[i].id, lgs[i].links, lgs[i].conns, lgs[i].local_qpn,
				lgs[i].peer_qpn, lgs[i].peer);
			bool f1 = true;
			for (unsigned k = 0; k < nli; k++) {
				if (li[k].lg_id != lgs[i].id)
					continue;
				bprintf(b, "%s{\"link\":%u,\"state\":\"%s\",\"device\":\"%s\","
					   "\"local_qpn\":%u,\"peer_qpn\":%u,\"conns\":%u}",
					f1 ? "" : ",", li[k].link_num, li[k].state, li[k].dev,
					li[k].local_qpn, li[k].peer_qpn, li[k].conns);
				f1 = false;
			}
			bprintf(b, "]}");
		}
		bprintf(b, "]}\n");
	} else if (w == STATSRV_LGS) {
		for (unsigned i = 0; i < nlg; i++) {
			bprintf(b, "%-7d %-15.15s %5u %5u %5u %8u %8u %s\n", (int)getpid(), prog,
				lgs[i].id, lgs[i].links, lgs[i].conns, lgs[i].local_qpn,
				lgs[i].peer_qpn, lgs[i].peer);
			for (unsigned k = 0; k < nli; k++)
				if (li[k].lg_id == lgs[i].id)
					bprintf(b, "%-7d %-15.15s %5u   link %u %s on %s, qpn %u peer-qpn "
						   "%u, %u conns, group failovers %llu\n",
						(int)getpid(), prog, lgs[i].id, li[k].link_num,
						li[k].state, li[k].dev, li[k].local_qpn, li[k].peer_qpn,
						li[k].conns, (unsigned long long)li[k].lg_failovers);
		}
	}
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
		int c = sock_sys.accept4(srv_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c < 0)
			return;
		serve_one(c);
		sock_sys.close(c);
	}
}

static void statsrv_atfork_child(void)
{
	/* The parent's socket: the parent's. Closing the copy lets its name go with it. */
	if (srv_fd >= 0)
		sock_sys.close(srv_fd);
	srv_fd = -1;
	if (srv_watch)
		progress_watch_forget_inherited(srv_watch);
	srv_watch = NULL;
	have_base = false;
	pthread_mutex_init(&srv_lock, NULL);
}

void statsrv_ensure(void)
{
	int pid = getpid();
	if (atomic_load_explicit(&started_pid, memory_order_relaxed) == pid)
		return;
	pthread_mutex_lock(&srv_lock);
	if (atomic_load(&started_pid) == pid) {
		pthread_mutex_unlock(&srv_lock);
		return;
	}
	atomic_store(&started_pid, pid);
	static bool atfork;
	if (!atfork) {
		pthread_atfork(NULL, NULL, statsrv_atfork_child);
		atfork = true;
	}
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
	if (h >= 0 && sock_sys.bind(h, (struct sockaddr *)&a, alen) == 0 &&
	    sock_sys.listen(h, 8) == 0 &&
	    progress_watch(h, EPOLLIN, on_accept, NULL, NULL, &srv_watch) == 0) {
		srv_fd = h;
	} else {
		LOG_INFO("stat", "no smcr-stat socket: %s", strerror(errno));
		if (h >= 0)
			sock_sys.close(h);
	}
	pthread_mutex_unlock(&srv_lock);
}
