/* llc.c: the LLC common header and the type dispatch (docs/protocol/wire-formats.md 6.1): length
 * and type checks, v1/v2/CDC/unknown classification, the per-type operations table, names
 * for logs and smcr-decode. The type bodies are in llc_link.c and llc_rkey.c. */
#include "wire/llc.h"

#include <string.h>

#include "wire/llc_impl.h"

/* Filled at compile time, indexed by the type byte (STYLE.md 10). */
static const struct llc_ops *const llc_ops_tab[] = {
	[LLC_CONFIRM_LINK] = &llc_ops_confirm_link,
	[LLC_ADD_LINK] = &llc_ops_add_link,
	[LLC_ADD_LINK_CONT] = &llc_ops_add_link_cont,
	[LLC_DELETE_LINK] = &llc_ops_delete_link,
	[LLC_CONFIRM_RKEY] = &llc_ops_confirm_rkey,
	[LLC_TEST_LINK] = &llc_ops_test_link,
	[LLC_CONFIRM_RKEY_CONT] = &llc_ops_confirm_rkey_cont,
	[LLC_DELETE_RKEY] = &llc_ops_delete_rkey,
};

static const struct llc_ops *llc_ops_of(unsigned type)
{
	if (type >= sizeof(llc_ops_tab) / sizeof(llc_ops_tab[0]))
		return NULL;
	return llc_ops_tab[type];	/* NULL for 0x00 and 0x05 */
}

enum llc_kind llc_kind_of(uint8_t type)
{
	if (llc_ops_of(type))
		return LLC_KIND_V1;
	switch (type) {
	case LLC_TYPE_CDC:
		return LLC_KIND_CDC;
	/* SMC-R v2 types Linux registers handlers for (6.1 table; docs/protocol/linux-interop.md
	 * 11). 0x23 and 0x28 are not among them: unknown. */
	case 0x21: case 0x22: case 0x24: case 0x25: case 0x26: case 0x27: case 0x29:
		return LLC_KIND_V2;
	default:
		return LLC_KIND_UNKNOWN;
	}
}

const char *llc_type_name(uint8_t type)
{
	switch (type) {
	case LLC_CONFIRM_LINK: return "CONFIRM LINK";
	case LLC_ADD_LINK: return "ADD LINK";
	case LLC_ADD_LINK_CONT: return "ADD LINK CONTINUATION";
	case LLC_DELETE_LINK: return "DELETE LINK";
	case LLC_CONFIRM_RKEY: return "CONFIRM RKEY";
	case LLC_TEST_LINK: return "TEST LINK";
	case LLC_CONFIRM_RKEY_CONT: return "CONFIRM RKEY CONTINUATION";
	case LLC_DELETE_RKEY: return "DELETE RKEY";
	case LLC_TYPE_CDC: return "CDC";
	case 0x21: return "v2 CONFIRM LINK";
	case 0x22: return "v2 ADD LINK";
	case 0x24: return "v2 DELETE LINK";
	case 0x25: return "v2 REQUEST ADD LINK";
	case 0x26: return "v2 CONFIRM RKEY";
	case 0x27: return "v2 TEST LINK";
	case 0x29: return "v2 DELETE RKEY";
	default: return "unknown";
	}
}

/* Type-byte verdict shared by decode and encode. */
static int llc_type_check(uint8_t type)
{
	switch (llc_kind_of(type)) {
	case LLC_KIND_V1:
		return 0;
	case LLC_KIND_CDC:
		return -SMCR_E_LLC_IS_CDC;
	case LLC_KIND_V2:
		return -SMCR_E_LLC_V2_UNSUPPORTED;
	case LLC_KIND_UNKNOWN:
		break;
	}
	return -SMCR_E_LLC_UNKNOWN_TYPE;
}

static int llc_decode_checked(const uint8_t *buf, size_t len, struct llc_msg *out)
{
	if (len < 1)
		return -SMCR_E_LLC_SHORT;
	/* The type first: v2 messages have a 16-bit length and other sizes (6.1), and an
	 * unknown type is dropped whatever its length, so neither is a length error. */
	int rc = llc_type_check(buf[LLC_OFF_TYPE]);
	if (rc)
		return rc;
	if (len < LLC_MSG_LEN)
		return -SMCR_E_LLC_SHORT;
	if (len > LLC_MSG_LEN)
		return -SMCR_E_LLC_LONG;

	struct rcur c = rcur_make(buf, len);
	uint8_t type, length;
	struct llc_hdr h;
	LLC_TRY(rcur_get_u8(&c, &type));
	LLC_TRY(rcur_get_u8(&c, &length));
	if (length != LLC_MSG_LEN)
		return -SMCR_E_LLC_BAD_LENGTH;
	LLC_TRY(rcur_get_u8(&c, &h.b2));
	LLC_TRY(rcur_get_u8(&c, &h.flags));

	const struct llc_ops *ops = llc_ops_of(type);
	out->type = (enum llc_type)type;
	out->resp = (h.flags & LLC_FLAG_RESP) != 0;
	LLC_TRY(ops->dec(&c, &h, out));
	if (rcur_left(&c) != 0)		/* a body decoder that missed bytes is a codec bug */
		return -SMCR_E_INTERNAL;
	return ops->validate(out);
}

