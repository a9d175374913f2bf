/* test_shm_hostile.c: the shm provider against a hostile peer (docs/parts/dev-shm.md "trust
 * boundary"). The peer may write anything into the rings and regions it was given and send
 * anything on the control socket; the victim must refuse it with a QP error or by dropping
 * the connection, never crash, never touch memory it did not give away, and keep serving its
 * other peers. The "peer" here is a second in-process device whose internals the test
 * scribbles on (dev/shm/shm_int.h), which is exactly the memory a peer process can write. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "conf_lib.h"
#include "dev/shm/shm.h"
#include "dev/shm/shm_int.h"
#include "util/clock.h"

struct fx {
	struct side a, b;	/* a: the victim, b: the hostile peer */
	struct dev_qp *qa, *qb;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	pair_open(&f->a, &f->qa, &f->b, &f->qb);
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

/* The hostile side's view of the victim's inbound ring (its tx mapping). */
static struct shm_qp *evil(struct fx *f)
{
	return shm_qp_of(f->qb);
}

static void expect_victim_err(struct fx *f)
{
	struct dev_wc wc;
	int n = wait_wc(f->a.rcq, &wc, WAIT_MS);
	assert_int_equal(n, 1);
	assert_int_equal(wc.status, DEV_WC_WR_FLUSH_ERR);
	assert_int_equal(wait_state(f->qa, DEV_QPS_ERR, WAIT_MS), 0);
	assert_int_equal(wait_event(f->a.dev, DEV_EVENT_QP_FATAL, f->qa->qp_num, WAIT_MS), 0);
}

/* A producer index beyond the ring. */
static void t_bad_prod(void **state)
{
	struct fx *f = *state;
	post_recv(&f->a, f->qa, 0, 64, 1);
	struct shm_qp *e = evil(f);
	atomic_store(&e->tx.hdr->prod, e->tx_prod + 100000);
	expect_victim_err(f);
}

/* A message header with an unknown op / impossible length. */
static void t_bad_header(void **state)
{
	struct fx *f = *state;
	post_recv(&f->a, f->qa, 0, 64, 1);
	struct shm_qp *e = evil(f);
	struct shm_ring_msg m = { .op = 0x77, .cells = 1, .len = 8 };
	shm_ring_put_hdr(&e->tx, e->tx_prod, &m);
	(void)shm_ring_publish(&e->tx, e->tx_prod + 1);
	expect_victim_err(f);
}

static void t_bad_len(void **state)
{
	struct fx *f = *state;
	post_recv(&f->a, f->qa, 0, 64, 1);
	struct shm_qp *e = evil(f);
	struct shm_ring_msg m = { .op = SHM_OP_SEND, .cells = 1, .len = 0xfffffff0u };
	shm_ring_put_hdr(&e->tx, e->tx_prod, &m);
	(void)shm_ring_publish(&e->tx, e->tx_prod + 1);
	expect_victim_err(f);
}

/* More messages than the victim posted receive WRs (credits ignored). */
static void t_no_credit(void **state)
{
	struct fx *f = *state;
	post_recv(&f->a, f->qa, 0, 64, 1);
	struct shm_qp *e = evil(f);
	for (uint32_t i = 0; i < 2; i++) {
		struct shm_ring_msg m = { .op = SHM_OP_SEND, .cells = 1, .len = 4 };
		shm_ring_put_hdr(&e->tx, e->tx_prod + i, &m);
	}
	(void)shm_ring_publish(&e->tx, e->tx_prod + 2);
	struct dev_wc wc;
	assert_int_equal(wait_wc(f->a.rcq, &wc, WAIT_MS), 1);
	assert_int_equal(wc.status, DEV_WC_SUCCESS);	/* the first had a WR */
	assert_int_equal(wait_state(f->qa, DEV_QPS_ERR, WAIT_MS), 0);
	assert_int_equal(wait_event(f->a.dev, DEV_EVENT_QP_FATAL, f->qa->qp_num, WAIT_MS), 0);
}

/* The peer's consumer index (in the ring the victim sends into) is impossible: the victim's
 * send fails, its QP goes to ERR. */
static void t_bad_cons(void **state)
{
	struct fx *f = *state;
	struct shm_qp *e = evil(f);
	atomic_store(&e->rx.hdr->cons, 12345);
	post_recv(&f->b, f->qb, 0, 64, 1);
	struct dev_sge sg = lsge(&f->a, 0, 8);
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, DEV_SEND_SIGNALED, &sg, 1, 0, 0, 0, 5), 0);
	expect_wc(f->a.scq, 5, DEV_WC_RETRY_EXC_ERR, DEV_WC_SEND);
	assert_int_equal(wait_state(f->qa, DEV_QPS_ERR, WAIT_MS), 0);
}

/* More credits than the peer has receive WRs. */
static void t_bad_credits(void **state)
{
	struct fx *f = *state;
	struct shm_qp *e = evil(f);
	atomic_store(&e->rx.hdr->credits, 0x80000000u);
	struct dev_sge sg = lsge(&f->a, 0, 8);
	assert_int_equal(post_send(f->qa, DEV_WR_SEND, DEV_SEND_SIGNALED, &sg, 1, 0, 0, 0, 6), 0);
	expect_wc(f->a.scq, 6, DEV_WC_RETRY_EXC_ERR, DEV_WC_SEND);
}

/* A WRITE "in progress" that never ends: deregistration still returns in bounded time and
 * the rkey is invalid afterwards. */
