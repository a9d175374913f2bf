/* llc_v2.c: the SMC-R v2 LLC codec (docs/parts/wire-v2.md 7; llc_v2.h says what v2 changes).
 * The 44-byte base of the types whose layout is v1's goes through the v1 codec with the v1
 * type byte and length byte put back, so both versions share one set of field rules. */
#include "wire/llc_v2.h"

#include <string.h>

#include "util/cursor.h"

#define OFF_TYPE 0
#define OFF_LEN 1			/* 16 bits, little-endian (llc_v2.h) */
#define OFF_FLAGS 3
#define OFF_BODY 4
#define CL_OFF_MAX_CONNS 35
#define TYPE_MASK 0x0F
#define VERSION_SHIFT 4
#define AL_EXT_DIRECT 0x80
#define AL_EXT_RSVD 8
#define RAL_RSVD 20
#define DR_FLAG_NEGATIVE 0x20

bool llc2_is_v2_type(uint8_t type)
{
	switch (type) {
	case LLC2_CONFIRM_LINK: case LLC2_ADD_LINK: case LLC2_DELETE_LINK:
	case LLC2_REQ_ADD_LINK: case LLC2_CONFIRM_RKEY: case LLC2_TEST_LINK:
	case LLC2_DELETE_RKEY:
		return true;
	default:
		return false;
	}
}

static bool has_v1_base(uint8_t type)
{
	return type != LLC2_REQ_ADD_LINK && type != LLC2_DELETE_RKEY;
}

