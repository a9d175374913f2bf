/* test_shm_msg.c: the shm provider's control message codec (dev/shm/shm_msg.h): golden bytes,
 * round trips of every type, a distinct error for each violation, and no read past the end
 * for any truncation (the peer is hostile). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dev/shm/shm_msg.h"

static void test_golden_qp_req(void **state)
{
	(void)state;
	struct shm_msg m = { .type = SHM_MSG_QP_REQ };
	m.u.qp = (struct shm_msg_qp){ .src_qpn = 0x010002, .dst_qpn = 0x020003, .pd_id = 7,
				      .ncells = 512, .caps_size = 64, .max_recv_wr = 48,
				      .min_rnr_timer = 5, .mtu = 3 };
	uint8_t b[SHM_MSG_MAX];
	int n = shm_msg_encode(&m, b, sizeof b);
	const uint8_t want[] = { 0x53, 0x4d, 0x53, 0x48, 0x01, 0x02, 0x00, 0x1a,
				 0x00, 0x01, 0x00, 0x02, 0x00, 0x02, 0x00, 0x03,
				 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x02, 0x00,
				 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x30, 0x05, 0x03 };
	assert_int_equal(n, sizeof want);
	assert_memory_equal(b, want, sizeof want);
	struct shm_msg d;
	assert_int_equal(shm_msg_decode(b, (size_t)n, 2, &d), 0);
	assert_memory_equal(&d.u.qp, &m.u.qp, sizeof m.u.qp);
}

static void roundtrip(const struct shm_msg *m)
{
	uint8_t b[SHM_MSG_MAX];
	int n = shm_msg_encode(m, b, sizeof b);
	assert_true(n > 0);
	struct shm_msg d;
	assert_int_equal(shm_msg_decode(b, (size_t)n, shm_msg_nfds(m->type), &d), 0);
	assert_int_equal(d.type, m->type);
	assert_memory_equal(&d.u, &m->u, sizeof m->u);
	/* Every truncation is refused, and never read past. */
	for (int k = 0; k < n; k++) {
		uint8_t *t = malloc((size_t)k + 1);
		memcpy(t, b, (size_t)k);
		int rc = shm_msg_decode(t, (size_t)k, shm_msg_nfds(m->type), &d);
		assert_true(rc == -SMCR_E_SHORT || rc == -SMCR_E_SHM_MSG_BAD_LEN);
		free(t);
	}
}

static void test_roundtrips(void **state)
{
	(void)state;
	struct shm_msg m;
	memset(&m, 0, sizeof m);
	m.type = SHM_MSG_HELLO;
	for (int i = 0; i < 16; i++) {
		m.u.hello.src.raw[i] = (uint8_t)i;
		m.u.hello.dst.raw[i] = (uint8_t)(0xff - i);
	}
	m.u.hello.tab_entries = 65536;
	roundtrip(&m);
	memset(&m, 0, sizeof m);
	m.type = SHM_MSG_QP_GONE;
	m.u.gone.src_qpn = 1;
	m.u.gone.dst_qpn = 0xffffff;
	m.u.gone.reason = SHM_GONE_ACCESS;
	roundtrip(&m);
	memset(&m, 0, sizeof m);
	m.type = SHM_MSG_MR_ADD;
	m.u.mr_add.seq = 9;
	m.u.mr_add.rkey = 0x10001;
	m.u.mr_add.pd_id = 3;
	m.u.mr_add.access = 3;
	m.u.mr_add.iova = 0x7f0000001000ull;
	m.u.mr_add.length = 65536;
	m.u.mr_add.mem_off = 4096;
	roundtrip(&m);
	memset(&m, 0, sizeof m);
	m.type = SHM_MSG_MR_ACK;
	m.u.mr_ack.seq = 0xffffffffu;
	roundtrip(&m);
	memset(&m, 0, sizeof m);
	m.type = SHM_MSG_MR_DEL;
	m.u.mr_del.rkey = 77;
	roundtrip(&m);
	memset(&m, 0, sizeof m);
	m.type = SHM_MSG_QP_RTU;
	m.u.qp.src_qpn = 5;
	m.u.qp.dst_qpn = 6;
	roundtrip(&m);
}

