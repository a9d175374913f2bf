/* llccdc_vectors.h: the LLC and CDC hex examples of docs/protocol/wire-formats.md 9, as test
 * vectors (golden bytes for the codec tests, the fuzz seed corpora, and any tool test that wants
 * known-good 44-byte messages), plus a small deterministic PRNG for property tests. */
#ifndef SMCR_TESTS_LLCCDC_VECTORS_H
#define SMCR_TESTS_LLCCDC_VECTORS_H

#include <stddef.h>
#include <stdint.h>

struct llccdc_vector {
	const char *name;	/* also the seed corpus file name */
	const char *hex;	/* whitespace-separated hex bytes; a missing tail is zeros */
	const char *source;	/* where in the spec it comes from */
};

extern const struct llccdc_vector llc_vectors[];
extern const size_t llc_vector_count;
extern const struct llccdc_vector cdc_vectors[];
extern const size_t cdc_vector_count;

/* Parses v->hex into out[44] (zero-padded to 44 bytes); returns the number of bytes
 * written (always 44), or 0 on a malformed string or more than 44 bytes. */
size_t llccdc_vector_bytes(const struct llccdc_vector *v, uint8_t out[44]);
/* Finds a vector by name in either table; NULL if none. */
const struct llccdc_vector *llccdc_vector_find(const char *name);

/* splitmix64: deterministic, seeded per test so failures reproduce. */
static inline uint64_t llccdc_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

#endif
