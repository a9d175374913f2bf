/* core.h: the SMC-R protocol engine's contract with the socket layer (src/sock/).
 *
 * What the engine does (spec: docs/protocol/procedures.md, all of it; RFC 7609 3-4):
 *   - CLC client and server state machines over byte buffers (docs/protocol/procedures.md 2.2-2.4):
 *     the socket layer reads the TCP stream and writes what the engine gives it; the engine never
 *     touches a socket (docs/design/engine-decisions.md decision 1).
 *   - link groups (LG) and links: first contact, reuse, QP bring-up, CONFIRM LINK, the ADD
 *     LINK flow of a second link (symmetric or asymmetric), failover to it (docs/FAILOVER.md),
 *     CONFIRM/DELETE RKEY, TEST LINK, DELETE LINK, idle-LG freeing
 *     (docs/protocol/procedures.md 2.5-3.8);
 *   - RMBs (per-LG pool), the data path (RDMA WRITE + CDC, cursors, window updates, urgent
 *     data; docs/protocol/procedures.md 4) and close (D/C/A; docs/protocol/procedures.md 5);
 *   - RDMA I/O through dev/dev.h only (never a provider's header).
 *
 * Objects:
 *   struct core_engine  one per process (= one SMC-R instance, docs/protocol/linux-interop.md 5):
 *   its peer
 *                       ID, its devices (one PD per LG, one CQ per device), all LGs and
 *                       connections, all timers.
 *   struct core_conn    one per TCP connection that tries SMC-R (client or server side).
 *
 * Threads and locks (full list in docs/parts/core.md "Threads and locks"):
 *   Every function here may be called from any thread, concurrently, unless it says otherwise.
 *   Internally: engine lock (control state: LGs, links, CLC/LLC state machines, timers) ->
 *   connection lock (one connection's data path) -> link send lock (send slots, leaf).
 *   core_engine_progress serializes CQ processing with a try-lock (a second concurrent caller
 *   returns at once: somebody else is doing the work).
 *   Event callbacks (core_event_fn) are called with NO engine/connection lock held, but with
 *   the connection's callback lock held: a callback may call any function of this header
 *   except core_conn_release() (of any connection: two callbacks releasing each other's
 *   connections would deadlock) and core_engine_free().
 *
 * Time: the engine never reads a clock for protocol timers. Every call that can start, check
 * or expire a timer takes now_ns (CLOCK_MONOTONIC ns, util/clock.h smcr_now_ns() in
 * production; anything monotonic in tests, so tests jump time and run instantly).
 * core_engine_progress() returns the next deadline; the caller arms its timerfd with it.
 *
 * Errors: functions return 0 / a count, or -SMCR_E_<NAME> (util/err.h). smcr_err_errno()
 * gives the errno TCP would give (ECONNRESET, EPIPE, ETIMEDOUT, ENOTCONN, EAGAIN, ...).
 * This unit's rows: src/util/errors/core.def.
 *
 * Stability: this header only grows (additive changes). A breaking change is announced
 * loudly in the commit message (docs/design/engine-decisions.md). */
#ifndef SMCR_CORE_CORE_H
#define SMCR_CORE_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "util/err.h"
#include "wire/curs.h"
#include "wire/types.h"

struct core_engine;
struct core_conn;

/* ======================================================================================= */
/* Engine                                                                                  */

/* Timer values (docs/protocol/procedures.md 1). 0 in core_engine_params means "the spec
 * default". */
#define CORE_CLC_WAIT_NS (6ull * 1000000000ull)		/* next CLC message: 6 s */
#define CORE_CLC_WAIT_SHORT_NS (1ull * 1000000000ull)	/* Decline after an LLC timeout: 1 s */
#define CORE_LLC_WAIT_NS (2ull * 1000000000ull)		/* LLC response: 2 s */
#define CORE_LLC_WAIT_FIRST_NS (4ull * 1000000000ull)	/* client: first CONFIRM LINK: 4 s */
#define CORE_TESTLINK_NS (30ull * 1000000000ull)	/* link idle before TEST LINK: 30 s */
#define CORE_LG_FREE_SRV_NS (600ull * 1000000000ull)	/* idle LG kept, server role */
#define CORE_LG_FREE_CLNT_NS (610ull * 1000000000ull)	/* idle LG kept, client role */
#define CORE_CLOSE_WAIT_NS (30ull * 1000000000ull)	/* released conn: wait for peer's C/A */
#define CORE_CONNS_PER_LG_MAX 255			/* docs/protocol/procedures.md 6 */
#define CORE_RMBE_DEFAULT 65536u			/* Linux net.smc.rmem default */
/* RMBE auto-sizing (core_engine_params.rmbe_auto_max): for a
 * connection without SO_RCVBUF the engine then picks, like TCP's receive autotuning ends up
 * doing, rmbe_auto_max while it has few connections and less as they grow: the largest
 * power of two up to rmbe_auto_max that is at most rmbe_auto_budget (default
 * CORE_RMBE_AUTO_BUDGET) divided by the live connections when this one is made, never
 * below CORE_RMBE_DEFAULT. The share is taken at creation and an RMBE keeps its size, so
 * the total is not held to the budget: 1000 connections made one after another hold
 * about 158 MiB for a 64 MiB budget. Why bigger RMBEs
 * at all: a 64 KiB ring holds one 64 KiB write, so writer and reader take turns instead
 * of copying at the same time (docs/parts/tune.md "RMBE size"). Suggested:
 * CORE_RMBE_AUTO_MAX. */
