/* test_core_threads.c: two engines in one process with the threading model sock uses
 * (docs/design/engine-decisions.md decision 3): one progress thread sleeping on the engines' fds,
 * application threads that send and receive concurrently on several connections and wait for the
 * event callback when the engine says AGAIN (and sometimes call progress themselves, as blocking
 * calls do). Real clock. Checks every byte; run under TSan (label threads). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/core_pair.h"
#include "util/clock.h"

struct prog {
	struct core_engine *e[2];
	int stopfd;
	pthread_t th;
	_Atomic bool stop;
};

static void *progress_main(void *arg)
{
	struct prog *p = arg;
	while (!atomic_load(&p->stop)) {
		uint64_t now = smcr_now_ns(), next = UINT64_MAX, n2;
		core_engine_progress(p->e[0], now, &next);
		core_engine_progress(p->e[1], now, &n2);
		if (n2 < next)
			next = n2;
		if (core_engine_prepare_sleep(p->e[0]) || core_engine_prepare_sleep(p->e[1]))
			continue;
		struct pollfd pfd[16];
		int n = 0;
		int fds[8];
		for (int k = 0; k < 2; k++) {
			int m = core_engine_fds(p->e[k], fds, 8);
			for (int i = 0; i < m && n < 15; i++)
				pfd[n++] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
		}
		pfd[n++] = (struct pollfd){ .fd = p->stopfd, .events = POLLIN };
		int ms = 50;
		now = smcr_now_ns();
		if (next != UINT64_MAX && next > now && (next - now) / 1000000 < 50)
			ms = (int)((next - now) / 1000000) + 1;
		poll(pfd, (nfds_t)n, ms);
	}
	return NULL;
}

static void prog_start(struct prog *p, struct core_engine *a, struct core_engine *b)
{
	p->e[0] = a;
	p->e[1] = b;
	p->stopfd = eventfd(0, EFD_CLOEXEC);
	atomic_init(&p->stop, false);
	assert_int_equal(pthread_create(&p->th, NULL, progress_main, p), 0);
}

static void prog_stop(struct prog *p)
{
	uint64_t one = 1;
	atomic_store(&p->stop, true);
	assert_int_equal(write(p->stopfd, &one, 8), 8);
	pthread_join(p->th, NULL);
	close(p->stopfd);
}

/* Per-connection wakeups: the callback bumps one eventfd for readers (IN side) and one for
 * writers (OUT side), so the two threads using a connection never eat each other's. */
struct waiter {
	int efd;	/* handshake and readers */
	int oefd;	/* writers */
	_Atomic unsigned raised;
};

static void wake_cb(void *ctx, struct core_conn *c, unsigned level, unsigned raised)
{
	(void)c;
	(void)level;
	struct waiter *w = ctx;
	uint64_t one = 1;
	atomic_fetch_or(&w->raised, raised);
	if ((raised & ~(unsigned)CORE_EV_OUT) && write(w->efd, &one, 8) != 8)
		abort();
	if ((raised & (CORE_EV_OUT | CORE_EV_ERR | CORE_EV_HUP)) && write(w->oefd, &one, 8) != 8)
		abort();
}

static _Atomic unsigned timeouts;

static void wait_event(struct waiter *w, bool out, struct core_engine *e, unsigned *round,
		       struct core_conn *c, const char *who)
{
	/* As a blocking call does: progress a little ourselves, then sleep on the fd. */
	if ((++*round & 3) == 0) {
		core_engine_progress(e, smcr_now_ns(), NULL);
		return;
	}
	struct pollfd pfd = { .fd = out ? w->oefd : w->efd, .events = POLLIN };
	if (poll(&pfd, 1, 100) == 0) {
		if (atomic_fetch_add(&timeouts, 1) < 6 && getenv("SMCR_TEST_VERBOSE")) {
			struct core_conn_info in;
			core_conn_info(c, &in);
			fprintf(stderr, "%s timeout: readable %u writable %u unacked %u prod %u:%u peercons %u:%u rxprod %u:%u cons %u:%u sent %u:%u\n",
				who, in.readable, in.writable, in.unacked, in.tx_prod.wrap, in.tx_prod.count,
				in.tx_peer_cons.wrap, in.tx_peer_cons.count, in.rx_peer_prod.wrap, in.rx_peer_prod.count,
				in.rx_cons.wrap, in.rx_cons.count, in.rx_cons_sent.wrap, in.rx_cons_sent.count);
		}
	}
}

