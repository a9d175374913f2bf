/* core_int.h: the engine's internal objects (engine, device, link group, link, RMB,
 * connection), shared by the files of src/core/. Not for other layers: they use core.h.
 *
 * Locks (STYLE.md 18), in lock order; a lock may only be taken while holding locks above it:
 *   1. eng->poll_lock    serializes CQ processing (core_engine_progress, try-lock only).
 *   2. conn->cb_lock     held while conn's event callback runs (never with 3-5 held).
 *   3. eng->lock         control state: the LG list and every lgr/link field not marked
 *                        otherwise, every conn field marked [E] (handshake, LG slot,
 *                        timers), the RMB pool, LLC flows, engine counters.
 *   4. conn->lock        one connection's data path: fields marked [C].
 *   5. link->tx_lock     a link's send slots and send-queue accounting (leaf).
 *   eng->ev_lock         the queue of connections with events to report (leaf).
 * Fields marked [EC] are written with both 3 and 4 held and may be read with either.
 * Fields marked [I] are set before the object is visible to other threads and not changed
 * afterwards. */
#ifndef SMCR_CORE_INT_H
#define SMCR_CORE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/core.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "util/log.h"
#include "wire/cdc.h"
#include "wire/clc.h"
#include "wire/clc_v2.h"
#include "wire/llc.h"
#include "wire/llc_v2.h"

#define CORE_UNIT "core"
#define CORE_NEVER UINT64_MAX

/* Per link (docs/protocol/procedures.md 2.6, docs/protocol/linux-interop.md 6; Linux values). */
#define CORE_SEND_SLOTS 16		/* 44-byte messages in flight per link */
#define CORE_MAX_WRITES 4		/* WRITE WRs per CDC (2 per ring wrap; more for long iovecs) */
#define CORE_SQ_DEPTH (CORE_SEND_SLOTS * (CORE_MAX_WRITES + 1))
#define CORE_LLC_RESERVE 2		/* slots data sends leave for LLC messages */
#define CORE_STAGE 65536u		/* staging bytes per slot (small-inline providers) */
/* Receive buffers per link: Linux posts 48 (3 x its 16 send buffers). Local only (no wire
 * field carries it), and more here: a peer's CDCs beyond our posted receives block its send
 * queue (shm: no credit; RC: RNR), and each of its WRITEs queued behind is copied once more
 * (shm's big-inline copy). With 1000 connections on a few links 48 blocked it all the time:
 * conns 1000 ran faster with 160 than with 48 in every alternating compare
 * (docs/parts/conns.md "Memory", figures in docs/history/conns.md). Our providers' CQs grow, so the
 * 8192 CQEs per device below are not a bound on links. */
#define CORE_RECV_BUFS 160
#define CORE_MSG_BUF 64			/* slot / receive buffer stride (>= 44) */
/* A v2 LG's LLC messages can be longer (docs/parts/wire-v2.md 7: up to 8192 bytes; ADD LINK
 * with its RKey list, DELETE RKEY with many keys). As Linux does, each receive of a v2 link
 * gets a second SGE into one tail buffer the link's receives share, and a long send takes
 * its bytes past the slot from one tail buffer for sending: 16 KiB per link, not 8 KiB per
 * receive. A shared tail holds one long message at a time: a second one arriving before
 * the first is handled would overwrite it. Linux shares its tail the same way; its long
 * messages (ADD LINK v2, long DELETE RKEY / REQUEST ADD LINK) are each a flow's request or
 * answer, and a flow waits for its answer (docs/protocol/procedures.md 3.1), so two in
 * flight at once is not expected. A send waits for the previous long send's completion
 * (link_send_long). */
#define CORE_V2_TAIL (8192 - CORE_MSG_BUF)
#define CORE_CQE_PER_DEV 8192		/* one CQ per device for every QP on it */
#define CORE_LG_SLOTS 256		/* conn slots 1..255; alert token = gen << 8 | slot */
#define CORE_RTOKENS_MAX 255		/* peer RMBs remembered per LG (docs/protocol/procedures.md 6) */
#define CORE_MAX_DEVS 4
/* Links per LG (docs/protocol/procedures.md 6, docs/protocol/linux-interop.md 7): Linux keeps a
 * table of 3 of which at most 2 are in use (the third slot holds a replacement being built while a
 * failed link is still being deleted) and announces "max links 2" in CONFIRM LINK. smcr keeps the
 * same, so an LG with a Linux peer never holds more links than that peer will. */
#define CORE_LG_LINKS 3
#define CORE_LG_LINKS_USABLE 2
/* The wait for the CONFIRM LINK on an added link (docs/protocol/procedures.md 1: Linux
 * SMC_LLC_WAIT_FIRST_TIME). */
#define CORE_AL_CONFIRM_WAIT_NS (5ull * 1000000000ull)
/* Senders waiting for a send slot this long with no send completing: the link is down
 * (docs/protocol/procedures.md 1: Linux SMC_WR_TX_WAIT_FREE_SLOT_TIME). */
#define CORE_NOSLOT_NS (10ull * 1000000000ull)

/* wr_id layout: link id in the top 32 bits, then kind and index. */
#define CORE_WR_RECV 0x10000u
#define CORE_WR_SLOT 0x20000u
#define CORE_WR_WRITE 0x40000u

struct core_lgr;
struct core_link;
struct core_conn;

/* One opened device. [I] except cq (created at open, destroyed at engine free). */
struct core_dev {
	struct core_engine *eng;
	struct dev_device *dev;
	struct dev_device_attr attr;
	struct dev_port_attr port;
	uint8_t port_num;
	uint8_t gid_index;
	struct dev_gid_entry gid;	/* our GID and MAC for CLC/LLC (SMC-R v1) */
	/* The first RoCE v2 GID of the port, if any: SMC-R v2's path (wire-v2.md 6) */
	bool has_v2;
	uint8_t gid_v2_index;
	struct dev_gid_entry gid_v2;
	struct dev_cq *cq;		/* send + receive completions of every QP on it */
};

/* A registered RMB holding one RMBE (Linux layout: element index 1). Owned by its LG's
 * pool; all fields [E]. */
