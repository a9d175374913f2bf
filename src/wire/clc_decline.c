/* clc_decline.c: the CLC Decline, either direction (docs/protocol/wire-formats.md 5.1, 5.3): 28
 * bytes in version 1, 44 bytes in version >= 2 (four more diagnosis words, OS type); out-of-sync
 * flag in byte 7; path bits 2/3 malformed (2.2, Linux smc_clc_msg_decl_valid). The diagnosis
 * code itself is not validated: receivers treat every value alike (5.2). */
#include "wire/clc_internal.h"

#include <string.h>

#define DECL_OS_SHIFT 4			/* v2: byte 20 high nibble */

int clc_decline_decode(const void *buf, size_t len, struct clc_decline *d)
{
	struct rcur c;
	uint8_t b7, os;
	int rc;

	memset(d, 0, sizeof(*d));
	rc = clc_frame_get(buf, len, CLC_DECLINE, &d->f, &b7, &c);
	if (rc)
		return rc;
	d->path = b7 & CLC_B7_PATH_MASK;
	if (d->path != CLC_PATH_R && d->path != CLC_PATH_D)
		return -SMCR_E_CLC_BAD_PATH;
	d->out_of_sync = (b7 & CLC_B7_FLAG) != 0;
	if (len != (d->f.version >= CLC_VERSION_2 ? CLC_DECLINE_V2_LEN : CLC_DECLINE_LEN))
		return -SMCR_E_CLC_DECL_BAD_LENGTH;	/* 2.4 item 5 */
	if (wire_get_peer_id(&c, &d->peer_id) || rcur_get_u32(&c, &d->diag))
		return -SMCR_E_INTERNAL;	/* length checked above */
	if (d->f.version >= CLC_VERSION_2) {
		if (rcur_get_u8(&c, &os) || rcur_skip(&c, 3))
			return -SMCR_E_INTERNAL;
		d->os_type = os >> DECL_OS_SHIFT;
		for (unsigned i = 0; i < CLC_DECLINE_V2_DIAGS; i++)
			if (rcur_get_u32(&c, &d->diag_v2[i]))
				return -SMCR_E_INTERNAL;
	} else if (rcur_skip(&c, 4)) {
		return -SMCR_E_INTERNAL;
	}
	return rcur_left(&c) ? -SMCR_E_INTERNAL : 0;
}

int clc_decline_encode(const struct clc_decline *d, void *buf, size_t cap, size_t *outlen)
{
	struct wcur w = wcur_make(buf, cap);
	bool v2 = d->f.version >= CLC_VERSION_2;
	int rc;

	/* Only what the decoder accepts; v1 has no OS type nor extra codes to carry. */
	if ((d->path != CLC_PATH_R && d->path != CLC_PATH_D) || d->os_type > 0x0F)
		return -SMCR_E_CLC_ENC_FIELD;
	if (!v2) {
		if (d->os_type)
			return -SMCR_E_CLC_ENC_FIELD;
		for (unsigned i = 0; i < CLC_DECLINE_V2_DIAGS; i++)
			if (d->diag_v2[i])
				return -SMCR_E_CLC_ENC_FIELD;
	}
	rc = clc_frame_begin(&w, &d->f, CLC_DECLINE,
			     (uint8_t)((d->out_of_sync ? CLC_B7_FLAG : 0) | d->path));
	if (rc)
		return rc;
	if (wcur_left(&w) < (v2 ? CLC_DECLINE_V2_LEN : CLC_DECLINE_LEN) - CLC_HDR_LEN)
		return -SMCR_E_NOSPACE;
	if (wire_put_peer_id(&w, &d->peer_id) || wcur_put_u32(&w, d->diag))
		return -SMCR_E_INTERNAL;	/* space checked above */
	if (v2) {
		if (wcur_put_u8(&w, (uint8_t)(d->os_type << DECL_OS_SHIFT)) ||
		    wcur_put_zeros(&w, 3))
			return -SMCR_E_INTERNAL;
		for (unsigned i = 0; i < CLC_DECLINE_V2_DIAGS; i++)
			if (wcur_put_u32(&w, d->diag_v2[i]))
				return -SMCR_E_INTERNAL;
	} else if (wcur_put_zeros(&w, 4)) {
		return -SMCR_E_INTERNAL;
	}
	rc = clc_frame_end(&w, &d->f);
	if (rc)
		return rc;
	*outlen = w.off;
	return 0;
}
