/* engine.c: the composition root. Registers the device providers, creates the process's
 * SMC-R engine (one per process = one SMC-R instance, docs/protocol/linux-interop.md 5) on first
 * use, connects it to the progress thread (docs/design/engine-decisions.md decision 3), and routes
 * the engine's per-connection events to the sockets' readiness.
 *
 * Configuration (docs/CONFIG.md): $SMCR_DEVICES names the devices to open, separated by
 * spaces or ';' (default "shm"); $SMCR_CLC_WAIT_MS, $SMCR_CLC_WAIT_SHORT_MS,
 * $SMCR_LLC_WAIT_MS, $SMCR_LLC_WAIT_FIRST_MS, $SMCR_LG_FREE_MS, $SMCR_CLOSE_WAIT_MS,
 * $SMCR_CONNS_PER_LG override the engine's timers and limits (tests);
 * $SMCR_SERVER_WAIT_MS is the server's wait for a client's first byte. */
#define _GNU_SOURCE
#include "sock/sock.h"

#include <errno.h>
#include <pthread.h>
#include <smcr/smcr.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <string.h>
#include <sys/epoll.h>

#include "sock/errmap.h"
#include "sock/sig.h"
#include "sock/sys.h"
#include "sock/trace.h"
#include "util/clock.h"
#include "util/env.h"
#include "util/log.h"
#include "dev/emu/emu.h"
#include "dev/shm/shm.h"
#ifdef SMCR_WITH_VERBS
#include "dev/verbs/verbs.h"
#endif

#define SOCK_MAX_DEVICES 8

static pthread_mutex_t eng_lock = PTHREAD_MUTEX_INITIALIZER; /* protects the three below */
static struct core_engine *eng;
static bool eng_tried;
static bool eng_atfork;
static _Atomic(struct core_engine *) eng_fast; /* eng, for lock-free reads once created */
static struct prog_watch *eng_watch[16];      /* (eng_lock) the engine fds' watches, kept for
					       * the engine's life (the process's) */

/* ---- Direct wake (docs/parts/stream.md "Direct wake") ----
 *
 * A blocking call that sleeps used to be woken in two steps: the peer's message writes
 * the CQ's eventfd, the progress thread wakes, polls, writes the socket's POLLIN token
 * (or drains the POLLOUT filler), and only then the program thread wakes: two wake-ups
 * per wait, and the progress thread's takes the other core from the peer's copy. Now one
 * program thread at a time (the "direct sleeper") sleeps in epoll_wait on eng_direct_epfd,
 * which holds the CQ completion fds and that thread's program fd; the woken thread takes
 * the completions itself (data.c wait_for).
 *
 * Routing without a system call per sleep: every CQ fd is registered EPOLLEXCLUSIVE in
 * eng_direct_epfd FIRST and in the progress thread's epoll set second (also
 * EPOLLEXCLUSIVE). An eventfd write wakes its waiters in registration order and stops at
 * the first exclusive registration whose epoll set has a thread inside epoll_wait (the
 * kernel's ep_poll_callback returns "woken" for it). So: a direct sleeper inside
 * epoll_wait gets the wake-up and the progress thread does not wake at all; with nobody
 * there, the progress thread gets it as before. Nothing is paused or re-enabled, so no
 * epoll_ctl of the engine fds per sleep (pausing and resuming the progress thread's
 * registrations instead would cost four).
 *
 * The rule that keeps wake-ups from being lost (test: tests/sock/it_direct.c): a thread
 * that was inside epoll_wait on eng_direct_epfd, for whatever reason it returns (its own
 * fd, a CQ fd, the timeout, a signal), polls the CQs and runs the callbacks before it
 * does anything else (core_engine_prepare_sleep after its spin_begin: consumes the
 * eventfd, polls, fires). Every completion that wrote the eventfd was queued before the
 * write, so that poll finds it even when the wake-up raced with the sleeper's return.
 * An eventfd write while no direct sleeper waits reaches the progress thread (and leaves
 * a stale entry in eng_direct_epfd's ready list, re-checked, i.e. dropped or reported as
 * a harmless early return, at the next direct sleep). The async fds and every timer stay
 * with the progress thread (its timeout is unchanged). A provider whose completion fd
 * wakes all waiters (no exclusive wake) only costs the old second wake-up.
 *
 * The program fd is registered EPOLLONESHOT and re-armed by EPOLL_CTL_MOD before each
 * sleep of the same socket (its serial: socket objects are pooled and reused) at the
 * same number; a new socket (or number) is ADDed first: a connection's number is usually
 * a closed one reused, whose registration went with its file, so MOD first would fail
 * with ENOENT once per connection. Either call falls back to the other (ENOENT, EEXIST).
 * A stale registration of a file the program still holds fires at most once: a spurious
 * return, which the rule above makes harmless. */
