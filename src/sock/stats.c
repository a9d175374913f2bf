/* stats.c: the socket layer's process-wide counters and the SMCR_STATS line (stats.h has
 * the model; docs/CONFIG.md "SMCR_STATS" the line's schema). */
#define _GNU_SOURCE
#include "sock/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "sock/errmap.h"
#include "sock/sock.h"
#include "sock/sys.h"
#include "util/err.h"
#include "smcr/smcr.h"

_Thread_local struct stats_blk *stats_tl;

/* Every block ever made (never freed: a signal handler may walk the list at any time). */
static _Atomic(struct stats_blk *) blk_head;
static pthread_key_t blk_key;
static pthread_once_t blk_once = PTHREAD_ONCE_INIT;

/* Process-wide counters: relaxed atomics (one add per connection). A reason slot's code
 * goes from 0 to its value once (compare-and-swap), then only its count changes. */
static _Atomic uint64_t conns[STATS_NMODE];
static _Atomic uint32_t reason_code[2][STATS_REASONS];
static _Atomic uint64_t reason_n[2][STATS_REASONS];
static _Atomic uint64_t reason_other[2];
static _Atomic int hserr_code[STATS_HSERRS];
static _Atomic uint64_t hserr_n[STATS_HSERRS];
static _Atomic uint64_t hserr_other;

/* SMCR_STATS, read once at load (the writer must not call getenv: not signal-safe). */
static char stats_path[4096];

static void blk_release(void *p)
{
	struct stats_blk *b = p;
	if (stats_tl == b)
		stats_tl = NULL;
	atomic_store_explicit(&b->owned, 0, memory_order_release);
}

static void blk_key_init(void)
{
	(void)pthread_key_create(&blk_key, blk_release);
}

