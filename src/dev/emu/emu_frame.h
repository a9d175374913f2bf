/* emu_frame.h: the frame codec of the emulated RDMA provider (docs/parts/emu.md "Frame
 * format"). A QP's traffic runs over one TCP connection as a sequence of frames; this file
 * turns frames into bytes and back, and nothing else (parsing is separate from applying,
 * STYLE.md 7): the receiver (emu_rx.c) validates decoded frames against its MR table and
 * QP state.
 *
 * Every frame: an 8-byte header, then a body of body_len bytes.
 *   off 0  u8   type       enum emu_ftype
 *   off 1  u8   flags      EMU_FL_*; only SEND and WRITE_IMM may set any
 *   off 2  u16  reserved   0
 *   off 4  u32  body_len   bytes after the header
 * The body starts with a fixed part whose size depends on the type (emu_frame_fixed_len);
 * data frames (WRITE, WRITE_IMM, SEND) carry their payload after it. All integers are
 * big-endian. The decoder treats the peer as hostile: it reads only through util/cursor.h
 * and returns a distinct -SMCR_E_EMU_* code for each violation (util/errors/emu.def).
 */
#ifndef SMCR_DEV_EMU_EMU_FRAME_H
#define SMCR_DEV_EMU_EMU_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "dev/dev.h"
#include "util/cursor.h"

#define EMU_HDR_LEN 8u
/* Largest payload of one data frame: the port's max_msg_sz. */
#define EMU_MAX_MSG (1u << 24)

enum emu_ftype {
	EMU_F_HELLO = 1,	/* connector -> listener: pair my QP with yours */
	EMU_F_HELLO_ACK = 2,	/* listener -> connector: accepted (status 0) or refused */
	EMU_F_WRITE = 3,	/* RDMA WRITE */
	EMU_F_WRITE_IMM = 4,	/* RDMA WRITE with immediate (consumes a receive WR) */
	EMU_F_SEND = 5,		/* SEND (consumes a receive WR) */
	EMU_F_ACK = 6,		/* receiver applied every data frame up to seq */
	EMU_F_NAK = 7,		/* receiver refused the data frame seq (and goes to ERR) */
	EMU_F_RNR = 8,		/* receiver has no receive WR for frame seq yet: keep waiting */
};
#define EMU_F_MIN EMU_F_HELLO
#define EMU_F_MAX EMU_F_RNR

/* Flags (SEND and WRITE_IMM only). */
#define EMU_FL_SOLICITED 0x01u		/* DEV_SEND_SOLICITED */
#define EMU_FL_RNR_SHIFT 1		/* bits 1-3: the sender's rnr_retry (7 = infinite) */
#define EMU_FL_RNR_MASK 0x0eu
#define EMU_FL_DATA_MASK (EMU_FL_SOLICITED | EMU_FL_RNR_MASK)

/* Fixed body sizes. */
#define EMU_HELLO_LEN 48u
#define EMU_HELLO_ACK_LEN 8u
#define EMU_WRITE_FIXED 16u
#define EMU_WRITE_IMM_FIXED 20u
#define EMU_SEND_FIXED 4u
#define EMU_ACK_LEN 4u
#define EMU_NAK_LEN 8u
#define EMU_RNR_LEN 4u
/* Largest header + fixed part: what a receiver buffers before it streams a payload. */
#define EMU_MAX_FIXED (EMU_HDR_LEN + EMU_HELLO_LEN)

#define EMU_HELLO_MAGIC 0x534d4555u	/* "SMEU" */
#define EMU_VERSION 1u

/* HELLO_ACK status. */
enum emu_hello_status {
	EMU_HS_OK = 0,
	EMU_HS_NO_QP = 1,	/* no QP with the destination QPN */
	EMU_HS_MISMATCH = 2,	/* that QP's remote (GID, QPN) is not the sender, or roles wrong */
	EMU_HS_BUSY = 3,	/* that QP is already connected or another hello waits for it */
	EMU_HS_PORT_DOWN = 4,	/* the device's port is down */
	EMU_HS_BAD_HELLO = 5,	/* destination GID is not ours or source GID is not the peer */
	EMU_HS_QP_ERR = 6,	/* that QP is in ERR */
};
#define EMU_HS_MAX EMU_HS_QP_ERR

