/* conf_twohost.c: the conformance suite's two-host mode, for a provider whose devices reach
 * other hosts (verbs: a RoCE NIC, or Soft-RoCE in the tests/vm guests). The suite's other
 * mode keeps both ends of each test in one process on one device; here the two ends are in
 * two processes on two hosts, joined by their network, so what goes over the wire between
 * two devices is what is tested:
 *
 *   conformance <provider> --serve PORT        the far end: waits for one control
 *                                              connection and runs the far half of each
 *                                              test the near end names, until it says end
 *                                              (PORT 0: any free port, printed)
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
 *                  receive WRs comes back once (the one-host suite's check, peer_gone_check)
 *   many_qps       TH_MQ_N QP pairs, traffic both ways on every one: each end WRITEs 2 KiB into
 *                  the other's buffer then SENDs a 16-byte message on each of its QPs; each
 *                  receive completion names the right QP, and carries its message, with the
 *                  WRITE's bytes in place
 *   threads        TH_TT_N threads on each end, each with its own QP and CQs, all at once: in
 *                  lockstep rounds each WRITEs 4 KiB and SENDs the round's number, and checks
 *                  the other end's (order, bytes)
 *   cq_epoll       each end's receive CQ's completion fd in an epoll set, the end blocked in
 *                  epoll_wait while the other sends: armed for solicited completions only, an
 *                  unsolicited SEND (acknowledged at the sender) wakes nobody and a solicited
 *                  one does; armed for any, an unsolicited one does; one event each, the
 *                  messages in order, bytes right. The far end waits first, then the near end
 *   port_events    the far end takes its port down and, 3 s later, up again (shm: the port
 *                  test hook; verbs: the commands in SMCR_CONF_PORT_DOWN and _UP, such as
 *                  `ip link set eth0 down`, skipped without them) while the near end sends
 *                  to it: PORT_ERR then PORT_ACTIVE at the far end, the port's state DOWN then
 *                  ACTIVE; a software provider takes the QPs down (QP_FATAL at the near end,
 *                  its SEND flushed), RC may carry on once the port is back: a SEND that
 *                  succeeds arrived whole. What each end saw is printed
 *   no_leak        last: each end closes everything; its open fds and memfd mappings are
 *                  as many as before the first device open (memory: ASan's leak checker at
 *                  both ends' exits in the sanitizer builds)
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
#include <pthread.h>
#include <sys/epoll.h>
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
	TH_MANY_QPS,
	TH_THREADS,
	TH_CQ_EPOLL,
	TH_PORT,
	TH_NO_LEAK,
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
	uint32_t x[8];		/* per test: port_events' observations (PX_*), no_leak's counts */
	char msg[92];
};

/* th_res.x of port_events */
enum { PX_EV_ERR, PX_PORT_DOWN, PX_EV_ACTIVE, PX_PORT_UP, PX_QP_DOWN, PX_QP_END, PX_FATAL,
       PX_RECV_EARLY };
/* th_res.x of no_leak */
enum { LX_FDS0, LX_FDS_OPEN, LX_FDS1, LX_MAPS0, LX_MAPS_OPEN, LX_MAPS1 };

#define TH_WAIT_MS 10000
#define TH_OFF 4096u	/* where the WRITE tests put their bytes in the target's buffer */

static int ctl = -1;
static struct side me;
static const char *th_self;
/* this process's open fds and memfd mappings before its first device open (no_leak) */
static int fds0, maps0;

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

/* The two ends swap n bytes, the far end's first (so neither waits for the other). */
static int swap_ctl(bool far, const void *mine, void *theirs, size_t n)
{
	if (far)
		return xfer(ctl, (void *)mine, n, true) || xfer(ctl, theirs, n, false) ? -1 : 0;
	return xfer(ctl, theirs, n, false) || xfer(ctl, (void *)mine, n, true) ? -1 : 0;
}

static int barrier(bool far)
{
	uint8_t b = 1, o;
	return swap_ctl(far, &b, &o, 1);
}

/* The symmetric tests' verdict: the first failure's words, and how many there were. Both
 * ends run the same body; the near end asserts its own and the far end's. */
struct th_chk {
	int fails;
	char msg[92];
};

static void chk_fail(struct th_chk *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void chk_fail(struct th_chk *c, const char *fmt, ...)
{
	if (!c->fails++) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->msg, sizeof c->msg, fmt, ap);
		va_end(ap);
	}
}

static int wait_one(struct dev_cq *cq, struct dev_wc *wc, struct th_chk *c, const char *what)
{
	int n = dev_poll_cq_wait(cq, 1, wc, SPIN_NS, TH_WAIT_MS);
	if (n != 1) {
		chk_fail(c, "%s: %s", what, n == 0 ? "no completion" : "poll failed");
		return -1;
	}
	if (wc->status != DEV_WC_SUCCESS) {
		chk_fail(c, "%s: %s", what, dev_wc_status_str(wc->status));
		return -1;
	}
	return 0;
}