struct stats_blk *stats_blk_slow(void)
{
	(void)pthread_once(&blk_once, blk_key_init);
	struct stats_blk *b;
	/* Take over the block of a thread that exited: its counts stay the process's. */
	for (b = atomic_load_explicit(&blk_head, memory_order_acquire); b; b = b->next) {
		int zero = 0;
		if (atomic_load_explicit(&b->owned, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong_explicit(&b->owned, &zero, 1,
							    memory_order_acquire,
							    memory_order_relaxed))
			break;
	}
	if (!b) {
		b = aligned_alloc(64, sizeof(*b));
		if (!b)
			return NULL; /* not counted: the counters are diagnostics */
		memset(b, 0, sizeof(*b));
		atomic_store_explicit(&b->owned, 1, memory_order_relaxed);
		struct stats_blk *h = atomic_load_explicit(&blk_head, memory_order_relaxed);
		do
			b->next = h;
		while (!atomic_compare_exchange_weak_explicit(&blk_head, &h, b, memory_order_release,
							      memory_order_relaxed));
	}
	(void)pthread_setspecific(blk_key, b); /* its destructor hands the block back */
	stats_tl = b;
	return b;
}

static void reason_add(int side, uint32_t code)
{
	if (!code)
		return;
	for (unsigned i = 0; i < STATS_REASONS; i++) {
		uint32_t c = atomic_load_explicit(&reason_code[side][i], memory_order_acquire);
		if (c == 0) {
			uint32_t z = 0;
			if (atomic_compare_exchange_strong_explicit(&reason_code[side][i], &z, code,
								    memory_order_acq_rel,
								    memory_order_acquire))
				c = code;
			else
				c = z;
		}
		if (c == code) {
			atomic_fetch_add_explicit(&reason_n[side][i], 1, memory_order_relaxed);
			return;
		}
	}
	atomic_fetch_add_explicit(&reason_other[side], 1, memory_order_relaxed);
}

void stats_conn(enum stats_mode m, uint32_t local_reason, uint32_t peer_reason)
{
	if ((unsigned)m >= STATS_NMODE)
		return;
	atomic_fetch_add_explicit(&conns[m], 1, memory_order_relaxed);
	if (m == STATS_MODE_TCP) {
		reason_add(0, local_reason);
		reason_add(1, peer_reason);
	}
}

void stats_tcp_connect(int rc, uint32_t local_reason)
{
	if (rc == 0 || errno == EINPROGRESS)
		stats_conn(STATS_MODE_TCP, local_reason, 0);
}

void stats_hs_failed(int code)
{
	stats_conn(STATS_MODE_FAILED, 0, 0);
	if (!code)
		return;
	for (unsigned i = 0; i < STATS_HSERRS; i++) {
		int c = atomic_load_explicit(&hserr_code[i], memory_order_acquire);
		if (c == 0) {
			int z = 0;
			c = atomic_compare_exchange_strong_explicit(&hserr_code[i], &z, code,
								    memory_order_acq_rel,
								    memory_order_acquire)
				    ? code
				    : z;
		}
		if (c == code) {
			atomic_fetch_add_explicit(&hserr_n[i], 1, memory_order_relaxed);
			return;
		}
	}
	atomic_fetch_add_explicit(&hserr_other, 1, memory_order_relaxed);
}

void stats_snapshot(struct stats_snap *o)
{
	memset(o, 0, sizeof(*o));
	for (struct stats_blk *b = atomic_load_explicit(&blk_head, memory_order_acquire); b;
	     b = b->next)
		for (int i = 0; i < STATS_NCTR; i++)
			o->v[i] += atomic_load_explicit(&b->v[i], memory_order_relaxed);
	for (int m = 0; m < STATS_NMODE; m++)
		o->conns[m] = atomic_load_explicit(&conns[m], memory_order_relaxed);
	for (int s = 0; s < 2; s++) {
		for (int i = 0; i < STATS_REASONS; i++) {
			o->reason_code[s][i] =
				atomic_load_explicit(&reason_code[s][i], memory_order_acquire);
			o->reason_n[s][i] = atomic_load_explicit(&reason_n[s][i], memory_order_relaxed);
		}
		o->reason_other[s] = atomic_load_explicit(&reason_other[s], memory_order_relaxed);
	}
	for (int i = 0; i < STATS_HSERRS; i++) {
		o->hserr_code[i] = atomic_load_explicit(&hserr_code[i], memory_order_acquire);
		o->hserr_n[i] = atomic_load_explicit(&hserr_n[i], memory_order_relaxed);
	}
	o->hserr_other = atomic_load_explicit(&hserr_other, memory_order_relaxed);
	struct core_engine *e = sock_engine_if_up();
	if (e) {
		struct core_engine_counters ct;
		core_engine_counters(e, &ct);
		o->have_engine = true;
		o->cdc_sent = ct.cdc_sent;
		o->cdc_received = ct.cdc_received;
		o->cdc_dropped = ct.cdc_dropped;
		o->llc_sent = ct.llc_sent;
		o->llc_received = ct.llc_received;
		o->llc_dropped = ct.llc_dropped;
		o->rmbe_full = ct.rmbe_full;
		o->window_stall = ct.window_stall;
		o->links_added = ct.links_added;
		o->links_failed = ct.links_failed;
		o->failovers = ct.failovers;
		o->conns_moved = ct.conns_moved;
		o->delete_link_sent = ct.delete_link_sent;
		o->delete_link_received = ct.delete_link_received;
	}
}

/* ---- the line (no stdio: async-signal-safe) ---- */

struct out {
	char *p;
	size_t len, cap;
	bool full;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->full || o->cap - o->len < n) {
		o->full = true;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
}


static void putu(struct out *o, uint64_t v)
{
	char b[24];
	int i = sizeof(b);
	do
		b[--i] = (char)('0' + v % 10);
	while ((v /= 10) && i > 0);
	put(o, b + i, sizeof(b) - (size_t)i);
}

static void puthex(struct out *o, uint32_t v)
{
	char b[10] = { '0', 'x' };
	for (int i = 0; i < 8; i++)
		b[2 + i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 15];
	put(o, b, sizeof(b));
}

/* A JSON string: control characters, quote and backslash escaped. */
static void putstr(struct out *o, const char *s)
{
	put(o, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			put(o, e, 2);
		} else if (c < 0x20) {
			char e[6] = { '\\', 'u', '0', '0', "0123456789abcdef"[c >> 4],
				      "0123456789abcdef"[c & 15] };
			put(o, e, 6);
		} else {
			put(o, s, 1);
		}
	}
	put(o, "\"", 1);
}

static void putkv(struct out *o, const char *k, uint64_t v, bool first)
{
	if (!first)
		put(o, ",", 1);
	putstr(o, k);
	put(o, ":", 1);
	putu(o, v);
}

