/* sock.c: smcr socket objects: the type-stable pool, lookup and references, the fd swaps
 * of docs/design/engine-decisions.md decision 2 and how the engine's readiness reaches the
 * program's fd (rules and locks in sock.h, readiness mechanism in sig.h). */
#define _GNU_SOURCE
#include "sock/sock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sock/errmap.h"
#include "sock/sys.h"
#include "util/clock.h"
#include "util/env.h"
#include "util/log.h"

/* ---- the pool: objects are recycled, never freed (fdtab.h "type-stable") ---- */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER; /* protects pool_free */
static struct sock *pool_free;
static _Atomic unsigned sock_alive;
static _Atomic uint64_t sock_serials; /* struct sock.serial: the last one given */

static void sock_recycle(struct fdobj *o);

static struct sock *sock_alloc(void)
{
	pthread_mutex_lock(&pool_lock);
	struct sock *s = pool_free;
	if (s)
		pool_free = s->pool_next;
	pthread_mutex_unlock(&pool_lock);
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		s->h.release = sock_recycle;
		atomic_init(&s->h.ref, 0);
	}
	return s;
}

unsigned sock_count(void)
{
	return atomic_load_explicit(&sock_alive, memory_order_relaxed);
}

/* The last reference is gone: nobody can reach s any more (not in the table, no watch,
 * timer or queued call). Undo everything it holds, in reverse order of acquisition. */
static void sock_recycle(struct fdobj *o)
{
	struct sock *s = (struct sock *)(void *)o;
	if (s->conn) {
		/* Never inside s's own core callback: those hold no reference. */
		core_conn_release(s->conn, smcr_now_ns());
		s->conn = NULL;
	}
	if (s->has_sig) {
		/* the hidden end: closed later (closeq.h), the program's end is gone already */
		if (sig_close_later(&s->sig))
			sock_reap_soon();
		s->has_sig = false;
	}
	sock_sig_drop_pre_locked(s);
	sock_keep_retire_locked(s); /* no wait holds it: each holds a reference */
	if (s->tcp >= 0 && s->tcp != s->fd)
		sock_sys.close(s->tcp); /* the hidden TCP socket (RST set up by the closer) */
	free(s->regs);
	pend_free(&s->pend);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lq.lock);
	atomic_fetch_sub_explicit(&sock_alive, 1, memory_order_relaxed);
	pthread_mutex_lock(&pool_lock);
	s->pool_next = pool_free;
	pool_free = s;
	pthread_mutex_unlock(&pool_lock);
}

struct sock *sock_get(int fd)
{
	struct fdobj *o = fdtab_get(fd);
	return o ? (struct sock *)(void *)o : NULL;
}

void sock_hold(struct sock *s)
{
	fdobj_hold(&s->h);
}

void sock_put(struct sock *s)
{
	fdobj_put(&s->h);
}

/* $SMCR_SNDBUF / $SMCR_RCVBUF (smcr-run --sndbuf/--rcvbuf, docs/CONFIG.md): the sizes a
 * socket asks for when the program sets no SO_SNDBUF / SO_RCVBUF (0: the engine's default).
 * Read once per process. */
static pthread_once_t sock_buf_once = PTHREAD_ONCE_INIT;
static uint32_t sock_buf_dflt[2];

static void sock_buf_init(void)
{
	sock_buf_dflt[0] = (uint32_t)smcr_env_num_or("SMCR_RCVBUF", 0, 1u << 30, 0);
	sock_buf_dflt[1] = (uint32_t)smcr_env_num_or("SMCR_SNDBUF", 0, 1u << 30, 0);
}