/* Mappings of memfd-backed memory (dev_mem's RDMA buffers) in this process. */
static int count_memfd_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int n = 0;
	while (f && fgets(line, sizeof line, f))
		n += strstr(line, "/memfd:") != NULL;
	if (f)
		fclose(f);
	return n;
}

/* Each end's receive buffers for the tests of many QPs: the second half of the local
 * buffer (the first half holds what they send). */
#define TH_RECV (BUF_LEN / 2)

/* ---- many QPs --------------------------------------------------------------------------- */

#define TH_MQ_N 128
#define TH_MQ_LEN 2048u

struct mq_msg {
	uint32_t idx, dir, seed, pad;
};

static uint32_t mq_seed(uint32_t seed, uint32_t i, uint32_t dir)
{
	return seed ^ (i << 8) ^ (dir << 20);
}

static int many_qps_body(bool far, uint32_t seed, struct th_chk *c)
{
	struct dev_qp *q[TH_MQ_N];
	uint32_t mine[TH_MQ_N], theirs[TH_MQ_N];
	const uint32_t dir = far, pdir = !far;
	memset(me.rbuf, 0, (size_t)TH_MQ_N * TH_MQ_LEN);	/* before the peer can write */
	for (int i = 0; i < TH_MQ_N; i++) {
		q[i] = qp_new(&me, 2, 2, 0);
		qp_init(q[i]);
		post_recv(&me, q[i], TH_RECV + 64 * (uint64_t)i, 64, (uint64_t)i);
		mine[i] = q[i]->qp_num;
	}
	struct th_ends me_e = my_ends(NULL), pe;
	if (swap_ctl(far, &me_e, &pe, sizeof pe) || swap_ctl(far, mine, theirs, sizeof mine))
		return -1;
	for (int i = 0; i < TH_MQ_N; i++) {
		qp_rtr(q[i], &pe.gid, theirs[i]);
		qp_rts(q[i], 7);
	}
	if (barrier(far))
		return -1;
	for (uint32_t i = 0; i < TH_MQ_N; i++) {
		fill(me.lbuf + i * TH_MQ_LEN, 0, TH_MQ_LEN, mq_seed(seed, i, dir));
		struct dev_sge sg = lsge(&me, i * TH_MQ_LEN, TH_MQ_LEN);
		struct mq_msg m = { i, dir, seed, 0 };
		struct dev_sge ss = { .addr = (uint64_t)(uintptr_t)&m, .length = sizeof m };
		if (post_send(q[i], DEV_WR_RDMA_WRITE, 0, &sg, 1, pe.addr + i * TH_MQ_LEN, pe.rkey,
			      0, 0) ||
		    post_send(q[i], DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &ss, 1, 0, 0,
			      0, i))
			chk_fail(c, "QP %u: post failed", i);
	}
	bool seen[TH_MQ_N] = { false };
	int got = 0, sent = 0;
	uint64_t end = smcr_now_ns() + 6ull * TH_WAIT_MS * SMCR_NS_PER_MS;
	while ((got < TH_MQ_N || sent < TH_MQ_N) && !c->fails && smcr_now_ns() < end) {
		struct dev_wc wc[16];
		int n = dev_poll_cq(me.rcq, 16, wc);
		for (int k = 0; k < n; k++, got++) {
			uint64_t i = wc[k].wr_id;
			struct mq_msg m;
			if (wc[k].status != DEV_WC_SUCCESS || i >= TH_MQ_N || seen[i]) {
				chk_fail(c, "receive %llu: %s", (unsigned long long)i,
					 dev_wc_status_str(wc[k].status));
				continue;
			}
			seen[i] = true;
			memcpy(&m, me.lbuf + TH_RECV + 64 * i, sizeof m);
			if (wc[k].qp_num != q[i]->qp_num || wc[k].byte_len != sizeof m ||
			    m.idx != i || m.dir != pdir || m.seed != seed)
				chk_fail(c, "QP %llu: message on QP %u, %u bytes, idx %u",
					 (unsigned long long)i, wc[k].qp_num, wc[k].byte_len, m.idx);
			uint32_t bad = count_bad(me.rbuf + i * TH_MQ_LEN, 0, TH_MQ_LEN,
						 mq_seed(seed, (uint32_t)i, pdir));
			if (bad)
				chk_fail(c, "QP %llu: %u bytes of its WRITE wrong at its SEND",
					 (unsigned long long)i, bad);
		}
		int m = dev_poll_cq(me.scq, 16, wc);
		for (int k = 0; k < m; k++, sent++)
			if (wc[k].status != DEV_WC_SUCCESS)
				chk_fail(c, "send %llu: %s", (unsigned long long)wc[k].wr_id,
					 dev_wc_status_str(wc[k].status));
		if (n <= 0 && m <= 0)
			usleep(100);
	}
	if (got != TH_MQ_N || sent != TH_MQ_N)
		chk_fail(c, "%d of %d messages in, %d sends completed", got, TH_MQ_N, sent);
	if (barrier(far))	/* both are done before any QP goes */
		return -1;
	for (int i = 0; i < TH_MQ_N; i++)
		if (dev_destroy_qp(q[i]))
			chk_fail(c, "dev_destroy_qp %d failed", i);
	return 0;
}

