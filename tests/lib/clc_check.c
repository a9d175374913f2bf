/* clc_check.c: the round-trip property of clc_check.h. */
#include "clc_check.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/clc.h"
#include "wire/tcpopt.h"

static void fail(const char *what, int rc)
{
	fprintf(stderr, "round-trip property violated: %s (%d %s)\n", what, rc, smcr_err_name(rc));
	abort();
}

int clc_check_roundtrip(const uint8_t *buf, size_t len)
{
	static struct clc_msg a, b;	/* static: a Proposal struct is about 700 bytes */
	static uint8_t e1[CLC_MSG_MAX_LEN], e2[CLC_MSG_MAX_LEN];
	size_t n1 = 0, n2 = 0;
	int rc = clc_decode(buf, len, &a);

	if (rc)
		return rc;
	rc = clc_encode(&a, e1, sizeof(e1), &n1);
	if (rc) {
		if (rc == -SMCR_E_CLC_ENC_PREFIX_COUNT && a.type == CLC_PROPOSAL &&
		    a.proposal.ipv6_count > CLC_MAX_V6_PREFIX)
			return 0;
		fail("decoded message does not encode", rc);
	}
	if (n1 != len)
		fail("re-encoded length differs", (int)n1);
	rc = clc_decode(e1, n1, &b);
	if (rc)
		fail("re-encoded message does not decode", rc);
	if (!clc_msg_equal(&a, &b))
		fail("re-decoded message differs", 0);
	rc = clc_encode(&b, e2, sizeof(e2), &n2);
	if (rc || n2 != n1 || memcmp(e1, e2, n1))
		fail("second encoding differs", rc);
	return 0;
}

int tcpopt_check_roundtrip(const uint8_t *buf, size_t len)
{
	uint8_t e[TCPOPT_SMC_LEN];
	size_t n = 0;
	bool found = true;
	int frc = tcpopt_find(buf, len, &found);
	int rc;

	if (frc && found)
		fail("tcpopt_find error with found set", frc);
	rc = tcpopt_decode(buf, len);
	if (rc)
		return rc;
	if (tcpopt_encode(e, sizeof(e), &n) || n != len || memcmp(e, buf, n))
		fail("decoded option differs from the encoder's", 0);
	/* The option alone is also a valid options block that carries SMC. */
	if (frc || !found)
		fail("tcpopt_find misses a decodable option", frc);
	return 0;
}
