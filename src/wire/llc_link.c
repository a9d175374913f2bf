/* llc_link.c: bodies of the link-management LLC messages: CONFIRM LINK
 * (docs/protocol/wire-formats.md 6.2), ADD LINK (6.3), ADD LINK CONTINUATION (6.4), DELETE LINK
 * (6.5), TEST LINK (6.9). Each body is offsets 4..43; the comment at each read gives the spec
 * offset. */
#include <string.h>

#include "wire/codes.h"
#include "wire/llc_impl.h"

#define QPN_MAX 0xFFFFFFu		/* 24-bit QPN and PSN (8.4) */
#define CL_RSVD_TAIL 9			/* CONFIRM LINK 35..43 (v2.1: 35 = max conns) */
#define AL_RSVD_GID 2			/* ADD LINK 10..11 (DIFFERS note in 6.3: Linux has them) */
#define AL_RSVD_TAIL 8			/* ADD LINK 36..43 */
#define AL_MTU_MASK 0x0F		/* ADD LINK byte 32 low nibble */
#define AL_REJ_MASK 0x0F		/* byte 2 low nibble */
#define ALC_RSVD_MID 2			/* ADD LINK CONT 6..7 */
#define ALC_RSVD_TAIL 4			/* ADD LINK CONT 40..43 */
#define ALC_PAIR_LEN 16
#define DL_RSVD_TAIL 35			/* DELETE LINK 9..43 */
#define TL_RSVD_TAIL 24			/* TEST LINK 20..43 */

static struct llc_hdr hdr_plain(const struct llc_msg *m)
{
	(void)m;
	struct llc_hdr h = { 0, 0 };
	return h;
}

/* ---- 6.2 CONFIRM LINK ---- */

static int cl_dec(struct rcur *c, const struct llc_hdr *h, struct llc_msg *m)
{
	struct llc_confirm_link *cl = &m->confirm_link;
	cl->no_eyec = h->flags & LLC_CL_FLAG_NO_RMBE_EYEC;
	LLC_TRY(wire_get_mac(c, &cl->mac));		/* 4 */
	LLC_TRY(wire_get_gid(c, &cl->gid));		/* 10 */
	LLC_TRY(rcur_get_u24(c, &cl->qpn));		/* 26 */
	LLC_TRY(rcur_get_u8(c, &cl->link_num));		/* 29 */
	LLC_TRY(rcur_get_u32(c, &cl->link_uid));	/* 30 */
	LLC_TRY(rcur_get_u8(c, &cl->max_links));	/* 34 */
	return rcur_skip(c, CL_RSVD_TAIL);		/* 35 */
}

static int cl_enc(struct wcur *w, const struct llc_msg *m)
{
	const struct llc_confirm_link *cl = &m->confirm_link;
	LLC_TRY(wire_put_mac(w, &cl->mac));
	LLC_TRY(wire_put_gid(w, &cl->gid));
	LLC_TRY(wcur_put_u24(w, cl->qpn));
	LLC_TRY(wcur_put_u8(w, cl->link_num));
	LLC_TRY(wcur_put_u32(w, cl->link_uid));
	LLC_TRY(wcur_put_u8(w, cl->max_links));
	return wcur_put_zeros(w, CL_RSVD_TAIL);
}

static struct llc_hdr cl_hdr(const struct llc_msg *m)
{
	struct llc_hdr h = { 0, m->confirm_link.no_eyec };
	return h;
}

static int cl_validate(const struct llc_msg *m)
{
	const struct llc_confirm_link *cl = &m->confirm_link;
	if (cl->link_num == 0)		/* 8.4: link numbers are non-zero */
		return -SMCR_E_LLC_CL_LINK_ZERO;
	if (cl->no_eyec & ~LLC_CL_FLAG_NO_RMBE_EYEC)
		return -SMCR_E_LLC_EYEC_RANGE;
	if (cl->qpn > QPN_MAX)
		return -SMCR_E_LLC_QPN_RANGE;
	return 0;
}

