/* conf_twohost.c: the conformance suite's two-host mode, for a provider whose devices reach
 * other hosts (verbs: a RoCE NIC, or Soft-RoCE in the tests/vm guests). The suite's other
 * mode keeps both ends of each test in one process on one device; here the two ends are in
 * two processes on two hosts, joined by their network, so what goes over the wire between
 * two devices is what is tested:
 *
 *   conformance <provider> --serve PORT        the far end: waits for one control
 *                                              connection and runs the far half of each
 *                                              test the near end names, until it says end
 *   conformance <provider> --remote HOST PORT  the near end: the tests (cmocka output)
 *
 * Each test makes one RC QP on each end; the ends exchange what the other needs (GID, QP
 * number, the remote-writable buffer's address and rkey) over the control connection,
 * connect with SMC-R's attributes (conf_lib.c) and meet at a barrier; then the near end
 * drives, the far end observes and reports what it saw (completion status, opcode, length,
 * immediate, whether the bytes in its buffer are the expected ones). The tests:
 *   query          the far device's GID is another host's: not ours, not openable here, and
 *                  of our GID's type (RoCE v2 on rxe)
 *   write_send     256 KiB of WRITEs then a 44-byte inline solicited SEND, near to far: at
 *                  the SEND's receive completion the WRITEs' bytes are all there (ordering)
 *   write_send_rev the same, far to near
 *   sge_pairs      one WRITE of two SGEs lands as their concatenation
 *   write_imm      WRITE with immediate: the receiver's completion carries it, with the length
 *   bad_rkey       a wrong rkey: remote access error at the sender, the target's receive
 *                  WRs flushed
 *   out_of_bounds  one byte past the target's MR: remote access error
 *   rnr            no receive WR at the target and a finite RNR retry: RNR retry exceeded
 *   peer_killed    the far end's QP owner (a process the far end started: `--peer`, the
 *                  one-host suite's peer) is SIGKILLed in the middle of a transfer: the near
 *                  QP's next SEND never succeeds (retry exceeded; rxe gives no completion at
 *                  all, then the QP is taken down as the engine would), and each of its
 *                  receive WRs comes back once
 * Control messages are fixed-size structs in the hosts' byte order: both ends run the same
 * build on the same architecture (the guests do). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "conf_lib.h"
#include "conf_twohost.h"
#include "dev/dev.h"
#include "util/clock.h"

enum th_test {
	TH_END = 0,
	TH_QUERY,
	TH_WRITE_SEND,
	TH_WRITE_SEND_REV,
	TH_SGE_PAIRS,
	TH_WRITE_IMM,
	TH_BAD_RKEY,
	TH_OOB,
	TH_RNR,
	TH_PEER_KILLED,
	TH_KILL,	/* peer_killed's second command: kill the peer process now */
};

/* near -> far: which test, with its parameters */
struct th_cmd {
	uint32_t test;
	uint32_t len;
	uint32_t seed;
	uint32_t imm;
};

/* both ways: what the other end needs to reach this one */
struct th_ends {
	struct dev_gid gid;
	uint32_t gid_type;
	uint32_t qpn;
	uint32_t rkey;
	uint32_t pad;
	uint64_t addr;
};

/* far -> near: what the far end saw (status 0: as expected by the far half itself) */
struct th_res {
	int32_t status;
	uint32_t nwc;
	uint32_t wc_status[2];
	uint32_t wc_opcode;
	uint32_t wc_flags;
	uint32_t byte_len;
	uint32_t imm;
	uint32_t bad_bytes;	/* bytes of the checked range that differ from the expected */
	char msg[92];
};

/* The layout conformance.c's peer_main writes and reads (its one-host peer process). */
struct pk_ends {
	struct dev_gid gid;
	uint32_t qpn, rkey;
	uint64_t addr;
};

#define TH_WAIT_MS 10000
#define TH_OFF 4096u	/* where the WRITE tests put their bytes in the target's buffer */

