/* fuzz_tcpopt.c: libFuzzer target for the SMC TCP option codec (docs/protocol/wire-formats.md 1):
 * decode one option; if that succeeds, its bytes must be what the encoder writes and an options
 * block scan must find it (tests/lib/clc_check.c aborts otherwise). Scans the input as an
 * options block too. Seed corpus: tests/fuzz/corpus/fuzz_tcpopt/. */
#include <stddef.h>
#include <stdint.h>

#include "lib/clc_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	(void)tcpopt_check_roundtrip(data, size);
	return 0;
}
