/* smcr_opt.bpf.c: the BPF half of SMC-R capability discovery (RFC 7609 A.1,
 * docs/protocol/wire-formats.md 1, docs/protocol/procedures.md 2.1, docs/protocol/linux-interop.md
 * 3; measured behaviour in docs/protocol/tcp-option-bpf.md).
 *
 * Three programs sharing one socket-local storage map:
 *  - smcr_sockops (cgroup sock_ops): arms opted-in sockets at connect()/listen(), writes
 *    the option (fe 06 e2 d4 c3 d9) on their SYNs, echoes it on a SYN-ACK only when the
 *    SYN carried it, and records per socket what the peer sent;
 *  - smcr_setsockopt / smcr_getsockopt (cgroup sockopt): the private option level
 *    SMCR_SOL through which an unprivileged application opts in and reads the result.
 *
 * Consistency rules (each one keeps the two ends of a connection agreeing on "SMC or plain
 * TCP"; docs/parts/bpf.md lists the test of each):
 *  R1 only sockets whose application opted in before connect()/listen() are armed; a later
 *     request is recorded as LATE and never armed.
 *  R2 a listener is armed only if TCP_SAVE_SYN is on (set here if needed), so its children
 *     and its SYN-ACK retransmits can see the SYN.
 *  R3 a SYN-ACK carries the option only if the SYN it answers carried it, and never in
 *     syncookie mode (the cookie child cannot know what was sent).
 *  R4 a server believes it echoed only if the SYN-ACK writer confirmed it in the echo
 *     record (guard against a failed option-space reserve or a store that failed); a
 *     failed reserve is sticky for the connection, so no later SYN-ACK carries it either.
 *  R5 TCP Fast Open: the child's established callback runs before its SYN-ACK exists, so
 *     its result stays pending until the echo record is read, and its callbacks stay on;
 *     a retransmitted TFO SYN-ACK (the SYN has moved to the child) repeats the first
 *     SYN-ACK's decision from the echo record.
 *  R6 callbacks are switched off once the result is final: data segments pay nothing.
 *  R7 the client writes only on its SYN, and only into space it reserved itself.
 *
 * Verifier notes (see the notes file): skops->sk is read once per callback; two adjacent
 * context stores are separated by a compiler barrier.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "bpf/abi.h"

#define SMCR_AF_INET6 10
#define SMCR_SOL_TCP 6
#define SMCR_IPPROTO_TCP 6
#define SMCR_TCP_SAVE_SYN 27
#define SMCR_TCPHDR_SYN 0x02
#define SMCR_TCPHDR_ACK 0x10
#define SMCR_ENOENT 2
#define SMCR_PAGE_SIZE 4096

char _license[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
	__type(key, int);
	__type(value, struct smcr_sk_val);
} smcr_sk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SMCR_ECHO_MAX);
	__type(key, struct smcr_echo_key);
	__type(value, struct smcr_echo_val);
} smcr_echo SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SMCR_C__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} smcr_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct smcr_bpf_meta);
} smcr_meta SEC(".maps");

static __always_inline void ctr(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&smcr_stats, &idx);

	if (v)
		__sync_fetch_and_add(v, 1);
}

/* Searches the option (kind 254 with the 4-byte ExID). flags 0: the segment being
 * handled; BPF_LOAD_HDR_OPT_TCP_SYN: the SYN (just received, or saved). Returns > 0 when
 * found, -ENOMSG when absent, -ENOENT when no SYN is available. */
static __always_inline long find_opt(struct bpf_sock_ops *skops, __u64 flags)
{
	__u8 s[SMCR_TCPOPT_LEN] = {SMCR_TCPOPT_KIND,  SMCR_TCPOPT_LEN,   SMCR_TCPOPT_EXID0,
	                           SMCR_TCPOPT_EXID1, SMCR_TCPOPT_EXID2, SMCR_TCPOPT_EXID3};

	return bpf_load_hdr_opt(skops, s, sizeof(s), flags);
}

/* Echo record key from the SYN (ports and client ISN). Works in SYN-ACK callbacks (the
 * just-received SYN or the request's saved SYN) and on a child with a saved SYN. */
