/* fuzz_llc_v2.c: libFuzzer target for llc2_decode (docs/parts/wire-v2.md 7): any input must
 * not crash or read outside it, and what decodes round-trips (tests/lib/v2_check.h; abort
 * otherwise). */
#include <stddef.h>
#include <stdint.h>

#include "lib/v2_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	(void)llc2_check_roundtrip(data, size);
	return 0;
}
