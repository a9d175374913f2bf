/* clc.h: the four CLC messages of SMC-R v1 (docs/protocol/wire-formats.md 2-5; RFC 7609 App. A.2).
 *
 * CLC messages travel inside the TCP stream before any data: Proposal (client -> server),
 * Accept (server -> client), Confirm (client -> server), Decline (either way, any time during
 * setup). Each starts with an 8-byte header (eyecatcher "SMCR"/"SMCD", type, length, version
 * + flags) and ends with a 4-byte trailer eyecatcher (2.1).
 *
 * The structs below are host-side values; byte order and bit positions live only in the
 * clc_*.c codecs. Decoders treat the bytes as hostile: every field listed in 2.4 and 3.5 is
 * checked and each violation has its own error code (src/util/errors/clc.def). Nothing reads
 * past the bytes given. Encoders check that every field fits before writing; on error the
 * output buffer content is unspecified and *outlen is not set.
 *
 * Error decline codes (smcr_err_decline): 0 for framing errors (the TCP stream can no longer
 * be parsed: abort the connection, as Linux does for a malformed CLC message; every
 * clc_peek_header error is one); a code for a bad field inside a well-framed message that
 * has been read whole (the engine may decline and fall back to TCP).
 *
 * Pure functions, no state: callers own every struct and buffer. */
#ifndef SMCR_WIRE_CLC_H
#define SMCR_WIRE_CLC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "wire/types.h"

/* ---- framing (2.1, 2.2) ---- */

#define CLC_EYE_SMCR_U32 0xE2D4C3D9u	/* "SMCR" in EBCDIC */
#define CLC_EYE_SMCD_U32 0xE2D4C3C4u	/* "SMCD" in EBCDIC */
#define CLC_HDR_LEN 8
#define CLC_TRL_LEN 4

/* Sizes of the messages we handle (2.4 item 5, 3.5, 4, 5.1). */
#define CLC_PROPOSAL_MIN_LEN 52		/* v1, N = 0, IPv4 */
#define CLC_PROPOSAL_BASE_LEN 40	/* header + peer ID + GID + MAC + N */
#define CLC_PROPOSAL_OPT_LEN 40		/* Linux's optional area / SMC-D area (3.2) */
#define CLC_PROPOSAL_LINUX_LEN 92	/* what smcr sends for IPv4: N = 40 */
#define CLC_PREFIX_HDR_LEN 8		/* IPv4 subnet, prefix length, rsvd, IPv6 count */
#define CLC_IPV6_PREFIX_LEN 17		/* 16-byte prefix + 1-byte length */
#define CLC_MAX_V6_PREFIX 8		/* Linux SMC_CLC_MAX_V6_PREFIX: entries kept */
#define CLC_V2EXT_HDR_LEN 40		/* v2 extension fixed part (3.4) */
#define CLC_V2EXT_EID_LEN 32
#define CLC_V2EXT_MAX_EID 8		/* Linux SMC_CLC_MAX_UEID */
#define CLC_SMCD_V2EXT_HDR_LEN 48
#define CLC_SMCD_V2EXT_GID_LEN 10
#define CLC_V2EXT_MAX_GID 8		/* Linux SMCD_CLC_MAX_V2_GID_ENTRIES */
#define CLC_V2EXT_MAX_LEN (CLC_V2EXT_HDR_LEN + CLC_V2EXT_EID_LEN * CLC_V2EXT_MAX_EID + \
			   CLC_SMCD_V2EXT_HDR_LEN + CLC_SMCD_V2EXT_GID_LEN * CLC_V2EXT_MAX_GID)
#define CLC_PROPOSAL_MAX_LEN 1024	/* smcr's bound; Linux's biggest is 652 (see docs) */
#define CLC_ACCEPT_LEN 68		/* SMC-R v1 Accept / Confirm */
#define CLC_ACCEPT_SMCD_LEN 48		/* SMC-D v1 (recognised, rejected) */
#define CLC_ACCEPT_V2_MIN_LEN 108	/* SMC-R v2 (recognised, rejected) */
#define CLC_ACCEPT_MAX_LEN 1024		/* smcr's bound for reading one from the stream */
#define CLC_DECLINE_LEN 28
#define CLC_DECLINE_V2_LEN 44
#define CLC_DECLINE_V2_DIAGS 4		/* extra diagnosis words of a v2 Decline */
#define CLC_MSG_MAX_LEN 1024		/* largest message clc_peek_header lets through */

enum clc_type {
	CLC_PROPOSAL = 1,
	CLC_ACCEPT = 2,
	CLC_CONFIRM = 3,
	CLC_DECLINE = 4,
};

/* Which eyecatcher a message end carries; zero value = SMCR, what smcr sends. */
enum clc_eye {
	CLC_EYE_SMCR = 0,
	CLC_EYE_SMCD = 1,
};

/* Path values of the 2-bit type fields (Linux SMC_TYPE_R/D/N/B). */
enum clc_path {
	CLC_PATH_R = 0,
	CLC_PATH_D = 1,
	CLC_PATH_NONE = 2,
	CLC_PATH_BOTH = 3,
};

