/* cdc.h: host-side struct and codec of the 44-byte CDC message, type 0xFE
 * (docs/protocol/wire-formats.md 7), with the receive checks of 7.1 that need no connection state
 * (length, length byte, type, non-zero alert token). Sequence-number and cursor rules live in
 * wire/curs.h; finding the connection and the F/validation logic belong to core.
 *
 * Pure functions, no state, no locks: safe from any thread. */
#ifndef SMCR_WIRE_CDC_H
#define SMCR_WIRE_CDC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "wire/curs.h"

#define CDC_MSG_LEN 44		/* what is sent, and byte 1 */
#define CDC_TYPE 0xFE
#define CDC_MIN_RX_LEN 26	/* Linux accepts a receive of >= 26 bytes (7.1) */

/* Producer flags, byte 24. */
#define CDC_PF_WRITE_BLOCKED 0x80	/* B */
#define CDC_PF_URG_PENDING 0x40		/* P */
#define CDC_PF_URG_PRESENT 0x20		/* U */
#define CDC_PF_CONS_UPD_REQ 0x10	/* R */
#define CDC_PF_FAILOVER 0x08		/* F (7.3) */
/* Connection state flags, byte 25. */
#define CDC_CF_DONE_WRITING 0x80	/* D */
#define CDC_CF_CLOSED 0x40		/* C */
#define CDC_CF_ABORT 0x20		/* A */

/* Flags as set by the SENDER of the CDC (Linux stores them as "peer_..." on receipt). */
struct cdc_prod_flags {
	bool write_blocked;	/* B: I have more data than fits in your RMBE */
	bool urg_pending;	/* P: urgent data is on its way */
	bool urg_present;	/* U: the byte just before this producer cursor is urgent */
	bool cons_upd_req;	/* R: please send me your consumer cursor */
	bool failover;		/* F: failover validation message */
};

struct cdc_conn_flags {
	bool done_writing;	/* D: I will send no more data */
	bool closed;		/* C: I have closed the connection */
	bool abort;		/* A: I have aborted the connection */
};

struct cdc_msg {
	uint16_t seqno;		/* per connection and direction (7.2; compare with seq16_*) */
	uint32_t token;		/* the RECEIVER's alert token, non-zero */
	struct curs prod;	/* where the sender writes next in the receiver's RMBE */
	struct curs cons;	/* how far the sender has read in its own RMBE */
	struct cdc_prod_flags pf;
	struct cdc_conn_flags cf;
};

/* Decodes a received CDC of len bytes. 0, or a -SMCR_E_CDC_* code and *out zeroed.
 * Checks in order: len >= 1 and byte 0 == 0xFE (CDC_BAD_TYPE; len 0 is CDC_SHORT),
 * CDC_MIN_RX_LEN <= len (CDC_SHORT) <= 44 (CDC_LONG), byte 1 == 44 (CDC_BAD_LENGTH),
 * token != 0 (CDC_TOKEN_ZERO). Reserved bytes and bits are ignored; bytes 26..43 may be
 * missing (Linux rule, 7.1). */
SMCR_MUST_CHECK int cdc_decode(const uint8_t *buf, size_t len, struct cdc_msg *out);

/* Writes m as 44 bytes, reserved zero. 0, or -SMCR_E_CDC_TOKEN_ZERO (out untouched). */
SMCR_MUST_CHECK int cdc_encode(const struct cdc_msg *m, uint8_t out[CDC_MSG_LEN]);

bool cdc_msg_equal(const struct cdc_msg *a, const struct cdc_msg *b);

/* Flag bytes <-> structs (for logs and smcr-decode). Reserved bits are dropped. */
uint8_t cdc_prod_flags_byte(const struct cdc_prod_flags *pf);
uint8_t cdc_conn_flags_byte(const struct cdc_conn_flags *cf);

#endif
