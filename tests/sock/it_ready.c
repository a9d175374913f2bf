/* it_ready.c: readiness and query details of an SMC-R connection against a real TCP
 * connection, step by step (docs/parts/ready.md; docs/protocol/procedures.md 4.6 urgent data):
 *   - urgent data, out of band and inline: after every arrival and every read, the poll
 *     mask (POLLIN|POLLPRI|POLLOUT|POLLRDHUP), FIONREAD and SIOCATMARK of the smcr fd equal
 *     those of a TCP loopback connection that got the same bytes and the same calls; the
 *     only difference allowed is the documented one (sig.h DEVIATION: POLLIN with POLLPRI
 *     when the urgent byte is the only unread byte, out of band);
 *   - the SOL_SMCR query's link fields: the client's local QPN is the server's peer QPN and
 *     the other way round, one active link, and the LG's connection count follows the
 *     connections opened and closed (sock-wishes.md item 2). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "itlib.h"
#include "sock/sig.h"

#define NCONN 3

static int lfd;
static uint16_t port;

struct shared {
	_Atomic int stage;   /* client -> server: bytes of step n are sent */
	_Atomic int ack;     /* server -> client: step n checked */
	_Atomic int no_pri;  /* server: POLLPRI unsupported here (checks skipped) */
	struct smcr_info srv[NCONN], cli[NCONN];
	_Atomic int srv_ready, cli_ready, closed_one;
	_Atomic unsigned srv_conns_after, cli_conns_after;
};
static struct shared *sh;

static void wait_for(_Atomic int *v, int want)
{
	for (int i = 0; i < 20000 && *v < want; i++)
		usleep(500);
	IT_CHECK(*v >= want);
}

#define MASK (POLLIN | POLLPRI | POLLOUT | POLLRDHUP)

static short mask_of(int fd)
{
	struct pollfd p = { .fd = fd, .events = MASK };
	int n = poll(&p, 1, 0);
	IT_CHECK(n >= 0);
	return (short)(n ? p.revents & (MASK | POLLERR | POLLHUP) : 0);
}