int sock_create(int fd, int domain, bool nonblock, bool cloexec, struct sock **out)
{
	pthread_once(&sock_buf_once, sock_buf_init);
	struct sock *s = sock_alloc();
	if (!s)
		return -SMCR_E_NOMEM;
	/* Everything but the pool's fields is reset; ref is 0 while the object is free. */
	void (*rel)(struct fdobj *) = s->h.release;
	struct sock *next = s->pool_next;
	memset((char *)s + sizeof(s->h), 0, sizeof(*s) - sizeof(s->h));
	s->pool_next = next;
	s->h.release = rel;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_mutex_init(&s->lq.lock, NULL);
	s->lq.fd = -1;
	s->fd = fd;
	s->serial = atomic_fetch_add_explicit(&sock_serials, 1, memory_order_relaxed) + 1;
	s->tcp = fd;
	s->keep = -1;
	s->domain = domain;
	s->nonblock = nonblock;
	s->cloexec = cloexec;
	s->rcvbuf = sock_buf_dflt[0];
	s->sndbuf = sock_buf_dflt[1];
	atomic_store(&s->state, SS_NEW);
	atomic_store(&s->hs.kick_pending, false);
	atomic_fetch_add_explicit(&sock_alive, 1, memory_order_relaxed);
	/* One reference for the table, one for the caller; release: published by fdtab_set. */
	atomic_store_explicit(&s->h.ref, 2, memory_order_release);
	int rc = fdtab_set(fd, &s->h);
	if (rc == -SMCR_E_SOCK_FDTAB_BUSY) {
		/* The program closed an smcr fd without smcr_close (or the interposer missed
		 * it) and the kernel reused the number: forget the stale object. */
		struct sock *old = sock_get(fd);
		if (old) {
			LOG_WARN("sock", "fd %d reused behind smcr's back; dropping its old state",
				 fd);
			pthread_mutex_lock(&old->lock);
			if (old->has_sig)
				sig_forget_prog(&old->sig);
			if (old->tcp == old->fd)
				old->tcp = -1; /* that number is the new socket's now */
			old->closing = true;
			pthread_mutex_unlock(&old->lock);
			sock_unlink(old);
			sock_put(old);
		}
		rc = fdtab_set(fd, &s->h);
	}
	if (rc < 0) {
		atomic_store(&s->h.ref, 1);
		s->tcp = -1; /* the caller still owns fd */
		sock_put(s);
		return rc;
	}
	*out = s;
	return 0;
}

void sock_unlink(struct sock *s)
{
	if (fdtab_clear(s->fd, &s->h))
		sock_put(s);
}

/* ---- fd swaps ---- */

static void set_nonblock_fd(int fd, bool on)
{
	int fl = sock_sys.fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)sock_sys.fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

int sock_install_placeholder_locked(struct sock *s, bool block_out)
{
	/* A second reference to the TCP socket at a hidden number; the program's number
	 * then receives the placeholder (dup3 closes its reference to the TCP socket only). */
	int t = sock_fd_dup_hidden(s->fd);
	if (t < 0)
		return sock_err_sys(errno);
	int rc = sig_open(&s->sig);
	if (rc < 0) {
		sock_sys.close(t);
		return rc;
	}
	s->has_sig = true;
	if (block_out)
		sig_block_out(&s->sig); /* nothing ready until the handshake ends */
	sig_set_nonblock(&s->sig, s->nonblock);
	sock_epoll_move_locked(s, true);
	rc = sig_install(&s->sig, s->fd, s->cloexec);
	if (rc < 0) {
		sock_epoll_move_locked(s, false);
		sock_sys.close(s->sig.prog);
		sig_close(&s->sig);
		s->has_sig = false;
		sock_sys.close(t);
		return rc;
	}
	sock_epoll_move_locked(s, false);
	s->tcp = t;
	sock_keep_arm_locked(s);
	/* No O_NONBLOCK change on t: every handshake and watch I/O uses MSG_DONTWAIT. */
	return 0;
}

/* ---- the placeholder's hidden reference (sock.h struct sock.keep) ---- */

atomic_uint sock_keep_live;

void sock_keep_arm_locked(struct sock *s)
{
	if (s->keep >= 0)
		return;
	s->keep = sock_fd_dup_hidden(s->fd);
	if (s->keep < 0) {
		/* waits then see the fallback only from a later event on the TCP socket */
		LOG_WARN("sock", "fd %d: no hidden reference to the placeholder (errno %d)", s->fd,
			 errno);
		s->keep = -1;
		return;
	}
	s->keep_retired = false;
	atomic_fetch_add_explicit(&sock_keep_live, 1, memory_order_relaxed);
}

void sock_keep_retire_locked(struct sock *s)
{
	if (s->keep < 0)
		return;
	if (!s->keep_retired) {
		s->keep_retired = true;
		atomic_fetch_sub_explicit(&sock_keep_live, 1, memory_order_relaxed);
	}
	if (s->keep_users == 0) {
		sock_sys.close(s->keep);
		s->keep = -1;
	}
}

int sock_keep_hold_locked(struct sock *s)
{
	if (s->keep < 0 || s->keep_retired)
		return -1;
	s->keep_users++;
	return s->keep;
}