static int eng_direct_epfd = -1; /* written once before eng_fast is published */
static _Atomic bool direct_busy; /* a thread owns the direct sleep (sock_direct_begin) */
static int direct_fd = -1;	 /* (direct_busy owner) the program fd registered */
static uint64_t direct_serial;	 /* (direct_busy owner) the socket it was for (serial) */
static uint32_t direct_ev;	 /* (direct_busy owner) and its events */
static const uint64_t DIRECT_CQ_MARK = UINT64_MAX; /* data of the CQ fds' registrations */
_Atomic uint64_t sock_direct_sleeps_total, sock_direct_cq_wakes_total, sock_direct_ctl_total;

int sock_direct_mode(void)
{
	static _Atomic int v = -1;
	int x = atomic_load_explicit(&v, memory_order_relaxed);
	if (x < 0) {
		x = (int)smcr_env_num_or("SMCR_DIRECT_WAKE", 0, 2, 1);
		atomic_store_explicit(&v, x, memory_order_relaxed);
	}
	return x;
}

/* Creates eng_direct_epfd with the CQ fds (eng_lock held, before the progress watches).
 * Returns whether the CQ fds are to be watched EPOLLEXCLUSIVE by the progress thread. */
static bool direct_setup(struct core_engine *e)
{
	int cq[SOCK_ENGINE_FDS_MAX];
	int n = sock_direct_mode() ? core_engine_cq_fds(e, cq, SOCK_ENGINE_FDS_MAX) : 0;
	if (n <= 0)
		return false;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return false;
	int h = sock_fd_hide(ep);
	if (h >= 0)
		ep = h;
	for (int i = 0; i < n; i++) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE,
					  .data.u64 = DIRECT_CQ_MARK };
		if (sock_sys.epoll_ctl(ep, EPOLL_CTL_ADD, cq[i], &ev) < 0) {
			LOG_WARN("engine", "direct wake off: epoll_ctl(EPOLLEXCLUSIVE) failed");
			sock_sys.close(ep);
			return false;
		}
	}
	eng_direct_epfd = ep;
	return true;
}

static bool is_cq_fd(struct core_engine *e, int fd)
{
	int cq[SOCK_ENGINE_FDS_MAX];
	int n = core_engine_cq_fds(e, cq, SOCK_ENGINE_FDS_MAX);
	for (int i = 0; i < n; i++)
		if (cq[i] == fd)
			return true;
	return false;
}

bool sock_direct_begin(int fd, uint64_t serial, bool out)
{
	if (!atomic_load_explicit(&eng_fast, memory_order_acquire) || eng_direct_epfd < 0)
		return false;
	bool no = false;
	if (atomic_load_explicit(&direct_busy, memory_order_relaxed) ||
	    !atomic_compare_exchange_strong_explicit(&direct_busy, &no, true,
						     memory_order_acquire, memory_order_relaxed))
		return false;
	uint32_t evs = (out ? EPOLLOUT : EPOLLIN) | EPOLLONESHOT;
	struct epoll_event ev = { .events = evs, .data.u64 = (uint64_t)(unsigned)fd };
	/* The previous fd's registration is never deleted (a system call per new socket,
	 * connect's path): closed, it went with its file; still open, it is one-shot, so it
	 * wakes the direct sleeper at most once more (a spurious return, harmless). */
	int op = direct_fd == fd && direct_serial == serial ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	int rc = sock_sys.epoll_ctl(eng_direct_epfd, op, fd, &ev);
	if (rc < 0 && errno == (op == EPOLL_CTL_MOD ? ENOENT : EEXIST)) {
		/* MOD: the number was closed and reused; ADD: this file was registered
		 * earlier under this number and is still open */
		atomic_fetch_add_explicit(&sock_direct_ctl_total, 1, memory_order_relaxed);
		op = op == EPOLL_CTL_MOD ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
		rc = sock_sys.epoll_ctl(eng_direct_epfd, op, fd, &ev);
	}
	atomic_fetch_add_explicit(&sock_direct_ctl_total, 1, memory_order_relaxed);
	if (rc < 0) {
		direct_fd = -1;
		atomic_store_explicit(&direct_busy, false, memory_order_release);
		return false;
	}
	direct_fd = fd;
	direct_serial = serial;
	direct_ev = evs;
	return true;
}

