/* codes.h: the 4-bit value encodings of SMC-R (docs/protocol/wire-formats.md 8.1, 8.2).
 * RMBE size code c means 2^(c+14) bytes; QP MTU code n means 2^(7+n) bytes (1..5). */
#ifndef SMCR_WIRE_CODES_H
#define SMCR_WIRE_CODES_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define WIRE_RMBE_SIZE_MIN 16384u		/* code 0 */
#define WIRE_RMBE_CODE_SEND_MAX 5		/* 512 KiB: the most smcr sends (RFC ceiling) */
#define WIRE_RMBE_CODE_ACCEPT_MAX 15		/* 512 MiB: the most smcr accepts (Linux) */
#define WIRE_MTU_CODE_MIN 1			/* 256 */
#define WIRE_MTU_CODE_MAX 5			/* 4096 */

/* Bytes of an RMBE of code c; 0 if c > 15. */
uint64_t wire_rmbe_size(unsigned code);
/* Smallest code whose size is >= bytes (Linux smc_compress_bufsize), capped at max_code. */
unsigned wire_rmbe_code(uint64_t bytes, unsigned max_code);
/* Bytes of a QP MTU code; 0 if the code is invalid (0 or > 5). */
unsigned wire_mtu_bytes(unsigned code);

#endif