static int ctl = -1;
static struct side me;
static const char *th_self;

static int xfer(int fd, void *p, size_t n, bool wr)
{
	char *c = p;
	while (n) {
		ssize_t r = wr ? write(fd, c, n) : read(fd, c, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}
#define PUT(x) xfer(ctl, &(x), sizeof(x), true)
#define GET(x) xfer(ctl, &(x), sizeof(x), false)

static uint8_t pat(uint32_t seed, uint64_t i)
{
	uint32_t x = (uint32_t)i * 0x9E3779B1u ^ seed;
	x ^= x >> 15;
	x *= 0x85EBCA77u;
	return (uint8_t)(x >> 13);
}

static void fill(uint8_t *b, uint64_t from, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		b[i] = pat(seed, from + i);
}

static uint32_t count_bad(const uint8_t *b, uint64_t from, uint32_t len, uint32_t seed)
{
	uint32_t bad = 0;
	for (uint32_t i = 0; i < len; i++)
		bad += b[i] != pat(seed, from + i);
	return bad;
}

static struct th_ends my_ends(struct dev_qp *q)
{
	struct th_ends e;
	memset(&e, 0, sizeof e);
	struct dev_gid_entry ge;
	e.gid = me.gid;
	if (dev_query_gid(me.dev, 1, 0, &ge) == 0)
		e.gid_type = ge.type;
	e.qpn = q ? q->qp_num : 0;
	e.rkey = me.rmr->rkey;
	e.addr = (uint64_t)(uintptr_t)me.rbuf;
	return e;
}

/* One QP on this end, connected to the other end's: ends exchanged (the far end first),
 * nrecv receive WRs of 64 bytes posted before RTR, then a barrier so neither sends before
 * the other is in RTS. far: this is the far end. */
static struct dev_qp *th_connect(bool far, uint32_t nrecv, uint8_t rnr_retry, struct th_ends *peer)
{
	struct dev_qp *q = qp_new(&me, 16, 64, 0);
	qp_init(q);
	for (uint32_t i = 0; i < nrecv; i++)
		post_recv(&me, q, 64 * (uint64_t)i, 64, 100 + i);
	struct th_ends mine = my_ends(q);
	if (far) {
		if (PUT(mine) || GET(*peer))
			return NULL;
	} else {
		if (GET(*peer) || PUT(mine))
			return NULL;
	}
	qp_rtr(q, &peer->gid, peer->qpn);
	qp_rts(q, rnr_retry);
	uint8_t b = 1;
	if (far ? (PUT(b) || GET(b)) : (GET(b) || PUT(b)))
		return NULL;
	return q;
}

static int th_wait_wc(struct dev_cq *cq, struct dev_wc *wc)
{
	return dev_poll_cq_wait(cq, 1, wc, SPIN_NS, TH_WAIT_MS);
}

/* WRITEs of len bytes from our local buffer (offset 0) to the peer's buffer at TH_OFF, in
 * 64 KiB pieces, unsignaled, then the 44-byte inline solicited signaled SEND. */
static int write_then_send(struct dev_qp *q, const struct th_ends *peer, uint32_t len,
			   uint32_t seed)
{
	fill(me.lbuf, 0, len, seed);
	for (uint32_t off = 0; off < len; off += 65536) {
		uint32_t n = len - off < 65536 ? len - off : 65536;
		struct dev_sge sg = lsge(&me, off, n);
		if (post_send(q, DEV_WR_RDMA_WRITE, 0, &sg, 1, peer->addr + TH_OFF + off, peer->rkey,
			      0, 1))
			return -1;
	}
	uint8_t m[44];
	memset(m, 0x5a, sizeof m);
	memcpy(m, &len, sizeof len);
	struct dev_sge ss = { .addr = (uint64_t)(uintptr_t)m, .length = sizeof m };
	return post_send(q, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED | DEV_SEND_SOLICITED,
			 &ss, 1, 0, 0, 0, 2);
}

static void note_wc(struct th_res *r, const struct dev_wc *wc)
{
	if (r->nwc < 2)
		r->wc_status[r->nwc] = wc->status;
	r->nwc++;
	r->wc_opcode = wc->opcode;
	r->wc_flags = wc->wc_flags;
	r->byte_len = wc->byte_len;
	r->imm = wc->imm_data;
}

/* ---- the far end ---------------------------------------------------------------------- */

/* peer_killed's far half: the peer process (exec'd `--peer`, over pipes, as the one-host
 * test does) gets the near end's address through us; on TH_KILL we kill it. */
static int far_peer_killed(struct th_res *r)
{
	int p2c[2], c2p[2];
	if (pipe2(p2c, O_CLOEXEC) || pipe2(c2p, O_CLOEXEC))
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char rs[16], ws[16];
		snprintf(rs, sizeof rs, "%d", p2c[0]);
		snprintf(ws, sizeof ws, "%d", c2p[1]);
		fcntl(p2c[0], F_SETFD, 0);
		fcntl(c2p[1], F_SETFD, 0);
		execl(th_self, th_self, prov->name, "--peer", rs, ws, (char *)NULL);
		_exit(127);
	}
	close(p2c[0]);
	close(c2p[1]);
	struct pk_ends pe, ne;
	pid_t grandchild = -1;
	int rc = -1;
	if (xfer(c2p[0], &pe, sizeof pe, false) == 0 && PUT(pe) == 0 && GET(ne) == 0 &&
	    xfer(p2c[1], &ne, sizeof ne, true) == 0 &&
	    xfer(c2p[0], &grandchild, sizeof grandchild, false) == 0) {
		uint8_t b = 1;
		struct th_cmd k;
		/* connected: tell the near end, then wait for its word to kill */
		if (PUT(b) == 0 && GET(k) == 0 && k.test == TH_KILL)
			rc = 0;
	}
	kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	if (grandchild > 0)
		kill(grandchild, SIGKILL);
	close(p2c[1]);
	close(c2p[0]);
	snprintf(r->msg, sizeof r->msg, "peer %d killed (%s)", (int)pid,
		 WIFSIGNALED(st) ? "by signal" : "it had exited");
	return rc;
}

static int far_one(const struct th_cmd *c, struct th_res *r)
{
	struct th_ends peer;
	struct dev_qp *q = NULL;
	struct dev_wc wc;
	switch (c->test) {
	case TH_QUERY: {
		struct th_ends mine = my_ends(NULL);
		return PUT(mine);
	}
	case TH_WRITE_SEND:
	case TH_SGE_PAIRS:
	case TH_WRITE_IMM:
		/* cleared before the near end can write (it starts after th_connect's barrier) */
		memset(me.rbuf, 0, (size_t)TH_OFF + c->len + 8192);
		if (!(q = th_connect(true, 4, 7, &peer)))
			return -1;
		if (th_wait_wc(me.rcq, &wc) != 1) {
			snprintf(r->msg, sizeof r->msg, "no receive completion");
			r->status = 1;
			break;
		}
		note_wc(r, &wc);
		if (c->test == TH_SGE_PAIRS) {
			/* the near end's two SGEs: its bytes [0, 1000) and [8192, 11192) */
			r->bad_bytes = count_bad(me.rbuf + TH_OFF, 0, 1000, c->seed) +
				       count_bad(me.rbuf + TH_OFF + 1000, 8192, 3000, c->seed);
		} else {
			r->bad_bytes = count_bad(me.rbuf + TH_OFF, 0, c->len, c->seed);
		}
		/* the near end's byte past the range stays untouched */
		if (c->test != TH_SGE_PAIRS && me.rbuf[TH_OFF + c->len] != 0)
			r->bad_bytes++;
		break;
	case TH_WRITE_SEND_REV:
		if (!(q = th_connect(true, 0, 7, &peer)))
			return -1;
		if (write_then_send(q, &peer, c->len, c->seed)) {
			r->status = 1;
			snprintf(r->msg, sizeof r->msg, "post failed");
			break;
		}
		if (th_wait_wc(me.scq, &wc) != 1) {
			r->status = 1;
			snprintf(r->msg, sizeof r->msg, "no send completion");
			break;
		}
		note_wc(r, &wc);
		break;
	case TH_BAD_RKEY:
		if (!(q = th_connect(true, 2, 7, &peer)))
			return -1;
		/* the target's two receive WRs: both come back flushed once the QP is in ERR */
		for (int i = 0; i < 2; i++) {
			if (th_wait_wc(me.rcq, &wc) != 1) {
				r->status = 1;
				snprintf(r->msg, sizeof r->msg, "receive WR %d not completed", i);
				break;
			}
			note_wc(r, &wc);
		}
		break;
	case TH_OOB:
	case TH_RNR: {
		if (!(q = th_connect(true, c->test == TH_RNR ? 1 : 0, 7, &peer)))
			return -1;
		uint8_t b;
		if (GET(b))	/* the near end is done with our QP */
			return -1;
		if (c->test == TH_RNR && th_wait_wc(me.rcq, &wc) == 1)
			note_wc(r, &wc);
		break;
	}
	case TH_PEER_KILLED:
		return far_peer_killed(r) ? -1 : PUT(*r);
	default:
		return -1;
	}
	if (q && dev_destroy_qp(q)) {
		r->status = 1;
		snprintf(r->msg, sizeof r->msg, "dev_destroy_qp failed");
	}
	/* every completion the test left behind goes, so the next test starts empty */
	while (dev_poll_cq(me.rcq, 1, &wc) == 1 || dev_poll_cq(me.scq, 1, &wc) == 1)
		;
	return PUT(*r);
}

static int serve(int port)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1)) {
		perror("conformance --serve: listen");
		return 2;
	}
	printf("conformance %s: far end listening on %d\n", prov->name, port);
	fflush(stdout);
	ctl = accept(l, NULL, NULL);
	close(l);
	if (ctl < 0)
		return 2;
	setsockopt(ctl, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (side_open(&me, 256)) {
		fprintf(stderr, "conformance --serve: side_open failed\n");
		return 2;
	}
	int rc = 0;
	for (;;) {
		struct th_cmd c;
		if (GET(c)) {
			fprintf(stderr, "conformance --serve: control connection lost\n");
			rc = 1;
			break;
		}
		if (c.test == TH_END)
			break;
		struct th_res r;
		memset(&r, 0, sizeof r);
		printf("far end: test %u\n", c.test);
		fflush(stdout);
		if (far_one(&c, &r)) {
			fprintf(stderr, "conformance --serve: test %u: control exchange failed\n",
				c.test);
			rc = 1;
			break;
		}
	}
	side_close(&me);
	close(ctl);
	printf("conformance %s: far end done (%s)\n", prov->name, rc ? "FAILED" : "ok");
	return rc;
}

