/* v2_check.h: the round-trip property of the SMC-R v2 codecs (docs/parts/wire-v2.md), for
 * the fuzz targets and tests: whatever decodes re-encodes, the bytes decode to an equal
 * message, and encoding that gives the same bytes. Each function abort()s when the property
 * fails and returns whether the input decoded. */
#ifndef SMCR_TEST_V2_CHECK_H
#define SMCR_TEST_V2_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The input as a v2 Accept and as a v2 Confirm; as a Proposal, its v2 extension's fields
 * (clc_v2ext_get -> clc_v2ext_put -> get: equal). */
bool clc_v2_check_roundtrip(const uint8_t *p, size_t n);
/* The input as a v2 LLC message (llc2_decode). */
bool llc2_check_roundtrip(const uint8_t *p, size_t n);

#endif
