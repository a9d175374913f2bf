/* clock.h: monotonic time in nanoseconds, the one clock every timer in smcr uses. */
#ifndef SMCR_UTIL_CLOCK_H
#define SMCR_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

#define SMCR_NS_PER_MS 1000000ull
#define SMCR_NS_PER_S 1000000000ull

static inline uint64_t smcr_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SMCR_NS_PER_S + (uint64_t)ts.tv_nsec;
}

#endif
