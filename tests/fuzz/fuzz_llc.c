/* fuzz_llc.c: libFuzzer target for llc_decode (docs/protocol/wire-formats.md 6). Any input: decode
 * must not crash or read outside it; if it decodes, encode must succeed and the bytes must
 * decode to an equal message that encodes to the same bytes (abort otherwise). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/llc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct llc_msg m, d;
	uint8_t out[LLC_MSG_LEN], again[LLC_MSG_LEN];
	/* Classification and names are total functions of the type byte. */
	if (size > 0 && !llc_type_name(data[0]))
		abort();
	if (llc_decode(data, size, &m) != 0)
		return 0;
	if (size != LLC_MSG_LEN || llc_kind_of(data[0]) != LLC_KIND_V1)
		abort();
	if (llc_encode(&m, out) != 0)
		abort();
	if (out[0] != data[0] || out[1] != LLC_MSG_LEN || (out[3] & 0x80) != (data[3] & 0x80))
		abort();
	if (llc_decode(out, sizeof(out), &d) != 0 || !llc_msg_equal(&m, &d))
		abort();
	if (llc_encode(&d, again) != 0 || memcmp(out, again, sizeof(out)) != 0)
		abort();
	return 0;
}
