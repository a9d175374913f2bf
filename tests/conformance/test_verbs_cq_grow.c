/* test_verbs_cq_grow.c: a verbs CQ never overflows (docs/parts/verbs.md "Mapping", CQ size):
 * CQs created with 8 entries serve QPs of 64 + 64 work requests; every one of the 128
 * completions of a loopback pair is queued before anything is polled, and all arrive with
 * success (an overflow would be a CQ error and the QPs in ERR). The verbs provider grows the
 * CQs (ibv_resize_cq) as the QPs are created. Needs an ACTIVE RDMA port (tests/vm runs it
 * on rxe); exit 77 (skipped) without one. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "conf_lib.h"
#include "dev/verbs/verbs.h"

enum { DEPTH = 64 };

static int drain(struct dev_cq *cq, uint64_t *ok)
{
	struct dev_wc wc[16];
	int n, total = 0;
	while ((n = dev_poll_cq(cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++)
			*ok += wc[i].status == DEV_WC_SUCCESS;
		total += n;
	}
	assert_true(n == 0);
	return total;
}

static void t_cq_grows(void **state)
{
	(void)state;
	struct side a, b;
	assert_int_equal(side_open(&a, 8), 0);
	assert_int_equal(side_open(&b, 8), 0);
	struct dev_qp *qa = qp_new(&a, DEPTH, DEPTH, 0), *qb = qp_new(&b, DEPTH, DEPTH, 0);
	connect_pair(&a, qa, &b, qb, 7);
	for (int i = 0; i < DEPTH; i++)
		post_recv(&b, qb, 64 * (uint64_t)i, 64, (uint64_t)i);
	for (int i = 0; i < DEPTH; i++) {
		struct dev_sge sg = lsge(&a, 64 * (uint64_t)i, 44);
		assert_int_equal(post_send(qa, DEV_WR_SEND, DEV_SEND_SIGNALED, &sg, 1, 0, 0, 0,
					   (uint64_t)i), 0);
	}
	/* let all of them complete into the CQs, polling nothing */
	struct dev_qp_attr at;
	for (int t = 0; t < 100; t++) {
		usleep(50000);
		assert_int_equal(dev_query_qp(qa, &at), 0);
		assert_int_equal(at.qp_state, DEV_QPS_RTS);
	}
	uint64_t sok = 0, rok = 0;
	int s = drain(a.scq, &sok), r = drain(b.rcq, &rok);
	print_message("[   INFO   ] %d send and %d receive completions, %llu + %llu successful\n",
		      s, r, (unsigned long long)sok, (unsigned long long)rok);
	assert_int_equal(s, DEPTH);
	assert_int_equal(r, DEPTH);
	assert_int_equal(sok, DEPTH);
	assert_int_equal(rok, DEPTH);
	assert_int_equal(dev_query_qp(qb, &at), 0);
	assert_int_equal(at.qp_state, DEV_QPS_RTS);
	pair_close(&a, qa, &b, qb);
}

int main(void)
{
	static const struct conf_provider vp = { "verbs", dev_verbs_register, NULL };
	prov = &vp;
	if (dev_verbs_register())
		return 1;
	struct dev_device *d;
	if (dev_open("verbs", &d)) {
		printf("SKIP: no RDMA port (%s)\n", dev_verbs_absent() ? dev_verbs_absent() : "none active");
		return 77;
	}
	dev_close(d);
	const struct CMUnitTest tests[] = { cmocka_unit_test(t_cq_grows) };
	return cmocka_run_group_tests_name("verbs_cq_grow", tests, NULL, NULL);
}
