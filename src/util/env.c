/* env.c: numbers from the environment (env.h). */
#include "util/env.h"

#include <errno.h>
#include <stdlib.h>

#include "util/log.h"

bool smcr_env_num(const char *name, uint64_t lo, uint64_t hi, uint64_t *out)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return false;
	/* strtoull alone would take " 5", "+5" and "-1" (as 2^64-1) */
	bool digits = *v >= '0' && *v <= '9';
	char *end = NULL;
	errno = 0;
	unsigned long long n = digits ? strtoull(v, &end, 10) : 0;
	if (!digits || *end || errno == ERANGE || n < lo || n > hi) {
		LOG_WARN("env",
		         "%s=%s ignored: not a number from %llu to %llu; the default applies", name,
		         v, (unsigned long long)lo, (unsigned long long)hi);
		return false;
	}
	*out = n;
	return true;
}

uint64_t smcr_env_num_or(const char *name, uint64_t lo, uint64_t hi, uint64_t dflt)
{
	uint64_t n = dflt;
	(void)smcr_env_num(name, lo, hi, &n);
	return n;
}
