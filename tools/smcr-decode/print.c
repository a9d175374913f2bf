/* print.c: record printers of smcr-decode (print.h). Field names follow
 * docs/protocol/wire-formats.md (2-7) in snake_case; docs/parts/decode.md lists them per kind.
 * Numbers are JSON numbers; identifiers, keys, addresses and codes are "0x..." strings. */
#include "print.h"

#include "wire/codes.h"
#include "wire/types.h"

const char *print_clc_kind(enum clc_type type)
{
	switch (type) {
	case CLC_PROPOSAL: return "clc.proposal";
	case CLC_ACCEPT: return "clc.accept";
	case CLC_CONFIRM: return "clc.confirm";
	case CLC_DECLINE: return "clc.decline";
	}
	return "clc";
}

const char *print_llc_kind(uint8_t type)
{
	switch (type) {
	case LLC_CONFIRM_LINK: return "llc.confirm_link";
	case LLC_ADD_LINK: return "llc.add_link";
	case LLC_ADD_LINK_CONT: return "llc.add_link_cont";
	case LLC_DELETE_LINK: return "llc.delete_link";
	case LLC_CONFIRM_RKEY: return "llc.confirm_rkey";
	case LLC_TEST_LINK: return "llc.test_link";
	case LLC_CONFIRM_RKEY_CONT: return "llc.confirm_rkey_cont";
	case LLC_DELETE_RKEY: return "llc.delete_rkey";
	case LLC_TYPE_CDC: return "cdc";
	default: return "llc";
	}
}

static const char *transport_name(enum dec_transport t)
{
	switch (t) {
	case DEC_HEX: return "hex";
	case DEC_TCP: return "tcp";
	case DEC_ROCE_V1: return "roce_v1";
	case DEC_ROCE_V2: return "roce_v2";
	}
	return "?";
}

void print_begin(struct out *o, const char *kind, const struct dec_where *w, size_t len)
{
	out_begin(o, kind);
	if (w->transport != DEC_HEX) {
		out_uint(o, "frame", w->frame);
		out_str(o, "transport", transport_name(w->transport));
		if (w->src)
			out_str(o, "src", w->src);
		if (w->dst)
			out_str(o, "dst", w->dst);
	}
	switch (w->transport) {
	case DEC_HEX:
		out_uint(o, "offset", w->offset);
		break;
	case DEC_TCP:
		if (!w->syn)
			out_uint(o, "stream_offset", w->offset);
		break;
	case DEC_ROCE_V1:
	case DEC_ROCE_V2:
		out_uint_x(o, "dest_qp", w->dest_qp, 6);
		out_uint_x(o, "bth_psn", w->bth_psn, 6);
		break;
	}
	out_uint(o, "length", len);
}

static const char *eye_name(enum clc_eye e)
{
	switch (e) {
	case CLC_EYE_SMCR: return "SMCR";
	case CLC_EYE_SMCD: return "SMCD";
	}
	return "?";
}

static const char *path_name(unsigned p)
{
	switch (p) {
	case CLC_PATH_R: return "SMC-R";
	case CLC_PATH_D: return "SMC-D";
	case CLC_PATH_NONE: return "none";
	case CLC_PATH_BOTH: return "both";
	default: return "?";
	}
}

static void frame_fields(struct out *o, const struct clc_frame *f)
{
	out_uint(o, "version", f->version);
	out_str(o, "eyecatcher", eye_name(f->eye));
	out_str(o, "trailer", eye_name(f->trail));
}

/* 16 hex digits, no prefix: 2-byte instance then the MAC (docs/protocol/wire-formats.md 2.3). */
static void peer_id(struct out *o, const struct wire_peer_id *p)
{
	uint8_t b[WIRE_PEER_ID_LEN];
	uint64_t v = wire_peer_id_u64(p);
	for (int i = WIRE_PEER_ID_LEN - 1; i >= 0; i--, v >>= 8)
		b[i] = (uint8_t)v;
	out_bytes(o, "peer_id", b, sizeof(b));
}

