/* abi.h: what the smcr BPF programs and userspace agree on (docs/protocol/wire-formats.md 1,
 * docs/protocol/linux-interop.md 3, docs/parts/bpf.md).
 *
 * Included by the BPF object (smcr_opt.bpf.c, compiled with clang -target bpf), by the
 * libc-only opt-in channel (optin.c) and by the installer (tools/smcr-bpf). It holds only
 * constants and fixed-layout structs made of <linux/types.h> integers, so both compilers
 * lay them out the same way. Changing any layout or meaning here bumps SMCR_BPF_ABI.
 *
 * The private socket-option level (the channel applications use, no privilege needed):
 *   setsockopt(fd, SMCR_SOL, SMCR_SO_ENABLE, &(int){1}, sizeof(int))
 *       before connect()/listen(): opt this TCP socket in. 0 withdraws a request that was
 *       not armed yet. Handled entirely by the cgroup/setsockopt program; outside a covered
 *       cgroup the kernel answers ENOPROTOOPT (unknown level). A short optval or an unknown
 *       option name under SMCR_SOL is refused with EPERM (the only error a cgroup sockopt
 *       program can return on the kernel floor we support).
 *   getsockopt(fd, SMCR_SOL, SMCR_SO_STATE, &struct smcr_bpf_state, &len >= 8)
 *       the socket's flags below; for an accepted socket the listener's are inherited
 *       (BPF_F_CLONE). Runs under the socket lock, after the kernel's own handling.
 *       Outside a covered cgroup the kernel's own answer stays: ENOPROTOOPT for IPv6
 *       sockets, EOPNOTSUPP for IPv4 ones (ip_getsockopt's choice).
 */
#ifndef SMCR_BPF_ABI_H
#define SMCR_BPF_ABI_H

#include <linux/types.h>

/* Bumped whenever a struct, flag or option name below changes meaning. */
#define SMCR_BPF_ABI 1

/* "SMCR" in ASCII: far above every SOL_* the kernel defines (all below 300), so an
 * uncovered socket gets ENOPROTOOPT from the kernel's own level switch. */
#define SMCR_SOL 0x534d4352
#define SMCR_SO_ENABLE 1 /* int: 1 opt in, 0 withdraw (setsockopt only) */
#define SMCR_SO_STATE 2  /* struct smcr_bpf_state (getsockopt only) */

/* The option itself (docs/protocol/wire-formats.md 1): kind 254, length 6, ExID E2 D4 C3 D9. */
#define SMCR_TCPOPT_KIND 254
#define SMCR_TCPOPT_LEN 6
#define SMCR_TCPOPT_EXID0 0xE2
#define SMCR_TCPOPT_EXID1 0xD4
#define SMCR_TCPOPT_EXID2 0xC3
#define SMCR_TCPOPT_EXID3 0xD9

/* Per-socket flags (the value of the socket-local storage, and what SMCR_SO_STATE
 * returns). Writers: the cgroup/setsockopt program (REQUESTED, LATE) and the sock_ops
 * program (all others), each under the socket lock, except that a listener's flags are
 * copied to its children when they are created. Reader: SMCR_SO_STATE. */
#define SMCR_F_REQUESTED 0x0001u /* the application asked (SMCR_SO_ENABLE=1) */
#define SMCR_F_LATE 0x0002u      /* asked when the socket was no longer closed */
#define SMCR_F_ARMED 0x0004u     /* header-option callbacks armed at connect/listen */
#define SMCR_F_ACTIVE 0x0008u    /* armed in TCP_CONNECT_CB (client) */
#define SMCR_F_LISTENER 0x0010u  /* armed in TCP_LISTEN_CB (listener; children inherit) */
#define SMCR_F_CHILD 0x0020u     /* passive child of an armed listener */
#define SMCR_F_SENT 0x0040u      /* client: our option went out on a SYN */
#define SMCR_F_PEER 0x0080u      /* the peer's SYN (server) / SYN-ACK (client) carried it */
#define SMCR_F_ECHOED 0x0100u    /* server: the SYN-ACK carried it (confirmed by writer) */
#define SMCR_F_NOSPACE 0x0200u   /* no option space: SYN (client) / SYN-ACK (server) */
#define SMCR_F_COOKIE 0x0400u    /* server: answered with a syncookie, no echo */
#define SMCR_F_NOSAVESYN 0x0800u /* listener: TCP_SAVE_SYN could not be set, not armed */
#define SMCR_F_ARMFAIL 0x1000u   /* callback flags could not be set, not armed */
#define SMCR_F_TFO 0x2000u       /* server: Fast Open child */
#define SMCR_F_PENDING 0x4000u   /* server TFO child: echo result not known yet */
#define SMCR_F_DONE 0x8000u      /* the handshake result is final */
#define SMCR_F_NOSYN 0x10000u    /* server: no saved SYN for the child (result from echo) */
#define SMCR_F_RSV 0x20000u      /* internal (client): option space reserved for this SYN */

