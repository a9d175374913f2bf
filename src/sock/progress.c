/* progress.c: the progress thread (rules in progress.h). */
#define _GNU_SOURCE
#include "sock/progress.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sock/closeq.h"
#include "sock/errmap.h"
#include "sock/sig.h"
#include "sock/statsrv.h"
#include "sock/sys.h"
#include "util/clock.h"
#include "util/log.h"

struct prog_watch {
	int fd;
	prog_fn fn;
	void *arg;
	prog_release_fn release;
	_Atomic bool dead;	      /* set by progress_unwatch; read by the dispatcher */
	struct prog_watch *next_dead; /* protected by progress_lock */
};

struct prog_call {
	prog_fn fn;
	void *arg;
	struct prog_call *next;
};

static pthread_mutex_t progress_lock = PTHREAD_MUTEX_INITIALIZER;
/* All protected by progress_lock: */
static bool prog_started, prog_stopping;
static pthread_t prog_thread;
static int prog_epfd = -1, prog_evfd = -1;
static struct prog_timer *prog_timers;	   /* sorted by deadline */
static struct prog_call *prog_calls, **prog_calls_tail = &prog_calls;
static struct prog_watch *prog_dead;	   /* unwatched, to release after this turn */
/* When the thread's epoll_wait times out (ns; UINT64_MAX: never), 0 while it is awake
 * (it reads the timer list, the call queue and the removed watches again, under
 * progress_lock, before it sleeps): a timer armed later than this needs no kick, and
 * nothing queued while it is awake does (an eventfd write and a wake-up per handshake
 * and per close otherwise; docs/parts/connect.md). */
static uint64_t prog_wake_at;
/* progress_due_by (docs/PERFORMANCE.md: the held spin's kick). prog_due: the earliest "be
 * awake by" posted since the thread last took it (UINT64_MAX: none); prog_sleep_end:
 * prog_wake_at for lock-free readers (0 awake or about to be, 1 kicked, UINT64_MAX asleep
 * with no timeout). A Dekker pair, both
 * sequentially consistent: a poster lowers prog_due, then loads prog_sleep_end; the thread
 * stores prog_sleep_end, then exchanges prog_due. So the thread takes the post into its
 * timeout, or the poster sees the sleep's end (and kicks if that is too late), or both.
 * Written by any thread (posters, the thread), never under a lock. */
static _Atomic uint64_t prog_due = UINT64_MAX;
static _Atomic uint64_t prog_sleep_end;
#define PROG_DUE_SLACK_NS SMCR_NS_PER_MS /* a sleep's end is rounded up to whole ms */
/* Read by any thread: */
static _Atomic(prog_hook_fn) prog_hook;
static _Atomic uint64_t prog_turn_count;
static _Atomic pthread_t prog_self; /* the thread's id while running, for progress_on_thread */
static _Atomic bool prog_running;

static const int prog_ev_marker; /* data.ptr of the eventfd's registration */

void progress_kick(void)
{
	uint64_t one = 1;
	int fd;
	pthread_mutex_lock(&progress_lock);
	fd = prog_evfd;
	pthread_mutex_unlock(&progress_lock);
	if (fd >= 0)
		(void)!write(fd, &one, sizeof(one));
}

void progress_due_by(uint64_t at_ns)
{
	uint64_t d = atomic_load(&prog_due);
	while (d > at_ns && !atomic_compare_exchange_weak(&prog_due, &d, at_ns))
		;
	uint64_t s = atomic_load(&prog_sleep_end);
	/* asleep past it: one kick per such sleep (1 = kicked, due at once, for the next
	 * posters), and none from the thread itself (it runs its hook before it sleeps) */
	if (s > 1 && s > at_ns + PROG_DUE_SLACK_NS && !progress_on_thread() &&
	    atomic_compare_exchange_strong(&prog_sleep_end, &s, 1))
		progress_kick();
}

bool progress_on_thread(void)
{
	return atomic_load(&prog_running) && pthread_equal(atomic_load(&prog_self), pthread_self());
}

uint64_t progress_turns(void)
{
	return atomic_load_explicit(&prog_turn_count, memory_order_relaxed);
}

void progress_set_hook(prog_hook_fn fn)
{
	atomic_store(&prog_hook, fn);
	progress_kick();
}

static void release_dead(void)
{
	pthread_mutex_lock(&progress_lock);
	struct prog_watch *d = prog_dead;
	prog_dead = NULL;
	pthread_mutex_unlock(&progress_lock);
	while (d) {
		struct prog_watch *n = d->next_dead;
		if (d->release)
			d->release(d->arg);
		free(d);
		d = n;
	}
}

