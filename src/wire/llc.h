/* llc.h: host-side structs and the 44-byte codec of the eight SMC-R v1 LLC messages
 * (docs/protocol/wire-formats.md 6: 6.1 header, 6.2 CONFIRM LINK, 6.3 ADD LINK, 6.4 ADD LINK
 * CONTINUATION, 6.5 DELETE LINK, 6.6 CONFIRM RKEY, 6.7 CONFIRM RKEY CONTINUATION,
 * 6.8 DELETE RKEY, 6.9 TEST LINK), requests and responses alike.
 *
 * The protocol sees only these structs; byte order, offsets and bit positions live in the
 * codec (STYLE.md 5). llc_decode validates everything docs/protocol/wire-formats.md 6 lists and
 * returns a distinct -SMCR_E_LLC_* code per violation (src/util/errors/llc.def); reserved bytes and
 * reserved flag bits are ignored on receive and sent as zeros. llc_encode checks the same
 * rules (plus field ranges the wire cannot express), so whatever it writes llc_decode
 * accepts, and decode -> encode -> decode gives an equal struct (llc_msg_equal).
 *
 * Pure functions, no state, no locks: safe from any thread. */
#ifndef SMCR_WIRE_LLC_H
#define SMCR_WIRE_LLC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "wire/types.h"

#define LLC_MSG_LEN 44		/* every v1 LLC message, and byte 1 (docs/protocol/wire-formats.md 6.1) */
#define LLC_FLAG_RESP 0x80	/* byte 3, all types: this is a response */

/* Type byte (offset 0) of the v1 messages. */
enum llc_type {
	LLC_CONFIRM_LINK = 0x01,
	LLC_ADD_LINK = 0x02,
	LLC_ADD_LINK_CONT = 0x03,
	LLC_DELETE_LINK = 0x04,
	LLC_CONFIRM_RKEY = 0x06,
	LLC_TEST_LINK = 0x07,
	LLC_CONFIRM_RKEY_CONT = 0x08,
	LLC_DELETE_RKEY = 0x09,
};

#define LLC_TYPE_CDC 0xFE	/* same receive queue: the CDC message (wire/cdc.h) */

/* What a received type byte is (docs/protocol/wire-formats.md 6.1): lets the receive path and
 * smcr-decode dispatch before decoding. */
enum llc_kind {
	LLC_KIND_V1,		/* one of enum llc_type: llc_decode it */
	LLC_KIND_CDC,		/* 0xFE: cdc_decode it */
	LLC_KIND_V2,		/* SMC-R v2 LLC (0x21, 0x22, 0x24-0x27, 0x29): not in a v1 LG */
	LLC_KIND_UNKNOWN,	/* anything else: Linux drops it silently */
};

enum llc_kind llc_kind_of(uint8_t type);
/* "CONFIRM LINK", ..., "CDC", "v2 ADD LINK", ...; "unknown" for other bytes. */
const char *llc_type_name(uint8_t type);

/* 6.2 CONFIRM LINK */
#define LLC_CL_FLAG_NO_RMBE_EYEC 0x03	/* both bits: "my RMBEs have no eyecatcher" */
#define LLC_CL_MAX_LINKS 2		/* what Linux (and smcr) sends in max_links */

struct llc_confirm_link {
	uint8_t no_eyec;		/* byte 3 & 0x03 as on the wire; send 0x03 */
	struct wire_mac mac;		/* sender MAC */
	struct wire_gid gid;		/* sender GID */
	uint32_t qpn;			/* sender QPN, 24 bits */
	uint8_t link_num;		/* non-zero; request: assigned by the server */
	uint32_t link_uid;		/* sender link user ID, 4 opaque bytes (big-endian) */
	uint8_t max_links;
};

/* 6.3 ADD LINK */
#define LLC_AL_FLAG_REJECT 0x40
#define LLC_AL_REJ_NO_ALT_PATH 1	/* reject reasons (byte 2 low nibble) */
#define LLC_AL_REJ_INVALID_MTU 2

struct llc_add_link {
	bool rejected;			/* byte 3 0x40 (with resp) */
	uint8_t rej_reason;		/* byte 2 low nibble, 0..15 */
	struct wire_mac mac;		/* sender MAC of the new link's port */
	struct wire_gid gid;
	uint32_t qpn;			/* sender's new QP, 24 bits */
	uint8_t link_num;		/* 0 only in the client's "please add a link" request */
	uint8_t mtu;			/* QP MTU code 1..5 (wire/codes.h); 0 allowed, see below */
	uint32_t psn;			/* initial PSN of the sender's new QP, 24 bits */
};

/* 6.4 ADD LINK CONTINUATION */
#define LLC_ALC_MAX_PAIRS 2

struct llc_alc_pair {
	uint32_t rkey;			/* rkey of the RMB on the link this message travels on */
	uint32_t rkey_new;		/* rkey of the same RMB on the new link */
	uint64_t vaddr_new;		/* its virtual address for the new link */
};

struct llc_add_link_cont {
	uint8_t link_num;		/* the new link, non-zero */
	uint8_t num_rkeys;		/* RTokens still to send, this message's included */
	struct llc_alc_pair rt[LLC_ALC_MAX_PAIRS];	/* first min(num_rkeys, 2) used; rest 0 */
};

/* 6.5 DELETE LINK */
#define LLC_DL_FLAG_ALL 0x40		/* terminate the whole link group */
#define LLC_DL_FLAG_ORDERLY 0x20

