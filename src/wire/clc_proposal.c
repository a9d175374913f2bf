/* clc_proposal.c: the CLC Proposal, client -> server (docs/protocol/wire-formats.md 3; RFC 7609
 * App. A.2).
 *
 * Decodes the classic RFC layout (version 1, any optional-area length N), Linux's
 * version-2-marked Proposals (>= 5.10: 40-byte SMC-D area always present, IP area only when
 * a v1 path is offered, v2 extension recognised and kept raw), and encodes both so every
 * decoded Proposal re-encodes byte-exactly (reserved bytes as zero). */
#include "wire/clc_internal.h"

#include <string.h>

/* Absolute offsets (3.1, 3.2). */
#define PROP_OFF_N 38
#define PROP_OFF_OPT 40			/* optional area / SMC-D area */
#define PROP_OFF_V2EXT_BASE 52		/* v2 extension offset counts from here (3.2) */
#define SMCD_AREA_USED 12		/* ISM GID 8 + CHID 2 + v2 extension offset 2 */
#define V2_OFF_IPAREA (PROP_OFF_OPT + CLC_PROPOSAL_OPT_LEN)	/* 80 */
#define IPV4_PREFIX_MAX 32
#define IPV6_PREFIX_MAX 128
/* v2 extension, relative offsets (3.4) */
#define V2EXT_EID_CNT 0
#define V2EXT_GID_CNT 1
#define V2EXT_RELEASE 3
#define V2EXT_SEID_MASK 0x01
#define V2EXT_SMCD_OFF 6		/* SMC-D v2 extension offset, counted from rel. 8 */
#define V2EXT_SMCD_BASE 8

static bool path_has_r(uint8_t t) { return t == CLC_PATH_R || t == CLC_PATH_BOTH; }
static bool path_has_d(uint8_t t) { return t == CLC_PATH_D || t == CLC_PATH_BOTH; }

/* Whether the optional area holds Linux's SMC-D area (3.2): always in version >= 2 (3.4);
 * in version 1 when it is at least that long. */
static bool has_smcd_area(uint8_t version, uint16_t n)
{
	return version >= CLC_VERSION_2 || n >= CLC_PROPOSAL_OPT_LEN;
}

/* Checks a v2 extension whose first avail bytes are at raw (avail >= 40): EID and GID counts
 * (Linux limits, 3.4) and, when SMC-D v2 is offered, that the SMC-D v2 extension follows the
 * EIDs directly (the v2 length formula leaves no room for anything else). *extlen = the
 * extension's size by its counts; it may exceed avail (the caller's length check). */
static int v2ext_check(const uint8_t *raw, uint8_t typev2, size_t *extlen)
{
	uint8_t e = raw[V2EXT_EID_CNT], g = raw[V2EXT_GID_CNT];
	size_t l = CLC_V2EXT_HDR_LEN + (size_t)e * CLC_V2EXT_EID_LEN;

	if (e > CLC_V2EXT_MAX_EID)
		return -SMCR_E_CLC_PROP_V2EXT_EID_COUNT;
	if (path_has_d(typev2)) {
		if (g > CLC_V2EXT_MAX_GID)
			return -SMCR_E_CLC_PROP_V2EXT_GID_COUNT;
		if (V2EXT_SMCD_BASE + (size_t)be16_load(raw + V2EXT_SMCD_OFF) != l)
			return -SMCR_E_CLC_PROP_SMCD_V2EXT_OFFSET;
		l += CLC_SMCD_V2EXT_HDR_LEN + (size_t)g * CLC_SMCD_V2EXT_GID_LEN;
	}
	*extlen = l;
	return 0;
}

static void v2ext_parse(struct clc_v2ext *x)
{
	x->eid_count = x->raw[V2EXT_EID_CNT];
	x->ism_gid_count = x->raw[V2EXT_GID_CNT];
	x->release = x->raw[V2EXT_RELEASE] >> 4;
	x->seid = (x->raw[V2EXT_RELEASE] & V2EXT_SEID_MASK) != 0;
}

/* The IP prefix area (3.1, 3.3) at c's position; c ends before the trailer, so "beyond the
 * message" means "past c's end". */
