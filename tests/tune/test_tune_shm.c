/* test_tune_shm.c: the shm provider's data-path mechanisms
 * (docs/parts/tune.md), each property asserted on its outcome:
 *   - big inline WRITEs (max_inline_data up to SHM_MAX_INLINE_BIG): the bytes land in the
 *     peer's memory from the caller's unregistered buffer, which is free again when
 *     post_send returns, both when the WR runs at once and when it waits behind a SEND
 *     blocked for want of a receive WR (then shm keeps a private copy);
 *   - no read() syscall where no event can be pending: get_cq_event on an armed, unfired
 *     CQ and get_async_event with no event queued (counted with /proc/self/io syscr);
 *     a real event is still returned, and so is a stray eventfd write (a hostile peer
 *     holds our CQ eventfd) within SHM_CQ_FAST_SKIPS + 1 calls;
 *   - completions the poller itself returns fire no second event (one eventfd count per
 *     peer wake-up);
 *   - dev_disarm_cq: after it, a peer's solicited SEND does not make comp_fd readable; the
 *     next arm does again. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "conf_lib.h"
#include "dev/shm/shm.h"
#include "dev/shm/shm_int.h"
#include "util/clock.h"

#define BIG (200u * 1024u)

struct fx {
	struct side a, b;
	struct dev_qp *qa, *qb;
};

static struct dev_qp *qp_big(struct side *s)
{
	struct dev_qp_init_attr ia = { .send_cq = s->scq, .recv_cq = s->rcq,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 16,
						.max_send_sge = 2, .max_recv_sge = 1,
						.max_inline_data = 1u << 20 } };
	struct dev_qp *qp = NULL;
	assert_int_equal(dev_create_qp(s->pd, &ia, &qp), 0);
	assert_true(qp->cap.max_inline_data >= (1u << 20));
	return qp;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_int_equal(side_open(&f->a, 256), 0);
	assert_int_equal(side_open(&f->b, 256), 0);
	f->qa = qp_big(&f->a);
	f->qb = qp_big(&f->b);
	connect_pair(&f->a, f->qa, &f->b, f->qb, 7);
	ping_pair(&f->a, f->qa, &f->b, f->qb);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	pair_close(&f->a, f->qa, &f->b, f->qb);
	free(f);
	return 0;
}

static void pattern(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7 + (i >> 9));
}

/* A big inline WRITE of two SGEs from malloc'd (unregistered) memory, overwritten as soon
 * as post_send returns: the peer has the original bytes. */
static void t_big_inline_now(void **state)
{
	struct fx *f = *state;
	uint8_t *src = malloc(BIG), *want = malloc(BIG);
	pattern(src, BIG, 3);
	memcpy(want, src, BIG);
	struct dev_sge sg[2] = { { .addr = (uint64_t)(uintptr_t)src, .length = 1000, .lkey = 0 },
				 { .addr = (uint64_t)(uintptr_t)(src + 1000), .length = BIG - 1000,
				   .lkey = 0 } };
	assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE, DEV_SEND_INLINE | DEV_SEND_SIGNALED,
				   sg, 2, raddr(&f->b, 4096), f->b.rmr->rkey, 0, 21), 0);
	memset(src, 0xEE, BIG);
	expect_wc(f->a.scq, 21, DEV_WC_SUCCESS, DEV_WC_RDMA_WRITE);
	assert_memory_equal(f->b.rbuf + 4096, want, BIG);
	/* inline beyond what the QP was granted is refused */
	struct dev_sge huge = { .addr = (uint64_t)(uintptr_t)src, .length = (1u << 20) + 1 };
	assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE, DEV_SEND_INLINE, &huge, 1,
				   raddr(&f->b, 0), f->b.rmr->rkey, 0, 22), -SMCR_E_DEV_BAD_WR);
	free(src);
	free(want);
}

/* A SEND with no receive WR at the peer blocks the SQ (RNR, rnr_retry 7: waits); a big
 * inline WRITE posted behind it keeps its own copy: the caller's buffer is overwritten
 * and freed at once, and after the peer posts a receive both complete, in order, with
 * the original bytes in the peer's memory. */
static void t_big_inline_queued(void **state)
{
	struct fx *f = *state;
	uint8_t m[8] = { 'b', 'l', 'o', 'c', 'k' };
	struct dev_sge ms = { .addr = (uint64_t)(uintptr_t)m, .length = sizeof m };
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &ms,
				   1, 0, 0, 0, 31), 0);
	uint8_t *src = malloc(BIG), *want = malloc(BIG);
	pattern(src, BIG, 9);
	memcpy(want, src, BIG);
	struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)src, .length = BIG };
	assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE, DEV_SEND_INLINE | DEV_SEND_SIGNALED,
				   &sg, 1, raddr(&f->b, 8192), f->b.rmr->rkey, 0, 32), 0);
	memset(src, 0x11, BIG);
	free(src);
	expect_no_wc(f->a.scq, 30);			/* still blocked */
	assert_true(f->b.rbuf[8192] != want[0] || f->b.rbuf[8193] != want[1]);
	post_recv(&f->b, f->qb, 0, 64, 77);
	expect_wc(f->a.scq, 31, DEV_WC_SUCCESS, DEV_WC_SEND);
	expect_wc(f->a.scq, 32, DEV_WC_SUCCESS, DEV_WC_RDMA_WRITE);
	expect_wc(f->b.rcq, 77, DEV_WC_SUCCESS, DEV_WC_RECV);
	assert_memory_equal(f->b.rbuf + 8192, want, BIG);
	free(want);
}

