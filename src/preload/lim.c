/* lim.c: the program's open-files limit (RLIMIT_NOFILE) and the room above it for the
 * library's own fds (util/hfd.h; docs/INTERPOSER.md "The library's own fds").
 *
 * At the start the soft limit of the process is raised to its hard limit and the library's
 * fds are placed from max(the program's soft limit, 1024) up, so a program with the usual
 * 1024 never sees one below FD_SETSIZE, and with any limit never gets one from its own
 * numbers. The program is shown its own soft limit: getrlimit, getrlimit64, prlimit and
 * prlimit64 on itself, sysconf(_SC_OPEN_MAX) and getdtablesize answer with it, setrlimit
 * and setrlimit64 change it (and the hard limit, which goes to the kernel as asked), the
 * fd-number checks of dup2/dup3/F_DUPFD use it (lim_soft), and every exec runs with it.
 *
 * When the soft limit already equals the hard one there is no room above: the library's
 * fds then go at max(1024, limit / 2) (below 1024 only when the hard limit is under 2048),
 * inside the program's range, where the record (util/hfd.h) still tells the program EBADF
 * for each of them. */
#define _GNU_SOURCE
#include "preload/pl.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/hfd.h"

#define LIM_SELECT 1024 /* FD_SETSIZE: numbers a select(2) program can name */

static pthread_mutex_t lim_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool lim_virt;     /* the soft limit was raised: the program sees lim_soft */
static _Atomic uint64_t lim_cur = UINT64_MAX; /* the program's soft limit (none before init) */

uint64_t pl_lim_soft(void)
{
	return atomic_load_explicit(&lim_cur, memory_order_relaxed);
}

bool pl_lim_virtual(void)
{
	return atomic_load_explicit(&lim_virt, memory_order_relaxed);
}

static int lim_base_for(uint64_t soft, uint64_t room)
{
	if (soft < room) /* room above the program's numbers */
		return (int)(soft > LIM_SELECT ? (soft < HFD_MAX ? soft : HFD_MAX / 2) : LIM_SELECT);
	/* none: as high as leaves the program its first half */
	uint64_t h = room / 2 > LIM_SELECT ? room / 2 : LIM_SELECT;
	if (h >= room)
		h = room / 2;
	return (int)(h < HFD_MAX ? h : HFD_MAX / 2);
}

void pl_lim_init(void)
{
	struct rlimit r;
	if (!pl_real.getrlimit || pl_real.getrlimit(RLIMIT_NOFILE, &r) < 0)
		return; /* hfd's own default (half the soft limit) */
	atomic_store(&lim_cur, (uint64_t)r.rlim_cur);
	uint64_t room = r.rlim_cur;
	if (r.rlim_cur < r.rlim_max && pl_real.setrlimit) {
		struct rlimit up = { r.rlim_max, r.rlim_max };
		if (up.rlim_cur > HFD_MAX)
			up.rlim_cur = HFD_MAX;
		if (pl_real.setrlimit(RLIMIT_NOFILE, &up) == 0) {
			atomic_store(&lim_virt, true);
			room = up.rlim_cur;
		}
	}
	hfd_set_base(lim_base_for(r.rlim_cur, room));
}

/* Before the real-call table is filled (pl_ready), these calls come from code that runs
 * before the library's constructor: a sanitizer's runtime at its start (pl.h PL_EARLY).
 * They go to the kernel directly (libc's getrlimit family is prlimit64 on the calling
 * process), or to libc's own exported __sysconf; nothing is virtual yet then. */
#define LIM_SYS(pid, res, n, o) ((int)syscall(SYS_prlimit64, (pid), (int)(res), (n), (o)))

extern long __sysconf(int name);

static bool lim_self(pid_t pid)
{
	return pid == 0 || pid == getpid();
}

/* The program's view of the limit from the kernel's: its own soft one. */
static void lim_show(uint64_t *cur)
{
	*cur = pl_lim_soft();
}

