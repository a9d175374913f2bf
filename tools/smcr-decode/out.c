/* out.c: text and JSON output of smcr-decode records (out.h). The JSON writer is our own:
 * objects, arrays, numbers, booleans and escaped strings, one record per line. */
#define _POSIX_C_SOURCE 200809L
#include "out.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <string.h>

void out_init(struct out *o, FILE *f, enum out_mode mode)
{
	memset(o, 0, sizeof(*o));
	o->f = f;
	o->mode = mode;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one (RFC 3629 4). */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)	/* also stops at the terminating NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and values above U+10FFFF are not valid. */
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void json_write_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	fputc('"', f);
	while (*p) {
		unsigned char c = *p;
		switch (c) {
		case '"': fputs("\\\"", f); p++; continue;
		case '\\': fputs("\\\\", f); p++; continue;
		case '\b': fputs("\\b", f); p++; continue;
		case '\f': fputs("\\f", f); p++; continue;
		case '\n': fputs("\\n", f); p++; continue;
		case '\r': fputs("\\r", f); p++; continue;
		case '\t': fputs("\\t", f); p++; continue;
		default: break;
		}
		if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			p++;
			continue;
		}
		size_t n = utf8_len(p);
		if (n == 0) {
			fputs("\\ufffd", f);
			p++;
			continue;
		}
		fwrite(p, 1, n, f);
		p += n;
	}
	fputc('"', f);
}

/* JSON: the separator and key of the next member; text: the start of a "key: " line. */
static void key(struct out *o, const char *k)
{
	int d = o->depth;
	if (o->mode == OUT_JSON) {
		if (!o->first[d])
			fputc(',', o->f);
		o->first[d] = false;
		if (!o->in_list[d] && k) {
			json_write_string(o->f, k);
			fputc(':', o->f);
		}
		return;
	}
	if (o->in_list[d])	/* a scalar element: "rkeys[2]: " */
		fprintf(o->f, "  %s[%u]: ", o->path, o->index[d]++);
	else
		fprintf(o->f, "  %s%s: ", o->path, k ? k : "");
}

static void text_end(struct out *o)
{
	if (o->mode == OUT_TEXT)
		fputc('\n', o->f);
}

void out_begin(struct out *o, const char *kind)
{
	o->depth = 1;
	o->first[1] = true;
	o->in_list[1] = false;
	o->path[0] = 0;
	if (o->mode == OUT_JSON) {
		fputc('{', o->f);
		key(o, "kind");
		json_write_string(o->f, kind);
	} else {
		fprintf(o->f, "%s\n", kind);
	}
}

void out_end(struct out *o)
{
	/* JSON: one object per line; text: a blank line between records. */
	fputs(o->mode == OUT_JSON ? "}\n" : "\n", o->f);
	o->depth = 0;
	fflush(o->f);
}

void out_uint(struct out *o, const char *k, uint64_t v)
{
	key(o, k);
	fprintf(o->f, "%" PRIu64, v);
	text_end(o);
}

void out_int(struct out *o, const char *k, int64_t v)
{
	key(o, k);
	fprintf(o->f, "%" PRId64, v);
	text_end(o);
}

void out_uint_x(struct out *o, const char *k, uint64_t v, int digits)
{
	key(o, k);
	if (o->mode == OUT_JSON)
		fprintf(o->f, "%" PRIu64, v);
	else
		fprintf(o->f, "%" PRIu64 " (0x%0*" PRIx64 ")\n", v, digits, v);
}

void out_hex(struct out *o, const char *k, uint64_t v, int digits)
{
	key(o, k);
	if (o->mode == OUT_JSON)
		fprintf(o->f, "\"0x%0*" PRIx64 "\"", digits, v);
	else
		fprintf(o->f, "0x%0*" PRIx64 "\n", digits, v);
}

void out_bool(struct out *o, const char *k, bool v)
{
	key(o, k);
	fputs(v ? "true" : "false", o->f);
	text_end(o);
}

void out_str(struct out *o, const char *k, const char *s)
{
	key(o, k);
	if (o->mode == OUT_JSON) {
		json_write_string(o->f, s);
	} else {
		/* Text: our strings are printable ASCII; still never pass control bytes on. */
		for (const unsigned char *p = (const unsigned char *)s; *p; p++)
			fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, o->f);
		fputc('\n', o->f);
	}
}

void out_bytes(struct out *o, const char *k, const uint8_t *b, size_t n)
{
	char buf[2 * 64 + 1];
	size_t i;
	if (n > 64)
		n = 64;
	for (i = 0; i < n; i++)
		snprintf(buf + 2 * i, 3, "%02x", b[i]);
	buf[2 * n] = 0;
	out_str(o, k, buf);
}

void out_gid(struct out *o, const char *k, const uint8_t gid[16])
{
	char buf[INET6_ADDRSTRLEN];
	if (!inet_ntop(AF_INET6, gid, buf, sizeof(buf)))
		snprintf(buf, sizeof(buf), "?");
	out_str(o, k, buf);
}

void out_mac(struct out *o, const char *k, const uint8_t mac[6])
{
	char buf[18];
	snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2],
		 mac[3], mac[4], mac[5]);
	out_str(o, k, buf);
}

void out_ipv4(struct out *o, const char *k, uint32_t addr)
{
	char buf[16];
	snprintf(buf, sizeof(buf), "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 0xff,
		 (addr >> 8) & 0xff, addr & 0xff);
	out_str(o, k, buf);
}

static void push(struct out *o, bool list)
{
	if (o->depth + 1 >= OUT_MAX_DEPTH)
		return;	/* printers nest at most 3 deep; never reached */
	o->depth++;
	o->first[o->depth] = true;
	o->in_list[o->depth] = list;
	o->index[o->depth] = 0;
	o->pathlen[o->depth] = strlen(o->path);
}

static void pop(struct out *o)
{
	o->path[o->pathlen[o->depth]] = 0;
	o->depth--;
}

void out_list_begin(struct out *o, const char *k)
{
	if (o->mode == OUT_JSON) {
		key(o, k);
		fputc('[', o->f);
	}
	push(o, true);
	/* Text: element fields print as "key[i].field". */
	size_t len = strlen(o->path);
	snprintf(o->path + len, sizeof(o->path) - len, "%s", k);
	o->pathlen[o->depth] = len;
}

void out_item_begin(struct out *o)
{
	size_t base = strlen(o->path);
	if (o->mode == OUT_JSON) {
		key(o, NULL);
		fputc('{', o->f);
	}
	unsigned i = o->index[o->depth]++;
	push(o, false);
	snprintf(o->path + base, sizeof(o->path) - base, "[%u].", i);
	o->pathlen[o->depth] = base;
}

void out_item_end(struct out *o)
{
	if (o->mode == OUT_JSON)
		fputc('}', o->f);
	pop(o);
}

void out_list_end(struct out *o)
{
	if (o->mode == OUT_JSON)
		fputc(']', o->f);
	pop(o);
}
