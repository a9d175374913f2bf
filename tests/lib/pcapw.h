/* pcapw.h: test helper that writes classic pcap files (LINKTYPE_ETHERNET) and builds the
 * frames SMC-R travels in, so tests can hand our own encoded bytes to tshark and to
 * smcr-decode (docs/protocol/wireshark.md 6.2-6.3, docs/protocol/wire-formats.md 10):
 *   - Ethernet + IPv4 + TCP segments with correct IPv4/TCP checksums, and a small TCP flow
 *     helper (SYN / SYN-ACK / ACK handshake, then data with consistent seq/ack) so tshark
 *     reassembles the stream and runs its SMC heuristic on it;
 *   - RoCE v1 frames: Ethertype 0x8915, 40-byte GRH (next header 0x1B, hop limit 1),
 *     12-byte BTH, payload, 4-byte ICRC;
 *   - RoCE v2 frames: Ethernet + IPv4 + UDP (destination port 4791) + BTH + payload + ICRC.
 * The ICRC is the real one (CRC-32 over the masked pseudo header, IBTA Annex A16/A17), not a
 * placeholder; tshark 4.0.17 shows it (infiniband.invariant.crc) but does not check it.
 *
 * Builders write into a caller buffer and return the frame length, or 0 if it does not fit.
 * All functions are single-threaded; a struct pcapw belongs to one thread. */
#ifndef SMCR_TESTS_PCAPW_H
#define SMCR_TESTS_PCAPW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/netframe.h"

/* The frame builders live in src/util/netframe.h; the tests keep their names. */
#define pcapw_ep netframe_ep
#define pcapw_tcp netframe_tcp
#define pcapw_roce netframe_roce
#define pcapw_build_tcp4 netframe_tcp4
#define pcapw_build_roce_v1 netframe_roce_v1
#define pcapw_build_roce_v2 netframe_roce_v2
#define pcapw_crc32 netframe_crc32
#define pcapw_icrc netframe_icrc
#define pcapw_csum_add netframe_csum_add
#define pcapw_csum_fold netframe_csum_fold

#define PCAPW_LINKTYPE_ETHERNET 1
#define PCAPW_SNAPLEN 65535
#define PCAPW_FRAME_MAX 2048	/* every frame the builders make fits in this */

#define ETH_HDR_LEN 14
#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_ROCE 0x8915	/* RoCE v1 (IBTA Annex A16) */
#define IPV4_HDR_LEN 20
#define TCP_HDR_LEN 20		/* without options */
#define UDP_HDR_LEN 8
#define ROCE_GRH_LEN 40
#define ROCE_BTH_LEN 12
#define ROCE_ICRC_LEN 4
#define ROCE_V2_UDP_PORT 4791
#define ROCE_GRH_NEXT_BTH 0x1B
#define BTH_OP_RC_SEND_ONLY 0x04
#define BTH_OP_RC_RDMA_WRITE_ONLY 0x0A
#define BTH_SE 0x80		/* solicited event bit, BTH byte 1 */

#define TCPF_FIN 0x01
#define TCPF_SYN 0x02
#define TCPF_RST 0x04
#define TCPF_PSH 0x08
#define TCPF_ACK 0x10

/* An open pcap file being written. */
struct pcapw {
	FILE *f;
	uint32_t nframes;	/* records written; also used as the timestamp (1 ms apart) */
};

/* Creates path (truncating it) and writes the 24-byte global header. 0 or -1 (errno). */
int pcapw_open(struct pcapw *w, const char *path);
/* Appends one record. 0 or -1. */
int pcapw_frame(struct pcapw *w, const void *frame, size_t len);
/* Flushes and closes. 0 or -1. */
int pcapw_close(struct pcapw *w);

/* A TCP connection client <-> server, tracking the next sequence number of each side. */
struct pcapw_flow {
	struct pcapw_ep client, server;
	uint32_t cseq, sseq;	/* next sequence number each side sends */
	uint16_t ip_id;
};

/* Sets the endpoints and initial sequence numbers (isn_c, isn_s). */
void pcapw_flow_init(struct pcapw_flow *fl, const struct pcapw_ep *client,
		     const struct pcapw_ep *server, uint32_t isn_c, uint32_t isn_s);
/* Writes SYN (with syn_opts), SYN-ACK (with synack_opts) and the final ACK. 0 or -1. */
int pcapw_flow_handshake(struct pcapw *w, struct pcapw_flow *fl, const uint8_t *syn_opts,
			 size_t syn_optlen, const uint8_t *synack_opts, size_t synack_optlen);
/* Writes one PSH|ACK data segment from the client (from_server false) or the server,
 * acknowledging everything the other side sent, and advances that side's sequence number.
 * len may be up to 1400 bytes. 0 or -1. */
int pcapw_flow_send(struct pcapw *w, struct pcapw_flow *fl, bool from_server, const void *data,
		    size_t len);
/* Writes a data segment as pcapw_flow_send does, but with sequence number seq_off bytes
 * after the side's current one, without advancing it (for out-of-order tests). */
int pcapw_flow_send_at(struct pcapw *w, struct pcapw_flow *fl, bool from_server,
		       uint32_t seq_off, const void *data, size_t len);
/* Advances a side's sequence number by n (after pcapw_flow_send_at filled the hole). */
void pcapw_flow_advance(struct pcapw_flow *fl, bool from_server, uint32_t n);


/* Builds and writes in one call. 0 or -1. */
int pcapw_roce_v1(struct pcapw *w, const struct pcapw_roce *p);
int pcapw_roce_v2(struct pcapw *w, const struct pcapw_roce *p);


#endif