/* A TCP loopback pair in this process: *r reads, *w writes. */
static void tcp_pair(int *r, int *w)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	IT_CHECK(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 1) == 0);
	IT_CHECK(getsockname(l, (struct sockaddr *)&sa, &sl) == 0);
	*w = socket(AF_INET, SOCK_STREAM, 0);
	IT_CHECK(connect(*w, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	*r = accept(l, NULL, NULL);
	IT_CHECK(*r >= 0);
	close(l);
}

static uint64_t rx_bytes(int fd)
{
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	return (uint64_t)in.rx_prod.wrap * in.rmbe_size + in.rx_prod.count;
}

/* Waits until the smcr fd got total bytes and the TCP fd shows POLLPRI (or want_t). */
static void arrived(int sfd, uint64_t total, int tfd, short want_t)
{
	for (int i = 0; i < 4000 && rx_bytes(sfd) < total; i++)
		usleep(500);
	IT_CHECK(rx_bytes(sfd) >= total);
	for (int i = 0; i < 2000 && mask_of(tfd) != want_t; i++)
		usleep(500);
}

/* The smcr fd shows what the TCP fd shows (plus extra, the documented deviation), and
 * FIONREAD and SIOCATMARK are equal. The engine's callback may still be on its way
 * after an arrival: the mask is re-read for up to a second before it counts as wrong. */
static void same(int sfd, int tfd, short extra, int line)
{
	short t = mask_of(tfd), s = 0;
	if (sh->no_pri)
		t &= (short)~POLLPRI;
	for (int i = 0; i < 2000; i++) {
		s = mask_of(sfd);
		if (s == (t | extra))
			break;
		usleep(500);
	}
	int sq = -1, tq = -2, sm = -1, tm = -2;
	IT_CHECK(smcr_ioctl(sfd, FIONREAD, &sq) == 0 && ioctl(tfd, FIONREAD, &tq) == 0);
	IT_CHECK(smcr_ioctl(sfd, SIOCATMARK, &sm) == 0 && ioctl(tfd, SIOCATMARK, &tm) == 0);
	if (s != (t | extra) || sq != tq || sm != tm)
		fprintf(stderr, "line %d: smcr mask 0x%x FIONREAD %d ATMARK %d; TCP mask 0x%x "
				"(+0x%x allowed) FIONREAD %d ATMARK %d\n",
			line, s, sq, sm, t, extra, tq, tm);
	IT_CHECK(s == (t | extra));
	IT_CHECK(sq == tq);
	IT_CHECK(sm == tm);
}
#define SAME(extra) same(fd, tr, (extra), __LINE__)

/* The same read on both; returns the byte count (equal on both, bytes equal). */
static ssize_t both_recv(int sfd, int tfd, size_t len, int flags)
{
	char a[32] = { 0 }, b[32] = { 0 };
	errno = 0;
	ssize_t n = smcr_recv(sfd, a, len, flags | MSG_DONTWAIT);
	int ea = errno;
	errno = 0;
	ssize_t m = recv(tfd, b, len, flags | MSG_DONTWAIT);
	int eb = errno;
	if (n != m || (n < 0 && ea != eb))
		fprintf(stderr, "recv(%zu, 0x%x): smcr %zd errno %d, TCP %zd errno %d\n", len,
			flags, n, ea, m, eb);
	IT_CHECK(n == m);
	IT_CHECK(n >= 0 || ea == eb);
	IT_CHECK(n <= 0 || memcmp(a, b, (size_t)n) == 0);
	return n;
}

/* Client and TCP writer send the same step: data, then urgent data (last byte), then
 * more data (each may be empty). */
static const struct step {
	const char *pre, *urg, *post;
} steps[] = {
	{ "", "abc", "de" }, /* bytes before the mark, the mark, bytes after */
	{ "", "x", "" },     /* the lone urgent byte */
	{ "", "fg", "h" },   /* passed by a read without MSG_OOB */
};

static void send_step(int fd, const struct step *st, bool smc)
{
	ssize_t (*snd)(int, const void *, size_t, int) = smc ? smcr_send : send;
	if (*st->pre)
		IT_CHECK(snd(fd, st->pre, strlen(st->pre), 0) == (ssize_t)strlen(st->pre));
	IT_CHECK(snd(fd, st->urg, strlen(st->urg), MSG_OOB) == (ssize_t)strlen(st->urg));
	if (*st->post)
		IT_CHECK(snd(fd, st->post, strlen(st->post), 0) == (ssize_t)strlen(st->post));
}

static int oob_server(void *arg)
{
	bool inl = arg != NULL;
	it_child_env(0);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	sh->no_pri = !sig_pri_supported();
	if (sh->no_pri)
		fprintf(stderr, "it_ready: SKIP the POLLPRI comparisons: AF_UNIX MSG_OOB is "
				"unusable on this kernel (POLLPRI is never shown; see the log line)\n");
	int tr, tw;
	tcp_pair(&tr, &tw);
	if (inl) {
		int one = 1;
		IT_CHECK(smcr_setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one)) == 0);
		IT_CHECK(setsockopt(tr, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one)) == 0);
	}
	uint64_t total = 0;
	SAME(0);
	/* 1: "ab" | urgent "c" | "de" */
	sh->ack = 1;
	wait_for(&sh->stage, 1);
	send_step(tw, &steps[0], false);
	total += 5;
	arrived(fd, total, tr, POLLIN | POLLPRI | POLLOUT);
	IT_CHECK(mask_of(tr) == (POLLIN | POLLPRI | POLLOUT));
	SAME(0);
	IT_CHECK(both_recv(fd, tr, 16, 0) == 2); /* stops at the mark */
	SAME(0);
	if (!inl) {
		IT_CHECK(both_recv(fd, tr, 1, MSG_OOB | MSG_PEEK) == 1);
		SAME(0);
		IT_CHECK(both_recv(fd, tr, 1, MSG_OOB) == 1);
		SAME(0); /* POLLPRI off, "de" readable, FIONREAD 0 at the mark (tcp_inq) */
		IT_CHECK(both_recv(fd, tr, 1, MSG_OOB) == -1); /* EINVAL: once */
		IT_CHECK(both_recv(fd, tr, 16, 0) == 2);
	} else {
		IT_CHECK(both_recv(fd, tr, 1, MSG_OOB) == -1); /* EINVAL inline */
		IT_CHECK(both_recv(fd, tr, 1, 0) == 1);	       /* "c": past the mark */
		SAME(0);
		IT_CHECK(both_recv(fd, tr, 16, 0) == 2);
	}
	SAME(0);
	IT_CHECK(both_recv(fd, tr, 16, 0) == -1); /* EAGAIN */
	/* 2: the lone urgent byte */
	sh->ack = 2;
	wait_for(&sh->stage, 2);
	send_step(tw, &steps[1], false);
	total += 1;
	arrived(fd, total, tr, (short)((inl ? POLLIN : 0) | POLLPRI | POLLOUT));
	/* out of band: TCP POLLPRI alone, the pair POLLPRI|POLLIN (sig.h DEVIATION) */
	SAME(inl || sh->no_pri ? 0 : POLLIN);
	if (!inl) {
		IT_CHECK(both_recv(fd, tr, 1, MSG_OOB) == 1);
		SAME(0); /* at the mark, POLLPRI off, nothing readable */
		/* a plain read at the mark skips the byte: EAGAIN, the mark is gone */
		IT_CHECK(both_recv(fd, tr, 16, 0) == -1);
	} else {
		IT_CHECK(both_recv(fd, tr, 16, 0) == 1);
	}
	SAME(0);
	IT_CHECK(both_recv(fd, tr, 16, 0) == -1);
	SAME(0);
	/* 3: "f" | urgent "g" | "h", never read with MSG_OOB */
	sh->ack = 3;
	wait_for(&sh->stage, 3);
	send_step(tw, &steps[2], false);
	total += 3;
	arrived(fd, total, tr, POLLIN | POLLPRI | POLLOUT);
	SAME(0);
	IT_CHECK(both_recv(fd, tr, 16, 0) == 1); /* "f" */
	SAME(0);
	IT_CHECK(both_recv(fd, tr, 16, 0) == (inl ? 2 : 1)); /* "gh" / "h": passed */
	SAME(0);
	IT_CHECK(mask_of(tr) == POLLOUT);
	sh->ack = 4;
	char c;
	IT_CHECK(smcr_recv(fd, &c, 1, 0) == 0); /* the client's close */
	IT_CHECK(smcr_close(fd) == 0);
	close(tr);
	close(tw);
	return 0;
}