/* ---- the near end: the tests ------------------------------------------------------------ */

static void cmd(uint32_t test, uint32_t len, uint32_t seed, uint32_t imm)
{
	struct th_cmd c = { test, len, seed, imm };
	assert_int_equal(PUT(c), 0);
}

static void result(struct th_res *r)
{
	memset(r, 0, sizeof *r);
	assert_int_equal(GET(*r), 0);
	r->msg[sizeof r->msg - 1] = 0;
	if (r->msg[0])
		print_message("[   INFO   ] far end: %s\n", r->msg);
	assert_int_equal(r->status, 0);
}

static void t2_query(void **state)
{
	(void)state;
	cmd(TH_QUERY, 0, 0, 0);
	struct th_ends far;
	assert_int_equal(GET(far), 0);
	struct th_ends mine = my_ends(NULL);
	char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, mine.gid.raw, a, sizeof a);
	inet_ntop(AF_INET6, far.gid.raw, b, sizeof b);
	print_message("[   INFO   ] GIDs: here %s (type %u), far end %s (type %u)\n", a,
		      mine.gid_type, b, far.gid_type);
	assert_memory_not_equal(mine.gid.raw, far.gid.raw, DEV_GID_LEN);
	assert_int_equal(mine.gid_type, far.gid_type);
	struct dev_device *d;
	assert_int_equal(dev_open_by_gid(&far.gid, &d), -SMCR_E_DEV_NO_DEVICE);
}