static int iparea_get(struct rcur *c, struct clc_proposal *p)
{
	uint8_t n;

	if (rcur_left(c) < CLC_PREFIX_HDR_LEN)
		return -SMCR_E_CLC_PROP_IPAREA_OFFSET;
	if (rcur_get_u32(c, &p->ipv4_subnet) || rcur_get_u8(c, &p->ipv4_prefix_len) ||
	    rcur_skip(c, 2) || rcur_get_u8(c, &n))
		return -SMCR_E_INTERNAL;	/* 8 bytes checked above */
	/* The full count must fit (3.1); only the first 8 entries are kept, as Linux matches. */
	if ((size_t)n * CLC_IPV6_PREFIX_LEN > rcur_left(c))
		return -SMCR_E_CLC_PROP_PREFIX_COUNT;
	if (p->ipv4_prefix_len > IPV4_PREFIX_MAX)
		return -SMCR_E_CLC_PROP_IPV4_PREFIX;
	p->ipv6_count = n;
	for (unsigned i = 0; i < n; i++) {
		struct clc_ipv6_prefix e;
		if (rcur_get_bytes(c, e.addr, sizeof(e.addr)) || rcur_get_u8(c, &e.len))
			return -SMCR_E_INTERNAL;	/* counted above */
		if (e.len > IPV6_PREFIX_MAX)
			return -SMCR_E_CLC_PROP_IPV6_PREFIX;
		if (i < CLC_MAX_V6_PREFIX)
			p->ipv6[i] = e;
	}
	p->has_iparea = true;
	return 0;
}

static int smcd_area_get(struct rcur c, struct clc_proposal *p)
{
	/* c is positioned at offset 40 with at least 12 bytes left (callers check). */
	if (rcur_get_u64(&c, &p->ism_gid) || rcur_get_u16(&c, &p->ism_chid) ||
	    rcur_get_u16(&c, &p->v2ext_offset))
		return -SMCR_E_INTERNAL;
	return 0;
}

static int decode_v1(struct rcur *c, struct clc_proposal *p)
{
	size_t ip = (size_t)PROP_OFF_OPT + p->iparea_offset;
	int rc;

	/* 3.1: the IP area starts N bytes after offset 40 and must lie inside the message. */
	if (ip > c->len)
		return -SMCR_E_CLC_PROP_IPAREA_OFFSET;
	if (p->iparea_offset >= CLC_PROPOSAL_OPT_LEN) {
		rc = smcd_area_get(*c, p);
		if (rc)
			return rc;
	}
	c->off = ip;
	rc = iparea_get(c, p);
	if (rc)
		return rc;
	/* 3.5: length = 40 + N + 8 + 17n + 4 exactly. */
	if (rcur_left(c))
		return -SMCR_E_CLC_PROP_BAD_LENGTH;
	return 0;
}

static int decode_v2(struct rcur *c, struct clc_proposal *p)
{
	int rc;

	/* 3.4: a version-2 Proposal always has the 40-byte SMC-D area at 40..79. */
	if (c->len < V2_OFF_IPAREA)
		return -SMCR_E_CLC_PROP_V2_SHORT;
	/* Linux 6.x: N <= 40 (smc_clc_proposal_get_prefix); with a v1 path offered the IP area
	 * follows the SMC-D area, i.e. N == 40 (the v2 length formula counts it there). */
	if (p->iparea_offset > CLC_PROPOSAL_OPT_LEN ||
	    (p->typev1 != CLC_PATH_NONE && p->iparea_offset != CLC_PROPOSAL_OPT_LEN))
		return -SMCR_E_CLC_PROP_V2_IPAREA_OFFSET;
	rc = smcd_area_get(*c, p);
	if (rc)
		return rc;
	c->off = V2_OFF_IPAREA;
	if (p->typev1 != CLC_PATH_NONE) {
		rc = iparea_get(c, p);
		if (rc)
			return rc;
	}
	if (p->typev2 != CLC_PATH_NONE) {
		size_t start = (size_t)PROP_OFF_V2EXT_BASE + p->v2ext_offset, extlen;

		if (p->v2ext_offset == 0)
			return -SMCR_E_CLC_PROP_V2EXT_MISSING;
		/* Inside the message, and where Linux puts it: right after the IP area (the
		 * length formula leaves no room elsewhere). */
		if (start + CLC_V2EXT_HDR_LEN > c->len || start != c->off)
			return -SMCR_E_CLC_PROP_V2EXT_OFFSET;
		rc = v2ext_check(c->buf + start, p->typev2, &extlen);
		if (rc)
			return rc;
		if (extlen > rcur_left(c))
			return -SMCR_E_CLC_PROP_V2_LENGTH;
		p->v2ext.len = (uint16_t)extlen;
		if (rcur_get_bytes(c, p->v2ext.raw, extlen))
			return -SMCR_E_INTERNAL;
		v2ext_parse(&p->v2ext);
		p->has_v2ext = true;
	}
	/* 3.4: length = 40 + 40 + [8 + 17n] + [40 + 32e] + [48 + 10g] + 4 exactly. */
	if (rcur_left(c))
		return -SMCR_E_CLC_PROP_V2_LENGTH;
	return 0;
}