static void test_errors(void **state)
{
	(void)state;
	struct shm_msg m = { .type = SHM_MSG_MR_DEL }, d;
	m.u.mr_del.rkey = 5;
	uint8_t b[SHM_MSG_MAX], t[SHM_MSG_MAX + 4];
	int n = shm_msg_encode(&m, b, sizeof b);
	memcpy(t, b, (size_t)n);
	t[0] ^= 1;
	assert_int_equal(shm_msg_decode(t, (size_t)n, 0, &d), -SMCR_E_SHM_MSG_BAD_MAGIC);
	memcpy(t, b, (size_t)n);
	t[4] = 2;
	assert_int_equal(shm_msg_decode(t, (size_t)n, 0, &d), -SMCR_E_SHM_MSG_BAD_VERSION);
	memcpy(t, b, (size_t)n);
	t[5] = 0x42;
	assert_int_equal(shm_msg_decode(t, (size_t)n, 0, &d), -SMCR_E_SHM_MSG_BAD_TYPE);
	memcpy(t, b, (size_t)n);
	t[7] = 5;	/* body length field disagrees with the type */
	assert_int_equal(shm_msg_decode(t, (size_t)n, 0, &d), -SMCR_E_SHM_MSG_BAD_LEN);
	memcpy(t, b, (size_t)n);
	t[n] = 0;	/* trailing byte */
	assert_int_equal(shm_msg_decode(t, (size_t)n + 1, 0, &d), -SMCR_E_SHM_MSG_BAD_LEN);
	assert_int_equal(shm_msg_decode(b, (size_t)n, 1, &d), -SMCR_E_SHM_MSG_BAD_FDS);

	struct shm_msg g = { .type = SHM_MSG_QP_GONE };
	g.u.gone.src_qpn = 1;
	g.u.gone.dst_qpn = 2;
	g.u.gone.reason = 9;
	n = shm_msg_encode(&g, b, sizeof b);
	assert_int_equal(shm_msg_decode(b, (size_t)n, 0, &d), -SMCR_E_SHM_MSG_BAD_FIELD);
	struct shm_msg q = { .type = SHM_MSG_QP_REQ };
	q.u.qp.src_qpn = 0;
	q.u.qp.dst_qpn = 1;
	n = shm_msg_encode(&q, b, sizeof b);
	assert_int_equal(shm_msg_decode(b, (size_t)n, 2, &d), -SMCR_E_SHM_MSG_BAD_FIELD);
	q.u.qp.src_qpn = 1;
	q.u.qp.max_recv_wr = SHM_CAPS_MAX_WR + 1;
	n = shm_msg_encode(&q, b, sizeof b);
	assert_int_equal(shm_msg_decode(b, (size_t)n, 2, &d), -SMCR_E_SHM_MSG_BAD_FIELD);
	struct shm_msg a = { .type = SHM_MSG_MR_ADD };
	a.u.mr_add.rkey = 1;
	a.u.mr_add.length = 10;
	a.u.mr_add.iova = UINT64_MAX - 5;	/* iova + length overflows */
	n = shm_msg_encode(&a, b, sizeof b);
	assert_int_equal(shm_msg_decode(b, (size_t)n, 1, &d), -SMCR_E_SHM_MSG_BAD_FIELD);
	a.u.mr_add.iova = 0;
	a.u.mr_add.rkey = 0;
	n = shm_msg_encode(&a, b, sizeof b);
	assert_int_equal(shm_msg_decode(b, (size_t)n, 1, &d), -SMCR_E_SHM_MSG_BAD_FIELD);
	struct shm_msg h = { .type = SHM_MSG_HELLO };
	h.u.hello.tab_entries = 0;
	n = shm_msg_encode(&h, b, sizeof b);
	assert_int_equal(shm_msg_decode(b, (size_t)n, 2, &d), -SMCR_E_SHM_MSG_BAD_FIELD);
	struct shm_msg x = { .type = (enum shm_msg_type)99 };
	assert_int_equal(shm_msg_encode(&x, b, sizeof b), -SMCR_E_SHM_MSG_BAD_TYPE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_qp_req),
		cmocka_unit_test(test_roundtrips),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
