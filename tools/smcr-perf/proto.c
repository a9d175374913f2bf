/* proto.c: encoders and hostile-input decoders of smcr-perf's header and control frames
 * (proto.h has the layout). */
#include "proto.h"

#include <string.h>

#include "perf.h"
#include "util/cursor.h"

/* Encoders write into fixed-size arrays of exactly the message size, so the cursor calls
 * cannot fail; the results are still checked (warn_unused_result) and a failure would
 * leave zeros, never an overrun. */
#define PUT(call)                                                                                  \
	do {                                                                                       \
		if ((call) < 0)                                                                    \
			return;                                                                    \
	} while (0)

static void hdr_put(const struct proto_hdr *h, struct wcur *w)
{
	PUT(wcur_put_bytes(w, PROTO_MAGIC, 4));
	PUT(wcur_put_u8(w, PROTO_VERSION));
	PUT(wcur_put_u8(w, (uint8_t)h->kind));
	PUT(wcur_put_u16(w, 0));
	PUT(wcur_put_u32(w, h->size));
	PUT(wcur_put_u64(w, h->session));
	PUT(wcur_put_zeros(w, 12));
}

void proto_hdr_encode(const struct proto_hdr *h, uint8_t out[PROTO_HDR_LEN])
{
	struct wcur w = wcur_make(out, PROTO_HDR_LEN);
	memset(out, 0, PROTO_HDR_LEN);
	hdr_put(h, &w);
}

int proto_hdr_decode(const uint8_t *buf, size_t len, struct proto_hdr *h)
{
	struct rcur c = rcur_make(buf, len);
	uint8_t ver, kind;
	uint16_t flags;
	uint32_t size;
	uint64_t session;
	uint8_t rsvd[12];
	static const uint8_t zero[12];

	if (len < PROTO_HDR_LEN)
		return -PROTO_E_SHORT;
	if (rcur_expect(&c, PROTO_MAGIC, 4) < 0)
		return memcmp(buf, PROTO_CLC_EYECATCHER, 4) == 0 ? -PROTO_E_CLC : -PROTO_E_MAGIC;
	if (rcur_get_u8(&c, &ver) < 0 || rcur_get_u8(&c, &kind) < 0 ||
	    rcur_get_u16(&c, &flags) < 0 || rcur_get_u32(&c, &size) < 0 ||
	    rcur_get_u64(&c, &session) < 0 || rcur_get_bytes(&c, rsvd, sizeof(rsvd)) < 0)
		return -PROTO_E_SHORT;
	if (ver != PROTO_VERSION)
		return -PROTO_E_VERSION;
	if (kind < PROTO_KIND_CTRL || kind > PROTO_KIND_CONNS)
		return -PROTO_E_KIND;
	if (flags != 0 || memcmp(rsvd, zero, sizeof(zero)) != 0)
		return -PROTO_E_FLAGS;
	if (size == 0 || size > PERF_SIZE_MAX)
		return -PROTO_E_SIZE;
	h->kind = (enum proto_kind)kind;
	h->size = size;
	h->session = session;
	return 0;
}

void proto_req_encode(const struct proto_req *r, uint8_t out[PROTO_REQ_LEN])
{
	struct wcur w = wcur_make(out, PROTO_REQ_LEN);
	memset(out, 0, PROTO_REQ_LEN);
	PUT(wcur_put_u32(&w, (uint32_t)r->op));
	PUT(wcur_put_u32(&w, r->arg));
}

int proto_req_decode(const uint8_t *buf, size_t len, struct proto_req *r)
{
	struct rcur c = rcur_make(buf, len);
	uint32_t op, arg;
	if (rcur_get_u32(&c, &op) < 0 || rcur_get_u32(&c, &arg) < 0)
		return -PROTO_E_SHORT;
	if (op < PROTO_OP_BEGIN || op > PROTO_OP_MEM)
		return -PROTO_E_OP;
	r->op = (enum proto_op)op;
	r->arg = arg;
	return 0;
}

void proto_reply_encode(const struct proto_reply *r, uint8_t out[PROTO_REPLY_LEN])
{
	struct wcur w = wcur_make(out, PROTO_REPLY_LEN);
	memset(out, 0, PROTO_REPLY_LEN);
	PUT(wcur_put_u32(&w, r->status));
	PUT(wcur_put_u32(&w, r->transport));
	PUT(wcur_put_u64(&w, r->cpu_us));
	PUT(wcur_put_u64(&w, r->rss_kib));
	PUT(wcur_put_u64(&w, r->rss_base_kib));
	PUT(wcur_put_u64(&w, r->bytes));
	PUT(wcur_put_u32(&w, r->conns));
	PUT(wcur_put_u32(&w, r->conns_smcr));
	PUT(wcur_put_u32(&w, r->conns_fallback));
	PUT(wcur_put_u32(&w, r->open));
	PUT(wcur_put_zeros(&w, 8));
}

int proto_reply_decode(const uint8_t *buf, size_t len, struct proto_reply *r)
{
	struct rcur c = rcur_make(buf, len);
	struct proto_reply x;
	if (len < PROTO_REPLY_LEN)
		return -PROTO_E_SHORT;
	if (rcur_get_u32(&c, &x.status) < 0 || rcur_get_u32(&c, &x.transport) < 0 ||
	    rcur_get_u64(&c, &x.cpu_us) < 0 || rcur_get_u64(&c, &x.rss_kib) < 0 ||
	    rcur_get_u64(&c, &x.rss_base_kib) < 0 || rcur_get_u64(&c, &x.bytes) < 0 ||
	    rcur_get_u32(&c, &x.conns) < 0 || rcur_get_u32(&c, &x.conns_smcr) < 0 ||
	    rcur_get_u32(&c, &x.conns_fallback) < 0 || rcur_get_u32(&c, &x.open) < 0)
		return -PROTO_E_SHORT;
	if (x.status > PROTO_ST_BAD)
		return -PROTO_E_OP;
	*r = x;
	return 0;
}

const char *proto_err_name(int err)
{
	switch (-err) {
	case PROTO_E_SHORT:
		return "short message";
	case PROTO_E_MAGIC:
		return "bad magic (not an smcr-perf client)";
	case PROTO_E_VERSION:
		return "unknown version";
	case PROTO_E_KIND:
		return "unknown connection kind";
	case PROTO_E_FLAGS:
		return "flags or reserved bytes set";
	case PROTO_E_SIZE:
		return "size out of range";
	case PROTO_E_OP:
		return "unknown control op or status";
	case PROTO_E_CLC:
		return "an SMC-R client (its first bytes are a CLC Proposal) reached this plain "
		       "TCP server (--transport tcp)";
	default:
		return "no error";
	}
}
