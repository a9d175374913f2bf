/* netframe.c: Ethernet/IPv4/TCP and RoCE v1/v2 frame builders with their checksums and
 * ICRC (netframe.h). Moved here from the tests' pcap writer so that the library's trace
 * (SMCR_TRACE, sock/trace.c) and the tests build frames with the same code. */
#include "util/netframe.h"

#include <string.h>

/* ---- checksums ------------------------------------------------------------------------ */

uint32_t netframe_csum_add(uint32_t sum, const void *data, size_t len)
{
	const uint8_t *p = data;
	/* Callers add whole headers and an even pseudo header; an odd tail is padded with 0. */
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

uint16_t netframe_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

uint32_t netframe_crc32(uint32_t crc, const void *data, size_t len)
{
	/* Bitwise reflected CRC-32, polynomial 0xEDB88320: small and fast enough for tests. */
	const uint8_t *p = data;
	crc = ~crc;
	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
	}
	return ~crc;
}

/* The ICRC covers the packet from the GRH (v1) or IP header (v2) to the end of the payload,
 * preceded by 8 bytes of 0xFF standing for the (absent) IB local route header, with the
 * fields routers may change replaced by ones: v1 GRH traffic class, flow label and hop
 * limit; v2 IPv4 TOS, TTL and header checksum, UDP checksum; in both the BTH reserved byte
 * 4 ("resv8a"). (IBTA Annex A16/A17; the same masking Linux rxe uses.) */
