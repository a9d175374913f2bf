/* out.h: smcr-decode's output: one record per decoded message, as text (one "key: value"
 * line per field under a header line) or as JSON (one object per line, a tiny writer of our
 * own that escapes strings per RFC 8259). The printers call the same functions in both
 * modes, so text and JSON always carry the same keys (docs/parts/decode.md).
 *
 * A struct out is used by one thread. */
#ifndef SMCR_DECODE_OUT_H
#define SMCR_DECODE_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum out_mode {
	OUT_TEXT,
	OUT_JSON,
};

#define OUT_MAX_DEPTH 8

struct out {
	FILE *f;
	enum out_mode mode;
	int depth;			/* 0 outside a record; 1 in the record's object */
	bool first[OUT_MAX_DEPTH];	/* JSON: no member written yet at this depth */
	bool in_list[OUT_MAX_DEPTH];	/* this depth is an array */
	unsigned index[OUT_MAX_DEPTH];	/* text: index of the current array element */
	char path[128];			/* text: "rkeys[0]." prefix of nested keys */
	size_t pathlen[OUT_MAX_DEPTH];	/* text: path length when the depth was entered */
};

void out_init(struct out *o, FILE *f, enum out_mode mode);

/* Starts a record: JSON '{"kind":"<kind>"', text a header line "<kind>". */
void out_begin(struct out *o, const char *kind);
/* Ends it: JSON "}\n", text nothing more (each field was its own line). */
void out_end(struct out *o);

/* Fields. key is a snake_case name; values are as documented per function. */
void out_uint(struct out *o, const char *key, uint64_t v);		/* JSON number */
void out_int(struct out *o, const char *key, int64_t v);		/* JSON number */
/* Number in JSON; text shows "v (0x<hex, digits wide>)". */
void out_uint_x(struct out *o, const char *key, uint64_t v, int digits);
/* "0x%0*x" string (ids, keys, addresses, codes). */
void out_hex(struct out *o, const char *key, uint64_t v, int digits);
void out_bool(struct out *o, const char *key, bool v);
void out_str(struct out *o, const char *key, const char *s);
/* Hex digits of n bytes, no separators, as a string. */
void out_bytes(struct out *o, const char *key, const uint8_t *b, size_t n);
/* IPv6 text of a 16-byte GID ("fe80::9a03:9bff:fe00:1"). */
void out_gid(struct out *o, const char *key, const uint8_t gid[16]);
/* "aa:bb:cc:dd:ee:ff". */
void out_mac(struct out *o, const char *key, const uint8_t mac[6]);
/* Dotted IPv4 text of a host-order address. */
void out_ipv4(struct out *o, const char *key, uint32_t addr);

/* Arrays of objects: out_list_begin(key), then per element out_item_begin / fields /
 * out_item_end, then out_list_end. */
void out_list_begin(struct out *o, const char *key);
void out_item_begin(struct out *o);
void out_item_end(struct out *o);
void out_list_end(struct out *o);

/* JSON string escaping (RFC 8259 7): writes s quoted to f. Control characters and DEL
 * become \uXXXX (or the short forms), '"' and '\\' are escaped, and bytes that are not
 * valid UTF-8 become U+FFFD. */
void json_write_string(FILE *f, const char *s);

#endif