/* The program sets (cur, max): the hard limit goes to the kernel as asked, the soft one of
 * the process stays the hard one (the room for the library's fds), the program's is kept. */
static int lim_set(uint64_t cur, uint64_t max)
{
	if (cur > max) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&lim_lock);
	struct rlimit k = { (rlim_t)max, (rlim_t)max };
	int rc = PL_REAL(setrlimit)(RLIMIT_NOFILE, &k);
	if (rc == 0) {
		atomic_store(&lim_cur, cur);
		/* from now on the program's soft limit is its own (a process that started with
		 * soft == hard and lowers it keeps the room above it for the library) */
		atomic_store(&lim_virt, true);
		/* the program's range grew over the base: later fds of the library go above it
		 * (those already placed stay, inside the program's range, still hidden) */
		if (cur > (uint64_t)hfd_base())
			hfd_set_base(lim_base_for(cur, k.rlim_cur));
	}
	pthread_mutex_unlock(&lim_lock);
	return rc;
}

__attribute__((noinline)) static int
lim_getrlimit(__rlimit_resource_t res, struct rlimit *l)
{
	int rc = PL_REAL(getrlimit)(res, l);
	if (rc == 0 && res == RLIMIT_NOFILE && pl_lim_virtual()) {
		uint64_t c;
		lim_show(&c);
		l->rlim_cur = (rlim_t)c;
	}
	return rc;
}

__attribute__((noinline)) static int
lim_getrlimit64(__rlimit_resource_t res, struct rlimit64 *l)
{
	int rc = PL_REAL(getrlimit64)(res, l);
	if (rc == 0 && res == RLIMIT_NOFILE && pl_lim_virtual()) {
		uint64_t c;
		lim_show(&c);
		l->rlim_cur = (rlim64_t)c;
	}
	return rc;
}

__attribute__((noinline)) static int
lim_setrlimit(__rlimit_resource_t res, const struct rlimit *l)
{
	const struct rlimit *volatile lv = l; /* NULL: the kernel's EFAULT */
	if (res != RLIMIT_NOFILE || !lv)
		return PL_REAL(setrlimit)(res, l);
	return lim_set(l->rlim_cur, l->rlim_max);
}

__attribute__((noinline)) static int
lim_setrlimit64(__rlimit_resource_t res, const struct rlimit64 *l)
{
	const struct rlimit64 *volatile lv = l;
	if (res != RLIMIT_NOFILE || !lv)
		return PL_REAL(setrlimit64)(res, l);
	return lim_set(l->rlim_cur, l->rlim_max);
}

__attribute__((noinline)) static int
lim_prlimit(pid_t pid, __rlimit_resource_t res, const struct rlimit *n, struct rlimit *o)
{
	if (res != RLIMIT_NOFILE || !lim_self(pid) || (!n && !pl_lim_virtual()))
		return PL_REAL(prlimit)(pid, res, n, o);
	struct rlimit old;
	if (PL_REAL(getrlimit)(RLIMIT_NOFILE, &old) < 0)
		return -1;
	old.rlim_cur = (rlim_t)pl_lim_soft();
	if (n && lim_set(n->rlim_cur, n->rlim_max) < 0)
		return -1;
	if (o)
		*o = old;
	return 0;
}

__attribute__((noinline)) static int
lim_prlimit64(pid_t pid, __rlimit_resource_t res, const struct rlimit64 *n, struct rlimit64 *o)
{
	if (res != RLIMIT_NOFILE || !lim_self(pid) || (!n && !pl_lim_virtual()))
		return PL_REAL(prlimit64)(pid, res, n, o);
	struct rlimit old;
	if (PL_REAL(getrlimit)(RLIMIT_NOFILE, &old) < 0)
		return -1;
	old.rlim_cur = (rlim_t)pl_lim_soft();
	if (n && lim_set(n->rlim_cur, n->rlim_max) < 0)
		return -1;
	if (o) {
		o->rlim_cur = (rlim64_t)old.rlim_cur;
		o->rlim_max = (rlim64_t)old.rlim_max;
	}
	return 0;
}

