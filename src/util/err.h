/* err.h: the project's one error table (STYLE.md 11).
 *
 * Internal functions return 0 on success or a negative code -SMCR_E_x. Each code
 * carries the errno a program would see, the CLC decline diagnosis code where one
 * applies (docs/protocol/wire-formats.md 5.2) and a message. Translation to errno happens only
 * through smcr_err_errno(). */
#ifndef SMCR_UTIL_ERR_H
#define SMCR_UTIL_ERR_H

#include <errno.h>
#include <stdint.h>

enum smcr_err {
#define X(name, errnum, decline, msg) SMCR_E_##name,
#include "util/errors/all.def"
#undef X
	SMCR_E__COUNT
};

#define SMCR_MUST_CHECK __attribute__((warn_unused_result))

/* Name without prefix ("CLC_BAD_EYECATCHER"); accepts negative or positive codes.
 * Unknown codes give "UNKNOWN". */
const char *smcr_err_name(int code);
/* Human message. */
const char *smcr_err_msg(int code);
/* errno a program sees for this code (EIO for unknown codes). */
int smcr_err_errno(int code);
/* CLC peer diagnosis code to send in a Decline, 0 when none applies. */
uint32_t smcr_err_decline(int code);

#endif
