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
#include "wire/clc_v2.h"
#include "wire/llc_v2.h"

/* "clc.proposal", "llc.add_link", "cdc", ...: the "kind" of a message by its type bytes. */
const char *print_clc_kind(enum clc_type type);
const char *print_llc_kind(uint8_t type);

/* Starts a record and prints where it came from and its length. */
void print_begin(struct out *o, const char *kind, const struct dec_where *w, size_t len);

void print_clc(struct out *o, const struct clc_msg *m, const struct dec_where *w, size_t len);
void print_llc(struct out *o, const struct llc_msg *m, const struct dec_where *w);
/* The fields of an LLC message after its record's start (shared with the v2 printer). */
void print_llc_body(struct out *o, const struct llc_msg *m);
/* The v1 Accept/Confirm fields (the v2 ones start with them). */
void print_accept(struct out *o, const struct clc_accept *a);

/* SMC-R v2 (print_v2.c): the Proposal's v2 extension fields, the v2 Accept/Confirm and
 * the v2 LLC messages (docs/parts/decode.md, v2 keys). */
void print_v2ext(struct out *o, const struct clc_proposal *p);
void print_accept_v2(struct out *o, const struct clc_accept_v2 *a, enum clc_type type,
		     const struct dec_where *w, size_t len);
const char *print_llc2_kind(uint8_t type);
void print_llc2(struct out *o, const struct llc2_msg *m, const struct dec_where *w);

void print_cdc(struct out *o, const struct cdc_msg *m, const struct dec_where *w, size_t len);

#endif
