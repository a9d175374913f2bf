/* clc_accept_v2.c: the SMC-R v2 Accept and Confirm (docs/parts/wire-v2.md 4): the v1
 * fields at their v1 offsets (docs/protocol/wire-formats.md 4), then the chosen EID, then on first
 * contact the first-contact extension (36 bytes in release 0, 52 in release >= 1) and, in a
 * Confirm, the list of the client's RoCE v2 GIDs. Strict on receive: every byte of the
 * message belongs to one of these parts, so a decoded message re-encodes byte-exactly. */
#include "wire/clc_internal.h"
#include "wire/clc_v2.h"

#include <string.h>

#include "wire/codes.h"

#define ACC_SIZE_SHIFT 4
#define ACC_MTU_MASK 0x0F
#define ACC2_RSVD 8			/* after the EID */
#define FCE_DIRECT 0x80
#define FCE_OS_SHIFT 4
#define FCE_RELEASE_MASK 0x0F
#define FCE_V2X_RSVD 8
#define U24_MAX 0xFFFFFFu

static size_t fce_len(uint8_t release)
{
	return release >= CLC_RELEASE_1 ? CLC_ACC2_FCE_V2X_LEN : CLC_ACC2_FCE_LEN;
}

static int fce_get(struct rcur *c, struct clc_fce *f)
{
	uint8_t b0, b1;

	if (rcur_get_u8(c, &b0) || rcur_get_u8(c, &b1) || rcur_skip(c, 2) ||
	    rcur_get_bytes(c, f->hostname, CLC_HOSTNAME_LEN))
		return -SMCR_E_INTERNAL;
	f->v2_direct = (b0 & FCE_DIRECT) != 0;
	f->os_type = b1 >> FCE_OS_SHIFT;
	f->release = b1 & FCE_RELEASE_MASK;
	if (f->release >= CLC_RELEASE_1 &&
	    (rcur_get_u8(c, &f->max_conns) || rcur_get_u8(c, &f->max_links) ||
	     rcur_get_u16(c, &f->feature_mask) || rcur_get_u32(c, &f->vendor_exp) ||
	     rcur_skip(c, FCE_V2X_RSVD)))
		return -SMCR_E_INTERNAL;
	return 0;
}

int clc_accept_v2_decode(const void *buf, size_t len, enum clc_type type, struct clc_accept_v2 *a)
{
	struct rcur c;
	uint8_t b7, sizes;
	size_t rest;
	int rc;

	memset(a, 0, sizeof(*a));
	if (type != CLC_ACCEPT && type != CLC_CONFIRM)
		return -SMCR_E_INVAL;
	rc = clc_frame_get(buf, len, type, &a->f, &b7, &c);
	if (rc)
		return rc;
	switch (b7 & CLC_B7_PATH_MASK) {
	case CLC_PATH_R:
		break;
	case CLC_PATH_D:
		return -SMCR_E_CLC_ACC_SMCD;
	default:
		return -SMCR_E_CLC_BAD_PATH;
	}
	if (a->f.version < CLC_VERSION_2)
		return -SMCR_E_CLC2_ACC_V1;
	if (len < CLC_ACC2_BASE_LEN + CLC_TRL_LEN)
		return -SMCR_E_CLC2_ACC_SHORT;
	a->length = (uint16_t)len;
	a->first_contact = (b7 & CLC_B7_FLAG) != 0;
	/* 96 body bytes up to offset 104, checked above. */
	if (wire_get_peer_id(&c, &a->peer_id) || wire_get_gid(&c, &a->gid) ||
	    wire_get_mac(&c, &a->mac) || rcur_get_u24(&c, &a->qpn) ||
	    rcur_get_u32(&c, &a->rkey) || rcur_get_u8(&c, &a->rmbe_idx) ||
	    rcur_get_u32(&c, &a->token) || rcur_get_u8(&c, &sizes) || rcur_skip(&c, 1) ||
	    rcur_get_u64(&c, &a->rmb_vaddr) || rcur_skip(&c, 1) || rcur_get_u24(&c, &a->psn) ||
	    rcur_get_bytes(&c, a->eid.b, CLC_EID_LEN) || rcur_skip(&c, ACC2_RSVD))
		return -SMCR_E_INTERNAL;
	a->rmbe_size_code = sizes >> ACC_SIZE_SHIFT;
	a->mtu_code = sizes & ACC_MTU_MASK;
	if (a->mtu_code < WIRE_MTU_CODE_MIN || a->mtu_code > WIRE_MTU_CODE_MAX)
		return -SMCR_E_CLC_ACC_BAD_MTU;
	if (a->rmbe_idx == 0)
		return -SMCR_E_CLC_ACC_BAD_RMBE_IDX;
	if (a->token == 0)
		return -SMCR_E_CLC_ACC_ZERO_TOKEN;
	if (!a->first_contact)
		return rcur_left(&c) ? -SMCR_E_CLC2_ACC_LENGTH : 0;
	/* The release nibble (fce byte 1) decides the extension's size. */
	if (rcur_left(&c) < CLC_ACC2_FCE_LEN)
		return -SMCR_E_CLC2_ACC_SHORT;
	if (rcur_left(&c) < fce_len(c.buf[c.off + 1] & FCE_RELEASE_MASK))
		return -SMCR_E_CLC2_ACC_SHORT;
	if (fce_get(&c, &a->fce))
		return -SMCR_E_INTERNAL;
	rest = rcur_left(&c);
	if (rest == 0)
		return 0;
	if (type != CLC_CONFIRM)
		return -SMCR_E_CLC2_ACC_LENGTH;
	if (rest < CLC_ACC2_GLE_HDR_LEN)
		return -SMCR_E_CLC2_ACC_GLE_COUNT;
	if (rcur_get_u8(&c, &a->gid_count) || rcur_skip(&c, 3))
		return -SMCR_E_INTERNAL;
	if (a->gid_count > CLC_V2_MAX_GIDS ||
	    rcur_left(&c) != (size_t)a->gid_count * WIRE_GID_LEN)
		return -SMCR_E_CLC2_ACC_GLE_COUNT;
	for (unsigned i = 0; i < a->gid_count; i++)
		if (wire_get_gid(&c, &a->gids[i]))
			return -SMCR_E_INTERNAL;
	a->has_gids = true;
	return 0;
}