#define CLC_VERSION_1 1
#define CLC_VERSION_2 2

/* What every message carries besides its body. Decoders fill it; encoders write it.
 * version is the byte-7 high nibble (1..15; 0 is invalid on both sides). */
struct clc_frame {
	uint8_t version;
	enum clc_eye eye;	/* leading eyecatcher */
	enum clc_eye trail;	/* trailing eyecatcher */
};

/* Reads the 8-byte header at buf (needs only those 8 bytes, len >= 8) for stream readers:
 * checks the eyecatcher, type 1..4, version >= 1 and that the length field lies in the
 * type's bounds (Proposal 52..CLC_PROPOSAL_MAX_LEN, Accept/Confirm 48..CLC_ACCEPT_MAX_LEN,
 * Decline 28..44). On success the reader reads *msglen bytes in all and calls clc_decode.
 * Any output pointer may be NULL. Errors: CLC_SHORT_HEADER, CLC_BAD_EYECATCHER,
 * CLC_BAD_TYPE, CLC_BAD_VERSION, CLC_LEN_TOO_SMALL, CLC_LEN_TOO_BIG. */
SMCR_MUST_CHECK int clc_peek_header(const void *buf, size_t len, enum clc_type *type,
				    uint16_t *msglen, uint8_t *version);

/* Whether the first min(len, 4) bytes at buf can begin a CLC message: a prefix of the
 * "SMCR" or the "SMCD" eyecatcher (a server telling a plain TCP client from an SMC one
 * by its first bytes, before a whole header is there). */
bool clc_eye_prefix(const void *buf, size_t len);

/* ---- Proposal (3) ---- */

struct clc_ipv6_prefix {
	uint8_t addr[16];
	uint8_t len;		/* prefix length, 0..128 */
};

/* The v2 extension (3.4), recognised and skipped by v1: kept raw so a decoded Proposal
 * re-encodes byte-exactly, with the counts and flags parsed out for display. */
struct clc_v2ext {
	uint8_t eid_count;	/* user EIDs, 0..8 */
	uint8_t ism_gid_count;	/* SMC-D v2 GIDs, 0..8 */
	uint8_t release;	/* byte 3 high nibble */
	bool seid;		/* byte 3 mask 0x01 */
	uint16_t len;		/* bytes in raw: 40 + 32 * eid_count [+ 48 + 10 * ism_gid_count] */
	uint8_t raw[CLC_V2EXT_MAX_LEN];
};

/* A Proposal. Layout (3.1): header, peer ID, GID, MAC, N, N-byte optional area, IP prefix
 * area, [v2 extension], trailer.
 *
 * Byte 7 is f.version (high nibble), typev2 (mask 0x0C) and typev1 (mask 0x03). In a
 * version-1 Proposal typev2 holds reserved bits (kept so they re-encode); in version >= 2
 * it is the v2 path. In both, typev1 is the v1 path offered.
 *
 * Version 1: any N; the IP prefix area is at 40 + N; if N >= 40 the first 40 optional bytes
 * are read as Linux's SMC-D area (3.2: ism_gid, ism_chid, v2ext_offset), the rest ignored.
 * Version >= 2: the SMC-D area is always at 40..79; N <= 40, and N == 40 when typev1 offers
 * a path (then the IP area is at 80); no IP area when typev1 is NONE; a v2 extension when
 * typev2 is not NONE.
 *
 * Encoder: writes exactly these fields; unused optional bytes and reserved bytes as zero;
 * v2ext_offset is computed when a v2 extension is written, else written as given. */
struct clc_proposal {
	struct clc_frame f;
	uint8_t typev2;			/* 0..3 */
	uint8_t typev1;			/* 0..3, enum clc_path */
	struct wire_peer_id peer_id;
	struct wire_gid gid;		/* client's preferred RoCE v1 GID */
	struct wire_mac mac;
	uint16_t iparea_offset;		/* N */
	/* SMC-D area (3.2); all zero when only SMC-R is offered */
	uint64_t ism_gid;
	uint16_t ism_chid;
	uint16_t v2ext_offset;		/* counted from offset 52 */
	/* IP prefix area (3.3) */
	uint32_t ipv4_subnet;		/* host order, e.g. 0x0a000000 for 10.0.0.0 */
	uint8_t ipv4_prefix_len;	/* 0..32 */
	uint8_t ipv6_count;		/* count on the wire (validated against the length) */
	struct clc_ipv6_prefix ipv6[CLC_MAX_V6_PREFIX];	/* the first min(count, 8) */
	struct clc_v2ext v2ext;		/* used when has_v2ext */
	/* Derived by the decoder (the encoder derives them again and ignores these): */
	bool has_iparea;		/* version 1, or typev1 != NONE */
	bool has_v2ext;			/* version >= 2 and typev2 != NONE */
	bool offers_smcr_v1;		/* typev1 is SMC-R or both: else the engine declines */
	uint16_t length;		/* message length */
};

