/* json_mini.h: a strict little JSON parser for smcr-perf's tests: checks that the tool's
 * output is valid JSON (RFC 8259 grammar; strings without \u escapes beyond ASCII) and lets
 * a test look values up by key. */
#ifndef SMCR_TESTS_PERF_JSON_MINI_H
#define SMCR_TESTS_PERF_JSON_MINI_H

#include <stdbool.h>
#include <stddef.h>

enum jv_type { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ };

struct jv {
	enum jv_type type;
	bool b;
	double num;
	char *str;        /* JV_STR */
	size_t n;         /* JV_ARR, JV_OBJ: items */
	struct jv *items; /* values */
	char **keys;      /* JV_OBJ: keys[i] names items[i] */
};

/* Parses the whole text (surrounding white space allowed). NULL if it is not JSON. */
struct jv *jv_parse(const char *text);
void jv_free(struct jv *v);
/* Member of an object, NULL if v is not an object or has no such key. */
const struct jv *jv_get(const struct jv *v, const char *key);

#endif