__attribute__((noinline)) static long
lim_sysconf(int name)
{
	if (name == _SC_OPEN_MAX && pl_lim_virtual())
		return (long)pl_lim_soft();
	return PL_REAL(sysconf)(name);
}

__attribute__((noinline)) static int
lim_getdtablesize(void)
{
	if (pl_lim_virtual()) {
		uint64_t c = pl_lim_soft();
		return c > INT32_MAX ? INT32_MAX : (int)c;
	}
	return PL_REAL(getdtablesize)();
}

/* An exec (and a spawned image) starts with the program's own soft limit; if the exec
 * fails, the room comes back. Between the two no fd of the library can go up there (a
 * thread making one then gets a low number, still hidden). */
void pl_lim_exec_begin(void)
{
	if (!pl_lim_virtual())
		return;
	struct rlimit r;
	if (PL_REAL(getrlimit)(RLIMIT_NOFILE, &r) < 0)
		return;
	r.rlim_cur = (rlim_t)pl_lim_soft();
	(void)PL_REAL(setrlimit)(RLIMIT_NOFILE, &r);
}

void pl_lim_exec_end(void)
{
	if (!pl_lim_virtual())
		return;
	struct rlimit r;
	if (PL_REAL(getrlimit)(RLIMIT_NOFILE, &r) < 0)
		return;
	r.rlim_cur = r.rlim_max > HFD_MAX ? HFD_MAX : r.rlim_max;
	if (r.rlim_cur < (rlim_t)pl_lim_soft())
		r.rlim_cur = (rlim_t)pl_lim_soft();
	(void)PL_REAL(setrlimit)(RLIMIT_NOFILE, &r);
}

PL_EARLY int getrlimit(__rlimit_resource_t res, struct rlimit *l)
{
	if (PL_IS_EARLY())
		return LIM_SYS(0, res, NULL, l);
	return lim_getrlimit(res, l);
}

PL_EARLY int getrlimit64(__rlimit_resource_t res, struct rlimit64 *l)
{
	if (PL_IS_EARLY())
		return LIM_SYS(0, res, NULL, l);
	return lim_getrlimit64(res, l);
}

PL_EARLY int setrlimit(__rlimit_resource_t res, const struct rlimit *l)
{
	if (PL_IS_EARLY())
		return LIM_SYS(0, res, l, NULL);
	return lim_setrlimit(res, l);
}

PL_EARLY int setrlimit64(__rlimit_resource_t res, const struct rlimit64 *l)
{
	if (PL_IS_EARLY())
		return LIM_SYS(0, res, l, NULL);
	return lim_setrlimit64(res, l);
}

PL_EARLY int prlimit(pid_t pid, __rlimit_resource_t res, const struct rlimit *n, struct rlimit *o)
{
	if (PL_IS_EARLY())
		return LIM_SYS(pid, res, n, o);
	return lim_prlimit(pid, res, n, o);
}

PL_EARLY int prlimit64(pid_t pid, __rlimit_resource_t res, const struct rlimit64 *n,
		       struct rlimit64 *o)
{
	if (PL_IS_EARLY())
		return LIM_SYS(pid, res, n, o);
	return lim_prlimit64(pid, res, n, o);
}

PL_EARLY long sysconf(int name)
{
	if (PL_IS_EARLY())
		return __sysconf(name);
	return lim_sysconf(name);
}
PL_EARLY int getdtablesize(void)
{
	if (PL_IS_EARLY()) {
		struct rlimit r;
		return LIM_SYS(0, RLIMIT_NOFILE, NULL, &r) < 0 ? -1
			: (int)(r.rlim_cur > INT32_MAX ? INT32_MAX : r.rlim_cur);
	}
	return lim_getdtablesize();
}
