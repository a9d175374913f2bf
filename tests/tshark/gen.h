/* gen.h: the messages of the tshark conformance test (test_tshark.c), encoded by OUR
 * encoders (wire/tcpopt.h, clc.h, llc.h, cdc.h) with distinct non-zero field values, and
 * the capture that carries them: CLC in TCP/IPv4 exchanges (SYN and SYN-ACK with the SMC
 * option), LLC and CDC in RoCE v1 frames and a few in RoCE v2 frames.
 *
 * gen_write() writes the capture and fills the table of frames, so the test knows which
 * message each frame carries and with which values. */
#ifndef SMCR_TSHARK_GEN_H
#define SMCR_TSHARK_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/cdc.h"
#include "wire/clc.h"
#include "wire/llc.h"

enum gen_kind {
	GEN_TCP_SYN,		/* a SYN or SYN-ACK with the SMC option */
	GEN_TCP_OTHER,		/* handshake ACK */
	GEN_CLC,
	GEN_LLC,
	GEN_CDC,
};

struct gen_frame {
	unsigned number;	/* pcap frame number, 1-based */
	enum gen_kind kind;
	bool synack;		/* GEN_TCP_SYN */
	int roce;		/* GEN_LLC/GEN_CDC: 1 or 2 */
	struct clc_msg clc;
	struct llc_msg llc;
	struct cdc_msg cdc;
	uint32_t dest_qp, bth_psn;	/* RoCE BTH */
	uint32_t icrc_wire;	/* RoCE: the 4 ICRC bytes as written, read big-endian */
	uint8_t bytes[256];	/* the encoded message (CLC/LLC/CDC) */
	size_t len;
	const char *what;	/* short description for failure messages */
};

#define GEN_MAX_FRAMES 96

/* Encodes everything and writes the capture to path. Returns the number of frames, or -1
 * (with the encoder's error printed) if an encoder refused a message. */
int gen_write(const char *path, struct gen_frame *frames, size_t max);

/* The endpoints (for expected addresses). */
extern const uint8_t gen_client_mac[6], gen_server_mac[6];
extern const uint8_t gen_client_gid[16], gen_server_gid[16];

#endif