static void put_reasons(struct out *o, const struct stats_snap *s, int side)
{
	put(o, "{", 1);
	bool first = true;
	for (int i = 0; i < STATS_REASONS; i++) {
		uint32_t c = s->reason_code[side][i];
		if (!c || !s->reason_n[side][i])
			continue;
		const char *nm = smcr_reason_name(c);
		if (!first)
			put(o, ",", 1);
		first = false;
		if (!nm || !strcmp(nm, "UNKNOWN")) {
			put(o, "\"", 1);
			puthex(o, c);
			put(o, "\"", 1);
		} else {
			putstr(o, nm);
		}
		put(o, ":", 1);
		putu(o, s->reason_n[side][i]);
	}
	if (s->reason_other[side])
		putkv(o, "OTHER", s->reason_other[side], first);
	put(o, "}", 1);
}

static void put_hserrs(struct out *o, const struct stats_snap *s)
{
	put(o, "{", 1);
	bool first = true;
	for (int i = 0; i < STATS_HSERRS; i++) {
		int c = s->hserr_code[i];
		if (!c || !s->hserr_n[i])
			continue;
		const char *nm = NULL;
		if (c <= -SOCK_ERRNO_BASE)
			nm = strerrorname_np(-c - SOCK_ERRNO_BASE);
		else
			nm = smcr_err_name(c);
		putkv(o, nm ? nm : "UNKNOWN", s->hserr_n[i], first);
		first = false;
	}
	if (s->hserr_other)
		putkv(o, "OTHER", s->hserr_other, first);
	put(o, "}", 1);
}

static void put_pair(struct out *o, const char *k, const char *a, uint64_t va, const char *b,
		     uint64_t vb)
{
	put(o, ",", 1);
	putstr(o, k);
	put(o, ":{", 2);
	putkv(o, a, va, true);
	putkv(o, b, vb, false);
	put(o, "}", 1);
}

/* s minus base, counter by counter; a reason or error slot keeps its code. */
static void snap_sub(struct stats_snap *s, const struct stats_snap *b)
{
	for (int i = 0; i < STATS_NCTR; i++)
		s->v[i] -= b->v[i];
	for (int m = 0; m < STATS_NMODE; m++)
		s->conns[m] -= b->conns[m];
	for (int d = 0; d < 2; d++) {
		for (int i = 0; i < STATS_REASONS; i++)
			if (s->reason_code[d][i] == b->reason_code[d][i])
				s->reason_n[d][i] -= b->reason_n[d][i];
		s->reason_other[d] -= b->reason_other[d];
	}
	for (int i = 0; i < STATS_HSERRS; i++)
		if (s->hserr_code[i] == b->hserr_code[i])
			s->hserr_n[i] -= b->hserr_n[i];
	s->hserr_other -= b->hserr_other;
	s->cdc_sent -= b->cdc_sent;
	s->cdc_received -= b->cdc_received;
	s->cdc_dropped -= b->cdc_dropped;
	s->llc_sent -= b->llc_sent;
	s->llc_received -= b->llc_received;
	s->llc_dropped -= b->llc_dropped;
	s->rmbe_full -= b->rmbe_full;
	s->window_stall -= b->window_stall;
	s->links_added -= b->links_added;
	s->links_failed -= b->links_failed;
	s->failovers -= b->failovers;
	s->conns_moved -= b->conns_moved;
	s->delete_link_sent -= b->delete_link_sent;
	s->delete_link_received -= b->delete_link_received;
}

size_t stats_format(char *buf, size_t len, const char *event)
{
	return stats_format_since(buf, len, event, NULL);
}

