/* types.h: field types shared by several SMC-R messages (docs/protocol/wire-formats.md 2.3, 8.4):
 * GID, MAC, peer ID, and their cursor readers/writers. Host-side structs only; byte order
 * lives in the get/put functions. */
#ifndef SMCR_WIRE_TYPES_H
#define SMCR_WIRE_TYPES_H

#include <stdint.h>

#include "util/cursor.h"

#define WIRE_GID_LEN 16
#define WIRE_MAC_LEN 6
#define WIRE_PEER_ID_LEN 8	/* 2-byte instance number + 6-byte MAC (docs/protocol/wire-formats.md 2.3) */

struct wire_gid {
	uint8_t b[WIRE_GID_LEN];	/* as in the GID table, e.g. fe80::9a03:9bff:fe00:1 */
};

struct wire_mac {
	uint8_t b[WIRE_MAC_LEN];
};

/* Names an SMC-R instance (one per smcr process, docs/protocol/linux-interop.md 5). */
struct wire_peer_id {
	uint16_t instance;
	struct wire_mac mac;
};

SMCR_MUST_CHECK int wire_get_gid(struct rcur *c, struct wire_gid *g);
SMCR_MUST_CHECK int wire_put_gid(struct wcur *c, const struct wire_gid *g);
SMCR_MUST_CHECK int wire_get_mac(struct rcur *c, struct wire_mac *m);
SMCR_MUST_CHECK int wire_put_mac(struct wcur *c, const struct wire_mac *m);
/* 8 bytes: instance (u16) then MAC. */
SMCR_MUST_CHECK int wire_get_peer_id(struct rcur *c, struct wire_peer_id *p);
SMCR_MUST_CHECK int wire_put_peer_id(struct wcur *c, const struct wire_peer_id *p);
/* 64-bit value of the 8 wire bytes, for printing as 16 hex digits. */
uint64_t wire_peer_id_u64(const struct wire_peer_id *p);

#endif