/* Reason codes (Linux SMC_LLC_DEL_*). */
#define LLC_DEL_LOST_PATH 0x00010000u
#define LLC_DEL_OP_INIT_TERM 0x00020000u
#define LLC_DEL_PROG_INIT_TERM 0x00030000u
#define LLC_DEL_PROT_VIOL 0x00040000u
#define LLC_DEL_NO_ASYM_NEEDED 0x00050000u
#define LLC_DEL_NOLNK 0x00100000u	/* response: unknown link number */
#define LLC_DEL_NOLGR 0x00200000u	/* response: unknown link group */

struct llc_delete_link {
	bool all;			/* 0x40 */
	bool orderly;			/* 0x20 */
	uint8_t link_num;		/* non-zero unless all (then 0 is sent) */
	uint32_t reason;		/* offset 5, unaligned */
};

/* 6.6 CONFIRM RKEY */
#define LLC_CR_FLAG_NEGATIVE 0x20
#define LLC_CR_FLAG_RETRY 0x10
#define LLC_CR_MAX_OTHER 2

struct llc_rtoken {			/* 13 bytes on the wire */
	uint8_t link_num;		/* non-zero */
	uint32_t rkey;
	uint64_t vaddr;
};

struct llc_confirm_rkey {
	bool negative;			/* 0x20 */
	bool retry;			/* 0x10 (Linux sets 0x20|0x10 on failure) */
	uint8_t num_other;		/* entries in other[], 0..2 */
	uint32_t rkey;			/* the RMB on the link this message travels on */
	uint64_t vaddr;
	struct llc_rtoken other[LLC_CR_MAX_OTHER];	/* first num_other used; rest 0 */
};

/* 6.7 CONFIRM RKEY CONTINUATION */
#define LLC_CRC_MAX_ENTRIES 3

struct llc_confirm_rkey_cont {
	bool negative;			/* 0x20 */
	uint8_t num_remaining;		/* >= 1; this message holds min(value, 3) entries */
	struct llc_rtoken entry[LLC_CRC_MAX_ENTRIES];	/* unused entries 0 */
};

/* 6.8 DELETE RKEY */
#define LLC_DR_FLAG_NEGATIVE 0x20
#define LLC_DR_MAX 8

struct llc_delete_rkey {
	bool negative;			/* 0x20: some rkeys failed */
	uint8_t count;			/* 1..8 */
	uint8_t err_mask;		/* response: (0x80 >> i) = rkey[i] failed; only i < count */
	uint32_t rkey[LLC_DR_MAX];	/* first count used; rest 0 */
};

/* 6.9 TEST LINK */
#define LLC_TL_DATA_LEN 16

struct llc_test_link {
	uint8_t data[LLC_TL_DATA_LEN];	/* any in the request; the response echoes it */
};

/* One LLC message. Only the union member named by type is meaningful. */
struct llc_msg {
	enum llc_type type;
	bool resp;			/* byte 3 0x80 */
	union {
		struct llc_confirm_link confirm_link;
		struct llc_add_link add_link;
		struct llc_add_link_cont add_link_cont;
		struct llc_delete_link delete_link;
		struct llc_confirm_rkey confirm_rkey;
		struct llc_confirm_rkey_cont confirm_rkey_cont;
		struct llc_delete_rkey delete_rkey;
		struct llc_test_link test_link;
	};
};

/* Decodes exactly one received LLC message of len bytes. 0 on success; otherwise a
 * -SMCR_E_LLC_* code and *out is zeroed. Checks in this order: len >= 1, type byte
 * (LLC_IS_CDC, LLC_V2_UNSUPPORTED, LLC_UNKNOWN_TYPE), len == 44 (LLC_SHORT / LLC_LONG),
 * byte 1 == 44 (LLC_BAD_LENGTH), then the per-type rules. */
SMCR_MUST_CHECK int llc_decode(const uint8_t *buf, size_t len, struct llc_msg *out);

/* Checks m against the rules llc_decode applies, plus the ranges of the 24-bit and 4-bit
 * fields. 0 or a -SMCR_E_LLC_* code. */
SMCR_MUST_CHECK int llc_validate(const struct llc_msg *m);

/* Writes m as 44 bytes (reserved bytes and unused entries zero). 0, or the llc_validate
 * code and out untouched. */
SMCR_MUST_CHECK int llc_encode(const struct llc_msg *m, uint8_t out[LLC_MSG_LEN]);

/* Field-by-field equality of two messages (type, resp and the type's member only). */
bool llc_msg_equal(const struct llc_msg *a, const struct llc_msg *b);

/* CONFIRM LINK acceptance rule of Linux (docs/protocol/wire-formats.md 6.2): the peer must declare
 * "no RMBE eyecatchers" (either bit of 0x03). 0, or -SMCR_E_LLC_RMBE_EYECATCHERS whose decline
 * code is 0x03050000. */
SMCR_MUST_CHECK int llc_confirm_link_check_eyec(const struct llc_confirm_link *cl);

/* ADD LINK reject exactly as Linux sends it (docs/protocol/wire-formats.md 6.3,
 * smc_llc_cli_add_link_reject): the request's 44 bytes echoed with byte 2 = reason & 0x0F
 * and byte 3 |= 0xC0. Works on raw bytes so a request that failed llc_decode (say, an
 * invalid MTU code) can still be rejected. req and out may be the same buffer. */
void llc_add_link_reject_raw(const uint8_t req[LLC_MSG_LEN], uint8_t reason,
			     uint8_t out[LLC_MSG_LEN]);

/* Names for logs and smcr-decode: DELETE LINK reason ("LOST_PATH", ...) and ADD LINK
 * reject reason ("NO_ALT_PATH", "INVALID_MTU"); NULL for values without a name. */
const char *llc_del_reason_name(uint32_t reason);
const char *llc_add_link_rej_name(uint8_t reason);

#endif
