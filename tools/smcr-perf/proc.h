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
/* The kernel's slab memory, system-wide (/proc/meminfo "Slab"), in KiB; 0 if unreadable.
 * The objects of every socket are there: a loopback TCP connection's two sockets (struct
 * tcp_sock, inode, file, dentry, epoll item) are ~6.5 KiB on this kernel, an AF_UNIX
 * socket pair ~3.9 KiB. In no process's PSS either, and the part of a TCP connection that
 * does not grow with data; over smcr it holds the hidden TCP connection and the signal
 * pairs. System-wide: another program's activity at the same time is counted too. */
uint64_t perf_slab_kib(void);
/* The kernel's share of the memory-per-connection figure: perf_slab_kib() +
 * perf_tcp_mem_kib(). */
uint64_t perf_kernel_mem_kib(void);
/* Waits, at most max_ms, until this process's PSS plus perf_kernel_mem_kib() stops
 * changing: three readings 20 ms apart, each within tol_kib of the one before. Memory
 * freed late by an earlier run (smcr reaps closed connections' hidden fds and RMBs on its
 * progress thread, up to ~200 ms after close; TCP's kernel objects go with the sockets'
 * last packets) would otherwise count against the next run's growth (a TCP run after an
 * smcr one showed -1 KiB per connection). Returns the milliseconds waited. */
unsigned perf_mem_settle(unsigned max_ms, uint64_t tol_kib);
/* Raises RLIMIT_NOFILE's soft limit to the hard limit (conns opens thousands of fds). */
void perf_raise_nofile(void);
/* 64 random bits (session ids). */
uint64_t perf_random64(void);

#endif