static __always_inline int key_from_syn(struct bpf_sock_ops *skops, struct smcr_echo_key *k)
{
	__u8 h[60]; /* the longest TCP header: the helper fails if the buffer is shorter */
	long n = bpf_getsockopt(skops, SMCR_SOL_TCP, TCP_BPF_SYN, h, sizeof(h));

	if (n < 20)
		return -1;
	k->netns = bpf_get_netns_cookie(skops);
	k->rport = (__u16)((h[0] << 8) | h[1]);
	k->lport = (__u16)((h[2] << 8) | h[3]);
	k->isn = ((__u32)h[4] << 24) | ((__u32)h[5] << 16) | ((__u32)h[6] << 8) | h[7];
	return 0;
}

/* Ports of a full socket or a request socket, isn left to the caller. */
static __always_inline void key_from_sock(struct bpf_sock_ops *skops, struct smcr_echo_key *k)
{
	k->netns = bpf_get_netns_cookie(skops);
	k->lport = (__u16)skops->local_port;
	k->rport = (__u16)bpf_ntohl(skops->remote_port);
}

static __always_inline void cb_flags(struct bpf_sock_ops *skops, __u32 set, __u32 clear)
{
	__u32 f = skops->bpf_sock_ops_cb_flags;

	bpf_sock_ops_cb_flags_set(skops, (int)((f | set) & ~clear));
}

/* R4: reads the echo record of a server child into its flags; result becomes final. */
static __always_inline void child_apply_echo(struct smcr_sk_val *st, struct smcr_echo_val *e)
{
	if (e) {
		if ((e->flags & SMCR_F_ECHOED) && !(e->flags & SMCR_F_NOSPACE))
			st->flags |= SMCR_F_ECHOED;
		st->flags |= e->flags & (SMCR_F_NOSPACE | SMCR_F_COOKIE);
	}
	st->flags &= ~SMCR_F_PENDING;
	st->flags |= SMCR_F_DONE;
	if (st->flags & SMCR_F_ECHOED)
		ctr(SMCR_C_SERVER_SMC);
}

/* R1: a client that opted in before connect() gets the header-option callbacks. */
static __always_inline void on_connect(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct smcr_sk_val *st;

	if (!sk)
		return;
	st = bpf_sk_storage_get(&smcr_sk, sk, 0, 0);
	if (!st || !(st->flags & SMCR_F_REQUESTED) || (st->flags & (SMCR_F_LATE | SMCR_F_ARMED)))
		return;
	if (bpf_sock_ops_cb_flags_set(
	        skops, (int)(skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG))) {
		st->flags |= SMCR_F_ARMFAIL;
		ctr(SMCR_C_ARM_FAIL);
		return;
	}
	st->flags |= SMCR_F_ARMED | SMCR_F_ACTIVE;
	ctr(SMCR_C_ARM_CONNECT);
}

/* R1 + R2: a listener is armed only with TCP_SAVE_SYN on. */
static __always_inline void on_listen(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct smcr_sk_val *st;
	int cur = 0, one = 1;

	if (!sk)
		return;
	st = bpf_sk_storage_get(&smcr_sk, sk, 0, 0);
	if (!st || !(st->flags & SMCR_F_REQUESTED) || (st->flags & (SMCR_F_LATE | SMCR_F_ARMED)))
		return;
	/* Keep an application's own TCP_SAVE_SYN (it may be 2, with the MAC header). */
	if (bpf_getsockopt(skops, SMCR_SOL_TCP, SMCR_TCP_SAVE_SYN, &cur, sizeof(cur)) || !cur) {
		if (bpf_setsockopt(skops, SMCR_SOL_TCP, SMCR_TCP_SAVE_SYN, &one, sizeof(one))) {
			st->flags |= SMCR_F_NOSAVESYN;
			ctr(SMCR_C_SAVESYN_FAIL);
			return;
		}
	}
	if (bpf_sock_ops_cb_flags_set(
	        skops, (int)(skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG))) {
		st->flags |= SMCR_F_ARMFAIL;
		ctr(SMCR_C_ARM_FAIL);
		return;
	}
	st->flags |= SMCR_F_ARMED | SMCR_F_LISTENER;
	ctr(SMCR_C_ARM_LISTEN);
}

