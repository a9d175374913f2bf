/* frame.h: walks one captured frame down to what smcr-decode needs (docs/protocol/wire-formats.md
 * 10, docs/protocol/wireshark.md 3): a TCP segment (IPv4 or IPv6) or the BTH and payload of a RoCE
 * v1 (Ethertype 0x8915, GRH) or RoCE v2 (UDP port 4791) packet.
 *
 * Link types: Ethernet (with up to two 802.1Q/802.1ad tags), Linux cooked v1 and v2, raw
 * IP, BSD loopback (NULL/LOOP). The frame is hostile: every header is bounds-checked against
 * the captured length and the IP/GRH length fields; nothing is read past the frame. IP
 * fragments are not reassembled (SMC never fragments: CLC rides in TCP segments, RoCE
 * packets are one MTU). Pure function, no state. */
#ifndef SMCR_DECODE_FRAME_H
#define SMCR_DECODE_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum frame_kind {
	FRAME_OTHER,	/* nothing for us (why: skip) */
	FRAME_TCP,
	FRAME_ROCE,
};

struct frame_info {
	enum frame_kind kind;
	const char *skip;		/* FRAME_OTHER: short reason, for --verbose */
	/* IP addresses (TCP, RoCE v2): ipver 4 or 6; addresses in network order */
	int ipver;
	uint8_t src_ip[16], dst_ip[16];
	uint16_t sport, dport;
	/* TCP */
	uint32_t seq, ack;
	uint8_t tcp_flags;
	const uint8_t *tcp_opts;
	size_t tcp_optlen;
	/* RoCE: version 1 (GRH GIDs) or 2 (IP/UDP) */
	int roce_ver;
	uint8_t sgid[16], dgid[16];	/* v1 */
	uint8_t opcode;
	bool se;
	uint32_t dest_qp, psn;
	/* TCP payload or RoCE payload (after BTH, before pad bytes and ICRC) */
	const uint8_t *payload;
	size_t paylen;
};

#define TCP_FLAG_FIN 0x01
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_RST 0x04
#define TCP_FLAG_ACK 0x10

#define ROCE_V2_PORT 4791
#define ROCE_ETHERTYPE 0x8915

/* linktype is the pcap DLT_ value (pcap_datalink). Fills fi; returns fi->kind. */
enum frame_kind frame_parse(int linktype, const uint8_t *p, size_t len, struct frame_info *fi);

#endif
