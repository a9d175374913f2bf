/* trace.h: SMCR_TRACE=FILE.pcapng, a capture of every SMC-R message of the process, as
 * Wireshark and tshark decode it with their SMC dissector (docs/CONFIG.md "SMCR_TRACE"):
 *   - CLC messages as TCP/IPv4 segments between the connection's addresses and ports,
 *     one message per segment, sequence numbers counted per connection and direction;
 *   - LLC and CDC messages as RoCE v1 RC SEND Only frames between the link's GIDs and
 *     MACs, destination QP the receiver's, with a real ICRC;
 *   - each RDMA WRITE as an RDMA WRITE Only frame whose RETH carries the remote address,
 *     R_Key and DMA length; the data itself is left out (a header, not the bytes).
 * Timestamps are CLOCK_REALTIME in nanoseconds (if_tsresol 9). The file is bounded by
 * SMCR_TRACE_MAX_MB (default 64): the record that would pass it is the last one tried, and a
 * warning says so. "%p" in the name becomes the pid (one file per process); without it a
 * forked child does not trace (the parent's file is the parent's).
 *
 * Threads: records come from program threads (CLC, sends) and the progress thread
 * (receives); each is one write(2) of a whole pcapng block, under a mutex of this file. */
#ifndef SMCR_SOCK_TRACE_H
#define SMCR_SOCK_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

struct sock;

/* True when SMCR_TRACE is on in this process (one relaxed load). */
bool trace_on(void);
/* A CLC message sent (out) or received on s's TCP connection. */
void trace_clc(struct sock *s, bool out, const uint8_t *msg, size_t len);
/* The engine's callback (core_engine_params.trace); NULL when tracing is off. */
void (*trace_core_fn(void))(void *ctx, const struct core_trace_ev *ev);

#endif