/* Big inline WRITEs queued behind a blocked SEND, twice over: the second round's copies
 * come from the QP's cache of the first round's (shm_qp.heap_cache, docs/parts/conns.md
 * "Memory"), in other sizes (a bigger cached buffer serves a smaller WRITE; a WRITE bigger
 * than all of them gets a new one). Every WRITE's bytes land intact at its own offset, so
 * no copy is served stale or short. */
static void queued_round(struct fx *f, const uint32_t *len, int n, uint8_t seed, uint64_t id)
{
	uint8_t m[8] = { 'r' };
	struct dev_sge ms = { .addr = (uint64_t)(uintptr_t)m, .length = sizeof m };
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &ms,
				   1, 0, 0, 0, id), 0);
	uint64_t off = 0;
	for (int i = 0; i < n; i++) {
		uint8_t *src = malloc(len[i]);
		assert_non_null(src);
		pattern(src, len[i], (uint8_t)(seed + i));
		struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)src, .length = len[i] };
		assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE,
					   DEV_SEND_INLINE | DEV_SEND_SIGNALED, &sg, 1,
					   raddr(&f->b, off), f->b.rmr->rkey, 0, id + 1 + (uint64_t)i),
				 0);
		memset(src, 0x5a, len[i]);	/* the caller's buffer is free again */
		free(src);
		off += len[i];
	}
	expect_no_wc(f->a.scq, 20);	/* blocked behind the SEND */
	post_recv(&f->b, f->qb, 0, 64, id);
	expect_wc(f->a.scq, id, DEV_WC_SUCCESS, DEV_WC_SEND);
	for (int i = 0; i < n; i++)
		expect_wc(f->a.scq, id + 1 + (uint64_t)i, DEV_WC_SUCCESS, DEV_WC_RDMA_WRITE);
	expect_wc(f->b.rcq, id, DEV_WC_SUCCESS, DEV_WC_RECV);
	off = 0;
	for (int i = 0; i < n; i++) {
		uint8_t *want = malloc(len[i]);
		assert_non_null(want);
		pattern(want, len[i], (uint8_t)(seed + i));
		assert_memory_equal(f->b.rbuf + off, want, len[i]);
		free(want);
		off += len[i];
	}
}

static void t_big_inline_copies_reused(void **state)
{
	struct fx *f = *state;
	static const uint32_t r1[] = { 65536, 20000, 80000, 65536, 20000, 80000,
				       65536, 20000, 80000, 65536, 20000, 80000 };
	static const uint32_t r2[] = { 80000, 65536, 20000, 90000, 4097, 65536,
				       80000, 20000, 65536, 70000, 80000, 33333 };
	queued_round(f, r1, 12, 3, 100);
	queued_round(f, r2, 12, 50, 200);
	queued_round(f, r1, 12, 90, 300);
}

/* The same WR queued and then flushed (QP to ERR) releases its copy: ASan's leak checker
 * is the assertion here, with the flush completions. */
static void t_big_inline_flushed(void **state)
{
	struct fx *f = *state;
	uint8_t m[8] = { 0 };
	struct dev_sge ms = { .addr = (uint64_t)(uintptr_t)m, .length = sizeof m };
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &ms,
				   1, 0, 0, 0, 41), 0);
	uint8_t *src = calloc(1, BIG);
	struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)src, .length = BIG };
	assert_int_equal(post_send(f->qa, DEV_WR_RDMA_WRITE, DEV_SEND_INLINE | DEV_SEND_SIGNALED,
				   &sg, 1, raddr(&f->b, 0), f->b.rmr->rkey, 0, 42), 0);
	free(src);
	struct dev_qp_attr a = { .qp_state = DEV_QPS_ERR };
	assert_int_equal(dev_modify_qp(f->qa, &a, DEV_QP_STATE), 0);
	expect_wc(f->a.scq, 41, DEV_WC_WR_FLUSH_ERR, DEV_WC_SEND);
	expect_wc(f->a.scq, 42, DEV_WC_WR_FLUSH_ERR, DEV_WC_RDMA_WRITE);
}

