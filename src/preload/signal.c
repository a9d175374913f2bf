/* signal.c: the wrappers of sigaction, signal, bsd_signal, sysv_signal, __sysv_signal and
 * siginterrupt: every handler the program installs runs through a trampoline that counts,
 * on the thread it runs on, the handlers run and those without SA_RESTART (sock/intr.h), so
 * a blocking call on an SMC-R connection interrupted by a signal restarts exactly when the
 * kernel would restart a TCP socket's (signal(7); docs/INTERPOSER.md "Signals").
 *
 * The kernel gets the trampoline with the program's own flags (SA_RESTART, SA_NODEFER,
 * SA_RESETHAND, SA_ONSTACK ...) and mask, plus SA_SIGINFO, so every call the kernel runs
 * itself restarts or not as without the interposer. The program reads back its own handler,
 * flags and mask (sigaction's old action); a disposition the kernel reset (SA_RESETHAND)
 * reads back as SIG_DFL. SIG_DFL and SIG_IGN go to the kernel as they are. Handlers set by
 * other means (the raw system call, a libc-internal call: sigset, ssignal) are not seen: an
 * EINTR after one of those stays EINTR. */
#define _GNU_SOURCE
#include "preload/pl.h"

#include <stdint.h>
#include <string.h>

#include "sock/intr.h"

struct pl_sig {
	_Atomic uintptr_t handler; /* the program's (sa_handler or sa_sigaction) */
	_Atomic int flags;         /* the program's sa_flags */
	sigset_t mask;             /* the program's sa_mask (under pl_sig_lock) */
	bool ours;                 /* the kernel's handler is the trampoline (pl_sig_lock) */
};

static struct pl_sig pl_sigs[_NSIG];
static sigset_t pl_sigintr; /* siginterrupt(sig, 1): signal() installs without SA_RESTART */
/* A spin lock taken with every signal blocked on the taking thread, so a handler that calls
 * sigaction (async-signal-safe) never waits for its own thread. */
static atomic_flag pl_sig_busy = ATOMIC_FLAG_INIT;

static void pl_sig_lock(sigset_t *old)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
	while (atomic_flag_test_and_set_explicit(&pl_sig_busy, memory_order_acquire))
		;
}

static void pl_sig_unlock(const sigset_t *old)
{
	atomic_flag_clear_explicit(&pl_sig_busy, memory_order_release);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static void pl_tramp(int sig, siginfo_t *si, void *uc)
{
	struct pl_sig *p = &pl_sigs[sig];
	uintptr_t h = atomic_load_explicit(&p->handler, memory_order_acquire);
	int f = atomic_load_explicit(&p->flags, memory_order_relaxed);
	/* counted first: a handler that leaves by siglongjmp was still run */
	sock_intr_runs++;
	if (!(f & SA_RESTART))
		sock_intr_norestart++;
	if (f & SA_RESETHAND) /* the kernel has reset the disposition: the program reads it so */
		atomic_store_explicit(&p->handler, (uintptr_t)SIG_DFL, memory_order_release);
	if (h == (uintptr_t)SIG_IGN)
		return;
	if (h == (uintptr_t)SIG_DFL) {
		/* changed to the default while this one was on its way: the default action */
		struct sigaction d;
		memset(&d, 0, sizeof(d));
		d.sa_handler = SIG_DFL;
		(void)PL_REAL(sigaction)(sig, &d, NULL);
		(void)raise(sig);
		return;
	}
	if (f & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))h)(sig, si, uc);
	else
		((void (*)(int))h)(sig);
}

static bool pl_is_tramp(const struct sigaction *k)
{
	return (k->sa_flags & SA_SIGINFO) && k->sa_sigaction == pl_tramp;
}

extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *oact);

