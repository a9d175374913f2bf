/* test_clc_property.c: property tests of the CLC codecs (docs/protocol/wire-formats.md 3-5).
 *  - random valid field values: encode -> decode gives the same message, and encode again
 *    gives the same bytes;
 *  - every truncation and every single-byte mutation (all 256 values) of each golden vector,
 *    and random bytes behind a valid frame: the decoder never crashes or over-reads (heap
 *    copies of exact size, run under ASan), and whatever decodes re-encodes (clc_check). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/clc_check.h"
#include "lib/clc_vectors.h"
#include "wire/clc.h"

static uint32_t rnd(void)
{
	/* xorshift32: deterministic and independent of libc's rand() */
	static uint32_t s = 0x7609u;
	s ^= s << 13;
	s ^= s >> 17;
	s ^= s << 5;
	return s;
}

static uint64_t rnd64(void) { return (uint64_t)rnd() << 32 | rnd(); }

static void rnd_bytes(void *p, size_t n)
{
	uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)rnd();
}

static struct clc_frame rnd_frame(uint8_t version)
{
	struct clc_frame f = { version, (enum clc_eye)(rnd() % 2), (enum clc_eye)(rnd() % 2) };
	return f;
}

/* Encodes m, decodes it, and checks equality and byte stability. */
static void encode_decode(const struct clc_msg *m, size_t want_len)
{
	static uint8_t out[CLC_MSG_MAX_LEN], out2[CLC_MSG_MAX_LEN];
	static struct clc_msg d;
	size_t n = 0, n2 = 0;

	assert_int_equal(clc_encode(m, out, sizeof(out), &n), 0);
	assert_int_equal(n, want_len);
	assert_int_equal(clc_decode(out, n, &d), 0);
	assert_true(clc_msg_equal(m, &d));
	assert_int_equal(clc_encode(&d, out2, sizeof(out2), &n2), 0);
	assert_int_equal(n2, n);
	assert_memory_equal(out, out2, n);
}

static void test_random_accept(void **state)
{
	(void)state;
	static struct clc_msg m;
	for (int i = 0; i < 20000; i++) {
		memset(&m, 0, sizeof(m));
		m.type = rnd() % 2 ? CLC_ACCEPT : CLC_CONFIRM;
		struct clc_accept *a = &m.accept;
		a->f = rnd_frame(1);
		a->first_contact = rnd() % 2;
		a->peer_id.instance = (uint16_t)rnd();
		rnd_bytes(a->peer_id.mac.b, 6);
		rnd_bytes(a->gid.b, 16);
		rnd_bytes(a->mac.b, 6);
		a->qpn = rnd() & 0xffffff;
		a->rkey = rnd();
		a->rmbe_idx = (uint8_t)(1 + rnd() % 255);
		a->token = rnd() | 1u << (rnd() % 32);
		a->rmbe_size_code = (uint8_t)(rnd() % 16);
		a->mtu_code = (uint8_t)(1 + rnd() % 5);
		a->rmb_vaddr = rnd64();
		a->psn = rnd() & 0xffffff;
		encode_decode(&m, CLC_ACCEPT_LEN);
	}
}

static void test_random_decline(void **state)
{
	(void)state;
	static struct clc_msg m;
	for (int i = 0; i < 20000; i++) {
		memset(&m, 0, sizeof(m));
		m.type = CLC_DECLINE;
		struct clc_decline *d = &m.decline;
		bool v2 = rnd() % 2;
		d->f = rnd_frame(v2 ? (uint8_t)(2 + rnd() % 14) : 1);
		d->out_of_sync = rnd() % 2;
		d->path = (uint8_t)(rnd() % 2);
		d->peer_id.instance = (uint16_t)rnd();
		rnd_bytes(d->peer_id.mac.b, 6);
		d->diag = rnd();
		if (v2) {
			d->os_type = (uint8_t)(rnd() % 16);
			for (int k = 0; k < CLC_DECLINE_V2_DIAGS; k++)
				d->diag_v2[k] = rnd();
		}
		encode_decode(&m, v2 ? CLC_DECLINE_V2_LEN : CLC_DECLINE_LEN);
	}
}

/* A consistent random v2 extension for typev2 (3.4). */
static void rnd_v2ext(struct clc_v2ext *x, uint8_t typev2)
{
	bool smcd = typev2 == CLC_PATH_D || typev2 == CLC_PATH_BOTH;
	uint8_t e = (uint8_t)(rnd() % 9), g = (uint8_t)(rnd() % 9);
	size_t len = CLC_V2EXT_HDR_LEN + (size_t)e * CLC_V2EXT_EID_LEN;

	memset(x, 0, sizeof(*x));
	if (smcd)
		len += CLC_SMCD_V2EXT_HDR_LEN + (size_t)g * CLC_SMCD_V2EXT_GID_LEN;
	rnd_bytes(x->raw, len);
	x->raw[0] = e;
	if (smcd) {
		x->raw[1] = g;
		x->raw[6] = (uint8_t)((len - CLC_SMCD_V2EXT_HDR_LEN -
				       (size_t)g * CLC_SMCD_V2EXT_GID_LEN - 8) >> 8);
		x->raw[7] = (uint8_t)(len - CLC_SMCD_V2EXT_HDR_LEN -
				      (size_t)g * CLC_SMCD_V2EXT_GID_LEN - 8);
	}
	x->len = (uint16_t)len;
	x->eid_count = e;
	x->ism_gid_count = x->raw[1];
	x->release = x->raw[3] >> 4;
	x->seid = x->raw[3] & 1;
}