size_t stats_format_since(char *buf, size_t len, const char *event,
			  const struct stats_snap *base)
{
	struct stats_snap s;
	stats_snapshot(&s);
	if (base)
		snap_sub(&s, base);
	struct out o = { buf, 0, len, false };
	put(&o, "{", 1);
	putkv(&o, "pid", (uint64_t)getpid(), true);
	put(&o, ",\"program\":", 11);
	putstr(&o, program_invocation_short_name ? program_invocation_short_name : "");
	put(&o, ",\"event\":", 9);
	putstr(&o, event);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	putkv(&o, "time", (uint64_t)ts.tv_sec, false);
	put(&o, ",\"conns\":{", 10);
	putkv(&o, "smcr", s.conns[STATS_MODE_SMCR], true);
	putkv(&o, "tcp", s.conns[STATS_MODE_TCP], false);
	putkv(&o, "failed", s.conns[STATS_MODE_FAILED], false);
	put(&o, "},\"fallback_local\":", 19);
	put_reasons(&o, &s, 0);
	put(&o, ",\"fallback_peer\":", 17);
	put_reasons(&o, &s, 1);
	put(&o, ",\"handshake_errors\":", 20);
	put_hserrs(&o, &s);
	put_pair(&o, "bytes_smcr", "sent", s.v[STATS_SMCR_SENT], "received", s.v[STATS_SMCR_RECV]);
	put_pair(&o, "bytes_tcp", "sent", s.v[STATS_TCP_SENT], "received", s.v[STATS_TCP_RECV]);
	put(&o, ",\"cdc\":{", 8);
	putkv(&o, "sent", s.cdc_sent, true);
	putkv(&o, "received", s.cdc_received, false);
	putkv(&o, "dropped", s.cdc_dropped, false);
	put(&o, "},\"llc\":{", 9);
	putkv(&o, "sent", s.llc_sent, true);
	putkv(&o, "received", s.llc_received, false);
	putkv(&o, "dropped", s.llc_dropped, false);
	put(&o, "}", 1);
	putkv(&o, "rmbe_full", s.rmbe_full, false);
	putkv(&o, "window_stall", s.window_stall, false);
	put(&o, ",\"failover\":{", 13);
	putkv(&o, "links_added", s.links_added, true);
	putkv(&o, "links_failed", s.links_failed, false);
	putkv(&o, "failovers", s.failovers, false);
	putkv(&o, "conns_moved", s.conns_moved, false);
	putkv(&o, "delete_link_sent", s.delete_link_sent, false);
	putkv(&o, "delete_link_received", s.delete_link_received, false);
	put(&o, "}}\n", 3);
	return o.full ? 0 : o.len;
}

int stats_write(const char *event)
{
	if (!stats_path[0])
		return 0;
	int saved = errno;
	char buf[8192];
	size_t n = stats_format(buf, sizeof(buf), event);
	if (!n) {
		errno = ENOBUFS;
		return -1;
	}
	/* open(2) is no call the interposer wraps; write and close go through sock_sys. */
	int fd = open(stats_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	ssize_t w = sock_sys.write(fd, buf, n); /* one write: O_APPEND keeps the line whole */
	int werr = errno;
	sock_sys.close(fd);
	if (w != (ssize_t)n) {
		errno = w < 0 ? werr : EIO;
		return -1;
	}
	errno = saved;
	return 0;
}

/* ---- start-up, exit, SIGUSR2, fork ---- */

static void stats_exit(void)
{
	(void)stats_write("exit");
}

static void on_sigusr2(int sig)
{
	(void)sig;
	int e = errno;
	(void)stats_write("signal");
	errno = e;
}

/* A forked child is a process of its own: its line counts only its own work. It runs
 * with one thread, the one that forked, which keeps its block. */
static void stats_atfork_child(void)
{
	for (struct stats_blk *b = atomic_load(&blk_head); b; b = b->next) {
		for (int i = 0; i < STATS_NCTR; i++)
			atomic_store(&b->v[i], 0);
		if (b != stats_tl)
			atomic_store(&b->owned, 0);
	}
	for (int m = 0; m < STATS_NMODE; m++)
		atomic_store(&conns[m], 0);
	for (int s = 0; s < 2; s++) {
		for (int i = 0; i < STATS_REASONS; i++) {
			atomic_store(&reason_code[s][i], 0);
			atomic_store(&reason_n[s][i], 0);
		}
		atomic_store(&reason_other[s], 0);
	}
	for (int i = 0; i < STATS_HSERRS; i++) {
		atomic_store(&hserr_code[i], 0);
		atomic_store(&hserr_n[i], 0);
	}
	atomic_store(&hserr_other, 0);
}

/* At load: SMCR_STATS is read once. atexit here, before any other handler of the layer
 * (the engine's exit closes the open connections; handlers run in reverse order), so the
 * line counts their last messages too. SIGUSR2 only if nobody handles it yet. */
__attribute__((constructor)) static void stats_init(void)
{
	pthread_atfork(NULL, NULL, stats_atfork_child);
	const char *p = getenv("SMCR_STATS");
	if (!p || !*p || strlen(p) >= sizeof(stats_path))
		return;
	memcpy(stats_path, p, strlen(p) + 1);
	atexit(stats_exit);
	struct sigaction old;
	if (sigaction(SIGUSR2, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
	    old.sa_handler == SIG_DFL) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_sigusr2;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		(void)sigaction(SIGUSR2, &sa, NULL);
	}
}
