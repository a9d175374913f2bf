/* clc_v2.h: the SMC-R v2 parts of CLC (docs/parts/wire-v2.md 2-5): the host view of the
 * Proposal's v2 extension (user EIDs, RoCE v2 GID, v2.1 limits), the SMC-R v2 Accept and
 * Confirm with their first-contact extension and the Confirm's GID list, and the version
 * negotiation rules Linux applies (EID match, release, max connections / links).
 *
 * SMC v2 is not in RFC 7609 (whose CLC layouts, App. A.2, are v1): the layouts here are the
 * ones Linux 6.12 sends, read from a real capture (tests/vectors/linux-6.12-smcr-v2-rxe.pcap)
 * and described in docs/parts/wire-v2.md. The v1 codecs (wire/clc.h) stay as they are: a v2
 * Proposal already decodes there (its extension kept raw); clc_v2ext_get() turns that raw
 * extension into fields and clc_v2ext_put() builds one.
 *
 * Like wire/clc.h: host structs only, byte order in the codecs, every field of peer bytes
 * checked with its own error (src/util/errors/clc_v2.def), pure functions, no state. */
#ifndef SMCR_WIRE_CLC_V2_H
#define SMCR_WIRE_CLC_V2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "wire/clc.h"
#include "wire/types.h"

#define CLC_EID_LEN 32			/* an EID: 32 bytes, blank padded */
#define CLC_HOSTNAME_LEN 32		/* first-contact extension host name, blank padded */
#define CLC_V2_MAX_GIDS 8		/* Confirm GID list entries smcr accepts (Linux: <= 8) */

/* Sizes of the SMC-R v2 Accept/Confirm (wire-v2.md 4). */
#define CLC_ACC2_BASE_LEN 104		/* header + v1 fields (64) + EID (32) + 8 reserved */
#define CLC_ACC2_FCE_LEN 36		/* first-contact extension, release 0 */
#define CLC_ACC2_FCE_V2X_LEN 52		/* first-contact extension, release >= 1 (v2.1) */
#define CLC_ACC2_GLE_HDR_LEN 4		/* Confirm GID list: count + 3 reserved */
#define CLC_ACC2_MAX_LEN (CLC_ACC2_BASE_LEN + CLC_ACC2_FCE_V2X_LEN + CLC_ACC2_GLE_HDR_LEN + \
			  WIRE_GID_LEN * CLC_V2_MAX_GIDS + CLC_TRL_LEN)

/* Releases of SMC v2 (byte 3 of the v2 extension, first-contact extension byte 1). */
#define CLC_RELEASE_0 0			/* SMC v2.0 */
#define CLC_RELEASE_1 1			/* SMC v2.1: max connections / links negotiated */
#define CLC_RELEASE_SMCR 1		/* the highest release smcr speaks */

/* v2.1 limits (Linux SMC_CONN_PER_LGR_MIN/MAX, SMC_LINKS_ADD_LNK_MIN/MAX). */
#define CLC_CONNS_MIN 16
#define CLC_CONNS_MAX 255
#define CLC_LINKS_MIN 1
#define CLC_LINKS_MAX 2

/* Decline codes the v2 rules produce (docs/protocol/wire-formats.md 5.2 has the whole table). */
#define CLC2_DECL_PEERNOSMC 0x03010000u	/* the Proposal offers no path at all */
#define CLC2_DECL_NOSMCDEV 0x03030000u	/* no usable SMC device for what was offered */
#define CLC2_DECL_NOV2EXT 0x03030004u	/* v2 offered without a v2 extension */
#define CLC2_DECL_NOUEID 0x03030008u	/* no user EID in common */
#define CLC2_DECL_RELEASEERR 0x03030009u
#define CLC2_DECL_MAXCONNERR 0x0303000au
#define CLC2_DECL_MAXLINKERR 0x0303000bu

#define CLC_OS_ZOS 1
#define CLC_OS_LINUX 2
#define CLC_OS_AIX 3

struct clc_eid {
	uint8_t b[CLC_EID_LEN];
};

struct clc_ism_gid {			/* SMC-D v2 GID entry (10 bytes), kept for display */
	uint64_t gid;
	uint16_t chid;
};

/* The v2 extension of a Proposal (wire-v2.md 2.2), as fields. The SMC-D v2 part is present
 * only when the Proposal's typev2 offers SMC-D (path D or both). */
