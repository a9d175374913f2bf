/* llc_golden.h: the LLC golden-vector steps the per-flow LLC unit tests share
 * (test_llc_link.c, test_llc_rkey.c): load a docs/protocol/wire-formats.md 9 example by name, and
 * decode it with the check that the decoded message encodes back to the same 44 bytes. cmocka
 * asserts: call them from cmocka tests only. */
#ifndef SMCR_TESTS_LLC_GOLDEN_H
#define SMCR_TESTS_LLC_GOLDEN_H

#include <stdint.h>

#include "wire/llc.h"

/* The 44 bytes of vector name (llccdc_vectors.c); fails the test if there is none. */
void llc_golden_load(const char *name, uint8_t b[LLC_MSG_LEN]);
/* Decodes vector name and checks that the message encodes back to the same bytes. */
struct llc_msg llc_golden(const char *name);

#endif
