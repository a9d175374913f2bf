/* dec.h: smcr-decode's message layer: finds SMC messages in bytes, decodes each with the
 * wire codecs (wire/tcpopt.h, clc.h, llc.h, cdc.h) and prints it (print.c), or reports why
 * it is malformed, then goes on with the next message.
 *
 * Detection (docs/parts/decode.md):
 *   CLC        the eyecatcher E2 D4 C3 D9 / E2 D4 C3 C4; length from bytes 5-6
 *              (docs/protocol/wire-formats.md 2.1), so CLC messages back to back are taken one by
 *              one;
 *   LLC / CDC  type byte 0x01-0x09 or 0xFE with length byte 44 (0x2C): 44 bytes
 *              (docs/protocol/wire-formats.md 6.1, 7); a known type with another length byte is
 *              reported malformed (the codec names the field) and 44 bytes are skipped;
 *   TCP option FE 06 E2 D4 C3 D9, or 01 01 FE 06 E2 D4 C3 D9 as Linux aligns it (1).
 * After a malformed message whose extent is unknown, decoding resumes at the next byte where
 * a plausible message starts (a CLC header clc_peek_header accepts, or an LLC/CDC type
 * followed by 0x2C).
 *
 * One struct dec per run, single-threaded. */
#ifndef SMCR_DECODE_DEC_H
#define SMCR_DECODE_DEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "out.h"

struct dec {
	struct out *out;
	FILE *err;		/* one line per malformed message */
	const char *prog;	/* prefix of error lines */
	unsigned decoded;	/* messages printed */
	unsigned malformed;	/* messages reported on err */
};

/* Where a message came from, printed before its fields. */
enum dec_transport {
	DEC_HEX,	/* hex or binary input: offset = byte offset in the input */
	DEC_TCP,	/* a reassembled TCP stream: offset = byte offset in that direction */
	DEC_ROCE_V1,	/* RoCE v1 SEND payload */
	DEC_ROCE_V2,	/* RoCE v2 SEND payload */
};

struct dec_where {
	enum dec_transport transport;
	unsigned frame;		/* pcap record number, 1-based; 0 for hex input */
	uint64_t offset;
	const char *src, *dst;	/* "10.0.0.1:40000", "fe80::1" (pcap only) */
	bool syn;		/* DEC_TCP: a SYN/SYN-ACK (no stream offset) */
	uint32_t dest_qp;	/* BTH (RoCE only) */
	uint32_t bth_psn;
};

void dec_init(struct dec *d, struct out *out, FILE *err, const char *prog);

/* Decodes every message in buf back to back (hex or binary input, offsets from
 * w->offset). */
void dec_buffer(struct dec *d, const uint8_t *buf, size_t len, struct dec_where *w);

/* Why dec_clc_stream stopped. */
enum dec_stop {
	DEC_STOP_END,		/* consumed everything given */
	DEC_STOP_PARTIAL,	/* a message continues beyond the bytes given: call again */
	DEC_STOP_NOT_CLC,	/* the bytes at the stop are no CLC message: the CLC phase of
				 * this stream is over (application data, or garbage) */
};

/* Decodes the complete CLC messages at the start of buf (a TCP stream direction from its
 * first byte, w->offset = stream offset of buf[0]). Returns the bytes consumed. A malformed
 * message whose length field is usable is reported and skipped; one whose header is not
 * usable ends the CLC phase (DEC_STOP_NOT_CLC). With final, an incomplete message at the
 * end is reported as truncated (the stream ended). */
size_t dec_clc_stream(struct dec *d, const uint8_t *buf, size_t len, bool final,
		      struct dec_where *w, enum dec_stop *stop);

/* Decodes the payload of one RDMA SEND (an LLC or CDC message). Payloads that are not
 * 44-byte SMC-R v1 messages nor look like one are ignored (returns false). */
bool dec_send_payload(struct dec *d, const uint8_t *buf, size_t len, struct dec_where *w);

/* A SYN or SYN-ACK carrying the SMC TCP option (docs/protocol/wire-formats.md 1): prints a
 * "tcp.option" record. */
void dec_tcp_option(struct dec *d, bool ack, const struct dec_where *w);

#endif
