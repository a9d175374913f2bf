/* proc.c: CPU time, resident memory (PSS) and the fd limit of the smcr-perf process (proc.h). */
#define _GNU_SOURCE
#include "proc.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

uint64_t perf_cpu_us(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	return (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec +
	       (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec;
}

/* The number after key on the first line of path that starts with prefix. */
static bool proc_line_u64(const char *path, const char *prefix, const char *key,
			  unsigned long long *out)
{
	FILE *f = fopen(path, "r");
	char line[256];
	bool found = false;
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, prefix, strlen(prefix)) != 0)
			continue;
		const char *k = strstr(line, key);
		found = k && sscanf(k + strlen(key), "%llu", out) == 1;
		break;
	}
	fclose(f);
	return found;
}

/* PSS from /proc/self/smaps_rollup ("Pss: N kB"): a page mapped by k processes counts 1/k
 * in each, so client + server add up to the memory really used. RSS would count an RMB
 * twice on the same host: the owner maps it and reads it, the shm peer maps the same memfd
 * and WRITEs into it. */
static bool pss_kib(uint64_t *out)
{
	unsigned long long kib = 0;
	if (!proc_line_u64("/proc/self/smaps_rollup", "Pss:", "Pss:", &kib))
		return false;
	*out = kib;
	return true;
}

uint64_t perf_rss_kib(void)
{
	uint64_t pss = 0;
	if (pss_kib(&pss))
		return pss;
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long long size = 0, rss = 0;
	if (!f)
		return 0;
	int n = fscanf(f, "%llu %llu", &size, &rss);
	fclose(f);
	if (n != 2)
		return 0;
	long page = sysconf(_SC_PAGESIZE);
	return (uint64_t)rss * (uint64_t)(page > 0 ? page : 4096) / 1024u;
}

uint64_t perf_tcp_mem_kib(void)
{
	unsigned long long pages = 0;
	if (!proc_line_u64("/proc/net/sockstat", "TCP:", " mem ", &pages))
		return 0;
	long page = sysconf(_SC_PAGESIZE);
	return (uint64_t)pages * (uint64_t)(page > 0 ? page : 4096) / 1024u;
}

uint64_t perf_slab_kib(void)
{
	unsigned long long kib = 0;
	return proc_line_u64("/proc/meminfo", "Slab:", "Slab:", &kib) ? (uint64_t)kib : 0;
}

uint64_t perf_kernel_mem_kib(void)
{
	return perf_slab_kib() + perf_tcp_mem_kib();
}

unsigned perf_mem_settle(unsigned max_ms, uint64_t tol_kib)
{
	const unsigned step_ms = 20;
	uint64_t prev = perf_rss_kib() + perf_kernel_mem_kib();
	unsigned waited = 0, quiet = 0;
	/* two quiet steps in a row: one could be a pause between two frees */
	while (waited < max_ms && quiet < 2) {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)step_ms * 1000000L};
		nanosleep(&ts, NULL);
		waited += step_ms;
		uint64_t now = perf_rss_kib() + perf_kernel_mem_kib();
		uint64_t d = now > prev ? now - prev : prev - now;
		prev = now;
		quiet = d < tol_kib ? quiet + 1 : 0;
	}
	return waited;
}

void perf_raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

uint64_t perf_random64(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		v = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec;
	}
	return v;
}