struct core_rmb {
	struct core_rmb *next;		/* lgr->rmbs */
	struct dev_mem *mem;		/* the pool's reference; a conn holds its own */
	struct dev_mr *mr;		/* on the LG's PD: LOCAL_WRITE | REMOTE_WRITE */
	/* The same memory registered on the PD of every device the LG has a link on
	 * (docs/protocol/procedures.md 3.3: the peer may write over any link), by device
	 * index (eng->devs); mrs[index of lg->cdev] == mr. */
	struct dev_mr *mrs[CORE_MAX_DEVS];
	uint32_t size;
	uint8_t code;			/* wire RMBE size code */
	bool in_use;
	bool announced;			/* the peer knows its rkey (CLC or CONFIRM RKEY) */
	/* Bytes [0, dirty_len) may hold an earlier connection's data: zeroed before reuse.
	 * Set at detach from what the peer announced (its producer cursor): a ring that
	 * wrapped, or a connection that ended in a reset, dirties it all. (Zeroing only the
	 * used part keeps a short connection's setup cost independent of the RMBE size.) */
	uint32_t dirty_len;
};

/* A remote RMB the peer announced, per LG, with its (rkey, vaddr) for each link of the LG
 * by table slot (docs/protocol/procedures.md 3.3; RFC 7609 4.4: every RMB is usable over
 * every link). [E] */
struct core_rtoken {
	uint32_t rkey[CORE_LG_LINKS];
	uint64_t vaddr[CORE_LG_LINKS];
	uint8_t links;			/* bit i: known for lg->links[i] */
	bool used;
};

/* A send slot: one 44-byte LLC/CDC message until its completion, plus (for providers
 * without big inline WRITEs) a staging area the data WRITEs before it read from.
 * [L] = link->tx_lock. */
struct core_slot {
	bool busy;			/* [L] */
	uint8_t covers;			/* [L] SQ entries freed by its completion */
	/* The CDC the slot carries (0: none, or an LLC message): the connection's alert token,
	 * the sequence number and producer cursor it announced. Its successful completion makes
	 * them the connection's last completed CDC (tx_fin_*), the point a failover rewinds to
	 * (docs/protocol/procedures.md 3.7). Written by the sender under conn->lock, read by the
	 * completion under eng->lock: atomics, ordered by the provider's post/poll. */
	_Atomic uint32_t cdc_token;
	_Atomic uint16_t cdc_seq;
	_Atomic uint64_t cdc_prod;
};

enum core_link_state {
	CORE_LINK_INIT = 1,		/* QP created (RESET/INIT/RTR), CONFIRM LINK pending */
	CORE_LINK_ACTIVE = 2,
	CORE_LINK_DOWN = 3,		/* failed or deleted: no more sends */
};

struct core_link {
	struct core_lgr *lg;		/* [I] */
	uint8_t slot;			/* [I] index in lg->links */
	uint32_t id;			/* [I] engine-unique, never reused: wr_id lookup */
	uint8_t link_num;		/* [E] wire link number (client: adopted from CONFIRM LINK) */
	uint32_t link_uid;		/* [I] our link user ID */
	enum core_link_state state;	/* [E] */
	_Atomic bool usable;		/* mirror of state == ACTIVE for the data path (no lock) */
	struct core_dev *cdev;		/* [I] */
	struct dev_qp *qp;		/* [I] */
	uint32_t psn;			/* [I] our initial PSN */
	uint8_t mtu;			/* [E] path MTU code (min of both) */
	/* the peer's end */
	struct wire_gid peer_gid;	/* [E] */
	struct wire_mac peer_mac;	/* [E] */
	uint32_t peer_qpn;		/* [E] */
	uint32_t peer_psn;		/* [E] */
	/* message buffers: CORE_SEND_SLOTS send slots then CORE_RECV_BUFS receive buffers */
	struct dev_mem *msgmem;		/* [I] */
	struct dev_mr *msgmr;		/* [I] LOCAL_WRITE */
	/* v2 LGs only (CORE_V2_TAIL): in msgmem after the receive buffers, the receive tail,
	 * then the send tail; v2_rx assembles a long message for llc_rx. */
	bool v2_tails;			/* [I] */
	uint8_t *v2_rx;			/* [I] 8192 bytes, heap; [E] contents */
	int long_slot;			/* [L] the slot whose SEND uses the send tail; -1 none */
	bool inline_msgs;		/* [I] post LLC/CDC inline */
	uint32_t max_inline;		/* [I] granted inline bytes for data WRITEs */
	uint32_t max_sge;		/* [I] granted send SGEs */
	struct dev_mem *stagemem;	/* [I] CORE_SEND_SLOTS * CORE_STAGE, or NULL (big inline) */
	struct dev_mr *stagemr;		/* [I] LOCAL_WRITE */
	pthread_mutex_t tx_lock;	/* protects [L] fields; leaf */
	struct core_slot slots[CORE_SEND_SLOTS];	/* [L] */
	unsigned slots_free;		/* [L] */
	unsigned sq_used;		/* [L] SQ entries posted and not yet freed by a completion */
	bool slot_waiters;		/* [L] a sender found no slot: wake on the next free */
	/* [L] the LG slots (lg->slots index) of the connections that found no send slot
	 * since the last wake: tx_wake_waiters visits only these, not all 255
	 * connections of the LG (the scan was ~8 % of conns 1000's CPU). Set in link_slot_get,
	 * under tx_lock with slot_waiters, so a completion that sees slot_waiters sees the
	 * bit too; taken (and cleared) by link_run_wakes. */
	uint64_t starved[CORE_LG_SLOTS / 64];
	bool starved_all;		/* [L] a waiter without an LG slot (0): visit every conn */
	bool wake_due;			/* [E] a completion freed a slot while senders waited: tx_wake_waiters
					 * once at the end of the CQ batch (link_run_wakes) */
	/* keepalive (docs/protocol/procedures.md 3.5) */
	uint64_t last_rx_ns;		/* [E] progress time of the last receive on the link */
	uint64_t testlink_deadline;	/* [E] TEST LINK sent, answer due by then; NEVER if none */
	/* [E] "no free send slot for 10 s" (docs/protocol/procedures.md 3.6): when a sender
	 * first found no slot since the last check (0: none), and when a send last completed */
	uint64_t noslot_since;
	uint64_t tx_done_ns;
	uint64_t drain_deadline;	/* [E] LG terminating: destroy the QP by then */
	struct core_link *next;		/* [E] eng->links */
	struct core_link *retired_next;	/* [E] lg->retired: out of the table, QP not yet destroyed */
};