void sock_keep_drop_locked(struct sock *s)
{
	if (--s->keep_users == 0 && s->keep_retired) {
		sock_sys.close(s->keep);
		s->keep = -1;
	}
}

struct sock *sock_keep_get(int fd, int *keep)
{
	struct sock *s = sock_get(fd);
	if (!s)
		return NULL;
	pthread_mutex_lock(&s->lock);
	*keep = sock_keep_hold_locked(s);
	pthread_mutex_unlock(&s->lock);
	if (*keep < 0) {
		sock_put(s);
		return NULL;
	}
	return s;
}

void sock_keep_put(struct sock *s)
{
	pthread_mutex_lock(&s->lock);
	sock_keep_drop_locked(s);
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
}

void sock_sig_drop_pre_locked(struct sock *s)
{
	if (!s->sig_pre)
		return;
	sock_sys.close(s->sig.prog);
	sig_close(&s->sig);
	s->sig_pre = false;
}

int sock_sig_install_locked(struct sock *s, bool block_out)
{
	s->has_sig = true;
	if (block_out)
		sig_block_out(&s->sig);
	if (s->nonblock)
		sig_set_nonblock(&s->sig, true);
	sock_epoll_move_locked(s, true);
	/* dup3 drops fd's reference to the file there; the caller's hidden dup keeps it */
	bool ce = s->cloexec && !s->cloexec_off_at_install;
	int rc = sig_install(&s->sig, s->fd, ce);
	if (rc < 0) {
		sock_epoll_move_locked(s, false);
		sock_sys.close(s->sig.prog);
		sig_close(&s->sig);
		s->has_sig = false;
		return rc;
	}
	sock_epoll_move_locked(s, false);
	s->cloexec = ce;
	return 0;
}

int sock_smc_install_locked(struct sock *s)
{
	int rc = 0;
	if (s->sig_pre)
		s->sig_pre = false; /* opened while the peer answered */
	else
		rc = sig_open(&s->sig);
	if (rc < 0)
		return rc;
	rc = sock_sig_install_locked(s, false);
	if (rc < 0)
		return rc;
	s->fd_is_tcp = false;
	return 0;
}

int sock_restore_tcp_locked(struct sock *s)
{
	/* A wait already sleeping on the placeholder is on the old file's queue only: POLLOUT
	 * first (for the writers), then the swap; the signal end's close after it gives the
	 * old file POLLHUP, which returns every wait that also polls keep (struct sock.keep)
	 * to look again at fd, now the TCP socket. */
	sig_unblock_out(&s->sig);
	sock_epoll_move_locked(s, true);
	sig_forget_prog(&s->sig);
	int rc = 0;
	if (sock_sys.dup3(s->tcp, s->fd, s->cloexec ? O_CLOEXEC : 0) < 0) {
		rc = sock_err_sys(errno);
		LOG_ERR("sock", "fd %d: cannot put the TCP socket back (errno %d)", s->fd, errno);
	} else {
		sock_sys.close(s->tcp);
		s->tcp = s->fd;
		set_nonblock_fd(s->fd, s->nonblock);
	}
	sock_epoll_move_locked(s, false);
	sig_close(&s->sig);
	s->has_sig = false;
	return rc;
}

/* ---- readiness: the engine's level mask onto the program end (sig.h) ----
 *
 * From the engine's callback (from_program false) bits are only turned ON: a callback's
 * mask may be older than what the program's own call just saw, and turning a bit off on a
 * stale mask could lose a wake-up. The program's own calls turn bits off, and re-read the
 * mask afterwards (sock_sync_after_call), so an event racing with them is never lost. */
