/* test_core_ueid.c: the user EID table from SMCR_UEID's text (core/eid.c; docs/CONFIG.md,
 * docs/parts/wire-v2.md 2.3): upper-cased and blank padded to 32 bytes, separators, and every
 * entry the kernel's UEID table refuses (invalid character, first character, too long,
 * duplicate, the 9th) left out and counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/core.h"

static void assert_eid(const uint8_t e[CORE_EID_LEN], const char *want)
{
	uint8_t w[CORE_EID_LEN];
	memset(w, ' ', sizeof w);
	memcpy(w, want, strlen(want));
	assert_memory_equal(e, w, CORE_EID_LEN);
}

static void test_parse(void **state)
{
	(void)state;
	struct core_ueid_table t;
	memset(&t, 0, sizeof t);
	assert_int_equal(core_ueid_parse("spike-ueid, Two.2  3", &t), 0);
	assert_int_equal(t.n, 3);
	assert_eid(t.eid[0], "SPIKE-UEID");
	assert_eid(t.eid[1], "TWO.2");
	assert_eid(t.eid[2], "3");

	memset(&t, 0, sizeof t);
	assert_int_equal(core_ueid_parse("", &t), 0);
	assert_int_equal(core_ueid_parse(NULL, &t), 0);
	assert_int_equal(core_ueid_parse(" ,, ", &t), 0);
	assert_int_equal(t.n, 0);

	/* refused: a character outside A-Z 0-9 . -, a first '-' or '.', 33 characters, a
	 * duplicate after upper-casing */
	assert_int_equal(core_ueid_parse("A_B -AB .AB 0123456789012345678901234567890123 OK ok",
					 &t), 5);
	assert_int_equal(t.n, 1);
	assert_eid(t.eid[0], "OK");
	/* 32 characters is the most */
	assert_int_equal(core_ueid_parse("01234567890123456789012345678901", &t), 0);
	assert_int_equal(t.n, 2);
	assert_memory_equal(t.eid[1], "01234567890123456789012345678901", 32);
}

static void test_full(void **state)
{
	(void)state;
	struct core_ueid_table t;
	memset(&t, 0, sizeof t);
	assert_int_equal(core_ueid_parse("E1 E2 E3 E4 E5 E6 E7 E8 E9 E10", &t), 2);
	assert_int_equal(t.n, CORE_MAX_UEIDS);
	assert_eid(t.eid[7], "E8");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_full),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
