/* test_core_addlink_v2.c: the second link of an SMC-R v2 link group (docs/parts/wire-v2.md
 * 7.3 and 9, docs/PROTOCOL.md "Linux's second link at first contact"). Two engines in one
 * process on "loop:gid=v2" devices with a user EID, fake clock, every posted message logged
 * whole (tests/lib/twolink.h), each exchange asserted byte for byte:
 *   symmetric    two devices each: max links 2 negotiated; the server's ADD LINK v2 request
 *                (88 bytes: the new QP and, in its extension, the new link's GID and its RMB's
 *                rkeys), the client's accepting response (88 bytes, its RMB), no
 *                continuation, CONFIRM LINK v2 on the new link; the second connection on the
 *                second link; data on both
 *   failover     then the second link fails: its connection moves to the first with every
 *                byte, DELETE LINK v2 on the survivor
 *   one_dev_each one device each: max links 1, no ADD LINK at all (as before) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "lib/twolink.h"
#include "core/addlink_check.h"
#include "util/err.h"
#include "wire/llc.h"
#include "wire/llc_v2.h"

#define UEID "SMCR-V2-LINKS"

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const uint8_t *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

/* The long message of log entry i, decoded; its bytes and length through b and n. */
static struct llc2_msg *big_at(struct tl_log *lg, int i, const uint8_t **b, size_t *n)
{
	static struct llc2_msg m;
	assert_true(i >= 0);
	assert_true(lg->ev[i].big >= 0);
	*b = lg->big[lg->ev[i].big];
	*n = lg->ev[i].len;
	assert_int_equal(llc2_decode(*b, *n, &m), 0);
	/* the codec gives back the same bytes */
	static uint8_t again[LLC2_MAX_LEN];
	size_t k = 0;
	assert_int_equal(llc2_encode(&m, again, sizeof(again), &k), 0);
	assert_int_equal(k, *n);
	assert_memory_equal(again, *b, k);
	return &m;
}

/* An ADD LINK v2 of one RMB, as Linux lays it out (wire-v2.md 7.3): the v1 fields of the
 * new link's end (x), then the extension with the new link's GID and the RMB r's rkey on
 * the old link (via), its rkey and address on the new one (nl). */
static void assert_add_link_v2(const uint8_t *b, size_t n, bool resp, struct core_link *via,
			       struct core_link *nl, struct core_rmb *r)
{
	assert_int_equal(n, 88);
	assert_int_equal(b[0], 0x22);
	assert_int_equal(b[1], 88);	/* length, little-endian as Linux on x86 writes it */
	assert_int_equal(b[2], 0);
	assert_int_equal(b[3], resp ? 0x80 : 0x00);
	assert_memory_equal(b + 4, link_gid(nl)->mac, 6);
	assert_memory_equal(b + 12, link_gid(nl)->gid.raw, 16);
	assert_int_equal(be32(b + 28) >> 8, nl->qp->qp_num);	/* 3 bytes at 28 */
	assert_int_equal(b[31], nl->link_num);
	assert_int_equal(b[32] & 0x0F, nl->cdev->port.active_mtu);
	assert_int_equal(be32(b + 32) & 0xFFFFFF, nl->psn);	/* 3 bytes at 33 */
	assert_int_equal(b[44], 0x80);				/* v2 direct */
	assert_int_equal(b[45], 0);
	assert_memory_equal(b + 46, link_gid(nl)->gid.raw, 16);	/* the new link's GID */
	for (int k = 62; k < 70; k++)
		assert_int_equal(b[k], 0);
	assert_int_equal(b[70] | b[71] << 8, 1);		/* one RMB, CPU order */
	assert_int_equal(be32(b + 72), lgr_rmb_mr(r, via)->rkey);
	assert_int_equal(be32(b + 76), lgr_rmb_mr(r, nl)->rkey);
	assert_int_equal(be64(b + 80), (uint64_t)(uintptr_t)lgr_rmb_mr(r, nl)->addr);
}