/* ---- threads ------------------------------------------------------------------------------ */

#define TH_TT_N 4
#define TH_TT_SLOT 4096u

/* One thread's QP and CQs; written by the main thread before the thread starts, read by
 * it, and its verdict (c) read back by the main thread after the join. */
struct tt {
	struct dev_qp *q;
	struct dev_cq *scq, *rcq;
	struct th_ends pe;
	uint32_t k, dir, rounds, seed;
	struct th_chk c;
};

/* thread k's incoming WRITEs land in slot r % 2 of its part of the remote-writable buffer */
static uint64_t tt_off(uint32_t k, uint32_t slot)
{
	return (uint64_t)(k * 2 + slot) * TH_TT_SLOT;
}

static uint32_t tt_seed(const struct tt *t, uint32_t r, uint32_t dir)
{
	return t->seed ^ (t->k << 24) ^ (r << 1) ^ dir;
}

/* Lockstep: round r's SEND is posted before the other end's round r is awaited, and round
 * r + 2's WRITE into a slot follows the other end's round r + 1, which it sends only once
 * it has checked round r in that slot. Two receive WRs are thus always enough. */
static void *tt_run(void *p)
{
	struct tt *t = p;
	for (uint32_t r = 0; r < t->rounds && !t->c.fails; r++) {
		uint32_t slot = r & 1;
		fill(me.lbuf + tt_off(t->k, slot), 0, TH_TT_SLOT, tt_seed(t, r, t->dir));
		struct dev_sge sg = lsge(&me, tt_off(t->k, slot), TH_TT_SLOT);
		uint32_t m[2] = { t->k, r };
		struct dev_sge ss = { .addr = (uint64_t)(uintptr_t)m, .length = sizeof m };
		if (post_send(t->q, DEV_WR_RDMA_WRITE, 0, &sg, 1, t->pe.addr + tt_off(t->k, slot),
			      t->pe.rkey, 0, 0) ||
		    post_send(t->q, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &ss, 1, 0, 0,
			      0, r)) {
			chk_fail(&t->c, "thread %u round %u: post failed", t->k, r);
			break;
		}
		struct dev_wc wc;
		if (wait_one(t->rcq, &wc, &t->c, "receive"))
			break;
		uint64_t rb = TH_RECV + 64 * ((uint64_t)t->k * 2 + wc.wr_id);
		uint32_t got[2];
		memcpy(got, me.lbuf + rb, sizeof got);
		if (wc.qp_num != t->q->qp_num || wc.byte_len != sizeof got || got[0] != t->k ||
		    got[1] != r)
			chk_fail(&t->c, "thread %u round %u: got thread %u round %u (%u bytes)", t->k,
				 r, got[0], got[1], wc.byte_len);
		uint32_t bad = count_bad(me.rbuf + tt_off(t->k, slot), 0, TH_TT_SLOT,
					 tt_seed(t, r, !t->dir));
		if (bad)
			chk_fail(&t->c, "thread %u round %u: %u bytes wrong", t->k, r, bad);
		post_recv(&me, t->q, rb, 64, wc.wr_id);
		if (wait_one(t->scq, &wc, &t->c, "send"))
			break;
		if (wc.wr_id != r)
			chk_fail(&t->c, "thread %u: send %llu completed in round %u", t->k,
				 (unsigned long long)wc.wr_id, r);
	}
	return NULL;
}