#define CORE_RMBE_AUTO_MAX (512u * 1024u)
#define CORE_RMBE_AUTO_BUDGET (64ull << 20)
#define CORE_SNDBUF_DEFAULT 65536u			/* Linux net.smc.wmem default */
/* The send ring (docs/parts/sndbuf.md): its size is the smallest power of two >= sndbuf
 * (core_conn_params; 0 = CORE_SNDBUF_DEFAULT), at least CORE_SNDBUF_MIN, at most
 * CORE_SNDBUF_MAX. Like Linux SMC, which sizes its send buffer from half of sk_sndbuf
 * (= the value the program set; setsockopt doubles it) and rounds it like the RMB. */
#define CORE_SNDBUF_MIN 16384u
#define CORE_SNDBUF_MAX (1u << 20)
/* Corked bytes (CORE_MSG_MORE) are pushed at the latest this long after the first of them
 * was held: TCP's cork ceiling (200 ms, TCP_CORK in tcp(7)). */
#define CORE_CORK_NS (200ull * 1000000ull)

/* One traced event (core_engine_params.trace). Addresses are the link's: GIDs, MACs and
 * QP numbers of both ends. */
enum core_trace_kind {
	CORE_TRACE_SEND,  /* an LLC or CDC message posted as a SEND (msg, len 44) */
	CORE_TRACE_RECV,  /* one received (msg, len) */
	CORE_TRACE_WRITE, /* an RDMA WRITE posted: len bytes at remote_addr, rkey (no msg) */
};
struct core_trace_ev {
	enum core_trace_kind kind;
	const uint8_t *msg;
	size_t len;
	uint64_t remote_addr;
	uint32_t rkey;
	bool solicited;
	uint8_t local_gid[16], peer_gid[16];
	uint8_t local_mac[6], peer_mac[6];
	uint32_t local_qpn, peer_qpn;
};

/* The user EID table (the kernel's UEID table, docs/CONFIG.md SMCR_UEID): up to 8 EIDs of
 * 32 bytes each, upper case and blank padded (docs/parts/wire-v2.md 2.3). SMC-R v2 is
 * offered and accepted only with at least one. */
#define CORE_MAX_UEIDS 8
#define CORE_EID_LEN 32
struct core_ueid_table {
	uint8_t n;
	uint8_t eid[CORE_MAX_UEIDS][CORE_EID_LEN];
};

/* Adds the EIDs of text (separated by blanks or commas) to t as the kernel's UEID table
 * takes them: each normalised by the rules of wire-v2.md 2.3 (lower case made upper); an
 * invalid one, a duplicate or one past the 8th is not added. Returns how many entries were
 * not added (0: all were), so the caller can warn. */
int core_ueid_parse(const char *text, struct core_ueid_table *t);

struct core_engine_params {
	/* Devices to open with dev_open() (e.g. "shm", "emu:..."), in order of preference.
	 * The providers must already be registered (sock is the composition root). At least
	 * one must open; those that fail are logged and skipped. The first device's port-1
	 * MAC becomes the peer ID's MAC. */
	const char *const *devices;
	int ndevices;
	/* Peer ID instance number (2 bytes, docs/protocol/wire-formats.md 2.3); 0 = random. */
	uint16_t instance;
	/* Timer overrides (ns); 0 = the CORE_*_NS default above. */
	uint64_t clc_wait_ns;
	uint64_t clc_wait_short_ns;
	uint64_t llc_wait_ns;
	uint64_t llc_wait_first_ns;
	uint64_t testlink_ns;		/* UINT64_MAX: never send TEST LINK */
	uint64_t lg_free_srv_ns;
	uint64_t lg_free_clnt_ns;
	uint64_t close_wait_ns;
	/* Connections per LG before a new LG is made (server role); 0 = 255. Tests lower it. */
	unsigned conns_per_lg;
	/* RMBE auto-sizing for connections without rcvbuf (CORE_RMBE_AUTO_* above): the
	 * largest size (0 = off: CORE_RMBE_DEFAULT), and the bytes all auto-sized RMBEs may
	 * take together (0 = CORE_RMBE_AUTO_BUDGET). */
	uint32_t rmbe_auto_max;
	uint64_t rmbe_auto_budget;
	/* true: the final C of a connection (sent after the peer's C) is solicited like every
	 * other CDC. false (default): on a software device it is sent unsolicited, so it
	 * wakes no sleeper at the peer, whose program has closed (close.c "Quiet final C"). */
	bool close_solicited;
	/* Tracing (SMCR_TRACE, sock/trace.h): when set, called for every LLC or CDC message
	 * a link sends or receives and every RDMA WRITE it posts, on the thread that does it,
	 * with the link's lock state as it is there (the callback must not call core). NULL:
	 * no tracing, one test of a pointer per post. */
	void (*trace)(void *ctx, const struct core_trace_ev *ev);
	void *trace_ctx;
	/* The user EIDs (SMC-R v2); n = 0: v2 is neither offered nor accepted. */
	struct core_ueid_table ueids;
};

