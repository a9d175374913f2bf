/* fuzz_clc_v2.c: libFuzzer target for the SMC-R v2 CLC decoders (docs/parts/wire-v2.md 2-4):
 * any input as a v2 Accept, a v2 Confirm and a Proposal's v2 extension must not crash or
 * read outside it, and what decodes round-trips (tests/lib/v2_check.h; abort otherwise). */
#include <stddef.h>
#include <stdint.h>

#include "lib/v2_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	(void)clc_v2_check_roundtrip(data, size);
	return 0;
}