void sock_apply_events(struct sock *s, unsigned ev, unsigned raised, bool from_program)
{
	if (ev & CORE_EV_ERR) {
		sig_error(&s->sig);
		return;
	}
	/* POLLPRI before POLLIN: sig_pri_off (program side) empties the tokens too. */
	if (ev & CORE_EV_PRI)
		sig_pri_on(&s->sig);
	else if (from_program)
		(void)sig_pri_off(&s->sig);
	/* EOF (the peer's C or D): sig_rdhup below shuts end's write side, which shows prog
	 * POLLIN|POLLRDHUP for good and wakes prog's waiters (a new EPOLLET edge, a direct
	 * sleeper), so the token that would go first is one send for nothing: once per
	 * connection, on the path of a short connection's close. */
	bool eof = ev & CORE_EV_RDHUP;
	if (raised & (CORE_EV_IN | CORE_EV_IN_NEW)) {
		/* ev was computed before this callback ran: the program may have read the
		 * arrival and drained since. The token goes only for bytes still unread
		 * and no drain since that was checked (sig_readable_since). */
		if (!eof && from_program) {
			sig_readable(&s->sig);
		} else if (!eof) {
			unsigned gen = sig_drain_gen(&s->sig);
			if (core_conn_events(s->conn) & CORE_EV_IN)
				sig_readable_since(&s->sig, gen);
		}
	} else if ((ev & CORE_EV_IN) && from_program && !eof) {
		sig_readable_if_none(&s->sig);
	}
	if (ev & CORE_EV_OUT)
		sig_unblock_out(&s->sig);
	if (ev & CORE_EV_RDHUP)
		sig_rdhup(&s->sig);
}

void sock_sync_after_call(struct sock *s)
{
	unsigned ev = core_conn_events(s->conn);
	/* the urgent byte was read or passed (TCP's rule); it emptied the tokens too */
	if (!(ev & (CORE_EV_PRI | CORE_EV_ERR)) && sig_pri_off(&s->sig))
		ev = core_conn_events(s->conn);
	if (!(ev & (CORE_EV_IN | CORE_EV_RDHUP | CORE_EV_ERR))) {
		sig_drain_in(&s->sig);
		ev = core_conn_events(s->conn);
	}
	if (!(ev & (CORE_EV_OUT | CORE_EV_ERR))) {
		sig_block_out(&s->sig);
		ev = core_conn_events(s->conn);
	}
	sock_apply_events(s, ev, 0, true);
}

/* ---- Numbers of one connection ----
 *
 * dup(2) gives a second number for the same open file, and the connection ends only when
 * the last number is closed. For a TCP-mode socket the kernel does it all (the number is
 * the TCP socket). An SMC-R connection's program end is a socket pair end: the copy is a
 * kernel dup of that end (the same readiness) and the new number goes into the fd table
 * for the same object, so every call on it is a call on the connection. close of one
 * number of several closes that number only; when it was s->fd, an alias becomes s->fd
 * and the signal pair's program end (sig.prog) moves to it. Only in SS_SMC: before it the
 * number may still be swapped (placeholder, fallback), which a copy could not follow. */
int sock_dup_locked(struct sock *s, int target, int min, bool cloexec)
{
	int st = atomic_load(&s->state);
	if (st == SS_NEW || st == SS_TCP || (st == SS_LISTEN && !s->lq.on))
		return SOCK_DUP_PLAIN;
	if (st != SS_SMC || s->closing)
		return -SMCR_E_SOCK_NOTSUP;
	if (s->nalias >= SOCK_ALIAS_MAX)
		return -SMCR_E_SOCK_NOTSUP;
	int n = target >= 0 ? sock_sys.dup3(s->fd, target, cloexec ? O_CLOEXEC : 0)
			    : sock_sys.fcntl(s->fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, min);
	if (n < 0)
		return sock_err_sys(errno);
	fdobj_hold(&s->h); /* the table's reference for the new number */
	int rc = fdtab_set(n, &s->h);
	if (rc < 0) {
		sock_sys.close(n);
		sock_put(s);
		return rc;
	}
	s->alias[s->nalias++] = n;
	return n;
}

int sock_dup(int fd, int target, int min, bool cloexec)
{
	struct sock *s = sock_get(fd);
	if (!s)
		return SOCK_DUP_PLAIN;
	pthread_mutex_lock(&s->lock);
	int rc = sock_dup_locked(s, target, min, cloexec);
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
	return rc;
}

bool sock_close_alias_locked(struct sock *s, int fd)
{
	if (!s->nalias || s->closing)
		return false;
	if (fd == s->fd) {
		if (!fdtab_clear(fd, &s->h))
			return false;
		int a = s->alias[--s->nalias];
		s->fd = a;
		if (s->has_sig)
			sig_set_prog(&s->sig, a);
	} else {
		unsigned i = 0;
		while (i < s->nalias && s->alias[i] != fd)
			i++;
		if (i == s->nalias || !fdtab_clear(fd, &s->h))
			return false;
		s->alias[i] = s->alias[--s->nalias];
	}
	sock_sys.close(fd);
	sock_put(s); /* the table's reference for that number (the caller holds another) */
	return true;
}
