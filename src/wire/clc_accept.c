/* clc_accept.c: the SMC-R v1 Accept (server -> client) and Confirm (client -> server), the
 * same 68-byte layout (docs/protocol/wire-formats.md 4, value encodings 8.1/8.2/8.4). v2 (version
 * >= 2, >= 108 bytes) and SMC-D (path 1, 48 bytes) are recognised and rejected with their own
 * errors; path bits 2/3 are malformed (2.2, Linux smc_clc_msg_acc_conf_valid). */
#include "wire/clc_internal.h"

#include <string.h>

#include "wire/codes.h"

#define ACC_SIZE_SHIFT 4		/* byte 50: RMBE size code in the high nibble */
#define ACC_MTU_MASK 0x0F		/* byte 50: QP MTU code in the low nibble */
#define U24_MAX 0xFFFFFFu

static bool acc_type_ok(enum clc_type type)
{
	return type == CLC_ACCEPT || type == CLC_CONFIRM;
}

int clc_accept_decode(const void *buf, size_t len, enum clc_type type, struct clc_accept *a)
{
	struct rcur c;
	uint8_t b7, sizes;
	int rc;

	memset(a, 0, sizeof(*a));
	if (!acc_type_ok(type))
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
		return -SMCR_E_CLC_BAD_PATH;	/* 2.2: 2 and 3 are malformed */
	}
	if (a->f.version >= CLC_VERSION_2)
		return -SMCR_E_CLC_ACC_V2;
	if (len != CLC_ACCEPT_LEN)	/* 2.4 item 5 */
		return -SMCR_E_CLC_ACC_BAD_LENGTH;
	a->first_contact = (b7 & CLC_B7_FLAG) != 0;
	/* 56 body bytes: exactly what the fields below take (offsets 8..63). */
	if (wire_get_peer_id(&c, &a->peer_id) || wire_get_gid(&c, &a->gid) ||
	    wire_get_mac(&c, &a->mac) || rcur_get_u24(&c, &a->qpn) ||
	    rcur_get_u32(&c, &a->rkey) || rcur_get_u8(&c, &a->rmbe_idx) ||
	    rcur_get_u32(&c, &a->token) || rcur_get_u8(&c, &sizes) || rcur_skip(&c, 1) ||
	    rcur_get_u64(&c, &a->rmb_vaddr) || rcur_skip(&c, 1) || rcur_get_u24(&c, &a->psn) ||
	    rcur_left(&c) != 0)
		return -SMCR_E_INTERNAL;
	/* 8.1: any size code 0..15 is accepted (a nibble cannot be more). */
	a->rmbe_size_code = sizes >> ACC_SIZE_SHIFT;
	a->mtu_code = sizes & ACC_MTU_MASK;
	if (a->mtu_code < WIRE_MTU_CODE_MIN || a->mtu_code > WIRE_MTU_CODE_MAX)
		return -SMCR_E_CLC_ACC_BAD_MTU;	/* 8.2 */
	/* 4: the element index is 1-based (tx offset = size * (index - 1)). */
	if (a->rmbe_idx == 0)
		return -SMCR_E_CLC_ACC_BAD_RMBE_IDX;
	/* 8.4: alert tokens are non-zero. */
	if (a->token == 0)
		return -SMCR_E_CLC_ACC_ZERO_TOKEN;
	return 0;
}

int clc_accept_encode(const struct clc_accept *a, enum clc_type type, void *buf, size_t cap,
		      size_t *outlen)
{
	struct wcur w = wcur_make(buf, cap);
	int rc;

	if (!acc_type_ok(type))
		return -SMCR_E_INVAL;
	/* Only what the decoder accepts: v1, 24-bit QPN/PSN, codes in range, index and token
	 * non-zero. */
	if (a->f.version != CLC_VERSION_1 || a->qpn > U24_MAX || a->psn > U24_MAX ||
	    a->rmbe_size_code > WIRE_RMBE_CODE_ACCEPT_MAX || a->mtu_code < WIRE_MTU_CODE_MIN ||
	    a->mtu_code > WIRE_MTU_CODE_MAX || a->rmbe_idx == 0 || a->token == 0)
		return -SMCR_E_CLC_ENC_FIELD;
	rc = clc_frame_begin(&w, &a->f, type,
			     (uint8_t)((a->first_contact ? CLC_B7_FLAG : 0) | CLC_PATH_R));
	if (rc)
		return rc;
	if (wcur_left(&w) < CLC_ACCEPT_LEN - CLC_HDR_LEN)
		return -SMCR_E_NOSPACE;
	if (wire_put_peer_id(&w, &a->peer_id) || wire_put_gid(&w, &a->gid) ||
	    wire_put_mac(&w, &a->mac) || wcur_put_u24(&w, a->qpn) ||
	    wcur_put_u32(&w, a->rkey) || wcur_put_u8(&w, a->rmbe_idx) ||
	    wcur_put_u32(&w, a->token) ||
	    wcur_put_u8(&w, (uint8_t)(a->rmbe_size_code << ACC_SIZE_SHIFT | a->mtu_code)) ||
	    wcur_put_u8(&w, 0) || wcur_put_u64(&w, a->rmb_vaddr) || wcur_put_u8(&w, 0) ||
	    wcur_put_u24(&w, a->psn))
		return -SMCR_E_INTERNAL;	/* space checked above */
	rc = clc_frame_end(&w, &a->f);
	if (rc)
		return rc;
	*outlen = w.off;
	return 0;
}
