/* clc_stub_tmp.c: temporary stubs so the headers can be committed early (replaced next). */
#include "wire/clc.h"
#include "wire/tcpopt.h"

int tcpopt_put(struct wcur *c) { (void)c; return -SMCR_E_NOTSUP; }
int tcpopt_put_aligned(struct wcur *c) { (void)c; return -SMCR_E_NOTSUP; }
int tcpopt_encode(void *b, size_t cap, size_t *o) { (void)b; (void)cap; (void)o; return -SMCR_E_NOTSUP; }
int tcpopt_encode_aligned(void *b, size_t cap, size_t *o) { (void)b; (void)cap; (void)o; return -SMCR_E_NOTSUP; }
int tcpopt_get(struct rcur *c) { (void)c; return -SMCR_E_NOTSUP; }
int tcpopt_decode(const void *b, size_t l) { (void)b; (void)l; return -SMCR_E_NOTSUP; }
int tcpopt_find(const void *b, size_t l, bool *f) { (void)b; (void)l; *f = false; return -SMCR_E_NOTSUP; }
int clc_peek_header(const void *b, size_t l, enum clc_type *t, uint16_t *m, uint8_t *v)
{ (void)b; (void)l; (void)t; (void)m; (void)v; return -SMCR_E_NOTSUP; }
void clc_proposal_init(struct clc_proposal *p) { (void)p; }
size_t clc_proposal_len(const struct clc_proposal *p) { (void)p; return 0; }
int clc_proposal_decode(const void *b, size_t l, struct clc_proposal *p) { (void)b; (void)l; (void)p; return -SMCR_E_NOTSUP; }
int clc_proposal_encode(const struct clc_proposal *p, void *b, size_t c, size_t *o) { (void)p; (void)b; (void)c; (void)o; return -SMCR_E_NOTSUP; }
int clc_accept_decode(const void *b, size_t l, enum clc_type t, struct clc_accept *a) { (void)b; (void)l; (void)t; (void)a; return -SMCR_E_NOTSUP; }
int clc_accept_encode(const struct clc_accept *a, enum clc_type t, void *b, size_t c, size_t *o) { (void)a; (void)t; (void)b; (void)c; (void)o; return -SMCR_E_NOTSUP; }
int clc_decline_decode(const void *b, size_t l, struct clc_decline *d) { (void)b; (void)l; (void)d; return -SMCR_E_NOTSUP; }
int clc_decline_encode(const struct clc_decline *d, void *b, size_t c, size_t *o) { (void)d; (void)b; (void)c; (void)o; return -SMCR_E_NOTSUP; }
const struct clc_decline_reason *clc_decline_lookup(uint32_t c) { (void)c; return NULL; }
const char *clc_decline_name(uint32_t c) { (void)c; return "UNKNOWN"; }
const char *clc_decline_class(uint32_t c) { (void)c; return "unknown"; }
const struct clc_decline_reason *clc_decline_table(size_t *n) { *n = 0; return NULL; }
int clc_decode(const void *b, size_t l, struct clc_msg *m) { (void)b; (void)l; (void)m; return -SMCR_E_NOTSUP; }
int clc_encode(const struct clc_msg *m, void *b, size_t c, size_t *o) { (void)m; (void)b; (void)c; (void)o; return -SMCR_E_NOTSUP; }
bool clc_msg_equal(const struct clc_msg *a, const struct clc_msg *b) { (void)a; (void)b; return false; }
const char *clc_type_name(enum clc_type t) { (void)t; return "?"; }