static void rmbe_size(struct out *o, unsigned code)
{
	out_uint(o, "rmbe_size", wire_rmbe_size(code));
	out_uint(o, "rmbe_size_code", code);
}

static void qp_mtu(struct out *o, unsigned code)
{
	out_uint(o, "qp_mtu", wire_mtu_bytes(code));
	out_uint(o, "qp_mtu_code", code);
}

static void print_proposal(struct out *o, const struct clc_proposal *p)
{
	frame_fields(o, &p->f);
	out_uint(o, "typev1", p->typev1);
	out_str(o, "typev1_name", path_name(p->typev1));
	out_uint(o, "typev2", p->typev2);
	if (p->f.version >= CLC_VERSION_2)
		out_str(o, "typev2_name", path_name(p->typev2));
	out_bool(o, "offers_smcr_v1", p->offers_smcr_v1);
	peer_id(o, &p->peer_id);
	out_gid(o, "gid", p->gid.b);
	out_mac(o, "mac", p->mac.b);
	out_uint(o, "iparea_offset", p->iparea_offset);
	/* The SMC-D area is there in version 2, and in version 1 when N covers it (3.2). */
	if (p->f.version >= CLC_VERSION_2 || p->iparea_offset >= CLC_PROPOSAL_OPT_LEN) {
		out_hex(o, "ism_gid", p->ism_gid, 16);
		out_uint(o, "ism_chid", p->ism_chid);
		out_uint(o, "v2ext_offset", p->v2ext_offset);
	}
	if (p->has_iparea) {
		out_ipv4(o, "ipv4_subnet", p->ipv4_subnet);
		out_uint(o, "ipv4_prefix_len", p->ipv4_prefix_len);
		out_uint(o, "ipv6_prefix_count", p->ipv6_count);
		unsigned n = p->ipv6_count < CLC_MAX_V6_PREFIX ? p->ipv6_count : CLC_MAX_V6_PREFIX;
		out_list_begin(o, "ipv6_prefixes");
		for (unsigned i = 0; i < n; i++) {
			out_item_begin(o);
			out_gid(o, "prefix", p->ipv6[i].addr);
			out_uint(o, "prefix_len", p->ipv6[i].len);
			out_item_end(o);
		}
		out_list_end(o);
	}
	if (p->has_v2ext) {
		out_uint(o, "v2ext_eid_count", p->v2ext.eid_count);
		out_uint(o, "v2ext_ism_gid_count", p->v2ext.ism_gid_count);
		out_uint(o, "v2ext_release", p->v2ext.release);
		out_bool(o, "v2ext_seid", p->v2ext.seid);
		out_uint(o, "v2ext_length", p->v2ext.len);
		print_v2ext(o, p);
	}
}

void print_accept(struct out *o, const struct clc_accept *a)
{
	frame_fields(o, &a->f);
	out_bool(o, "first_contact", a->first_contact);
	peer_id(o, &a->peer_id);
	out_gid(o, "gid", a->gid.b);
	out_mac(o, "mac", a->mac.b);
	out_uint_x(o, "qpn", a->qpn, 6);
	out_hex(o, "rmb_rkey", a->rkey, 8);
	out_uint(o, "rmbe_idx", a->rmbe_idx);
	out_uint_x(o, "rmbe_alert_token", a->token, 8);
	rmbe_size(o, a->rmbe_size_code);
	qp_mtu(o, a->mtu_code);
	out_hex(o, "rmb_vaddr", a->rmb_vaddr, 16);
	out_uint_x(o, "psn", a->psn, 6);
}

static void diagnosis(struct out *o, const char *key, uint32_t code)
{
	char name[64];
	out_hex(o, key, code, 8);
	int n = snprintf(name, sizeof(name), "%s_name", key);
	if (n > 0 && (size_t)n < sizeof(name))
		out_str(o, name, clc_decline_name(code));
}

