/* hexin.c: hex text to bytes for smcr-decode (rules in hexin.h). Hostile input: every read
 * is bounded by len, and the output is capped at HEXIN_MAX_BYTES. */
#include "hexin.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bytebuf_append(struct bytebuf *b, const void *src, size_t n)
{
	if (n > HEXIN_MAX_BYTES || b->len > HEXIN_MAX_BYTES - n)
		return -1;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, src, n);
	b->len += n;
	return 0;
}

void bytebuf_free(struct bytebuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static int fail(char *err, size_t errlen, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, unsigned line, const char *fmt, ...)
{
	char msg[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (errlen)
		snprintf(err, errlen, "hex input line %u: %s", line, msg);
	return -1;
}

/* Shows a token in an error message: at most 16 characters, non-printables as '?'. */
static void show(char *dst, size_t cap, const char *tok, size_t n)
{
	size_t i, m = n < 16 ? n : 16;
	for (i = 0; i < m && i + 1 < cap; i++)
		dst[i] = (tok[i] > 0x20 && tok[i] < 0x7f) ? tok[i] : '?';
	if (m < n && i + 4 < cap) {
		memcpy(dst + i, "...", 3);
		i += 3;
	}
	dst[i] = 0;
}

int hexin_parse(const char *text, size_t len, struct bytebuf *out, char *err, size_t errlen)
{
	unsigned line = 1;
	size_t since_zero = 0;	/* bytes since the last offset 0 (or the start) */
	size_t i = 0;
	bool line_start = true;	/* the next token is the first of its line */
	char shown[24];

	while (i < len) {
		char c = text[i];
		if (c == '\n') {
			line++;
			line_start = true;
			i++;
			continue;
		}
		if (is_blank(c)) {
			i++;
			continue;
		}
		if (c == '#') {
			while (i < len && text[i] != '\n')
				i++;
			continue;
		}
		/* A token: up to the next blank, newline, comment or end. */
		size_t s = i;
		while (i < len && !is_blank(text[i]) && text[i] != '\n' && text[i] != '#')
			i++;
		const char *tok = text + s;
		size_t n = i - s;
		bool first = line_start;
		line_start = false;

		if (first) {
			/* Offset? 4..8 hex digits, then ':' or two+ blanks / a tab (hexin.h). */
			size_t digits = n;
			bool colon = n > 0 && tok[n - 1] == ':';
			if (colon)
				digits--;
			bool all_hex = digits >= 4 && digits <= 8;
			for (size_t k = 0; all_hex && k < digits; k++)
				all_hex = hexval(tok[k]) >= 0;
			bool spaced = i < len && (text[i] == '\t' ||
						  (text[i] == ' ' && i + 1 < len &&
						   is_blank(text[i + 1])));
			if (all_hex && (colon || spaced)) {
				size_t v = 0;
				for (size_t k = 0; k < digits; k++)
					v = v << 4 | (size_t)hexval(tok[k]);
				if (v == 0) {
					since_zero = 0;
				} else if (v != since_zero) {
					show(shown, sizeof(shown), tok, n);
					return fail(err, errlen, line,
						    "offset '%s' does not match the %zu bytes read "
						    "since offset 0",
						    shown, since_zero);
				}
				continue;
			}
		}
		size_t k = 0;
		if (n >= 2 && tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'X'))
			k = 2;
		if (k == n || (n - k) % 2) {
			show(shown, sizeof(shown), tok, n);
			return fail(err, errlen, line, "'%s' is not whole bytes of hex (%s)", shown,
				    k == n ? "no digits" : "odd number of digits");
		}
		for (; k < n; k += 2) {
			int hi = hexval(tok[k]), lo = hexval(tok[k + 1]);
			if (hi < 0 || lo < 0) {
				show(shown, sizeof(shown), tok, n);
				return fail(err, errlen, line, "'%s' is not hex", shown);
			}
			uint8_t b = (uint8_t)(hi << 4 | lo);
			if (bytebuf_append(out, &b, 1))
				return fail(err, errlen, line, "more than %u bytes of input",
					    HEXIN_MAX_BYTES);
			since_zero++;
		}
	}
	return 0;
}
