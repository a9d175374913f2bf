/* types.c: cursor readers/writers for the shared field types of types.h. */
#include "wire/types.h"

int wire_get_gid(struct rcur *c, struct wire_gid *g)
{
	return rcur_get_bytes(c, g->b, sizeof(g->b));
}

int wire_put_gid(struct wcur *c, const struct wire_gid *g)
{
	return wcur_put_bytes(c, g->b, sizeof(g->b));
}

int wire_get_mac(struct rcur *c, struct wire_mac *m)
{
	return rcur_get_bytes(c, m->b, sizeof(m->b));
}

int wire_put_mac(struct wcur *c, const struct wire_mac *m)
{
	return wcur_put_bytes(c, m->b, sizeof(m->b));
}

int wire_get_peer_id(struct rcur *c, struct wire_peer_id *p)
{
	struct rcur sub;
	int rc = rcur_sub(c, WIRE_PEER_ID_LEN, &sub);
	if (rc)
		return rc;
	/* The sub-cursor has exactly 8 bytes: these reads cannot fail. */
	if (rcur_get_u16(&sub, &p->instance) || wire_get_mac(&sub, &p->mac))
		return -SMCR_E_INTERNAL;
	return rcur_skip(c, WIRE_PEER_ID_LEN);
}

int wire_put_peer_id(struct wcur *c, const struct wire_peer_id *p)
{
	if (wcur_left(c) < WIRE_PEER_ID_LEN)
		return -SMCR_E_NOSPACE;
	if (wcur_put_u16(c, p->instance) || wire_put_mac(c, &p->mac))
		return -SMCR_E_INTERNAL;
	return 0;
}

uint64_t wire_peer_id_u64(const struct wire_peer_id *p)
{
	uint64_t v = p->instance;
	for (int i = 0; i < WIRE_MAC_LEN; i++)
		v = v << 8 | p->mac.b[i];
	return v;
}