/* Runs the due timers and returns the earliest remaining deadline (0: none). */
static uint64_t run_timers(uint64_t now)
{
	for (;;) {
		pthread_mutex_lock(&progress_lock);
		struct prog_timer *t = prog_timers;
		if (!t || t->deadline > now) {
			uint64_t next = t ? t->deadline : 0;
			pthread_mutex_unlock(&progress_lock);
			return next;
		}
		prog_timers = t->next;
		t->armed = false;
		t->next = NULL;
		prog_fn fn = t->fn;
		void *arg = t->arg;
		pthread_mutex_unlock(&progress_lock);
		fn(arg, 0);
	}
}

static void run_calls(void)
{
	pthread_mutex_lock(&progress_lock);
	struct prog_call *c = prog_calls;
	prog_calls = NULL;
	prog_calls_tail = &prog_calls;
	pthread_mutex_unlock(&progress_lock);
	while (c) {
		struct prog_call *n = c->next;
		c->fn(c->arg, 0);
		free(c);
		c = n;
	}
}

/* epoll_wait's timeout (whole ms, rounded up, at most 60 s) for a sleep until deadline_ns;
 * *wake gets when that sleep ends. */
static int sleep_ms_until(uint64_t deadline_ns, uint64_t *wake)
{
	uint64_t now = smcr_now_ns();
	uint64_t ms = deadline_ns > now ? (deadline_ns - now + SMCR_NS_PER_MS - 1) / SMCR_NS_PER_MS
					: 0;
	int timeout = ms > 60000 ? 60000 : (int)ms;
	*wake = now + (uint64_t)timeout * SMCR_NS_PER_MS;
	return timeout;
}

static void *progress_main(void *unused)
{
	(void)unused;
	struct epoll_event evs[64];
	int epfd;
	atomic_store(&prog_self, pthread_self());
	/* named for per-thread profiles (perf stat --per-thread, top -H); failure is harmless */
	(void)pthread_setname_np(pthread_self(), "smcr-progress");
	pthread_mutex_lock(&progress_lock);
	epfd = prog_epfd;
	pthread_mutex_unlock(&progress_lock);
	for (;;) {
		atomic_fetch_add_explicit(&prog_turn_count, 1, memory_order_relaxed);
		release_dead();
		uint64_t now = smcr_now_ns();
		uint64_t next = run_timers(now);
		run_calls();
		prog_hook_fn hook = atomic_load(&prog_hook);
		if (hook) {
			uint64_t h = hook(smcr_now_ns());
			if (h && (!next || h < next))
				next = h;
		}
		pthread_mutex_lock(&progress_lock);
		bool stop = prog_stopping;
		/* timers armed by the calls and the hook just run count too */
		if (prog_timers && (!next || prog_timers->deadline < next))
			next = prog_timers->deadline;
		int timeout = -1;
		uint64_t wake = UINT64_MAX;
		if (prog_dead || prog_calls) {
			/* queued while awake (no kick then: progress_unwatch, progress_call) */
			next = 1;
		}
		if (next)
			timeout = sleep_ms_until(next, &wake);
		/* the posts of progress_due_by (see prog_due): publish the sleep's end, then
		 * take what was posted before it */
		atomic_store(&prog_sleep_end, wake);
		uint64_t due = atomic_exchange(&prog_due, UINT64_MAX);
		if (due < wake) {
			timeout = sleep_ms_until(due, &wake);
			atomic_store(&prog_sleep_end, wake);
		}
		prog_wake_at = wake;
		pthread_mutex_unlock(&progress_lock);
		if (stop)
			break;
		int n = epoll_wait(epfd, evs, 64, timeout);
		/* Awake: arms need no kick until the list is read again. A watch is published
		 * by progress_watch's release store of its dead flag, read with acquire below
		 * before its fn is called (epoll itself is no barrier to TSan). */
		pthread_mutex_lock(&progress_lock);
		prog_wake_at = 0;
		atomic_store(&prog_sleep_end, 0);
		pthread_mutex_unlock(&progress_lock);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == &prog_ev_marker) {
				uint64_t v;
				(void)!read(prog_evfd, &v, sizeof(v));
				continue;
			}
			struct prog_watch *w = evs[i].data.ptr;
			/* acquire: pairs with progress_unwatch's store; a watch freed only after
			 * this batch (release_dead at the next turn), so w is valid here. */
			if (!atomic_load_explicit(&w->dead, memory_order_acquire))
				w->fn(w->arg, evs[i].events);
		}
	}
	return NULL;
}

static void progress_atfork_child(void)
{
	/* Only this thread exists in the child: no lock is held by anyone else, but the
	 * mutex may have been copied locked; re-initialise it. */
	pthread_mutex_init(&progress_lock, NULL);
	if (prog_epfd >= 0)
		close(prog_epfd);
	if (prog_evfd >= 0)
		close(prog_evfd);
	prog_epfd = prog_evfd = -1;
	prog_started = prog_stopping = false;
	prog_wake_at = 0;
	atomic_store(&prog_sleep_end, 0);
	atomic_store(&prog_due, UINT64_MAX);
	prog_timers = NULL;
	prog_calls = NULL;
	prog_calls_tail = &prog_calls;
	prog_dead = NULL;
	atomic_store(&prog_running, false);
}

