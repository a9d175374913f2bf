/* shm_msg.h: control messages between two shm devices over their Unix SOCK_SEQPACKET
 * connection: greeting, QP connection handshake, MR export, QP teardown
 * (docs/parts/dev-shm.md "Control protocol"). The data path never uses them.
 *
 * Wire form (big-endian, through util/cursor): u32 magic "SMSH", u8 version 1, u8 type,
 * u16 body length, body. File descriptors travel beside it (SCM_RIGHTS); their number is
 * fixed per type. Everything is decoded through the bounds-checked cursor and validated
 * before use: the peer is hostile. */
#ifndef SMCR_DEV_SHM_MSG_H
#define SMCR_DEV_SHM_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "dev/dev.h"
#include "dev/shm/shm_ring.h"

#define SHM_MSG_MAGIC 0x534d5348u	/* "SMSH" */
#define SHM_MSG_VERSION 1u
#define SHM_MSG_HDR_LEN 8u
#define SHM_MSG_MAX 128u		/* largest encoded message */
#define SHM_MSG_MAX_FDS 2

enum shm_msg_type {
	/* First message on a connection, both ways: who I am, whom I want; fds: my rkey
	 * validity table (sealed memfd, read-only for you), my device's kick eventfd. */
	SHM_MSG_HELLO = 1,
	/* Initiator -> responder: connect my QP src to your QP dst. fds: my inbound ring,
	 * my receive CQ's eventfd. */
	SHM_MSG_QP_REQ = 2,
	/* Responder -> initiator: accepted (sent after my MR exports). fds: as QP_REQ. */
	SHM_MSG_QP_ACK = 3,
	/* Initiator -> responder: my MR exports are sent, the pair is up. */
	SHM_MSG_QP_RTU = 4,
	/* Either way: my QP src left the connection (destroyed, reset, error): yours goes to
	 * ERR. */
	SHM_MSG_QP_GONE = 5,
	/* Export of a REMOTE_WRITE MR of a PD that has a connected QP with you. fd: its memfd. */
	SHM_MSG_MR_ADD = 6,
	SHM_MSG_MR_ACK = 7,	/* MR_ADD seq mapped */
	SHM_MSG_MR_DEL = 8,	/* rkey deregistered: unmap it */
};

/* QP_GONE reasons: what the receiving QP reports. */
enum shm_gone_reason {
	SHM_GONE_DISCONNECT = 1,	/* peer QP destroyed / reset / moved to ERR */
	SHM_GONE_ACCESS = 2,		/* our WRITE was refused: the target QP goes to ERR */
	SHM_GONE_PORT_DOWN = 3,
};

struct shm_msg_qp {
	uint32_t src_qpn, dst_qpn;
	uint32_t pd_id;		/* sender QP's PD (the PD its MRs are checked against) */
	uint32_t ncells;	/* sender's inbound ring */
	uint32_t caps_size;
	uint32_t max_recv_wr;	/* sender's receive queue depth */
	uint8_t min_rnr_timer;
	uint8_t mtu;
};

struct shm_msg {
	enum shm_msg_type type;
	union {
		struct {
			struct dev_gid src, dst;
			uint32_t tab_entries;	/* rkey table entries (u32 each) */
		} hello;
		struct shm_msg_qp qp;		/* QP_REQ, QP_ACK, QP_RTU (ids only) */
		struct {
			uint32_t src_qpn, dst_qpn, reason;
		} gone;
		struct {
			uint32_t seq, rkey, pd_id, access;
			uint64_t iova, length, mem_off;
		} mr_add;
		struct {
			uint32_t seq;
		} mr_ack;
		struct {
			uint32_t rkey;
		} mr_del;
	} u;
};

/* fds a message of this type carries (0 for an unknown type). */
int shm_msg_nfds(enum shm_msg_type t);
/* Encodes into buf (SHM_MSG_MAX bytes); returns the length or a negative code. */
SMCR_MUST_CHECK int shm_msg_encode(const struct shm_msg *m, uint8_t *buf, size_t cap);
/* Decodes and validates one received message (nfds = fds that came with it).
 * Distinct codes: SHM_MSG_BAD_MAGIC/_VERSION/_TYPE/_LEN/_FDS/_FIELD, SHORT. */
SMCR_MUST_CHECK int shm_msg_decode(const uint8_t *buf, size_t len, int nfds, struct shm_msg *m);

/* Sends one message with fds on a SEQPACKET socket (whole or nothing; the socket has a send
 * timeout). 0, or -SMCR_E_SHM_PEER_GONE. */
SMCR_MUST_CHECK int shm_msg_send(int sock, const struct shm_msg *m, const int *fds, int nfds);
/* Receives one message (nonblocking socket). 0 with *m and fds[] (*nfds of them, owned by
 * the caller) on success; -SMCR_E_AGAIN if none; -SMCR_E_SHM_PEER_GONE on EOF/error; a
 * decode error otherwise (fds already closed then). */
SMCR_MUST_CHECK int shm_msg_recv(int sock, struct shm_msg *m, int fds[SHM_MSG_MAX_FDS],
				 int *nfds);

#endif