static int setup22(void **state)
{
	struct tl_fix *f = calloc(1, sizeof(*f));
	if (!f || tl_setup_v2(f, 2, 2, UEID))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct tl_fix *f = *state;
	tl_teardown(f);
	free(f);
	return 0;
}

/* The first contact and its ADD LINK v2 flow, asserted; then the second connection. */
static void two_links(struct tl_fix *f)
{
	assert_true(tl_connect(f, 0));
	struct core_lgr *slg = tl_lg(f->se), *clg = tl_lg(f->ce);
	assert_true(slg->v2);
	assert_true(clg->v2);
	assert_int_equal(slg->max_links, 2);
	assert_int_equal(clg->max_links, 2);
	assert_int_equal(tl_links(f->se), 2);
	assert_int_equal(tl_links(f->ce), 2);
	struct core_link *s0 = lk(f->se, 0), *s1 = lk(f->se, 1);
	struct core_link *c0 = lk(f->ce, 0), *c1 = lk(f->ce, 1);
	assert_ptr_not_equal(s0->cdev, s1->cdev);
	assert_ptr_not_equal(c0->cdev, c1->cdev);
	unsigned s = 0, c = 0;
	const uint8_t *b;
	size_t n;
	/* server: the request on link 1 */
	int i = tl_next(f->ls, &s, LLC2_ADD_LINK, 0);
	assert_ptr_equal(f->ls->ev[i].link, s0);
	struct llc2_msg *m = big_at(f->ls, i, &b, &n);
	assert_true(m->has_ext);
	assert_add_link_v2(b, n, false, s0, s1, slg->rmbs);
	/* client: the accepting response on link 1, with its RMB */
	i = tl_next(f->lc, &c, LLC2_ADD_LINK, 1);
	assert_ptr_equal(f->lc->ev[i].link, c0);
	m = big_at(f->lc, i, &b, &n);
	assert_false(m->base.add_link.rejected);
	assert_add_link_v2(b, n, true, c0, c1, clg->rmbs);
	/* no continuation in v2, either version */
	for (unsigned k = 0; k < 2; k++) {
		struct tl_log *lg = k ? f->lc : f->ls;
		unsigned z = 0;
		assert_int_equal(tl_next(lg, &z, 0x23, -1), -1);
		z = 0;
		assert_int_equal(tl_next(lg, &z, LLC_ADD_LINK_CONT, -1), -1);
	}
	/* CONFIRM LINK v2 on the new link, both ways, 44 bytes */
	i = tl_next(f->ls, &s, LLC2_CONFIRM_LINK, 0);
	assert_ptr_equal(f->ls->ev[i].link, s1);
	assert_int_equal(f->ls->ev[i].len, 44);
	struct llc2_msg cl;
	assert_int_equal(llc2_decode(f->ls->ev[i].msg, 44, &cl), 0);
	assert_int_equal(cl.base.confirm_link.link_num, 2);
	assert_int_equal(cl.base.confirm_link.qpn, s1->qp->qp_num);
	assert_int_equal(cl.base.confirm_link.max_links, 2);
	i = tl_next(f->lc, &c, LLC2_CONFIRM_LINK, 1);
	assert_ptr_equal(f->lc->ev[i].link, c1);
	/* both links up, and each side knows the other's RMB on both, from the extension */
	assert_links_joined(slg, clg, s0, s1, c0, c1);
	/* the second connection goes on the second link (the server alternates) */
	assert_true(tl_connect(f, 1));
	assert_ptr_equal(f->pp[1].srv->link, s1);
	assert_ptr_equal(f->pp[1].cli->link, c1);
}

