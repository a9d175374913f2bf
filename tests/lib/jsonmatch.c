/* jsonmatch.c: top-level member splitting of a compact JSON object (jsonmatch.h). Only as
 * much JSON as our output uses: strings with escapes, nesting by brackets/braces. */
#include "jsonmatch.h"

#include <stdio.h>
#include <string.h>

/* End of the JSON value starting at p (one past it), or NULL. */
static const char *value_end(const char *p)
{
	int depth = 0;
	bool in_str = false;
	for (; *p; p++) {
		char c = *p;
		if (in_str) {
			if (c == '\\' && p[1])
				p++;
			else if (c == '"')
				in_str = false;
			if (!in_str && depth == 0)
				return p + 1;
			continue;
		}
		if (c == '"')
			in_str = true;
		else if (c == '[' || c == '{')
			depth++;
		else if (c == ']' || c == '}') {
			if (depth == 0)
				return p;	/* end of the enclosing object */
			if (--depth == 0)
				return p + 1;
		} else if (c == ',' && depth == 0)
			return p;
	}
	return depth == 0 && !in_str ? p : NULL;
}

/* Calls fn for each member: key (without quotes, escapes kept) and value text. */
typedef bool (*member_fn)(const char *k, size_t kl, const char *v, size_t vl, void *arg);

static bool members(const char *obj, member_fn fn, void *arg)
{
	const char *p = obj;
	while (*p == ' ' || *p == '\n')
		p++;
	if (*p++ != '{')
		return false;
	while (*p && *p != '}') {
		if (*p == ',')
			p++;
		if (*p != '"')
			return false;
		const char *k = ++p;
		while (*p && *p != '"') {
			if (*p == '\\' && p[1])
				p++;
			p++;
		}
		if (*p != '"')
			return false;
		size_t kl = (size_t)(p - k);
		if (*++p != ':')
			return false;
		const char *v = ++p;
		const char *e = value_end(v);
		if (!e || e == v)
			return false;
		if (!fn(k, kl, v, (size_t)(e - v), arg))
			return true;	/* stopped early by fn */
		p = e;
	}
	return *p == '}';
}

struct find {
	const char *key;
	const char *val;
	size_t vl;
	bool found;
};

static bool find_cb(const char *k, size_t kl, const char *v, size_t vl, void *arg)
{
	struct find *f = arg;
	if (strlen(f->key) == kl && !memcmp(f->key, k, kl)) {
		f->val = v;
		f->vl = vl;
		f->found = true;
		return false;
	}
	return true;
}

bool jsonmatch_get(const char *obj, const char *key, char *out, size_t outlen)
{
	struct find f = { .key = key };
	if (!members(obj, find_cb, &f) || !f.found || f.vl + 1 > outlen)
		return false;
	memcpy(out, f.val, f.vl);
	out[f.vl] = 0;
	return true;
}

struct cmp {
	const char *actual;
	char *why;
	size_t whylen;
	bool ok;
};

static bool cmp_cb(const char *k, size_t kl, const char *v, size_t vl, void *arg)
{
	struct cmp *c = arg;
	char key[128];
	if (kl >= sizeof(key)) {
		snprintf(c->why, c->whylen, "expected key too long");
		c->ok = false;
		return false;
	}
	memcpy(key, k, kl);
	key[kl] = 0;
	struct find f = { .key = key };
	if (!members(c->actual, find_cb, &f) || !f.found) {
		snprintf(c->why, c->whylen, "key \"%s\": missing", key);
		c->ok = false;
		return false;
	}
	if (f.vl != vl || memcmp(f.val, v, vl)) {
		snprintf(c->why, c->whylen, "key \"%s\": expected %.*s, got %.*s", key, (int)vl, v,
			 (int)f.vl, f.val);
		c->ok = false;
		return false;
	}
	return true;
}

bool jsonmatch_subset(const char *actual, const char *expected, char *why, size_t whylen)
{
	struct cmp c = { actual, why, whylen, true };
	struct find dummy = { .key = "" };
	if (!members(actual, find_cb, &dummy)) {
		snprintf(why, whylen, "actual is not a JSON object: %.80s", actual);
		return false;
	}
	if (!members(expected, cmp_cb, &c)) {
		snprintf(why, whylen, "expected is not a JSON object: %.80s", expected);
		return false;
	}
	return c.ok;
}
