/* clc_msg.c: any CLC message (docs/protocol/wire-formats.md 2-5): decode by the type byte, encode
 * by the struct's type, and field-by-field equality for round-trip checks. */
#include "wire/clc_internal.h"

#include <string.h>

const char *clc_type_name(enum clc_type type)
{
	switch (type) {
	case CLC_PROPOSAL: return "Proposal";
	case CLC_ACCEPT: return "Accept";
	case CLC_CONFIRM: return "Confirm";
	case CLC_DECLINE: return "Decline";
	}
	return "?";
}

int clc_decode(const void *buf, size_t len, struct clc_msg *out)
{
	enum clc_type type;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = clc_peek_header(buf, len, &type, NULL, NULL);
	if (rc)
		return rc;
	out->type = type;
	switch (type) {
	case CLC_PROPOSAL:
		return clc_proposal_decode(buf, len, &out->proposal);
	case CLC_ACCEPT:
	case CLC_CONFIRM:
		return clc_accept_decode(buf, len, type, &out->accept);
	case CLC_DECLINE:
		return clc_decline_decode(buf, len, &out->decline);
	}
	return -SMCR_E_INTERNAL;	/* clc_peek_header checked the type */
}

int clc_encode(const struct clc_msg *m, void *buf, size_t cap, size_t *outlen)
{
	switch (m->type) {
	case CLC_PROPOSAL:
		return clc_proposal_encode(&m->proposal, buf, cap, outlen);
	case CLC_ACCEPT:
	case CLC_CONFIRM:
		return clc_accept_encode(&m->accept, m->type, buf, cap, outlen);
	case CLC_DECLINE:
		return clc_decline_encode(&m->decline, buf, cap, outlen);
	}
	return -SMCR_E_INVAL;
}

static bool frame_eq(const struct clc_frame *a, const struct clc_frame *b)
{
	return a->version == b->version && a->eye == b->eye && a->trail == b->trail;
}

static bool pid_eq(const struct wire_peer_id *a, const struct wire_peer_id *b)
{
	return a->instance == b->instance && !memcmp(a->mac.b, b->mac.b, sizeof(a->mac.b));
}

static bool addr_eq(const struct wire_peer_id *pa, const struct wire_gid *ga,
		    const struct wire_mac *ma, const struct wire_peer_id *pb,
		    const struct wire_gid *gb, const struct wire_mac *mb)
{
	return pid_eq(pa, pb) && !memcmp(ga->b, gb->b, sizeof(ga->b)) &&
	       !memcmp(ma->b, mb->b, sizeof(ma->b));
}

static bool prop_eq(const struct clc_proposal *a, const struct clc_proposal *b)
{
	unsigned n = a->ipv6_count < CLC_MAX_V6_PREFIX ? a->ipv6_count : CLC_MAX_V6_PREFIX;

	if (!frame_eq(&a->f, &b->f) || a->typev2 != b->typev2 || a->typev1 != b->typev1 ||
	    !addr_eq(&a->peer_id, &a->gid, &a->mac, &b->peer_id, &b->gid, &b->mac) ||
	    a->iparea_offset != b->iparea_offset || a->ism_gid != b->ism_gid ||
	    a->ism_chid != b->ism_chid || a->v2ext_offset != b->v2ext_offset ||
	    a->ipv4_subnet != b->ipv4_subnet || a->ipv4_prefix_len != b->ipv4_prefix_len ||
	    a->ipv6_count != b->ipv6_count || a->has_iparea != b->has_iparea ||
	    a->has_v2ext != b->has_v2ext || a->offers_smcr_v1 != b->offers_smcr_v1 ||
	    a->length != b->length)
		return false;
	for (unsigned i = 0; i < n; i++)
		if (memcmp(a->ipv6[i].addr, b->ipv6[i].addr, sizeof(a->ipv6[i].addr)) ||
		    a->ipv6[i].len != b->ipv6[i].len)
			return false;
	if (a->has_v2ext) {
		const struct clc_v2ext *x = &a->v2ext, *y = &b->v2ext;
		if (x->eid_count != y->eid_count || x->ism_gid_count != y->ism_gid_count ||
		    x->release != y->release || x->seid != y->seid || x->len != y->len ||
		    x->len > sizeof(x->raw) || memcmp(x->raw, y->raw, x->len))
			return false;
	}
	return true;
}

static bool acc_eq(const struct clc_accept *a, const struct clc_accept *b)
{
	return frame_eq(&a->f, &b->f) && a->first_contact == b->first_contact &&
	       addr_eq(&a->peer_id, &a->gid, &a->mac, &b->peer_id, &b->gid, &b->mac) &&
	       a->qpn == b->qpn && a->rkey == b->rkey && a->rmbe_idx == b->rmbe_idx &&
	       a->token == b->token && a->rmbe_size_code == b->rmbe_size_code &&
	       a->mtu_code == b->mtu_code && a->rmb_vaddr == b->rmb_vaddr && a->psn == b->psn;
}

static bool decl_eq(const struct clc_decline *a, const struct clc_decline *b)
{
	if (!frame_eq(&a->f, &b->f) || a->out_of_sync != b->out_of_sync || a->path != b->path ||
	    !pid_eq(&a->peer_id, &b->peer_id) || a->diag != b->diag || a->os_type != b->os_type)
		return false;
	for (unsigned i = 0; i < CLC_DECLINE_V2_DIAGS; i++)
		if (a->diag_v2[i] != b->diag_v2[i])
			return false;
	return true;
}

bool clc_msg_equal(const struct clc_msg *a, const struct clc_msg *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case CLC_PROPOSAL:
		return prop_eq(&a->proposal, &b->proposal);
	case CLC_ACCEPT:
	case CLC_CONFIRM:
		return acc_eq(&a->accept, &b->accept);
	case CLC_DECLINE:
		return decl_eq(&a->decline, &b->decline);
	}
	return false;
}
