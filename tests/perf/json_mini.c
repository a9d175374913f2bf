/* json_mini.c: recursive-descent JSON parser for the smcr-perf tests (json_mini.h). */
#include "json_mini.h"

#include <stdlib.h>
#include <string.h>

struct jp {
	const char *s;
	int depth;
};

static void ws(struct jp *p)
{
	while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')
		p->s++;
}

static void jv_clear(struct jv *v)
{
	free(v->str);
	for (size_t i = 0; i < v->n; i++) {
		jv_clear(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	memset(v, 0, sizeof(*v));
}

static bool parse_value(struct jp *p, struct jv *v);

static bool parse_string(struct jp *p, char **out)
{
	if (*p->s != '"')
		return false;
	p->s++;
	size_t cap = 16, n = 0;
	char *b = malloc(cap);
	if (!b)
		return false;
	for (;;) {
		char ch = *p->s++;
		if (ch == 0 || (unsigned char)ch < 0x20)
			goto bad;
		if (ch == '"')
			break;
		if (ch == '\\') {
			char e = *p->s++;
			switch (e) {
			case '"':
			case '\\':
			case '/':
				ch = e;
				break;
			case 'n':
				ch = '\n';
				break;
			case 't':
				ch = '\t';
				break;
			case 'r':
				ch = '\r';
				break;
			case 'b':
				ch = '\b';
				break;
			case 'f':
				ch = '\f';
				break;
			case 'u': {
				unsigned cp = 0;
				for (int i = 0; i < 4; i++) {
					char h = *p->s++;
					int d = h >= '0' && h <= '9'   ? h - '0'
					        : h >= 'a' && h <= 'f' ? h - 'a' + 10
					        : h >= 'A' && h <= 'F' ? h - 'A' + 10
					                               : -1;
					if (d < 0)
						goto bad;
					cp = cp << 4 | (unsigned)d;
				}
				if (cp > 0x7f)
					goto bad; /* the tool only escapes control characters */
				ch = (char)cp;
				break;
			}
			default:
				goto bad;
			}
		}
		if (n + 1 >= cap) {
			char *nb = realloc(b, cap * 2);
			if (!nb)
				goto bad;
			b = nb;
			cap *= 2;
		}
		b[n++] = ch;
	}
	b[n] = 0;
	*out = b;
	return true;
bad:
	free(b);
	return false;
}

static bool parse_number(struct jp *p, struct jv *v)
{
	const char *s = p->s;
	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (*s >= '1' && *s <= '9')
		while (*s >= '0' && *s <= '9')
			s++;
	else
		return false;
	if (*s == '.') {
		s++;
		if (!(*s >= '0' && *s <= '9'))
			return false;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!(*s >= '0' && *s <= '9'))
			return false;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	v->type = JV_NUM;
	v->num = strtod(p->s, NULL);
	p->s = s;
	return true;
}

static bool push(struct jv *v, size_t *cap)
{
	if (v->n < *cap)
		return true;
	size_t nc = *cap ? *cap * 2 : 4;
	struct jv *ni = realloc(v->items, nc * sizeof(*ni));
	if (!ni)
		return false;
	v->items = ni;
	if (v->type == JV_OBJ) {
		char **nk = realloc(v->keys, nc * sizeof(*nk));
		if (!nk)
			return false;
		v->keys = nk;
	}
	*cap = nc;
	return true;
}

static bool parse_container(struct jp *p, struct jv *v, char open, char close)
{
	size_t cap = 0;
	v->type = open == '[' ? JV_ARR : JV_OBJ;
	p->s++;
	ws(p);
	if (*p->s == close) {
		p->s++;
		return true;
	}
	for (;;) {
		if (!push(v, &cap))
			return false;
		struct jv *it = &v->items[v->n];
		memset(it, 0, sizeof(*it));
		if (v->type == JV_OBJ) {
			v->keys[v->n] = NULL;
			ws(p);
			if (!parse_string(p, &v->keys[v->n]))
				return false;
			ws(p);
			if (*p->s++ != ':') {
				v->n++;
				return false;
			}
		}
		v->n++;
		if (!parse_value(p, it))
			return false;
		ws(p);
		if (*p->s == ',') {
			p->s++;
			continue;
		}
		if (*p->s == close) {
			p->s++;
			return true;
		}
		return false;
	}
}

static bool parse_value(struct jp *p, struct jv *v)
{
	if (++p->depth > 64)
		return false;
	ws(p);
	bool ok;
	switch (*p->s) {
	case '{':
		ok = parse_container(p, v, '{', '}');
		break;
	case '[':
		ok = parse_container(p, v, '[', ']');
		break;
	case '"':
		v->type = JV_STR;
		ok = parse_string(p, &v->str);
		break;
	case 't':
		ok = strncmp(p->s, "true", 4) == 0;
		v->type = JV_BOOL;
		v->b = true;
		p->s += ok ? 4 : 0;
		break;
	case 'f':
		ok = strncmp(p->s, "false", 5) == 0;
		v->type = JV_BOOL;
		p->s += ok ? 5 : 0;
		break;
	case 'n':
		ok = strncmp(p->s, "null", 4) == 0;
		v->type = JV_NULL;
		p->s += ok ? 4 : 0;
		break;
	default:
		ok = parse_number(p, v);
		break;
	}
	p->depth--;
	return ok;
}

struct jv *jv_parse(const char *text)
{
	struct jp p = {text, 0};
	struct jv *v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	if (!parse_value(&p, v)) {
		jv_free(v);
		return NULL;
	}
	ws(&p);
	if (*p.s) {
		jv_free(v);
		return NULL;
	}
	return v;
}

void jv_free(struct jv *v)
{
	if (!v)
		return;
	jv_clear(v);
	free(v);
}

const struct jv *jv_get(const struct jv *v, const char *key)
{
	if (!v || v->type != JV_OBJ)
		return NULL;
	for (size_t i = 0; i < v->n; i++)
		if (v->keys[i] && strcmp(v->keys[i], key) == 0)
			return &v->items[i];
	return NULL;
}
