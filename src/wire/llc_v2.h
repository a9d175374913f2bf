/* llc_v2.h: the LLC messages of an SMC-R v2 link group (docs/parts/wire-v2.md 7), as Linux
 * 6.12 sends them over RoCE v2.
 *
 * Every v2 message starts like a v1 one (docs/protocol/wire-formats.md 6.1) but: the type byte
 * carries the LLC version 2 in its high nibble (0x21 CONFIRM LINK, 0x22 ADD LINK, 0x24 DELETE LINK,
 * 0x25 REQUEST ADD LINK, 0x26 CONFIRM RKEY, 0x27 TEST LINK, 0x29 DELETE RKEY), and bytes 1-2
 * are a 16-bit length of 44..8192 that Linux stores in its CPU's byte order: little-endian
 * on every Linux that runs RoCE v2 with rxe or mlx5 on x86-64/arm64, the order smcr reads
 * and writes (a big-endian s390 peer would differ; see wire-v2.md 7.1). Messages longer
 * than 44 bytes: ADD LINK with its extension (the RKey list of the new link, which replaces
 * ADD LINK CONTINUATION), REQUEST ADD LINK with its GID list, DELETE RKEY with more keys.
 *
 * The 44-byte base of CONFIRM LINK, ADD LINK, DELETE LINK, CONFIRM RKEY and TEST LINK has
 * the v1 layout and v1 rules: llc2_decode hands it to the v1 codec (wire/llc.h) and keeps
 * the result in base, so the engine's v1 handlers apply unchanged. What v2 adds is kept
 * beside it. Pure functions, no state. */
#ifndef SMCR_WIRE_LLC_V2_H
#define SMCR_WIRE_LLC_V2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "wire/llc.h"
#include "wire/types.h"

#define LLC2_VERSION 2
#define LLC2_MIN_LEN 44			/* Linux drops shorter ones */
#define LLC2_MAX_LEN 8192		/* Linux's v2 receive buffer (SMC_WR_BUF_V2_SIZE) */
#define LLC2_AL_EXT_LEN 28		/* ADD LINK v2 extension before its RKey entries */
#define LLC2_AL_RT_LEN 16		/* one entry: rkey, rkey on the new link, vaddr */
#define LLC2_AL_MAX_RKEYS 255		/* Linux SMC_LLC_RKEYS_PER_MSG_V2 */
#define LLC2_RAL_HDR_LEN 28		/* REQUEST ADD LINK before its GIDs */
#define LLC2_RAL_MAX_GIDS 8		/* GIDs smcr keeps (Linux's GID list holds 8) */
#define LLC2_DR_HDR_LEN 8		/* DELETE RKEY before its keys */
#define LLC2_DR_MAX 255			/* Linux SMC_LLC_RKEYS_PER_MSG_V2 */

enum llc2_type {
	LLC2_CONFIRM_LINK = 0x21,
	LLC2_ADD_LINK = 0x22,
	LLC2_DELETE_LINK = 0x24,
	LLC2_REQ_ADD_LINK = 0x25,
	LLC2_CONFIRM_RKEY = 0x26,
	LLC2_TEST_LINK = 0x27,
	LLC2_DELETE_RKEY = 0x29,
};

/* ADD LINK v2 extension (wire-v2.md 7.3). */
struct llc2_add_link_ext {
	bool v2_direct;			/* byte 0 mask 0x80: no gateway between the peers */
	struct wire_gid target_gid;	/* the GID the new link uses on the sender's side */
	uint16_t num_rkeys;		/* entries; CPU order on the wire, like the length */
	struct llc_alc_pair rt[LLC2_AL_MAX_RKEYS];	/* first num_rkeys used */
};

/* REQUEST ADD LINK v2 (0x25): the client asks the server to add a link and lists its GIDs;
 * the server's response echoes the header with 40 zero bytes. */
struct llc2_req_add_link {
	uint8_t gid_count;
	struct wire_gid gids[LLC2_RAL_MAX_GIDS];
};

/* DELETE RKEY v2 (0x29). Request: count >= 1 keys (44 bytes hold up to 9). Response: always
 * 44 bytes; Linux echoes the count, puts the number of keys it could not delete in byte 5
 * (not a bit mask as in v1) with the negative flag, and zeroes the keys (not read). */
struct llc2_delete_rkey {
	bool negative;			/* byte 3 0x20 */
	uint8_t count;
	uint8_t num_invalid;		/* response */
	uint32_t rkey[LLC2_DR_MAX];	/* request: the first count used */
};

struct llc2_msg {
	uint8_t type;			/* enum llc2_type */
	bool resp;			/* byte 3 0x80 */
	uint16_t length;		/* bytes 1-2 */
	/* CONFIRM LINK, ADD LINK, DELETE LINK, CONFIRM RKEY, TEST LINK: the 44-byte base as
	 * a v1 message (base.type is the v1 type: type & 0x0F). */
	struct llc_msg base;
	uint8_t max_conns;		/* CONFIRM LINK: byte 35 (v2.1), reserved in v1 */
	bool has_ext;			/* ADD LINK longer than 44 bytes */
	struct llc2_add_link_ext ext;
	struct llc2_req_add_link req_add_link;	/* REQUEST ADD LINK */
	struct llc2_delete_rkey delete_rkey;	/* DELETE RKEY */
};

/* Decodes one received v2 LLC message of len bytes (the whole receive, which may be longer
 * than the message: Linux posts 8 KiB buffers; bytes past the length field are ignored).
 * Checks: len >= 44 (LLC2_SHORT), a v2 type (LLC2_NOT_V2), 44 <= length <= len and <= 8192
 * (LLC2_BAD_LENGTH), the per-type length (LLC2_TYPE_LENGTH, LLC2_AL_*, LLC2_RAL_*,
 * LLC2_DR_COUNT), then the v1 rules of the base (LLC_* codes). *out is zeroed on error. */
SMCR_MUST_CHECK int llc2_decode(const uint8_t *buf, size_t len, struct llc2_msg *out);
/* Length llc2_encode writes for m (0 if m cannot be encoded). */
size_t llc2_len(const struct llc2_msg *m);
/* Writes m (reserved bytes zero); m->length is ignored and computed. 0, -SMCR_E_NOSPACE,
 * or a validation code. ADD LINK v2 cannot carry a reject reason (byte 2 is the length's
 * high byte): base.add_link.rej_reason must be 0. */
SMCR_MUST_CHECK int llc2_encode(const struct llc2_msg *m, uint8_t *out, size_t cap,
				size_t *outlen);
bool llc2_msg_equal(const struct llc2_msg *a, const struct llc2_msg *b);
/* Whether a type byte is one of enum llc2_type. */
bool llc2_is_v2_type(uint8_t type);

#endif
