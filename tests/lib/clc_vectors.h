/* clc_vectors.h: golden byte vectors of the SMC TCP option and the CLC messages, copied from
 * the hex examples of the spec (docs/protocol/wire-formats.md 1, 3.6, 4, 9;
 * docs/protocol/wireshark.md 6.1) plus a few built by hand to the spec's tables (IPv6 and version-2
 * Proposals, v2 Decline). Shared by the unit tests, and usable by tool tests (smcr-decode, tshark).
 * Expected field values are asserted in tests/unit/test_clc_golden.c. */
#ifndef SMCR_TESTS_CLC_VECTORS_H
#define SMCR_TESTS_CLC_VECTORS_H

#include <stddef.h>
#include <stdint.h>

struct test_vector {
	const char *name;	/* also the seed-corpus file name */
	const uint8_t *bytes;
	size_t len;
};

/* TCP option (docs/protocol/wire-formats.md 1) */
extern const uint8_t vec_tcpopt[6];		/* FE 06 E2 D4 C3 D9 */
extern const uint8_t vec_tcpopt_aligned[8];	/* 01 01 FE 06 E2 D4 C3 D9 (Linux) */
extern const uint8_t vec_tcpopt_syn[12];	/* MSS 1460, NOP NOP, SMC (docs/protocol/wireshark.md 6.3) */

/* CLC */
extern const uint8_t vec_prop_hw52[52];		/* 3.6: Linux ~5.x, N = 0, 127.0.0.0/8 [HW] */
extern const uint8_t vec_prop_smcr92[92];	/* 3.6: smcr form, N = 40, 10.0.0.0/24, 0x10 */
extern const uint8_t vec_prop_linux92[92];	/* 3.6: same with byte 7 = 0x28 (Linux >= 5.10) */
extern const uint8_t vec_prop_ipv6_109[109];	/* built: IPv6, one prefix 2001:db8:1::/64, N = 40 */
extern const uint8_t vec_prop_v2ext[164];	/* built: version 2, SMC-R v1 + v2 (0x20), 1 EID */
extern const uint8_t vec_accept_hw[68];		/* 4: real Linux Accept [HW] */
extern const uint8_t vec_confirm_hw[68];	/* 4: its Confirm, built from the text */
extern const uint8_t vec_accept_ws[68];		/* docs/protocol/wireshark.md 6.1 Accept */
extern const uint8_t vec_decline_diffprefix[28];	/* 9 */
extern const uint8_t vec_decline_syncerr[28];		/* 9: out of sync */
extern const uint8_t vec_decline_v2[44];	/* built: v2, NOSMCRDEV, Linux, 4 extra codes */

extern const struct test_vector clc_vectors[];
extern const size_t clc_vectors_count;
extern const struct test_vector tcpopt_vectors[];
extern const size_t tcpopt_vectors_count;

#endif
