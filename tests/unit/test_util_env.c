/* test_util_env.c: numbers from the environment (util/env.h): what is taken, what is
 * refused, and that a refusal says so on stderr. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "util/env.h"
#include "util/log.h"

#define VAR "SMCR_TEST_ENV_NUM"

/* Runs smcr_env_num on VAR=value (NULL: unset) with stderr caught; returns its result,
 * *out as it left it (starting from 7), and what it wrote to stderr in err. */
static bool num_of(const char *value, uint64_t lo, uint64_t hi, uint64_t *out, char *err,
                   size_t elen)
{
	if (value)
		assert_int_equal(setenv(VAR, value, 1), 0);
	else
		assert_int_equal(unsetenv(VAR), 0);
	int p[2];
	assert_int_equal(pipe(p), 0);
	int saved = dup(2);
	assert_true(saved >= 0);
	assert_true(dup2(p[1], 2) == 2);
	*out = 7;
	bool ok = smcr_env_num(VAR, lo, hi, out);
	assert_true(dup2(saved, 2) == 2);
	close(saved);
	close(p[1]);
	ssize_t n =
	    read(p[0], err, elen - 1); /* one write(2) per line, far below the pipe's size */
	err[n > 0 ? n : 0] = 0;
	close(p[0]);
	return ok;
}

static void test_env_taken(void **state)
{
	(void)state;
	char err[512];
	uint64_t v;
	smcr_log_set_level(SMCR_LOG_WARN);
	assert_true(num_of("12", 0, 100, &v, err, sizeof(err)));
	assert_int_equal(v, 12);
	assert_string_equal(err, "");
	assert_true(num_of("0", 0, 100, &v, err, sizeof(err)));
	assert_int_equal(v, 0);
	assert_true(num_of("100", 0, 100, &v, err, sizeof(err))); /* both bounds inclusive */
	assert_int_equal(v, 100);
	assert_true(num_of("18446744073709551615", 0, UINT64_MAX, &v, err, sizeof(err)));
	assert_true(v == UINT64_MAX);
	/* unset and empty: the default, silently */
	assert_false(num_of(NULL, 0, 100, &v, err, sizeof(err)));
	assert_int_equal(v, 7);
	assert_string_equal(err, "");
	assert_false(num_of("", 0, 100, &v, err, sizeof(err)));
	assert_int_equal(v, 7);
	assert_string_equal(err, "");
	assert_int_equal(smcr_env_num_or(VAR, 0, 100, 42), 42);
	assert_int_equal(setenv(VAR, "9", 1), 0);
	assert_int_equal(smcr_env_num_or(VAR, 0, 100, 42), 9);
}

static void test_env_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {"-1",
	                                  "+5",
	                                  " 5",
	                                  "5 ",
	                                  "5ms",
	                                  "0x10",
	                                  "abc",
	                                  "101",
	                                  "18446744073709551616",
	                                  "99999999999999999999999"};
	char err[512];
	uint64_t v;
	smcr_log_set_level(SMCR_LOG_WARN);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_false(num_of(bad[i], 0, 100, &v, err, sizeof(err)));
		assert_int_equal(v, 7); /* untouched: the caller's default stands */
		/* the warning names the setting, the value and the range */
		assert_non_null(strstr(err, VAR "="));
		assert_non_null(strstr(err, bad[i]));
		assert_non_null(strstr(err, "from 0 to 100"));
	}
	/* below the lower bound */
	assert_false(num_of("0", 1, 1000, &v, err, sizeof(err)));
	assert_non_null(strstr(err, "from 1 to 1000"));
	/* at level error the refusal is quiet, and still a refusal */
	smcr_log_set_level(SMCR_LOG_ERROR);
	assert_false(num_of("abc", 0, 100, &v, err, sizeof(err)));
	assert_string_equal(err, "");
	smcr_log_set_level(SMCR_LOG_WARN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_env_taken),
	    cmocka_unit_test(test_env_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
