/* emu_frame.c: encoder and hostile-peer decoder of the emu provider's frames (format in
 * emu_frame.h and docs/parts/emu.md "Frame format"). Decoders read a copy of the caller's
 * cursor and commit it only when the whole unit decoded and validated, so a failure leaves
 * the caller's cursor unmoved (STYLE.md 4). */
#include "dev/emu/emu_frame.h"

#include <string.h>

uint32_t emu_frame_fixed_len(enum emu_ftype t)
{
	switch (t) {
	case EMU_F_HELLO: return EMU_HELLO_LEN;
	case EMU_F_HELLO_ACK: return EMU_HELLO_ACK_LEN;
	case EMU_F_WRITE: return EMU_WRITE_FIXED;
	case EMU_F_WRITE_IMM: return EMU_WRITE_IMM_FIXED;
	case EMU_F_SEND: return EMU_SEND_FIXED;
	case EMU_F_ACK: return EMU_ACK_LEN;
	case EMU_F_NAK: return EMU_NAK_LEN;
	case EMU_F_RNR: return EMU_RNR_LEN;
	}
	return 0;
}

int emu_frame_is_data(enum emu_ftype t)
{
	return t == EMU_F_WRITE || t == EMU_F_WRITE_IMM || t == EMU_F_SEND;
}

/* Flag bits a type may carry. */
static uint8_t emu_flags_allowed(enum emu_ftype t)
{
	return (t == EMU_F_SEND || t == EMU_F_WRITE_IMM) ? EMU_FL_DATA_MASK : 0;
}

int emu_frame_hdr_decode(struct rcur *c, struct emu_frame *f)
{
	struct rcur r = *c;
	uint8_t type, flags;
	uint16_t rsvd;
	uint32_t len;

	if (rcur_left(&r) < EMU_HDR_LEN)
		return -SMCR_E_SHORT;
	if (rcur_get_u8(&r, &type) || rcur_get_u8(&r, &flags) || rcur_get_u16(&r, &rsvd) ||
	    rcur_get_u32(&r, &len))
		return -SMCR_E_SHORT;	/* unreachable after the length check; kept for the rule */
	if (type < EMU_F_MIN || type > EMU_F_MAX)
		return -SMCR_E_EMU_F_TYPE;
	enum emu_ftype t = (enum emu_ftype)type;
	if (flags & ~emu_flags_allowed(t))
		return -SMCR_E_EMU_F_FLAGS;
	if (rsvd)
		return -SMCR_E_EMU_F_RESERVED;
	uint32_t fixed = emu_frame_fixed_len(t);
	uint32_t payload = 0;
	if (emu_frame_is_data(t)) {
		if (len < fixed)
			return -SMCR_E_EMU_F_LEN;
		payload = len - fixed;
		if (payload > EMU_MAX_MSG)
			return -SMCR_E_EMU_F_TOO_LONG;
	} else if (len != fixed) {
		return -SMCR_E_EMU_F_LEN;
	}
	memset(f, 0, sizeof *f);
	f->type = t;
	f->flags = flags;
	f->body_len = len;
	f->payload_len = payload;
	*c = r;
	return 0;
}

static int emu_get_gid(struct rcur *r, struct dev_gid *g)
{
	return rcur_get_bytes(r, g->raw, DEV_GID_LEN);
}

static int emu_hello_decode(struct rcur *r, struct emu_hello *h)
{
	uint32_t magic;
	uint8_t rsvd[3];

	if (rcur_get_u32(r, &magic) || rcur_get_u8(r, &h->version) ||
	    rcur_get_bytes(r, rsvd, sizeof rsvd) || emu_get_gid(r, &h->src_gid) ||
	    emu_get_gid(r, &h->dst_gid) || rcur_get_u32(r, &h->src_qpn) ||
	    rcur_get_u32(r, &h->dst_qpn))
		return -SMCR_E_SHORT;
	if (magic != EMU_HELLO_MAGIC)
		return -SMCR_E_EMU_HELLO_MAGIC;
	if (h->version != EMU_VERSION)
		return -SMCR_E_EMU_HELLO_VERSION;
	if (rsvd[0] | rsvd[1] | rsvd[2])
		return -SMCR_E_EMU_F_RESERVED;
	if (h->src_qpn == 0 || h->src_qpn > 0xffffffu || h->dst_qpn == 0 ||
	    h->dst_qpn > 0xffffffu)
		return -SMCR_E_EMU_HELLO_QPN;
	return 0;
}