static bool cl_equal(const struct llc_msg *ma, const struct llc_msg *mb)
{
	const struct llc_confirm_link *a = &ma->confirm_link, *b = &mb->confirm_link;
	return a->no_eyec == b->no_eyec && !memcmp(&a->mac, &b->mac, sizeof(a->mac)) &&
	       !memcmp(&a->gid, &b->gid, sizeof(a->gid)) && a->qpn == b->qpn &&
	       a->link_num == b->link_num && a->link_uid == b->link_uid &&
	       a->max_links == b->max_links;
}

const struct llc_ops llc_ops_confirm_link = {
	.dec = cl_dec, .enc = cl_enc, .hdr = cl_hdr, .validate = cl_validate, .equal = cl_equal,
};

/* ---- 6.3 ADD LINK ---- */

static int al_dec(struct rcur *c, const struct llc_hdr *h, struct llc_msg *m)
{
	struct llc_add_link *al = &m->add_link;
	uint8_t b32;
	al->rejected = (h->flags & LLC_AL_FLAG_REJECT) != 0;
	al->rej_reason = h->b2 & AL_REJ_MASK;
	LLC_TRY(wire_get_mac(c, &al->mac));		/* 4 */
	LLC_TRY(rcur_skip(c, AL_RSVD_GID));		/* 10 */
	LLC_TRY(wire_get_gid(c, &al->gid));		/* 12 */
	LLC_TRY(rcur_get_u24(c, &al->qpn));		/* 28 */
	LLC_TRY(rcur_get_u8(c, &al->link_num));		/* 31 */
	LLC_TRY(rcur_get_u8(c, &b32));			/* 32: rsvd:4, qp_mtu:4 */
	al->mtu = b32 & AL_MTU_MASK;
	LLC_TRY(rcur_get_u24(c, &al->psn));		/* 33 */
	return rcur_skip(c, AL_RSVD_TAIL);		/* 36 */
}

static int al_enc(struct wcur *w, const struct llc_msg *m)
{
	const struct llc_add_link *al = &m->add_link;
	LLC_TRY(wire_put_mac(w, &al->mac));
	LLC_TRY(wcur_put_zeros(w, AL_RSVD_GID));
	LLC_TRY(wire_put_gid(w, &al->gid));
	LLC_TRY(wcur_put_u24(w, al->qpn));
	LLC_TRY(wcur_put_u8(w, al->link_num));
	LLC_TRY(wcur_put_u8(w, al->mtu));
	LLC_TRY(wcur_put_u24(w, al->psn));
	return wcur_put_zeros(w, AL_RSVD_TAIL);
}

static struct llc_hdr al_hdr(const struct llc_msg *m)
{
	struct llc_hdr h = { m->add_link.rej_reason,
			     m->add_link.rejected ? LLC_AL_FLAG_REJECT : 0 };
	return h;
}

static bool al_body_zero(const struct llc_add_link *al)
{
	static const struct wire_mac zmac;
	static const struct wire_gid zgid;
	return !memcmp(&al->mac, &zmac, sizeof(zmac)) && !memcmp(&al->gid, &zgid, sizeof(zgid)) &&
	       al->qpn == 0 && al->link_num == 0 && al->mtu == 0 && al->psn == 0;
}

static int al_validate(const struct llc_msg *m)
{
	const struct llc_add_link *al = &m->add_link;
	if (al->qpn > QPN_MAX)
		return -SMCR_E_LLC_QPN_RANGE;
	if (al->psn > QPN_MAX)
		return -SMCR_E_LLC_PSN_RANGE;
	if (al->rej_reason > AL_REJ_MASK)
		return -SMCR_E_LLC_REJ_REASON_RANGE;
	/* 6.3: Linux takes an ADD LINK with bytes 4..43 all zero for its own internal
	 * trigger (smc_llc_is_local_add_link); such a message is never valid from a peer. */
	if (al_body_zero(al))
		return -SMCR_E_LLC_AL_ALL_ZERO;
	if (al->mtu > WIRE_MTU_CODE_MAX)	/* 8.2: 1..5; 6..15 never valid */
		return -SMCR_E_LLC_AL_BAD_MTU;
	/* A request may carry link number 0 and MTU 0: the client's "please add a link"
	 * hint does (docs/protocol/procedures.md 3.2), and a request with MTU 0 must still decode
	 * so it can be rejected (Linux does). A reject echoes the request, so it may too. An
	 * accepting response names the new link and the agreed MTU. */
	if (m->resp && al->link_num == 0)
		return -SMCR_E_LLC_AL_LINK_ZERO;
	if (m->resp && !al->rejected && al->mtu == 0)
		return -SMCR_E_LLC_AL_MTU_ZERO;
	return 0;
}