static void t2_write_send(void **state)
{
	(void)state;
	const uint32_t len = 256 * 1024, seed = 0x1234567;
	cmd(TH_WRITE_SEND, len, seed, 0);
	struct th_ends far;
	struct dev_qp *q = th_connect(false, 0, 7, &far);
	assert_non_null(q);
	assert_int_equal(write_then_send(q, &far, len, seed), 0);
	expect_wc(me.scq, 2, DEV_WC_SUCCESS, DEV_WC_SEND);
	struct th_res r;
	result(&r);
	assert_int_equal(r.nwc, 1);
	assert_int_equal(r.wc_status[0], DEV_WC_SUCCESS);
	assert_int_equal(r.wc_opcode, DEV_WC_RECV);
	assert_int_equal(r.byte_len, 44);
	assert_int_equal(r.bad_bytes, 0);
	assert_int_equal(dev_destroy_qp(q), 0);
}

static void t2_write_send_rev(void **state)
{
	(void)state;
	const uint32_t len = 256 * 1024 + 333, seed = 0x7654321;
	cmd(TH_WRITE_SEND_REV, len, seed, 0);
	struct th_ends far;
	memset(me.rbuf, 0, TH_OFF + len + 1);
	struct dev_qp *q = th_connect(false, 4, 7, &far);
	assert_non_null(q);
	struct dev_wc wc;
	assert_int_equal(th_wait_wc(me.rcq, &wc), 1);
	assert_int_equal(wc.status, DEV_WC_SUCCESS);
	assert_int_equal(wc.opcode, DEV_WC_RECV);
	assert_int_equal(wc.byte_len, 44);
	/* at the SEND's completion every WRITE before it is in our buffer, nothing past it */
	assert_int_equal(count_bad(me.rbuf + TH_OFF, 0, len, seed), 0);
	assert_int_equal(me.rbuf[TH_OFF + len], 0);
	struct th_res r;
	result(&r);
	assert_int_equal(r.nwc, 1);
	assert_int_equal(r.wc_status[0], DEV_WC_SUCCESS);
	assert_int_equal(r.wc_opcode, DEV_WC_SEND);
	assert_int_equal(dev_destroy_qp(q), 0);
	while (dev_poll_cq(me.rcq, 1, &wc) == 1)
		;
}

