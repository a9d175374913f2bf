/* clc_internal.h: helpers shared by the clc_*.c codecs (not for other units): the frame
 * (header + trailer, docs/protocol/wire-formats.md 2.1) reader and writer and the byte-7 bit masks
 * (2.2). */
#ifndef SMCR_WIRE_CLC_INTERNAL_H
#define SMCR_WIRE_CLC_INTERNAL_H

#include "util/cursor.h"
#include "wire/clc.h"

/* Byte 7 (2.2). */
#define CLC_B7_VERSION_SHIFT 4
#define CLC_B7_TYPEV2_MASK 0x0C		/* Proposal version >= 2: v2 path */
#define CLC_B7_TYPEV2_SHIFT 2
#define CLC_B7_FLAG 0x08		/* Accept/Confirm: first contact; Decline: out of sync */
#define CLC_B7_PATH_MASK 0x03		/* typev1 / path chosen */
#define CLC_LEN_OFFSET 5

/* Checks the frame of a whole message in buf[0..len): the header as clc_peek_header does,
 * that the type is want, that len equals the length field, and the trailer eyecatcher.
 * Fills f and *byte7 and leaves *body as a cursor over the bytes between header and trailer
 * (absolute offsets: body->off == CLC_HDR_LEN, body->len == length - CLC_TRL_LEN). */
SMCR_MUST_CHECK int clc_frame_get(const void *buf, size_t len, enum clc_type want,
				  struct clc_frame *f, uint8_t *byte7, struct rcur *body);

/* Writes the header with a zero length field; clc_frame_end writes the trailer and patches
 * the length (STYLE.md 8). Version must be 1..15 and the eyecatchers known. */
SMCR_MUST_CHECK int clc_frame_begin(struct wcur *w, const struct clc_frame *f,
				    enum clc_type type, uint8_t low_nibble);
SMCR_MUST_CHECK int clc_frame_end(struct wcur *w, const struct clc_frame *f);

#endif