static int oob_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	for (int i = 0; i < 3; i++) {
		wait_for(&sh->ack, i + 1);
		send_step(fd, &steps[i], true);
		sh->stage = i + 1;
	}
	wait_for(&sh->ack, 4);
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void run_oob(bool inl)
{
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, oob_server, inl ? (void *)1 : NULL, oob_client, NULL, 30000), 0);
}

static void test_urgent_out_of_band_vs_tcp(void **state)
{
	(void)state;
	run_oob(false);
}

static void test_urgent_inline_vs_tcp(void **state)
{
	(void)state;
	run_oob(true);
}

/* ---- deferred tokens (data.c): a spinning reader takes the arrival, the token is
 * written only if data is left; every poll/epoll rule still holds ---- */

#define DEFER_ROUNDS 200

static int defer_server(void *arg)
{
	/* read at this process's first wait: every reader spins at least 200 µs (the
	 * policy's floor), so the deferred token is taken in most rounds */
	setenv("SMCR_BUSY_POLL_US", arg ? "200" : "0", 1);
	it_child_env(0);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	IT_CHECK(smcr_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	char buf[16];
	for (int i = 0; i < DEFER_ROUNDS; i++) {
		bool partial = i % 2 == 0;
		sh->stage = i + 1; /* the client sends 10 bytes as soon as it sees this */
		IT_CHECK(smcr_recv(fd, buf, partial ? 4 : 10, MSG_WAITALL) == (partial ? 4 : 10));
		struct epoll_event got;
		if (partial) {
			/* 6 bytes left: POLLIN, an edge, FIONREAD 6 (whoever took the arrival) */
			IT_CHECK(mask_of(fd) == (POLLIN | POLLOUT));
			IT_CHECK(epoll_wait(ep, &got, 1, 0) == 1 && (got.events & EPOLLIN));
			int q = -1;
			IT_CHECK(smcr_ioctl(fd, FIONREAD, &q) == 0 && q == 6);
			IT_CHECK(smcr_recv(fd, buf, 16, MSG_DONTWAIT) == 6);
		}
		/* all read: POLLIN off. The engine's callback for the arrival may still be on
		 * its way (another thread) and turn POLLIN on for bytes already read; the next
		 * receive's EAGAIN turns it off again (sig.h: callbacks only turn bits on) */
		short m = 0;
		for (int k = 0; k < 200; k++) {
			m = mask_of(fd);
			if (m == POLLOUT)
				break;
			IT_CHECK(smcr_recv(fd, buf, 16, MSG_DONTWAIT) == -1 && errno == EAGAIN);
			usleep(500);
		}
		IT_CHECK(m == POLLOUT);
		(void)epoll_wait(ep, &got, 1, 0); /* an edge for bytes already read may remain */
		sh->ack = i + 1;
	}
	extern _Atomic uint64_t sock_rx_deferred_total;
	sh->srv_conns_after = (unsigned)sock_rx_deferred_total;
	IT_CHECK(smcr_recv(fd, buf, 1, 0) == 0);
	IT_CHECK(smcr_close(fd) == 0);
	close(ep);
	return 0;
}

static int defer_client(void *arg)
{
	setenv("SMCR_BUSY_POLL_US", arg ? "200" : "0", 1);
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	for (int i = 0; i < DEFER_ROUNDS; i++) {
		/* bounded busy wait, so the bytes reach the server while its recv spins */
		for (long k = 0; sh->stage < i + 1; k++) {
			if (k > 1000000)
				usleep(100);
			IT_CHECK(k < 1000000 + 100000);
		}
		IT_CHECK(smcr_send(fd, "0123456789", 10, 0) == 10);
		wait_for(&sh->ack, i + 1);
	}
	IT_CHECK(smcr_close(fd) == 0);
	return 0;
}

static void run_deferred(void *hold)
{
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, defer_server, hold, defer_client, hold, 60000), 0);
	/* the path under test was taken (a loaded machine may make every spin miss: then
	 * only the readiness checks above ran, through the token path) */
	fprintf(stderr, "it_ready: %u of %d arrivals taken by the spinning reader%s\n",
		sh->srv_conns_after, DEFER_ROUNDS, hold ? " (hold on)" : "");
}