static void t2_sge_pairs(void **state)
{
	(void)state;
	const uint32_t seed = 0xabcdef;
	cmd(TH_SGE_PAIRS, 4000, seed, 0);
	struct th_ends far;
	struct dev_qp *q = th_connect(false, 0, 7, &far);
	assert_non_null(q);
	fill(me.lbuf, 0, 16384, seed);
	struct dev_sge sg[2] = { lsge(&me, 0, 1000), lsge(&me, 8192, 3000) };
	assert_int_equal(post_send(q, DEV_WR_RDMA_WRITE, 0, sg, 2, far.addr + TH_OFF, far.rkey, 0,
				   1), 0);
	uint8_t m[44] = { 0 };
	struct dev_sge ss = { .addr = (uint64_t)(uintptr_t)m, .length = sizeof m };
	assert_int_equal(post_send(q, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &ss, 1, 0,
				   0, 0, 2), 0);
	expect_wc(me.scq, 2, DEV_WC_SUCCESS, DEV_WC_SEND);
	struct th_res r;
	result(&r);
	assert_int_equal(r.wc_status[0], DEV_WC_SUCCESS);
	assert_int_equal(r.bad_bytes, 0);
	assert_int_equal(dev_destroy_qp(q), 0);
}

static void t2_write_imm(void **state)
{
	(void)state;
	const uint32_t len = 512, seed = 0x55aa, imm = 0xc0ffee01;
	cmd(TH_WRITE_IMM, len, seed, imm);
	struct th_ends far;
	struct dev_qp *q = th_connect(false, 0, 7, &far);
	assert_non_null(q);
	fill(me.lbuf, 0, len, seed);
	struct dev_sge sg = lsge(&me, 0, len);
	assert_int_equal(post_send(q, DEV_WR_RDMA_WRITE_WITH_IMM, DEV_SEND_SIGNALED, &sg, 1,
				   far.addr + TH_OFF, far.rkey, imm, 3), 0);
	expect_wc(me.scq, 3, DEV_WC_SUCCESS, DEV_WC_RDMA_WRITE);
	struct th_res r;
	result(&r);
	assert_int_equal(r.wc_status[0], DEV_WC_SUCCESS);
	assert_int_equal(r.wc_opcode, DEV_WC_RECV_RDMA_WITH_IMM);
	assert_true(r.wc_flags & DEV_WC_WITH_IMM);
	assert_int_equal(r.imm, imm);
	assert_int_equal(r.byte_len, len);
	assert_int_equal(r.bad_bytes, 0);
	assert_int_equal(dev_destroy_qp(q), 0);
}

