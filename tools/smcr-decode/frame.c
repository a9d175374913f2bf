/* frame.c: link / IP / TCP / UDP / GRH / BTH walking of one captured frame (frame.h).
 * Every header is read through the bounds-checked cursor (util/cursor.h). */
#include "frame.h"

#include <pcap/dlt.h>
#include <string.h>

#include "util/cursor.h"

#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_IPV6 0x86DD
#define ETHERTYPE_VLAN 0x8100
#define ETHERTYPE_QINQ 0x88A8
#define ETHERTYPE_QINQ_OLD 0x9100
#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17
#define GRH_LEN 40
#define GRH_NEXT_BTH 0x1B
#define BTH_LEN 12
#define ICRC_LEN 4

static enum frame_kind skip(struct frame_info *fi, const char *why)
{
	fi->kind = FRAME_OTHER;
	fi->skip = why;
	return FRAME_OTHER;
}

/* BTH (IBTA 9.2) and the payload up to the pad bytes and the ICRC. */
static enum frame_kind bth(struct frame_info *fi, struct rcur *c)
{
	uint8_t b[BTH_LEN];
	if (rcur_get_bytes(c, b, sizeof(b)))
		return skip(fi, "short BTH");
	fi->opcode = b[0];
	fi->se = (b[1] & 0x80) != 0;
	unsigned pad = (b[1] >> 4) & 3;
	fi->dest_qp = be24_load(b + 5);
	fi->psn = be24_load(b + 9);
	size_t left = rcur_left(c);
	if (left < ICRC_LEN + pad)
		return skip(fi, "no room for ICRC");
	fi->payload = c->buf + c->off;
	fi->paylen = left - ICRC_LEN - pad;
	fi->kind = FRAME_ROCE;
	return FRAME_ROCE;
}

static enum frame_kind roce_v1(struct frame_info *fi, struct rcur *c)
{
	uint8_t g[GRH_LEN];
	if (rcur_get_bytes(c, g, sizeof(g)))
		return skip(fi, "short GRH");
	if ((g[0] >> 4) != 6 || g[6] != GRH_NEXT_BTH)
		return skip(fi, "GRH is not IPv6-format with next header BTH");
	size_t plen = be16_load(g + 4);
	struct rcur body;
	if (rcur_sub(c, plen, &body))
		return skip(fi, "GRH payload length beyond the frame");
	fi->roce_ver = 1;
	memcpy(fi->sgid, g + 8, 16);
	memcpy(fi->dgid, g + 24, 16);
	return bth(fi, &body);
}

static enum frame_kind l4(struct frame_info *fi, uint8_t proto, struct rcur *c)
{
	if (proto == IPPROTO_TCP_) {
		uint8_t t[20];
		if (rcur_get_bytes(c, t, sizeof(t)))
			return skip(fi, "short TCP header");
		size_t hl = (size_t)(t[12] >> 4) * 4;
		if (hl < 20 || rcur_left(c) < hl - 20)
			return skip(fi, "bad TCP data offset");
		fi->sport = be16_load(t);
		fi->dport = be16_load(t + 2);
		fi->seq = be32_load(t + 4);
		fi->ack = be32_load(t + 8);
		fi->tcp_flags = t[13];
		fi->tcp_opts = c->buf + c->off;
		fi->tcp_optlen = hl - 20;
		if (rcur_skip(c, hl - 20))
			return skip(fi, "bad TCP data offset");
		fi->payload = c->buf + c->off;
		fi->paylen = rcur_left(c);
		fi->kind = FRAME_TCP;
		return FRAME_TCP;
	}
	if (proto == IPPROTO_UDP_) {
		uint8_t u[8];
		if (rcur_get_bytes(c, u, sizeof(u)))
			return skip(fi, "short UDP header");
		fi->sport = be16_load(u);
		fi->dport = be16_load(u + 2);
		size_t ulen = be16_load(u + 4);
		if (fi->dport != ROCE_V2_PORT)
			return skip(fi, "UDP, not RoCE v2");
		struct rcur body;
		if (ulen < 8 || rcur_sub(c, ulen - 8, &body))
			return skip(fi, "bad UDP length");
		fi->roce_ver = 2;
		return bth(fi, &body);
	}
	return skip(fi, "not TCP or UDP");
}

