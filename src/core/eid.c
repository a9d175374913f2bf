/* eid.c: the user EID table (docs/parts/wire-v2.md 2.3, docs/CONFIG.md SMCR_UEID) built from
 * a configured text, with the rules the Linux kernel's UEID table applies to what it is
 * given: each EID valid (A-Z 0-9 . -, first a letter or digit, 1..32 characters), blank
 * padded to 32 bytes, no duplicates, at most 8. SMC v2 is not in RFC 7609. */
#include "core/core_int.h"

#include <string.h>

#include "wire/clc_v2.h"

_Static_assert(CORE_EID_LEN == CLC_EID_LEN, "EID sizes");
_Static_assert(CORE_MAX_UEIDS == CLC_V2EXT_MAX_EID, "UEID table size");

static bool ueid_has(const struct core_ueid_table *t, const struct clc_eid *e)
{
	for (unsigned i = 0; i < t->n; i++)
		if (!memcmp(t->eid[i], e->b, CORE_EID_LEN))
			return true;
	return false;
}

int core_ueid_parse(const char *text, struct core_ueid_table *t)
{
	int rejected = 0;
	const char *s = text ? text : "";
	while (*s) {
		size_t n = strcspn(s, " ,\t\n");
		if (n == 0) {
			s++;
			continue;
		}
		char word[CORE_EID_LEN + 2];
		struct clc_eid e;
		if (n > CORE_EID_LEN) {
			rejected++;
		} else {
			memcpy(word, s, n);
			word[n] = 0;
			if (clc_eid_from_str(word, &e) || ueid_has(t, &e) || t->n >= CORE_MAX_UEIDS)
				rejected++;
			else
				memcpy(t->eid[t->n++], e.b, CORE_EID_LEN);
		}
		s += n;
	}
	return rejected;
}