static int threads_body(bool far, uint32_t seed, struct th_chk *c)
{
	/* emulated rxe (tests/vm, TCG) takes ~50 ms a round trip; the software providers
	 * run the threads long enough to overlap */
	const uint32_t rounds = rc_hw() ? 30 : 400;
	struct tt t[TH_TT_N];
	uint32_t mine[TH_TT_N], theirs[TH_TT_N];
	memset(t, 0, sizeof t);
	memset(me.rbuf, 0, tt_off(TH_TT_N, 0));
	for (uint32_t k = 0; k < TH_TT_N; k++) {
		t[k].k = k;
		t[k].dir = far;
		t[k].rounds = rounds;
		t[k].seed = seed;
		if (dev_create_cq(me.dev, 32, NULL, &t[k].scq) ||
		    dev_create_cq(me.dev, 32, NULL, &t[k].rcq))
			return -1;
		struct dev_qp_init_attr ia = { .send_cq = t[k].scq, .recv_cq = t[k].rcq,
					       .cap = { .max_send_wr = 8, .max_recv_wr = 4,
							.max_send_sge = 1, .max_recv_sge = 1,
							.max_inline_data = 64 } };
		if (dev_create_qp(me.pd, &ia, &t[k].q))
			return -1;
		qp_init(t[k].q);
		for (uint64_t id = 0; id < 2; id++)
			post_recv(&me, t[k].q, TH_RECV + 64 * (k * 2 + id), 64, id);
		mine[k] = t[k].q->qp_num;
	}
	struct th_ends me_e = my_ends(NULL), pe;
	if (swap_ctl(far, &me_e, &pe, sizeof pe) || swap_ctl(far, mine, theirs, sizeof mine))
		return -1;
	for (int k = 0; k < TH_TT_N; k++) {
		t[k].pe = pe;
		qp_rtr(t[k].q, &pe.gid, theirs[k]);
		qp_rts(t[k].q, 7);
	}
	if (barrier(far))
		return -1;
	pthread_t th[TH_TT_N];
	for (int k = 0; k < TH_TT_N; k++)
		if (pthread_create(&th[k], NULL, tt_run, &t[k]))
			return -1;
	for (int k = 0; k < TH_TT_N; k++) {
		pthread_join(th[k], NULL);
		if (t[k].c.fails)
			chk_fail(c, "%s", t[k].c.msg);
	}
	if (barrier(far))
		return -1;
	for (int k = 0; k < TH_TT_N; k++) {
		struct dev_wc wc;
		if (dev_destroy_qp(t[k].q))
			chk_fail(c, "dev_destroy_qp failed");
		while (dev_poll_cq(t[k].rcq, 1, &wc) == 1 || dev_poll_cq(t[k].scq, 1, &wc) == 1)
			;
		if (dev_destroy_cq(t[k].scq) || dev_destroy_cq(t[k].rcq))
			chk_fail(c, "dev_destroy_cq failed");
	}
	return 0;
}

/* ---- the completion channel in epoll ------------------------------------------------------ */

/* message tag's bytes, 44 of them */
static void ep_msg(uint8_t *m, uint32_t seed, uint32_t tag)
{
	fill(m, 0, 44, seed ^ tag);
}

static int ep_send(struct dev_qp *q, uint32_t seed, uint32_t tag, unsigned flags, struct th_chk *c)
{
	uint8_t m[44];
	ep_msg(m, seed, tag);
	struct dev_sge ss = { .addr = (uint64_t)(uintptr_t)m, .length = sizeof m };
	struct dev_wc wc;
	if (post_send(q, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED | flags, &ss, 1, 0, 0, 0,
		      tag)) {
		chk_fail(c, "SEND %u: post failed", tag);
		return 0;
	}
	/* its completion: the receiver has it (RC's acknowledgement) */
	if (wait_one(me.scq, &wc, c, "SEND") == 0 && wc.wr_id != tag)
		chk_fail(c, "SEND %u: completion of %llu", tag, (unsigned long long)wc.wr_id);
	return 0;
}

/* One completion on rcq, message tag's, reposted. */
static void ep_take(struct dev_qp *q, struct dev_cq *rcq, uint32_t seed, uint32_t tag,
		    struct th_chk *c)
{
	struct dev_wc wc;
	if (wait_one(rcq, &wc, c, "receive"))
		return;
	uint8_t want[44];
	ep_msg(want, seed, tag);
	if (wc.byte_len != 44 || memcmp(me.lbuf + TH_RECV + 64 * wc.wr_id, want, 44))
		chk_fail(c, "message %u: not its bytes (%u bytes)", tag, wc.byte_len);
	post_recv(&me, q, TH_RECV + 64 * wc.wr_id, 64, wc.wr_id);
}

static void ep_events(struct dev_cq *rcq, int ep, int timeout_ms, int want, struct th_chk *c,
		      const char *what)
{
	struct epoll_event ev;
	int n = epoll_wait(ep, &ev, 1, timeout_ms);
	if (n != want) {
		chk_fail(c, "%s: epoll_wait %d, expected %d", what, n, want);
		return;
	}
	if (want && (dev_get_cq_event(rcq) != 0 || dev_get_cq_event(rcq) != -SMCR_E_AGAIN))
		chk_fail(c, "%s: not exactly one CQ event", what);
}

/* The waiter's half of a round (the other end: the sender's); the ends' control bytes
 * order the steps. */