int sock_direct_wait(int ms, bool *mine)
{
	struct epoll_event evs[4];
	*mine = false;
	atomic_fetch_add_explicit(&sock_direct_sleeps_total, 1, memory_order_relaxed);
	int n = sock_sys.epoll_wait(eng_direct_epfd, evs, 4, ms);
	for (int i = 0; i < n; i++) {
		if (evs[i].data.u64 == DIRECT_CQ_MARK)
			atomic_fetch_add_explicit(&sock_direct_cq_wakes_total, 1,
						  memory_order_relaxed);
		else if (evs[i].data.u64 == (uint64_t)(unsigned)direct_fd &&
			 (evs[i].events & (direct_ev | EPOLLERR | EPOLLHUP)))
			*mine = true;
	}
	return n;
}

void sock_direct_end(void)
{
	atomic_store_explicit(&direct_busy, false, memory_order_release);
}

/* $name in milliseconds (at most a day), in ns; dflt_ns if unset or not such a number. */
static uint64_t env_ms(const char *name, uint64_t dflt_ns)
{
	uint64_t ms;
	return smcr_env_num(name, 0, 86400000u, &ms) ? ms * SMCR_NS_PER_MS : dflt_ns;
}

/* Read at each use (tests change it between listeners in one process), parsed again only
 * when the text changed, so a bad value warns once per thread, not per connection. */
uint64_t sock_server_first_wait_ns(void)
{
	static _Thread_local char seen[64]; /* a longer value is parsed at each use */
	static _Thread_local uint64_t seen_ns;
	static _Thread_local bool parsed;
	const char *v = getenv("SMCR_SERVER_WAIT_MS");
	if (!v)
		v = "";
	if (!parsed || strncmp(v, seen, sizeof(seen)) != 0) {
		seen_ns = env_ms("SMCR_SERVER_WAIT_MS", 2000 * SMCR_NS_PER_MS);
		snprintf(seen, sizeof(seen), "%s", v);
		parsed = true;
	}
	return seen_ns;
}

static void register_providers(void)
{
	if (dev_shm_register() < 0)
		LOG_WARN("engine", "cannot register the shm provider");
	if (dev_emu_register() < 0)
		LOG_WARN("engine", "cannot register the emu provider");
#ifdef SMCR_WITH_VERBS
	if (dev_verbs_register() < 0)
		LOG_WARN("engine", "cannot register the verbs provider");
#endif
}

#ifdef SMCR_WITH_VERBS
/* "verbs" alone means every ACTIVE RoCE port of the host (docs/parts/verbs.md); with none,
 * the reason is logged and the spec is dropped (no device: TCP). */
static char verbs_specs[SOCK_MAX_DEVICES][VERBS_SPEC_MAX];
static int expand_verbs(const char **devs, int ndev)
{
	const char *why = dev_verbs_absent();
	int n = why ? 0 : dev_verbs_active_ports(verbs_specs, SOCK_MAX_DEVICES - ndev);
	if (!n)
		LOG_WARN("engine", "SMCR_DEVICES=verbs: %s", why ? why : "no RDMA port is ACTIVE");
	for (int i = 0; i < n; i++)
		devs[ndev++] = verbs_specs[i];
	return ndev;
}
#endif

/* The engine's progress: all pending work, then arm the CQs; if work arrived while
 * arming, go round again (bounded: with steady traffic, return "due now" and let the
 * loop take one more turn). */
static uint64_t engine_round(uint64_t now)
{
	struct core_engine *e = atomic_load_explicit(&eng_fast, memory_order_acquire);
	if (!e)
		return 0;
	uint64_t next = UINT64_MAX;
	/* A program thread holds a live spin or a lease (it polls and fires the
	 * callbacks): a progress round here would fight it for the engine's locks. Look
	 * again at the spin's or the lease's end (docs/design/readiness.md). */
	if (core_engine_spin_live(e, now, &next))
		return next == UINT64_MAX ? 0 : (next ? next : 1);
	for (int i = 0;; i++) {
		(void)core_engine_progress(e, now, &next);
		if (core_engine_prepare_sleep(e) == 0)
			break;
		/* A program thread spins on the engine: it takes the completions and its
		 * spin_end arms the CQs; going round again would only fight it for the
		 * engine's locks (next holds the spin's grace deadline). */
		if (core_engine_spinning(e))
			break;
		now = smcr_now_ns();
		if (i == 16) {
			next = now;
			break;
		}
	}
	return next == UINT64_MAX ? 0 : (next ? next : 1);
}