static void test_random_proposal(void **state)
{
	(void)state;
	static struct clc_msg m;
	int done = 0;
	for (int i = 0; i < 20000; i++) {
		memset(&m, 0, sizeof(m));
		m.type = CLC_PROPOSAL;
		struct clc_proposal *p = &m.proposal;
		bool v2 = rnd() % 2;
		p->f = rnd_frame(v2 ? (uint8_t)(2 + rnd() % 14) : 1);
		p->typev1 = (uint8_t)(rnd() % 4);
		p->typev2 = (uint8_t)(rnd() % 4);
		p->peer_id.instance = (uint16_t)rnd();
		rnd_bytes(p->peer_id.mac.b, 6);
		rnd_bytes(p->gid.b, 16);
		rnd_bytes(p->mac.b, 6);
		p->has_iparea = !v2 || p->typev1 != CLC_PATH_NONE;
		p->has_v2ext = v2 && p->typev2 != CLC_PATH_NONE;
		if (!v2)
			p->iparea_offset = (uint16_t)(rnd() % 3 == 0 ? 40 : rnd() % 120);
		else
			p->iparea_offset = (uint16_t)(p->has_iparea ? 40 : rnd() % 41);
		bool smcd_area = v2 || p->iparea_offset >= 40;
		if (smcd_area) {
			p->ism_gid = rnd64();
			p->ism_chid = (uint16_t)rnd();
			p->v2ext_offset = (uint16_t)rnd();
		}
		if (p->has_iparea) {
			p->ipv4_subnet = rnd();
			p->ipv4_prefix_len = (uint8_t)(rnd() % 33);
			p->ipv6_count = (uint8_t)(rnd() % 9);
			for (unsigned k = 0; k < p->ipv6_count; k++) {
				rnd_bytes(p->ipv6[k].addr, 16);
				p->ipv6[k].len = (uint8_t)(rnd() % 129);
			}
		}
		if (p->has_v2ext) {
			rnd_v2ext(&p->v2ext, p->typev2);
			p->v2ext_offset = (uint16_t)(80 + (p->has_iparea ? 8 + 17 * p->ipv6_count : 0) - 52);
		}
		p->offers_smcr_v1 = p->typev1 == CLC_PATH_R || p->typev1 == CLC_PATH_BOTH;
		size_t len = clc_proposal_len(p);
		if (len == 0) {		/* only when over smcr's 1024-byte bound */
			assert_true(!v2 && p->iparea_offset + 52 + 17 * p->ipv6_count > 1024);
			continue;
		}
		p->length = (uint16_t)len;
		encode_decode(&m, len);
		done++;
	}
	assert_true(done > 19000);
}

/* Exact-size heap copy, so ASan catches any read past len. */
static int check_heap(const uint8_t *b, size_t len)
{
	uint8_t *h = malloc(len ? len : 1);
	assert_non_null(h);
	memcpy(h, b, len);
	int rc = clc_check_roundtrip(h, len);
	free(h);
	return rc;
}

static void test_mutations(void **state)
{
	(void)state;
	uint8_t b[CLC_MSG_MAX_LEN];
	long ok = 0, bad = 0;

	for (size_t i = 0; i < clc_vectors_count; i++) {
		const uint8_t *v = clc_vectors[i].bytes;
		size_t n = clc_vectors[i].len;
		assert_int_equal(check_heap(v, n), 0);
		for (size_t k = 0; k < n; k++)
			assert_true(check_heap(v, k) < 0);	/* every truncation fails */
		for (size_t k = 0; k < n; k++) {
			memcpy(b, v, n);
			for (unsigned val = 0; val < 256; val++) {
				b[k] = (uint8_t)val;
				if (check_heap(b, n) == 0)
					ok++;
				else
					bad++;
			}
		}
	}
	/* both outcomes occur a lot: the test exercises decoders, not just framing */
	assert_true(ok > 10000);
	assert_true(bad > 10000);
}

static void test_random_bytes(void **state)
{
	(void)state;
	uint8_t b[CLC_MSG_MAX_LEN];
	for (int i = 0; i < 200000; i++) {
		size_t n = rnd() % 200;
		rnd_bytes(b, n);
		if (n >= 8 && rnd() % 4) {
			/* a valid frame around random content, so the bodies get exercised */
			memcpy(b, "\xe2\xd4\xc3\xd9", 4);
			b[4] = (uint8_t)(1 + rnd() % 4);
			b[5] = (uint8_t)(n >> 8);
			b[6] = (uint8_t)n;
			b[7] = (uint8_t)((1 + rnd() % 2) << 4 | (b[7] & 0x0f));
			if (n >= 12)
				memcpy(b + n - 4, "\xe2\xd4\xc3\xd9", 4);
		}
		(void)check_heap(b, n);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_accept),
		cmocka_unit_test(test_random_decline),
		cmocka_unit_test(test_random_proposal),
		cmocka_unit_test(test_mutations),
		cmocka_unit_test(test_random_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