/* Creates the engine: opens the devices, one CQ per device, picks the peer ID.
 * -SMCR_E_DEV_NO_DEVICE if no device could be opened. The caller owns the engine. */
SMCR_MUST_CHECK int core_engine_new(const struct core_engine_params *p,
				    struct core_engine **out);

/* Tears everything down at once: every connection is aborted (A CDC where a link still
 * works; event callbacks see CORE_EV_ERR), every LG deleted (DELETE LINK all), QPs, MRs,
 * CQs and devices freed. Connections not yet released stay valid handles (all calls on them
 * return -SMCR_E_CORE_RESET) until core_conn_release(); the engine memory is freed with the
 * last of them. Must not be called from an event callback. */
void core_engine_free(struct core_engine *e);
/* Ends every link group in order, as a process that exits should (DELETE LINK all, orderly;
 * the peer's orderly end, not a link failure): the engine stays usable (a later connection
 * makes a new LG). Bounded (100 ms for the messages to leave). Not from a callback. */
void core_engine_end_lgs(struct core_engine *e, uint64_t now_ns);

/* The engine's peer ID (docs/protocol/wire-formats.md 2.3). */
struct wire_peer_id core_engine_peer_id(const struct core_engine *e);

/* File descriptors the caller waits on (epoll, POLLIN) to know progress is due: each
 * device's CQ completion fd and async-event fd. The set is fixed for the engine's life
 * (devices are opened by core_engine_new only). Returns how many were written (<= max),
 * or the number needed when fds is NULL. */
int core_engine_fds(const struct core_engine *e, int *fds, int max);
/* The CQ completion fds only (a subset of core_engine_fds, same rules): the fds a thread
 * that takes completions itself waits on (sock's direct wake, docs/parts/stream.md
 * "Direct wake"). */
int core_engine_cq_fds(const struct core_engine *e, int *fds, int max);

/* Does all pending work: polls every CQ until empty (send completions, LLC and CDC
 * messages, validated before they change anything), consumes CQ and async events, runs
 * every timer due at now_ns (CLC, LLC, TEST LINK, idle LG, close), sends window updates
 * due. Fires event callbacks for connections whose state changed (after dropping its
 * locks). Never blocks: if another thread is inside progress, returns 0 at once.
 * *next_deadline_ns (may be NULL) gets the earliest timer deadline (UINT64_MAX if none).
 * Returns the number of completions and timers handled (0 = nothing was due).
 * It never consumes CQ events nor arms the CQs (prepare_sleep does both). A program thread
 * that calls it in a loop should bracket the loop with core_engine_spin_begin/end (below):
 * then no completion wakes the progress thread meanwhile, and spin_end leaves the CQs armed
 * (sock-wishes.md item 3). */
int core_engine_progress(struct core_engine *e, uint64_t now_ns, uint64_t *next_deadline_ns);

/* Call before sleeping on core_engine_fds(): consumes the CQ events pending on the fds,
 * arms every CQ (dev_req_notify_cq) and checks once more. Returns 0 if it is safe to sleep
 * (an fd will become readable on the next completion), 1 if work arrived meanwhile or
 * another thread is processing (call core_engine_progress again first). Any thread may call
 * it: whatever completed before the arm is handled by its own check, so a sleeper whose
 * fd event it consumed loses nothing. core_engine_progress never consumes fd events. */
int core_engine_prepare_sleep(struct core_engine *e);
/* Connections in close_wait (core_conn_info): the program closed them and the peer's C/A
 * (or our own, behind queued bytes) is still to come. A peer's final C may come
 * unsolicited (close.c "Quiet final C"): a caller that sees a count > 0 makes sure the CQs
 * are polled again within a bound (the socket layer's close reaper). Takes eng->lock and
 * each conn's lock. */
unsigned core_engine_close_waits(struct core_engine *e);

/* Spinning (docs/parts/tune.md "Spinning"). A thread that polls
 * the engine in a loop for a short time before it sleeps (a blocking call's brief spin,
 * docs/design/engine-decisions.md decision 3) brackets the loop with these two and calls only
 * core_engine_progress inside it, never core_engine_prepare_sleep:
 *
 *     core_engine_spin_begin(e, now);
 *     do { if (ready) break; core_engine_progress(e, now, NULL); } while (now < until);
 *     core_engine_spin_end(e);
 *     ... then sleep (poll on the program's fd) if not ready ...
 *
 * While at least one thread is between begin and end, the CQs are disarmed: the peer
 * writes no eventfd and the thread sleeping on core_engine_fds() (the progress thread) is
 * not woken by completions the spinner handles itself; prepare_sleep does not arm them
 * either. The last spin_end arms them again and polls once more (what prepare_sleep
 * does), so a sleeper loses nothing. A spin older than 1 ms no longer holds the arms off
 * (a spinner that lost its CPU): core_engine_progress reports that moment as a deadline,
 * and prepare_sleep arms after it. Every begin must be followed by exactly one end (any
 * thread may call them; they nest by count). */