static int ep_round(bool waiter, struct dev_qp *q, struct dev_cq *rcq, int ep,
		    uint32_t seed, struct th_chk *c)
{
	uint8_t b = 1;
	struct dev_wc wc;
	if (waiter) {
		while (dev_get_cq_event(rcq) == 0)
			;	/* earlier arms' events */
		if (dev_req_notify_cq(rcq, 1) || dev_poll_cq(rcq, 1, &wc) != 0)
			chk_fail(c, "solicited-only arm");
		if (PUT(b) || GET(b))	/* armed; the unsolicited A is acknowledged */
			return -1;
		ep_events(rcq, ep, 100, 0, c, "unsolicited SEND, solicited-only arm");
		if (PUT(b))
			return -1;
		/* blocked until the solicited B */
		ep_events(rcq, ep, TH_WAIT_MS, 1, c, "solicited SEND");
		ep_take(q, rcq, seed, 'A', c);
		ep_take(q, rcq, seed, 'B', c);
		if (dev_req_notify_cq(rcq, 0) || dev_poll_cq(rcq, 1, &wc) != 0)
			chk_fail(c, "arm");
		if (PUT(b))
			return -1;
		ep_events(rcq, ep, TH_WAIT_MS, 1, c, "unsolicited SEND, any-completion arm");
		ep_take(q, rcq, seed, 'C', c);
		return PUT(b);
	}
	if (GET(b))
		return -1;
	ep_send(q, seed, 'A', 0, c);
	if (PUT(b) || GET(b))
		return -1;
	ep_send(q, seed, 'B', DEV_SEND_SOLICITED, c);
	if (GET(b))
		return -1;
	ep_send(q, seed, 'C', 0, c);
	return GET(b);
}

static int cq_epoll_body(bool far, uint32_t seed, struct th_chk *c)
{
	struct dev_cq *rcq;
	struct dev_qp *q;
	if (dev_create_cq(me.dev, 16, NULL, &rcq))
		return -1;
	struct dev_qp_init_attr ia = { .send_cq = me.scq, .recv_cq = rcq,
				       .cap = { .max_send_wr = 8, .max_recv_wr = 8,
						.max_send_sge = 1, .max_recv_sge = 1,
						.max_inline_data = 64 } };
	if (dev_create_qp(me.pd, &ia, &q))
		return -1;
	qp_init(q);
	for (uint64_t i = 0; i < 4; i++)
		post_recv(&me, q, TH_RECV + 64 * i, 64, i);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, rcq->comp_fd, &ev))
		return -1;
	struct th_ends me_e = my_ends(q), pe;
	if (swap_ctl(far, &me_e, &pe, sizeof pe))
		return -1;
	qp_rtr(q, &pe.gid, pe.qpn);
	qp_rts(q, 7);
	if (barrier(far))
		return -1;
	/* the far end waits first, then the near end */
	for (int w = 0; w < 2; w++)
		if (ep_round((w == 0) == far, q, rcq, ep, seed + (uint32_t)w, c))
			return -1;
	if (barrier(far))
		return -1;
	close(ep);
	struct dev_wc wc;
	if (dev_destroy_qp(q))
		chk_fail(c, "dev_destroy_qp failed");
	while (dev_poll_cq(rcq, 1, &wc) == 1)
		;
	if (dev_destroy_cq(rcq))
		chk_fail(c, "dev_destroy_cq failed");
	return 0;
}

/* ---- port events ---------------------------------------------------------------------- */

#define TH_PORT_HOLD_MS 3000

/* Whether this end can take its port down: the provider's test hook, else (a real port)
 * commands given by whoever runs the suite. */
static bool port_can(void)
{
	const char *d = getenv("SMCR_CONF_PORT_DOWN"), *u = getenv("SMCR_CONF_PORT_UP");
	return !rc_hw() || (d && *d && u && *u);
}

static int port_set(int up)
{
	int rc = dev_set_port_state(me.dev, 1, up);
	if (rc != -SMCR_E_NOTSUP)
		return rc;
	const char *cmd = getenv(up ? "SMCR_CONF_PORT_UP" : "SMCR_CONF_PORT_DOWN");
	return cmd && system(cmd) == 0 ? 0 : -1;
}

/* Waits for an async event of type t; notes a QP_FATAL of qpn on the way. */
static bool port_event(enum dev_event_type t, uint32_t qpn, uint32_t *fatal)
{
	uint64_t end = smcr_now_ns() + (uint64_t)TH_WAIT_MS * SMCR_NS_PER_MS;
	do {
		struct dev_async_event ev;
		while (dev_get_async_event(me.dev, &ev) == 0) {
			if (ev.type == DEV_EVENT_QP_FATAL && ev.qp_num == qpn)
				*fatal = 1;
			if (ev.type == t)
				return true;
		}
		usleep(1000);
	} while (smcr_now_ns() < end);
	return false;
}

static uint32_t port_state(void)
{
	struct dev_port_attr pa;
	return dev_query_port(me.dev, 1, &pa) ? 0 : pa.state;
}

