/* cursor.c: the bounds-checked byte cursors of cursor.h. Every function checks
 * first and moves second, so a failure leaves the cursor unmoved. */
#include "util/cursor.h"

#include <string.h>

static int rcur_take(struct rcur *c, size_t n, const uint8_t **p)
{
	if (n > c->len - c->off)
		return -SMCR_E_SHORT;
	*p = c->buf + c->off;
	c->off += n;
	return 0;
}

int rcur_sub(const struct rcur *c, size_t n, struct rcur *sub)
{
	if (n > c->len - c->off)
		return -SMCR_E_SHORT;
	*sub = rcur_make(c->buf + c->off, n);
	return 0;
}

int rcur_get_u8(struct rcur *c, uint8_t *v)
{
	const uint8_t *p;
	int rc = rcur_take(c, 1, &p);
	if (rc == 0)
		*v = p[0];
	return rc;
}

int rcur_get_u16(struct rcur *c, uint16_t *v)
{
	const uint8_t *p;
	int rc = rcur_take(c, 2, &p);
	if (rc == 0)
		*v = be16_load(p);
	return rc;
}

int rcur_get_u24(struct rcur *c, uint32_t *v)
{
	const uint8_t *p;
	int rc = rcur_take(c, 3, &p);
	if (rc == 0)
		*v = be24_load(p);
	return rc;
}

int rcur_get_u32(struct rcur *c, uint32_t *v)
{
	const uint8_t *p;
	int rc = rcur_take(c, 4, &p);
	if (rc == 0)
		*v = be32_load(p);
	return rc;
}

int rcur_get_u64(struct rcur *c, uint64_t *v)
{
	const uint8_t *p;
	int rc = rcur_take(c, 8, &p);
	if (rc == 0)
		*v = be64_load(p);
	return rc;
}

int rcur_get_bytes(struct rcur *c, void *dst, size_t n)
{
	const uint8_t *p;
	int rc = rcur_take(c, n, &p);
	if (rc == 0 && n)
		memcpy(dst, p, n);
	return rc;
}

int rcur_skip(struct rcur *c, size_t n)
{
	const uint8_t *p;
	return rcur_take(c, n, &p);
}

int rcur_expect(struct rcur *c, const void *want, size_t n)
{
	if (n > c->len - c->off)
		return -SMCR_E_SHORT;
	if (n && memcmp(c->buf + c->off, want, n) != 0)
		return -SMCR_E_EXPECT;
	c->off += n;
	return 0;
}

int rcur_peek_u8(const struct rcur *c, size_t at, uint8_t *v)
{
	if (at >= c->len)
		return -SMCR_E_SHORT;
	*v = c->buf[at];
	return 0;
}

static int wcur_take(struct wcur *c, size_t n, uint8_t **p)
{
	if (n > c->cap - c->off)
		return -SMCR_E_NOSPACE;
	*p = c->buf + c->off;
	c->off += n;
	return 0;
}

int wcur_put_u8(struct wcur *c, uint8_t v)
{
	uint8_t *p;
	int rc = wcur_take(c, 1, &p);
	if (rc == 0)
		p[0] = v;
	return rc;
}

int wcur_put_u16(struct wcur *c, uint16_t v)
{
	uint8_t *p;
	int rc = wcur_take(c, 2, &p);
	if (rc == 0)
		be16_store(p, v);
	return rc;
}

int wcur_put_u24(struct wcur *c, uint32_t v)
{
	uint8_t *p;
	int rc;
	if (v > 0xffffffu)
		return -SMCR_E_INVAL;
	rc = wcur_take(c, 3, &p);
	if (rc == 0)
		be24_store(p, v);
	return rc;
}

int wcur_put_u32(struct wcur *c, uint32_t v)
{
	uint8_t *p;
	int rc = wcur_take(c, 4, &p);
	if (rc == 0)
		be32_store(p, v);
	return rc;
}

int wcur_put_u64(struct wcur *c, uint64_t v)
{
	uint8_t *p;
	int rc = wcur_take(c, 8, &p);
	if (rc == 0)
		be64_store(p, v);
	return rc;
}

int wcur_put_bytes(struct wcur *c, const void *src, size_t n)
{
	uint8_t *p;
	int rc = wcur_take(c, n, &p);
	if (rc == 0 && n)
		memcpy(p, src, n);
	return rc;
}

int wcur_put_zeros(struct wcur *c, size_t n)
{
	uint8_t *p;
	int rc = wcur_take(c, n, &p);
	if (rc == 0 && n)
		memset(p, 0, n);
	return rc;
}

int wcur_patch_u16(struct wcur *c, size_t at, uint16_t v)
{
	if (at >= c->off || c->off - at < 2)
		return -SMCR_E_INVAL;
	be16_store(c->buf + at, v);
	return 0;
}