/* Local LLC flows (docs/protocol/procedures.md 3.1: one local flow per LG at a time). */
enum core_flow {
	CORE_FLOW_NONE = 0,
	CORE_FLOW_CONFIRM_RKEY = 1,	/* for flow_conn's new RMB, before its CLC message */
	CORE_FLOW_ADD_LINK = 2,		/* server: the ADD LINK flow (addlink.c) */
	CORE_FLOW_ADD_LINK_CLI = 3,	/* client: answering the server's ADD LINK flow */
};

/* Steps of an ADD LINK flow (docs/protocol/procedures.md 3.2), lgr->al_step. */
enum core_al_step {
	AL_NONE = 0,
	AL_WAIT_RESP = 1,	/* server: ADD LINK request sent, its response due */
	AL_WAIT_CONT = 2,	/* both: the peer's next ADD LINK CONTINUATION due */
	AL_WAIT_CONFIRM = 3,	/* server: CONFIRM LINK response on the new link due;
				 * client: the CONFIRM LINK request on the new link due */
};

/* Why a link went down (failover reasons counted in core_engine_stats). */
enum core_down_reason {
	CORE_DOWN_WC = 0,		/* an error completion */
	CORE_DOWN_EVENT = 1,		/* a QP or port event of the device */
	CORE_DOWN_TESTLINK = 2,		/* TEST LINK unanswered */
	CORE_DOWN_PEER = 3,		/* the peer deleted it (DELETE LINK) */
	CORE_DOWN_NOSLOT = 4,		/* no free send slot for a long time */
	CORE_DOWN_ASYM = 5,		/* server: an asymmetric link replaced by a symmetric one */
	CORE_DOWN_NREASONS = 6,
};

enum core_lgr_state {
	CORE_LG_SETUP = 1,		/* first contact in progress */
	CORE_LG_ACTIVE = 2,
	CORE_LG_DEAD = 3,		/* terminated: not findable, freed when drained */
};

struct core_lgr {
	struct core_engine *eng;	/* [I] */
	struct core_lgr *next;		/* [E] eng->lgs */
	uint32_t id;			/* [I] engine-local number */
	enum core_role role;		/* [I] */
	enum core_lgr_state state;	/* [E] */
	bool sync_err;			/* [E] out-of-sync Decline seen: never reuse */
	struct wire_peer_id peer_id;	/* [I] */
	struct core_dev *cdev;		/* [I] */
	struct dev_pd *pd;		/* [I] one PD per LG: its RMBs are reachable only by its QPs */
	/* [E] the LG's PD on each device (by eng->devs index) it has a link on; pds[index of
	 * cdev] == pd. A second link on another device gets its own PD there, and every RMB
	 * is registered on it (lgr_pd_for). */
	struct dev_pd *pds[CORE_MAX_DEVS];
	struct core_link *retired;	/* [E] links out of the table, destroyed once drained */
	/* [E] the LG's links by table slot (NULL: free). Each connection names its own
	 * (conn->link, chosen by lgr_attach: docs/protocol/procedures.md 3.4). Slot 0 holds the
	 * first contact's link; ADD LINK (addlink.c) fills another. */
	struct core_link *links[CORE_LG_LINKS];
	struct core_conn *slots[CORE_LG_SLOTS];	/* [E] by alert token & 0xFF; [0] unused */
	unsigned nconns;		/* [E] slots in use */
	uint32_t token_gen;		/* [E] */
	struct core_conn *fc_conn;	/* [E] held: the first-contact conn while SETUP */
	struct core_rmb *rmbs;		/* [E] pool: every RMB of the LG */
	unsigned nrmbs;			/* [E] */
	struct core_rtoken rtok[CORE_RTOKENS_MAX];	/* [E] the peer's announced RMBs */
	uint64_t idle_deadline;		/* [E] no conns since: free at this time; NEVER if busy */
	/* the local LLC flow */
	enum core_flow flow;		/* [E] */
	uint64_t flow_deadline;		/* [E] */
	struct core_conn *flow_conn;	/* [E] held while the flow runs */
	struct core_link *flow_link;	/* [E] the link the CONFIRM RKEY flow's request went on */
	bool want_add_link;		/* [E] server: ADD LINK offer still to run */
	/* [E] the running ADD LINK flow (addlink.c, docs/protocol/procedures.md 3.2) */
	enum core_al_step al_step;
	struct core_link *al_link;	/* the link being added (state INIT) */
	struct core_rmb *al_next;	/* our next RMB whose rkey pair is still to send */
	unsigned al_left;		/* our pairs still to send */
	unsigned al_peer_left;		/* the peer's pairs still to come */
	uint8_t al_gone_num;		/* the link number of the last flow that failed: its late
					 * messages are dropped, not a protocol violation */
	uint8_t next_link_num;		/* server: the next link number to try (counts up, as
					 * Linux: a number just deleted is not reused at once, so
					 * a late DELETE LINK for it cannot hit its successor) */
	bool relink_pending;		/* a device came up while a flow ran: try after it */
	bool hint_pending;		/* server: the client's "add a link" hint came while a
					   flow ran (its CONFIRM LINK answer and the hint travel
					   on different links): judged after the flow */
	struct core_link *last_added;	/* [E] the link the last ADD LINK flow added */
	/* Two links are active: senders keep a copy of what they write (conn->shadow), the
	 * bytes a failover writes again. Written under eng->lock, read by senders. */
	_Atomic bool multi;
	/* [E] server: a DELETE LINK request of ours waits for its answer (failover.c) */
	uint8_t del_link_num;		/* 0: none */
	uint64_t del_deadline;
	/* [E] counters for core_engine_stats / core_lgr_info */
	uint32_t failovers;
	uint32_t links_added;
	struct core_conn *rkey_wait_head;	/* [E] held: conns queued for a CONFIRM RKEY flow */
	struct core_conn *rkey_wait_tail;
	uint32_t term_reason;		/* [E] DELETE LINK reason when terminated */
	/* [E] the LG's timer on eng->timers: the earliest of idle_deadline, flow_deadline,
	 * its link's TEST LINK times and drain_deadline (lgr_timer_fn checks them all) */
	struct core_timer tmr;
	/* SMC-R v2 (docs/parts/wire-v2.md): set at creation from the first contact's CLC. A
	 * v2 LG uses the device's RoCE v2 GID and v2 LLC messages; v1 and v2 LGs are never
	 * shared between the versions. [I] after the first contact's Accept/Confirm. */
	bool v2;
	uint8_t max_conns;		/* v2.1 negotiated (0 for release 0 and v1) */
	uint8_t max_links;
	/* [I] v2: the IPv4 subnet (host order) of the first contact's local address, from
	 * its interface's prefix; a further link goes on a device with a RoCE v2 GID in it, as
	 * Linux chooses (docs/PROTOCOL.md "Linux's second link"). v2_plen 0: no prefix known,
	 * any device with a RoCE v2 GID. */
	uint32_t v2_net;
	uint8_t v2_plen;
};