/* At load, before the thread can exist (as every fork handler of the library: their
 * order is then fixed, not the order of first use). */
__attribute__((constructor)) static void progress_atfork_init(void)
{
	pthread_atfork(NULL, NULL, progress_atfork_child);
}

int progress_start(void)
{
	pthread_mutex_lock(&progress_lock);
	if (prog_started) {
		pthread_mutex_unlock(&progress_lock);
		return 0;
	}
	int rc = 0;
	prog_epfd = epoll_create1(EPOLL_CLOEXEC);
	prog_evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (prog_epfd < 0 || prog_evfd < 0) {
		rc = sock_err_sys(errno);
		goto fail;
	}
	/* Both at hidden numbers, out of the program's way. */
	int e = sock_fd_hide(prog_epfd);
	if (e >= 0)
		prog_epfd = e;
	e = sock_fd_hide(prog_evfd);
	if (e >= 0)
		prog_evfd = e;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = (void *)&prog_ev_marker };
	if (epoll_ctl(prog_epfd, EPOLL_CTL_ADD, prog_evfd, &ev) < 0) {
		rc = sock_err_sys(errno);
		goto fail;
	}
	prog_stopping = false;
	atomic_store(&prog_running, true);
	/* The thread blocks every signal (from its start: it inherits the mask): a signal
	 * meant for the program (an alarm() for a blocking call, a sigwait() thread's) must
	 * go to one of the program's threads, as without the library (signal(7)). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int prc = pthread_create(&prog_thread, NULL, progress_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (prc != 0) {
		atomic_store(&prog_running, false);
		rc = -SMCR_E_SOCK_THREAD;
		goto fail;
	}
	prog_started = true;
	pthread_mutex_unlock(&progress_lock);
	LOG_DBG("progress", "progress thread started");
	/* smcr-stat can read this process from now on (statsrv.h): its socket is served by
	 * this thread. (A listen, connect or accept starts it too, for a process whose
	 * connections are all TCP; a socket alone does not.) Its progress_watch finds the
	 * thread started. */
	statsrv_ensure();
	return 0;
fail:
	if (prog_epfd >= 0)
		close(prog_epfd);
	if (prog_evfd >= 0)
		close(prog_evfd);
	prog_epfd = prog_evfd = -1;
	pthread_mutex_unlock(&progress_lock);
	return rc;
}

void progress_stop(void)
{
	pthread_mutex_lock(&progress_lock);
	if (!prog_started) {
		pthread_mutex_unlock(&progress_lock);
		return;
	}
	prog_stopping = true;
	pthread_t t = prog_thread;
	pthread_mutex_unlock(&progress_lock);
	progress_kick();
	pthread_join(t, NULL);
	atomic_store(&prog_running, false);
	release_dead();
	pthread_mutex_lock(&progress_lock);
	struct prog_call *c = prog_calls;
	prog_calls = NULL;
	prog_calls_tail = &prog_calls;
	for (struct prog_timer *t2 = prog_timers; t2; t2 = t2->next)
		t2->armed = false;
	prog_timers = NULL;
	close(prog_epfd);
	close(prog_evfd);
	prog_epfd = prog_evfd = -1;
	prog_started = false;
	prog_wake_at = 0;
	atomic_store(&prog_sleep_end, 0);
	pthread_mutex_unlock(&progress_lock);
	while (c) {
		struct prog_call *n = c->next;
		free(c);
		c = n;
	}
	/* The close-later list (closeq.h) is emptied by the close reaper's timer, which
	 * was just disarmed: without this its hidden fds would stay open until the next
	 * wait site or the process's exit. Outside progress_lock (closeq_lock is a leaf). */
	closeq_drain_all();
}

void progress_watch_forget_inherited(struct prog_watch *w)
{
	free(w);
}

