/* fuzz_clc.c: libFuzzer target for the CLC decoders (docs/protocol/wire-formats.md 2-5). Decode; if
 * that succeeds, encode, decode again and require the same message and the same bytes
 * (tests/lib/clc_check.c aborts on a mismatch). Also peeks the header as a stream reader
 * would. Seed corpus: tests/fuzz/corpus/fuzz_clc/ (the golden vectors). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "lib/clc_check.h"
#include "wire/clc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum clc_type type;
	uint16_t msglen = 0;
	int prc = clc_peek_header(data, size, &type, &msglen, NULL);
	int rc = clc_check_roundtrip(data, size);

	/* A message that decodes has a header that peeks, with the same length. */
	if (rc == 0 && (prc != 0 || msglen != size))
		abort();
	/* As a stream reader: decode the first message of a longer buffer. */
	if (prc == 0 && msglen < size)
		(void)clc_check_roundtrip(data, msglen);
	return 0;
}