static void test_symmetric(void **state)
{
	struct tl_fix *f = *state;
	two_links(f);
	unsigned from = f->lc->n;
	assert_int_equal(tl_move(f, f->pp[0].cli, f->pp[0].srv, 0, 300000, 1), 300000);
	assert_int_equal(tl_move(f, f->pp[1].cli, f->pp[1].srv, 0, 300000, 2), 300000);
	assert_int_equal(tl_move(f, f->pp[1].srv, f->pp[1].cli, 0, 100000, 3), 100000);
	unsigned w0 = 0, w1 = 0;
	for (unsigned i = from; i < f->lc->n; i++) {
		const struct tl_ev *x = &f->lc->ev[i];
		if (x->kind != CORE_TRACE_WRITE)
			continue;
		if (x->link == lk(f->ce, 0))
			w0 += x->len;
		else if (x->link == lk(f->ce, 1))
			w1 += x->len;
	}
	assert_int_equal(w0, 300000);
	assert_int_equal(w1, 300000);
}

static long snd(struct core_conn *c, const void *b, size_t n)
{
	struct iovec v = { (void *)(uintptr_t)b, n };
	return core_conn_send(c, &v, 1, 0);
}

static long rcv(struct core_conn *c, void *b, size_t n)
{
	struct iovec v = { b, n };
	return core_conn_recv(c, &v, 1, 0);
}

static void test_failover(void **state)
{
	struct tl_fix *f = *state;
	two_links(f);
	struct core_conn *c = f->pp[1].cli, *s = f->pp[1].srv;
	struct core_link *c1 = lk(f->ce, 0), *c2 = lk(f->ce, 1);
	static uint8_t buf[30000], got[30000];
	cp_stream_fill(buf, 0, sizeof(buf), 41);
	assert_int_equal(snd(c, buf, 10000), 10000);
	tl_at(f, f->now + 1);
	/* the second link is cut under 20000 more bytes */
	struct loopdev_path p = { .cut = true };
	loopdev_link_set(c2->qp, &p);
	assert_int_equal(snd(c, buf + 10000, 20000), 20000);
	unsigned cf = f->lc->n;
	uint64_t t = f->now + 1;
	tl_at(f, t + LOOPDEV_TIMEOUT_NS);
	assert_int_equal(tl_links(f->ce), 1);
	assert_ptr_equal(c->link, c1);
	/* the client's DELETE LINK v2 for link 2 on link 1 */
	int i = tl_next(f->lc, &cf, LLC2_DELETE_LINK, 0);
	assert_true(i >= 0);
	assert_ptr_equal(f->lc->ev[i].link, c1);
	assert_int_equal(f->lc->ev[i].msg[1], 44);
	size_t have = 0;
	for (unsigned idle = 0; have < sizeof(got) && idle < 100; idle++) {
		long k = rcv(s, got + have, sizeof(got) - have);
		if (k > 0) {
			have += (size_t)k;
			idle = 0;
		}
		f->now += TL_MS;
		tl_at(f, f->now);
	}
	assert_int_equal(have, sizeof(got));
	assert_memory_equal(got, buf, sizeof(got));
	assert_int_equal(tl_links(f->se), 1);
	/* and the connection goes on, both ways */
	assert_int_equal(tl_move(f, s, c, 0, 50000, 7), 50000);
}

static void test_one_dev_each(void **state)
{
	struct tl_fix *f = calloc(1, sizeof(*f));
	*state = f;
	assert_int_equal(tl_setup_v2(f, 1, 1, UEID), 0);
	assert_true(tl_connect(f, 0));
	assert_true(tl_lg(f->se)->v2);
	assert_int_equal(tl_lg(f->se)->max_links, 1);
	assert_int_equal(tl_lg(f->ce)->max_links, 1);
	unsigned s = 0;
	assert_int_equal(tl_next(f->ls, &s, LLC2_ADD_LINK, -1), -1);
	assert_int_equal(tl_links(f->se), 1);
	assert_int_equal(tl_move(f, f->pp[0].cli, f->pp[0].srv, 0, 100000, 6), 100000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_symmetric, setup22, teardown),
		cmocka_unit_test_setup_teardown(test_failover, setup22, teardown),
		cmocka_unit_test_teardown(test_one_dev_each, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
