/* llc_rkey.c: bodies of the rkey LLC messages: CONFIRM RKEY (docs/protocol/wire-formats.md 6.6),
 * CONFIRM RKEY CONTINUATION (6.7), DELETE RKEY (6.8). Entries beyond a message's count
 * carry nothing: they are skipped on decode (left zero) and sent as zeros. */
#include <string.h>

#include "wire/llc_impl.h"

#define CR_RSVD_TAIL 1		/* CONFIRM RKEY 43 */
#define DR_RSVD_MID 2		/* DELETE RKEY 6..7 */
#define DR_RSVD_TAIL 4		/* DELETE RKEY 40..43 */
#define DR_RKEY_LEN 4

static unsigned min_u(unsigned a, unsigned b) { return a < b ? a : b; }

/* Reads/writes n entries of which the first used are real, the rest zero. */
static int get_rtokens(struct rcur *c, struct llc_rtoken *t, unsigned n, unsigned used)
{
	for (unsigned i = 0; i < n; i++) {
		if (i < used)
			LLC_TRY(llc_get_rtoken(c, &t[i]));
		else
			LLC_TRY(rcur_skip(c, LLC_RTOKEN_LEN));
	}
	return 0;
}

static int put_rtokens(struct wcur *w, const struct llc_rtoken *t, unsigned n, unsigned used)
{
	for (unsigned i = 0; i < n; i++) {
		if (i < used)
			LLC_TRY(llc_put_rtoken(w, &t[i]));
		else
			LLC_TRY(wcur_put_zeros(w, LLC_RTOKEN_LEN));
	}
	return 0;
}

static bool rtokens_equal(const struct llc_rtoken *a, const struct llc_rtoken *b, unsigned used)
{
	for (unsigned i = 0; i < used; i++)
		if (!llc_rtoken_equal(&a[i], &b[i]))
			return false;
	return true;
}

/* ---- 6.6 CONFIRM RKEY ---- */

static unsigned cr_used(const struct llc_confirm_rkey *cr)
{
	return min_u(cr->num_other, LLC_CR_MAX_OTHER);
}

static int cr_dec(struct rcur *c, const struct llc_hdr *h, struct llc_msg *m)
{
	struct llc_confirm_rkey *cr = &m->confirm_rkey;
	cr->negative = (h->flags & LLC_CR_FLAG_NEGATIVE) != 0;
	cr->retry = (h->flags & LLC_CR_FLAG_RETRY) != 0;
	LLC_TRY(rcur_get_u8(c, &cr->num_other));	/* 4 */
	LLC_TRY(rcur_get_u32(c, &cr->rkey));		/* 5 */
	LLC_TRY(rcur_get_u64(c, &cr->vaddr));		/* 9 */
	/* 17, 30; a count above 2 is rejected by cr_validate, nothing past 2 is read. */
	LLC_TRY(get_rtokens(c, cr->other, LLC_CR_MAX_OTHER, cr_used(cr)));
	return rcur_skip(c, CR_RSVD_TAIL);		/* 43 */
}

static int cr_enc(struct wcur *w, const struct llc_msg *m)
{
	const struct llc_confirm_rkey *cr = &m->confirm_rkey;
	LLC_TRY(wcur_put_u8(w, cr->num_other));
	LLC_TRY(wcur_put_u32(w, cr->rkey));
	LLC_TRY(wcur_put_u64(w, cr->vaddr));
	LLC_TRY(put_rtokens(w, cr->other, LLC_CR_MAX_OTHER, cr_used(cr)));
	return wcur_put_zeros(w, CR_RSVD_TAIL);
}

static struct llc_hdr cr_hdr(const struct llc_msg *m)
{
	const struct llc_confirm_rkey *cr = &m->confirm_rkey;
	struct llc_hdr h = { 0, (uint8_t)((cr->negative ? LLC_CR_FLAG_NEGATIVE : 0) |
					  (cr->retry ? LLC_CR_FLAG_RETRY : 0)) };
	return h;
}

static int cr_validate(const struct llc_msg *m)
{
	const struct llc_confirm_rkey *cr = &m->confirm_rkey;
	if (cr->num_other > LLC_CR_MAX_OTHER)	/* 6.6: two entry slots */
		return -SMCR_E_LLC_CR_COUNT;
	for (unsigned i = 0; i < cr->num_other; i++)
		if (cr->other[i].link_num == 0)
			return -SMCR_E_LLC_CR_LINK_ZERO;
	return 0;
}

static bool cr_equal(const struct llc_msg *ma, const struct llc_msg *mb)
{
	const struct llc_confirm_rkey *a = &ma->confirm_rkey, *b = &mb->confirm_rkey;
	return a->negative == b->negative && a->retry == b->retry &&
	       a->num_other == b->num_other && a->rkey == b->rkey && a->vaddr == b->vaddr &&
	       rtokens_equal(a->other, b->other, cr_used(a));
}

const struct llc_ops llc_ops_confirm_rkey = {
	.dec = cr_dec, .enc = cr_enc, .hdr = cr_hdr, .validate = cr_validate, .equal = cr_equal,
};

/* ---- 6.7 CONFIRM RKEY CONTINUATION ---- */

static unsigned crc_used(const struct llc_confirm_rkey_cont *crc)
{
	return min_u(crc->num_remaining, LLC_CRC_MAX_ENTRIES);
}

