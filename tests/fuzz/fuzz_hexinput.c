/* fuzz_hexinput.c: libFuzzer target for smcr-decode's hex text parser (hexin.h) and what it
 * feeds: any text must parse or fail with a message, never read outside the input, and the
 * bytes produced must decode (or be reported) without crashing. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smcr-decode/dec.h"
#include "smcr-decode/hexin.h"
#include "smcr-decode/out.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	if (!null)
		null = fopen("/dev/null", "w");
	if (!null)
		abort();
	struct bytebuf b = { 0 };
	char err[256];
	err[0] = 0;
	int rc = hexin_parse((const char *)data, size, &b, err, sizeof(err));
	if (rc != 0 && (err[0] == 0 || !memchr(err, 0, sizeof(err))))
		abort();	/* a failure always says why */
	if (b.len > 2 * size)
		abort();	/* never more bytes than pairs of digits */
	if (rc == 0 && b.len) {
		struct out o;
		struct dec d;
		out_init(&o, null, OUT_JSON);
		dec_init(&d, &o, null, "fuzz");
		struct dec_where w = { .transport = DEC_HEX };
		dec_buffer(&d, b.p, b.len, &w);
	}
	bytebuf_free(&b);
	return 0;
}
