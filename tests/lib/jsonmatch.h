/* jsonmatch.h: test helper comparing one compact JSON object (a line of smcr-decode --json)
 * with an expected subset of its members: every top-level member of the expected object
 * must be present in the actual one with exactly the same value text (numbers, strings,
 * booleans, nested arrays/objects compared as written). smcr-decode writes compact JSON
 * without spaces, so the expected files are written the same way. */
#ifndef SMCR_TESTS_JSONMATCH_H
#define SMCR_TESTS_JSONMATCH_H

#include <stdbool.h>
#include <stddef.h>

/* Returns true if every member of expected is in actual with the same value. On a mismatch
 * writes a one-line explanation ("key \"qpn\": expected 263, got 264") into why. Also false
 * if either text is not a JSON object (why says so). */
bool jsonmatch_subset(const char *actual, const char *expected, char *why, size_t whylen);

/* The raw value text of top-level member key in obj, copied into out (NUL-terminated).
 * Returns false if absent, not an object, or it does not fit. */
bool jsonmatch_get(const char *obj, const char *key, char *out, size_t outlen);

#endif
