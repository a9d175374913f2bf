/* fuzz_cdc.c: libFuzzer target for cdc_decode (docs/protocol/wire-formats.md 7). Any input: decode
 * must not crash or read outside it; if it decodes, encode must succeed and the bytes must
 * decode to an equal message that encodes to the same bytes (abort otherwise). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/cdc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cdc_msg m, d;
	uint8_t out[CDC_MSG_LEN], again[CDC_MSG_LEN];
	if (cdc_decode(data, size, &m) != 0)
		return 0;
	if (size < CDC_MIN_RX_LEN || size > CDC_MSG_LEN)
		abort();
	if (cdc_encode(&m, out) != 0)
		abort();
	/* Everything up to the flags survives, minus reserved bytes and bits. */
	if (memcmp(out, data, 8) != 0 || memcmp(out + 10, data + 10, 6) != 0 ||
	    memcmp(out + 18, data + 18, 6) != 0 || out[24] != (data[24] & 0xF8) ||
	    out[25] != (data[25] & 0xE0))
		abort();
	if (cdc_decode(out, sizeof(out), &d) != 0 || !cdc_msg_equal(&m, &d))
		abort();
	if (cdc_encode(&d, again) != 0 || memcmp(out, again, sizeof(out)) != 0)
		abort();
	return 0;
}