int clc_proposal_decode(const void *buf, size_t len, struct clc_proposal *p)
{
	struct rcur c;
	uint8_t b7;
	int rc;

	memset(p, 0, sizeof(*p));
	rc = clc_frame_get(buf, len, CLC_PROPOSAL, &p->f, &b7, &c);
	if (rc)
		return rc;
	p->typev2 = (b7 & CLC_B7_TYPEV2_MASK) >> CLC_B7_TYPEV2_SHIFT;
	p->typev1 = b7 & CLC_B7_PATH_MASK;
	p->length = (uint16_t)len;
	/* 40 fixed bytes: the frame check guarantees length >= 52. */
	if (wire_get_peer_id(&c, &p->peer_id) || wire_get_gid(&c, &p->gid) ||
	    wire_get_mac(&c, &p->mac) || rcur_get_u16(&c, &p->iparea_offset))
		return -SMCR_E_INTERNAL;
	rc = p->f.version >= CLC_VERSION_2 ? decode_v2(&c, p) : decode_v1(&c, p);
	if (rc)
		return rc;
	/* Not an error: a v1-only server declines a Proposal without SMC-R v1 (3.1, 3.4). */
	p->offers_smcr_v1 = path_has_r(p->typev1);
	return 0;
}

/* Validates p for encoding and computes the message length. */
static int prop_check(const struct clc_proposal *p, size_t *len)
{
	bool v2 = p->f.version >= CLC_VERSION_2;
	bool ip = !v2 || p->typev1 != CLC_PATH_NONE;
	size_t l;

	if (p->typev1 > CLC_PATH_BOTH || p->typev2 > CLC_PATH_BOTH)
		return -SMCR_E_CLC_ENC_FIELD;
	if (!has_smcd_area(p->f.version, p->iparea_offset) &&
	    (p->ism_gid || p->ism_chid || p->v2ext_offset))
		return -SMCR_E_CLC_ENC_FIELD;	/* no SMC-D area to put them in */
	if (v2 && (p->iparea_offset > CLC_PROPOSAL_OPT_LEN ||
		   (ip && p->iparea_offset != CLC_PROPOSAL_OPT_LEN)))
		return -SMCR_E_CLC_ENC_FIELD;
	if (ip) {
		if (p->ipv6_count > CLC_MAX_V6_PREFIX)
			return -SMCR_E_CLC_ENC_PREFIX_COUNT;
		if (p->ipv4_prefix_len > IPV4_PREFIX_MAX)
			return -SMCR_E_CLC_ENC_FIELD;
		for (unsigned i = 0; i < p->ipv6_count; i++)
			if (p->ipv6[i].len > IPV6_PREFIX_MAX)
				return -SMCR_E_CLC_ENC_FIELD;
	}
	l = v2 ? V2_OFF_IPAREA : (size_t)PROP_OFF_OPT + p->iparea_offset;
	if (ip)
		l += CLC_PREFIX_HDR_LEN + (size_t)p->ipv6_count * CLC_IPV6_PREFIX_LEN;
	if (v2 && p->typev2 != CLC_PATH_NONE) {
		size_t extlen;
		int rc;
		if (p->v2ext.len < CLC_V2EXT_HDR_LEN || p->v2ext.len > CLC_V2EXT_MAX_LEN)
			return -SMCR_E_CLC_ENC_FIELD;
		rc = v2ext_check(p->v2ext.raw, p->typev2, &extlen);
		if (rc)
			return -SMCR_E_CLC_ENC_FIELD;
		if (extlen != p->v2ext.len)
			return -SMCR_E_CLC_ENC_FIELD;
		l += extlen;
	}
	l += CLC_TRL_LEN;
	if (l > CLC_PROPOSAL_MAX_LEN)
		return -SMCR_E_CLC_ENC_FIELD;
	*len = l;
	return 0;
}