/* Fills p with smcr's default Proposal (3.1, 3.6): version 1, SMC-R (byte 7 = 0x10), N = 40
 * with a zero optional area, no IPv6 prefixes. The caller sets peer ID, GID, MAC, subnet. */
void clc_proposal_init(struct clc_proposal *p);
/* Length the encoder will produce for p, or 0 if p cannot be encoded. */
size_t clc_proposal_len(const struct clc_proposal *p);
SMCR_MUST_CHECK int clc_proposal_decode(const void *buf, size_t len, struct clc_proposal *p);
SMCR_MUST_CHECK int clc_proposal_encode(const struct clc_proposal *p, void *buf, size_t cap,
					size_t *outlen);

/* ---- Accept and Confirm, SMC-R v1 (4) ---- */

/* One struct for both: "sender" is the server in an Accept, the client in a Confirm. */
struct clc_accept {
	struct clc_frame f;		/* version must be 1 */
	bool first_contact;		/* byte 7 mask 0x08 */
	struct wire_peer_id peer_id;
	struct wire_gid gid;
	struct wire_mac mac;
	uint32_t qpn;			/* 24 bits */
	uint32_t rkey;
	uint8_t rmbe_idx;		/* 1-based (Linux: 1) */
	uint32_t token;			/* RMBE alert token, non-zero */
	uint8_t rmbe_size_code;		/* 0..15 (send 0..5; wire/codes.h) */
	uint8_t mtu_code;		/* 1..5 */
	uint64_t rmb_vaddr;
	uint32_t psn;			/* 24 bits */
};

/* type is CLC_ACCEPT or CLC_CONFIRM; the message's type byte must match (CLC_WRONG_TYPE). */
SMCR_MUST_CHECK int clc_accept_decode(const void *buf, size_t len, enum clc_type type,
				      struct clc_accept *a);
SMCR_MUST_CHECK int clc_accept_encode(const struct clc_accept *a, enum clc_type type,
				      void *buf, size_t cap, size_t *outlen);

/* ---- Decline (5) ---- */

struct clc_decline {
	struct clc_frame f;		/* version 1: 28 bytes; version >= 2: 44 bytes */
	bool out_of_sync;		/* byte 7 mask 0x08 (5.3) */
	uint8_t path;			/* byte 7 mask 0x03: 0 SMC-R (smcr sends 0), 1 SMC-D */
	struct wire_peer_id peer_id;
	uint32_t diag;			/* peer diagnosis code (5.2) */
	uint8_t os_type;		/* v2: byte 20 high nibble (1 z/OS, 2 Linux, 3 AIX, 15 unknown) */
	uint32_t diag_v2[CLC_DECLINE_V2_DIAGS];	/* v2 only */
};

SMCR_MUST_CHECK int clc_decline_decode(const void *buf, size_t len, struct clc_decline *d);
SMCR_MUST_CHECK int clc_decline_encode(const struct clc_decline *d, void *buf, size_t cap,
				       size_t *outlen);

/* Peer diagnosis codes (5.2): one row per code Linux 6.x sends, plus the 4.11-era ones. */
struct clc_decline_reason {
	uint32_t code;
	const char *name;	/* Linux name without SMC_CLC_DECL_, e.g. "DIFFPREFIX" */
	const char *meaning;
	bool old;		/* only Linux 4.11..~4.18 sends it (or meant something else then) */
};

/* Row for code, or NULL if unknown. For 0x03030000 (NOSMCDEV today, IPSEC in 4.11) the
 * current meaning is returned; its row says so. */
const struct clc_decline_reason *clc_decline_lookup(uint32_t code);
/* Name for code; "UNKNOWN" if not in the table. */
const char *clc_decline_name(uint32_t code);
/* Category from the top byte (lenient decoding of unknown codes): "resources", "timeout",
 * "configuration", "sync", "peer declined", "reply", "send", "internal", else "unknown". */
const char *clc_decline_class(uint32_t code);
/* The whole table, for tools and tests. */
const struct clc_decline_reason *clc_decline_table(size_t *count);

/* ---- any message ---- */

struct clc_msg {
	enum clc_type type;
	union {
		struct clc_proposal proposal;	/* CLC_PROPOSAL */
		struct clc_accept accept;	/* CLC_ACCEPT and CLC_CONFIRM */
		struct clc_decline decline;	/* CLC_DECLINE */
	};
};

/* Decodes one whole message: buf must hold exactly its length bytes (CLC_TRUNCATED if
 * fewer, CLC_TRAILING if more). Dispatches on the type byte. */
SMCR_MUST_CHECK int clc_decode(const void *buf, size_t len, struct clc_msg *out);
SMCR_MUST_CHECK int clc_encode(const struct clc_msg *m, void *buf, size_t cap, size_t *outlen);

/* Field-by-field equality of what a decoder fills (ignores ipv6 entries past the count and
 * v2ext bytes past its length). For round-trip tests. */
bool clc_msg_equal(const struct clc_msg *a, const struct clc_msg *b);
const char *clc_type_name(enum clc_type type);	/* "Proposal", ..., "?" */

#endif
