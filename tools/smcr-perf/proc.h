/* proc.h: what smcr-perf reads about its own process: CPU time, resident memory, fd limit. */
#ifndef SMCR_PERF_PROC_H
#define SMCR_PERF_PROC_H

#include <stdint.h>

/* User + system CPU time of the whole process (every thread, the smcr progress thread
 * included), in microseconds. */
uint64_t perf_cpu_us(void);
/* Resident memory in KiB: the proportional set size (/proc/self/smaps_rollup "Pss"), so a
 * shared page (an RMB is a memfd the shm peer maps and writes too) counts once across the
 * processes sharing it, not once in each; /proc/self/statm's RSS where smaps_rollup is
 * missing (kernels before 4.14); 0 if neither is readable. */
uint64_t perf_rss_kib(void);
/* Kernel memory of all TCP sockets in this network namespace ("TCP: ... mem N" pages of
 * /proc/net/sockstat), in KiB; 0 if unreadable. Kernel TCP buffers are not in any RSS, so
 * a memory-per-connection figure that left them out would flatter TCP. */
uint64_t perf_tcp_mem_kib(void);
/* Raises RLIMIT_NOFILE's soft limit to the hard limit (conns opens thousands of fds). */
void perf_raise_nofile(void);
/* 64 random bits (session ids). */
uint64_t perf_random64(void);

#endif
