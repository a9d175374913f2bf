/* test_core_clc_v2.c: what smcr's server does with SMC-R v2 Proposals today
 * (docs/parts/wire-v2.md 6): no device of smcr (shm, emu, verbs so far) has a RoCE v2 path,
 * so the version rule can only pick v1. The real Linux 6.12 Proposal (v2 only, from
 * tests/vectors/linux-6.12-smcr-v2-rxe.pcap) is declined with NOSMCDEV, as a Linux server
 * without a RoCE v2 device declines it, and the TCP connection falls back; a Proposal that
 * offers v1 and v2 (smcr's own v1 Proposal with a v2 extension added) gets a v1 Accept and
 * the handshake completes in v1; one that offers no path gets PEERNOSMC. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/core_pair.h"
#include "lib/v2cap.h"
#include "wire/clc.h"
#include "wire/clc_v2.h"

#define T0 (100ull * 1000000000ull)

struct two {
	struct core_engine *ce, *se;
};

static int setup(void **state)
{
	struct two *t = calloc(1, sizeof(*t));
	t->ce = cp_engine(NULL, NULL);
	t->se = cp_engine(NULL, NULL);
	*state = t;
	return t->ce && t->se ? 0 : -1;
}

static int teardown(void **state)
{
	struct two *t = *state;
	core_engine_free(t->ce);
	core_engine_free(t->se);
	free(t);
	return 0;
}

static struct core_clc_result step(struct core_conn *c, const void *in, size_t len, uint64_t now)
{
	struct core_clc_result r;
	assert_int_equal(core_conn_clc_step(c, in, len, false, now, &r), 0);
	return r;
}

static struct core_conn *new_conn(struct core_engine *e, enum core_role role)
{
	struct core_conn_params p;
	cp_conn_params(&p, role, 0);
	struct core_conn *c;
	assert_int_equal(core_conn_new(e, &p, &c), 0);
	return c;
}

/* Feeds a Proposal to a new server connection and expects a Decline with code. */
static void expect_decline(struct two *t, const uint8_t *prop, size_t len, uint32_t code)
{
	struct core_conn *s = new_conn(t->se, CORE_SERVER);
	struct core_clc_result r = step(s, prop, len, T0);
	struct core_conn_info in;
	struct clc_msg d;

	assert_int_equal(r.consumed, len);
	assert_int_equal(r.status, CORE_CLC_FALLBACK);
	assert_int_equal(clc_decode(r.out, r.out_len, &d), 0);
	assert_int_equal(d.type, CLC_DECLINE);
	assert_int_equal(d.decline.diag, code);
	core_conn_info(s, &in);
	assert_int_equal(in.mode, CORE_MODE_FALLBACK);
	assert_int_equal(in.fallback_local, code);
	core_conn_release(s, T0);
}

static void test_linux_v2_only_proposal(void **state)
{
	struct two *t = *state;
	struct v2cap *cap = malloc(sizeof(*cap));
	assert_non_null(cap);
	assert_int_equal(v2cap_load(cap), 0);
	const struct v2cap_frame *f = &cap->f[62 - 1];
	assert_int_equal(f->len, 156);
	expect_decline(t, f->data, f->len, CLC2_DECL_NOSMCDEV);
	free(cap);
}

static void test_no_path_offered(void **state)
{
	struct two *t = *state;
	struct core_conn *c = new_conn(t->ce, CORE_CLIENT);
	struct core_clc_result r = step(c, NULL, 0, T0);
	struct clc_msg m;
	uint8_t buf[CLC_MSG_MAX_LEN];
	size_t n;

	assert_int_equal(clc_decode(r.out, r.out_len, &m), 0);
	m.proposal.typev1 = CLC_PATH_NONE;
	assert_int_equal(clc_encode(&m, buf, sizeof(buf), &n), 0);
	expect_decline(t, buf, n, CLC2_DECL_PEERNOSMC);
	core_conn_release(c, T0);
}

static void test_v1_and_v2_offered_gets_v1(void **state)
{
	struct two *t = *state;
	struct core_conn *c = new_conn(t->ce, CORE_CLIENT);
	struct core_conn *s = new_conn(t->se, CORE_SERVER);
	struct core_clc_result r = step(c, NULL, 0, T0), rs, rc;
	struct clc_msg m, a;
	struct clc_v2ext_info x;
	uint8_t buf[CLC_MSG_MAX_LEN];
	size_t n;

	/* smcr's own Proposal, turned into Linux's "both" form: version 2, typev2 SMC-R, the
	 * SMC-D area and a v2 extension with one user EID. */
	assert_int_equal(clc_decode(r.out, r.out_len, &m), 0);
	m.proposal.f.version = CLC_VERSION_2;
	m.proposal.typev2 = CLC_PATH_R;
	memset(&x, 0, sizeof(x));
	x.release = 1;
	x.eid_count = 1;
	assert_int_equal(clc_eid_from_str("SPIKE-UEID", &x.eids[0]), 0);
	x.max_conns = 255;
	x.max_links = 2;
	assert_int_equal(clc_v2ext_put(&x, CLC_PATH_R, &m.proposal.v2ext), 0);
	assert_int_equal(clc_encode(&m, buf, sizeof(buf), &n), 0);
	assert_int_equal(buf[7], 0x20);		/* v2, typev2 R, typev1 R */

	rs = step(s, buf, n, T0);
	assert_int_equal(rs.consumed, n);
	assert_int_equal(rs.status, CORE_CLC_NEED_INPUT);	/* waiting for the Confirm */
	assert_int_equal(rs.out_len, CLC_ACCEPT_LEN);
	assert_int_equal(clc_decode(rs.out, rs.out_len, &a), 0);
	assert_int_equal(a.type, CLC_ACCEPT);
	assert_int_equal(a.accept.f.version, 1);
	/* the client takes the v1 Accept and confirms */
	rc = step(c, rs.out, rs.out_len, T0);
	assert_int_equal(rc.consumed, CLC_ACCEPT_LEN);
	assert_int_equal(rc.out_len, CLC_ACCEPT_LEN);
	assert_int_equal(clc_decode(rc.out, rc.out_len, &a), 0);
	assert_int_equal(a.type, CLC_CONFIRM);
	core_conn_release(s, T0);
	core_conn_release(c, T0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_linux_v2_only_proposal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_path_offered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v1_and_v2_offered_gets_v1, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