static void t_stuck_busy(void **state)
{
	struct fx *f = *state;
	struct shm_qp *e = evil(f);
	atomic_store(&e->tx.hdr->busy_rkey, f->a.rmr->rkey);
	uint32_t rkey = f->a.rmr->rkey;
	uint64_t t0 = smcr_now_ns();
	assert_int_equal(dev_dereg_mr(f->a.rmr), 0);
	f->a.rmr = NULL;
	/* it waited for the WRITE it saw in flight (SHM_DEREG_WAIT_NS), then gave up: a hang
	 * would end the test at its timeout, so no upper bound is asserted */
	assert_true(smcr_now_ns() - t0 >= SHM_DEREG_WAIT_NS);
	atomic_store(&e->tx.hdr->busy_rkey, 0);
	struct dev_sge sg = lsge(&f->b, 0, 8);
	assert_int_equal(post_send(f->qb, DEV_WR_RDMA_WRITE, DEV_SEND_SIGNALED, &sg, 1,
				   raddr(&f->a, 0), rkey, 0, 7), 0);
	expect_wc(f->b.scq, 7, DEV_WC_REM_ACCESS_ERR, DEV_WC_RDMA_WRITE);
}

/* Garbage and wrong fds on the victim's rendezvous socket: that connection is dropped, the
 * victim's existing QP pair keeps working. */
static void hostile_conn(struct fx *f, const void *buf, size_t len, const int *fds, int nfds)
{
	struct shm_dev *sd = shm_dev_of(f->a.dev);
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sd->sock_path);
	assert_int_equal(connect(s, (struct sockaddr *)&sa, sizeof sa), 0);
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 4)];
	} ctl;
	struct iovec iov = { .iov_base = (void *)(uintptr_t)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (nfds) {
		memset(&ctl, 0, sizeof ctl);
		mh.msg_control = ctl.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	assert_int_equal(sendmsg(s, &mh, 0), (ssize_t)len);
	/* The victim hangs up on us. */
	struct pollfd pfd = { .fd = s, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
	char c;
	assert_int_equal(recv(s, &c, 1, 0), 0);
	close(s);
	ping_pair(&f->a, f->qa, &f->b, f->qb);
}

static void t_socket_garbage(void **state)
{
	struct fx *f = *state;
	const char junk[] = "GET / HTTP/1.0\r\n\r\n";
	hostile_conn(f, junk, sizeof junk, NULL, 0);
	/* A well-formed HELLO whose fds are pipes, not a sealed memfd and an eventfd. */
	struct shm_msg m = { .type = SHM_MSG_HELLO };
	m.u.hello.src = f->b.gid;
	m.u.hello.dst = f->a.gid;
	m.u.hello.tab_entries = 16;
	uint8_t buf[SHM_MSG_MAX];
	int n = shm_msg_encode(&m, buf, sizeof buf);
	int p[2];
	assert_int_equal(pipe(p), 0);
	hostile_conn(f, buf, (size_t)n, p, 2);
	/* A HELLO addressed to someone else. */
	m.u.hello.dst = f->b.gid;
	n = shm_msg_encode(&m, buf, sizeof buf);
	int fds[2] = { shm_dev_of(f->b.dev)->rkey_tab_fd, shm_dev_of(f->b.dev)->kick_fd };
	hostile_conn(f, buf, (size_t)n, fds, 2);
	/* A QP_REQ before any HELLO. */
	struct shm_msg q = { .type = SHM_MSG_QP_REQ };
	q.u.qp.src_qpn = 1;
	q.u.qp.dst_qpn = f->qa->qp_num;
	n = shm_msg_encode(&q, buf, sizeof buf);
	hostile_conn(f, buf, (size_t)n, p, 2);
	close(p[0]);
	close(p[1]);
}

/* A GID of another host is never dialled, whatever sits in the rendezvous directory: the
 * QP's sends end with retry exceeded after its transport timeout. */
static void t_foreign_gid(void **state)
{
	struct fx *f = *state;
	struct dev_qp *q = qp_new(&f->a, 4, 4, 0);
	struct dev_gid g = f->b.gid;
	g.raw[2] ^= 0xff;	/* boot id differs: another host */
	qp_init(q);
	qp_rtr(q, &g, f->qb->qp_num);
	struct dev_qp_attr a = { .qp_state = DEV_QPS_RTS, .timeout = 1, .retry_cnt = 0,
				 .rnr_retry = 7, .max_rd_atomic = 1 };
	assert_int_equal(dev_modify_qp(q, &a, DEV_QP_MASK_RTS), 0);
	struct dev_sge sg = lsge(&f->a, 0, 8);
	assert_int_equal(post_send(q, DEV_WR_SEND, DEV_SEND_SIGNALED, &sg, 1, 0, 0, 0, 9), 0);
	expect_wc(f->a.scq, 9, DEV_WC_RETRY_EXC_ERR, DEV_WC_SEND);
	assert_int_equal(dev_destroy_qp(q), 0);
}

int main(void)
{
	if (conf_use_shm())
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_bad_prod, setup, teardown),
		cmocka_unit_test_setup_teardown(t_bad_header, setup, teardown),
		cmocka_unit_test_setup_teardown(t_bad_len, setup, teardown),
		cmocka_unit_test_setup_teardown(t_no_credit, setup, teardown),
		cmocka_unit_test_setup_teardown(t_bad_cons, setup, teardown),
		cmocka_unit_test_setup_teardown(t_bad_credits, setup, teardown),
		cmocka_unit_test_setup_teardown(t_stuck_busy, setup, teardown),
		cmocka_unit_test_setup_teardown(t_socket_garbage, setup, teardown),
		cmocka_unit_test_setup_teardown(t_foreign_gid, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