int progress_watch(int fd, uint32_t events, prog_fn fn, void *arg, prog_release_fn release,
		   struct prog_watch **out)
{
	int rc = progress_start();
	if (rc < 0)
		return rc;
	struct prog_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return -SMCR_E_NOMEM;
	w->fd = fd;
	w->fn = fn;
	w->arg = arg;
	w->release = release;
	/* Published by this release store (the thread's acquire load of dead before it
	 * calls w->fn orders its reads of w after these writes), not by holding
	 * progress_lock across the epoll_ctl: the thread takes that lock as it wakes, and an
	 * ADD under it (a server's child turning SMC-R while the client's first CDC wakes
	 * the thread) made it sleep on the futex once per connection. prog_epfd is read
	 * under the lock (progress_stop changes it), used after. */
	atomic_store_explicit(&w->dead, false, memory_order_release);
	struct epoll_event ev = { .events = events, .data.ptr = w };
	pthread_mutex_lock(&progress_lock);
	int epfd = prog_epfd;
	pthread_mutex_unlock(&progress_lock);
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		rc = sock_err_sys(errno);
	if (rc < 0) {
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

int progress_watch_modify(struct prog_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };
	int rc = 0;
	/* Not under progress_lock (see progress_watch): w is published already, the
	 * owner's lock serialises its modify and unwatch. */
	pthread_mutex_lock(&progress_lock);
	int epfd = prog_epfd;
	pthread_mutex_unlock(&progress_lock);
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
		rc = sock_err_sys(errno);
	return rc;
}

void progress_unwatch(struct prog_watch *w)
{
	atomic_store_explicit(&w->dead, true, memory_order_release);
	pthread_mutex_lock(&progress_lock);
	if (prog_epfd >= 0)
		(void)epoll_ctl(prog_epfd, EPOLL_CTL_DEL, w->fd, NULL);
	bool running = prog_started;
	/* awake (prog_wake_at 0): it checks prog_dead before it sleeps */
	bool asleep = prog_wake_at != 0 && !progress_on_thread();
	prog_release_fn rel = w->release;
	void *arg = w->arg; /* once on prog_dead and unlocked, w may be freed at any time */
	if (running) {
		/* Asleep: no call of w is running, and none will (the thread takes
		 * progress_lock after epoll_wait returns, so it sees dead before it dispatches
		 * anything, and the registration is gone): release here, and leave only the
		 * memory to free at its next turn (a batch it is about to dispatch may still
		 * hold w). No eventfd kick and wake-up per close (docs/parts/connect.md). */
		if (asleep)
			w->release = NULL;
		w->next_dead = prog_dead;
		prog_dead = w;
	}
	pthread_mutex_unlock(&progress_lock);
	if (!running) {
		if (rel)
			rel(arg);
		free(w);
	} else if (asleep && rel) {
		rel(arg);
	}
}

void progress_timer_init(struct prog_timer *t, prog_fn fn, void *arg)
{
	memset(t, 0, sizeof(*t));
	t->fn = fn;
	t->arg = arg;
}

/* Caller holds progress_lock. */
static void timer_unlink_locked(struct prog_timer *t)
{
	for (struct prog_timer **p = &prog_timers; *p; p = &(*p)->next) {
		if (*p == t) {
			*p = t->next;
			break;
		}
	}
	t->next = NULL;
	t->armed = false;
}

/* (Re)inserts t at deadline_ns, keeping the list sorted by deadline. */
static void timer_insert_locked(struct prog_timer *t, uint64_t deadline_ns)
{
	if (t->armed)
		timer_unlink_locked(t);
	t->deadline = deadline_ns;
	struct prog_timer **p = &prog_timers;
	while (*p && (*p)->deadline <= deadline_ns)
		p = &(*p)->next;
	t->next = *p;
	*p = t;
	t->armed = true;
}

int progress_timer_arm(struct prog_timer *t, uint64_t deadline_ns)
{
	int rc = progress_start();
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&progress_lock);
	timer_insert_locked(t, deadline_ns);
	/* only when the thread would sleep past it (prog_wake_at: 0 while awake) */
	bool kick = deadline_ns < prog_wake_at;
	pthread_mutex_unlock(&progress_lock);
	if (kick && !progress_on_thread())
		progress_kick();
	return 0;
}

bool progress_timer_armed(struct prog_timer *t)
{
	pthread_mutex_lock(&progress_lock);
	bool a = t->armed;
	pthread_mutex_unlock(&progress_lock);
	return a;
}

bool progress_timer_cancel(struct prog_timer *t)
{
	pthread_mutex_lock(&progress_lock);
	bool was = t->armed;
	if (was)
		timer_unlink_locked(t);
	pthread_mutex_unlock(&progress_lock);
	return was;
}

int progress_call(prog_fn fn, void *arg)
{
	int rc = progress_start();
	if (rc < 0)
		return rc;
	struct prog_call *c = calloc(1, sizeof(*c));
	if (!c)
		return -SMCR_E_NOMEM;
	c->fn = fn;
	c->arg = arg;
	pthread_mutex_lock(&progress_lock);
	*prog_calls_tail = c;
	prog_calls_tail = &c->next;
	/* awake (prog_wake_at 0): it checks prog_calls before it sleeps */
	bool asleep = prog_wake_at != 0;
	pthread_mutex_unlock(&progress_lock);
	if (asleep)
		progress_kick();
	return 0;
}