/* Client SYN (full socket): reserve 6 bytes (the kernel pads to 8). */
static __always_inline void syn_len(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct smcr_sk_val *st;

	if (!sk)
		return;
	st = bpf_sk_storage_get(&smcr_sk, sk, 0, 0);
	if (!st || !(st->flags & SMCR_F_ACTIVE))
		return;
	if (bpf_reserve_hdr_opt(skops, SMCR_TCPOPT_LEN, 0)) {
		st->flags |= SMCR_F_NOSPACE;
		st->flags &= ~SMCR_F_RSV;
		ctr(SMCR_C_SYN_NOSPACE);
		return;
	}
	st->flags |= SMCR_F_RSV;
}

/* R7: the client writes only into the space it reserved for this SYN. */
static __always_inline void syn_write(struct bpf_sock_ops *skops)
{
	__u8 opt[SMCR_TCPOPT_LEN] = {SMCR_TCPOPT_KIND,  SMCR_TCPOPT_LEN,   SMCR_TCPOPT_EXID0,
	                             SMCR_TCPOPT_EXID1, SMCR_TCPOPT_EXID2, SMCR_TCPOPT_EXID3};
	struct bpf_sock *sk = skops->sk;
	struct smcr_sk_val *st;

	if (!sk)
		return;
	st = bpf_sk_storage_get(&smcr_sk, sk, 0, 0);
	if (!st || !(st->flags & SMCR_F_RSV))
		return;
	st->flags &= ~SMCR_F_RSV;
	if (bpf_store_hdr_opt(skops, opt, sizeof(opt), 0))
		return;
	st->flags |= SMCR_F_SENT;
	ctr(SMCR_C_SYN_WRITTEN);
}

/* TFO SYN-ACK retransmit: no SYN any more. The TFO child left a marker (isn 0) naming the
 * real ISN; the first SYN-ACK's record says whether it echoed. Returns that record when
 * this SYN-ACK must echo too. */
static __always_inline struct smcr_echo_val *tfo_rtx_record(struct bpf_sock_ops *skops)
{
	struct smcr_echo_key k = {};
	struct smcr_echo_val *m, *e;

	key_from_sock(skops, &k);
	k.isn = 0;
	m = bpf_map_lookup_elem(&smcr_echo, &k);
	if (!m || !(m->flags & SMCR_F_PEER))
		return NULL;
	k.isn = m->isn;
	e = bpf_map_lookup_elem(&smcr_echo, &k);
	if (!e || !(e->flags & SMCR_F_ECHOED) || (e->flags & SMCR_F_NOSPACE))
		return NULL;
	return e;
}

/* SYN-ACK of an armed listener (the socket is the request: no storage). R3, R4, R5. */
static __always_inline void synack_len(struct bpf_sock_ops *skops)
{
	struct smcr_echo_key k = {};
	struct smcr_echo_val v = {}, *e;
	long r = find_opt(skops, BPF_LOAD_HDR_OPT_TCP_SYN);

	if (r == -SMCR_ENOENT) {
		if (skops->args[0] == BPF_WRITE_HDR_TCP_SYNACK_COOKIE)
			return;
		e = tfo_rtx_record(skops);
		if (!e)
			return;
		if (bpf_reserve_hdr_opt(skops, SMCR_TCPOPT_LEN, 0)) {
			__sync_fetch_and_or(&e->flags, SMCR_F_NOSPACE);
			ctr(SMCR_C_SYNACK_NOSPACE);
		}
		return;
	}
	if (r < 0 || key_from_syn(skops, &k))
		return;
	if (skops->args[0] == BPF_WRITE_HDR_TCP_SYNACK_COOKIE) {
		/* R3: the cookie child cannot know what this SYN-ACK carried. */
		v.isn = k.isn;
		v.flags = SMCR_F_COOKIE | SMCR_F_PEER;
		bpf_map_update_elem(&smcr_echo, &k, &v, BPF_ANY);
		ctr(SMCR_C_SYNACK_COOKIE);
		return;
	}
	e = bpf_map_lookup_elem(&smcr_echo, &k);
	if (e && (e->flags & SMCR_F_NOSPACE))
		return; /* R4: sticky, an earlier SYN-ACK of this connection went without it */
	if (!bpf_reserve_hdr_opt(skops, SMCR_TCPOPT_LEN, 0))
		return;
	ctr(SMCR_C_SYNACK_NOSPACE);
	if (e) {
		__sync_fetch_and_or(&e->flags, SMCR_F_NOSPACE);
		return;
	}
	v.isn = k.isn;
	v.flags = SMCR_F_NOSPACE | SMCR_F_PEER;
	bpf_map_update_elem(&smcr_echo, &k, &v, BPF_ANY);
}

