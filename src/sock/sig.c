/* sig.c: readiness of an SMC-R connection's fd through an AF_UNIX pair (rules in sig.h). */
#define _GNU_SOURCE
#include "sock/sig.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock/closeq.h"
#include "sock/errmap.h"
#include "sock/sys.h"
#include "util/env.h"
#include "util/hfd.h"
#include "util/log.h"

#define SIG_IO_FLAGS (MSG_DONTWAIT | MSG_NOSIGNAL)

int sock_hidden_min(void)
{
	return hfd_base();
}

int sock_fd_hide(int fd)
{
	int n = hfd_move(fd);
	return n < 0 ? sock_err_sys(errno) : n;
}

int sock_fd_dup_hidden(int fd)
{
	return hfd_dup(fd);
}

int sig_open(struct sig *s)
{
	int sv[2];
	memset(s, 0, sizeof(*s));
	s->prog = s->end = -1;
	if (sock_sys.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return sock_err_sys(errno);
	/* prog's smallest send buffer (POLLOUT off after a few KiB of filler) is set when
	 * POLLOUT is first blocked (sig_block_out). end's O_NONBLOCK is not needed: every
	 * operation on it passes MSG_DONTWAIT (and each system call here is one more per
	 * connection, docs/parts/connect.md) */
	int end = sock_fd_hide(sv[1]);
	if (end < 0) {
		sock_sys.close(sv[0]);
		sock_sys.close(sv[1]);
		return end;
	}
	s->prog = sv[0];
	s->end = end;
	pthread_mutex_init(&s->lock, NULL);
	return 0;
}

int sig_install(struct sig *s, int target, bool cloexec)
{
	pthread_mutex_lock(&s->lock);
	int rc = 0;
	if (s->prog != target) {
		if (sock_sys.dup3(s->prog, target, cloexec ? O_CLOEXEC : 0) < 0) {
			rc = sock_err_sys(errno);
		} else {
			sock_sys.close(s->prog);
			s->prog = target;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void sig_close(struct sig *s)
{
	if (s->end >= 0)
		sock_sys.close(s->end);
	s->end = -1;
	pthread_mutex_destroy(&s->lock);
}

bool sig_close_later(struct sig *s)
{
	bool queued = false;
	if (s->end >= 0)
		queued = closeq_close(s->end, CLOSEQ_PLAIN);
	s->end = -1;
	pthread_mutex_destroy(&s->lock);
	return queued;
}

void sig_set_prog(struct sig *s, int fd)
{
	pthread_mutex_lock(&s->lock);
	s->prog = fd;
	pthread_mutex_unlock(&s->lock);
}

void sig_forget_prog(struct sig *s)
{
	pthread_mutex_lock(&s->lock);
	s->prog = -1;
	pthread_mutex_unlock(&s->lock);
}

void sig_clear_error(struct sig *s)
{
	int err;
	socklen_t l = sizeof(err);
	pthread_mutex_lock(&s->lock);
	if (s->prog >= 0)
		(void)sock_sys.getsockopt(s->prog, SOL_SOCKET, SO_ERROR, &err, &l);
	pthread_mutex_unlock(&s->lock);
}

void sig_set_nonblock(struct sig *s, bool on)
{
	pthread_mutex_lock(&s->lock);
	if (s->prog < 0) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	int fl = sock_sys.fcntl(s->prog, F_GETFL);
	if (fl >= 0)
		(void)sock_sys.fcntl(s->prog, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
	atomic_store_explicit(&s->nonblock, on, memory_order_relaxed);
	pthread_mutex_unlock(&s->lock);
}

/* One token byte from end to prog, counted before the send (sig_readable says why) and
 * flagged in flight until it is queued. The stores: `sending` before the count's
 * increment (a release), so a reader whose acquire load of tokens sees this count also
 * sees sending set, or its clearing after the send (release again); a reader that sees
 * tokens > 0 and sending clear therefore finds the byte in prog's queue.
 * With gen (sig_readable_since): `sending` is set first, then the drains are checked (both
 * sequentially consistent, as sig_drain_in's increment and its load of sending): a drain
 * this check misses sees the token in flight and takes the lock, held until the byte is
 * queued, and reads it back. A token not sent is never counted, so no reader sees a count
 * without its byte. Lock held. */
static void token_send_locked(struct sig *s, const unsigned *gen)
{
	char b = 't';
	atomic_store_explicit(&s->sending, true, memory_order_seq_cst);
	if (gen && atomic_load_explicit(&s->drains, memory_order_seq_cst) != *gen) {
		atomic_store_explicit(&s->sending, false, memory_order_release);
		return;
	}
	atomic_fetch_add_explicit(&s->tokens, 1, memory_order_release);
	if (sock_sys.send(s->end, &b, 1, SIG_IO_FLAGS) != 1)
		atomic_fetch_sub_explicit(&s->tokens, 1, memory_order_relaxed);
	atomic_store_explicit(&s->sending, false, memory_order_release);
}

static void readable_locked(struct sig *s, const unsigned *gen)
{
	char b = 't';
	if (!s->dead && !s->rdhup && !s->rd_shut && s->prog >= 0) {
		/* Evict the oldest token, unless an OOB byte is at the head of the queue (a
		 * plain read there would drop it: POLLPRI lost). */
		if (s->tokens >= SIG_TOKEN_CAP && (!s->pri || s->pre > 0) &&
		    sock_sys.recv(s->prog, &b, 1, SIG_IO_FLAGS) == 1) {
			s->tokens--;
			if (s->pri)
				s->pre--;
		}
		/* Every write wakes prog's waiters, so EPOLLET sees an edge even when tokens
		 * were already queued. Counted before the send: the fast paths read tokens
		 * without the lock, and a byte already queued but not yet counted would make a
		 * reader (sig_drain_in) skip it while epoll keeps reporting it (an epoll
		 * program would spin on EAGAIN for as long as this thread is descheduled here).
		 * `sending` tells sig_readable_if_none's fast path that the count runs ahead. */
		token_send_locked(s, gen);
	}
}

void sig_readable(struct sig *s)
{
	pthread_mutex_lock(&s->lock);
	readable_locked(s, NULL);
	pthread_mutex_unlock(&s->lock);
}

unsigned sig_drain_gen(struct sig *s)
{
	return atomic_load_explicit(&s->drains, memory_order_seq_cst);
}

void sig_readable_since(struct sig *s, unsigned gen)
{
	pthread_mutex_lock(&s->lock);
	readable_locked(s, &gen);
	pthread_mutex_unlock(&s->lock);
}

void sig_readable_if_none(struct sig *s)
{
	/* Fast path: a token is queued, so POLLIN is on already. Not while one is in flight
	 * (counted, not yet sent): the engine's callback on the progress thread can be
	 * between the two while the program's receive that left data ends here, and the
	 * program's poll right after would find no POLLIN. The lock waits for that send. */
	if (atomic_load_explicit(&s->tokens, memory_order_acquire) > 0 &&
	    !atomic_load_explicit(&s->sending, memory_order_acquire))
		return;
	pthread_mutex_lock(&s->lock);
	if (!s->dead && !s->rdhup && !s->rd_shut && s->prog >= 0 && s->tokens == 0)
		token_send_locked(s, NULL);
	pthread_mutex_unlock(&s->lock);
}

void sig_drain_in(struct sig *s)
{
	char buf[SIG_TOKEN_CAP];
	/* Counted before a token in flight is looked for (token_send_locked's gen check is
	 * the other half); sending before tokens: a send that ended after this load of
	 * sending counted its token before it cleared sending. */
	atomic_fetch_add_explicit(&s->drains, 1, memory_order_seq_cst);
	if (!atomic_load_explicit(&s->sending, memory_order_seq_cst) &&
	    atomic_load_explicit(&s->tokens, memory_order_acquire) == 0)
		return; /* fast path: nothing queued, nothing on its way */
	pthread_mutex_lock(&s->lock);
	/* With an OOB byte queued only the tokens before it (POLLIN stays on anyway: AF_UNIX
	 * counts the OOB byte as data; sig_pri_off empties the rest). */
	for (;;) {
		unsigned left = s->pri ? s->pre : s->tokens;
		if (!left || s->prog < 0)
			break;
		ssize_t n = sock_sys.recv(s->prog, buf, left < sizeof(buf) ? left : sizeof(buf),
					  SIG_IO_FLAGS);
		if (n <= 0)
			break;
		s->tokens -= (unsigned)n;
		if (s->pri)
			s->pre -= (unsigned)n;
	}
	pthread_mutex_unlock(&s->lock);
}

/* Whether one filler send turns POLLOUT off (probed once on a scratch pair made like
 * sig_open's). AF_UNIX shows POLLOUT while the bytes queued from a socket use at most a
 * quarter of its send buffer (unix_writable), so one send of SIG_FILL bytes into the
 * smallest buffer is enough; filling until EAGAIN costs a few sends more each time,
 * and the writer of a full ring blocks once per window. Where the kernel behaves
 * otherwise, the loop to EAGAIN runs. */
#define SIG_FILL 4096
static pthread_once_t fill_once = PTHREAD_ONCE_INIT;
static bool fill_one;

static void fill_probe(void)
{
	static const char filler[SIG_FILL];
	int sv[2];
	if (sock_sys.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	int sndbuf = SIG_PROG_SNDBUF;
	(void)sock_sys.setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	struct pollfd p = { .fd = sv[0], .events = POLLOUT };
	fill_one = sock_sys.send(sv[0], filler, sizeof(filler), SIG_IO_FLAGS) > 0 &&
		   sock_sys.poll(&p, 1, 0) == 0;
	if (!fill_one)
		LOG_INFO("sig", "one filler send leaves POLLOUT on: filling until EAGAIN");
	sock_sys.close(sv[0]);
	sock_sys.close(sv[1]);
}

void sig_block_out(struct sig *s)
{
	static const char filler[SIG_FILL];
	if (atomic_load_explicit(&s->out_blocked, memory_order_relaxed))
		return; /* fast path: already off */
	pthread_once(&fill_once, fill_probe);
	pthread_mutex_lock(&s->lock);
	if (!s->out_blocked && !s->dead && !s->wr_shut && s->prog >= 0) {
		if (!s->small_sndbuf) {
			/* nothing is queued from prog before its first fill (the reserve
			 * byte comes with SHUT_WR, excluded above): the same buffer as when
			 * sig_open set it */
			int sndbuf = SIG_PROG_SNDBUF;
			(void)sock_sys.setsockopt(s->prog, SOL_SOCKET, SO_SNDBUF, &sndbuf,
						  sizeof(sndbuf));
			s->small_sndbuf = true;
		}
		for (;;) {
			ssize_t n = sock_sys.send(s->prog, filler, sizeof(filler), SIG_IO_FLAGS);
			if (n <= 0)
				break; /* EAGAIN: full, POLLOUT is off now */
			s->filled += (unsigned)n;
			if (fill_one)
				break; /* POLLOUT is off already (fill_probe) */
		}
		s->out_blocked = true;
	}
	pthread_mutex_unlock(&s->lock);
}

/* Reads the filler back at end. Caller holds the lock. */
static void sig_unfill_locked(struct sig *s)
{
	char buf[4096];
	while (s->filled > 0 && s->end >= 0) {
		ssize_t n = sock_sys.recv(s->end, buf, s->filled < sizeof(buf) ? s->filled
									  : sizeof(buf),
					  SIG_IO_FLAGS);
		if (n <= 0)
			break;
		s->filled -= (unsigned)n;
	}
}

void sig_unblock_out(struct sig *s)
{
	if (!atomic_load_explicit(&s->out_blocked, memory_order_relaxed))
		return; /* fast path: POLLOUT is on */
	pthread_mutex_lock(&s->lock);
	if (s->out_blocked && !s->dead) {
		sig_unfill_locked(s);
		s->out_blocked = false;
	}
	pthread_mutex_unlock(&s->lock);
}

void sig_rdhup(struct sig *s)
{
	pthread_mutex_lock(&s->lock);
	if (!s->rdhup && !s->dead) {
		(void)sock_sys.shutdown(s->end, SHUT_WR);
		s->rdhup = true;
	}
	pthread_mutex_unlock(&s->lock);
}

void sig_shut_wr(struct sig *s)
{
	pthread_mutex_lock(&s->lock);
	if (!s->wr_shut && !s->dead && s->prog >= 0) {
		/* TCP shows POLLOUT after SHUT_WR (writes fail with EPIPE): undo any fill, then
		 * leave one byte queued at end so a later sig_error still resets prog. */
		sig_unfill_locked(s);
		s->out_blocked = false;
		char b = 'r';
		if (sock_sys.send(s->prog, &b, 1, SIG_IO_FLAGS) == 1)
			s->filled = 0; /* the reserve byte is never read back */
		(void)sock_sys.shutdown(s->prog, SHUT_WR);
		s->wr_shut = true;
	}
	pthread_mutex_unlock(&s->lock);
}

void sig_shut_rd(struct sig *s)
{
	pthread_mutex_lock(&s->lock);
	if (!s->rd_shut && !s->dead && s->prog >= 0) {
		(void)sock_sys.shutdown(s->prog, SHUT_RD);
		s->rd_shut = true;
	}
	pthread_mutex_unlock(&s->lock);
}

void sig_error(struct sig *s)
{
	pthread_mutex_lock(&s->lock);
	if (!s->dead) {
		/* AF_UNIX resets the peer (ECONNRESET, POLLERR) only when the closing end has
		 * unread bytes: there is filler, the reserve byte, or this one. */
		char b = 'e';
		if (!s->wr_shut && s->filled == 0 && s->prog >= 0)
			(void)sock_sys.send(s->prog, &b, 1, SIG_IO_FLAGS);
		if (s->end >= 0)
			sock_sys.close(s->end);
		s->end = -1;
		s->filled = 0;
		s->out_blocked = false;
		s->dead = true;
	}
	pthread_mutex_unlock(&s->lock);
}

/* ---- POLLPRI through AF_UNIX MSG_OOB (sig.h) ---- */

static pthread_once_t pri_once = PTHREAD_ONCE_INIT;
static bool pri_ok;

static short pri_mask(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLPRI };
	return sock_sys.poll(&p, 1, 0) == 1 ? p.revents : 0;
}

/* Reads fd's queue until it is empty (or EOF/error); returns the bytes read. */
static long drain_all(int fd, unsigned max_rounds)
{
	char buf[256];
	long total = 0;
	for (unsigned i = 0; i < max_rounds; i++) {
		ssize_t n = sock_sys.recv(fd, buf, sizeof(buf), SIG_IO_FLAGS);
		if (n <= 0)
			break;
		total += n;
	}
	return total;
}

/* The exact sequence sig_pri_on/off and the token paths rely on, on a scratch pair: the
 * AF_UNIX OOB code changed a lot between 5.15 and 6.11 (consumed OOB skbs left in the
 * queue, reads at the mark), so what this kernel does is checked rather than assumed. */
static const char *pri_probe_pair(int a, int b)
{
	char c = 0, buf[8];
	if (sock_sys.send(b, "t", 1, SIG_IO_FLAGS) != 1)
		return "scratch send failed";
	if (sock_sys.send(b, "o", 1, SIG_IO_FLAGS | MSG_OOB) != 1)
		return errno == EOPNOTSUPP ? "is not supported (CONFIG_AF_UNIX_OOB off, or Linux < 5.15)"
					   : "send failed";
	if (sock_sys.send(b, "t", 1, SIG_IO_FLAGS) != 1)
		return "scratch send failed";
	if (pri_mask(a) != (POLLIN | POLLPRI))
		return "byte queued gives no POLLPRI";
	if (sock_sys.recv(a, buf, sizeof(buf), SIG_IO_FLAGS) != 1)
		return "mark does not stop a read";
	if (pri_mask(a) != (POLLIN | POLLPRI))
		return "byte lost by a read before the mark";
	if (sock_sys.recv(a, &c, 1, SIG_IO_FLAGS | MSG_OOB) != 1 || c != 'o')
		return "byte not returned by recv(MSG_OOB)";
	if (pri_mask(a) & POLLPRI)
		return "byte read still gives POLLPRI";
	if (drain_all(a, 8) != 1 || pri_mask(a) != 0)
		return "queue not empty after the bytes behind the mark were read";
	/* the lone urgent byte (nothing before or after it) */
	if (sock_sys.send(b, "o", 1, SIG_IO_FLAGS | MSG_OOB) != 1 ||
	    pri_mask(a) != (POLLIN | POLLPRI))
		return "lone byte gives no POLLPRI";
	if (sock_sys.recv(a, &c, 1, SIG_IO_FLAGS | MSG_OOB) != 1 || drain_all(a, 8) != 0 ||
	    pri_mask(a) != 0)
		return "lone byte leaves the queue readable";
	return NULL;
}

static void pri_probe(void)
{
	if (smcr_env_num_or("SMCR_NO_POLLPRI", 0, 1, 0) == 1) {
		LOG_INFO("sig", "POLLPRI for urgent data off (SMCR_NO_POLLPRI)");
		return;
	}
	int sv[2];
	const char *why;
	if (sock_sys.socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		why = "could not be probed (socketpair failed)";
	} else {
		why = pri_probe_pair(sv[0], sv[1]);
		sock_sys.close(sv[0]);
		sock_sys.close(sv[1]);
	}
	pri_ok = why == NULL;
	if (why)
		LOG_WARN("sig", "urgent data will not show POLLPRI: AF_UNIX MSG_OOB %s", why);
}

bool sig_pri_supported(void)
{
	pthread_once(&pri_once, pri_probe);
	return pri_ok;
}

void sig_pri_on(struct sig *s)
{
	if (!sig_pri_supported())
		return;
	pthread_mutex_lock(&s->lock);
	/* After sig_rdhup end cannot send any more (TCP: no urgent data after the FIN). */
	if (!s->pri && !s->dead && !s->rdhup && s->prog >= 0 &&
	    sock_sys.send(s->end, "p", 1, SIG_IO_FLAGS | MSG_OOB) == 1) {
		s->pri = true;
		s->pre = s->tokens;
	}
	pthread_mutex_unlock(&s->lock);
}

bool sig_pri_off(struct sig *s)
{
	if (!atomic_load_explicit(&s->pri, memory_order_relaxed))
		return false; /* fast path: every program call comes here */
	pthread_mutex_lock(&s->lock);
	bool was = s->pri;
	if (s->pri && s->prog >= 0) {
		char b;
		(void)sock_sys.recv(s->prog, &b, 1, SIG_IO_FLAGS | MSG_OOB);
		/* The taken OOB byte leaves an empty buffer in the queue that still shows POLLIN
		 * until a plain read passes it: read everything (the tokens on both sides of
		 * it too). Not after sig_error: that read would consume prog's ECONNRESET (and
		 * POLLIN is permanent then anyway). */
		if (!s->dead) {
			(void)drain_all(s->prog, s->tokens / 256 + 4);
			s->tokens = 0;
		}
	}
	s->pri = false;
	s->pre = 0;
	pthread_mutex_unlock(&s->lock);
	return was;
}