static bool al_equal(const struct llc_msg *ma, const struct llc_msg *mb)
{
	const struct llc_add_link *a = &ma->add_link, *b = &mb->add_link;
	return a->rejected == b->rejected && a->rej_reason == b->rej_reason &&
	       !memcmp(&a->mac, &b->mac, sizeof(a->mac)) &&
	       !memcmp(&a->gid, &b->gid, sizeof(a->gid)) && a->qpn == b->qpn &&
	       a->link_num == b->link_num && a->mtu == b->mtu && a->psn == b->psn;
}

const struct llc_ops llc_ops_add_link = {
	.dec = al_dec, .enc = al_enc, .hdr = al_hdr, .validate = al_validate, .equal = al_equal,
};

/* ---- 6.4 ADD LINK CONTINUATION ---- */

static unsigned alc_used(const struct llc_add_link_cont *alc)
{
	return alc->num_rkeys < LLC_ALC_MAX_PAIRS ? alc->num_rkeys : LLC_ALC_MAX_PAIRS;
}

static int alc_dec(struct rcur *c, const struct llc_hdr *h, struct llc_msg *m)
{
	struct llc_add_link_cont *alc = &m->add_link_cont;
	(void)h;
	LLC_TRY(rcur_get_u8(c, &alc->link_num));	/* 4 */
	LLC_TRY(rcur_get_u8(c, &alc->num_rkeys));	/* 5 */
	LLC_TRY(rcur_skip(c, ALC_RSVD_MID));		/* 6 */
	unsigned used = alc_used(alc);
	for (unsigned i = 0; i < LLC_ALC_MAX_PAIRS; i++) {	/* 8, 24 */
		if (i >= used) {	/* pairs beyond the count carry nothing: left zero */
			LLC_TRY(rcur_skip(c, ALC_PAIR_LEN));
			continue;
		}
		LLC_TRY(rcur_get_u32(c, &alc->rt[i].rkey));
		LLC_TRY(rcur_get_u32(c, &alc->rt[i].rkey_new));
		LLC_TRY(rcur_get_u64(c, &alc->rt[i].vaddr_new));
	}
	return rcur_skip(c, ALC_RSVD_TAIL);		/* 40 */
}

static int alc_enc(struct wcur *w, const struct llc_msg *m)
{
	const struct llc_add_link_cont *alc = &m->add_link_cont;
	LLC_TRY(wcur_put_u8(w, alc->link_num));
	LLC_TRY(wcur_put_u8(w, alc->num_rkeys));
	LLC_TRY(wcur_put_zeros(w, ALC_RSVD_MID));
	unsigned used = alc_used(alc);
	for (unsigned i = 0; i < LLC_ALC_MAX_PAIRS; i++) {
		if (i >= used) {
			LLC_TRY(wcur_put_zeros(w, ALC_PAIR_LEN));
			continue;
		}
		LLC_TRY(wcur_put_u32(w, alc->rt[i].rkey));
		LLC_TRY(wcur_put_u32(w, alc->rt[i].rkey_new));
		LLC_TRY(wcur_put_u64(w, alc->rt[i].vaddr_new));
	}
	return wcur_put_zeros(w, ALC_RSVD_TAIL);
}

static int alc_validate(const struct llc_msg *m)
{
	/* num_rkeys: any 0..255 (0 = "nothing left", still sent, docs/protocol/procedures.md
	 * 3.2). */
	return m->add_link_cont.link_num ? 0 : -SMCR_E_LLC_ALC_LINK_ZERO;
}