static __always_inline void synack_write(struct bpf_sock_ops *skops)
{
	__u8 opt[SMCR_TCPOPT_LEN] = {SMCR_TCPOPT_KIND,  SMCR_TCPOPT_LEN,   SMCR_TCPOPT_EXID0,
	                             SMCR_TCPOPT_EXID1, SMCR_TCPOPT_EXID2, SMCR_TCPOPT_EXID3};
	struct smcr_echo_key k = {};
	struct smcr_echo_val v = {}, *e;
	long r;

	if (skops->args[0] == BPF_WRITE_HDR_TCP_SYNACK_COOKIE)
		return;
	r = find_opt(skops, BPF_LOAD_HDR_OPT_TCP_SYN);
	if (r == -SMCR_ENOENT) {
		/* R5: TFO retransmit, repeat the first decision (same test as synack_len).
		 * The ISN comes from the TFO marker: this SYN-ACK's acknowledgment number also
		 * counts the data of the SYN. */
		e = tfo_rtx_record(skops);
		if (!e)
			return;
		ctr(SMCR_C_SYNACK_NOSYN);
	} else if (r < 0 || key_from_syn(skops, &k)) {
		return;
	} else {
		e = bpf_map_lookup_elem(&smcr_echo, &k);
		if (e && (e->flags & (SMCR_F_NOSPACE | SMCR_F_COOKIE)))
			return; /* R4: our reserve failed; the space is someone else's */
		if (!e) {
			/* Record first: if the record cannot be stored, do not echo (R4). */
			v.isn = k.isn;
			v.flags = SMCR_F_ECHOED | SMCR_F_PEER;
			if (bpf_map_update_elem(&smcr_echo, &k, &v, BPF_NOEXIST)) {
				ctr(SMCR_C_ECHO_MAP_FAIL);
				return;
			}
			e = bpf_map_lookup_elem(&smcr_echo, &k);
			if (!e) {
				ctr(SMCR_C_ECHO_MAP_FAIL);
				return;
			}
		} else {
			__sync_fetch_and_or(&e->flags, SMCR_F_ECHOED | SMCR_F_PEER);
		}
	}
	if (bpf_store_hdr_opt(skops, opt, sizeof(opt), 0)) {
		__sync_fetch_and_or(&e->flags, SMCR_F_NOSPACE);
		ctr(SMCR_C_SYNACK_NOSPACE);
		return;
	}
	ctr(SMCR_C_SYNACK_ECHOED);
}

/* HDR_OPT_LEN (write == 0: reserve) and WRITE_HDR_OPT (write == 1: store) dispatch the
 * same way: SYN to the client's half, SYN-ACK to the server's. CURRENT_MSS queries and
 * non-SYN segments reserve and write nothing (R7). write is a constant at each call site,
 * so after inlining each callback keeps only its own two branches. */
static __always_inline void on_hdr(struct bpf_sock_ops *skops, int write)
{
	__u32 tf = skops->skb_tcp_flags;

	if (!(tf & SMCR_TCPHDR_SYN))
		return;
	if (tf & SMCR_TCPHDR_ACK) {
		if (write)
			synack_write(skops);
		else
			synack_len(skops);
	} else {
		if (write)
			syn_write(skops);
		else
			syn_len(skops);
	}
}

