/* llc_impl.h: internal to the LLC codec (llc.c, llc_link.c, llc_rkey.c): the per-type
 * operations table that llc.c dispatches through (STYLE.md 10), and the wire offsets
 * shared by every type (docs/protocol/wire-formats.md 6.1). Not for use outside src/wire/llc*.c. */
#ifndef SMCR_WIRE_LLC_IMPL_H
#define SMCR_WIRE_LLC_IMPL_H

#include "util/cursor.h"
#include "wire/llc.h"

#define LLC_OFF_TYPE 0
#define LLC_OFF_LEN 1
#define LLC_OFF_B2 2		/* rsvd; ADD LINK: low nibble = reject reason */
#define LLC_OFF_FLAGS 3
#define LLC_OFF_BODY 4
#define LLC_BODY_LEN 40		/* offsets 4..43, type-specific */
#define LLC_RTOKEN_LEN 13	/* link number, rkey, vaddr (6.6, 6.7) */

/* Header bytes 2 and 3 as read or as to be written. */
struct llc_hdr {
	uint8_t b2;
	uint8_t flags;
};

/* Evaluates a cursor call and returns its code from the enclosing function on failure.
 * In the codec the buffers are exactly 44 bytes, so these never fail in practice; the
 * checks stay because the cursor API demands them (and would catch an offset slip). */
#define LLC_TRY(expr)                \
	do {                         \
		int rc_ = (expr);    \
		if (rc_)             \
			return rc_;  \
	} while (0)

/* One message type. dec reads the 40-byte body (cursor at offset 4, exactly 40 bytes
 * left) into m, with the header's bytes 2 and 3; it does not validate. enc writes the
 * 40-byte body of an already validated m. hdr gives bytes 2 and 3 without the response
 * flag. validate checks every rule of the type (llc_validate). equal compares the type's
 * member, used entries only. */
struct llc_ops {
	int (*dec)(struct rcur *body, const struct llc_hdr *h, struct llc_msg *m);
	int (*enc)(struct wcur *body, const struct llc_msg *m);
	struct llc_hdr (*hdr)(const struct llc_msg *m);
	int (*validate)(const struct llc_msg *m);
	bool (*equal)(const struct llc_msg *a, const struct llc_msg *b);
};

extern const struct llc_ops llc_ops_confirm_link;	/* llc_link.c */
extern const struct llc_ops llc_ops_add_link;
extern const struct llc_ops llc_ops_add_link_cont;
extern const struct llc_ops llc_ops_delete_link;
extern const struct llc_ops llc_ops_test_link;
extern const struct llc_ops llc_ops_confirm_rkey;	/* llc_rkey.c */
extern const struct llc_ops llc_ops_confirm_rkey_cont;
extern const struct llc_ops llc_ops_delete_rkey;

/* Shared helpers for the 13-byte {link number, rkey, vaddr} entry (6.6, 6.7). */
int llc_get_rtoken(struct rcur *c, struct llc_rtoken *t);
int llc_put_rtoken(struct wcur *c, const struct llc_rtoken *t);
bool llc_rtoken_equal(const struct llc_rtoken *a, const struct llc_rtoken *b);

#endif
