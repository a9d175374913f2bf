/* progress.h: the one progress thread of the process (docs/design/engine-decisions.md decision 3).
 *
 * Started lazily (progress_start, by the first smcr socket), it sleeps in epoll_wait on:
 *   - fds registered with progress_watch: the engine's completion and timer fds and the
 *     hidden TCP fds (FIN/RST of SMC-R connections, CLC bytes of background handshakes);
 *   - an eventfd that wakes it for commands (progress_call) and new timers;
 * with a timeout of the earliest timer (progress_timer_arm) or of the engine's next
 * deadline (the poll hook). Decision 3 names a timerfd; the epoll_wait timeout is the
 * same thing for one thread with one fewer fd (millisecond granularity, rounded up: the
 * CLC and LLC timers are seconds).
 * Each loop turn: free watches removed since the last turn, run due timers, run queued
 * calls, call the poll hook (the engine's progress: poll CQs, process LLC/CDC, timers),
 * then wait. It never spins: with nothing due it sleeps until an fd or the eventfd fires.
 *
 * Callbacks run on the progress thread, one at a time, with no progress lock held: they
 * may call progress_* functions (watch, unwatch, timers, calls).
 *
 * Lifetime of a watch: progress_watch returns a handle; progress_unwatch (any thread, at
 * most once) stops further calls as soon as it returns, except a call already running on
 * the progress thread; the release function given at watch time runs on the progress
 * thread once no call can be running any more, or at once, inside progress_unwatch, when
 * the thread is not running or is asleep (then no call can be running: the caller's
 * thread runs release, with the caller's locks held, so a caller must hold its own
 * reference to arg besides the watch's). So release is the place to drop the reference
 * the watch held on arg.
 *
 * Locks: progress_lock (static in progress.c) protects the timer list, call queue and
 * removed-watch list and the started/stopping flags; it is never held while a callback
 * runs. Lock order: callers may hold their own locks when calling progress_*; progress
 * takes none of theirs.
 *
 * fork(): the child has no progress thread; the first use in the child starts a new one.
 * Watches and timers inherited from the parent are forgotten (their connections are not
 * usable in the child: docs/parts/sock.md). */
#ifndef SMCR_SOCK_PROGRESS_H
#define SMCR_SOCK_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

struct prog_watch;

typedef void (*prog_fn)(void *arg, uint32_t events);
typedef void (*prog_release_fn)(void *arg);

/* Starts the thread if it is not running. Idempotent, thread-safe. */
SMCR_MUST_CHECK int progress_start(void);
/* Stops and joins the thread (tests, process end): releases the watches already removed,
 * disarms the timers, drops calls not run and closes the close-later list's fds (its
 * timer was one of those disarmed; closeq.h). Owners should remove their watches first; a
 * progress_unwatch after the stop releases at once. Not from the progress thread. */
void progress_stop(void);
/* True on the progress thread. */
bool progress_on_thread(void);

/* Calls fn(arg, epoll events) on the progress thread whenever fd is ready for events
 * (EPOLLIN, EPOLLOUT, EPOLLRDHUP, EPOLLET, ... as epoll_ctl). Starts the thread. */
SMCR_MUST_CHECK int progress_watch(int fd, uint32_t events, prog_fn fn, void *arg,
				   prog_release_fn release, struct prog_watch **out);
SMCR_MUST_CHECK int progress_watch_modify(struct prog_watch *w, uint32_t events);
/* Call before closing the fd. Releases per the rules above. */
void progress_unwatch(struct prog_watch *w);
/* In a fork child only, for a watch made by the parent: the parent's progress thread does
 * not exist here, so nothing can be running w; its memory is freed at once (release is not
 * called: the parent's owner keeps its state). Without it the child's copy of w is lost. */
void progress_watch_forget_inherited(struct prog_watch *w);

/* A one-shot timer, embedded in its owner. Armed: fn(arg, 0) runs on the progress thread
 * at or after deadline (smcr_now_ns() clock). */
struct prog_timer {
	uint64_t deadline;	 /* protected by progress_lock */
	prog_fn fn;
	void *arg;
	bool armed;		 /* protected by progress_lock */
	struct prog_timer *next; /* protected by progress_lock */
};
void progress_timer_init(struct prog_timer *t, prog_fn fn, void *arg);
/* (Re)arms. Starts the thread. */
SMCR_MUST_CHECK int progress_timer_arm(struct prog_timer *t, uint64_t deadline_ns);
/* True while armed (not yet popped for running). */
bool progress_timer_armed(struct prog_timer *t);
/* Returns true if the timer was armed and will not run. When it returns false the
 * callback may be running or have run; the owner must synchronise with it itself. */
bool progress_timer_cancel(struct prog_timer *t);

/* Runs fn(arg, 0) once on the progress thread, soon. Starts the thread. */
SMCR_MUST_CHECK int progress_call(prog_fn fn, void *arg);

/* The engine's progress, called every loop turn (and after every wake-up); returns the
 * next deadline in smcr_now_ns() time or 0 for none. Set once by the socket layer. */
typedef uint64_t (*prog_hook_fn)(uint64_t now_ns);
void progress_set_hook(prog_hook_fn fn);
/* Wakes the thread (e.g. after the engine armed an earlier deadline). */
void progress_kick(void);
/* The thread is to run a loop turn (the poll hook) by at_ns (+ up to 1 ms: its timeout is
 * in ms) because the caller changed what the hook would report: smcr_epoll_wait's held
 * spin (the hook stands back while it is live and must look again at its end). No lock,
 * no timer insert: a post taken by the thread before it sleeps or seen to be covered by
 * its sleep's end costs two atomic loads; a kick only when the thread sleeps past at_ns
 * (once per such sleep). Any thread; a no-op on the progress thread itself (its hook runs
 * before it sleeps). docs/parts/conns.md "The held spin and the progress thread standing
 * back". */
void progress_due_by(uint64_t at_ns);

/* Loop turns so far (tests: the thread sleeps when idle). */
uint64_t progress_turns(void);

#endif