/* The GID entry (and its index) a link of this LG uses. */
static inline const struct dev_gid_entry *lgr_gid(const struct core_lgr *lg)
{
	return lg->v2 ? &lg->cdev->gid_v2 : &lg->cdev->gid;
}
static inline uint8_t lgr_gid_index(const struct core_lgr *lg)
{
	return lg->v2 ? lg->cdev->gid_v2_index : lg->cdev->gid_index;
}

/* Handshake states (docs/protocol/procedures.md 2.2, 2.3). */
enum core_hs {
	HS_C_START = 1,		/* client: Proposal not sent yet */
	HS_C_WAIT_ACCEPT = 2,
	HS_C_WAIT_RKEY = 3,	/* client reuse: CONFIRM RKEY for a new RMB before the Confirm */
	HS_C_WAIT_CL = 4,	/* client first contact: CONFIRM LINK request */
	HS_S_WAIT_PROPOSAL = 5,
	HS_S_WAIT_RKEY = 6,	/* server reuse: CONFIRM RKEY before the Accept */
	HS_S_WAIT_CONFIRM = 7,
	HS_S_WAIT_CL = 8,	/* server first contact: CONFIRM LINK response */
	HS_DECL_WAIT = 9,	/* LLC step timed out: wait 1 s for the peer's Decline */
	HS_DONE_SMC = 10,
	HS_DONE_FALLBACK = 11,
	HS_DONE_FAILED = 12,
};

/* Close flags (docs/protocol/procedures.md 5): what was sent / received. [C] */
#define CL_SENT_D 0x01
#define CL_SENT_C 0x02
#define CL_SENT_A 0x04
#define CL_RCVD_D 0x10
#define CL_RCVD_C 0x20
#define CL_RCVD_A 0x40

/* Urgent data state of the receiver (docs/protocol/procedures.md 4.6). [C] */
enum core_urg {
	URG_NONE = 0,
	URG_PENDING = 1,	/* P seen, byte not here yet */
	URG_VALID = 2,		/* byte located at urg_abs - 1, not read with MSG_OOB */
	URG_READ = 3,		/* read with MSG_OOB; still skipped in the stream if not inline */
};

struct core_conn {
	struct core_engine *eng;	/* [I] */
	_Atomic uint32_t refcnt;	/* conn_hold / conn_put */
	enum core_role role;		/* [I] */
	pthread_mutex_t lock;		/* protects [C] */
	pthread_mutex_t cb_lock;	/* held while the callback runs; protects cb/cb_ctx */
	core_event_fn cb;
	void *cb_ctx;
	bool released;			/* [EC] core_conn_release called */

	/* addresses and options (copied from params) [I] */
	struct sockaddr_storage local, peer;
	struct core_ip_prefix prefixes[CORE_MAX_PREFIXES];
	int nprefixes;
	uint32_t want_rmbe, want_sndbuf;

	/* handshake [E] */
	enum core_hs hs;
	int hs_decl_err;		/* HS_DECL_WAIT: code to decline with at the deadline */
	uint64_t hs_deadline;
	int hs_err;			/* HS_DONE_FAILED code */
	uint8_t out[CLC_PROPOSAL_MAX_LEN];	/* CLC bytes for the caller to send */
	size_t out_len;
	uint8_t out_user[CLC_PROPOSAL_MAX_LEN];	/* handed to the caller by clc_step */
	bool clc_sent;			/* our Accept/Confirm (naming our RMB) went out */
	bool first_contact;
	bool peer_oos_sent;
	bool hs_lg_wait;		/* [E] server: Proposal held back (not consumed) while
					 * this peer's first contact is in progress (handshake.c) */
	struct core_conn *rkey_next;	/* lgr->rkey_wait_* queue */
	struct clc_accept peer_clc;	/* the peer's Accept/Confirm */
	struct wire_peer_id peer_id;
	/* SMC-R v2 handshake (docs/parts/wire-v2.md 6) [E]: v2 = this connection runs v2 (the
	 * server chose it; the client got a v2 Accept); v2_offered = the client offered it;
	 * decl_v2 = a Decline goes out in the 44-byte version-2 form (the server answering a
	 * version-2 Proposal, the client after a v2 Accept, as Linux). */
	bool v2, v2_offered, decl_v2;
	struct clc_eid v2_eid;		/* the EID the server chose (Accept, Confirm) */
	struct clc_fce v2_fce;		/* server: what its Accept says; client: the Accept's */
	struct wire_gid v2_peer_gid;	/* server: the client's RoCE v2 GID (Proposal) */

	/* mode and errors [EC] */
	enum core_mode mode;
	uint32_t fb_local, fb_peer;	/* decline codes */
	int err;			/* [C] pending error (SO_ERROR), 0 = none */
	int reset_err;			/* [C] sticky: the connection is dead with this code */
	/* A peer lost with its link (process killed, close_peer_lost_locked): what it wrote
	 * and announced stays readable (keep_rmem: the RMBE outlives the detach); the end
	 * after it is EOF or a reset as its TCP connection shows (lost_wait: not known yet;
	 * tcp_fin: that connection ended with FIN). All [C]. */
	bool lost_wait;
	bool tcp_fin;
	bool keep_rmem;
	/* A send met the peer's C: its bytes were taken and dropped, as a TCP peer that
	 * closed answers data with a reset (err is then EPIPE, and the send after gets EPIPE
	 * again); reads still see the EOF. [C] */
	bool wrote_after_c;

