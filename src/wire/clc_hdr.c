/* clc_hdr.c: CLC framing, the 8-byte header and 4-byte trailer of every CLC message
 * (docs/protocol/wire-formats.md 2.1, 2.2, and the receive checks of 2.4; RFC 7609 App. A.2:
 * eyecatcher validated at both ends, reserved fields not validated). */
#include "wire/clc_internal.h"

static int eye_get(uint32_t v, enum clc_eye *eye)
{
	if (v == CLC_EYE_SMCR_U32) {
		*eye = CLC_EYE_SMCR;
		return 0;
	}
	if (v == CLC_EYE_SMCD_U32) {
		*eye = CLC_EYE_SMCD;
		return 0;
	}
	return -1;
}

static int eye_value(enum clc_eye eye, uint32_t *v)
{
	switch (eye) {
	case CLC_EYE_SMCR:
		*v = CLC_EYE_SMCR_U32;
		return 0;
	case CLC_EYE_SMCD:
		*v = CLC_EYE_SMCD_U32;
		return 0;
	}
	return -SMCR_E_CLC_ENC_FIELD;
}

/* Length bounds a stream reader accepts before reading the body. They are per type, not per
 * version or path, so a v2 or SMC-D Accept is still read whole and then rejected with its
 * own error by the decoder (and the stream stays in step for a following Decline). */
static void len_bounds(enum clc_type type, uint16_t *min, uint16_t *max)
{
	switch (type) {
	case CLC_PROPOSAL:
		*min = CLC_PROPOSAL_MIN_LEN;
		*max = CLC_PROPOSAL_MAX_LEN;
		return;
	case CLC_ACCEPT:
	case CLC_CONFIRM:
		*min = CLC_ACCEPT_SMCD_LEN;
		*max = CLC_ACCEPT_MAX_LEN;
		return;
	case CLC_DECLINE:
		*min = CLC_DECLINE_LEN;
		*max = CLC_DECLINE_V2_LEN;
		return;
	}
	*min = 1;
	*max = 0;
}

int clc_peek_header(const void *buf, size_t len, enum clc_type *type, uint16_t *msglen,
		    uint8_t *version)
{
	struct rcur c = rcur_make(buf, len);
	uint32_t eyev;
	uint8_t t, b7;
	uint16_t l, min, max;
	enum clc_eye eye;

	if (rcur_get_u32(&c, &eyev) || rcur_get_u8(&c, &t) || rcur_get_u16(&c, &l) ||
	    rcur_get_u8(&c, &b7))
		return -SMCR_E_CLC_SHORT_HEADER;
	if (eye_get(eyev, &eye))
		return -SMCR_E_CLC_BAD_EYECATCHER;
	if (t < CLC_PROPOSAL || t > CLC_DECLINE)
		return -SMCR_E_CLC_BAD_TYPE;
	/* 2.4 item 2: version >= 1; higher versions are the peer's, we answer with v1. */
	if ((b7 >> CLC_B7_VERSION_SHIFT) == 0)
		return -SMCR_E_CLC_BAD_VERSION;
	len_bounds((enum clc_type)t, &min, &max);
	if (l < min)
		return -SMCR_E_CLC_LEN_TOO_SMALL;
	if (l > max)
		return -SMCR_E_CLC_LEN_TOO_BIG;
	if (type)
		*type = (enum clc_type)t;
	if (msglen)
		*msglen = l;
	if (version)
		*version = (uint8_t)(b7 >> CLC_B7_VERSION_SHIFT);
	return 0;
}

int clc_frame_get(const void *buf, size_t len, enum clc_type want, struct clc_frame *f,
		  uint8_t *byte7, struct rcur *body)
{
	enum clc_type type;
	uint16_t msglen;
	uint8_t version;
	struct rcur c = rcur_make(buf, len);
	int rc = clc_peek_header(buf, len, &type, &msglen, &version);

	if (rc)
		return rc;
	/* 2.4 item 5: the buffer is exactly one message. */
	if (len < msglen)
		return -SMCR_E_CLC_TRUNCATED;
	if (len > msglen)
		return -SMCR_E_CLC_TRAILING;
	if (type != want)
		return -SMCR_E_CLC_WRONG_TYPE;
	/* Here len == msglen >= 28 (the smallest bound), so the header and the trailer are
	 * inside the buffer and plain loads are in bounds. */
	f->version = version;
	if (eye_get(be32_load(c.buf), &f->eye))
		return -SMCR_E_INTERNAL;	/* clc_peek_header checked it */
	*byte7 = c.buf[7];
	/* 2.4 item 4: trailer SMCR or SMCD (Linux skips this for Declines; RFC App. A.2 and
	 * smcr check it for every message). */
	if (eye_get(be32_load(c.buf + msglen - CLC_TRL_LEN), &f->trail))
		return -SMCR_E_CLC_BAD_TRAILER;
	*body = rcur_make(buf, (size_t)msglen - CLC_TRL_LEN);
	body->off = CLC_HDR_LEN;
	return 0;
}

int clc_frame_begin(struct wcur *w, const struct clc_frame *f, enum clc_type type,
		    uint8_t low_nibble)
{
	uint32_t eye;
	int rc;

	if (f->version < 1 || f->version > 15 || low_nibble > 0x0F)
		return -SMCR_E_CLC_ENC_FIELD;
	rc = eye_value(f->eye, &eye);
	if (rc)
		return rc;
	if (wcur_left(w) < CLC_HDR_LEN)
		return -SMCR_E_NOSPACE;
	if (wcur_put_u32(w, eye) || wcur_put_u8(w, (uint8_t)type) || wcur_put_u16(w, 0) ||
	    wcur_put_u8(w, (uint8_t)(f->version << CLC_B7_VERSION_SHIFT | low_nibble)))
		return -SMCR_E_INTERNAL;	/* space checked above */
	return 0;
}

int clc_frame_end(struct wcur *w, const struct clc_frame *f)
{
	uint32_t eye;
	int rc = eye_value(f->trail, &eye);

	if (rc)
		return rc;
	rc = wcur_put_u32(w, eye);
	if (rc)
		return rc;
	if (w->off > UINT16_MAX)
		return -SMCR_E_CLC_ENC_FIELD;
	return wcur_patch_u16(w, CLC_LEN_OFFSET, (uint16_t)w->off);
}

bool clc_eye_prefix(const void *buf, size_t len)
{
	static const uint8_t smcr[4] = { 0xE2, 0xD4, 0xC3, 0xD9 }; /* "SMCR"; "SMCD" ends 0xC4 */
	const uint8_t *b = buf;
	for (size_t i = 0; i < len && i < 4; i++) {
		if (b[i] != smcr[i] && !(i == 3 && b[i] == 0xC4))
			return false;
	}
	return true;
}
