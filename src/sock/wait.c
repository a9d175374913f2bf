/* wait.c: the waits the interposer calls (wait.h has the contract) and the wait policy's
 * configuration (waitpol.h). Model: docs/design/readiness.md section 4. A wait polls
 * once (the engine's progress in this thread, then the fds without blocking), polls for
 * the wait policy's budget with the completion queues leased unarmed (the peers'
 * messages wake nobody while this thread takes them), then arms them and sleeps in the
 * kernel on the caller's fds, whose SMC-R readiness the tokens show (sig.h). */
#define _GNU_SOURCE
#include "sock/wait.h"

#include <errno.h>

#include "sock/sock.h"
#include "sock/sys.h"
#include "util/clock.h"
#include "util/env.h"

#define BUSY_POLL_MAX_US 100000u

/* Written once (cfg_init), read-only after. */
static struct waitpol_cfg cfg;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static void cfg_init(void)
{
	cfg = (struct waitpol_cfg){
		.spin_min_ns = WAITPOL_SPIN_MIN_NS,
		.spin_max_ns = WAITPOL_SPIN_MAX_NS,
		.busy_poll_ns = smcr_env_num_or("SMCR_BUSY_POLL_US", 0, BUSY_POLL_MAX_US, 0) * 1000,
		.lost_gap_ns = WAITPOL_LOST_GAP_NS,
		.off_max_waits = WAITPOL_OFF_MAX_WAITS,
	};
}

const struct waitpol_cfg *sock_waitpol_cfg(void)
{
	pthread_once(&cfg_once, cfg_init);
	return &cfg;
}

/* The policy of this thread's poll and epoll waits (one state per thread: the waits of
 * an event loop follow each other on its thread). */
static _Thread_local struct waitpol tl_pol;

/* What is left of a timeout (ns, < 0: none) after spent ns. */
static long long left_of(long long timeout_ns, uint64_t spent)
{
	if (timeout_ns < 0)
		return -1;
	return (uint64_t)timeout_ns > spent ? timeout_ns - (long long)spent : 0;
}

static int ms_of(long long ns)
{
	if (ns < 0)
		return -1;
	long long ms = (ns + 999999) / 1000000;
	return ms > 1000000 ? 1000000 : (int)ms;
}

/* One look without blocking: poll (kind 0) or epoll_wait (kind 1). */
struct wait_args {
	int kind;
	struct pollfd *fds;
	nfds_t n;
	int epfd;
	struct epoll_event *evs;
	int max;
};

static int look(const struct wait_args *a)
{
	if (a->kind == 0)
		return sock_sys.poll(a->fds, a->n, 0);
	return sock_sys.epoll_wait(a->epfd, a->evs, a->max, 0);
}

static int sleep_in(const struct wait_args *a, long long timeout_ns, const sigset_t *mask)
{
	if (a->kind == 0) {
		struct timespec ts = sock_wait_ts_of(timeout_ns < 0 ? 0 : timeout_ns);
		return sock_sys.ppoll(a->fds, a->n, timeout_ns < 0 ? NULL : &ts, mask);
	}
	return sock_sys.epoll_pwait(a->epfd, a->evs, a->max, ms_of(timeout_ns), mask);
}

static int wait_any(const struct wait_args *a, long long timeout_ns, const sigset_t *mask)
{
	struct core_engine *e = sock_engine_if_up();
	if (!e)
		return sleep_in(a, timeout_ns, mask);
	int saved = errno;
	const struct waitpol_cfg *c = sock_waitpol_cfg();
	uint64_t t0 = smcr_now_ns(), now = t0;
	/* 1. once: the arrivals land (tokens) in this thread */
	(void)core_engine_progress(e, t0, NULL);
	int r = look(a);
	if (r != 0 || timeout_ns == 0) {
		if (r >= 0)
			errno = saved;
		return r;
	}
	/* 2. poll for the policy's budget, the CQs unarmed meanwhile */
	uint64_t budget = waitpol_spin_ns(&tl_pol, c);
	bool lost = false;
	if (budget) {
		(void)core_engine_lease(e, t0, t0 + budget);
		while (r == 0 && now - t0 < budget) {
			if (core_engine_progress(e, now, NULL) > 0)
				r = look(a);
			uint64_t t = smcr_now_ns();
			if (t - now > c->lost_gap_ns)
				lost = true;
			now = t;
		}
		if (r < 0)
			r = 0; /* the sleep below reports it */
	}
	bool caught = r > 0;
	/* 3. sleep: the CQs armed (and polled once more: what came in is a token now) */
	if (r == 0) {
		(void)core_engine_lease(e, now, 0);
		r = sleep_in(a, left_of(timeout_ns, smcr_now_ns() - t0), mask);
	}
	int err = errno;
	struct waitpol_obs o = { .waited_ns = smcr_now_ns() - t0, .caught = caught,
				 .lost_cpu = lost };
	waitpol_note(&tl_pol, c, &o);
	errno = r < 0 ? err : saved;
	return r;
}

long long sock_wait_ns_of(const struct timespec *t)
{
	if (!t)
		return -1;
	if (t->tv_sec < 0 || t->tv_nsec < 0 || t->tv_nsec >= 1000000000)
		return -2;
	if (t->tv_sec > 1000000000)
		return 1000000000ll * 1000000000ll;
	return (long long)t->tv_sec * 1000000000ll + t->tv_nsec;
}

int sock_wait_poll(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
		   const sigset_t *sigmask)
{
	long long ns = sock_wait_ns_of(timeout);
	if (ns == -2) {
		errno = EINVAL;
		return -1;
	}
	struct wait_args a = { .kind = 0, .fds = fds, .n = n };
	return wait_any(&a, ns, sigmask);
}

int sock_wait_epoll(int epfd, struct epoll_event *evs, int max, long long timeout_ns,
		    const sigset_t *sigmask)
{
	if (max <= 0 || !evs) {
		/* epoll_wait's own errors (EINVAL, EFAULT) */
		return sock_sys.epoll_pwait(epfd, evs, max, 0, sigmask);
	}
	struct wait_args a = { .kind = 1, .epfd = epfd, .evs = evs, .max = max };
	return wait_any(&a, timeout_ns, sigmask);
}