void core_engine_spin_begin(struct core_engine *e, uint64_t now_ns);
void core_engine_spin_end(struct core_engine *e);
/* Whether a thread spins now (between spin_begin and spin_end, within its grace), i.e.
 * the CQs stay unarmed and that thread polls them. A progress thread whose
 * prepare_sleep answered 1 (work came in) can then sleep until its next deadline instead
 * of polling again: the spinner handles the completions and its spin_end arms the CQs
 * (otherwise the two pollers fight over the engine's locks: tens of thousands of futex
 * calls a second in a stream). */
bool core_engine_spinning(struct core_engine *e);
/* A spin older than this no longer keeps the CQs unarmed (a spinner that lost its CPU);
 * also the lease a blocking data call takes at its start (sock/data.c). */
#define CORE_SPIN_GRACE_NS 1000000ull
/* For the thread that sleeps on core_engine_fds (the progress thread): true if a spin is
 * held and live at now_ns (its holder polls and fires the callbacks, so the sleeper has
 * nothing to do and must not compete for the engine's locks); then the CQ events pending
 * on the fds are consumed (a level-triggered wait would return at once again) and
 * *until_ns gets the moment to look again (the spin's end, or an earlier timer). false
 * (also when an engine timer is due: the holder runs timers only at its calls): do the
 * usual core_engine_progress + core_engine_prepare_sleep. */
bool core_engine_spin_live(struct core_engine *e, uint64_t now_ns, uint64_t *until_ns);
/* The lease (docs/design/readiness.md; the one primitive of the socket layer's wait
 * policy, sock/waitpol.h). until_ns > now_ns: the CQs stay unarmed until until_ns (a
 * lease already running is moved to until_ns, earlier or later: last caller wins), so
 * completions write no comp fd and wake no sleeper; the caller, or whoever it relies on,
 * polls the engine (core_engine_progress) meanwhile. prepare_sleep does not arm within
 * the lease, core_engine_progress reports its end as a deadline, and the thread
 * sleeping on core_engine_fds stands back until then (core_engine_spin_live). The caller
 * makes sure that thread looks again by until_ns if it sleeps (sock: only a lease within
 * the progress thread's next deadline). until_ns <= now_ns: the lease ends, the CQs are
 * armed (unless a spinner keeps them off) and polled once more: a thread about to sleep
 * on the comp fds calls this first. Returns 1 if that poll handled completions (look
 * again before sleeping), else 0. now_ns: the caller's clock (the engine reads none). */
int core_engine_lease(struct core_engine *e, uint64_t now_ns, uint64_t until_ns);

struct core_engine_stats {
	struct wire_peer_id peer_id;
	unsigned ndevices;
	unsigned lgs;			/* link groups alive (including idle ones) */
	unsigned lgs_idle;		/* of which without connections */
	unsigned links;
	unsigned conns;			/* connection objects alive (any state) */
	unsigned rmbs;			/* RMBs allocated (in use + pooled) */
	uint64_t rmb_bytes;
	uint64_t lgs_created;		/* counters since start */
	uint64_t lgs_freed;
	uint64_t conns_created;
	uint64_t conns_freed;
	uint64_t cdc_rx_dropped;	/* CDCs rejected by validation (unknown token, bad cursor, ..) */
	uint64_t llc_rx_dropped;	/* LLC messages dropped (unknown type, out of order, ..) */
	/* Two-link groups (docs/FAILOVER.md): links added by ADD LINK, failovers (connections
	 * moved off a failed link to the surviving one), and failovers by what brought the link
	 * down: [0] error completion, [1] device/QP event, [2] TEST LINK unanswered, [3] the
	 * peer deleted it, [4] no send slot, [5] an asymmetric link replaced (a device came
	 * back). */
	uint64_t links_added;
	uint64_t failovers;
	uint64_t failover_reason[6];
};
void core_engine_stats(struct core_engine *e, struct core_engine_stats *st);

/* Counters since the engine started, read without a lock (atomic loads only: safe in a
 * signal handler; the socket layer's SMCR_STATS line, sock/stats.h). rmbe_full: a write
 * found the peer's RMBE full (the connection's writer-blocked flag went up,
 * docs/protocol/procedures.md 4.3); window_stall: a send found the send ring full and had to wait
 * or give EAGAIN. */
struct core_engine_counters {
	uint64_t cdc_sent, cdc_received, cdc_dropped;
	uint64_t llc_sent, llc_received, llc_dropped;
	uint64_t rmbe_full, window_stall;
	/* Two-link groups (docs/FAILOVER.md): links added by ADD LINK (not a group's first),
	 * links declared down (any reason, also a link being added), failovers (a failed
	 * link's connections moved to the surviving one), connections so moved, DELETE LINK
	 * messages sent and received (requests and answers, one link or the whole group). */
	uint64_t links_added, links_failed, failovers, conns_moved;
	uint64_t delete_link_sent, delete_link_received;
};
void core_engine_counters(const struct core_engine *e, struct core_engine_counters *ct);


/* ======================================================================================= */
/* Connections: creation, events, release                                                  */

enum core_role {
	CORE_CLIENT = 1,	/* TCP active opener: sends the Proposal */
	CORE_SERVER = 2,	/* listener side: waits for the Proposal */
};

/* Event bits, as poll() would report them for a TCP socket in the same state
 * (docs/parts/core.md "Readiness"). */
