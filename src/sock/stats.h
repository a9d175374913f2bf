/* stats.h: the process's counters of the socket layer, and the SMCR_STATS line.
 *
 * What is counted (docs/CONFIG.md "SMCR_STATS"):
 *   - connections by the mode they ended up in: SMC-R, TCP (a rule or discovery chose TCP,
 *     or the handshake fell back) or failed (the handshake failed or was aborted), counted
 *     once per connection when its mode is decided;
 *   - TCP connections by local and by peer fallback reason (smcr_reason_name's names);
 *   - handshakes that failed, by error (the error table's name, or the errno's);
 *   - bytes the program moved over SMC-R and over TCP on smcr sockets (a TCP-mode smcr
 *     socket's send/recv pass through to libc and are counted on the way back);
 *   - the engine's CDC and LLC messages and its RMBE-full and window-stall events, read
 *     from core_engine_counters when a line is written.
 *
 * Cost on the data path: the byte counters live in one block per thread (struct
 * stats_blk in stats.c), owned by that thread; an add is a relaxed load and a relaxed
 * store of the thread's own cache line (no locked instruction, no shared line). A block
 * whose thread exited is taken over by the next new thread: its counts are the process's,
 * whichever thread made them. Connection and reason counters are relaxed atomics shared by
 * all threads (one add per connection).
 *
 * SMCR_STATS=FILE: at exit (atexit) and on SIGUSR2, if the program had no handler for it
 * when the library started (never replacing the program's own), one JSON line is appended
 * to FILE with one write(2) on an O_APPEND descriptor, so lines of concurrent processes do
 * not mix. The writer reads only atomics and formats by hand: it is async-signal-safe. */
#ifndef SMCR_SOCK_STATS_H
#define SMCR_SOCK_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Per-thread counters. */
enum stats_ctr {
	STATS_SMCR_SENT,
	STATS_SMCR_RECV,
	STATS_TCP_SENT,
	STATS_TCP_RECV,
	STATS_NCTR,
};

/* One thread's counters (stats.c). Written only by the owning thread (relaxed load+store),
 * read by any thread or a signal handler (relaxed loads). */
struct stats_blk {
	_Atomic uint64_t v[STATS_NCTR];
	_Atomic int owned;	   /* 1 while a thread holds it (acquire/release hand-over) */
	struct stats_blk *next;	   /* the list of all blocks (push-only, set before publish) */
	char pad[64 - (STATS_NCTR * 8 + 16) % 64];
};

extern _Thread_local struct stats_blk *stats_tl;
struct stats_blk *stats_blk_slow(void);

static inline void stats_add(enum stats_ctr c, uint64_t n)
{
	struct stats_blk *b = stats_tl;
	if (!b)
		b = stats_blk_slow();
	if (b)
		atomic_store_explicit(&b->v[c],
				      atomic_load_explicit(&b->v[c], memory_order_relaxed) + n,
				      memory_order_relaxed);
}

/* A data call's result r (bytes, or -1): counted as sent or received over SMC-R (smc) or
 * TCP, unless it is a peek. Returns r; errno is untouched. */
static inline ssize_t stats_io(bool smc, bool is_send, int flags, ssize_t r)
{
	if (r > 0 && (is_send || !(flags & MSG_PEEK)))
		stats_add((enum stats_ctr)((smc ? STATS_SMCR_SENT : STATS_TCP_SENT) + !is_send),
			  (uint64_t)r);
	return r;
}

enum stats_mode { STATS_MODE_SMCR, STATS_MODE_TCP, STATS_MODE_FAILED, STATS_NMODE };

/* A connection's mode is decided (once per connection). For STATS_MODE_TCP the reasons
 * (0: none) are counted too. */
void stats_conn(enum stats_mode m, uint32_t local_reason, uint32_t peer_reason);
/* A handshake failed with code (a -SMCR_E code or sock_err_sys(errno)): a failed
 * connection, counted by its error too. */
void stats_hs_failed(int code);
/* A connect in TCP mode (a rule or discovery chose TCP) returned rc: a connection when it
 * succeeded or is in progress (errno EINPROGRESS). Keeps errno. */
void stats_tcp_connect(int rc, uint32_t local_reason);

/* A snapshot of every counter (tests, the writer). */
#define STATS_REASONS 32 /* distinct reason codes kept per side; more go to "OTHER" */
#define STATS_HSERRS 16
struct stats_snap {
	uint64_t v[STATS_NCTR];
	uint64_t conns[STATS_NMODE];
	uint32_t reason_code[2][STATS_REASONS]; /* [0] local, [1] peer; 0: unused slot */
	uint64_t reason_n[2][STATS_REASONS];
	uint64_t reason_other[2];
	int hserr_code[STATS_HSERRS];
	uint64_t hserr_n[STATS_HSERRS];
	uint64_t hserr_other;
	bool have_engine;
	uint64_t cdc_sent, cdc_received, cdc_dropped, llc_sent, llc_received, llc_dropped;
	uint64_t rmbe_full, window_stall;
	/* two-link groups (core_engine_counters) */
	uint64_t links_added, links_failed, failovers, conns_moved;
	uint64_t delete_link_sent, delete_link_received;
};
void stats_snapshot(struct stats_snap *out);

/* Formats the SMCR_STATS line (with '\n') for event ("exit", "signal", ...) into buf;
 * returns its length, 0 if it does not fit. Async-signal-safe. */
size_t stats_format(char *buf, size_t len, const char *event);
/* The same, counting from base (a snapshot taken earlier; NULL: from the start). */
size_t stats_format_since(char *buf, size_t len, const char *event,
			  const struct stats_snap *base);
/* Appends the line to the SMCR_STATS file (no-op without SMCR_STATS). Returns 0, or -1
 * with errno. Async-signal-safe. */
int stats_write(const char *event);

#endif