int emu_frame_fixed_decode(struct rcur *c, struct emu_frame *f)
{
	uint32_t fixed = emu_frame_fixed_len(f->type);
	struct rcur r;
	uint8_t rsvd[3];
	int rc;

	if (!fixed)
		return -SMCR_E_EMU_F_TYPE;
	if (rcur_sub(c, fixed, &r))
		return -SMCR_E_SHORT;
	switch (f->type) {
	case EMU_F_HELLO:
		rc = emu_hello_decode(&r, &f->u.hello);
		if (rc)
			return rc;
		break;
	case EMU_F_HELLO_ACK:
		if (rcur_get_u8(&r, &f->u.hello_ack.status) ||
		    rcur_get_bytes(&r, rsvd, sizeof rsvd) ||
		    rcur_get_u32(&r, &f->u.hello_ack.qpn))
			return -SMCR_E_SHORT;
		if (f->u.hello_ack.status > EMU_HS_MAX)
			return -SMCR_E_EMU_HELLO_STATUS;
		if (rsvd[0] | rsvd[1] | rsvd[2])
			return -SMCR_E_EMU_F_RESERVED;
		if (f->u.hello_ack.qpn == 0 || f->u.hello_ack.qpn > 0xffffffu)
			return -SMCR_E_EMU_HELLO_QPN;
		break;
	case EMU_F_WRITE:
	case EMU_F_WRITE_IMM:
		if (rcur_get_u32(&r, &f->u.data.seq) || rcur_get_u64(&r, &f->u.data.raddr) ||
		    rcur_get_u32(&r, &f->u.data.rkey))
			return -SMCR_E_SHORT;
		if (f->type == EMU_F_WRITE_IMM && rcur_get_u32(&r, &f->u.data.imm))
			return -SMCR_E_SHORT;
		break;
	case EMU_F_SEND:
		if (rcur_get_u32(&r, &f->u.data.seq))
			return -SMCR_E_SHORT;
		break;
	case EMU_F_ACK:
	case EMU_F_RNR:
		if (rcur_get_u32(&r, &f->u.ack.seq))
			return -SMCR_E_SHORT;
		break;
	case EMU_F_NAK:
		if (rcur_get_u32(&r, &f->u.nak.seq) || rcur_get_u8(&r, &f->u.nak.code) ||
		    rcur_get_bytes(&r, rsvd, sizeof rsvd))
			return -SMCR_E_SHORT;
		if (f->u.nak.code < EMU_NAK_MIN || f->u.nak.code > EMU_NAK_MAX)
			return -SMCR_E_EMU_NAK_CODE;
		if (rsvd[0] | rsvd[1] | rsvd[2])
			return -SMCR_E_EMU_F_RESERVED;
		break;
	}
	if (rcur_left(&r) != 0)
		return -SMCR_E_INTERNAL;	/* fixed sizes and field lists disagree */
	if (rcur_skip(c, fixed))
		return -SMCR_E_SHORT;
	return 0;
}

int emu_frame_decode(struct rcur *c, struct emu_frame *f, const uint8_t **payload)
{
	struct rcur r = *c;
	struct emu_frame tmp;
	int rc = emu_frame_hdr_decode(&r, &tmp);
	if (rc)
		return rc;
	rc = emu_frame_fixed_decode(&r, &tmp);
	if (rc)
		return rc;
	if (rcur_left(&r) < tmp.payload_len)
		return -SMCR_E_SHORT;
	const uint8_t *p = r.buf + r.off;
	if (rcur_skip(&r, tmp.payload_len))
		return -SMCR_E_SHORT;
	*f = tmp;
	if (payload)
		*payload = p;
	*c = r;
	return 0;
}

uint32_t emu_frame_len(const struct emu_frame *f)
{
	return EMU_HDR_LEN + emu_frame_fixed_len(f->type) +
	       (emu_frame_is_data(f->type) ? f->payload_len : 0);
}