enum core_event {
	CORE_EV_IN = 1u << 0,	 /* readable: data, or EOF (peer sent D/C and all is read), or error */
	CORE_EV_OUT = 1u << 1,	 /* writable: the send ring has room (a send would accept a byte;
				    docs/parts/sndbuf.md), or the write side is dead */
	CORE_EV_PRI = 1u << 2,	 /* urgent data announced/present and not yet read (POLLPRI) */
	CORE_EV_RDHUP = 1u << 3, /* peer will send no more (D, C or A received) */
	CORE_EV_HUP = 1u << 4,	 /* both directions finished, or the connection was reset */
	CORE_EV_ERR = 1u << 5,	 /* a pending error (core_conn_error) */
	CORE_EV_CLC = 1u << 6,	 /* handshake: core_conn_clc_step() has something new (only in
				    raised, never in the level mask) */
	CORE_EV_IN_NEW = 1u << 7,/* only in raised: new bytes (or EOF/error) arrived even though
				    CORE_EV_IN may already have been set (an edge for EPOLLET) */
};

/* Called when a connection's readiness changes because of something other than the
 * caller's own call on it (a CDC arrived, a send completion freed space, a timer fired, the
 * LG died, the handshake advanced in the background). events = the level mask now
 * (core_conn_events()), raised = bits that went from 0 to 1 plus CORE_EV_CLC / IN_NEW.
 * Any thread; no engine/connection lock held; never two at once for one connection; see the
 * lock note at the top for what it may call. Changes caused by the caller's own send/recv/
 * shutdown/close do not call it: re-read core_conn_events() after such calls. */
typedef void (*core_event_fn)(void *ctx, struct core_conn *c, unsigned events, unsigned raised);

/* An IP prefix of the local interface the TCP connection uses (getifaddrs), for the
 * Proposal's IP area and the server's prefix check (docs/protocol/wire-formats.md 3.3). */
struct core_ip_prefix {
	int family;		/* AF_INET or AF_INET6 */
	uint8_t addr[16];	/* network order; IPv4 in the first 4 bytes */
	uint8_t len;		/* prefix length */
};
#define CORE_MAX_PREFIXES 8

struct core_conn_params {
	enum core_role role;
	/* The TCP connection's addresses (getsockname / getpeername). An IPv4-mapped IPv6
	 * address counts as IPv4 (docs/protocol/wire-formats.md 3.3). */
	struct sockaddr_storage local;
	struct sockaddr_storage peer;
	/* Prefixes of the local interface (up to CORE_MAX_PREFIXES, copied). With none, the
	 * local address itself is used with a full-length prefix (/32 or /128): then client
	 * and server only match when they share the address (loopback). */
	const struct core_ip_prefix *prefixes;
	int nprefixes;
	/* Sizes (SO_RCVBUF / SO_SNDBUF as the program set them; 0 = defaults). The RMBE is the
	 * smallest power of two >= rcvbuf in 16 KiB..512 KiB (docs/protocol/wire-formats.md 8.1);
	 * rcvbuf 0: CORE_RMBE_DEFAULT, or auto-sized if the engine has rmbe_auto_max (above). */
	uint32_t rcvbuf;
	uint32_t sndbuf;
	bool oobinline;			/* SO_OOBINLINE (also core_conn_set_oobinline) */
	core_event_fn cb;		/* may be NULL */
	void *cb_ctx;
};

/* Creates a connection object in handshake state; nothing is sent yet. The caller owns one
 * reference, dropped by core_conn_release(). */
SMCR_MUST_CHECK int core_conn_new(struct core_engine *e, const struct core_conn_params *p,
				  struct core_conn **out);

/* Drops the caller's reference. After it returns the callback is never called again and
 * the handle must not be used. If the connection is still open it is closed first as by
 * core_conn_close(c, false, now_ns); the engine finishes the close protocol in the
 * background (waiting at most close_wait_ns for the peer's C/A) and then frees the
 * connection and returns its RMB to the LG's pool. Must not be called from c's callback. */
void core_conn_release(struct core_conn *c, uint64_t now_ns);

/* ======================================================================================= */
/* CLC handshake (docs/protocol/procedures.md 2.2-2.4), driven by the socket layer                */

enum core_clc_status {
	/* Waiting for more TCP bytes from the peer (or the deadline). */
	CORE_CLC_NEED_INPUT = 1,
	/* Waiting for the link (CONFIRM LINK, CONFIRM RKEY): keep feeding TCP bytes (a Decline
	 * may come) and call again on CORE_EV_CLC or at the deadline. */
	CORE_CLC_WAIT_LINK = 2,
	/* SMC-R is up: from now on data goes through core_conn_send/recv. The TCP connection
	 * stays open, idle, and is watched for FIN/RST (core_conn_tcp_event). */
	CORE_CLC_SMC = 3,
	/* Fall back to TCP on the same connection: write out[] first (a Decline, possibly
	 * empty when the peer declined), then the TCP socket is the connection. in[] bytes after
	 * consumed are application data. Reasons: core_conn_info(). */
	CORE_CLC_FALLBACK = 4,
	/* The connection fails (client: connect() error; server: drop it, never hand it to the
	 * program): CLC timeout, malformed CLC, TCP error. err has the code (e.g.
	 * -SMCR_E_CORE_CLC_TIMEOUT -> ETIMEDOUT, a -SMCR_E_CLC_* framing error -> EPROTO). */
	CORE_CLC_FAILED = 5,
};

