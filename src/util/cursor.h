/* cursor.h: bounds-checked byte cursors for every wire decoder and encoder (STYLE.md 4, 8).
 *
 * A read cursor (struct rcur) walks a const buffer; a write cursor (struct wcur) fills one.
 * All multi-byte values are big-endian (network order), as every SMC-R field is.
 * Every call checks the bounds first: on failure it returns -SMCR_E_SHORT (read) or
 * -SMCR_E_NOSPACE (write), or -SMCR_E_EXPECT for expect(), and leaves the cursor
 * exactly where it was. Nothing ever reads or writes outside [buf, buf+len). */
#ifndef SMCR_UTIL_CURSOR_H
#define SMCR_UTIL_CURSOR_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

struct rcur {
	const uint8_t *buf;
	size_t len;	/* bytes readable from buf */
	size_t off;	/* next byte to read; always <= len */
};

struct wcur {
	uint8_t *buf;
	size_t cap;	/* bytes writable at buf */
	size_t off;	/* next byte to write; always <= cap */
};

static inline struct rcur rcur_make(const void *buf, size_t len)
{
	struct rcur c = { (const uint8_t *)buf, len, 0 };
	return c;
}

static inline struct wcur wcur_make(void *buf, size_t cap)
{
	struct wcur c = { (uint8_t *)buf, cap, 0 };
	return c;
}

static inline size_t rcur_left(const struct rcur *c) { return c->len - c->off; }
static inline size_t wcur_left(const struct wcur *c) { return c->cap - c->off; }

/* A sub-cursor over the next n bytes, without moving c. Fails as get_bytes does. */
SMCR_MUST_CHECK int rcur_sub(const struct rcur *c, size_t n, struct rcur *sub);

SMCR_MUST_CHECK int rcur_get_u8(struct rcur *c, uint8_t *v);
SMCR_MUST_CHECK int rcur_get_u16(struct rcur *c, uint16_t *v);
SMCR_MUST_CHECK int rcur_get_u24(struct rcur *c, uint32_t *v);
SMCR_MUST_CHECK int rcur_get_u32(struct rcur *c, uint32_t *v);
SMCR_MUST_CHECK int rcur_get_u64(struct rcur *c, uint64_t *v);
/* Copies n bytes out (dst may be NULL only when n is 0). */
SMCR_MUST_CHECK int rcur_get_bytes(struct rcur *c, void *dst, size_t n);
SMCR_MUST_CHECK int rcur_skip(struct rcur *c, size_t n);
/* Consumes n bytes only if they equal want; otherwise -SMCR_E_EXPECT (or SHORT) and unmoved. */
SMCR_MUST_CHECK int rcur_expect(struct rcur *c, const void *want, size_t n);
/* Reads at an absolute offset without moving the cursor. */
SMCR_MUST_CHECK int rcur_peek_u8(const struct rcur *c, size_t at, uint8_t *v);

SMCR_MUST_CHECK int wcur_put_u8(struct wcur *c, uint8_t v);
SMCR_MUST_CHECK int wcur_put_u16(struct wcur *c, uint16_t v);
/* v must fit in 24 bits, else -SMCR_E_INVAL. */
SMCR_MUST_CHECK int wcur_put_u24(struct wcur *c, uint32_t v);
SMCR_MUST_CHECK int wcur_put_u32(struct wcur *c, uint32_t v);
SMCR_MUST_CHECK int wcur_put_u64(struct wcur *c, uint64_t v);
SMCR_MUST_CHECK int wcur_put_bytes(struct wcur *c, const void *src, size_t n);
SMCR_MUST_CHECK int wcur_put_zeros(struct wcur *c, size_t n);
/* Overwrites already-written bytes at an absolute offset (STYLE.md 8: reserve a length
 * field, write the body, then fill it in). The range must lie inside [0, off). */
SMCR_MUST_CHECK int wcur_patch_u16(struct wcur *c, size_t at, uint16_t v);

/* Plain big-endian loads/stores for callers that already checked the bounds. */
static inline uint16_t be16_load(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t be24_load(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}
static inline uint32_t be32_load(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t be64_load(const uint8_t *p)
{
	return (uint64_t)be32_load(p) << 32 | be32_load(p + 4);
}
static inline void be16_store(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void be24_store(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16); p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)v;
}
static inline void be32_store(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline void be64_store(uint8_t *p, uint64_t v)
{
	be32_store(p, (uint32_t)(v >> 32)); be32_store(p + 4, (uint32_t)v);
}

#endif
