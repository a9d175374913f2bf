/* errmap.c: internal code -> errno, in one place (errmap.h). */
#include "sock/errmap.h"

#include <stdio.h>

int sock_errno_of(int code)
{
	if (code < 0)
		code = -code;
	if (code >= SOCK_ERRNO_BASE)
		return code - SOCK_ERRNO_BASE;
	return smcr_err_errno(code);
}

const char *sock_err_name(int code)
{
	static _Thread_local char buf[48];
	int c = code < 0 ? -code : code;
	if (c >= SOCK_ERRNO_BASE) {
		snprintf(buf, sizeof(buf), "errno %d", c - SOCK_ERRNO_BASE);
		return buf;
	}
	return smcr_err_name(code);
}
