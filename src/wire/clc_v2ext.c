/* clc_v2ext.c: the v2 extension of a Proposal as fields (docs/parts/wire-v2.md 2.2): user
 * EIDs, the RoCE v2 GID, the v2.1 limits and, when SMC-D v2 is offered, the system EID and
 * ISM GIDs. The Proposal codec (clc_proposal.c) frames the extension and keeps it raw; this
 * file reads and writes its inside. Offsets are relative to the extension's first byte. */
#include "wire/clc_v2.h"

#include <string.h>

#include "util/cursor.h"

#define X_EID_CNT 0
#define X_GID_CNT 1
#define X_FLAG 3			/* release (high nibble), SEID (0x01) */
#define X_SMCD_OFF 6			/* SMC-D v2 part offset, counted from X_SMCD_BASE */
#define X_SMCD_BASE 8
#define X_ROCE 8
#define X_MAX_CONNS 24
#define X_MAX_LINKS 25
#define X_FEATURES 26
#define X_SEID_MASK 0x01
#define X_RELEASE_SHIFT 4
#define SMCD_RSVD 16			/* after the system EID */

static bool offers_d(uint8_t typev2) { return typev2 == CLC_PATH_D || typev2 == CLC_PATH_BOTH; }

int clc_v2ext_get(const struct clc_v2ext *x, uint8_t typev2, struct clc_v2ext_info *out)
{
	struct rcur c;
	size_t need;

	memset(out, 0, sizeof(*out));
	if (x->len < CLC_V2EXT_HDR_LEN || x->len > sizeof(x->raw))
		return -SMCR_E_CLC2_EXT_SHORT;
	c = rcur_make(x->raw, x->len);
	out->eid_count = x->raw[X_EID_CNT];
	out->release = x->raw[X_FLAG] >> X_RELEASE_SHIFT;
	out->seid = (x->raw[X_FLAG] & X_SEID_MASK) != 0;
	need = CLC_V2EXT_HDR_LEN + (size_t)out->eid_count * CLC_EID_LEN;
	if (out->eid_count > CLC_V2EXT_MAX_EID || need > x->len)
		return -SMCR_E_CLC2_EXT_EID_COUNT;
	memcpy(out->roce_gid.b, x->raw + X_ROCE, WIRE_GID_LEN);
	out->max_conns = x->raw[X_MAX_CONNS];
	out->max_links = x->raw[X_MAX_LINKS];
	out->feature_mask = be16_load(x->raw + X_FEATURES);
	c.off = CLC_V2EXT_HDR_LEN;
	for (unsigned i = 0; i < out->eid_count; i++)
		if (rcur_get_bytes(&c, out->eids[i].b, CLC_EID_LEN))
			return -SMCR_E_INTERNAL;	/* counted above */
	if (!offers_d(typev2))
		return rcur_left(&c) ? -SMCR_E_CLC2_EXT_EID_COUNT : 0;
	/* SMC-D v2 part: right after the EIDs (the Proposal length leaves no gap). */
	if (X_SMCD_BASE + (size_t)be16_load(x->raw + X_SMCD_OFF) != need)
		return -SMCR_E_CLC2_EXT_SMCD_OFFSET;
	out->ism_gid_count = x->raw[X_GID_CNT];
	if (out->ism_gid_count > CLC_V2EXT_MAX_GID ||
	    rcur_left(&c) != CLC_SMCD_V2EXT_HDR_LEN +
			     (size_t)out->ism_gid_count * CLC_SMCD_V2EXT_GID_LEN)
		return -SMCR_E_CLC2_EXT_GID_COUNT;
	out->has_smcd = true;
	if (rcur_get_bytes(&c, out->system_eid.b, CLC_EID_LEN) || rcur_skip(&c, SMCD_RSVD))
		return -SMCR_E_INTERNAL;
	for (unsigned i = 0; i < out->ism_gid_count; i++)
		if (rcur_get_u64(&c, &out->ism[i].gid) || rcur_get_u16(&c, &out->ism[i].chid))
			return -SMCR_E_INTERNAL;
	return 0;
}

int clc_v2ext_put(const struct clc_v2ext_info *in, uint8_t typev2, struct clc_v2ext *x)
{
	struct wcur w;
	bool d = offers_d(typev2);
	size_t eids_end;

	if (in->eid_count > CLC_V2EXT_MAX_EID || in->release > 0x0F ||
	    (d && in->ism_gid_count > CLC_V2EXT_MAX_GID) || typev2 > CLC_PATH_BOTH)
		return -SMCR_E_CLC2_ENC_FIELD;
	memset(x, 0, sizeof(*x));
	w = wcur_make(x->raw, sizeof(x->raw));
	eids_end = CLC_V2EXT_HDR_LEN + (size_t)in->eid_count * CLC_EID_LEN;
	/* Everything fits: raw holds the largest extension (8 EIDs, 8 GIDs). */
	if (wcur_put_u8(&w, in->eid_count) || wcur_put_u8(&w, d ? in->ism_gid_count : 0) ||
	    wcur_put_u8(&w, 0) ||
	    wcur_put_u8(&w, (uint8_t)(in->release << X_RELEASE_SHIFT | (in->seid ? X_SEID_MASK : 0))) ||
	    wcur_put_zeros(&w, 2) ||
	    wcur_put_u16(&w, d ? (uint16_t)(eids_end - X_SMCD_BASE) : 0) ||
	    wire_put_gid(&w, &in->roce_gid) || wcur_put_u8(&w, in->max_conns) ||
	    wcur_put_u8(&w, in->max_links) || wcur_put_u16(&w, in->feature_mask) ||
	    wcur_put_zeros(&w, CLC_V2EXT_HDR_LEN - 28))
		return -SMCR_E_INTERNAL;
	for (unsigned i = 0; i < in->eid_count; i++)
		if (wcur_put_bytes(&w, in->eids[i].b, CLC_EID_LEN))
			return -SMCR_E_INTERNAL;
	if (d) {
		if (wcur_put_bytes(&w, in->system_eid.b, CLC_EID_LEN) ||
		    wcur_put_zeros(&w, SMCD_RSVD))
			return -SMCR_E_INTERNAL;
		for (unsigned i = 0; i < in->ism_gid_count; i++)
			if (wcur_put_u64(&w, in->ism[i].gid) || wcur_put_u16(&w, in->ism[i].chid))
				return -SMCR_E_INTERNAL;
	}
	x->len = (uint16_t)w.off;
	x->eid_count = in->eid_count;
	x->ism_gid_count = d ? in->ism_gid_count : 0;
	x->release = in->release;
	x->seid = in->seid;
	return 0;
}
