/* tcpopt.c: encode, decode and find the SMC TCP experimental option (docs/protocol/wire-formats.md
 * 1; RFC 7609 App. A.1; Linux tcp_input.c smc_parse_options for the receive rule). */
#include "wire/tcpopt.h"

static const uint8_t smc_opt[TCPOPT_SMC_LEN] = {
	TCPOPT_SMC_KIND, TCPOPT_SMC_LEN, 0xE2, 0xD4, 0xC3, 0xD9,
};

int tcpopt_put(struct wcur *c)
{
	return wcur_put_bytes(c, smc_opt, sizeof(smc_opt));
}

int tcpopt_put_aligned(struct wcur *c)
{
	/* Two NOPs first so the option ends on a 4-byte boundary, as Linux writes it. */
	if (wcur_left(c) < TCPOPT_SMC_ALIGNED_LEN)
		return -SMCR_E_NOSPACE;
	if (wcur_put_u8(c, TCPOPT_NOP) || wcur_put_u8(c, TCPOPT_NOP) || tcpopt_put(c))
		return -SMCR_E_INTERNAL;	/* space was checked above */
	return 0;
}

int tcpopt_encode(void *buf, size_t cap, size_t *outlen)
{
	struct wcur c = wcur_make(buf, cap);
	int rc = tcpopt_put(&c);
	if (rc == 0)
		*outlen = c.off;
	return rc;
}

int tcpopt_encode_aligned(void *buf, size_t cap, size_t *outlen)
{
	struct wcur c = wcur_make(buf, cap);
	int rc = tcpopt_put_aligned(&c);
	if (rc == 0)
		*outlen = c.off;
	return rc;
}

int tcpopt_get(struct rcur *c)
{
	uint8_t kind, len;
	uint32_t exid;
	struct rcur s = *c;	/* work on a copy: c moves only on success */

	if (rcur_get_u8(&s, &kind))
		return -SMCR_E_TCPOPT_SHORT;
	if (kind != TCPOPT_SMC_KIND)
		return -SMCR_E_TCPOPT_WRONG_KIND;
	if (rcur_get_u8(&s, &len))
		return -SMCR_E_TCPOPT_SHORT;
	if (len != TCPOPT_SMC_LEN)
		return -SMCR_E_TCPOPT_WRONG_LEN;
	if (rcur_get_u32(&s, &exid))
		return -SMCR_E_TCPOPT_SHORT;
	if (exid != TCPOPT_SMC_EXID)
		return -SMCR_E_TCPOPT_WRONG_EXID;
	*c = s;
	return 0;
}

int tcpopt_decode(const void *buf, size_t len)
{
	struct rcur c = rcur_make(buf, len);
	int rc = tcpopt_get(&c);
	if (rc)
		return rc;
	return rcur_left(&c) ? -SMCR_E_TCPOPT_TRAILING : 0;
}

/* Linux's test for one option with kind 254 (smc_parse_options): even length >= 6 and the
 * ExID in its first 4 data bytes. Another experiment's option 254 is simply not ours. */
static bool is_smc(const uint8_t *opt, uint8_t len)
{
	return len >= TCPOPT_SMC_LEN && (len & 1) == 0 && be32_load(opt + 2) == TCPOPT_SMC_EXID;
}

int tcpopt_find(const void *opts, size_t len, bool *found)
{
	struct rcur c = rcur_make(opts, len);
	bool seen = false;

	*found = false;
	while (rcur_left(&c)) {
		const uint8_t *opt = c.buf + c.off;
		uint8_t kind, olen;

		if (rcur_get_u8(&c, &kind))
			return -SMCR_E_INTERNAL;	/* rcur_left() > 0 */
		if (kind == TCPOPT_EOL)
			break;
		if (kind == TCPOPT_NOP)
			continue;
		if (rcur_get_u8(&c, &olen))
			return -SMCR_E_TCPOPT_BLOCK_TRUNCATED;
		if (olen < 2)
			return -SMCR_E_TCPOPT_BLOCK_BAD_LEN;
		if (rcur_skip(&c, (size_t)olen - 2))
			return -SMCR_E_TCPOPT_BLOCK_OVERRUN;
		/* The whole option lies inside the block now, so opt[0..olen) is readable. */
		if (kind == TCPOPT_SMC_KIND && is_smc(opt, olen))
			seen = true;
	}
	*found = seen;
	return 0;
}