static void print_decline(struct out *o, const struct clc_decline *d)
{
	frame_fields(o, &d->f);
	out_bool(o, "out_of_sync", d->out_of_sync);
	out_uint(o, "path", d->path);
	peer_id(o, &d->peer_id);
	diagnosis(o, "diagnosis", d->diag);
	out_str(o, "diagnosis_class", clc_decline_class(d->diag));
	if (d->f.version >= CLC_VERSION_2) {
		out_uint(o, "os_type", d->os_type);
		out_list_begin(o, "diagnosis_v2");
		for (unsigned i = 0; i < CLC_DECLINE_V2_DIAGS; i++)
			out_hex(o, NULL, d->diag_v2[i], 8);
		out_list_end(o);
	}
}

void print_clc(struct out *o, const struct clc_msg *m, const struct dec_where *w, size_t len)
{
	print_begin(o, print_clc_kind(m->type), w, len);
	switch (m->type) {
	case CLC_PROPOSAL:
		print_proposal(o, &m->proposal);
		break;
	case CLC_ACCEPT:
	case CLC_CONFIRM:
		print_accept(o, &m->accept);
		break;
	case CLC_DECLINE:
		print_decline(o, &m->decline);
		break;
	}
	out_end(o);
}

static void rtoken(struct out *o, const struct llc_rtoken *t)
{
	out_item_begin(o);
	out_uint(o, "link_num", t->link_num);
	out_hex(o, "rkey", t->rkey, 8);
	out_hex(o, "vaddr", t->vaddr, 16);
	out_item_end(o);
}

static void print_confirm_link(struct out *o, const struct llc_confirm_link *c)
{
	out_uint(o, "no_rmbe_eyecatcher", c->no_eyec);
	out_mac(o, "mac", c->mac.b);
	out_gid(o, "gid", c->gid.b);
	out_uint_x(o, "qpn", c->qpn, 6);
	out_uint(o, "link_num", c->link_num);
	out_hex(o, "link_user_id", c->link_uid, 8);
	out_uint(o, "max_links", c->max_links);
}

static void print_add_link(struct out *o, const struct llc_add_link *a)
{
	out_bool(o, "rejected", a->rejected);
	out_uint(o, "reject_reason", a->rej_reason);
	const char *rn = llc_add_link_rej_name(a->rej_reason);
	if (a->rejected || a->rej_reason)
		out_str(o, "reject_reason_name", rn ? rn : "UNKNOWN");
	out_mac(o, "mac", a->mac.b);
	out_gid(o, "gid", a->gid.b);
	out_uint_x(o, "qpn", a->qpn, 6);
	out_uint(o, "link_num", a->link_num);
	qp_mtu(o, a->mtu);
	out_uint_x(o, "psn", a->psn, 6);
}

static void print_add_link_cont(struct out *o, const struct llc_add_link_cont *c)
{
	out_uint(o, "link_num", c->link_num);
	out_uint(o, "num_rkeys", c->num_rkeys);
	unsigned n = c->num_rkeys < LLC_ALC_MAX_PAIRS ? c->num_rkeys : LLC_ALC_MAX_PAIRS;
	out_list_begin(o, "rkeys");
	for (unsigned i = 0; i < n; i++) {
		out_item_begin(o);
		out_hex(o, "rkey", c->rt[i].rkey, 8);
		out_hex(o, "rkey_new", c->rt[i].rkey_new, 8);
		out_hex(o, "vaddr_new", c->rt[i].vaddr_new, 16);
		out_item_end(o);
	}
	out_list_end(o);
}

static void print_delete_link(struct out *o, const struct llc_delete_link *d)
{
	out_bool(o, "all", d->all);
	out_bool(o, "orderly", d->orderly);
	out_uint(o, "link_num", d->link_num);
	out_hex(o, "reason", d->reason, 8);
	const char *rn = llc_del_reason_name(d->reason);
	out_str(o, "reason_name", rn ? rn : (d->reason ? "UNKNOWN" : "NONE"));
}