struct core_clc_result {
	enum core_clc_status status;
	/* Bytes to write to the TCP connection now, in full, before anything else (blocking
	 * write is fine: CLC messages are small). Points into the connection; valid until the
	 * next call on c. */
	const uint8_t *out;
	size_t out_len;
	/* How many of the in bytes were CLC and are consumed; the caller keeps the rest and
	 * passes it again (with more) next time. After FALLBACK, in[consumed..] is data. */
	size_t consumed;
	int err;			/* CORE_CLC_FAILED: the -SMCR_E_ code */
	uint64_t deadline_ns;		/* call again by then even without input (UINT64_MAX: none) */
};

/* Advances the handshake. in/len: TCP bytes received and not yet consumed (may be 0/NULL).
 * The client's first call (no input) produces the Proposal. Call it: at the start; whenever
 * TCP bytes arrive; on CORE_EV_CLC; at deadline_ns. tcp_eof: the TCP connection got
 * EOF/RST/error (the handshake then fails, or falls back if a Decline was consumed).
 * Returns 0 and fills *r, or a negative code for misuse (-SMCR_E_INVAL: not in handshake).
 * Once SMC, FALLBACK or FAILED is returned, later calls return the same status with no out
 * bytes. */
SMCR_MUST_CHECK int core_conn_clc_step(struct core_conn *c, const void *in, size_t len,
				       bool tcp_eof, uint64_t now_ns, struct core_clc_result *r);

/* The program decided against SMC before any CLC byte: record a local fallback reason
 * (e.g. 0x03010000 PEERNOSMC when the SYN-ACK lacked the option) without sending anything.
 * The connection is then in FALLBACK. */
void core_conn_set_fallback(struct core_conn *c, uint32_t reason);

/* Called by sock when the hidden TCP socket of an SMC-mode connection reports something:
 * rst = true for RST / error (the connection is aborted: ECONNRESET, A CDC if possible);
 * rst = false for FIN, which is only noted (docs/protocol/linux-interop.md 8: the FIN may arrive
 * before the peer's C CDC; it is not the end of the SMC data stream). */
void core_conn_tcp_event(struct core_conn *c, bool rst, uint64_t now_ns);

/* ======================================================================================= */
/* Data (docs/protocol/procedures.md 4)                                                           */

/* Flags of send/recv (values are smcr's own; sock maps MSG_*). */
enum core_msg_flags {
	CORE_MSG_OOB = 1u << 0,		/* send: last byte is urgent; recv: read the urgent byte */
	CORE_MSG_PEEK = 1u << 1,	/* recv: copy without consuming */
	CORE_MSG_MORE = 1u << 2,	/* send: more follows (may delay the CDC; TCP_CORK too) */
};

/* Sends up to the total iovec length. Never blocks. With the send ring empty and nothing
 * corked, the bytes that fit into the peer's RMBE are written straight from the iovec (RDMA
 * WRITEs, at most two pieces per wrap of the peer's ring, and one CDC); the rest is copied
 * into the connection's send ring (sized from sndbuf, core_conn_params) and written by the
 * engine when the peer's consumer cursor moves or a send slot frees (docs/parts/sndbuf.md).
 * With CORE_MSG_MORE (MSG_MORE, TCP_CORK) bytes are held in the ring until they reach half
 * of the smaller of the ring and the peer's RMBE, a send without CORE_MSG_MORE (a
 * zero-length one too), core_conn_flush, shutdown/close, or CORE_CORK_NS passed.
 * Returns bytes accepted (> 0; fewer than asked when the ring fills), or:
 *   -SMCR_E_AGAIN        the ring is full; CORE_EV_OUT is raised when it has room
 *   -SMCR_E_CORE_PIPE    write side shut down / connection closed, or a send after the
 *                        peer's C that is not the first (EPIPE; sock raises SIGPIPE unless
 *                        MSG_NOSIGNAL)
 *   -SMCR_E_CORE_RESET   connection reset (ECONNRESET); a pending error is reported once
 *                        with its own code
 *   -SMCR_E_CORE_NOTCONN not (yet) in SMC mode (ENOTCONN)
 * After the peer's C (it reads no more) the first send is taken whole and its bytes
 * dropped, as TCP's write to a peer that closed: EPIPE is then pending (core_conn_error,
 * CORE_EV_ERR and CORE_EV_HUP) and the next send gets it; reads still end at EOF.
 * A zero-length send returns 0 (without CORE_MSG_MORE it pushes held bytes). With
 * CORE_MSG_OOB, the last byte of the data is the urgent byte (docs/protocol/procedures.md 4.6); it
 * is accepted only if all of it fits (else -SMCR_E_AGAIN); from the ring, the CDC that
 * completes it carries P/U. The cork ceiling counts from the engine's latest progress time
 * (core_conn_send_at takes the caller's). */
SMCR_MUST_CHECK long core_conn_send(struct core_conn *c, const struct iovec *iov, int iovcnt,
				    unsigned flags);

/* core_conn_send with the caller's time (for the cork ceiling). *timer_ns (may be NULL)
 * gets the deadline this call armed (held bytes to push by then), UINT64_MAX if none: a
 * caller whose progress loop sleeps with the engine's next deadline must wake it to sleep
 * shorter. */
