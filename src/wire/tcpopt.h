/* tcpopt.h: the SMC TCP experimental option (docs/protocol/wire-formats.md 1; RFC 7609 App. A.1,
 * RFC 6994).
 *
 * Kind 254, length 6, 32-bit ExID 0xE2D4C3D9 ("SMCR" in EBCDIC), nothing after it. A client
 * puts it in its SYN, a server in its SYN-ACK; SMC is attempted only if both carried it.
 * This unit encodes the option, decodes one option strictly, and scans a whole TCP options
 * block the way Linux does (tcp_input.c smc_parse_options: any position, kind 254 with an
 * even length >= 6 whose first 4 data bytes are the ExID). Pure functions, no state. */
#ifndef SMCR_WIRE_TCPOPT_H
#define SMCR_WIRE_TCPOPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/cursor.h"
#include "util/err.h"

#define TCPOPT_EOL 0			/* end of option list (RFC 9293) */
#define TCPOPT_NOP 1			/* padding */
#define TCPOPT_SMC_KIND 254		/* RFC 6994 shared experimental option */
#define TCPOPT_SMC_LEN 6		/* kind + length + 4-byte ExID */
#define TCPOPT_SMC_EXID 0xE2D4C3D9u	/* "SMCR" in EBCDIC */
#define TCPOPT_SMC_ALIGNED_LEN 8	/* NOP NOP + option, as Linux writes it (smc_options_write) */

/* Writes the 6 option bytes FE 06 E2 D4 C3 D9. -SMCR_E_NOSPACE (cursor unmoved) if fewer
 * than 6 bytes are left. */
SMCR_MUST_CHECK int tcpopt_put(struct wcur *c);
/* Writes the 8 bytes 01 01 FE 06 E2 D4 C3 D9 (4-byte aligned, as Linux). */
SMCR_MUST_CHECK int tcpopt_put_aligned(struct wcur *c);
/* Buffer forms of the two writers: *outlen = bytes written (6 or 8). */
SMCR_MUST_CHECK int tcpopt_encode(void *buf, size_t cap, size_t *outlen);
SMCR_MUST_CHECK int tcpopt_encode_aligned(void *buf, size_t cap, size_t *outlen);

/* Reads exactly one SMC option at the cursor and consumes its 6 bytes. Errors (cursor
 * unmoved): TCPOPT_SHORT (fewer bytes than the option), TCPOPT_WRONG_KIND (kind != 254),
 * TCPOPT_WRONG_LEN (length byte != 6), TCPOPT_WRONG_EXID. */
SMCR_MUST_CHECK int tcpopt_get(struct rcur *c);
/* The whole buffer must be the 6-byte option: as tcpopt_get, plus TCPOPT_TRAILING when
 * bytes follow it. */
SMCR_MUST_CHECK int tcpopt_decode(const void *buf, size_t len);

/* Scans a TCP options block (the bytes after the 20-byte TCP header) and sets *found to
 * whether it carries the SMC option, with Linux's rule (any position; kind 254, even length
 * >= 6, ExID first). EOL ends the scan; NOP is one byte; every other kind is skipped by its
 * length byte. A malformed block is an error and leaves *found false (treat the segment as
 * not offering SMC: falling back to TCP is always safe):
 *   TCPOPT_BLOCK_TRUNCATED  a kind byte at the very end, without its length byte
 *   TCPOPT_BLOCK_BAD_LEN    a length byte of 0 or 1
 *   TCPOPT_BLOCK_OVERRUN    a length that runs past the end of the block */
SMCR_MUST_CHECK int tcpopt_find(const void *opts, size_t len, bool *found);

#endif