/* Client: the skb is the SYN-ACK that completed the handshake. R6. */
static __always_inline void on_active_established(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct smcr_sk_val *st;

	if (!sk)
		return;
	st = bpf_sk_storage_get(&smcr_sk, sk, 0, 0);
	if (!st || !(st->flags & SMCR_F_ACTIVE) || (st->flags & SMCR_F_DONE))
		return;
	if (find_opt(skops, 0) > 0) {
		st->flags |= SMCR_F_PEER;
		ctr(SMCR_C_SEEN_SYNACK);
	}
	st->flags |= SMCR_F_DONE;
	st->flags &= ~SMCR_F_RSV;
	if ((st->flags & (SMCR_F_SENT | SMCR_F_PEER)) == (SMCR_F_SENT | SMCR_F_PEER))
		ctr(SMCR_C_CLIENT_SMC);
	cb_flags(skops, 0, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
}

/* Server child of an armed listener (its storage is the listener's, cloned). */
static __always_inline void on_passive_established(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct smcr_sk_val *st;
	struct smcr_echo_key k = {};
	struct smcr_echo_val v = {};
	long r;

	if (!sk)
		return;
	st = bpf_sk_storage_get(&smcr_sk, sk, 0, 0);
	if (!st || !(st->flags & SMCR_F_LISTENER) || (st->flags & SMCR_F_CHILD))
		return;
	st->flags |= SMCR_F_CHILD;
	r = find_opt(skops, BPF_LOAD_HDR_OPT_TCP_SYN);
	if (r > 0) {
		st->flags |= SMCR_F_PEER;
		ctr(SMCR_C_SEEN_SYN);
	}
	if (key_from_syn(skops, &k)) {
		/* No saved SYN (syncookie child): the ACK's sequence number names the ISN. */
		st->flags |= SMCR_F_NOSYN;
		key_from_sock(skops, &k);
		k.isn = skops->rcv_nxt - 1;
	}
	if (skops->skb_tcp_flags & SMCR_TCPHDR_SYN) {
		/* R5: TFO child, created from the SYN; its SYN-ACK is not built yet. Leave a
		 * marker for SYN-ACK retransmits and decide on the first read or state change. */
		st->flags |= SMCR_F_TFO | SMCR_F_PENDING;
		st->isn = k.isn;
		k.isn = 0;
		if (st->flags & SMCR_F_PEER) {
			v.isn = st->isn;
			v.flags = SMCR_F_PEER;
			bpf_map_update_elem(&smcr_echo, &k, &v, BPF_ANY);
		} else {
			bpf_map_delete_elem(&smcr_echo, &k);
		}
		cb_flags(skops, BPF_SOCK_OPS_STATE_CB_FLAG, 0);
		return;
	}
	st->isn = k.isn;
	child_apply_echo(st, bpf_map_lookup_elem(&smcr_echo, &k));
	bpf_map_delete_elem(&smcr_echo, &k);
	cb_flags(skops, 0, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG); /* R6 */
}

/* TFO child whose handshake is over: final result, records dropped, callbacks off (R5,
 * R6). Only ESTABLISHED and CLOSE end it: a child closed while still in SYN_RECV (FIN_WAIT1)
 * may retransmit its SYN-ACK and must repeat the echo. */
static __always_inline void on_state(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk;
	struct smcr_sk_val *st;
	struct smcr_echo_key k = {};

	if (skops->args[1] != BPF_TCP_ESTABLISHED && skops->args[1] != BPF_TCP_CLOSE)
		return;
	sk = skops->sk;
	if (!sk)
		return;
	st = bpf_sk_storage_get(&smcr_sk, sk, 0, 0);
	if (!st || !(st->flags & SMCR_F_TFO))
		return;
	key_from_sock(skops, &k);
	k.isn = st->isn;
	if (st->flags & SMCR_F_PENDING)
		child_apply_echo(st, bpf_map_lookup_elem(&smcr_echo, &k));
	bpf_map_delete_elem(&smcr_echo, &k);
	k.isn = 0;
	bpf_map_delete_elem(&smcr_echo, &k);
	cb_flags(skops, 0, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG | BPF_SOCK_OPS_STATE_CB_FLAG);
}

SEC("sockops")
int smcr_sockops(struct bpf_sock_ops *skops)
{
	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		on_connect(skops);
		break;
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		on_listen(skops);
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		on_hdr(skops, 0);
		break;
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		on_hdr(skops, 1);
		break;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		on_active_established(skops);
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		on_passive_established(skops);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		on_state(skops);
		break;
	default:
		break;
	}
	return 1;
}