SMCR_MUST_CHECK long core_conn_send_at(struct core_conn *c, const struct iovec *iov,
				       int iovcnt, unsigned flags, uint64_t now_ns,
				       uint64_t *timer_ns);

/* Pushes bytes held by CORE_MSG_MORE (TCP_CORK off). Same as a zero-length send without
 * CORE_MSG_MORE. 0, or the send error codes. */
int core_conn_flush(struct core_conn *c);

/* Receives into the iovec from the local RMBE. Never blocks. Returns bytes (> 0), 0 at
 * end of stream (peer sent D or C and everything before it was read), or:
 *   -SMCR_E_AGAIN        nothing to read yet
 *   -SMCR_E_CORE_RESET   connection reset by the peer (A) (ECONNRESET); data that arrived
 *                        before the A is returned first. The reset is reported once (as
 *                        TCP), then reads return 0. Other abort causes report their own
 *                        code, always with errno ECONNRESET or ETIMEDOUT (use
 *                        smcr_err_errno): CORE_LINK_DOWN (QP error, peer gone, DELETE
 *                        LINK), CORE_TIMEDOUT (TEST LINK unanswered), CORE_BAD_CURSOR,
 *                        CORE_LLC_VIOLATION, CORE_FAILOVER_LOST (hostile/broken peer). After
 *                        an LG failure the unread data is gone (the RMB is freed).
 *   -SMCR_E_CORE_NOTCONN not in SMC mode
 *   -SMCR_E_CORE_OOB_INVAL CORE_MSG_OOB with no urgent byte or with SO_OOBINLINE (EINVAL)
 * Reads stop at the urgent mark, as TCP's do (the mark is the first byte of a read).
 * Without oobinline the urgent byte is not part of the stream; CORE_MSG_OOB returns it
 * once. A consumer-cursor CDC is sent when the window-update rule says so (4.5). */
SMCR_MUST_CHECK long core_conn_recv(struct core_conn *c, const struct iovec *iov, int iovcnt,
				    unsigned flags);

/* SO_OOBINLINE changed. */
void core_conn_set_oobinline(struct core_conn *c, bool on);

/* ======================================================================================= */
/* Close (docs/protocol/procedures.md 5)                                                          */

/* shutdown(): how = SHUT_RD, SHUT_WR or SHUT_RDWR. SHUT_WR sends D ("sending done") once,
 * after every byte of the send ring was written (held bytes are pushed; until then sends
 * fail with EPIPE as after the D);
 * SHUT_RD only makes reads return 0 (as TCP; nothing is sent); SHUT_RDWR = both (D, not C:
 * the socket is not closed yet). 0, or -SMCR_E_CORE_NOTCONN. The caller then does the TCP
 * action of docs/protocol/procedures.md 5.1 (shutdown(SHUT_WR) of the TCP socket after SHUT_WR). */
SMCR_MUST_CHECK int core_conn_shutdown(struct core_conn *c, int how, uint64_t now_ns);

/* close(): sends C, or A when unread data is left in the RMBE or abort is true (SO_LINGER
 * with l_linger 0). The C goes after every queued byte of the send ring (the engine writes
 * them in the background, as TCP sends after close; if they cannot all be written within
 * close_wait_ns, A); an A drops them. Idempotent. Afterwards send/recv fail. The TCP side: after C the
 * caller shuts the TCP socket down (active closer: shutdown(SHUT_RDWR) right after the C);
 * after A it resets it (SO_LINGER 0 + close) — core_conn_info().tcp_action says which. */
void core_conn_close(struct core_conn *c, bool abort, uint64_t now_ns);

/* ======================================================================================= */
/* State queries                                                                           */

/* The level mask of enum core_event (without CORE_EV_CLC / IN_NEW). In handshake or
 * fallback mode: 0. */
unsigned core_conn_events(struct core_conn *c);

/* Takes the pending error (SO_ERROR semantics: returned once, then cleared): 0 or a
 * -SMCR_E_ code (smcr_err_errno gives ECONNRESET, ETIMEDOUT, ...). */
int core_conn_error(struct core_conn *c);

enum core_mode {
	CORE_MODE_HANDSHAKE = 1,	/* CLC in progress */
	CORE_MODE_SMC = 2,		/* SMC-R active (also while closing) */
	CORE_MODE_FALLBACK = 3,		/* plain TCP */
	CORE_MODE_FAILED = 4,		/* handshake failed, connection unusable */
};

/* What sock does with the TCP socket after core_conn_close (docs/protocol/procedures.md 5.1). */
enum core_tcp_action {
	CORE_TCP_KEEP = 0,		/* leave it open (still active / handshake) */
	CORE_TCP_SHUTDOWN = 1,		/* C sent: shutdown(SHUT_RDWR) now, close with the socket */
	CORE_TCP_RESET = 2,		/* A sent / aborted: reset it (SO_LINGER 0, close) */
};

/* Everything tools, tests and the smcr-level getsockopt read (values at the time of the
 * call; cursors copied as whole 64-bit values). */