	/* LG membership [EC]: set when attached, cleared (NULL) on detach */
	struct core_lgr *lg;
	struct core_link *link;
	uint8_t slot;			/* [E] index in lg->slots */
	/* Failover (docs/protocol/procedures.md 3.7), all [C] unless marked: */
	uint64_t tx_fin_prod;		/* [E] producer cursor of the last completed CDC */
	uint16_t tx_fin_seq;		/* [E] its sequence number */
	uint64_t tx_replay_end;		/* bytes [tx_prod, tx_replay_end) are written again */
	bool fo_pending;		/* the validation CDC is still to send on the new link */
	uint16_t fo_seq;		/* its sequence number */
	bool rx_fo;			/* the peer failed over: its producer cursor may repeat */
	/* [E] a validation message newer than our last CDC arrived: judged at the end of the
	 * progress round (rx_fo_checks), once every CQ was polled, since the CDC it names may
	 * still wait in the failed link's CQ behind it */
	bool fo_check;
	uint16_t fo_check_seq;
	struct core_conn *fo_check_next;
	uint64_t tx_urg_abs;		/* tx_prod after the last urgent byte written (0: none) */
	/* A copy of what we wrote into the peer's RMBE, at the same offsets (peer_size
	 * bytes), kept while the LG has two links: the bytes a failover writes again. Valid
	 * from absolute position shadow_from on. */
	uint8_t *shadow;
	uint64_t shadow_from;
	uint32_t token;			/* [I after attach] our alert token */
	struct core_rmb *rmb;		/* [E] our RMB (in lg's pool) */
	uint32_t lg_id;			/* [EC] for info: the LG it was attached to */
	uint8_t link_num;		/* [EC] for info */
	int cdev_idx;			/* [E] client: the device whose GID we proposed */

	/* receive side [C] */
	uint8_t *rmbe;			/* our RMBE bytes (NULL when detached) */
	struct dev_mem *rmem;		/* held while attached */
	uint32_t rmbe_size;
	uint64_t rx_cons;		/* absolute bytes consumed (cursor = rx_cons mod size) */
	uint64_t rx_peer_prod;		/* absolute: the peer's producer cursor */
	uint64_t rx_cons_sent;		/* absolute: the consumer cursor we last sent */
	uint16_t rx_seq;		/* last accepted CDC sequence number */
	bool rx_seq_valid;
	bool peer_blocked;		/* peer's last CDC had B */
	bool peer_req;			/* peer's last CDC had R */
	bool upd_pending;		/* a consumer update is due but could not be sent yet */
	bool shut_rd;
	enum core_urg urg;
	uint64_t urg_abs;		/* absolute position just after the urgent byte */
	uint8_t urg_byte;
	bool oobinline;

	/* send side [C] */
	uint32_t peer_token;		/* the peer's alert token (0 until known) */
	uint32_t peer_rkey;
	uint64_t peer_vaddr;		/* address of the peer's RMBE (vaddr + (idx-1) * size) */
	uint32_t peer_size;
	uint64_t tx_prod;		/* absolute bytes written to the peer's RMBE */
	uint64_t tx_peer_cons;		/* absolute: the peer's consumer cursor */
	uint16_t tx_seq;		/* last CDC sequence number sent */
	bool tx_blocked;		/* we told the peer B (or must) */
	bool tx_wait;			/* a sender got AGAIN: raise OUT when space returns */
	bool urg_tx;			/* P/U to send with the next CDC */

	/* send ring (docs/parts/sndbuf.md) [C]: bytes the program handed us that are not yet
	 * written into the peer's RMBE. Ring positions are absolute; the bytes of
	 * [sb_tail, sb_head) sit at sb[pos % sb_size]. Allocated (malloc, never registered:
	 * a flush WRITEs inline from it or copies it into a slot's staging area, so its bytes
	 * are free again as soon as the WRITE is posted) at the first byte that needs it,
	 * taken from the process's list of empty rings (ringpool.c) and given back there when
	 * a flush empties it, or with the connection (conn_put); NULL while it holds none. */
	uint8_t *sb;
	uint32_t sb_size;		/* [I] power of two (tx.c tx_sndbuf_size) */
	uint64_t sb_head;		/* absolute: bytes appended */
	uint64_t sb_tail;		/* absolute: bytes written into the peer's RMBE */
	uint64_t sb_urg;		/* absolute ring position just after a queued urgent byte; 0 = none */
	bool sb_hold;			/* corked (TCP_CORK / MSG_MORE): not pushed until a trigger */
	unsigned cl_pend;		/* CL_SENT_D / CL_SENT_C to send once the ring is empty */
	uint64_t cork_deadline;		/* held bytes are pushed by then (TCP's 200 ms); NEVER if none */
	uint64_t giveup_deadline;	/* closed with queued bytes: abort (A) by then; NEVER if none */
	_Atomic uint64_t tx_deadline;	/* min of the two above (conn_timer_fn reads it) */

	/* close [C] */
	unsigned cl;			/* CL_* flags */
	bool app_closed;
	enum core_tcp_action tcp_action;
	uint64_t close_deadline;	/* [E] released and waiting for the peer's C/A */

	/* [E] the connection's timer on eng->timers: the earliest of hs_deadline (while the
	 * handshake waits), close_deadline, the held-back Proposal's recheck and tx_deadline
	 * (conn_timer_fn checks them all, so a deadline that moved later costs one early run).
	 * Armed only while the connection is on eng->conns (cancelled when it leaves). */
	struct core_timer tmr;

	/* statistics [C] */
	uint64_t bytes_sent, bytes_received, cdc_sent, cdc_received;

	/* events [V] = eng->ev_lock */
	unsigned ev_raised;		/* [V] bits to report */
	bool ev_queued;			/* [V] on eng->ev_head */
	struct core_conn *ev_next;	/* [V] */

	struct core_conn *all_next;	/* [E] eng->conns (every live conn) */
	struct core_conn *all_prev;
};