__attribute__((noinline)) static int pl_sigaction(int sig, const struct sigaction *act,
						 struct sigaction *oact)
{
	if (sig <= 0 || sig >= _NSIG || sig == SIGKILL || sig == SIGSTOP)
		return PL_REAL(sigaction)(sig, act, oact);
	/* A vfork child (foreign.c pl_pid: getpid() differs) runs in the parent's memory
	 * with a signal table of its own: recording its changes (CPython's subprocess resets
	 * every handler to SIG_DFL before the exec) would take the parent's handlers away,
	 * and the parent's next signal would find SIG_DFL (test_eintr). The kernel's call
	 * alone then. */
	if (__builtin_expect(getpid() != pl_pid, 0))
		return PL_REAL(sigaction)(sig, act, oact);
	struct pl_sig *p = &pl_sigs[sig];
	sigset_t m;
	pl_sig_lock(&m);
	struct pl_sig was = { 0 };
	atomic_init(&was.handler, atomic_load(&p->handler));
	atomic_init(&was.flags, atomic_load(&p->flags));
	was.mask = p->mask;
	was.ours = p->ours;
	struct sigaction k, kold;
	const struct sigaction *kp = act;
	if (act) {
		uintptr_t h = (act->sa_flags & SA_SIGINFO) ? (uintptr_t)act->sa_sigaction
							    : (uintptr_t)act->sa_handler;
		if (h != (uintptr_t)SIG_DFL && h != (uintptr_t)SIG_IGN) {
			k = *act;
			k.sa_sigaction = pl_tramp;
			k.sa_flags |= SA_SIGINFO;
			kp = &k;
		}
		/* the view first: a signal the new disposition takes already finds it (SIG_DFL
		 * and SIG_IGN too, for one on its way to the trampoline) */
		atomic_store_explicit(&p->flags, act->sa_flags, memory_order_relaxed);
		atomic_store_explicit(&p->handler, h, memory_order_release);
		p->mask = act->sa_mask;
	}
	int rc = PL_REAL(sigaction)(sig, kp, &kold);
	int err = errno;
	if (rc < 0) {
		atomic_store(&p->handler, atomic_load(&was.handler));
		atomic_store(&p->flags, atomic_load(&was.flags));
		p->mask = was.mask;
	} else {
		if (act)
			p->ours = kp == &k;
		if (oact) {
			if (pl_is_tramp(&kold)) {
				*oact = kold;
				uintptr_t oh = atomic_load(&was.handler);
				int of = atomic_load(&was.flags);
				if (oh == (uintptr_t)SIG_DFL) {
					/* reset by the kernel (SA_RESETHAND) */
					oact->sa_handler = SIG_DFL;
					oact->sa_flags = of & ~SA_SIGINFO;
				} else if (of & SA_SIGINFO) {
					oact->sa_sigaction = (void (*)(int, siginfo_t *, void *))oh;
					oact->sa_flags = of;
				} else {
					oact->sa_handler = (void (*)(int))oh;
					oact->sa_flags = of;
				}
				oact->sa_mask = was.mask;
			} else {
				*oact = kold;
			}
		}
	}
	pl_sig_unlock(&m);
	errno = err;
	return rc;
}

/* Before the library's constructor (a sanitizer's start, pl.h PL_EARLY): libc's own,
 * unseen (such a handler's EINTR stays EINTR). */
PL_EARLY int sigaction(int sig, const struct sigaction *act, struct sigaction *oact)
{
	if (PL_IS_EARLY())
		return __sigaction(sig, act, oact);
	return pl_sigaction(sig, act, oact);
}

/* signal() as glibc's (BSD semantics): the signal itself blocked in its handler, SA_RESTART
 * unless siginterrupt(sig, 1) was called. */
static __sighandler_t pl_signal(int sig, __sighandler_t h, int flags, bool self_mask)
{
	struct sigaction a, o;
	memset(&a, 0, sizeof(a));
	a.sa_handler = h;
	sigemptyset(&a.sa_mask);
	if (self_mask && sig > 0 && sig < _NSIG)
		sigaddset(&a.sa_mask, sig);
	a.sa_flags = flags;
	if (sigaction(sig, &a, &o) < 0)
		return SIG_ERR;
	return o.sa_handler;
}

__sighandler_t signal(int sig, __sighandler_t h)
{
	bool intr = sig > 0 && sig < _NSIG && sigismember(&pl_sigintr, sig) == 1;
	return pl_signal(sig, h, intr ? 0 : SA_RESTART, true);
}

__sighandler_t bsd_signal(int sig, __sighandler_t h)
{
	return signal(sig, h);
}

/* System V: one shot, not blocked in its handler, no restart. */
__sighandler_t sysv_signal(int sig, __sighandler_t h)
{
	return pl_signal(sig, h, SA_RESETHAND | SA_NODEFER, false);
}

__sighandler_t __sysv_signal(int sig, __sighandler_t h)
{
	return sysv_signal(sig, h);
}

int siginterrupt(int sig, int interrupt)
{
	struct sigaction a;
	if (sigaction(sig, NULL, &a) < 0)
		return -1;
	sigset_t m;
	pl_sig_lock(&m);
	if (interrupt) {
		sigaddset(&pl_sigintr, sig);
		a.sa_flags &= ~SA_RESTART;
	} else {
		sigdelset(&pl_sigintr, sig);
		a.sa_flags |= SA_RESTART;
	}
	pl_sig_unlock(&m);
	return sigaction(sig, &a, NULL);
}
