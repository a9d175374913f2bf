/* netframe.h: builds the frames SMC-R travels in, byte-exact, so that captures of our own
 * messages decode in Wireshark/tshark and smcr-decode (docs/parts/decode.md):
 *   - Ethernet + IPv4 + TCP segments with correct IPv4/TCP checksums (CLC);
 *   - RoCE v1 frames: Ethertype 0x8915, 40-byte GRH (next header 0x1B, hop limit 1),
 *     12-byte BTH, optional RETH (RDMA WRITE), payload, 4-byte ICRC (LLC, CDC, WRITEs);
 *   - RoCE v2 frames: Ethernet + IPv4 + UDP (destination port 4791) + BTH + ... + ICRC.
 * The ICRC is the real one (CRC-32 over the masked pseudo header, IBTA Annex A16/A17).
 * Builders write into a caller buffer and return the frame length, or 0 if it does not fit.
 * Pure functions: any thread. */
#ifndef SMCR_UTIL_NETFRAME_H
#define SMCR_UTIL_NETFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NF_ETH_HDR_LEN 14
#define NF_ETHERTYPE_IPV4 0x0800
#define NF_ETHERTYPE_ROCE 0x8915 /* RoCE v1 (IBTA Annex A16) */
#define NF_IPV4_HDR_LEN 20
#define NF_TCP_HDR_LEN 20 /* without options */
#define NF_UDP_HDR_LEN 8
#define NF_ROCE_GRH_LEN 40
#define NF_ROCE_BTH_LEN 12
#define NF_ROCE_RETH_LEN 16
#define NF_ROCE_ICRC_LEN 4
#define NF_ROCE_V2_UDP_PORT 4791
#define NF_ROCE_GRH_NEXT_BTH 0x1B
#define NF_BTH_OP_RC_SEND_ONLY 0x04
#define NF_BTH_OP_RC_RDMA_WRITE_ONLY 0x0A
#define NF_BTH_SE 0x80 /* solicited event bit, BTH byte 1 */

/* One side of a TCP/IPv4 or RoCE conversation. */
struct netframe_ep {
	uint8_t mac[6];
	uint32_t ip4;	/* host order, e.g. 0x0a000001 = 10.0.0.1 */
	uint16_t port;	/* TCP port (TCP) or UDP source port (RoCE v2) */
	uint8_t gid[16]; /* RoCE v1 GRH GID */
};

/* One TCP/IPv4 segment. */
struct netframe_tcp {
	const struct netframe_ep *src, *dst;
	uint32_t seq, ack;
	uint8_t flags; /* TCP flag bits (0x02 SYN, 0x10 ACK, ...) */
	uint16_t window;
	uint16_t ip_id;
	const uint8_t *opts; /* raw TCP option bytes, zero-padded (EOL) to a multiple of 4 */
	size_t optlen;	     /* at most 40 */
	const void *data;
	size_t len;
};
size_t netframe_tcp4(uint8_t *out, size_t cap, const struct netframe_tcp *s);

/* One RoCE packet (BTH [+ RETH] + payload). */
struct netframe_roce {
	const struct netframe_ep *src, *dst;
	uint8_t opcode; /* NF_BTH_OP_* */
	bool se;	/* solicited event */
	uint32_t dqpn;	/* 24 bits */
	uint32_t psn;	/* 24 bits */
	const void *payload;
	size_t len; /* multiple of 4 for SEND (no pad bytes are added) */
	bool reth;  /* add a RETH: va, rkey, dmalen (RDMA WRITE Only) */
	uint64_t va;
	uint32_t rkey, dmalen;
};
/* RoCE v1: Ethernet (0x8915) + GRH + BTH + payload + ICRC. */
size_t netframe_roce_v1(uint8_t *out, size_t cap, const struct netframe_roce *p);
/* RoCE v2: Ethernet + IPv4 + UDP(src->port -> 4791) + BTH + payload + ICRC. */
size_t netframe_roce_v2(uint8_t *out, size_t cap, const struct netframe_roce *p);

/* CRC-32 (IEEE 802.3, reflected, as Ethernet's FCS) continued from crc (start with 0). */
uint32_t netframe_crc32(uint32_t crc, const void *data, size_t len);
/* ICRC of a RoCE v1 (grh_or_ip points at the GRH) or RoCE v2 (at the IPv4 header) packet
 * whose headers, BTH and payload are the `len` bytes at grh_or_ip (ICRC excluded).
 * Returned as the value whose little-endian bytes go on the wire (as the Ethernet FCS). */
uint32_t netframe_icrc(const uint8_t *grh_or_ip, size_t len, bool v2);
/* The Internet checksum (RFC 1071) of data, continued from sum (start with 0);
 * netframe_csum_fold gives the final 16-bit value to store. */
uint32_t netframe_csum_add(uint32_t sum, const void *data, size_t len);
uint16_t netframe_csum_fold(uint32_t sum);

#endif