static void test_deferred_token(void **state)
{
	(void)state;
	run_deferred(NULL);
}

/* The same with a busy-poll floor (SMCR_BUSY_POLL_US=200): readers that spin take their
 * arrivals (no token) in most rounds, and the progress thread still takes some (a
 * token in flight when the reader's receive ends: sig_readable_if_none waits for it;
 * the deterministic test is tests/sock/test_sig_threads.c). */
static void test_deferred_token_busy_poll(void **state)
{
	(void)state;
	run_deferred((void *)1);
}

/* ---- the link fields of the query ---- */

static unsigned lg_conns_of(int fd)
{
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	return in.lgr_conns;
}

static unsigned wait_conns(int fd, unsigned want)
{
	unsigned n = 0;
	for (int i = 0; i < 4000; i++) {
		n = lg_conns_of(fd);
		if (n == want)
			break;
		usleep(500);
	}
	return n;
}

static int info_server(void *arg)
{
	(void)arg;
	it_child_env(0);
	int fds[NCONN];
	for (int i = 0; i < NCONN; i++) {
		fds[i] = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fds[i] >= 0);
		char c;
		IT_CHECK(it_read_all(fds[i], &c, 1)); /* the client's side is up */
	}
	for (int i = 0; i < NCONN; i++) {
		IT_CHECK(wait_conns(fds[i], NCONN) == NCONN);
		IT_CHECK(it_info(fds[i], &sh->srv[i]));
	}
	sh->srv_ready = 1;
	/* the client closes its first connection: ours sees EOF, we close too */
	char c;
	IT_CHECK(smcr_recv(fds[0], &c, 1, 0) == 0);
	IT_CHECK(smcr_close(fds[0]) == 0);
	sh->srv_conns_after = wait_conns(fds[1], NCONN - 1);
	wait_for(&sh->cli_ready, 2);
	for (int i = 1; i < NCONN; i++)
		IT_CHECK(smcr_close(fds[i]) == 0);
	return 0;
}