static const char *port_str(uint32_t st)
{
	return st == DEV_PORT_ACTIVE ? "ACTIVE" : st == DEV_PORT_DOWN ? "DOWN" : "other";
}

static uint32_t qp_state(struct dev_qp *q)
{
	struct dev_qp_attr a;
	return dev_query_qp(q, &a) ? 99 : a.qp_state;
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
	struct conf_peer_ends pe, ne;
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

/* port_events' far half: the port goes down under a connected QP that the near end sends
 * to, stays down TH_PORT_HOLD_MS, comes back. */
static int far_port(struct th_res *r)
{
	struct th_ends peer;
	struct dev_qp *q = th_connect(true, 4, 7, &peer);
	if (!q)
		return -1;
	uint8_t can = port_can(), b;
	if (PUT(can))
		return -1;
	if (!can) {
		snprintf(r->msg, sizeof r->msg, "no way to take a %s port down (SMCR_CONF_PORT_DOWN)",
			 prov->name);
	} else {
		if (GET(b))
			return -1;
		uint64_t t0 = smcr_now_ns();
		if (port_set(0)) {
			r->status = 1;
			snprintf(r->msg, sizeof r->msg, "port down failed");
		}
		r->x[PX_EV_ERR] = port_event(DEV_EVENT_PORT_ERR, q->qp_num, &r->x[PX_FATAL]);
		r->x[PX_PORT_DOWN] = port_state();
		r->x[PX_QP_DOWN] = qp_state(q);
		/* what the receive WR holds when PORT_ERR is seen: a SEND that came before the
		 * port went down (the near end posts it 1 s after our word, to fall in the time
		 * down), or the flush of a provider that takes the QP down with its port */
		struct dev_wc wc;
		bool early = dev_poll_cq(me.rcq, 1, &wc) == 1;
		r->x[PX_RECV_EARLY] = early;
		uint64_t up = t0 + (uint64_t)TH_PORT_HOLD_MS * SMCR_NS_PER_MS, now;
		while ((now = smcr_now_ns()) < up)
			usleep((useconds_t)((up - now) / 1000));
		if (port_set(1)) {
			r->status = 1;
			snprintf(r->msg, sizeof r->msg, "port up failed");
		}
		r->x[PX_EV_ACTIVE] = port_event(DEV_EVENT_PORT_ACTIVE, q->qp_num, &r->x[PX_FATAL]);
		r->x[PX_PORT_UP] = port_state();
		/* the near end's SEND: arrived once the port was back, or flushed */
		if (early || th_wait_wc(me.rcq, &wc) == 1) {
			note_wc(r, &wc);
			uint8_t want[44];
			fill(want, 0, 44, 0x9047);
			r->bad_bytes = wc.status == DEV_WC_SUCCESS && memcmp(me.lbuf + 64 * (wc.wr_id - 100),
									  want, 44);
		}
		r->x[PX_QP_END] = qp_state(q);
	}
	/* reported before the QP goes: the near end may still be sending to it */
	if (PUT(*r) || GET(b))
		return -1;
	if (dev_destroy_qp(q)) {
		fprintf(stderr, "conformance --serve: port_events: dev_destroy_qp failed\n");
		return -1;
	}
	struct dev_wc wc;
	while (dev_poll_cq(me.rcq, 1, &wc) == 1 || dev_poll_cq(me.scq, 1, &wc) == 1)
		;
	return 0;
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
	case TH_MANY_QPS:
	case TH_THREADS:
	case TH_CQ_EPOLL: {
		struct th_chk ck = { 0, "" };
		int rc = c->test == TH_MANY_QPS ? many_qps_body(true, c->seed, &ck) :
			 c->test == TH_THREADS	? threads_body(true, c->seed, &ck) :
						  cq_epoll_body(true, c->seed, &ck);
		if (rc)
			return -1;
		r->bad_bytes = (uint32_t)ck.fails;
		memcpy(r->msg, ck.msg, sizeof r->msg);
		break;
	}
	case TH_PORT:
		return far_port(r);
	case TH_NO_LEAK:
		r->x[LX_FDS_OPEN] = (uint32_t)count_fds();
		r->x[LX_MAPS_OPEN] = (uint32_t)count_memfd_maps();
		side_close(&me);
		r->x[LX_FDS0] = (uint32_t)fds0;
		r->x[LX_FDS1] = (uint32_t)count_fds();
		r->x[LX_MAPS0] = (uint32_t)maps0;
		r->x[LX_MAPS1] = (uint32_t)count_memfd_maps();
		return PUT(*r);
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

/* One device open and close first, so what a provider sets up once per process (a loaded
 * library, a device thread) is in the baseline; what the tests leave behind is not. */
static void leak_baseline(void)
{
	struct dev_device *d;
	if (dev_open(prov->spec ? prov->spec : prov->name, &d) == 0)
		dev_close(d);
	fds0 = count_fds();
	maps0 = count_memfd_maps();
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
	/* PORT 0: the kernel picks a free one; the line says which (twohost-local.sh reads it) */
	socklen_t al = sizeof a;
	if (getsockname(l, (struct sockaddr *)&a, &al) == 0)
		port = ntohs(a.sin_port);
	printf("conformance %s: far end listening on %d\n", prov->name, port);
	fflush(stdout);
	ctl = accept(l, NULL, NULL);
	close(l);
	if (ctl < 0)
		return 2;
	setsockopt(ctl, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	leak_baseline();
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
	if (me.dev)	/* no_leak closed it */
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
	struct conf_peer_ends pe, mine = { .gid = me.gid, .qpn = q->qp_num, .rkey = me.rmr->rkey,
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
	peer_gone_check(&me, q, 64, smcr_now_ns(), TH_WAIT_MS);
	assert_int_equal(dev_destroy_qp(q), 0);
}

/* The symmetric tests: this end runs the body as the far end does, then both verdicts. */
static void t2_symmetric(uint32_t test, uint32_t seed,
			 int (*body)(bool far, uint32_t seed, struct th_chk *c))
{
	cmd(test, 0, seed, 0);
	struct th_chk ck = { 0, "" };
	assert_int_equal(body(false, seed, &ck), 0);
	struct th_res r;
	result(&r);
	if (ck.fails)
		fail_msg("near end: %d failures, first: %s", ck.fails, ck.msg);
	if (r.bad_bytes)
		fail_msg("far end: %u failures, first: %s", r.bad_bytes, r.msg);
	struct dev_wc wc;
	while (dev_poll_cq(me.rcq, 1, &wc) == 1 || dev_poll_cq(me.scq, 1, &wc) == 1)
		;
}

static void t2_many_qps(void **state)
{
	(void)state;
	t2_symmetric(TH_MANY_QPS, 0x3141592, many_qps_body);
}

static void t2_threads(void **state)
{
	(void)state;
	t2_symmetric(TH_THREADS, 0x2718281, threads_body);
}

static void t2_cq_epoll(void **state)
{
	(void)state;
	t2_symmetric(TH_CQ_EPOLL, 0x1414213, cq_epoll_body);
}

static void t2_port_events(void **state)
{
	(void)state;
	cmd(TH_PORT, 0, 0, 0);
	struct th_ends far;
	struct dev_qp *q = th_connect(false, 0, 7, &far);
	assert_non_null(q);
	uint8_t can, b = 1;
	assert_int_equal(GET(can), 0);
	struct th_res r;
	if (!can) {
		result(&r);
		print_message("[  SKIP    ] port events: %s\n", r.msg);
		assert_int_equal(PUT(b), 0);
		assert_int_equal(dev_destroy_qp(q), 0);
		return;
	}
	assert_int_equal(PUT(b), 0);
	/* into the far port's time down (TH_PORT_HOLD_MS), not asserted: the far end says
	 * whether the SEND was there before its port went down */
	usleep(1000000);
	uint8_t m[44];
	fill(m, 0, 44, 0x9047);
	struct dev_sge ss = { .addr = (uint64_t)(uintptr_t)m, .length = sizeof m };
	uint64_t t0 = smcr_now_ns();
	assert_int_equal(post_send(q, DEV_WR_SEND, DEV_SEND_INLINE | DEV_SEND_SIGNALED, &ss, 1, 0, 0,
				   0, 50), 0);
	result(&r);
	struct dev_wc wc;
	int n = th_wait_wc(me.scq, &wc);
	uint64_t ms = (smcr_now_ns() - t0) / SMCR_NS_PER_MS;
	uint32_t fatal = 0;
	struct dev_async_event ev;
	while (dev_get_async_event(me.dev, &ev) == 0)
		fatal |= ev.type == DEV_EVENT_QP_FATAL && ev.qp_num == q->qp_num;
	print_message("[   INFO   ] far port down: PORT_ERR %s, port %s, far QP %s%s\n",
		      r.x[PX_EV_ERR] ? "seen" : "not seen",
		      port_str(r.x[PX_PORT_DOWN]),
		      dev_qp_state_str((enum dev_qp_state)r.x[PX_QP_DOWN]),
		      r.x[PX_FATAL] ? ", far QP_FATAL" : "");
	print_message("[   INFO   ] far port up: PORT_ACTIVE %s, port %s; far QP at the end %s, "
		      "its receive WR: %s%s\n",
		      r.x[PX_EV_ACTIVE] ? "seen" : "not seen",
		      port_str(r.x[PX_PORT_UP]),
		      dev_qp_state_str((enum dev_qp_state)r.x[PX_QP_END]),
		      r.nwc ? dev_wc_status_str(r.wc_status[0]) : "no completion",
		      r.x[PX_RECV_EARLY] ? " (there at PORT_ERR already)" : "");
	print_message("[   INFO   ] near SEND during the flap: %s, seen %llu ms after its post "
		      "(once the far end had reported); near QP %s%s\n",
		      n == 1 ? dev_wc_status_str(wc.status) : "no completion",
		      (unsigned long long)ms, dev_qp_state_str((enum dev_qp_state)qp_state(q)),
		      fatal ? ", QP_FATAL" : "");
	assert_true(r.x[PX_EV_ERR]);
	assert_int_equal(r.x[PX_PORT_DOWN], DEV_PORT_DOWN);
	assert_true(r.x[PX_EV_ACTIVE]);
	assert_int_equal(r.x[PX_PORT_UP], DEV_PORT_ACTIVE);
	if (n == 1) {
		assert_int_equal(wc.wr_id, 50);
		/* a SEND that succeeded arrived, whole */
		if (wc.status == DEV_WC_SUCCESS) {
			assert_int_equal(r.nwc, 1);
			assert_int_equal(r.wc_status[0], DEV_WC_SUCCESS);
			assert_int_equal(r.byte_len, 44);
			assert_int_equal(r.bad_bytes, 0);
		}
	}
	if (!rc_hw()) {
		/* a software provider's port down takes its QPs and their peers down (rule 5):
		 * the SEND was in progress then (retry exceeded) or found the QP in ERR */
		assert_int_equal(n, 1);
		if (wc.status != DEV_WC_RETRY_EXC_ERR && wc.status != DEV_WC_WR_FLUSH_ERR)
			fail_msg("SEND to a port that went down: %s", dev_wc_status_str(wc.status));
		assert_true(fatal);
		assert_int_equal(qp_state(q), DEV_QPS_ERR);
	} else if (n == 0) {
		/* still outstanding: taken down as the engine would, it flushes */
		struct dev_qp_attr e = { .qp_state = DEV_QPS_ERR };
		assert_int_equal(dev_modify_qp(q, &e, DEV_QP_STATE), 0);
		expect_wc(me.scq, 50, DEV_WC_WR_FLUSH_ERR, DEV_WC_SEND);
	}
	assert_int_equal(PUT(b), 0);
	assert_int_equal(dev_destroy_qp(q), 0);
	while (dev_poll_cq(me.rcq, 1, &wc) == 1 || dev_poll_cq(me.scq, 1, &wc) == 1)
		;
}

/* Last: everything closed at both ends, as many fds and memfd mappings as before the first
 * device open. */
static void t2_no_leak(void **state)
{
	(void)state;
	cmd(TH_NO_LEAK, 0, 0, 0);
	/* the counts see the open device and its buffers */
	assert_true(count_fds() > fds0);
	assert_true(count_memfd_maps() > maps0);
	side_close(&me);
	int fds = count_fds(), maps = count_memfd_maps();
	struct th_res r;
	result(&r);
	print_message("[   INFO   ] fds before/after: here %d/%d, far end %u/%u; memfd mappings: "
		      "here %d/%d, far end %u/%u\n",
		      fds0, fds, r.x[LX_FDS0], r.x[LX_FDS1], maps0, maps, r.x[LX_MAPS0],
		      r.x[LX_MAPS1]);
	assert_true(r.x[LX_FDS_OPEN] > r.x[LX_FDS0]);
	assert_true(r.x[LX_MAPS_OPEN] > r.x[LX_MAPS0]);
	assert_int_equal(fds, fds0);
	assert_int_equal(maps, maps0);
	assert_int_equal(r.x[LX_FDS1], r.x[LX_FDS0]);
	assert_int_equal(r.x[LX_MAPS1], r.x[LX_MAPS0]);
}

static int near_setup(void **state)
{
	(void)state;
	return side_open(&me, 256) ? -1 : 0;
}

static int near_teardown(void **state)
{
	(void)state;
	if (me.dev)	/* no_leak closed it */
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
	leak_baseline();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t2_query),
		cmocka_unit_test(t2_write_send),
		cmocka_unit_test(t2_write_send_rev),
		cmocka_unit_test(t2_sge_pairs),
		cmocka_unit_test(t2_write_imm),
		cmocka_unit_test(t2_bad_rkey),
		cmocka_unit_test(t2_out_of_bounds),
		cmocka_unit_test(t2_rnr),
		cmocka_unit_test(t2_many_qps),
		cmocka_unit_test(t2_threads),
		cmocka_unit_test(t2_cq_epoll),
		cmocka_unit_test(t2_peer_killed),
		cmocka_unit_test(t2_port_events),
		cmocka_unit_test(t2_no_leak),
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