static int acc2_check(const struct clc_accept_v2 *a, enum clc_type type, size_t *len)
{
	size_t l = CLC_ACC2_BASE_LEN;

	if (type != CLC_ACCEPT && type != CLC_CONFIRM)
		return -SMCR_E_INVAL;
	if (a->f.version < CLC_VERSION_2 || a->f.version > 15 || a->qpn > U24_MAX ||
	    a->psn > U24_MAX || a->rmbe_size_code > 0x0F || a->mtu_code < WIRE_MTU_CODE_MIN ||
	    a->mtu_code > WIRE_MTU_CODE_MAX || a->rmbe_idx == 0 || a->token == 0)
		return -SMCR_E_CLC2_ENC_FIELD;
	if (a->first_contact) {
		if (a->fce.os_type > 0x0F || a->fce.release > FCE_RELEASE_MASK)
			return -SMCR_E_CLC2_ENC_FIELD;
		l += fce_len(a->fce.release);
		if (a->has_gids) {
			if (type != CLC_CONFIRM || a->gid_count > CLC_V2_MAX_GIDS)
				return -SMCR_E_CLC2_ENC_FIELD;
			l += CLC_ACC2_GLE_HDR_LEN + (size_t)a->gid_count * WIRE_GID_LEN;
		}
	} else if (a->has_gids) {
		return -SMCR_E_CLC2_ENC_FIELD;
	}
	*len = l + CLC_TRL_LEN;
	return 0;
}

size_t clc_accept_v2_len(const struct clc_accept_v2 *a, enum clc_type type)
{
	size_t l;
	return acc2_check(a, type, &l) ? 0 : l;
}