static void print_confirm_rkey(struct out *o, const struct llc_confirm_rkey *c)
{
	out_bool(o, "negative", c->negative);
	out_bool(o, "retry", c->retry);
	out_uint(o, "num_other_links", c->num_other);
	out_hex(o, "rkey", c->rkey, 8);
	out_hex(o, "vaddr", c->vaddr, 16);
	unsigned n = c->num_other < LLC_CR_MAX_OTHER ? c->num_other : LLC_CR_MAX_OTHER;
	out_list_begin(o, "other_links");
	for (unsigned i = 0; i < n; i++)
		rtoken(o, &c->other[i]);
	out_list_end(o);
}

static void print_confirm_rkey_cont(struct out *o, const struct llc_confirm_rkey_cont *c)
{
	out_bool(o, "negative", c->negative);
	out_uint(o, "num_remaining", c->num_remaining);
	unsigned n = c->num_remaining < LLC_CRC_MAX_ENTRIES ? c->num_remaining
							     : LLC_CRC_MAX_ENTRIES;
	out_list_begin(o, "entries");
	for (unsigned i = 0; i < n; i++)
		rtoken(o, &c->entry[i]);
	out_list_end(o);
}

static void print_delete_rkey(struct out *o, const struct llc_delete_rkey *d)
{
	out_bool(o, "negative", d->negative);
	out_uint(o, "count", d->count);
	out_hex(o, "error_mask", d->err_mask, 2);
	unsigned n = d->count < LLC_DR_MAX ? d->count : LLC_DR_MAX;
	out_list_begin(o, "rkeys");
	for (unsigned i = 0; i < n; i++)
		out_hex(o, NULL, d->rkey[i], 8);
	out_list_end(o);
}

void print_llc(struct out *o, const struct llc_msg *m, const struct dec_where *w)
{
	print_begin(o, print_llc_kind((uint8_t)m->type), w, LLC_MSG_LEN);
	print_llc_body(o, m);
	out_end(o);
}

void print_llc_body(struct out *o, const struct llc_msg *m)
{
	out_bool(o, "response", m->resp);
	switch (m->type) {
	case LLC_CONFIRM_LINK:
		print_confirm_link(o, &m->confirm_link);
		break;
	case LLC_ADD_LINK:
		print_add_link(o, &m->add_link);
		break;
	case LLC_ADD_LINK_CONT:
		print_add_link_cont(o, &m->add_link_cont);
		break;
	case LLC_DELETE_LINK:
		print_delete_link(o, &m->delete_link);
		break;
	case LLC_CONFIRM_RKEY:
		print_confirm_rkey(o, &m->confirm_rkey);
		break;
	case LLC_CONFIRM_RKEY_CONT:
		print_confirm_rkey_cont(o, &m->confirm_rkey_cont);
		break;
	case LLC_DELETE_RKEY:
		print_delete_rkey(o, &m->delete_rkey);
		break;
	case LLC_TEST_LINK:
		out_bytes(o, "user_data", m->test_link.data, LLC_TL_DATA_LEN);
		break;
	}
}

void print_cdc(struct out *o, const struct cdc_msg *m, const struct dec_where *w, size_t len)
{
	print_begin(o, "cdc", w, len);
	out_uint(o, "seqno", m->seqno);
	out_uint_x(o, "token", m->token, 8);
	out_uint(o, "prod_wrap", m->prod.wrap);
	out_uint_x(o, "prod_count", m->prod.count, 8);
	out_uint(o, "cons_wrap", m->cons.wrap);
	out_uint_x(o, "cons_count", m->cons.count, 8);
	out_hex(o, "producer_flags", cdc_prod_flags_byte(&m->pf), 2);
	out_bool(o, "write_blocked", m->pf.write_blocked);
	out_bool(o, "urg_pending", m->pf.urg_pending);
	out_bool(o, "urg_present", m->pf.urg_present);
	out_bool(o, "cons_update_req", m->pf.cons_upd_req);
	out_bool(o, "failover_validation", m->pf.failover);
	out_hex(o, "conn_state_flags", cdc_conn_flags_byte(&m->cf), 2);
	out_bool(o, "sending_done", m->cf.done_writing);
	out_bool(o, "conn_closed", m->cf.closed);
	out_bool(o, "abnormal_close", m->cf.abort);
	out_end(o);
}