static int crc_dec(struct rcur *c, const struct llc_hdr *h, struct llc_msg *m)
{
	struct llc_confirm_rkey_cont *crc = &m->confirm_rkey_cont;
	crc->negative = (h->flags & LLC_CR_FLAG_NEGATIVE) != 0;
	LLC_TRY(rcur_get_u8(c, &crc->num_remaining));	/* 4 */
	return get_rtokens(c, crc->entry, LLC_CRC_MAX_ENTRIES, crc_used(crc)); /* 5, 18, 31 */
}

static int crc_enc(struct wcur *w, const struct llc_msg *m)
{
	const struct llc_confirm_rkey_cont *crc = &m->confirm_rkey_cont;
	LLC_TRY(wcur_put_u8(w, crc->num_remaining));
	return put_rtokens(w, crc->entry, LLC_CRC_MAX_ENTRIES, crc_used(crc));
}

static struct llc_hdr crc_hdr(const struct llc_msg *m)
{
	struct llc_hdr h = { 0, m->confirm_rkey_cont.negative ? LLC_CR_FLAG_NEGATIVE : 0 };
	return h;
}

static int crc_validate(const struct llc_msg *m)
{
	/* 6.7: the count is the number of entries remaining, this message's included; a
	 * continuation with none is meaningless. Above 3 means more messages follow. */
	const struct llc_confirm_rkey_cont *crc = &m->confirm_rkey_cont;
	if (crc->num_remaining == 0)
		return -SMCR_E_LLC_CRC_COUNT_ZERO;
	for (unsigned i = 0; i < crc_used(crc); i++)
		if (crc->entry[i].link_num == 0)
			return -SMCR_E_LLC_CRC_LINK_ZERO;
	return 0;
}

static bool crc_equal(const struct llc_msg *ma, const struct llc_msg *mb)
{
	const struct llc_confirm_rkey_cont *a = &ma->confirm_rkey_cont;
	const struct llc_confirm_rkey_cont *b = &mb->confirm_rkey_cont;
	return a->negative == b->negative && a->num_remaining == b->num_remaining &&
	       rtokens_equal(a->entry, b->entry, crc_used(a));
}

const struct llc_ops llc_ops_confirm_rkey_cont = {
	.dec = crc_dec, .enc = crc_enc, .hdr = crc_hdr, .validate = crc_validate,
	.equal = crc_equal,
};

/* ---- 6.8 DELETE RKEY ---- */

static unsigned dr_used(const struct llc_delete_rkey *dr)
{
	return min_u(dr->count, LLC_DR_MAX);
}

static int dr_dec(struct rcur *c, const struct llc_hdr *h, struct llc_msg *m)
{
	struct llc_delete_rkey *dr = &m->delete_rkey;
	dr->negative = (h->flags & LLC_DR_FLAG_NEGATIVE) != 0;
	LLC_TRY(rcur_get_u8(c, &dr->count));		/* 4 */
	LLC_TRY(rcur_get_u8(c, &dr->err_mask));		/* 5 */
	LLC_TRY(rcur_skip(c, DR_RSVD_MID));		/* 6 */
	for (unsigned i = 0; i < LLC_DR_MAX; i++) {	/* 8 + 4 i */
		if (i < dr_used(dr))
			LLC_TRY(rcur_get_u32(c, &dr->rkey[i]));
		else
			LLC_TRY(rcur_skip(c, DR_RKEY_LEN));
	}
	return rcur_skip(c, DR_RSVD_TAIL);		/* 40 */
}

static int dr_enc(struct wcur *w, const struct llc_msg *m)
{
	const struct llc_delete_rkey *dr = &m->delete_rkey;
	LLC_TRY(wcur_put_u8(w, dr->count));
	LLC_TRY(wcur_put_u8(w, dr->err_mask));
	LLC_TRY(wcur_put_zeros(w, DR_RSVD_MID));
	for (unsigned i = 0; i < LLC_DR_MAX; i++)
		LLC_TRY(wcur_put_u32(w, i < dr_used(dr) ? dr->rkey[i] : 0));
	return wcur_put_zeros(w, DR_RSVD_TAIL);
}

static struct llc_hdr dr_hdr(const struct llc_msg *m)
{
	struct llc_hdr h = { 0, m->delete_rkey.negative ? LLC_DR_FLAG_NEGATIVE : 0 };
	return h;
}

static int dr_validate(const struct llc_msg *m)
{
	const struct llc_delete_rkey *dr = &m->delete_rkey;
	if (dr->count == 0)
		return -SMCR_E_LLC_DR_COUNT_ZERO;
	if (dr->count > LLC_DR_MAX)
		return -SMCR_E_LLC_DR_COUNT_RANGE;
	/* 6.8: bit (0x80 >> i) stands for rkey[i]; only i < count can be named. */
	uint8_t valid = (uint8_t)(0xFF00u >> dr->count);
	if (dr->err_mask & (uint8_t)~valid)
		return -SMCR_E_LLC_DR_MASK_RANGE;
	return 0;
}

static bool dr_equal(const struct llc_msg *ma, const struct llc_msg *mb)
{
	const struct llc_delete_rkey *a = &ma->delete_rkey, *b = &mb->delete_rkey;
	if (a->negative != b->negative || a->count != b->count || a->err_mask != b->err_mask)
		return false;
	for (unsigned i = 0; i < dr_used(a); i++)
		if (a->rkey[i] != b->rkey[i])
			return false;
	return true;
}

const struct llc_ops llc_ops_delete_rkey = {
	.dec = dr_dec, .enc = dr_enc, .hdr = dr_hdr, .validate = dr_validate, .equal = dr_equal,
};