struct clc_v2ext_info {
	uint8_t release;		/* 0..15; Linux 6.12 sends 1 */
	bool seid;			/* "system EID in use" (SMC-D only) */
	uint8_t eid_count;		/* user EIDs, 0..8 */
	struct clc_eid eids[CLC_V2EXT_MAX_EID];
	struct wire_gid roce_gid;	/* the client's RoCE v2 GID (IPv4-mapped) */
	uint8_t max_conns;		/* v2.1: connections per link group the client wants */
	uint8_t max_links;		/* v2.1: links per link group */
	uint16_t feature_mask;		/* v2.1 supplemental features */
	/* SMC-D v2 extension */
	bool has_smcd;
	struct clc_eid system_eid;
	uint8_t ism_gid_count;		/* 0..8 */
	struct clc_ism_gid ism[CLC_V2EXT_MAX_GID];
};

/* Fields of a raw extension (as clc_proposal_decode kept it) for a Proposal with this
 * typev2. The raw bytes were length-checked by the Proposal decoder; this re-checks the
 * counts against x->len and reports CLC2_* errors. out is zeroed first. */
SMCR_MUST_CHECK int clc_v2ext_get(const struct clc_v2ext *x, uint8_t typev2,
				  struct clc_v2ext_info *out);
/* Builds the raw extension for a Proposal with this typev2 (reserved bytes zero; the SMC-D
 * v2 part when typev2 offers SMC-D, its offset computed). */
SMCR_MUST_CHECK int clc_v2ext_put(const struct clc_v2ext_info *in, uint8_t typev2,
				  struct clc_v2ext *x);

/* The first-contact extension of a v2 Accept/Confirm (wire-v2.md 4.2). */
struct clc_fce {
	bool v2_direct;			/* byte 0 mask 0x80: peers on one subnet, no gateway */
	uint8_t os_type;		/* byte 1 high nibble: CLC_OS_* */
	uint8_t release;		/* byte 1 low nibble; >= 1 selects the 52-byte form */
	uint8_t hostname[CLC_HOSTNAME_LEN];
	/* release >= 1 only: */
	uint8_t max_conns;
	uint8_t max_links;
	uint16_t feature_mask;
	uint32_t vendor_exp;		/* vendor experimental options */
};

/* An SMC-R v2 Accept (server -> client) or Confirm (client -> server), wire-v2.md 4.1.
 * Byte 7: version 2 (high nibble), typev2 (mask 0x0C; first contact = 0x08, the same bit as
 * v1's flag), path (mask 0x03, SMC-R = 0). The v1 fields keep their v1 offsets (8..63). */
struct clc_accept_v2 {
	struct clc_frame f;		/* version >= 2 */
	bool first_contact;		/* byte 7 0x08; then fce follows */
	struct wire_peer_id peer_id;
	struct wire_gid gid;		/* sender's RoCE v2 GID */
	struct wire_mac mac;
	uint32_t qpn;			/* 24 bits */
	uint32_t rkey;
	uint8_t rmbe_idx;		/* 1-based */
	uint32_t token;			/* non-zero */
	uint8_t rmbe_size_code;		/* 0..15 */
	uint8_t mtu_code;		/* 1..5 */
	uint64_t rmb_vaddr;
	uint32_t psn;			/* 24 bits */
	struct clc_eid eid;		/* the EID the server chose (echoed in the Confirm) */
	struct clc_fce fce;		/* when first_contact */
	/* Confirm with first contact only: the client's GIDs for further links */
	bool has_gids;
	uint8_t gid_count;		/* 0..CLC_V2_MAX_GIDS */
	struct wire_gid gids[CLC_V2_MAX_GIDS];
	uint16_t length;		/* decoder: the message length */
};

/* type is CLC_ACCEPT or CLC_CONFIRM. Errors: clc_frame errors, CLC_BAD_PATH,
 * CLC_ACC_SMCD, CLC2_ACC_V1 (a version-1 message: use clc_accept_decode), CLC2_ACC_SHORT,
 * CLC2_ACC_LENGTH, CLC2_ACC_GLE_COUNT, CLC_ACC_BAD_MTU, CLC_ACC_BAD_RMBE_IDX,
 * CLC_ACC_ZERO_TOKEN. */
SMCR_MUST_CHECK int clc_accept_v2_decode(const void *buf, size_t len, enum clc_type type,
					 struct clc_accept_v2 *a);
/* Writes a as Linux lays it out: first-contact extension of 36 or 52 bytes by fce.release,
 * the GID list only for a Confirm with has_gids. Reserved bytes zero. */