uint32_t netframe_icrc(const uint8_t *grh_or_ip, size_t len, bool v2)
{
	static const uint8_t lrh[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t hdr[NF_IPV4_HDR_LEN + NF_UDP_HDR_LEN + NF_ROCE_BTH_LEN];	/* 40 bytes, = GRH size */
	uint8_t grh[NF_ROCE_GRH_LEN + NF_ROCE_BTH_LEN];
	uint32_t crc = netframe_crc32(0, lrh, sizeof(lrh));
	if (v2) {
		if (len < sizeof(hdr))
			return 0;
		memcpy(hdr, grh_or_ip, sizeof(hdr));
		hdr[1] = 0xff;				/* TOS */
		hdr[8] = 0xff;				/* TTL */
		hdr[10] = hdr[11] = 0xff;		/* header checksum */
		hdr[NF_IPV4_HDR_LEN + 6] = hdr[NF_IPV4_HDR_LEN + 7] = 0xff;	/* UDP checksum */
		hdr[NF_IPV4_HDR_LEN + NF_UDP_HDR_LEN + 4] = 0xff;		/* BTH resv8a */
		crc = netframe_crc32(crc, hdr, sizeof(hdr));
		return netframe_crc32(crc, grh_or_ip + sizeof(hdr), len - sizeof(hdr));
	}
	if (len < sizeof(grh))
		return 0;
	memcpy(grh, grh_or_ip, sizeof(grh));
	grh[0] |= 0x0f;					/* traffic class (high nibble) */
	grh[1] = grh[2] = grh[3] = 0xff;		/* traffic class (low) + flow label */
	grh[7] = 0xff;					/* hop limit */
	grh[NF_ROCE_GRH_LEN + 4] = 0xff;			/* BTH resv8a */
	crc = netframe_crc32(crc, grh, sizeof(grh));
	return netframe_crc32(crc, grh_or_ip + sizeof(grh), len - sizeof(grh));
}

/* ---- builders ------------------------------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16); p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)v;
}
static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static size_t eth(uint8_t *out, const struct netframe_ep *src, const struct netframe_ep *dst,
		  uint16_t type)
{
	memcpy(out, dst->mac, 6);
	memcpy(out + 6, src->mac, 6);
	put16(out + 12, type);
	return NF_ETH_HDR_LEN;
}

/* IPv4 header without options, checksum filled. */
static void ipv4(uint8_t *ip, const struct netframe_ep *src, const struct netframe_ep *dst,
		 uint8_t proto, size_t total, uint16_t id, uint8_t ttl)
{
	memset(ip, 0, NF_IPV4_HDR_LEN);
	ip[0] = 0x45;
	put16(ip + 2, (uint16_t)total);
	put16(ip + 4, id);
	put16(ip + 6, 0x4000);			/* DF */
	ip[8] = ttl;
	ip[9] = proto;
	put32(ip + 12, src->ip4);
	put32(ip + 16, dst->ip4);
	put16(ip + 10, netframe_csum_fold(netframe_csum_add(0, ip, NF_IPV4_HDR_LEN)));
}

size_t netframe_tcp4(uint8_t *out, size_t cap, const struct netframe_tcp *s)
{
	size_t optpad = (s->optlen + 3) & ~(size_t)3;
	if (optpad > 40)
		return 0;
	size_t tcplen = NF_TCP_HDR_LEN + optpad + s->len;
	size_t total = NF_ETH_HDR_LEN + NF_IPV4_HDR_LEN + tcplen;
	if (total > cap || NF_IPV4_HDR_LEN + tcplen > 0xffff)
		return 0;
	size_t off = eth(out, s->src, s->dst, NF_ETHERTYPE_IPV4);
	ipv4(out + off, s->src, s->dst, 6, NF_IPV4_HDR_LEN + tcplen, s->ip_id, 64);
	uint8_t *t = out + off + NF_IPV4_HDR_LEN;
	memset(t, 0, NF_TCP_HDR_LEN + optpad);
	put16(t, s->src->port);
	put16(t + 2, s->dst->port);
	put32(t + 4, s->seq);
	put32(t + 8, s->ack);
	t[12] = (uint8_t)(((NF_TCP_HDR_LEN + optpad) / 4) << 4);
	t[13] = s->flags;
	put16(t + 14, s->window);
	if (s->optlen)
		memcpy(t + NF_TCP_HDR_LEN, s->opts, s->optlen);
	if (s->len)
		memcpy(t + NF_TCP_HDR_LEN + optpad, s->data, s->len);
	/* Checksum over the pseudo header (src, dst, 0, proto, TCP length) and the segment. */
	uint8_t ph[12];
	put32(ph, s->src->ip4);
	put32(ph + 4, s->dst->ip4);
	ph[8] = 0;
	ph[9] = 6;
	put16(ph + 10, (uint16_t)tcplen);
	uint32_t sum = netframe_csum_add(0, ph, sizeof(ph));
	sum = netframe_csum_add(sum, t, tcplen);
	put16(t + 16, netframe_csum_fold(sum));
	return total;
}

/* BTH (IBTA 9.2): opcode | SE M pad(2) tver(4) | P_Key | resv8a | dest QP | A resv7 | PSN. */
static void bth(uint8_t *b, const struct netframe_roce *p)
{
	b[0] = p->opcode;
	b[1] = p->se ? NF_BTH_SE : 0;
	put16(b + 2, 0xffff);			/* default P_Key */
	b[4] = 0;
	put24(b + 5, p->dqpn & 0xffffff);
	b[8] = 0x80;				/* AckReq */
	put24(b + 9, p->psn & 0xffffff);
}

static void put_icrc(uint8_t *p, uint32_t icrc)
{
	/* Sent least significant byte first, like the Ethernet FCS. */
	p[0] = (uint8_t)icrc; p[1] = (uint8_t)(icrc >> 8);
	p[2] = (uint8_t)(icrc >> 16); p[3] = (uint8_t)(icrc >> 24);
}

/* RETH (IBTA 9.3.3, RDMA WRITE First/Only): virtual address, R_Key, DMA length. */
static size_t reth(uint8_t *b, const struct netframe_roce *p)
{
	if (!p->reth)
		return 0;
	put32(b, (uint32_t)(p->va >> 32));
	put32(b + 4, (uint32_t)p->va);
	put32(b + 8, p->rkey);
	put32(b + 12, p->dmalen);
	return NF_ROCE_RETH_LEN;
}

size_t netframe_roce_v1(uint8_t *out, size_t cap, const struct netframe_roce *p)
{
	size_t ext = p->reth ? NF_ROCE_RETH_LEN : 0;
	size_t body = NF_ROCE_BTH_LEN + ext + p->len + NF_ROCE_ICRC_LEN;
	size_t total = NF_ETH_HDR_LEN + NF_ROCE_GRH_LEN + body;
	if (total > cap || body > 0xffff)
		return 0;
	size_t off = eth(out, p->src, p->dst, NF_ETHERTYPE_ROCE);
	uint8_t *g = out + off;
	put32(g, 0x60000000u);			/* IP version 6, traffic class 0, flow label 0 */
	put16(g + 4, (uint16_t)body);		/* payload length: BTH + payload + ICRC */
	g[6] = NF_ROCE_GRH_NEXT_BTH;
	g[7] = 1;				/* hop limit 1: RoCE v1 is not routed */
	memcpy(g + 8, p->src->gid, 16);
	memcpy(g + 24, p->dst->gid, 16);
	bth(g + NF_ROCE_GRH_LEN, p);
	reth(g + NF_ROCE_GRH_LEN + NF_ROCE_BTH_LEN, p);
	if (p->len)
		memcpy(g + NF_ROCE_GRH_LEN + NF_ROCE_BTH_LEN + ext, p->payload, p->len);
	size_t covered = NF_ROCE_GRH_LEN + NF_ROCE_BTH_LEN + ext + p->len;
	put_icrc(g + covered, netframe_icrc(g, covered, false));
	return total;
}

size_t netframe_roce_v2(uint8_t *out, size_t cap, const struct netframe_roce *p)
{
	size_t ext = p->reth ? NF_ROCE_RETH_LEN : 0;
	size_t udplen = NF_UDP_HDR_LEN + NF_ROCE_BTH_LEN + ext + p->len + NF_ROCE_ICRC_LEN;
	size_t total = NF_ETH_HDR_LEN + NF_IPV4_HDR_LEN + udplen;
	if (total > cap || NF_IPV4_HDR_LEN + udplen > 0xffff)
		return 0;
	size_t off = eth(out, p->src, p->dst, NF_ETHERTYPE_IPV4);
	uint8_t *ip = out + off;
	ipv4(ip, p->src, p->dst, 17, NF_IPV4_HDR_LEN + udplen, 0, 64);
	uint8_t *u = ip + NF_IPV4_HDR_LEN;
	put16(u, p->src->port);
	put16(u + 2, NF_ROCE_V2_UDP_PORT);
	put16(u + 4, (uint16_t)udplen);
	put16(u + 6, 0);			/* no UDP checksum: allowed over IPv4 */
	bth(u + NF_UDP_HDR_LEN, p);
	reth(u + NF_UDP_HDR_LEN + NF_ROCE_BTH_LEN, p);
	if (p->len)
		memcpy(u + NF_UDP_HDR_LEN + NF_ROCE_BTH_LEN + ext, p->payload, p->len);
	size_t covered = NF_IPV4_HDR_LEN + NF_UDP_HDR_LEN + NF_ROCE_BTH_LEN + ext + p->len;
	put_icrc(ip + covered, netframe_icrc(ip, covered, true));
	return total;
}