static enum frame_kind ipv4(struct frame_info *fi, struct rcur *c)
{
	uint8_t h[20];
	if (rcur_get_bytes(c, h, sizeof(h)))
		return skip(fi, "short IPv4 header");
	size_t ihl = (size_t)(h[0] & 0x0f) * 4;
	size_t tot = be16_load(h + 2);
	if ((h[0] >> 4) != 4 || ihl < 20 || tot < ihl)
		return skip(fi, "bad IPv4 header");
	/* The datagram must be whole: a snap-length-truncated segment would put wrong bytes
	 * in the reassembled stream. Bytes after tot (Ethernet padding) are not ours. */
	struct rcur dg;
	if (rcur_sub(c, tot - 20, &dg))
		return skip(fi, "IPv4 datagram truncated");
	if (rcur_skip(&dg, ihl - 20))
		return skip(fi, "bad IPv4 header length");
	if ((be16_load(h + 6) & 0x3fff) != 0)
		return skip(fi, "IPv4 fragment");
	fi->ipver = 4;
	memset(fi->src_ip, 0, sizeof(fi->src_ip));
	memset(fi->dst_ip, 0, sizeof(fi->dst_ip));
	memcpy(fi->src_ip, h + 12, 4);
	memcpy(fi->dst_ip, h + 16, 4);
	return l4(fi, h[9], &dg);
}

static enum frame_kind ipv6(struct frame_info *fi, struct rcur *c)
{
	uint8_t h[40];
	if (rcur_get_bytes(c, h, sizeof(h)))
		return skip(fi, "short IPv6 header");
	if ((h[0] >> 4) != 6)
		return skip(fi, "bad IPv6 version");
	struct rcur dg;
	if (rcur_sub(c, be16_load(h + 4), &dg))
		return skip(fi, "IPv6 datagram truncated");
	fi->ipver = 6;
	memcpy(fi->src_ip, h + 8, 16);
	memcpy(fi->dst_ip, h + 24, 16);
	uint8_t nh = h[6];
	/* Extension headers: hop-by-hop 0, routing 43, destination options 60, AH 51. */
	for (int i = 0; i < 8; i++) {
		uint8_t e[2];
		size_t elen;
		if (nh == 44)
			return skip(fi, "IPv6 fragment");
		if (nh != 0 && nh != 43 && nh != 60 && nh != 51)
			return l4(fi, nh, &dg);
		if (rcur_peek_u8(&dg, dg.off, &e[0]) || rcur_peek_u8(&dg, dg.off + 1, &e[1]))
			return skip(fi, "short IPv6 extension header");
		elen = nh == 51 ? ((size_t)e[1] + 2) * 4 : ((size_t)e[1] + 1) * 8;
		if (rcur_skip(&dg, elen))
			return skip(fi, "IPv6 extension header beyond the datagram");
		nh = e[0];
	}
	return skip(fi, "too many IPv6 extension headers");
}

static enum frame_kind ethertype(struct frame_info *fi, uint16_t type, struct rcur *c)
{
	switch (type) {
	case ETHERTYPE_IPV4: return ipv4(fi, c);
	case ETHERTYPE_IPV6: return ipv6(fi, c);
	case ROCE_ETHERTYPE: return roce_v1(fi, c);
	default: return skip(fi, "ethertype not IP or RoCE");
	}
}

static enum frame_kind by_version(struct frame_info *fi, struct rcur *c)
{
	uint8_t v;
	if (rcur_peek_u8(c, c->off, &v))
		return skip(fi, "empty packet");
	if (v >> 4 == 4)
		return ipv4(fi, c);
	if (v >> 4 == 6)
		return ipv6(fi, c);
	return skip(fi, "not IP");
}

enum frame_kind frame_parse(int linktype, const uint8_t *p, size_t len, struct frame_info *fi)
{
	memset(fi, 0, sizeof(*fi));
	struct rcur c = rcur_make(p, len);
	uint16_t type;
	switch (linktype) {
	case DLT_EN10MB:
		if (rcur_skip(&c, 12) || rcur_get_u16(&c, &type))
			return skip(fi, "short Ethernet header");
		/* Up to two VLAN tags (802.1Q, 802.1ad): TCI, then the next type. */
		for (int i = 0; i < 2 && (type == ETHERTYPE_VLAN || type == ETHERTYPE_QINQ ||
					  type == ETHERTYPE_QINQ_OLD); i++)
			if (rcur_skip(&c, 2) || rcur_get_u16(&c, &type))
				return skip(fi, "short VLAN tag");
		return ethertype(fi, type, &c);
	case DLT_LINUX_SLL:
		if (rcur_skip(&c, 14) || rcur_get_u16(&c, &type))
			return skip(fi, "short Linux cooked header");
		return ethertype(fi, type, &c);
#ifdef DLT_LINUX_SLL2
	case DLT_LINUX_SLL2:
		if (rcur_get_u16(&c, &type) || rcur_skip(&c, 18))
			return skip(fi, "short Linux cooked v2 header");
		return ethertype(fi, type, &c);
#endif
	case DLT_NULL:
	case DLT_LOOP:
		if (rcur_skip(&c, 4))
			return skip(fi, "short loopback header");
		return by_version(fi, &c);
	case DLT_RAW:
#ifdef DLT_IPV4
	case DLT_IPV4:
	case DLT_IPV6:
#endif
		return by_version(fi, &c);
	default:
		return skip(fi, "link type not supported");
	}
}
