/* cap.h: smcr-decode's capture input: reads a pcap or pcapng file with libpcap, walks each
 * frame (frame.h), reassembles every TCP direction from its first byte to find the CLC
 * messages at the start of the stream (docs/protocol/wire-formats.md 2: back to back, before any
 * data), and hands RoCE v1/v2 RC SEND Only payloads (BTH opcode 0x04) to the LLC/CDC decoder.
 *
 * TCP reassembly: per direction (src ip:port -> dst ip:port) the stream starts after the
 * SYN's sequence number, or, without a SYN in the capture, at the first data segment if it
 * begins with a CLC eyecatcher. Segments are placed by sequence number (out of order and
 * retransmitted ones included) into the first CAP_STREAM_MAX bytes; CLC messages are decoded
 * as soon as they are contiguous. The first non-CLC byte ends a direction's CLC phase. At
 * the end of the capture, a message still incomplete is reported as truncated. A new SYN with
 * another sequence number restarts the direction (port reuse). At most CAP_MAX_FLOWS
 * directions are tracked.
 *
 * Single-threaded; a struct cap lives for one file. */
#ifndef SMCR_DECODE_CAP_H
#define SMCR_DECODE_CAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dec.h"

#define CAP_STREAM_MAX 65536u	/* CLC messages are < 1 KiB each; the phase is tiny */
#define CAP_MAX_FLOWS 4096u

#define CAP_ERR_IO (-1)		/* the file cannot be opened */
#define CAP_ERR_MALFORMED (-2)	/* not a capture, or a damaged record (frames before it
				 * were decoded) */

/* Decodes the capture in the open stream f (pcap or pcapng; f is closed). errbuf gets a
 * one-line reason on failure. Returns 0 or CAP_ERR_MALFORMED. */
int cap_decode_file(struct dec *d, FILE *f, char *errbuf, size_t errlen);
/* Same for a path ("-" is stdin); also CAP_ERR_IO. */
int cap_decode_path(struct dec *d, const char *path, char *errbuf, size_t errlen);

#endif
