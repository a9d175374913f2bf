/* print_v2.c: smcr-decode's printers for SMC-R v2 (docs/parts/decode.md, "SMC-R v2"):
 * the fields of a Proposal's v2 extension, the v2 Accept/Confirm (the v1 fields first, with
 * their v1 keys, then the v2 ones) and the v2 LLC messages (kind "llc2.*": the v1 keys of
 * the 44-byte base, then what v2 adds). Field names follow docs/parts/wire-v2.md. */
#include "print.h"

#include <stdio.h>
#include <string.h>

static void eid(struct out *o, const char *key, const struct clc_eid *e)
{
	char s[CLC_EID_LEN + 1];
	clc_eid_to_str(e, s);
	out_str(o, key, s);
}

void print_v2ext(struct out *o, const struct clc_proposal *p)
{
	struct clc_v2ext_info x;
	int rc = clc_v2ext_get(&p->v2ext, p->typev2, &x);

	if (rc) {
		out_str(o, "v2ext_error", smcr_err_name(rc));
		return;
	}
	out_gid(o, "v2ext_roce_gid", x.roce_gid.b);
	out_uint(o, "v2ext_max_conns", x.max_conns);
	out_uint(o, "v2ext_max_links", x.max_links);
	out_hex(o, "v2ext_feature_mask", x.feature_mask, 4);
	out_list_begin(o, "user_eids");
	for (unsigned i = 0; i < x.eid_count; i++) {
		char s[CLC_EID_LEN + 1];
		clc_eid_to_str(&x.eids[i], s);
		out_str(o, NULL, s);
	}
	out_list_end(o);
	if (x.has_smcd) {
		eid(o, "system_eid", &x.system_eid);
		out_list_begin(o, "ism_gids");
		for (unsigned i = 0; i < x.ism_gid_count; i++) {
			out_item_begin(o);
			out_hex(o, "gid", x.ism[i].gid, 16);
			out_hex(o, "chid", x.ism[i].chid, 4);
			out_item_end(o);
		}
		out_list_end(o);
	}
}

void print_accept_v2(struct out *o, const struct clc_accept_v2 *a, enum clc_type type,
		     const struct dec_where *w, size_t len)
{
	struct clc_accept v1 = {
		.f = a->f, .first_contact = a->first_contact, .peer_id = a->peer_id,
		.gid = a->gid, .mac = a->mac, .qpn = a->qpn, .rkey = a->rkey,
		.rmbe_idx = a->rmbe_idx, .token = a->token, .rmbe_size_code = a->rmbe_size_code,
		.mtu_code = a->mtu_code, .rmb_vaddr = a->rmb_vaddr, .psn = a->psn,
	};
	char host[CLC_HOSTNAME_LEN + 1];
	size_t n = CLC_HOSTNAME_LEN;

	print_begin(o, print_clc_kind(type), w, len);
	print_accept(o, &v1);
	eid(o, "eid", &a->eid);
	if (a->first_contact) {
		const struct clc_fce *f = &a->fce;
		out_bool(o, "v2_direct", f->v2_direct);
		out_uint(o, "os_type", f->os_type);
		out_uint(o, "release", f->release);
		while (n > 0 && (f->hostname[n - 1] == ' ' || f->hostname[n - 1] == 0))
			n--;
		for (size_t i = 0; i < n; i++)
			host[i] = (f->hostname[i] >= 0x20 && f->hostname[i] < 0x7f) ?
				  (char)f->hostname[i] : '?';
		host[n] = '\0';
		out_str(o, "hostname", host);
		if (f->release >= CLC_RELEASE_1) {
			out_uint(o, "max_conns", f->max_conns);
			out_uint(o, "max_links", f->max_links);
			out_hex(o, "feature_mask", f->feature_mask, 4);
			out_hex(o, "vendor_exp_options", f->vendor_exp, 8);
		}
	}
	if (a->has_gids) {
		out_list_begin(o, "gids");
		for (unsigned i = 0; i < a->gid_count; i++)
			out_gid(o, NULL, a->gids[i].b);
		out_list_end(o);
	}
	out_end(o);
}

const char *print_llc2_kind(uint8_t type)
{
	switch (type) {
	case LLC2_CONFIRM_LINK: return "llc2.confirm_link";
	case LLC2_ADD_LINK: return "llc2.add_link";
	case LLC2_DELETE_LINK: return "llc2.delete_link";
	case LLC2_REQ_ADD_LINK: return "llc2.req_add_link";
	case LLC2_CONFIRM_RKEY: return "llc2.confirm_rkey";
	case LLC2_TEST_LINK: return "llc2.test_link";
	case LLC2_DELETE_RKEY: return "llc2.delete_rkey";
	default: return "llc2";
	}
}

void print_llc2(struct out *o, const struct llc2_msg *m, const struct dec_where *w)
{
	print_begin(o, print_llc2_kind(m->type), w, m->length);
	switch (m->type) {
	case LLC2_REQ_ADD_LINK:
		out_bool(o, "response", m->resp);
		out_list_begin(o, "gids");
		for (unsigned i = 0; i < m->req_add_link.gid_count; i++)
			out_gid(o, NULL, m->req_add_link.gids[i].b);
		out_list_end(o);
		break;
	case LLC2_DELETE_RKEY:
		out_bool(o, "response", m->resp);
		out_bool(o, "negative", m->delete_rkey.negative);
		out_uint(o, "count", m->delete_rkey.count);
		out_uint(o, "invalid_count", m->delete_rkey.num_invalid);
		out_list_begin(o, "rkeys");
		for (unsigned i = 0; !m->resp && i < m->delete_rkey.count; i++)
			out_hex(o, NULL, m->delete_rkey.rkey[i], 8);
		out_list_end(o);
		break;
	default:
		print_llc_body(o, &m->base);
		if (m->type == LLC2_CONFIRM_LINK)
			out_uint(o, "max_conns", m->max_conns);
		if (m->type == LLC2_ADD_LINK && m->has_ext) {
			const struct llc2_add_link_ext *x = &m->ext;
			out_bool(o, "v2_direct", x->v2_direct);
			out_gid(o, "target_gid", x->target_gid.b);
			out_uint(o, "num_rkeys", x->num_rkeys);
			out_list_begin(o, "rkeys");
			for (unsigned i = 0; i < x->num_rkeys; i++) {
				out_item_begin(o);
				out_hex(o, "rkey", x->rt[i].rkey, 8);
				out_hex(o, "rkey_new", x->rt[i].rkey_new, 8);
				out_hex(o, "vaddr_new", x->rt[i].vaddr_new, 16);
				out_item_end(o);
			}
			out_list_end(o);
		}
		break;
	}
	out_end(o);
}