/* Socket-local storage value (BPF_MAP_TYPE_SK_STORAGE, BPF_F_CLONE). */
struct smcr_sk_val {
	__u32 flags; /* SMCR_F_* */
	__u32 isn;   /* server TFO child: the client's ISN, to find its echo record */
};

/* getsockopt(SMCR_SOL, SMCR_SO_STATE) result. */
struct smcr_bpf_state {
	__u32 abi;   /* SMCR_BPF_ABI of the installed program */
	__u32 flags; /* SMCR_F_* */
};

/* Counters: one per-CPU array slot each; `smcr-bpf status` sums them. Keep the names
 * table in tools/smcr-bpf in the same order. */
enum smcr_bpf_ctr {
	SMCR_C_OPTIN,          /* SMCR_SO_ENABLE=1 accepted */
	SMCR_C_OPTIN_LATE,     /* ... on a socket already connecting/listening */
	SMCR_C_ARM_CONNECT,    /* clients armed */
	SMCR_C_ARM_LISTEN,     /* listeners armed */
	SMCR_C_ARM_FAIL,       /* arming failed (callback flags) */
	SMCR_C_SAVESYN_FAIL,   /* listeners not armed: TCP_SAVE_SYN refused */
	SMCR_C_SYN_WRITTEN,    /* options written on SYNs */
	SMCR_C_SYN_NOSPACE,    /* SYNs without room for the option */
	SMCR_C_SYNACK_ECHOED,  /* options echoed on SYN-ACKs */
	SMCR_C_SYNACK_NOSPACE, /* SYN-ACKs without room: no echo (guarded) */
	SMCR_C_SYNACK_COOKIE,  /* syncookie SYN-ACKs to an offering SYN: no echo */
	SMCR_C_SYNACK_NOSYN,   /* SYN-ACK retransmits decided from the echo record */
	SMCR_C_ECHO_MAP_FAIL,  /* echo record could not be stored: no echo */
	SMCR_C_SEEN_SYN,       /* servers whose peer's SYN carried the option */
	SMCR_C_SEEN_SYNACK,    /* clients whose peer's SYN-ACK carried the option */
	SMCR_C_CLIENT_SMC,     /* clients that completed the exchange */
	SMCR_C_SERVER_SMC,     /* servers that completed the exchange */
	SMCR_C_STATE_READ,     /* SMCR_SO_STATE reads */
	SMCR_C__COUNT
};

/* Echo record (LRU hash), the guard between a SYN-ACK and the child socket: the SYN-ACK
 * callbacks run on a request socket that has no storage, so the writer of the SYN-ACK
 * records here whether the option really went out, and the child reads it. Keyed by the
 * client's initial sequence number so a record can never be taken for another
 * connection's. Writers: SYN-ACK callbacks (softirq or timer) and TFO children; reader and
 * deleter: the child's callbacks and SMCR_SO_STATE. */
struct smcr_echo_key {
	__u64 netns; /* network namespace cookie */
	__u32 isn;   /* client's initial sequence number (0: TFO marker, see the program) */
	__u16 lport; /* server port, host order */
	__u16 rport; /* client port, host order */
};
struct smcr_echo_val {
	__u32 isn;   /* for the TFO marker: the real ISN */
	__u32 flags; /* SMCR_F_ECHOED / NOSPACE / COOKIE / PEER */
};
#define SMCR_ECHO_MAX 16384

/* Install metadata (array map of one entry), written by smcr-bpf, read by status. */
#define SMCR_META_MAGIC 0x534d4352u
struct smcr_bpf_meta {
	__u32 magic;
	__u32 abi;
	__u64 installed_at; /* seconds since the epoch */
	__u64 cgroup_id;    /* inode number of the cgroup directory */
	char version[32];
	char cgroup[256];
};

#endif
