/* clc_v2neg.c: the rules that pick SMC-R v2 or v1 and the v2.1 limits, as Linux 6.12
 * applies them (docs/parts/wire-v2.md 6), and the user EID format of the kernel's UEID
 * table. Pure functions: the engine passes in what it has and gets the choice back. */
#include "wire/clc_v2.h"

#include <string.h>

#define EID_PAD ' '

static bool eid_char_ok(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-';
}

int clc_eid_from_str(const char *s, struct clc_eid *out)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > CLC_EID_LEN)
		return -SMCR_E_CLC2_EID_INVALID;
	memset(out->b, EID_PAD, sizeof(out->b));
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (ch >= 'a' && ch <= 'z')
			ch = (char)(ch - 'a' + 'A');
		/* the first character must be a letter or digit (Linux smc_clc_ueid_valid) */
		if (!eid_char_ok(ch) || (i == 0 && (ch == '.' || ch == '-')))
			return -SMCR_E_CLC2_EID_INVALID;
		out->b[i] = (uint8_t)ch;
	}
	return 0;
}

void clc_eid_to_str(const struct clc_eid *e, char out[CLC_EID_LEN + 1])
{
	size_t n = CLC_EID_LEN;

	while (n > 0 && (e->b[n - 1] == EID_PAD || e->b[n - 1] == 0))
		n--;
	for (size_t i = 0; i < n; i++)
		out[i] = (e->b[i] >= 0x20 && e->b[i] < 0x7f) ? (char)e->b[i] : '?';
	out[n] = '\0';
}

int clc_eid_match(const struct clc_v2ext_info *x, const struct clc_eid *table, size_t n)
{
	for (unsigned i = 0; i < x->eid_count && i < CLC_V2EXT_MAX_EID; i++)
		for (size_t j = 0; j < n; j++)
			if (!memcmp(x->eids[i].b, table[j].b, CLC_EID_LEN))
				return (int)i;
	return -1;
}

static bool has_r(uint8_t t) { return t == CLC_PATH_R || t == CLC_PATH_BOTH; }

int clc_proposal_offer(struct clc_proposal *p, bool v1, bool v2, const struct clc_v2ext_info *x)
{
	if (!v1 && !v2)
		return -SMCR_E_CLC2_ENC_FIELD;
	p->typev1 = v1 ? CLC_PATH_R : CLC_PATH_NONE;
	if (!v2) {
		p->f.version = CLC_VERSION_1;
		p->typev2 = 0;
		p->iparea_offset = CLC_PROPOSAL_OPT_LEN;
		return 0;
	}
	if (!x || clc_v2ext_put(x, CLC_PATH_R, &p->v2ext))
		return -SMCR_E_CLC2_ENC_FIELD;
	p->f.version = CLC_VERSION_2;
	p->typev2 = CLC_PATH_R;
	p->iparea_offset = v1 ? CLC_PROPOSAL_OPT_LEN : 0;
	if (!v1) {
		memset(&p->peer_id, 0, sizeof(p->peer_id));
		memset(&p->gid, 0, sizeof(p->gid));
		memset(&p->mac, 0, sizeof(p->mac));
	}
	return 0;
}

uint8_t clc_choose_version(const struct clc_proposal *p, bool can_v2, bool can_v1,
			   uint32_t *decl)
{
	bool v2_offered = p->f.version >= CLC_VERSION_2 && has_r(p->typev2);
	bool v1_offered = has_r(p->typev1);

	*decl = 0;
	if (v2_offered && p->has_v2ext && can_v2)
		return CLC_VERSION_2;
	if (v1_offered && can_v1)
		return CLC_VERSION_1;
	/* Nothing possible: Linux's reasons (its server keeps the first failure it meets and
	 * falls back to "no SMC device"). */
	bool any = p->typev1 != CLC_PATH_NONE ||
		   (p->f.version >= CLC_VERSION_2 && p->typev2 != CLC_PATH_NONE);
	if (!any)
		*decl = CLC2_DECL_PEERNOSMC;
	else if (v2_offered && !p->has_v2ext && !v1_offered)
		*decl = CLC2_DECL_NOV2EXT;
	else
		*decl = CLC2_DECL_NOSMCDEV;
	return 0;
}

static uint8_t min_u8(uint8_t a, uint8_t b) { return a < b ? a : b; }

uint32_t clc_v2x_server_pick(const struct clc_v2ext_info *x, uint8_t own_conns,
			     uint8_t own_links, uint16_t own_features, struct clc_fce *out)
{
	out->release = min_u8(x->release, CLC_RELEASE_SMCR);
	out->max_conns = 0;
	out->max_links = 0;
	out->feature_mask = 0;
	if (out->release < CLC_RELEASE_1)
		return 0;
	out->max_conns = min_u8(x->max_conns, own_conns);
	if (out->max_conns < CLC_CONNS_MIN)
		return CLC2_DECL_MAXCONNERR;
	out->max_links = min_u8(x->max_links, own_links);
	if (out->max_links < CLC_LINKS_MIN)
		return CLC2_DECL_MAXLINKERR;
	out->feature_mask = x->feature_mask & own_features;
	return 0;
}

uint32_t clc_v2x_client_check(const struct clc_fce *acc, uint8_t offered_release)
{
	if (acc->release > offered_release)
		return CLC2_DECL_RELEASEERR;
	if (acc->release < CLC_RELEASE_1)
		return 0;
	if (acc->max_conns < CLC_CONNS_MIN)
		return CLC2_DECL_MAXCONNERR;
	if (acc->max_links < CLC_LINKS_MIN || acc->max_links > CLC_LINKS_MAX)
		return CLC2_DECL_MAXLINKERR;
	return 0;
}

uint32_t clc_v2x_confirm_check(const struct clc_fce *acc, const struct clc_fce *conf)
{
	if (acc->release != conf->release)
		return CLC2_DECL_RELEASEERR;
	if (acc->release < CLC_RELEASE_1)
		return 0;
	if (acc->max_conns != conf->max_conns)
		return CLC2_DECL_MAXCONNERR;
	if (acc->max_links != conf->max_links)
		return CLC2_DECL_MAXLINKERR;
	return 0;
}

bool clc_gid_ipv4(const struct wire_gid *g, uint32_t *ip)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (memcmp(g->b, prefix, sizeof(prefix)))
		return false;
	*ip = (uint32_t)g->b[12] << 24 | (uint32_t)g->b[13] << 16 | (uint32_t)g->b[14] << 8 |
	      g->b[15];
	return true;
}
