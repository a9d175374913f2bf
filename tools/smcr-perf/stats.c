/* stats.c: percentiles, medians, units and names shared by smcr-perf's outputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "perf.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void perf_sort(double *v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_double);
}

double perf_percentile(const double *sorted, size_t n, double p)
{
	if (n == 0 || !(p >= 0.0) || p > 100.0)
		return NAN;
	double rank = p / 100.0 * (double)(n - 1);
	size_t lo = (size_t)floor(rank);
	size_t hi = lo + 1 < n ? lo + 1 : lo;
	double frac = rank - (double)lo;
	return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

double perf_median(double *v, size_t n)
{
	perf_sort(v, n);
	return perf_percentile(v, n, 50.0);
}

const char *perf_fmt_size(size_t n, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB"};
	double v = (double)n;
	unsigned u = 0;
	while (v >= 1024.0 && u < 3) {
		v /= 1024.0;
		u++;
	}
	if (v == floor(v))
		snprintf(buf, len, "%.0f %s", v, unit[u]);
	else
		snprintf(buf, len, "%.3g %s", v, unit[u]);
	return buf;
}

const char *perf_unit(enum perf_test t)
{
	switch (t) {
	case PERF_TEST_STREAM:
	case PERF_TEST_CONNS:
		return "Gbit/s";
	case PERF_TEST_PINGPONG:
		return "us";
	case PERF_TEST_CONNECT:
		return "conn/s";
	case PERF_TEST_COUNT:
		break;
	}
	return "?";
}

const char *perf_cpu_unit(enum perf_test t)
{
	switch (t) {
	case PERF_TEST_STREAM:
	case PERF_TEST_CONNS:
		return "cpu_s/GB";
	case PERF_TEST_PINGPONG:
	case PERF_TEST_CONNECT:
		return "cpu_us/op";
	case PERF_TEST_COUNT:
		break;
	}
	return "?";
}

bool perf_higher_is_better(enum perf_test t)
{
	return t != PERF_TEST_PINGPONG;
}

const char *perf_mode_name(enum perf_mode m)
{
	switch (m) {
	case PERF_MODE_TCP:
		return "tcp";
	case PERF_MODE_SMCR:
		return "smcr";
	case PERF_MODE_FALLBACK:
		return "tcp-fallback";
	case PERF_MODE_UNKNOWN:
		return "unknown";
	}
	return "?";
}

int perf_mode_rank(enum perf_mode m)
{
	switch (m) {
	case PERF_MODE_TCP:
	case PERF_MODE_SMCR:
		return 0;
	case PERF_MODE_FALLBACK:
		return 1;
	case PERF_MODE_UNKNOWN:
		return 2;
	}
	return 2;
}
