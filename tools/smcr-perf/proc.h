/* proc.h: what smcr-perf reads about its own process: CPU time, resident memory, fd limit. */
#ifndef SMCR_PERF_PROC_H
#define SMCR_PERF_PROC_H

#include <stdint.h>

/* User + system CPU time of the whole process (every thread, the smcr progress thread
 * included), in microseconds. */
uint64_t perf_cpu_us(void);
/* Resident set size in KiB (/proc/self/statm), 0 if unreadable. Shared memory the process
 * touched (RMBs are memfd mappings) is included. */
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