static void t2_bad_rkey(void **state)
{
	(void)state;
	cmd(TH_BAD_RKEY, 0, 0, 0);
	struct th_ends far;
	struct dev_qp *q = th_connect(false, 0, 7, &far);
	assert_non_null(q);
	struct dev_sge sg = lsge(&me, 0, 128);
	assert_int_equal(post_send(q, DEV_WR_RDMA_WRITE, DEV_SEND_SIGNALED, &sg, 1, far.addr,
				   far.rkey ^ 0x00ff0000u, 0, 5), 0);
	assert_int_equal(post_send(q, DEV_WR_SEND, 0, &sg, 1, 0, 0, 0, 6), 0);
	expect_wc(me.scq, 5, DEV_WC_REM_ACCESS_ERR, DEV_WC_RDMA_WRITE);
	expect_wc(me.scq, 6, DEV_WC_WR_FLUSH_ERR, DEV_WC_SEND);
	assert_int_equal(wait_state(q, DEV_QPS_ERR, WAIT_MS), 0);
	struct th_res r;
	result(&r);
	assert_int_equal(r.nwc, 2);
	assert_int_equal(r.wc_status[0], DEV_WC_WR_FLUSH_ERR);
	assert_int_equal(r.wc_status[1], DEV_WC_WR_FLUSH_ERR);
	assert_int_equal(dev_destroy_qp(q), 0);
}

static void t2_out_of_bounds(void **state)
{
	(void)state;
	cmd(TH_OOB, 0, 0, 0);
	struct th_ends far;
	struct dev_qp *q = th_connect(false, 0, 7, &far);
	assert_non_null(q);
	struct dev_sge sg = lsge(&me, 0, 101);
	/* in bounds first (the last 101 bytes): it works, and proves the pair connected */
	assert_int_equal(post_send(q, DEV_WR_RDMA_WRITE, DEV_SEND_SIGNALED, &sg, 1,
				   far.addr + BUF_LEN - 101, far.rkey, 0, 1), 0);
	expect_wc(me.scq, 1, DEV_WC_SUCCESS, DEV_WC_RDMA_WRITE);
	assert_int_equal(post_send(q, DEV_WR_RDMA_WRITE, DEV_SEND_SIGNALED, &sg, 1,
				   far.addr + BUF_LEN - 100, far.rkey, 0, 2), 0);
	expect_wc(me.scq, 2, DEV_WC_REM_ACCESS_ERR, DEV_WC_RDMA_WRITE);
	assert_int_equal(wait_state(q, DEV_QPS_ERR, WAIT_MS), 0);
	uint8_t b = 1;
	assert_int_equal(PUT(b), 0);
	struct th_res r;
	result(&r);
	assert_int_equal(dev_destroy_qp(q), 0);
}