SMCR_MUST_CHECK int clc_accept_v2_encode(const struct clc_accept_v2 *a, enum clc_type type,
					 void *buf, size_t cap, size_t *outlen);
size_t clc_accept_v2_len(const struct clc_accept_v2 *a, enum clc_type type);
bool clc_accept_v2_equal(const struct clc_accept_v2 *a, const struct clc_accept_v2 *b);

/* ---- EIDs and negotiation (wire-v2.md 6) ---- */

/* Normalises a user EID as the kernel's UEID table holds it: 1..32 characters of A-Z, 0-9,
 * '.', '-' (lower-case letters are turned upper-case, as smc-tools does before handing it
 * to the kernel), first one a letter or digit, blank padded to 32. -SMCR_E_CLC2_EID_INVALID
 * otherwise. */
SMCR_MUST_CHECK int clc_eid_from_str(const char *s, struct clc_eid *out);
/* The EID without its blank padding, NUL-terminated (out has CLC_EID_LEN + 1 bytes). */
void clc_eid_to_str(const struct clc_eid *e, char out[CLC_EID_LEN + 1]);

/* Server: the EID to put in the Accept: the first of the client's user EIDs that is in the
 * server's own table (Linux smc_clc_match_eid; SEID matching is SMC-D only). Returns the
 * index into x->eids, or -1 when none matches (then SMC-R v2 is not possible). */
int clc_eid_match(const struct clc_v2ext_info *x, const struct clc_eid *table, size_t n);

/* Client: makes p (filled by clc_proposal_init and the caller's peer ID, GID, MAC, subnet
 * and prefixes) offer SMC-R v1, v2 or both, as Linux lays it out: version 2 with typev2 SMC-R
 * and the extension x when v2 is offered (then the SMC-D area, N = 40 if v1 is offered too,
 * else N = 0 with no IP area and peer ID, GID and MAC zero, as Linux sends them); version 1
 * exactly as before when only v1 is. -SMCR_E_CLC2_ENC_FIELD for neither or a bad x. */
SMCR_MUST_CHECK int clc_proposal_offer(struct clc_proposal *p, bool v1, bool v2,
				       const struct clc_v2ext_info *x);

/* Which version the server uses for a Proposal (Linux's order: SMC-R v2 first, then v1).
 * can_v2: the server has a RoCE v2 path and an EID matched; can_v1: it has a RoCE v1 path.
 * Returns CLC_VERSION_2, CLC_VERSION_1, or 0 with *decl: PEERNOSMC when no path at all is
 * offered (v1 and v2 types both NONE), NOV2EXT for SMC-R v2 only without its extension,
 * else NOSMCDEV (Linux's reason when no device fits, SMC-D only included). */
uint8_t clc_choose_version(const struct clc_proposal *p, bool can_v2, bool can_v1,
			   uint32_t *decl);

/* v2.1 values the server puts in its first-contact extension (Linux
 * smc_clc_srv_v2x_features_validate): release = min(client's, CLC_RELEASE_SMCR); for release
 * >= 1 max_conns = min(client's, own_conns) (>= 16 else MAXCONNERR), max_links =
 * min(client's, own_links) (>= 1 else MAXLINKERR), feature_mask = client's & own. 0 or the
 * decline code. */
uint32_t clc_v2x_server_pick(const struct clc_v2ext_info *x, uint8_t own_conns,
			     uint8_t own_links, uint16_t own_features, struct clc_fce *out);
/* Client check of the Accept's extension (smc_clc_clnt_v2x_features_validate): release not
 * above what it offered (RELEASEERR), for release >= 1 max_conns >= 16 (MAXCONNERR) and
 * max_links 1..2 (MAXLINKERR). 0 or the decline code. */
uint32_t clc_v2x_client_check(const struct clc_fce *acc, uint8_t offered_release);
/* Server check of the Confirm (smc_clc_v2x_features_confirm_check): the same release,
 * max_conns and max_links as its Accept. 0 or the decline code. */
uint32_t clc_v2x_confirm_check(const struct clc_fce *acc, const struct clc_fce *conf);

/* The IPv4 address (host order) of an IPv4-mapped GID (::ffff:a.b.c.d, what RoCE v2 GIDs
 * of IPv4 interfaces are); false for other GIDs. */
bool clc_gid_ipv4(const struct wire_gid *g, uint32_t *ip);

#endif