static void drain(struct waiter *w, bool out)
{
	uint64_t v;
	if (read(out ? w->oefd : w->efd, &v, 8) < 0 && errno != EAGAIN)
		abort();
}

struct conn_pair {
	struct core_conn *c[2];		/* [0] client, [1] server */
	struct core_engine *e[2];
	struct waiter w[2];
};

static void handshake(struct conn_pair *cp, struct core_engine *ce, struct core_engine *se)
{
	struct core_conn_params p[2];
	cp_conn_params(&p[0], CORE_CLIENT, 0);
	cp_conn_params(&p[1], CORE_SERVER, 0);
	cp->e[0] = ce;
	cp->e[1] = se;
	for (int i = 0; i < 2; i++) {
		cp->w[i].efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		cp->w[i].oefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		atomic_init(&cp->w[i].raised, 0);
		p[i].cb = wake_cb;
		p[i].cb_ctx = &cp->w[i];
		assert_int_equal(core_conn_new(cp->e[i], &p[i], &cp->c[i]), 0);
	}
	static _Thread_local struct cp_stream s[2];	/* [0] c->s, [1] s->c */
	memset(s, 0, sizeof(s));
	bool done[2] = { false, false };
	struct core_clc_result r[2];
	for (int it = 0; it < 20000 && !(done[0] && done[1]); it++) {
		for (int i = 0; i < 2; i++) {
			if (done[i])
				continue;
			struct cp_stream *in = &s[1 - i], *out = &s[i];
			drain(&cp->w[i], false);
			assert_int_equal(core_conn_clc_step(cp->c[i], in->buf, in->len, false,
							    smcr_now_ns(), &r[i]), 0);
			memmove(in->buf, in->buf + r[i].consumed, in->len - r[i].consumed);
			in->len -= r[i].consumed;
			memcpy(out->buf + out->len, r[i].out, r[i].out_len);
			out->len += r[i].out_len;
			done[i] = r[i].status == CORE_CLC_SMC || r[i].status == CORE_CLC_FALLBACK ||
				  r[i].status == CORE_CLC_FAILED;
		}
		if (!(done[0] && done[1])) {
			struct pollfd pfd[2] = { { cp->w[0].efd, POLLIN, 0 }, { cp->w[1].efd, POLLIN, 0 } };
			poll(pfd, 2, 2);
		}
	}
	assert_int_equal(r[0].status, CORE_CLC_SMC);
	assert_int_equal(r[1].status, CORE_CLC_SMC);
}

struct xfer {
	struct conn_pair *cp;
	int from;		/* 0: client sends, 1: server sends */
	uint64_t total, seed;
	long fail;
};

static void *sender(void *arg)
{
	struct xfer *x = arg;
	struct core_conn *c = x->cp->c[x->from];
	struct waiter *w = &x->cp->w[x->from];
	uint8_t *buf = malloc(1 << 20);
	uint64_t sent = 0, rng = x->seed * 77 + 1;
	unsigned round = 0;
	while (sent < x->total) {
		size_t size = 1 + (size_t)(cp_rand(&rng) % (1u << (cp_rand(&rng) % 21)));
		if (size > x->total - sent)
			size = (size_t)(x->total - sent);
		cp_stream_fill(buf, sent, size, x->seed);
		size_t off = 0;
		while (off < size) {
			drain(w, true);
			struct iovec v = { buf + off, size - off };
			long n = core_conn_send(c, &v, 1, 0);
			if (n > 0) {
				off += (size_t)n;
				continue;
			}
			if (n != -SMCR_E_AGAIN) {
				x->fail = n;
				goto out;
			}
			wait_event(w, true, x->cp->e[x->from], &round, c, "send");
		}
		sent += size;
	}
	if (core_conn_shutdown(c, SHUT_WR, smcr_now_ns()))
		x->fail = -1;
out:
	free(buf);
	return NULL;
}

