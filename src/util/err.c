/* err.c: lookups into the error table declared in err.h. */
#include "util/err.h"

#include <stddef.h>

struct err_row {
	const char *name;
	const char *msg;
	int errnum;
	uint32_t decline;
};

static const struct err_row err_rows[SMCR_E__COUNT] = {
#define X(n, e, d, m) [SMCR_E_##n] = { #n, m, e, d },
#include "util/errors/all.def"
#undef X
};

static const struct err_row *err_row(int code)
{
	if (code < 0)
		code = -code;
	if (code >= SMCR_E__COUNT)
		return NULL;
	return &err_rows[code];
}

const char *smcr_err_name(int code)
{
	const struct err_row *r = err_row(code);
	return r ? r->name : "UNKNOWN";
}

const char *smcr_err_msg(int code)
{
	const struct err_row *r = err_row(code);
	return r ? r->msg : "unknown error";
}

int smcr_err_errno(int code)
{
	const struct err_row *r = err_row(code);
	return r ? r->errnum : EIO;
}

uint32_t smcr_err_decline(int code)
{
	const struct err_row *r = err_row(code);
	return r ? r->decline : 0;
}
