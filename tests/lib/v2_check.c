/* v2_check.c: round-trip checks of the SMC-R v2 codecs (v2_check.h). */
#include "lib/v2_check.h"

#include <stdlib.h>
#include <string.h>

#include "wire/clc.h"
#include "wire/clc_v2.h"
#include "wire/llc_v2.h"

static bool acc_roundtrip(const uint8_t *p, size_t n, enum clc_type t)
{
	static uint8_t out[CLC_ACC2_MAX_LEN], again[CLC_ACC2_MAX_LEN];
	struct clc_accept_v2 a, d;
	size_t l1, l2;

	if (clc_accept_v2_decode(p, n, t, &a) != 0)
		return false;
	if (a.length != n || clc_accept_v2_len(&a, t) != n)
		abort();	/* strict: every byte belongs to a part */
	if (clc_accept_v2_encode(&a, t, out, sizeof(out), &l1) != 0 || l1 != n ||
	    clc_accept_v2_decode(out, l1, t, &d) != 0 || !clc_accept_v2_equal(&a, &d) ||
	    clc_accept_v2_encode(&d, t, again, sizeof(again), &l2) != 0 || l2 != l1 ||
	    memcmp(out, again, l1))
		abort();
	return true;
}

static bool v2ext_roundtrip(const uint8_t *p, size_t n)
{
	static struct clc_msg m;
	struct clc_v2ext_info x, y;
	struct clc_v2ext raw;

	if (clc_decode(p, n, &m) != 0 || m.type != CLC_PROPOSAL || !m.proposal.has_v2ext)
		return false;
	if (clc_v2ext_get(&m.proposal.v2ext, m.proposal.typev2, &x) != 0)
		return false;
	if (clc_v2ext_put(&x, m.proposal.typev2, &raw) != 0 || raw.len != m.proposal.v2ext.len ||
	    clc_v2ext_get(&raw, m.proposal.typev2, &y) != 0 || memcmp(&x, &y, sizeof(x)))
		abort();
	return true;
}

bool clc_v2_check_roundtrip(const uint8_t *p, size_t n)
{
	bool a = acc_roundtrip(p, n, CLC_ACCEPT);
	bool c = acc_roundtrip(p, n, CLC_CONFIRM);
	bool x = v2ext_roundtrip(p, n);
	return a || c || x;
}

bool llc2_check_roundtrip(const uint8_t *p, size_t n)
{
	static uint8_t out[LLC2_MAX_LEN], again[LLC2_MAX_LEN];
	static struct llc2_msg m, d;
	size_t l1, l2;

	if (llc2_decode(p, n, &m) != 0)
		return false;
	if (llc2_len(&m) != m.length && !(m.type == LLC2_REQ_ADD_LINK || m.type == LLC2_DELETE_RKEY))
		abort();
	if (llc2_encode(&m, out, sizeof(out), &l1) != 0 || llc2_decode(out, l1, &d) != 0 ||
	    !llc2_msg_equal(&m, &d) || llc2_encode(&d, again, sizeof(again), &l2) != 0 ||
	    l2 != l1 || memcmp(out, again, l1))
		abort();
	return true;
}