static uint64_t engine_hook(uint64_t now)
{
	return engine_round(now);
}

/* The completion fds only wake the thread; the hook does the work. */
static void engine_fd_ready(void *arg, uint32_t events)
{
	(void)arg;
	(void)events;
}

/* At exit the kernel closes a TCP socket's fd and still sends its FIN; a userspace stack
 * dies with the process. So, as the kernel would, close every SMC-R connection the program
 * left open, then give the close protocol (the "connection closed" CDCs, and the peers'
 * answers) up to $SMCR_EXIT_WAIT_MS (default 2000, the spec's close wait) to finish;
 * return at once when nothing is left. Only in the process that created the engine. */
static pid_t eng_pid;

static void engine_exit(void)
{
	sock_exit_flush();
}

void sock_exit_flush(void)
{
	struct core_engine *e = atomic_load_explicit(&eng_fast, memory_order_acquire);
	if (!e || getpid() != eng_pid)
		return;
	for (int fd = fdtab_next(0); fd >= 0; fd = fdtab_next(fd + 1)) {
		struct sock *s = sock_get(fd);
		if (!s)
			continue;
		int st = atomic_load(&s->state);
		sock_put(s);
		if (st == SS_SMC || st == SS_HANDSHAKE)
			(void)smcr_close(fd);
	}
	uint64_t t0 = smcr_now_ns();
	uint64_t end = t0 + env_ms("SMCR_EXIT_WAIT_MS", 2000 * SMCR_NS_PER_MS);
	struct core_engine_stats st;
	for (;;) {
		core_engine_stats(e, &st);
		if (st.conns == 0 || smcr_now_ns() >= end)
			break;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	LOG_INFO("engine", "exit: waited %llu ms for %u connection(s) to close",
		 (unsigned long long)((smcr_now_ns() - t0) / SMCR_NS_PER_MS), st.conns);
	/* Then end the link groups in order, as the kernel does when it frees one: the peers
	 * see DELETE LINK (an orderly end), not a link that failed. */
	core_engine_end_lgs(e, smcr_now_ns());
}

static void engine_atfork_child(void)
{
	/* The parent's engine (its QPs, memory, thread) is not usable here; a child that
	 * uses smcr creates its own. The old one is leaked on purpose. */
	pthread_mutex_init(&eng_lock, NULL);
	eng = NULL;
	eng_tried = false;
	atomic_store(&eng_fast, NULL);
	eng_direct_epfd = -1; /* the parent's epoll set (shared after fork): not ours */
	direct_fd = -1;
	atomic_store(&direct_busy, false);
}

struct core_engine *sock_engine(void)
{
	struct core_engine *e = atomic_load_explicit(&eng_fast, memory_order_acquire);
	if (e)
		return e;
	pthread_mutex_lock(&eng_lock);
	if (!eng_atfork) {
		pthread_atfork(NULL, NULL, engine_atfork_child);
		eng_atfork = true;
	}
	if (eng_tried) {
		e = eng;
		pthread_mutex_unlock(&eng_lock);
		return e;
	}
	eng_tried = true;
	register_providers();

	char *specs = strdup(getenv("SMCR_DEVICES") ? getenv("SMCR_DEVICES") : "shm");
	const char *devs[SOCK_MAX_DEVICES];
	int ndev = 0;
	char *save = NULL;
	for (char *t = specs ? strtok_r(specs, " ;\t\n", &save) : NULL;
	     t && ndev < SOCK_MAX_DEVICES; t = strtok_r(NULL, " ;\t\n", &save)) {
#ifdef SMCR_WITH_VERBS
		if (strcmp(t, VERBS_PROVIDER_NAME) == 0) {
			ndev = expand_verbs(devs, ndev);
			continue;
		}
#endif
		devs[ndev++] = t;
	}

	uint64_t lg_free_ns = env_ms("SMCR_LG_FREE_MS", 0);
	struct core_engine_params p = {
		.devices = devs,
		.ndevices = ndev,
		.clc_wait_ns = env_ms("SMCR_CLC_WAIT_MS", 0),
		.clc_wait_short_ns = env_ms("SMCR_CLC_WAIT_SHORT_MS", 0),
		.llc_wait_ns = env_ms("SMCR_LLC_WAIT_MS", 0),
		.llc_wait_first_ns = env_ms("SMCR_LLC_WAIT_FIRST_MS", 0),
		.lg_free_srv_ns = lg_free_ns,
		.lg_free_clnt_ns = lg_free_ns,
		.close_wait_ns = env_ms("SMCR_CLOSE_WAIT_MS", 0),
		.testlink_ns = env_ms("SMCR_TESTLINK_MS", 0),
		.close_solicited = smcr_env_num_or("SMCR_CLOSE_SOLICITED", 0, 1, 0) == 1,
		.trace = trace_core_fn(), /* SMCR_TRACE (trace.h); NULL when off */
		.rmbe_auto_max = CORE_RMBE_AUTO_MAX,
		/* 0: the engine's maximum */
		.conns_per_lg = (unsigned)smcr_env_num_or("SMCR_CONNS_PER_LG", 1,
							  CORE_CONNS_PER_LG_MAX, 0),
	};
	/* SMCR_UEID: the user EIDs of SMC-R v2 (docs/CONFIG.md). */
	const char *ueid = getenv("SMCR_UEID");
	if (ueid && core_ueid_parse(ueid, &p.ueids))
		LOG_WARN("engine", "SMCR_UEID=%s: entries that are not valid EIDs (A-Z 0-9 . -, "
			 "at most 32, first a letter or digit), repeated, or past the 8th are "
			 "ignored; %u in use", ueid, (unsigned)p.ueids.n);
	int rc = ndev ? core_engine_new(&p, &e) : -SMCR_E_DEV_NO_DEVICE; /* none listed or found */
	free(specs);
	if (rc < 0) {
		LOG_WARN("engine", "no SMC-R engine (%s): connections use TCP", sock_err_name(rc));
		e = NULL;
	} else {
		int fds[16];
		int n = core_engine_fds(e, fds, 16);
		/* the direct sleep's registrations first: exclusive wake-ups go in
		 * registration order (Direct wake, above) */
		bool excl = direct_setup(e);
		for (int i = 0; i < n && i < 16; i++) {
			uint32_t ev = EPOLLIN | (excl && is_cq_fd(e, fds[i]) ? EPOLLEXCLUSIVE : 0);
			if (progress_watch(fds[i], ev, engine_fd_ready, NULL, NULL,
					   &eng_watch[i]) < 0)
				LOG_ERR("engine", "cannot watch engine fd %d", fds[i]);
		}
		eng = e;
		eng_pid = getpid();
		atexit(engine_exit);
		atomic_store_explicit(&eng_fast, e, memory_order_release);
		progress_set_hook(engine_hook);
		LOG_INFO("engine", "SMC-R engine up with %d device(s)", ndev);
	}
	pthread_mutex_unlock(&eng_lock);
	return e;
}

struct core_engine *sock_engine_if_up(void)
{
	return atomic_load_explicit(&eng_fast, memory_order_acquire);
}

void sock_core_event(void *ctx, struct core_conn *c, unsigned events, unsigned raised)
{
	(void)c;
	struct sock *s = ctx;
	LOG_DBG("engine", "fd %d: event 0x%x raised 0x%x", s->fd, events, raised);
	if (raised & CORE_EV_CLC)
		hs_kick(s);
	/* Before SMC the program end is the placeholder (nothing to show); the handshake's
	 * end applies the level mask itself after setting SS_SMC, so nothing is lost. */
	if (atomic_load(&s->state) != SS_SMC)
		return;
	if (raised & CORE_EV_RDHUP)
		hs_peer_closed(s, events); /* the TCP watch can go (docs/parts/connect.md "Close") */
	/* An arrival for a thread spinning in recv on this socket: that thread takes the
	 * data itself, so the POLLIN token (a send now, a recv to drain it when the read
	 * empties the RMBE: 2 system calls per message) is skipped; the spinner writes it if
	 * data is left after its read (data.c sock_rx_flush). */
	if ((raised & (CORE_EV_IN | CORE_EV_IN_NEW)) && !(events & CORE_EV_ERR) &&
	    sock_rx_defer(s))
		raised &= ~(unsigned)(CORE_EV_IN | CORE_EV_IN_NEW);
	sock_apply_events(s, events, raised, false);
}