int clc_accept_v2_encode(const struct clc_accept_v2 *a, enum clc_type type, void *buf,
			 size_t cap, size_t *outlen)
{
	struct wcur w = wcur_make(buf, cap);
	const struct clc_fce *f = &a->fce;
	size_t len;
	int rc;

	rc = acc2_check(a, type, &len);
	if (rc)
		return rc;
	rc = clc_frame_begin(&w, &a->f, type,
			     (uint8_t)((a->first_contact ? CLC_B7_FLAG : 0) | CLC_PATH_R));
	if (rc)
		return rc;
	if (len > cap)
		return -SMCR_E_NOSPACE;
	/* len bytes fit: nothing below can fail. */
	if (wire_put_peer_id(&w, &a->peer_id) || wire_put_gid(&w, &a->gid) ||
	    wire_put_mac(&w, &a->mac) || wcur_put_u24(&w, a->qpn) ||
	    wcur_put_u32(&w, a->rkey) || wcur_put_u8(&w, a->rmbe_idx) ||
	    wcur_put_u32(&w, a->token) ||
	    wcur_put_u8(&w, (uint8_t)(a->rmbe_size_code << ACC_SIZE_SHIFT | a->mtu_code)) ||
	    wcur_put_u8(&w, 0) || wcur_put_u64(&w, a->rmb_vaddr) || wcur_put_u8(&w, 0) ||
	    wcur_put_u24(&w, a->psn) || wcur_put_bytes(&w, a->eid.b, CLC_EID_LEN) ||
	    wcur_put_zeros(&w, ACC2_RSVD))
		return -SMCR_E_INTERNAL;
	if (a->first_contact) {
		if (wcur_put_u8(&w, f->v2_direct ? FCE_DIRECT : 0) ||
		    wcur_put_u8(&w, (uint8_t)(f->os_type << FCE_OS_SHIFT | f->release)) ||
		    wcur_put_zeros(&w, 2) || wcur_put_bytes(&w, f->hostname, CLC_HOSTNAME_LEN))
			return -SMCR_E_INTERNAL;
		if (f->release >= CLC_RELEASE_1 &&
		    (wcur_put_u8(&w, f->max_conns) || wcur_put_u8(&w, f->max_links) ||
		     wcur_put_u16(&w, f->feature_mask) || wcur_put_u32(&w, f->vendor_exp) ||
		     wcur_put_zeros(&w, FCE_V2X_RSVD)))
			return -SMCR_E_INTERNAL;
		if (a->has_gids) {
			if (wcur_put_u8(&w, a->gid_count) || wcur_put_zeros(&w, 3))
				return -SMCR_E_INTERNAL;
			for (unsigned i = 0; i < a->gid_count; i++)
				if (wire_put_gid(&w, &a->gids[i]))
					return -SMCR_E_INTERNAL;
		}
	}
	rc = clc_frame_end(&w, &a->f);
	if (rc)
		return rc;
	if (w.off != len)
		return -SMCR_E_INTERNAL;
	*outlen = w.off;
	return 0;
}

static bool fce_eq(const struct clc_fce *a, const struct clc_fce *b)
{
	if (a->v2_direct != b->v2_direct || a->os_type != b->os_type ||
	    a->release != b->release || memcmp(a->hostname, b->hostname, CLC_HOSTNAME_LEN))
		return false;
	if (a->release < CLC_RELEASE_1)
		return true;
	return a->max_conns == b->max_conns && a->max_links == b->max_links &&
	       a->feature_mask == b->feature_mask && a->vendor_exp == b->vendor_exp;
}

bool clc_accept_v2_equal(const struct clc_accept_v2 *a, const struct clc_accept_v2 *b)
{
	if (a->f.version != b->f.version || a->f.eye != b->f.eye || a->f.trail != b->f.trail ||
	    a->first_contact != b->first_contact ||
	    a->peer_id.instance != b->peer_id.instance ||
	    memcmp(a->peer_id.mac.b, b->peer_id.mac.b, WIRE_MAC_LEN) ||
	    memcmp(a->gid.b, b->gid.b, WIRE_GID_LEN) || memcmp(a->mac.b, b->mac.b, WIRE_MAC_LEN) ||
	    a->qpn != b->qpn || a->rkey != b->rkey || a->rmbe_idx != b->rmbe_idx ||
	    a->token != b->token || a->rmbe_size_code != b->rmbe_size_code ||
	    a->mtu_code != b->mtu_code || a->rmb_vaddr != b->rmb_vaddr || a->psn != b->psn ||
	    memcmp(a->eid.b, b->eid.b, CLC_EID_LEN))
		return false;
	if (!a->first_contact)
		return true;
	if (!fce_eq(&a->fce, &b->fce) || a->has_gids != b->has_gids)
		return false;
	if (!a->has_gids)
		return true;
	if (a->gid_count != b->gid_count)
		return false;
	for (unsigned i = 0; i < a->gid_count; i++)
		if (memcmp(a->gids[i].b, b->gids[i].b, WIRE_GID_LEN))
			return false;
	return true;
}