static int info_client(void *arg)
{
	(void)arg;
	it_child_env(1);
	smcr_close(lfd);
	int fds[NCONN];
	for (int i = 0; i < NCONN; i++) {
		fds[i] = it_connect(false, port);
		IT_CHECK(fds[i] >= 0);
		IT_CHECK(it_write_all(fds[i], "u", 1));
	}
	for (int i = 0; i < NCONN; i++) {
		IT_CHECK(wait_conns(fds[i], NCONN) == NCONN);
		IT_CHECK(it_info(fds[i], &sh->cli[i]));
	}
	sh->cli_ready = 1;
	wait_for(&sh->srv_ready, 1);
	IT_CHECK(smcr_close(fds[0]) == 0);
	sh->cli_conns_after = wait_conns(fds[1], NCONN - 1);
	sh->cli_ready = 2;
	char c;
	for (int i = 1; i < NCONN; i++) {
		IT_CHECK(smcr_recv(fds[i], &c, 1, 0) == 0);
		IT_CHECK(smcr_close(fds[i]) == 0);
	}
	return 0;
}

static void test_info_link_fields(void **state)
{
	(void)state;
	memset(sh, 0, sizeof(*sh));
	assert_int_equal(it_run_smc_pair(&lfd, &port, info_server, NULL, info_client, NULL, 30000), 0);
	for (int i = 0; i < NCONN; i++) {
		const struct smcr_info *sv = &sh->srv[i], *cl = &sh->cli[i];
		assert_int_equal(sv->mode, SMCR_MODE_SMCR);
		assert_int_equal(cl->mode, SMCR_MODE_SMCR);
		assert_int_equal(cl->first_contact, i == 0);
		/* one link: every connection of the LG on the same QP pair, crossed */
		assert_int_not_equal(cl->local_qpn, 0);
		assert_int_not_equal(sv->local_qpn, 0);
		assert_int_equal(cl->local_qpn, sv->peer_qpn);
		assert_int_equal(cl->peer_qpn, sv->local_qpn);
		assert_int_equal(cl->local_qpn, sh->cli[0].local_qpn);
		assert_int_equal(cl->lgr_links, 1);
		assert_int_equal(sv->lgr_links, 1);
		assert_int_equal(cl->lgr_conns, NCONN);
		assert_int_equal(sv->lgr_conns, NCONN);
		assert_int_equal(cl->lgr_id, sh->cli[0].lgr_id);
	}
	assert_int_equal(sh->cli_conns_after, NCONN - 1);
	assert_int_equal(sh->srv_conns_after, NCONN - 1);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_urgent_out_of_band_vs_tcp),
		cmocka_unit_test(test_urgent_inline_vs_tcp),
		cmocka_unit_test(test_info_link_fields),
		cmocka_unit_test(test_deferred_token),
		cmocka_unit_test(test_deferred_token_busy_poll),
	};
	return IT_MAIN(tests);
}