static void t2_rnr(void **state)
{
	(void)state;
	cmd(TH_RNR, 0, 0, 0);
	struct th_ends far;
	/* RNR retry 1: finite (SMC-R itself sets 7, infinite) */
	struct dev_qp *q = th_connect(false, 0, 1, &far);
	assert_non_null(q);
	uint8_t m[44] = { 1, 2, 3 };
	struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)m, .length = 44 };
	/* the far end posted one receive WR: the first SEND takes it, the second finds none */
	assert_int_equal(post_send(q, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &sg, 1, 0,
				   0, 0, 10), 0);
	expect_wc(me.scq, 10, DEV_WC_SUCCESS, DEV_WC_SEND);
	assert_int_equal(post_send(q, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &sg, 1, 0,
				   0, 0, 11), 0);
	struct dev_wc wc;
	assert_int_equal(th_wait_wc(me.scq, &wc), 1);
	assert_int_equal(wc.wr_id, 11);
	if (wc.status != DEV_WC_RNR_RETRY_EXC_ERR)
		fail_msg("second SEND: %s, expected RNR retry exceeded", dev_wc_status_str(wc.status));
	assert_int_equal(wait_state(q, DEV_QPS_ERR, WAIT_MS), 0);
	uint8_t b = 1;
	assert_int_equal(PUT(b), 0);
	struct th_res r;
	result(&r);
	assert_int_equal(r.nwc, 1);
	assert_int_equal(r.wc_status[0], DEV_WC_SUCCESS);
	assert_int_equal(dev_destroy_qp(q), 0);
}

static void t2_peer_killed(void **state)
{
	(void)state;
	cmd(TH_PEER_KILLED, 0, 0, 0);
	struct dev_qp *q = qp_new(&me, 16, 64, 0);
	struct pk_ends pe, mine = { .gid = me.gid, .qpn = q->qp_num, .rkey = me.rmr->rkey,
				    .addr = (uint64_t)(uintptr_t)me.rbuf };
	assert_int_equal(GET(pe), 0);
	assert_int_equal(PUT(mine), 0);
	qp_init(q);
	for (int i = 0; i < 64; i++)
		post_recv(&me, q, 64 * (uint64_t)i, 64, (uint64_t)i);
	qp_rtr(q, &pe.gid, pe.qpn);
	qp_rts(q, 7);
	uint8_t b;
	assert_int_equal(GET(b), 0);	/* the far end has the peer process's word: connected */
	/* the peer's transfer runs (64 KiB WRITEs and a SEND each): a few in, reposted */
	for (int got = 0; got < 20; got++) {
		struct dev_wc wc;
		assert_int_equal(th_wait_wc(me.rcq, &wc), 1);
		assert_int_equal(wc.status, DEV_WC_SUCCESS);
		post_recv(&me, q, 64 * wc.wr_id, 64, wc.wr_id);
	}
	cmd(TH_KILL, 0, 0, 0);
	struct th_res r;
	result(&r);
	/* RC: the side that sends notices (retry exceeded) */
	uint64_t t0 = smcr_now_ns();
	struct dev_sge sb = lsge(&me, 0, 8);
	assert_int_equal(post_send(q, DEV_WR_SEND, DEV_SEND_SIGNALED, &sb, 1, 0, 0, 0, 999), 0);
	struct dev_wc wc;
	int n = dev_poll_cq_wait(me.scq, 1, &wc, SPIN_NS, TH_WAIT_MS);
	print_message("[   INFO   ] dead peer: %s after %llu ms\n",
		      n == 1 ? dev_wc_status_str(wc.status) : "no completion",
		      (unsigned long long)((smcr_now_ns() - t0) / SMCR_NS_PER_MS));
	if (n == 1) {
		assert_int_equal(wc.wr_id, 999);
		/* RC: retry exceeded. A software provider (shm, emu) notices the hang-up by
		 * itself (dev.h rule 5): the WR in progress then is retry exceeded, or the QP
		 * was in ERR already and it is flushed. */
		if (strcmp(prov->name, "verbs") == 0)
			assert_int_equal(wc.status, DEV_WC_RETRY_EXC_ERR);
		else if (wc.status != DEV_WC_RETRY_EXC_ERR && wc.status != DEV_WC_WR_FLUSH_ERR)
			fail_msg("dead peer: %s", dev_wc_status_str(wc.status));
	} else {
		/* a device that never gives up (the one-host suite's hw_silent_peer): the WR
		 * stays outstanding, never a success; taken down as the engine does when its
		 * TEST LINK goes unanswered, it flushes */
		assert_int_equal(n, 0);
		struct dev_qp_attr e = { .qp_state = DEV_QPS_ERR };
		assert_int_equal(dev_modify_qp(q, &e, DEV_QP_STATE), 0);
		expect_wc(me.scq, 999, DEV_WC_WR_FLUSH_ERR, DEV_WC_SEND);
	}
	assert_int_equal(wait_state(q, DEV_QPS_ERR, WAIT_MS), 0);
	int flushed = 0, arrived = 0;
	while (wait_wc(me.rcq, &wc, 100) == 1) {
		flushed += wc.status == DEV_WC_WR_FLUSH_ERR;
		arrived += wc.status == DEV_WC_SUCCESS;
	}
	print_message("[   INFO   ] receive WRs after the kill: %d arrived, %d flushed\n", arrived,
		      flushed);
	assert_int_equal(arrived + flushed, 64);
	assert_int_equal(dev_destroy_qp(q), 0);
}