struct core_engine {
	struct core_engine_params p;	/* [I] timers resolved to their defaults */
	struct wire_peer_id peer_id;	/* [I] */
	struct core_dev devs[CORE_MAX_DEVS];	/* [I] */
	int ndevs;			/* [I] */
	pthread_mutex_t poll_lock;	/* 1: serializes CQ processing (try-lock) */
	pthread_mutex_t lock;		/* 3: control state */
	pthread_mutex_t ev_lock;	/* leaf: the event queue */
	struct core_lgr *lgs;		/* [E] */
	struct core_link *links;	/* [E] every link with a QP (also draining ones) */
	struct core_link *link_last;	/* [E] lookup cache of link_by_id (cleared on destroy) */
	struct core_conn *conns;	/* [E] every conn object */
	struct core_conn *fo_check_head;	/* [E] held: conns with a validation to judge */
	uint32_t next_lg_id;		/* [E] */
	uint32_t next_link_id;		/* [E] */
	struct core_timers timers;	/* [E] every conn's and LG's deadline (timer.h) */
	/* Spinning threads (core_engine_spin_begin/end): while any spins, the CQs stay
	 * disarmed and prepare_sleep does not arm them (the spinners poll), unless the oldest
	 * spin is older than CORE_SPIN_GRACE_NS (a spinner that lost its CPU). */
	unsigned spinners;		/* [E] */
	uint64_t spin_since;		/* [E] now_ns of the spin_begin that made spinners 1 */
	uint64_t last_now;		/* [E] latest now_ns seen by progress */
	/* The lease (core_engine_lease, docs/design/readiness.md): the CQs stay unarmed
	 * until this bound (now_ns; 0: none), whoever asked for it; a thread about to sleep
	 * ends it. Written and read under eng->lock. */
	uint64_t lease_until;		/* [E] */
	bool freed;			/* [E] core_engine_free ran */
	_Atomic uint32_t refcnt;	/* the owner's + one per conn object */
	struct core_conn *ev_head;	/* [V] */
	_Atomic bool ev_any;		/* ev_head != NULL, for a lock-free check */
	_Atomic uint64_t rand_state;	/* PSNs, instance number */
	/* counters [E] */
	uint64_t lgs_created, lgs_freed, conns_created, conns_freed;
	uint64_t links_added, failovers, failover_reason[CORE_DOWN_NREASONS];
	_Atomic uint64_t cdc_rx_dropped, llc_rx_dropped;
	/* Message and stall counters for core_engine_counters (relaxed atomics, any thread
	 * adds, readers only load: a signal handler may read them). The send side's (the
	 * program threads') and the receive side's (mostly the progress thread's) are a
	 * cache line apart, so the two do not bounce one line per message. */
	_Atomic uint64_t ctr_cdc_tx, ctr_llc_tx, ctr_rmbe_full, ctr_window_stall;
	char ctr_pad[64];
	_Atomic uint64_t ctr_cdc_rx, ctr_llc_rx;
	/* two-link groups (docs/FAILOVER.md), added under eng->lock, loaded without it */
	_Atomic uint64_t ctr_links_added, ctr_links_failed, ctr_failovers, ctr_conns_moved;
	_Atomic uint64_t ctr_dl_tx, ctr_dl_rx;
};

/* Adds one to an engine counter above (relaxed: a count, no ordering). */
#define CORE_CTR_INC(e, f) atomic_fetch_add_explicit(&(e)->f, 1, memory_order_relaxed)

/* ---- engine.c ---- */
uint32_t core_rand32(struct core_engine *e);
/* Arms (or brings forward) a connection's or an LG's timer (eng->lock held). */
void conn_timer_at(struct core_conn *c, uint64_t when);
void lgr_timer_at(struct core_lgr *lg, uint64_t when);
void core_engine_put(struct core_engine *e);
/* Queues raised event bits for c (any lock may be held; takes ev_lock). */
void core_ev_raise(struct core_conn *c, unsigned bits);
/* Reports queued events (no core lock held by the caller). */
void core_ev_fire(struct core_engine *e);
/* A sender found no free send slot: poll the CQs now (shm completes sends as they are
 * posted, so the completions that free slots are usually queued already) and arm for any
 * completion, so the next one wakes a sleeper. No core lock held. */
void core_reap(struct core_engine *e);

/* ---- ringpool.c ---- */
/* Send rings, last in first out (a ring given back when it empties is the
 * next one taken). ring_get: a ring of size bytes (a power of two), or NULL (no memory).
 * ring_put: gives one back (NULL: nothing). ring_pool_on: false when $SMCR_RING_POOL_KB=0
 * turned the list off (a ring then stays with its connection). Any thread, any lock. */
void *ring_get(uint32_t size);
void ring_put(void *p, uint32_t size);
bool ring_pool_on(void);

/* ---- conn.c ---- */
void conn_hold(struct core_conn *c);
void conn_put(struct core_conn *c);
unsigned conn_events_locked(struct core_conn *c);	/* conn->lock held */
uint64_t conn_readable_locked(struct core_conn *c);
uint32_t conn_writable_locked(struct core_conn *c);
void conn_maybe_unlink(struct core_conn *c);	/* eng->lock held */
const char *conn_state_name_locked(struct core_conn *c);

/* ---- lgr.c ---- (eng->lock held unless noted) */
int lgr_create(struct core_engine *e, enum core_role role, struct core_dev *cdev,
	       const struct wire_peer_id *peer_id, bool v2, struct core_lgr **out);
struct core_lgr *lgr_find_server(struct core_engine *e, const struct clc_proposal *p);
struct core_lgr *lgr_find_server_v2(struct core_engine *e, const struct wire_gid *gid);
struct core_lgr *lgr_find_client(struct core_engine *e, const struct clc_accept *a, bool v2);
/* Attaches c to lg: slot, token, RMB from the pool (*need_rkey set if the RMB is new and
 * must be announced with CONFIRM RKEY). */
int lgr_attach(struct core_lgr *lg, struct core_conn *c, bool *need_rkey, uint64_t now);
/* The link a new connection goes on (docs/protocol/procedures.md 3.4): the server alternates
 * between the LG's active links by the parity of its connection count (as Linux); the client takes
 * the one the Accept named (its QPN, GID and MAC). NULL: none usable. During first contact (SETUP)
 * the LG's one link, not active yet. */
struct core_link *lgr_link_assign(struct core_lgr *lg, const struct clc_accept *a);
/* Some active link of lg for an LLC message (the lowest slot); NULL if none. */
struct core_link *lgr_link_any(struct core_lgr *lg);
/* DELETE LINK for link number num (not "all"), sent on via; a failed send is logged only:
 * the peer's own timers end the link then. */
void lgr_send_delete_link(struct core_link *via, uint8_t num, bool orderly, uint32_t reason);
unsigned lgr_links_active(const struct core_lgr *lg);
/* Removes c from its LG (RMB back to the pool, or freed if keep_rmb is false). */
void lgr_detach(struct core_conn *c, bool pool_rmb, uint64_t now);
/* Ends the LG: A CDCs, DELETE LINK all (if send_delete and the link works), aborts every
 * conn with err, fails conns in handshake. */
void lgr_terminate(struct core_lgr *lg, uint32_t reason, bool orderly, bool send_delete,
		   int err, uint64_t now);