int llc_decode(const uint8_t *buf, size_t len, struct llc_msg *out)
{
	memset(out, 0, sizeof(*out));
	int rc = llc_decode_checked(buf, len, out);
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}

int llc_validate(const struct llc_msg *m)
{
	unsigned type = (unsigned)m->type;
	if (type > 0xFF)
		return -SMCR_E_LLC_UNKNOWN_TYPE;
	int rc = llc_type_check((uint8_t)type);
	if (rc)
		return rc;
	return llc_ops_of(m->type)->validate(m);
}

int llc_encode(const struct llc_msg *m, uint8_t out[LLC_MSG_LEN])
{
	int rc = llc_validate(m);
	if (rc)
		return rc;
	/* Built in a scratch buffer so that a failure leaves out untouched. */
	uint8_t tmp[LLC_MSG_LEN];
	struct wcur w = wcur_make(tmp, sizeof(tmp));
	const struct llc_ops *ops = llc_ops_of(m->type);
	struct llc_hdr h = ops->hdr(m);
	if (m->resp)
		h.flags |= LLC_FLAG_RESP;
	LLC_TRY(wcur_put_u8(&w, (uint8_t)m->type));
	LLC_TRY(wcur_put_u8(&w, LLC_MSG_LEN));
	LLC_TRY(wcur_put_u8(&w, h.b2));
	LLC_TRY(wcur_put_u8(&w, h.flags));
	LLC_TRY(ops->enc(&w, m));
	if (wcur_left(&w) != 0)
		return -SMCR_E_INTERNAL;
	memcpy(out, tmp, sizeof(tmp));
	return 0;
}

bool llc_msg_equal(const struct llc_msg *a, const struct llc_msg *b)
{
	if (a->type != b->type || a->resp != b->resp)
		return false;
	const struct llc_ops *ops = llc_ops_of(a->type);
	return ops ? ops->equal(a, b) : true;
}

int llc_confirm_link_check_eyec(const struct llc_confirm_link *cl)
{
	/* Linux declines with 0x03050000 when neither bit of 0x03 is set (6.2). */
	return (cl->no_eyec & LLC_CL_FLAG_NO_RMBE_EYEC) ? 0 : -SMCR_E_LLC_RMBE_EYECATCHERS;
}

void llc_add_link_reject_raw(const uint8_t req[LLC_MSG_LEN], uint8_t reason,
			     uint8_t out[LLC_MSG_LEN])
{
	memmove(out, req, LLC_MSG_LEN);
	out[LLC_OFF_B2] = reason & 0x0F;
	out[LLC_OFF_FLAGS] |= LLC_FLAG_RESP | LLC_AL_FLAG_REJECT;
}

const char *llc_del_reason_name(uint32_t reason)
{
	switch (reason) {
	case 0: return "NONE";
	case LLC_DEL_LOST_PATH: return "LOST_PATH";
	case LLC_DEL_OP_INIT_TERM: return "OP_INIT_TERM";
	case LLC_DEL_PROG_INIT_TERM: return "PROG_INIT_TERM";
	case LLC_DEL_PROT_VIOL: return "PROT_VIOL";
	case LLC_DEL_NO_ASYM_NEEDED: return "NO_ASYM_NEEDED";
	case LLC_DEL_NOLNK: return "NOLNK";
	case LLC_DEL_NOLGR: return "NOLGR";
	default: return NULL;
	}
}

const char *llc_add_link_rej_name(uint8_t reason)
{
	switch (reason) {
	case LLC_AL_REJ_NO_ALT_PATH: return "NO_ALT_PATH";
	case LLC_AL_REJ_INVALID_MTU: return "INVALID_MTU";
	default: return NULL;
	}
}

int llc_get_rtoken(struct rcur *c, struct llc_rtoken *t)
{
	LLC_TRY(rcur_get_u8(c, &t->link_num));
	LLC_TRY(rcur_get_u32(c, &t->rkey));
	LLC_TRY(rcur_get_u64(c, &t->vaddr));
	return 0;
}

int llc_put_rtoken(struct wcur *c, const struct llc_rtoken *t)
{
	LLC_TRY(wcur_put_u8(c, t->link_num));
	LLC_TRY(wcur_put_u32(c, t->rkey));
	LLC_TRY(wcur_put_u64(c, t->vaddr));
	return 0;
}

bool llc_rtoken_equal(const struct llc_rtoken *a, const struct llc_rtoken *b)
{
	return a->link_num == b->link_num && a->rkey == b->rkey && a->vaddr == b->vaddr;
}