struct core_conn_info {
	enum core_mode mode;
	enum core_role role;
	const char *state;		/* "ACTIVE", "PEERCLOSEWAIT1", ... (docs/protocol/procedures.md 5.2) */
	uint32_t fallback_local;	/* decline code we sent / our reason; 0 = none */
	uint32_t fallback_peer;		/* decline code the peer sent; 0 = none */
	int error;			/* pending error (not cleared), 0 = none */
	bool first_contact;		/* this connection created its LG */
	uint8_t smc_version;		/* SMC-R version of the handshake: 1, or 2 (v2 ran) */
	uint32_t lg_id;			/* engine-local LG number (0 = none) */
	uint8_t link_num;		/* link the connection uses (wire link number) */
	struct wire_peer_id peer_id;	/* the peer's SMC-R instance */
	uint32_t token_local;		/* our alert token (the peer puts it in its CDCs) */
	uint32_t token_peer;
	uint32_t rmbe_size;		/* our RMBE (receive ring) */
	uint32_t peer_rmbe_size;	/* the peer's RMBE we write into */
	uint32_t sndbuf_size;
	struct curs tx_prod;		/* where we write next in the peer's RMBE */
	struct curs tx_peer_cons;	/* the peer's last reported consumer cursor */
	struct curs rx_peer_prod;	/* the peer's last reported producer cursor */
	struct curs rx_cons;		/* how far we have read our RMBE */
	struct curs rx_cons_sent;	/* last consumer cursor we told the peer */
	uint32_t readable;		/* bytes (FIONREAD; the urgent byte excluded unless inline) */
	uint32_t unacked;		/* bytes written not yet consumed by the peer (SIOCOUTQ = this
					   + sndbuf_queued) */
	uint32_t writable;		/* free space in the peer's RMBE */
	bool at_mark;			/* SIOCATMARK */
	enum core_tcp_action tcp_action;
	uint64_t bytes_sent, bytes_received;
	uint64_t cdc_sent, cdc_received;
	/* send ring (sndbuf_size above is the ring's size) */
	uint32_t sndbuf_queued;		/* bytes in the ring, not yet written (SIOCOUTQ adds unacked) */
	bool sndbuf_held;		/* the connection holds a ring's memory now (an empty one is
					 * given back to the process's list: core_ring_pool_bytes) */
	bool corked;			/* bytes are held by CORE_MSG_MORE */
	bool close_pending;		/* D or C waits for the ring to empty */
	/* The program closed, the close exchange is not complete
	 * (our C/A or the peer's is still to come) and the connection holds its RMB. */
	bool close_wait;
	/* The link and the LG (all 0 while not attached to an LG): */
	uint32_t qpn_local;		/* our QP of the link carrying the connection */
	uint32_t qpn_peer;		/* the peer's QP of that link (its qpn_local) */
	uint8_t gid_local[16];		/* our GID on that link (v2: the RoCE v2 one) */
	uint8_t gid_peer[16];		/* the peer's GID on that link */
	uint8_t lg_links;		/* links of the LG in state ACTIVE now */
	uint16_t lg_conns;		/* connections attached to the LG now (this one included) */
	/* TCP's FIONREAD/SIOCINQ (tcp_inq): without oobinline, while the urgent byte is at or
	 * after the consumer cursor, only the bytes before it (0 at the mark, even when bytes
	 * follow it); otherwise every byte not yet read. readable (above) is poll's count. */
	uint32_t inq;
	/* The peer's C or A arrived (it will neither send nor
	 * read any more; docs/protocol/procedures.md 5.1), so its TCP FIN/RST tells nothing new. */
	bool peer_closed;
	/* The peer died with its link and sent no close: the end of the stream (EOF or a
	 * reset) waits for its TCP connection's FIN or RST (core_conn_tcp_event). */
	bool lost_wait;
	/* The connection's link is on a software device (shm, emu), whose peer is always
	 * smcr (sock/api.c: the RST of a closed peer's TCP side). false once the connection
	 * left its link (a finished close). */
	bool soft_dev;
};
/* Bytes of empty send rings kept for reuse by this process's connections (ringpool.c). */
uint64_t core_ring_pool_bytes(void);
void core_conn_info(struct core_conn *c, struct core_conn_info *info);

/* One link group as smcr-stat -L shows it (core_lgr_list): a snapshot under the engine
 * lock, written and read by the caller's thread only. */
#define CORE_LGR_INFO_LINKS 3
struct core_lgr_info {
	uint32_t id;			/* engine-local LG number */
	enum core_role role;
	const char *state;		/* "SETUP", "ACTIVE", "DEAD" */
	uint8_t smc_version;		/* 1, or 2 (SMC-R v2) */
	uint16_t conns;			/* connections attached now */
	uint64_t failovers;		/* the group's failovers so far (docs/FAILOVER.md) */
	uint8_t nlinks;			/* entries of links[] filled */
	struct core_link_info {
		uint8_t link_num;	/* wire link number */
		const char *state;	/* "SETUP", "ACTIVE", "DOWN" */
		uint32_t qpn_local, qpn_peer;
		uint8_t gid_local[16], gid_peer[16];
		char dev[32];		/* our device's name */
		unsigned conns;		/* connections writing on this link */
	} links[CORE_LGR_INFO_LINKS];
};
/* Fills out[0..max) with the engine's link groups (oldest first is not promised);
 * returns how many there are, which may exceed max. */
int core_lgr_list(struct core_engine *e, struct core_lgr_info *out, int max);

#endif