static int near_setup(void **state)
{
	(void)state;
	return side_open(&me, 256) ? -1 : 0;
}

static int near_teardown(void **state)
{
	(void)state;
	side_close(&me);
	return 0;
}

static int remote(const char *host, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		fprintf(stderr, "conformance --remote: bad address %s\n", host);
		return 2;
	}
	/* the far end may still be starting: retry a refused connect for up to 60 s */
	for (int i = 0; i < 240; i++) {
		ctl = socket(AF_INET, SOCK_STREAM, 0);
		if (ctl < 0)
			return 2;
		if (connect(ctl, (struct sockaddr *)&a, sizeof a) == 0)
			break;
		close(ctl);
		ctl = -1;
		usleep(250000);
	}
	if (ctl < 0) {
		fprintf(stderr, "conformance --remote: no far end at %s:%d\n", host, port);
		return 2;
	}
	int one = 1;
	setsockopt(ctl, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t2_query),
		cmocka_unit_test(t2_write_send),
		cmocka_unit_test(t2_write_send_rev),
		cmocka_unit_test(t2_sge_pairs),
		cmocka_unit_test(t2_write_imm),
		cmocka_unit_test(t2_bad_rkey),
		cmocka_unit_test(t2_out_of_bounds),
		cmocka_unit_test(t2_rnr),
		cmocka_unit_test(t2_peer_killed),
	};
	char name[64];
	snprintf(name, sizeof name, "conformance_%s_two_hosts", prov->name);
	int rc = cmocka_run_group_tests_name(name, tests, near_setup, near_teardown);
	struct th_cmd end = { TH_END, 0, 0, 0 };
	(void)PUT(end);
	close(ctl);
	return rc;
}

int conf_twohost_main(const char *self, int argc, char **argv)
{
	th_self = self;
	signal(SIGPIPE, SIG_IGN);
	if (argc == 2 && strcmp(argv[0], "--serve") == 0)
		return serve(atoi(argv[1]));
	if (argc == 3 && strcmp(argv[0], "--remote") == 0)
		return remote(argv[1], atoi(argv[2]));
	fprintf(stderr, "usage: conformance <provider> --serve PORT | --remote HOST PORT\n");
	return 2;
}
