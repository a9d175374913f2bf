/* clc_check.h: the round-trip property shared by the CLC / TCP option property tests and
 * fuzz targets: decode; if that succeeds, encode, decode again, and require the same message
 * and (on a second encode) the same bytes. A violation calls abort(), so both cmocka tests
 * and libFuzzer report it as a crash. */
#ifndef SMCR_TESTS_CLC_CHECK_H
#define SMCR_TESTS_CLC_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* Returns clc_decode's result for buf[0..len). The one decodable-but-not-encodable case is a
 * Proposal with more than 8 IPv6 prefixes (only 8 are kept): then the encoder must fail with
 * CLC_ENC_PREFIX_COUNT, and that is checked too. */
int clc_check_roundtrip(const uint8_t *buf, size_t len);
/* Returns tcpopt_decode's result; on success the bytes must be the encoder's. Also runs
 * tcpopt_find over buf and checks that an error leaves "not found". */
int tcpopt_check_roundtrip(const uint8_t *buf, size_t len);

#endif