static int emu_frame_check(const struct emu_frame *f)
{
	if (f->type < EMU_F_MIN || f->type > EMU_F_MAX)
		return -SMCR_E_EMU_F_TYPE;
	if (f->flags & ~emu_flags_allowed(f->type))
		return -SMCR_E_EMU_F_FLAGS;
	if (emu_frame_is_data(f->type) && f->payload_len > EMU_MAX_MSG)
		return -SMCR_E_EMU_F_TOO_LONG;
	switch (f->type) {
	case EMU_F_HELLO:
		if (f->u.hello.version != EMU_VERSION)
			return -SMCR_E_EMU_HELLO_VERSION;
		if (f->u.hello.src_qpn == 0 || f->u.hello.src_qpn > 0xffffffu ||
		    f->u.hello.dst_qpn == 0 || f->u.hello.dst_qpn > 0xffffffu)
			return -SMCR_E_EMU_HELLO_QPN;
		return 0;
	case EMU_F_HELLO_ACK:
		if (f->u.hello_ack.status > EMU_HS_MAX)
			return -SMCR_E_EMU_HELLO_STATUS;
		if (f->u.hello_ack.qpn == 0 || f->u.hello_ack.qpn > 0xffffffu)
			return -SMCR_E_EMU_HELLO_QPN;
		return 0;
	case EMU_F_NAK:
		if (f->u.nak.code < EMU_NAK_MIN || f->u.nak.code > EMU_NAK_MAX)
			return -SMCR_E_EMU_NAK_CODE;
		return 0;
	case EMU_F_WRITE:
	case EMU_F_WRITE_IMM:
	case EMU_F_SEND:
	case EMU_F_ACK:
	case EMU_F_RNR:
		return 0;
	}
	return -SMCR_E_EMU_F_TYPE;
}

int emu_frame_encode(struct wcur *w, const struct emu_frame *f, const void *payload)
{
	int rc = emu_frame_check(f);
	if (rc)
		return rc;
	uint32_t total = emu_frame_len(f);
	if (wcur_left(w) < total)
		return -SMCR_E_NOSPACE;
	/* Every put below fits: the space was checked as a whole, so no put can fail and
	 * leave a half-written frame. */
	struct wcur o = *w;
	uint32_t fixed = emu_frame_fixed_len(f->type);
	uint32_t plen = emu_frame_is_data(f->type) ? f->payload_len : 0;
	rc |= wcur_put_u8(&o, (uint8_t)f->type);
	rc |= wcur_put_u8(&o, f->flags);
	rc |= wcur_put_u16(&o, 0);
	rc |= wcur_put_u32(&o, fixed + plen);
	switch (f->type) {
	case EMU_F_HELLO:
		rc |= wcur_put_u32(&o, EMU_HELLO_MAGIC);
		rc |= wcur_put_u8(&o, f->u.hello.version);
		rc |= wcur_put_zeros(&o, 3);
		rc |= wcur_put_bytes(&o, f->u.hello.src_gid.raw, DEV_GID_LEN);
		rc |= wcur_put_bytes(&o, f->u.hello.dst_gid.raw, DEV_GID_LEN);
		rc |= wcur_put_u32(&o, f->u.hello.src_qpn);
		rc |= wcur_put_u32(&o, f->u.hello.dst_qpn);
		break;
	case EMU_F_HELLO_ACK:
		rc |= wcur_put_u8(&o, f->u.hello_ack.status);
		rc |= wcur_put_zeros(&o, 3);
		rc |= wcur_put_u32(&o, f->u.hello_ack.qpn);
		break;
	case EMU_F_WRITE:
	case EMU_F_WRITE_IMM:
		rc |= wcur_put_u32(&o, f->u.data.seq);
		rc |= wcur_put_u64(&o, f->u.data.raddr);
		rc |= wcur_put_u32(&o, f->u.data.rkey);
		if (f->type == EMU_F_WRITE_IMM)
			rc |= wcur_put_u32(&o, f->u.data.imm);
		break;
	case EMU_F_SEND:
		rc |= wcur_put_u32(&o, f->u.data.seq);
		break;
	case EMU_F_ACK:
	case EMU_F_RNR:
		rc |= wcur_put_u32(&o, f->u.ack.seq);
		break;
	case EMU_F_NAK:
		rc |= wcur_put_u32(&o, f->u.nak.seq);
		rc |= wcur_put_u8(&o, f->u.nak.code);
		rc |= wcur_put_zeros(&o, 3);
		break;
	}
	if (plen) {
		if (payload)
			rc |= wcur_put_bytes(&o, payload, plen);
		else
			o.off += plen;	/* caller fills the payload in place */
	}
	if (rc || o.off - w->off != total)
		return -SMCR_E_INTERNAL;
	*w = o;
	return 0;
}
