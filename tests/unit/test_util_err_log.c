/* test_util_err_log.c: the error table's lookups and the log level / rate limit rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "util/err.h"
#include "util/log.h"

static void test_err_table(void **state)
{
	(void)state;
	assert_string_equal(smcr_err_name(-SMCR_E_NOMEM), "NOMEM");
	assert_string_equal(smcr_err_name(SMCR_E_SHORT), "SHORT");
	assert_int_equal(smcr_err_errno(-SMCR_E_NOMEM), ENOMEM);
	assert_int_equal(smcr_err_decline(-SMCR_E_NOMEM), 0x01010000);
	assert_int_equal(smcr_err_decline(-SMCR_E_SHORT), 0);
	assert_string_equal(smcr_err_name(-100000), "UNKNOWN");
	assert_int_equal(smcr_err_errno(SMCR_E__COUNT), EIO);
	/* Every row has a name and a message. */
	for (int i = 0; i < SMCR_E__COUNT; i++) {
		assert_non_null(smcr_err_name(i));
		assert_true(strlen(smcr_err_msg(i)) > 0);
	}
}

static void test_log_levels(void **state)
{
	(void)state;
	assert_int_equal(smcr_log_parse_level("error"), SMCR_LOG_ERROR);
	assert_int_equal(smcr_log_parse_level("WARN"), SMCR_LOG_WARN);
	assert_int_equal(smcr_log_parse_level("info"), SMCR_LOG_INFO);
	assert_int_equal(smcr_log_parse_level("debug"), SMCR_LOG_DEBUG);
	assert_int_equal(smcr_log_parse_level("2"), SMCR_LOG_INFO);
	assert_int_equal(smcr_log_parse_level("loud"), -1);
	assert_int_equal(smcr_log_parse_level(NULL), -1);
	smcr_log_set_level(SMCR_LOG_ERROR);
	assert_int_equal(smcr_log_level(), SMCR_LOG_ERROR);
}

static void test_ratelimit(void **state)
{
	(void)state;
	struct smcr_ratelimit rl;
	memset(&rl, 0, sizeof(rl));
	uint32_t sup;
	int passed = 0;
	for (int i = 0; i < 100; i++)
		passed += smcr_ratelimit_ok(&rl, &sup);
	/* Within one second only the burst passes (the loop takes far less than 1 s). */
	assert_int_equal(passed, SMCR_LOG_RL_BURST);
	assert_int_equal(rl.suppressed, 100 - SMCR_LOG_RL_BURST);
	/* A new window reports what was suppressed. */
	rl.window_start_ns = 0;
	assert_true(smcr_ratelimit_ok(&rl, &sup));
	assert_int_equal(sup, 100 - SMCR_LOG_RL_BURST);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_err_table),
		cmocka_unit_test(test_log_levels),
		cmocka_unit_test(test_ratelimit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
