/* print.h: the record printers of smcr-decode, one per message kind, with the JSON keys of
 * docs/parts/decode.md (the spec's field names in snake_case, docs/protocol/wire-formats.md
 * 1-7). */
#ifndef SMCR_DECODE_PRINT_H
#define SMCR_DECODE_PRINT_H

#include <stddef.h>

#include "dec.h"
#include "out.h"
#include "wire/cdc.h"
#include "wire/clc.h"
#include "wire/llc.h"

/* "clc.proposal", "llc.add_link", "cdc", ...: the "kind" of a message by its type bytes. */
const char *print_clc_kind(enum clc_type type);
const char *print_llc_kind(uint8_t type);

/* Starts a record and prints where it came from and its length. */
void print_begin(struct out *o, const char *kind, const struct dec_where *w, size_t len);

void print_clc(struct out *o, const struct clc_msg *m, const struct dec_where *w, size_t len);
void print_llc(struct out *o, const struct llc_msg *m, const struct dec_where *w);
void print_cdc(struct out *o, const struct cdc_msg *m, const struct dec_where *w, size_t len);

#endif
