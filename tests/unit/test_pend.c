/* test_pend.c: the pre-decision buffer (src/sock/pend.h): its capacity is the send ring's
 * size for any asked sndbuf; puts take what fits, in order, across iovecs; a consume from
 * the front and a later put keep the byte order (the queued bytes move to the front); the
 * room is exact at every step; free empties it. Checked against a reference stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/core.h"
#include "sock/pend.h"

static void test_cap(void **state)
{
	(void)state;
	assert_int_equal(pend_cap_for(0), CORE_SNDBUF_DEFAULT);
	assert_int_equal(pend_cap_for(1), CORE_SNDBUF_MIN);
	assert_int_equal(pend_cap_for(CORE_SNDBUF_MIN + 1), 2 * CORE_SNDBUF_MIN);
	assert_int_equal(pend_cap_for(100000), 131072);
	assert_int_equal(pend_cap_for(1u << 30), CORE_SNDBUF_MAX);
}

/* Random puts (1-3 iovecs) and consumes against a reference of what was put: the queued
 * bytes are always the reference's unsent tail. */
static void test_stream(void **state)
{
	(void)state;
	enum { CAP = 16384, TOTAL = 1 << 20 };
	static uint8_t src[TOTAL];
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < TOTAL; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		src[i] = (uint8_t)x;
	}
	struct pend p = { 0 };
	assert_int_equal(pend_room(&p, CAP), CAP);
	size_t put = 0, sent = 0;
	while (sent < TOTAL) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t a = x % 7000, b = (x >> 16) % 3000, c = (x >> 32) % 2;
		if (put + a + b + c > TOTAL)
			a = TOTAL - put, b = c = 0;
		struct iovec v[3] = { { src + put, a }, { src + put + a, b }, { src + put + a + b, c } };
		size_t room = pend_room(&p, CAP), taken = 0;
		assert_int_equal(pend_put(&p, CAP, v, 3, &taken), 0);
		size_t want = a + b + c < room ? a + b + c : room;
		assert_int_equal(taken, want);
		put += taken;
		size_t len;
		const uint8_t *d = pend_peek(&p, &len);
		assert_int_equal(len, put - sent);
		if (len)
			assert_memory_equal(d, src + sent, len);
		size_t k = (x >> 40) % (len + 1);
		pend_consume(&p, k);
		sent += k;
		assert_int_equal(pend_room(&p, CAP), CAP - (put - sent));
		if (put == TOTAL && sent < TOTAL) {
			pend_consume(&p, put - sent);
			sent = put;
		}
	}
	size_t len;
	assert_null(pend_peek(&p, &len));
	assert_int_equal(len, 0);
	pend_free(&p);
	assert_null(p.buf);
	assert_int_equal(pend_room(&p, CAP), CAP);
}

static void test_empty_put(void **state)
{
	(void)state;
	struct pend p = { 0 };
	size_t taken = 1;
	struct iovec v = { NULL, 0 };
	assert_int_equal(pend_put(&p, 16384, &v, 1, &taken), 0);
	assert_int_equal(taken, 0);
	size_t len;
	assert_null(pend_peek(&p, &len));
	pend_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_stream),
		cmocka_unit_test(test_empty_put),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