static bool alc_equal(const struct llc_msg *ma, const struct llc_msg *mb)
{
	const struct llc_add_link_cont *a = &ma->add_link_cont, *b = &mb->add_link_cont;
	if (a->link_num != b->link_num || a->num_rkeys != b->num_rkeys)
		return false;
	for (unsigned i = 0; i < alc_used(a); i++)
		if (a->rt[i].rkey != b->rt[i].rkey || a->rt[i].rkey_new != b->rt[i].rkey_new ||
		    a->rt[i].vaddr_new != b->rt[i].vaddr_new)
			return false;
	return true;
}

const struct llc_ops llc_ops_add_link_cont = {
	.dec = alc_dec, .enc = alc_enc, .hdr = hdr_plain, .validate = alc_validate,
	.equal = alc_equal,
};

/* ---- 6.5 DELETE LINK ---- */

static int dl_dec(struct rcur *c, const struct llc_hdr *h, struct llc_msg *m)
{
	struct llc_delete_link *dl = &m->delete_link;
	dl->all = (h->flags & LLC_DL_FLAG_ALL) != 0;
	dl->orderly = (h->flags & LLC_DL_FLAG_ORDERLY) != 0;
	LLC_TRY(rcur_get_u8(c, &dl->link_num));		/* 4 */
	LLC_TRY(rcur_get_u32(c, &dl->reason));		/* 5, unaligned */
	return rcur_skip(c, DL_RSVD_TAIL);		/* 9 */
}

static int dl_enc(struct wcur *w, const struct llc_msg *m)
{
	const struct llc_delete_link *dl = &m->delete_link;
	LLC_TRY(wcur_put_u8(w, dl->link_num));
	LLC_TRY(wcur_put_u32(w, dl->reason));
	return wcur_put_zeros(w, DL_RSVD_TAIL);
}

static struct llc_hdr dl_hdr(const struct llc_msg *m)
{
	const struct llc_delete_link *dl = &m->delete_link;
	struct llc_hdr h = { 0, (uint8_t)((dl->all ? LLC_DL_FLAG_ALL : 0) |
					  (dl->orderly ? LLC_DL_FLAG_ORDERLY : 0)) };
	return h;
}

static int dl_validate(const struct llc_msg *m)
{
	/* One link: its number, non-zero. With "all" the number is 0 when sent, but a
	 * non-zero one is accepted: the receiver terminates the LG either way (6.5). Reason
	 * codes without a name are accepted too (decoded leniently, like decline codes). */
	const struct llc_delete_link *dl = &m->delete_link;
	return (dl->all || dl->link_num) ? 0 : -SMCR_E_LLC_DL_LINK_ZERO;
}

static bool dl_equal(const struct llc_msg *ma, const struct llc_msg *mb)
{
	const struct llc_delete_link *a = &ma->delete_link, *b = &mb->delete_link;
	return a->all == b->all && a->orderly == b->orderly && a->link_num == b->link_num &&
	       a->reason == b->reason;
}

const struct llc_ops llc_ops_delete_link = {
	.dec = dl_dec, .enc = dl_enc, .hdr = dl_hdr, .validate = dl_validate, .equal = dl_equal,
};

/* ---- 6.9 TEST LINK ---- */

static int tl_dec(struct rcur *c, const struct llc_hdr *h, struct llc_msg *m)
{
	(void)h;
	LLC_TRY(rcur_get_bytes(c, m->test_link.data, LLC_TL_DATA_LEN));	/* 4 */
	return rcur_skip(c, TL_RSVD_TAIL);					/* 20 */
}

static int tl_enc(struct wcur *w, const struct llc_msg *m)
{
	LLC_TRY(wcur_put_bytes(w, m->test_link.data, LLC_TL_DATA_LEN));
	return wcur_put_zeros(w, TL_RSVD_TAIL);
}

static int tl_validate(const struct llc_msg *m)
{
	(void)m;	/* any user data */
	return 0;
}

static bool tl_equal(const struct llc_msg *a, const struct llc_msg *b)
{
	return !memcmp(a->test_link.data, b->test_link.data, LLC_TL_DATA_LEN);
}

const struct llc_ops llc_ops_test_link = {
	.dec = tl_dec, .enc = tl_enc, .hdr = hdr_plain, .validate = tl_validate,
	.equal = tl_equal,
};