/* read() syscalls of this process so far (/proc/self/io syscr). */
static long syscr(void)
{
	char buf[512];
	int fd = open("/proc/self/io", O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = 0;
	const char *p = strstr(buf, "syscr:");
	assert_non_null(p);
	return atol(p + 6);
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1;
}

static void send_small(struct fx *f, uint64_t id)
{
	uint8_t m[8] = { 'x' };
	struct dev_sge ms = { .addr = (uint64_t)(uintptr_t)m, .length = sizeof m };
	assert_int_equal(post_send(f->qa, DEV_WR_SEND,
				   DEV_SEND_INLINE | DEV_SEND_SIGNALED | DEV_SEND_SOLICITED, &ms, 1,
				   0, 0, 0, id), 0);
	expect_wc(f->a.scq, id, DEV_WC_SUCCESS, DEV_WC_SEND);
}

static void t_event_fast_paths(void **state)
{
	struct fx *f = *state;
	struct dev_cq *cq = f->b.rcq;
	while (dev_get_cq_event(cq) == 0)
		;
	assert_int_equal(dev_req_notify_cq(cq, 1), 0);
	/* armed, nothing happened: no read() for (most of) these calls */
	long r0 = syscr();
	for (int i = 0; i < 1000; i++)
		assert_int_equal(dev_get_cq_event(cq), -SMCR_E_AGAIN);
	struct dev_async_event ev;
	for (int i = 0; i < 1000; i++)
		assert_int_equal(dev_get_async_event(f->b.dev, &ev), -SMCR_E_AGAIN);
	long r1 = syscr();
	/* 2 reads of syscr itself, and one real read per SHM_CQ_FAST_SKIPS fast answers */
	assert_true(r1 - r0 <= 2 + 1000 / SHM_CQ_FAST_SKIPS + 1);
	/* a real event (the peer's solicited SEND) is seen */
	post_recv(&f->b, f->qb, 0, 64, 51);
	send_small(f, 52);
	assert_true(readable(cq->comp_fd, 2000));
	assert_int_equal(dev_get_cq_event(cq), 0);
	assert_int_equal(dev_get_cq_event(cq), -SMCR_E_AGAIN);
	expect_wc(f->b.rcq, 51, DEV_WC_SUCCESS, DEV_WC_RECV);
	/* a stray write to the eventfd (what a hostile peer can do) is consumed within
	 * SHM_CQ_FAST_SKIPS + 1 calls, so a sleeper on comp_fd never spins for long */
	assert_int_equal(dev_req_notify_cq(cq, 1), 0);
	uint64_t one = 1;
	assert_int_equal(write(cq->comp_fd, &one, 8), 8);
	int calls = 0;
	while (dev_get_cq_event(cq) != 0) {
		calls++;
		assert_true(calls <= SHM_CQ_FAST_SKIPS + 1);
	}
	assert_false(readable(cq->comp_fd, 0));
}

/* Armed for any completion: the peer's SEND wakes us once (its producer writes the
 * eventfd); polling the message into the CQ adds no second count. */
static void t_polled_no_second_event(void **state)
{
	struct fx *f = *state;
	struct dev_cq *cq = f->b.rcq;
	while (dev_get_cq_event(cq) == 0)
		;
	post_recv(&f->b, f->qb, 0, 64, 61);
	assert_int_equal(dev_req_notify_cq(cq, 0), 0);
	send_small(f, 62);
	assert_true(readable(cq->comp_fd, 2000));
	expect_wc(f->b.rcq, 61, DEV_WC_SUCCESS, DEV_WC_RECV);
	uint64_t v = 0;
	assert_int_equal(read(cq->comp_fd, &v, 8), 8);
	assert_int_equal(v, 1);
}

static void t_disarm(void **state)
{
	struct fx *f = *state;
	struct dev_cq *cq = f->b.rcq;
	while (dev_get_cq_event(cq) == 0)
		;
	assert_int_equal(dev_req_notify_cq(cq, 1), 0);
	assert_int_equal(dev_disarm_cq(cq), 0);
	post_recv(&f->b, f->qb, 0, 64, 71);
	send_small(f, 72);
	assert_false(readable(cq->comp_fd, 50));
	expect_wc(f->b.rcq, 71, DEV_WC_SUCCESS, DEV_WC_RECV);
	assert_int_equal(dev_get_cq_event(cq), -SMCR_E_AGAIN);
	/* armed again: the next one wakes */
	assert_int_equal(dev_req_notify_cq(cq, 1), 0);
	post_recv(&f->b, f->qb, 0, 64, 73);
	send_small(f, 74);
	assert_true(readable(cq->comp_fd, 2000));
	assert_int_equal(dev_get_cq_event(cq), 0);
	expect_wc(f->b.rcq, 73, DEV_WC_SUCCESS, DEV_WC_RECV);
}

int main(void)
{
	if (conf_use_shm())
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_big_inline_now, setup, teardown),
		cmocka_unit_test_setup_teardown(t_big_inline_queued, setup, teardown),
		cmocka_unit_test_setup_teardown(t_big_inline_flushed, setup, teardown),
		cmocka_unit_test_setup_teardown(t_big_inline_copies_reused, setup, teardown),
		cmocka_unit_test_setup_teardown(t_event_fast_paths, setup, teardown),
		cmocka_unit_test_setup_teardown(t_polled_no_second_event, setup, teardown),
		cmocka_unit_test_setup_teardown(t_disarm, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
