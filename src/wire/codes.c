/* codes.c: RMBE size and QP MTU encodings (docs/protocol/wire-formats.md 8.1, 8.2). */
#include "wire/codes.h"

uint64_t wire_rmbe_size(unsigned code)
{
	if (code > WIRE_RMBE_CODE_ACCEPT_MAX)
		return 0;
	return (uint64_t)1 << (code + 14);
}

unsigned wire_rmbe_code(uint64_t bytes, unsigned max_code)
{
	unsigned code = 0;
	while (code < max_code && wire_rmbe_size(code) < bytes)
		code++;
	return code;
}

unsigned wire_mtu_bytes(unsigned code)
{
	if (code < WIRE_MTU_CODE_MIN || code > WIRE_MTU_CODE_MAX)
		return 0;
	return 1u << (7 + code);
}