/* NAK codes: what the sender's WR completes with. */
enum emu_nak_code {
	EMU_NAK_REM_ACCESS = 1,		/* DEV_WC_REM_ACCESS_ERR */
	EMU_NAK_REM_INV_REQ = 2,	/* DEV_WC_REM_INV_REQ_ERR (SEND too long) */
	EMU_NAK_RNR_EXC = 3,		/* DEV_WC_RNR_RETRY_EXC_ERR */
	EMU_NAK_REM_OP = 4,		/* DEV_WC_REM_OP_ERR (receiver's local error) */
};
#define EMU_NAK_MIN EMU_NAK_REM_ACCESS
#define EMU_NAK_MAX EMU_NAK_REM_OP

struct emu_hello {
	uint8_t version;
	struct dev_gid src_gid;		/* connector's device */
	struct dev_gid dst_gid;		/* listener's device */
	uint32_t src_qpn;		/* connector's QP */
	uint32_t dst_qpn;		/* listener's QP */
};

/* A decoded frame (host order). Which member of u is valid depends on type. */
struct emu_frame {
	enum emu_ftype type;
	uint8_t flags;
	uint32_t body_len;
	uint32_t payload_len;		/* data frames: body_len - fixed part; else 0 */
	union {
		struct emu_hello hello;
		struct {
			uint8_t status;		/* enum emu_hello_status */
			uint32_t qpn;		/* the listener's QPN */
		} hello_ack;
		struct {
			uint32_t seq;
			uint64_t raddr;		/* WRITE, WRITE_IMM */
			uint32_t rkey;		/* WRITE, WRITE_IMM */
			uint32_t imm;		/* WRITE_IMM */
		} data;
		struct {
			uint32_t seq;
		} ack;				/* ACK and RNR */
		struct {
			uint32_t seq;
			uint8_t code;		/* enum emu_nak_code */
		} nak;
	} u;
};

/* Size of the fixed body part of a type (0 for an unknown type). */
uint32_t emu_frame_fixed_len(enum emu_ftype t);
/* 1 for WRITE, WRITE_IMM, SEND. */
int emu_frame_is_data(enum emu_ftype t);

/* Decodes and validates the 8-byte header: type, flags, reserved, body_len for the type
 * (exact for fixed-size frames; fixed part + at most EMU_MAX_MSG for data frames). Sets
 * type, flags, body_len, payload_len. Cursor unmoved on failure (-SMCR_E_SHORT when fewer
 * than 8 bytes are there). */
SMCR_MUST_CHECK int emu_frame_hdr_decode(struct rcur *c, struct emu_frame *f);
/* Decodes the fixed body part of f->type (header already decoded into f). Cursor unmoved
 * on failure (-SMCR_E_SHORT when the fixed part is not all there yet). */
SMCR_MUST_CHECK int emu_frame_fixed_decode(struct rcur *c, struct emu_frame *f);
/* Both of the above, and the payload when the whole frame is in the buffer: *payload
 * points at it inside c's buffer (payload_len bytes). Cursor unmoved on failure. */
SMCR_MUST_CHECK int emu_frame_decode(struct rcur *c, struct emu_frame *f,
				     const uint8_t **payload);

/* Encodes header + fixed part of f (type, flags and the member of u; body_len is computed
 * from f->payload_len), then payload_len bytes from payload (may be NULL: the caller fills
 * them in later, the cursor is moved past them). Validates what the decoder checks, so an
 * encoded frame always decodes. Cursor unmoved on failure. */
SMCR_MUST_CHECK int emu_frame_encode(struct wcur *w, const struct emu_frame *f,
				     const void *payload);
/* Bytes emu_frame_encode writes for f. */
uint32_t emu_frame_len(const struct emu_frame *f);

#endif
