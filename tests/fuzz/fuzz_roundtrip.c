/* fuzz_roundtrip.c: libFuzzer decode -> encode -> decode stability over every codec
 * (docs/protocol/wire-formats.md 1-7). The first byte selects the codec: 0 CLC (clc_decode), 1 LLC
 * (llc_decode), 2 CDC (cdc_decode), 3 TCP option (tcpopt_decode / tcpopt_find), 4 SMC-R v2
 * CLC (v2 Accept/Confirm, v2 extension), 5 SMC-R v2 LLC (llc2_decode), anything else:
 * detection as smcr-decode does it (tools/smcr-decode/dec.h), message by message, through
 * the decoder and its printers. For every message that decodes, encoding must
 * succeed, the bytes must decode to an equal message, and encoding that gives the same bytes
 * (abort otherwise). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clc_check.h"
#include "lib/v2_check.h"
#include "smcr-decode/dec.h"
#include "smcr-decode/out.h"
#include "wire/cdc.h"
#include "wire/clc.h"
#include "wire/llc.h"
#include "wire/tcpopt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* CLC and the TCP option: the wire-clc unit's round-trip property (tests/lib/clc_check.h:
 * same message, same bytes; a Proposal with more than 8 IPv6 prefixes decodes -- Linux's
 * length rule counts them all -- but only 8 are kept, so it is not re-encoded). */
static void clc_roundtrip(const uint8_t *p, size_t n)
{
	(void)clc_check_roundtrip(p, n);
}

static void llc_roundtrip(const uint8_t *p, size_t n)
{
	struct llc_msg m, d;
	uint8_t out[LLC_MSG_LEN], again[LLC_MSG_LEN];
	if (llc_decode(p, n, &m) != 0)
		return;
	if (llc_encode(&m, out) != 0 || llc_decode(out, sizeof(out), &d) != 0 ||
	    !llc_msg_equal(&m, &d) || llc_encode(&d, again) != 0 || memcmp(out, again, sizeof(out)))
		abort();
}

static void cdc_roundtrip(const uint8_t *p, size_t n)
{
	struct cdc_msg m, d;
	uint8_t out[CDC_MSG_LEN], again[CDC_MSG_LEN];
	if (cdc_decode(p, n, &m) != 0)
		return;
	if (cdc_encode(&m, out) != 0 || cdc_decode(out, sizeof(out), &d) != 0 ||
	    !cdc_msg_equal(&m, &d) || cdc_encode(&d, again) != 0 || memcmp(out, again, sizeof(out)))
		abort();
}

static void tcpopt_roundtrip(const uint8_t *p, size_t n)
{
	(void)tcpopt_check_roundtrip(p, n);
}

/* Detection as smcr-decode: every message of a stream, round-tripped by its codec, and the
 * whole buffer through dec_buffer with output to /dev/null. */
static void auto_roundtrip(const uint8_t *p, size_t n)
{
	static FILE *null;
	if (!null)
		null = fopen("/dev/null", "w");
	if (!null)
		abort();
	for (size_t i = 0; i < n;) {
		const uint8_t *q = p + i;
		size_t left = n - i;
		enum clc_type t;
		uint16_t len;
		if (clc_peek_header(q, left, &t, &len, NULL) == 0 && len <= left) {
			clc_roundtrip(q, len);
			i += len;
		} else if (left >= LLC_MSG_LEN && q[1] == LLC_MSG_LEN) {
			if (q[0] == CDC_TYPE)
				cdc_roundtrip(q, LLC_MSG_LEN);
			else
				llc_roundtrip(q, LLC_MSG_LEN);
			i += LLC_MSG_LEN;
		} else {
			i++;
		}
	}
	struct out o;
	struct dec d;
	out_init(&o, null, (p[0] & 1) ? OUT_JSON : OUT_TEXT);
	dec_init(&d, &o, null, "fuzz");
	struct dec_where w = { .transport = DEC_HEX };
	dec_buffer(&d, p, n, &w);
	/* A CLC stream as a TCP direction would be fed, in two pieces. */
	enum dec_stop stop;
	struct dec_where tw = { .transport = DEC_TCP, .frame = 1, .src = "a", .dst = "b" };
	size_t half = n / 2;
	size_t used = dec_clc_stream(&d, p, half, false, &tw, &stop);
	if (used > half)
		abort();
	if (stop != DEC_STOP_NOT_CLC) {
		used += dec_clc_stream(&d, p + used, n - used, true, &tw, &stop);
		if (used > n)
			abort();
	}
	if (n <= 64)
		dec_send_payload(&d, p, n, &tw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	switch (data[0]) {
	case 0: clc_roundtrip(p, n); break;
	case 1: llc_roundtrip(p, n); break;
	case 2: cdc_roundtrip(p, n); break;
	case 3: tcpopt_roundtrip(p, n); break;
	case 4: (void)clc_v2_check_roundtrip(p, n); break;
	case 5: (void)llc2_check_roundtrip(p, n); break;
	default: if (n) auto_roundtrip(p, n); break;
	}
	return 0;
}