/* The peer's RMB (rkey, vaddr) on link slot ls; returns its index, or < 0 (table full). */
int lgr_rtoken_add(struct core_lgr *lg, unsigned ls, uint32_t rkey, uint64_t vaddr);
/* The index of the peer's RMB known by rkey on link slot ls, or -1. */
int lgr_rtoken_find(const struct core_lgr *lg, unsigned ls, uint32_t rkey);
/* Forgets the RMB known by rkey on link slot ls (on every link). */
bool lgr_rtoken_del(struct core_lgr *lg, unsigned ls, uint32_t rkey);
/* lg's PD on device cd, created (with every RMB registered on it) if new. */
int lgr_pd_for(struct core_lgr *lg, struct core_dev *cd, struct dev_pd **out);
/* The MR of r on l's device. */
struct dev_mr *lgr_rmb_mr(const struct core_rmb *r, const struct core_link *l);
/* Takes l out of lg's table (the peer's RTokens for it forgotten); its QP is destroyed
 * once its sends are drained (lgr_free_retired). */
void lgr_link_retire(struct core_lgr *lg, struct core_link *l, uint64_t now);
void lgr_free_retired(struct core_lgr *lg, uint64_t now, bool force);
/* The table slot of the link with wire number num, or -1. */
int lgr_link_slot_by_num(const struct core_lgr *lg, uint8_t num);
void lgr_free_dead(struct core_engine *e, uint64_t now, bool force);

/* ---- link.c ---- */
/* A link of lg on device cd in table slot slot (lg->links[slot] set): QP in INIT, receives
 * posted. */
int link_create(struct core_lgr *lg, struct core_dev *cd, unsigned slot, struct core_link **out);
/* The GID entry and index a link uses (its device's, v1 or v2 as the LG). */
const struct dev_gid_entry *link_gid(const struct core_link *l);
int link_rtr(struct core_link *l, uint32_t peer_qpn, uint32_t peer_psn, uint8_t mtu,
	     const struct wire_gid *gid, const struct wire_mac *mac);
int link_rts(struct core_link *l);
void link_destroy(struct core_link *l);
/* Sends one 44-byte message (LLC or CDC) with no conn accounting. */
int link_send_msg(struct core_link *l, const uint8_t msg[44]);
/* Sends one LLC message of 44..8192 bytes (v2 links only past 44: the send tail);
 * -SMCR_E_AGAIN while an earlier long message's send has not completed. */
int link_send_long(struct core_link *l, const uint8_t *msg, size_t len);
/* Reserves a slot + SQ room for nwr WRs (the last being the slot's SEND). -SMCR_E_AGAIN if
 * none (data sends leave CORE_LLC_RESERVE slots to LLC). Returns the slot index. A data
 * sender passes waiter = its connection's LG slot (c->slot, 1..255; 0: LLC, no waiter): on
 * AGAIN the next completion wakes that connection (tx_wake_waiters). */
int link_slot_get(struct core_link *l, unsigned nwr, bool llc, unsigned waiter);
void link_slot_abandon(struct core_link *l, int slot);
uint8_t *link_slot_buf(struct core_link *l, int slot);
/* Posts the WR list wr (ending with the slot's SEND, built by link_slot_send_wr). */
int link_post(struct core_link *l, struct dev_send_wr *wr);
void link_slot_send_wr(struct core_link *l, int slot, struct dev_send_wr *wr,
		       struct dev_sge *sge);
uint8_t *link_stage_buf(struct core_link *l, int slot);
uint32_t link_stage_lkey(struct core_link *l);
bool link_has_stage(struct core_link *l);
struct core_link *link_by_id(struct core_engine *e, uint32_t id);	/* eng->lock held */
/* Handles one work completion (progress, eng->lock held). */
void link_handle_wc(struct core_engine *e, const struct dev_wc *wc, uint64_t now);
/* After a CQ batch (eng->lock held): wakes the senders of the links whose completions
 * freed slots they waited for, one scan per LG per batch (was one per completion). */
void link_run_wakes(struct core_engine *e);
/* The link failed (why: enum core_down_reason): connections fail over to another active
 * link of the LG (failover.c), or the LG ends if there is none. */
void link_down(struct core_link *l, int err, unsigned why, uint64_t now);
/* A slot's completion arrived (successfully): the CDC it carried completed (failover.c). */
void link_cdc_completed(struct core_link *l, uint32_t token, uint16_t seq, uint64_t prod);

/* ---- llc_proc.c ---- */
void llc_rx(struct core_link *l, const uint8_t *buf, size_t len, uint64_t now);
int llc_send(struct core_link *l, const struct llc_msg *m);
void llc_flow_kick(struct core_lgr *lg, uint64_t now);	/* start queued flows */
/* Link l failed over to link to: a CONFIRM RKEY flow whose request went on l asks again
 * on to. */
void llc_flow_link_down(struct core_lgr *lg, struct core_link *l, struct core_link *to,
			uint64_t now);
void llc_timers(struct core_lgr *lg, uint64_t now);	/* from lgr_timer_fn */
int llc_send_confirm_link(struct core_link *l, bool resp);
/* ADD LINK v2 (request or response) with its extension (docs/parts/wire-v2.md 7.3). */
int llc_send_add_link_v2(struct core_link *l, const struct llc_msg *m,
			 const struct llc2_add_link_ext *ext);
void llc_start_add_link_offer(struct core_lgr *lg, uint64_t now);
void llc_fill_gid_mac(struct core_link *l, struct wire_gid *gid, struct wire_mac *mac);
/* Entries for every other active link of r in a CONFIRM RKEY (docs/protocol/wire-formats.md
 * 6.6). */
void llc_rkey_others(struct core_lgr *lg, struct core_link *on, struct core_rmb *r,
		     struct llc_confirm_rkey *cr);

/* ---- addlink.c ---- (eng->lock held) */
/* Server: starts the ADD LINK flow if the LG is single and a second link can be built. */
bool al_server_start(struct core_lgr *lg, uint64_t now);
/* v2 (non-NULL): the whole v2 message, its extension with the RKey list included. */
void al_on_add_link(struct core_link *l, struct llc_msg *m, const uint8_t *raw,
		    const struct llc2_msg *v2, uint64_t now);
void al_on_add_link_cont(struct core_link *l, struct llc_msg *m, uint64_t now);
/* A CONFIRM LINK on a link that is not the first contact's; true if it was the flow's. */
bool al_on_confirm_link(struct core_link *l, struct llc_msg *m, uint64_t now);
/* The running flow ends without a new link (timeout, a link down): the new link dropped. */
void al_abort(struct core_lgr *lg, bool tell_peer, uint64_t now);
void al_timeout(struct core_lgr *lg, uint64_t now);
/* A device came up: single LGs try for a second link (server: the flow; client: the hint). */
void al_relink(struct core_engine *e, uint64_t now);
/* Server: deletes the last added link (its connections fail over) so a symmetric one can
 * be built. */