/* setsockopt(fd, SMCR_SOL, SMCR_SO_ENABLE, &int, 4). Everything else passes through. */
SEC("cgroup/setsockopt")
int smcr_setsockopt(struct bpf_sockopt *ctx)
{
	struct bpf_sock *sk;
	struct smcr_sk_val *st;
	__u8 *p, *end;
	int val;

	if (ctx->level != SMCR_SOL)
		goto pass;
	sk = ctx->sk;
	if (!sk || sk->protocol != SMCR_IPPROTO_TCP)
		goto pass; /* not TCP: the kernel answers ENOPROTOOPT */
	if (ctx->optname != SMCR_SO_ENABLE)
		return 0; /* EPERM */
	p = (__u8 *)ctx->optval;
	end = (__u8 *)ctx->optval_end;
	if (p + sizeof(int) > end)
		return 0;
	val = *(int *)p;
	st = bpf_sk_storage_get(&smcr_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return 0;
	if (val) {
		st->flags |= SMCR_F_REQUESTED;
		ctr(SMCR_C_OPTIN);
		if (sk->state != BPF_TCP_CLOSE) { /* R1: connect()/listen() already ran */
			st->flags |= SMCR_F_LATE;
			ctr(SMCR_C_OPTIN_LATE);
		}
	} else if (!(st->flags & SMCR_F_ARMED)) {
		st->flags &= ~(SMCR_F_REQUESTED | SMCR_F_LATE);
	}
	ctx->optlen = -1; /* handled: the kernel's setsockopt does not run */
	return 1;
pass:
	if (ctx->optlen > SMCR_PAGE_SIZE)
		ctx->optlen = 0; /* large optval: let the kernel use the user's buffer */
	return 1;
}

/* getsockopt(fd, SMCR_SOL, SMCR_SO_STATE, &struct smcr_bpf_state, &len). */
SEC("cgroup/getsockopt")
int smcr_getsockopt(struct bpf_sockopt *ctx)
{
	struct bpf_sock *sk;
	struct smcr_sk_val *st;
	struct smcr_bpf_state *out;
	struct smcr_echo_key k = {};
	__u8 *end;
	__u32 flags = 0;

	if (ctx->level != SMCR_SOL)
		goto pass;
	sk = ctx->sk;
	if (!sk || sk->protocol != SMCR_IPPROTO_TCP)
		goto pass;
	if (ctx->optname != SMCR_SO_STATE)
		return 0; /* EPERM */
	out = (struct smcr_bpf_state *)ctx->optval;
	end = (__u8 *)ctx->optval_end;
	if ((__u8 *)(out + 1) > end)
		return 0;
	st = bpf_sk_storage_get(&smcr_sk, sk, 0, 0);
	if (st) {
		if (st->flags & SMCR_F_PENDING) {
			/* R5: TFO child; its first SYN-ACK was written before accept() could
			 * return it, so the echo record is there now. */
			k.netns = bpf_get_netns_cookie(ctx);
			k.lport = (__u16)sk->src_port;
			k.rport = bpf_ntohs(sk->dst_port);
			k.isn = st->isn;
			child_apply_echo(st, bpf_map_lookup_elem(&smcr_echo, &k));
		}
		flags = st->flags & ~SMCR_F_RSV;
	}
	out->abi = SMCR_BPF_ABI;
	out->flags = flags;
	ctr(SMCR_C_STATE_READ);
	ctx->optlen = sizeof(*out);
	asm volatile("" ::: "memory"); /* keep the two context stores apart (verifier) */
	ctx->retval = 0;
	return 1;
pass:
	if (ctx->optlen > SMCR_PAGE_SIZE)
		ctx->optlen = 0;
	return 1;
}