size_t clc_proposal_len(const struct clc_proposal *p)
{
	size_t l;
	if (p->f.version < 1 || p->f.version > 15 || p->f.eye > CLC_EYE_SMCD ||
	    p->f.trail > CLC_EYE_SMCD || prop_check(p, &l))
		return 0;
	return l;
}

void clc_proposal_init(struct clc_proposal *p)
{
	memset(p, 0, sizeof(*p));
	p->f.version = CLC_VERSION_1;
	p->typev1 = CLC_PATH_R;
	p->iparea_offset = CLC_PROPOSAL_OPT_LEN;
}

int clc_proposal_encode(const struct clc_proposal *p, void *buf, size_t cap, size_t *outlen)
{
	bool v2 = p->f.version >= CLC_VERSION_2;
	bool ip = !v2 || p->typev1 != CLC_PATH_NONE;
	bool ext = v2 && p->typev2 != CLC_PATH_NONE;
	struct wcur w = wcur_make(buf, cap);
	size_t len, opt_rest;
	uint16_t v2off = p->v2ext_offset;
	int rc;

	rc = clc_frame_begin(&w, &p->f, CLC_PROPOSAL,
			     (uint8_t)(p->typev2 << CLC_B7_TYPEV2_SHIFT | p->typev1));
	if (rc)
		return rc;
	rc = prop_check(p, &len);
	if (rc)
		return rc;
	if (len > cap)
		return -SMCR_E_NOSPACE;
	/* Everything below fits: len bytes were checked against cap. */
	if (ext)	/* right after the IP area (3.4) */
		v2off = (uint16_t)(len - CLC_TRL_LEN - p->v2ext.len - PROP_OFF_V2EXT_BASE);
	if (wire_put_peer_id(&w, &p->peer_id) || wire_put_gid(&w, &p->gid) ||
	    wire_put_mac(&w, &p->mac) || wcur_put_u16(&w, p->iparea_offset))
		return -SMCR_E_INTERNAL;
	opt_rest = v2 ? CLC_PROPOSAL_OPT_LEN : p->iparea_offset;
	if (has_smcd_area(p->f.version, p->iparea_offset)) {
		if (wcur_put_u64(&w, p->ism_gid) || wcur_put_u16(&w, p->ism_chid) ||
		    wcur_put_u16(&w, v2off))
			return -SMCR_E_INTERNAL;
		opt_rest -= SMCD_AREA_USED;
	}
	if (wcur_put_zeros(&w, opt_rest))
		return -SMCR_E_INTERNAL;
	if (ip) {
		if (wcur_put_u32(&w, p->ipv4_subnet) || wcur_put_u8(&w, p->ipv4_prefix_len) ||
		    wcur_put_zeros(&w, 2) || wcur_put_u8(&w, p->ipv6_count))
			return -SMCR_E_INTERNAL;
		for (unsigned i = 0; i < p->ipv6_count; i++)
			if (wcur_put_bytes(&w, p->ipv6[i].addr, sizeof(p->ipv6[i].addr)) ||
			    wcur_put_u8(&w, p->ipv6[i].len))
				return -SMCR_E_INTERNAL;
	}
	if (ext && wcur_put_bytes(&w, p->v2ext.raw, p->v2ext.len))
		return -SMCR_E_INTERNAL;
	rc = clc_frame_end(&w, &p->f);
	if (rc)
		return rc;
	if (w.off != len)
		return -SMCR_E_INTERNAL;
	*outlen = w.off;
	return 0;
}