void al_replace_asym(struct core_lgr *lg, uint64_t now);

/* ---- failover.c ---- (eng->lock held) */
/* Moves c (on a failed link) to link to (docs/protocol/procedures.md 3.7). */
void fo_move_conn(struct core_conn *c, struct core_link *to);
void fo_on_delete_link(struct core_link *l, struct llc_msg *m, uint64_t now);
void fo_timers(struct core_lgr *lg, uint64_t now);
/* conn->lock held: the validation CDC, if still due; 0 when sent (or none due). */
int fo_send_validation_locked(struct core_conn *c);
/* conn->lock held: keeps a copy of n bytes about to be written at tx_prod (shadow). */
void fo_shadow_put_locked(struct core_conn *c, const struct iovec *iov, int iovcnt, uint32_t n);

/* ---- handshake.c ---- */
/* A connection's handshake and close-wait timers at now (from conn_timer_fn, eng->lock
 * held, c held): acts on what is due, returns its next deadline (CORE_NEVER: none). */
uint64_t hs_conn_timer(struct core_conn *c, uint64_t now);
void hs_link_confirmed(struct core_conn *c, int err, uint64_t now);	/* eng->lock held */
void hs_rkey_confirmed(struct core_conn *c, int err, uint64_t now);
/* The conn's LG died (or the engine is going) during its handshake: Decline + fallback. */
void hs_lg_failed(struct core_conn *c, int err, uint64_t now);
/* Ends the handshake without SMC: mode FALLBACK, our Decline (if send) queued in c->out,
 * everything set up for it undone. async: raise CORE_EV_CLC. eng->lock held. */
void hs_fallback(struct core_conn *c, uint32_t local_code, uint32_t peer_code, bool send,
		 bool oos, uint64_t now, bool async);
/* Ends the handshake as failed (no fallback): mode FAILED, undo. eng->lock held. */
void hs_fail(struct core_conn *c, int err, uint64_t now, bool async);

/* ---- tx.c ---- (conn->lock held) */
int tx_cdc_locked(struct core_conn *c, bool urg);	/* a CDC with current cursors/flags */
uint32_t tx_sndbuf_size(uint32_t sndbuf);	/* the ring size rule (docs/parts/sndbuf.md) */
uint32_t tx_sndbuf_queued(const struct core_conn *c);	/* bytes in the ring, not yet written */
uint32_t tx_sndbuf_free_locked(struct core_conn *c);	/* bytes a send can accept now */
/* CORE_EV_OUT: free >= queued / 2, i.e. the ring at most 2/3 full (TCP's
 * sk_stream_is_writeable: wspace >= wmem_queued / 2). */
bool tx_sndbuf_writable_locked(struct core_conn *c);
/* Writes queued ring bytes into the peer's RMBE (held bytes only if push); sends the
 * pending D/C once the ring is empty. Returns TX_FLUSH_* bits. */
#define TX_FLUSH_CLOSE 1u	/* a close flag (D/C) went out: run close_maybe_finish */
#define TX_FLUSH_OUT 2u		/* a writer waits and the ring has room again: raise CORE_EV_OUT */
#define TX_FLUSH_STARVED 4u	/* no send slot: retried when one frees (tx_wake_waiters) */
unsigned tx_flush_locked(struct core_conn *c, bool push);
void tx_discard_locked(struct core_conn *c);	/* an abort: the ring's bytes are dropped */
/* The ring's timers (cork ceiling, close give-up) of c at now; eng->lock held, from
 * conn_timer_fn. Returns the ring's next deadline (CORE_NEVER: none). */
uint64_t tx_conn_timer(struct core_conn *c, uint64_t now);
void tx_cons_update_locked(struct core_conn *c, bool force);
/* A send slot freed: retry pending CDCs and wake writers of the LG's connections whose bit
 * is set in starved (CORE_LG_SLOTS bits; all of them if all) (eng->lock held). */
void tx_wake_waiters(struct core_lgr *lg, const uint64_t *starved, bool all);

/* ---- rx.c ---- */
void rx_cdc(struct core_link *l, const uint8_t *buf, size_t len, uint64_t now);
/* After a progress round's polls (eng->lock held): the deferred validation verdicts. */
void rx_fo_checks(struct core_engine *e, uint64_t now);

/* ---- close.c ---- */
/* conn->lock held: sends A if possible, marks the connection reset with err. */
void close_abort_locked(struct core_conn *c, int err, bool send_a);
/* The link to the peer died under an open connection (err: why): TCP's end instead of an
 * abort where TCP would give one (close.c). */
void close_peer_lost_locked(struct core_conn *c, int err);
/* Called after a close-relevant change with no lock held: detaches a finished conn. */
void close_maybe_finish(struct core_conn *c, uint64_t now);
void close_maybe_finish_elocked(struct core_conn *c, uint64_t now);	/* eng->lock held */
/* The program closed c and its C or A is flagged sent: posted, or waiting for a send slot
 * (upd_pending). conn->lock held. */
bool close_sent_locked(const struct core_conn *c);
/* close_sent_locked, the C or A posted, and the peer's C or A received. conn->lock held. */
bool close_finished_locked(const struct core_conn *c);
/* Whether the CDC c is about to send is a quiet final C (close.c). conn->lock held. */
bool close_cdc_quiet_locked(const struct core_conn *c);
/* The program closed c and its close exchange is not complete. conn->lock held. */
bool close_wait_locked(const struct core_conn *c);

/* Absolute cursor <-> wire cursor. */
static inline struct curs abs_to_curs(uint64_t a, uint32_t size)
{
	struct curs c = { (uint16_t)((a / size) & 0xFFFF), (uint32_t)(a % size) };
	return c;
}
/* The absolute position in [lo, hi] (hi - lo <= size) whose wire form is c; false if none
 * (a cursor outside the window the protocol allows: backwards, or beyond the ring). */
static inline bool curs_to_abs(struct curs c, uint64_t lo, uint64_t hi, uint32_t size,
			       uint64_t *out)
{
	if (c.count >= size)
		return false;
	uint64_t laps[2] = { lo / size, hi / size };
	for (int i = 0; i < 2; i++) {
		uint64_t y = laps[i] * size + c.count;
		if ((uint16_t)(laps[i] & 0xFFFF) == c.wrap && y >= lo && y <= hi) {
			*out = y;
			return true;
		}
	}
	return false;
}

#endif
