/* hexin.h: smcr-decode's hex text input (docs/parts/decode.md "Hex input").
 *
 * Accepted, exactly:
 *   - bytes as pairs of hex digits (either case); a token may hold several pairs
 *     ("e2d4c3d9") and may start with "0x"/"0X" ("0xe2d4"); an odd number of digits, or any
 *     other character in a token, is an error;
 *   - tokens separated by blanks (space, tab, CR, VT, FF) and newlines;
 *   - '#' starts a comment that runs to the end of the line;
 *   - an offset at the start of a line, as hexdump/text2pcap/xxd print it: the line's first
 *     token made of 4 to 8 hex digits (no 0x) that either ends with ':' or is followed by
 *     two or more blanks or a tab ("0000  e2 d4", "00000010: fe 80"). Its value must be 0
 *     (a new block starts) or the number of bytes read since the last offset 0; anything
 *     else is an error (it catches a mistyped or missing line). Offsets are not data.
 * Not accepted: hexdump -C's "|ascii|" column, od/hexdump word dumps, xxd's ASCII column.
 *
 * A parse is single-threaded and owns its buffer. */
#ifndef SMCR_DECODE_HEXIN_H
#define SMCR_DECODE_HEXIN_H

#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer (heap). */
struct bytebuf {
	uint8_t *p;
	size_t len, cap;
};

/* Appends n bytes; 0, or -1 when out of memory or the buffer would pass HEXIN_MAX_BYTES. */
int bytebuf_append(struct bytebuf *b, const void *src, size_t n);
void bytebuf_free(struct bytebuf *b);

#define HEXIN_MAX_BYTES (64u << 20)	/* 64 MiB of decoded bytes, far above any capture */

/* Parses len bytes of hex text (NULs are errors) and appends the bytes to out. 0 on
 * success; -1 with a one-line reason ("line 3: 'e2g4' is not hex") in err otherwise
 * (out then holds the bytes before the error). */
int hexin_parse(const char *text, size_t len, struct bytebuf *out, char *err, size_t errlen);

#endif