static uint16_t le16_load(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static void le16_store(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

static int al_ext_get(struct rcur *c, struct llc2_msg *m)
{
	struct llc2_add_link_ext *x = &m->ext;
	uint8_t b0, lo, hi;

	if (rcur_left(c) < LLC2_AL_EXT_LEN)
		return -SMCR_E_LLC2_AL_EXT_SHORT;
	if (rcur_get_u8(c, &b0) || rcur_skip(c, 1) || wire_get_gid(c, &x->target_gid) ||
	    rcur_skip(c, AL_EXT_RSVD) || rcur_get_u8(c, &lo) || rcur_get_u8(c, &hi))
		return -SMCR_E_INTERNAL;
	x->v2_direct = (b0 & AL_EXT_DIRECT) != 0;
	x->num_rkeys = (uint16_t)(lo | hi << 8);
	if (x->num_rkeys > LLC2_AL_MAX_RKEYS ||
	    rcur_left(c) != (size_t)x->num_rkeys * LLC2_AL_RT_LEN)
		return -SMCR_E_LLC2_AL_RKEY_COUNT;
	for (unsigned i = 0; i < x->num_rkeys; i++)
		if (rcur_get_u32(c, &x->rt[i].rkey) || rcur_get_u32(c, &x->rt[i].rkey_new) ||
		    rcur_get_u64(c, &x->rt[i].vaddr_new))
			return -SMCR_E_INTERNAL;
	m->has_ext = true;
	return 0;
}

static int ral_get(struct rcur *c, struct llc2_msg *m)
{
	struct llc2_req_add_link *r = &m->req_add_link;
	size_t need;

	if (rcur_skip(c, RAL_RSVD) || rcur_get_u8(c, &r->gid_count) || rcur_skip(c, 3))
		return -SMCR_E_INTERNAL;	/* 44 bytes at least */
	need = LLC2_RAL_HDR_LEN + (size_t)r->gid_count * WIRE_GID_LEN;
	/* A 44-byte message has room for one GID (and the response carries none); a longer
	 * one is exactly its GIDs, as Linux sizes it. */
	if (r->gid_count > LLC2_RAL_MAX_GIDS || need > m->length ||
	    (m->length > LLC2_MIN_LEN && need != m->length))
		return -SMCR_E_LLC2_RAL_GID_COUNT;
	for (unsigned i = 0; i < r->gid_count; i++)
		if (wire_get_gid(c, &r->gids[i]))
			return -SMCR_E_INTERNAL;
	return 0;
}

static int dr_get(struct rcur *c, uint8_t flags, struct llc2_msg *m)
{
	struct llc2_delete_rkey *d = &m->delete_rkey;
	size_t need;

	if (rcur_get_u8(c, &d->count) || rcur_get_u8(c, &d->num_invalid) || rcur_skip(c, 2))
		return -SMCR_E_INTERNAL;
	d->negative = (flags & DR_FLAG_NEGATIVE) != 0;
	/* A response is 44 bytes whatever the request's size: Linux echoes the count and
	 * zeroes the keys, so none are read. */
	if (m->resp)
		return m->length == LLC2_MIN_LEN ? 0 : -SMCR_E_LLC2_TYPE_LENGTH;
	/* Request: at least one key, all inside the message; a message longer than 44 bytes
	 * is exactly its keys. */
	need = LLC2_DR_HDR_LEN + (size_t)d->count * 4;
	if (d->count == 0 || need > m->length || (m->length > LLC2_MIN_LEN && need != m->length))
		return -SMCR_E_LLC2_DR_COUNT;
	for (unsigned i = 0; i < d->count; i++)
		if (rcur_get_u32(c, &d->rkey[i]))
			return -SMCR_E_INTERNAL;
	return 0;
}

static int decode_checked(const uint8_t *buf, size_t len, struct llc2_msg *m)
{
	struct rcur c;
	uint8_t v1[LLC_MSG_LEN];
	int rc;

	if (len < LLC2_MIN_LEN)
		return -SMCR_E_LLC2_SHORT;
	if (!llc2_is_v2_type(buf[OFF_TYPE]))
		return -SMCR_E_LLC2_NOT_V2;
	m->type = buf[OFF_TYPE];
	m->length = le16_load(buf + OFF_LEN);
	m->resp = (buf[OFF_FLAGS] & LLC_FLAG_RESP) != 0;
	if (m->length < LLC2_MIN_LEN || m->length > len || m->length > LLC2_MAX_LEN)
		return -SMCR_E_LLC2_BAD_LENGTH;
	c = rcur_make(buf, m->length);
	c.off = OFF_BODY;
	if (m->type == LLC2_REQ_ADD_LINK)
		return ral_get(&c, m);
	if (m->type == LLC2_DELETE_RKEY)
		return dr_get(&c, buf[OFF_FLAGS], m);
	if (m->type != LLC2_ADD_LINK && m->length != LLC2_MIN_LEN)
		return -SMCR_E_LLC2_TYPE_LENGTH;
	/* The base as v1 sees it: v1 type, length byte 44, byte 2 reserved. */
	memcpy(v1, buf, LLC_MSG_LEN);
	v1[OFF_TYPE] = m->type & TYPE_MASK;
	v1[OFF_LEN] = LLC_MSG_LEN;
	v1[OFF_LEN + 1] = 0;
	rc = llc_decode(v1, sizeof(v1), &m->base);
	if (rc)
		return rc;
	if (m->type == LLC2_CONFIRM_LINK)
		m->max_conns = buf[CL_OFF_MAX_CONNS];
	if (m->type == LLC2_ADD_LINK && m->length > LLC2_MIN_LEN) {
		c.off = LLC2_MIN_LEN;
		return al_ext_get(&c, m);
	}
	return 0;
}

int llc2_decode(const uint8_t *buf, size_t len, struct llc2_msg *out)
{
	int rc;

	memset(out, 0, sizeof(*out));
	rc = decode_checked(buf, len, out);
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}

size_t llc2_len(const struct llc2_msg *m)
{
	size_t l;

	switch (m->type) {
	case LLC2_ADD_LINK:
		if (!m->has_ext)
			return LLC2_MIN_LEN;
		if (m->ext.num_rkeys > LLC2_AL_MAX_RKEYS)
			return 0;
		return LLC2_MIN_LEN + LLC2_AL_EXT_LEN + (size_t)m->ext.num_rkeys * LLC2_AL_RT_LEN;
	case LLC2_REQ_ADD_LINK:
		if (m->req_add_link.gid_count > LLC2_RAL_MAX_GIDS)
			return 0;
		l = LLC2_RAL_HDR_LEN + (size_t)m->req_add_link.gid_count * WIRE_GID_LEN;
		return l < LLC2_MIN_LEN ? LLC2_MIN_LEN : l;
	case LLC2_DELETE_RKEY:
		if (m->resp)
			return LLC2_MIN_LEN;
		l = LLC2_DR_HDR_LEN + (size_t)m->delete_rkey.count * 4;
		return l < LLC2_MIN_LEN ? LLC2_MIN_LEN : l;
	default:
		return llc2_is_v2_type(m->type) ? LLC2_MIN_LEN : 0;
	}
}

static int encode_base(const struct llc2_msg *m, struct wcur *w)
{
	struct llc_msg b = m->base;
	uint8_t v1[LLC_MSG_LEN];
	int rc;

	if ((uint8_t)b.type != (m->type & TYPE_MASK) || b.resp != m->resp)
		return -SMCR_E_LLC2_ENC_FIELD;
	if (m->type == LLC2_ADD_LINK && b.add_link.rej_reason)
		return -SMCR_E_LLC2_ENC_FIELD;	/* no room for it in v2 */
	rc = llc_encode(&b, v1);
	if (rc)
		return rc;
	if (m->type == LLC2_CONFIRM_LINK)
		v1[CL_OFF_MAX_CONNS] = m->max_conns;
	return wcur_put_bytes(w, v1, sizeof(v1));
}

int llc2_encode(const struct llc2_msg *m, uint8_t *out, size_t cap, size_t *outlen)
{
	struct wcur w = wcur_make(out, cap);
	size_t len = llc2_len(m);
	uint8_t flags = m->resp ? LLC_FLAG_RESP : 0;
	int rc;

	if (len == 0 || len > LLC2_MAX_LEN)
		return -SMCR_E_LLC2_ENC_FIELD;
	if (m->type == LLC2_DELETE_RKEY && !m->resp && m->delete_rkey.count == 0)
		return -SMCR_E_LLC2_ENC_FIELD;
	if (len > cap)
		return -SMCR_E_NOSPACE;
	if (has_v1_base(m->type)) {
		rc = encode_base(m, &w);
		if (rc)
			return rc;
		if (m->type == LLC2_ADD_LINK && m->has_ext) {
			const struct llc2_add_link_ext *x = &m->ext;
			if (wcur_put_u8(&w, x->v2_direct ? AL_EXT_DIRECT : 0) ||
			    wcur_put_u8(&w, 0) || wire_put_gid(&w, &x->target_gid) ||
			    wcur_put_zeros(&w, AL_EXT_RSVD) ||
			    wcur_put_u8(&w, (uint8_t)x->num_rkeys) ||
			    wcur_put_u8(&w, (uint8_t)(x->num_rkeys >> 8)))
				return -SMCR_E_INTERNAL;
			for (unsigned i = 0; i < x->num_rkeys; i++)
				if (wcur_put_u32(&w, x->rt[i].rkey) ||
				    wcur_put_u32(&w, x->rt[i].rkey_new) ||
				    wcur_put_u64(&w, x->rt[i].vaddr_new))
					return -SMCR_E_INTERNAL;
		}
	} else {
		if (m->type == LLC2_DELETE_RKEY && m->delete_rkey.negative)
			flags |= DR_FLAG_NEGATIVE;
		if (wcur_put_u8(&w, m->type) || wcur_put_zeros(&w, 2) || wcur_put_u8(&w, flags))
			return -SMCR_E_INTERNAL;
		if (m->type == LLC2_REQ_ADD_LINK) {
			const struct llc2_req_add_link *r = &m->req_add_link;
			if (wcur_put_zeros(&w, RAL_RSVD) || wcur_put_u8(&w, r->gid_count) ||
			    wcur_put_zeros(&w, 3))
				return -SMCR_E_INTERNAL;
			for (unsigned i = 0; i < r->gid_count; i++)
				if (wire_put_gid(&w, &r->gids[i]))
					return -SMCR_E_INTERNAL;
		} else {
			const struct llc2_delete_rkey *d = &m->delete_rkey;
			if (wcur_put_u8(&w, d->count) || wcur_put_u8(&w, d->num_invalid) ||
			    wcur_put_zeros(&w, 2))
				return -SMCR_E_INTERNAL;
			for (unsigned i = 0; !m->resp && i < d->count; i++)
				if (wcur_put_u32(&w, d->rkey[i]))
					return -SMCR_E_INTERNAL;
		}
		if (wcur_put_zeros(&w, len - w.off))
			return -SMCR_E_INTERNAL;
	}
	if (w.off != len)
		return -SMCR_E_INTERNAL;
	/* The v2 type and the 16-bit length over the v1 header. */
	out[OFF_TYPE] = m->type;
	le16_store(out + OFF_LEN, (uint16_t)len);
	*outlen = len;
	return 0;
}

bool llc2_msg_equal(const struct llc2_msg *a, const struct llc2_msg *b)
{
	if (a->type != b->type || a->resp != b->resp)
		return false;
	switch (a->type) {
	case LLC2_REQ_ADD_LINK:
		if (a->req_add_link.gid_count != b->req_add_link.gid_count)
			return false;
		for (unsigned i = 0; i < a->req_add_link.gid_count && i < LLC2_RAL_MAX_GIDS; i++)
			if (memcmp(a->req_add_link.gids[i].b, b->req_add_link.gids[i].b, WIRE_GID_LEN))
				return false;
		return true;
	case LLC2_DELETE_RKEY: {
		const struct llc2_delete_rkey *x = &a->delete_rkey, *y = &b->delete_rkey;
		if (x->negative != y->negative || x->count != y->count ||
		    x->num_invalid != y->num_invalid)
			return false;
		return a->resp || !memcmp(x->rkey, y->rkey, (size_t)x->count * sizeof(x->rkey[0]));
	}
	default:
		break;
	}
	if (!llc_msg_equal(&a->base, &b->base))
		return false;
	if (a->type == LLC2_CONFIRM_LINK && a->max_conns != b->max_conns)
		return false;
	if (a->type == LLC2_ADD_LINK) {
		const struct llc2_add_link_ext *x = &a->ext, *y = &b->ext;
		if (a->has_ext != b->has_ext)
			return false;
		if (!a->has_ext)
			return true;
		if (x->v2_direct != y->v2_direct || x->num_rkeys != y->num_rkeys ||
		    memcmp(x->target_gid.b, y->target_gid.b, WIRE_GID_LEN))
			return false;
		for (unsigned i = 0; i < x->num_rkeys && i < LLC2_AL_MAX_RKEYS; i++)
			if (x->rt[i].rkey != y->rt[i].rkey || x->rt[i].rkey_new != y->rt[i].rkey_new ||
			    x->rt[i].vaddr_new != y->rt[i].vaddr_new)
				return false;
	}
	return true;
}
