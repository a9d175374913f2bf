/* test_wire_codes.c: RMBE size codes, MTU codes and the shared field types. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "wire/codes.h"
#include "wire/types.h"

static void test_rmbe_codes(void **state)
{
	(void)state;
	assert_int_equal(wire_rmbe_size(0), 16384);
	assert_int_equal(wire_rmbe_size(2), 65536);
	assert_int_equal(wire_rmbe_size(5), 524288);
	assert_true(wire_rmbe_size(15) == 512ull * 1024 * 1024);
	assert_int_equal(wire_rmbe_size(16), 0);
	/* Linux smc_compress_bufsize: <= 16 KiB -> 0, else smallest code >= request. */
	assert_int_equal(wire_rmbe_code(1, 5), 0);
	assert_int_equal(wire_rmbe_code(16384, 5), 0);
	assert_int_equal(wire_rmbe_code(16385, 5), 1);
	assert_int_equal(wire_rmbe_code(65536, 5), 2);
	assert_int_equal(wire_rmbe_code(65537, 5), 3);
	assert_int_equal(wire_rmbe_code(100u << 20, 5), 5);
	assert_int_equal(wire_rmbe_code(100u << 20, 15), 13);
}

static void test_mtu_codes(void **state)
{
	(void)state;
	static const unsigned bytes[] = { 0, 256, 512, 1024, 2048, 4096, 0 };
	for (unsigned c = 0; c <= 6; c++)
		assert_int_equal(wire_mtu_bytes(c), bytes[c]);
	assert_int_equal(wire_mtu_bytes(15), 0);
}

static void test_peer_id(void **state)
{
	(void)state;
	const uint8_t b[] = { 0xb1, 0xa0, 0x98, 0x03, 0x9b, 0xab, 0xcd, 0xef };
	struct rcur c = rcur_make(b, sizeof(b));
	struct wire_peer_id p;
	assert_int_equal(wire_get_peer_id(&c, &p), 0);
	assert_int_equal(p.instance, 0xb1a0);
	assert_int_equal(p.mac.b[5], 0xef);
	assert_true(wire_peer_id_u64(&p) == 0xb1a098039babcdefull);
	uint8_t out[8];
	struct wcur w = wcur_make(out, 7);
	assert_int_equal(wire_put_peer_id(&w, &p), -SMCR_E_NOSPACE);
	assert_int_equal(w.off, 0);
	w = wcur_make(out, 8);
	assert_int_equal(wire_put_peer_id(&w, &p), 0);
	assert_memory_equal(out, b, 8);
	struct rcur s = rcur_make(b, 7);
	assert_int_equal(wire_get_peer_id(&s, &p), -SMCR_E_SHORT);
	assert_int_equal(s.off, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rmbe_codes),
		cmocka_unit_test(test_mtu_codes),
		cmocka_unit_test(test_peer_id),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