static void *receiver(void *arg)
{
	struct xfer *x = arg;
	int to = 1 - x->from;
	struct core_conn *c = x->cp->c[to];
	struct waiter *w = &x->cp->w[to];
	uint8_t *buf = malloc(1 << 20);
	uint64_t got = 0, rng = x->seed * 31 + 7;
	unsigned round = 0;
	for (;;) {
		drain(w, false);
		size_t want = 1 + (size_t)(cp_rand(&rng) % (1u << (cp_rand(&rng) % 21)));
		struct iovec v = { buf, want };
		long n = core_conn_recv(c, &v, 1, 0);
		if (n > 0) {
			if (cp_stream_check(buf, got, (size_t)n, x->seed) >= 0) {
				x->fail = -2;
				break;
			}
			got += (uint64_t)n;
			continue;
		}
		if (n == 0)
			break;	/* EOF after the sender's shutdown */
		if (n != -SMCR_E_AGAIN) {
			x->fail = n;
			break;
		}
		wait_event(w, false, x->cp->e[to], &round, c, "recv");
	}
	if (got != x->total && !x->fail)
		x->fail = -3;
	free(buf);
	return NULL;
}

static void test_threads(void **state)
{
	const char *spec = *state;
	struct core_engine *ce = cp_engine(spec, NULL), *se = cp_engine(spec, NULL);
	assert_non_null(ce);
	assert_non_null(se);
	struct prog pg;
	prog_start(&pg, ce, se);
	enum { NC = 4 };
	struct conn_pair cp[NC];
	for (int i = 0; i < NC; i++)
		handshake(&cp[i], ce, se);
	uint64_t total = cp_quick() ? (2u << 20) : (64u << 20);
	struct xfer x[NC][2];
	pthread_t th[NC][4];
	for (int i = 0; i < NC; i++) {
		for (int d = 0; d < 2; d++) {
			x[i][d] = (struct xfer){ .cp = &cp[i], .from = d, .total = total,
						 .seed = (uint64_t)(i * 2 + d + 1) };
			assert_int_equal(pthread_create(&th[i][d * 2], NULL, sender, &x[i][d]), 0);
			assert_int_equal(pthread_create(&th[i][d * 2 + 1], NULL, receiver, &x[i][d]), 0);
		}
	}
	for (int i = 0; i < NC; i++)
		for (int k = 0; k < 4; k++)
			pthread_join(th[i][k], NULL);
	for (int i = 0; i < NC; i++)
		for (int d = 0; d < 2; d++)
			assert_int_equal(x[i][d].fail, 0);
	if (getenv("SMCR_TEST_VERBOSE"))
		fprintf(stderr, "wait timeouts: %u\n", atomic_load(&timeouts));
	for (int i = 0; i < NC; i++) {
		struct core_conn_info in;
		core_conn_info(cp[i].c[0], &in);
		assert_int_equal(in.bytes_sent, total);
		assert_int_equal(in.bytes_received, total);
		for (int k = 0; k < 2; k++) {
			core_conn_close(cp[i].c[k], false, smcr_now_ns());
			core_conn_release(cp[i].c[k], smcr_now_ns());
			close(cp[i].w[k].efd);
			close(cp[i].w[k].oefd);
		}
	}
	/* The close exchange completes in the background. */
	struct core_engine_stats st;
	for (int i = 0; i < 200; i++) {
		core_engine_stats(se, &st);
		if (st.conns == 0)
			break;
		usleep(1000);
	}
	assert_int_equal(st.conns, 0);
	assert_int_equal(st.lgs, 1);
	prog_stop(&pg);
	core_engine_free(ce);
	core_engine_free(se);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		{ "test_threads_loop", test_threads, NULL, NULL, "loop" },
		{ "test_threads_shm", test_threads, NULL, NULL, "shm" },
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
