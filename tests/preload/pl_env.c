/* pl_env: prints "preload" when libsmcr-preload.so is in this process's LD_PRELOAD, else
 * "plain"; built dynamic and static (pl_env_static) for smcr-run's own checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
	const char *p = getenv("LD_PRELOAD");
	puts(p && strstr(p, "libsmcr-preload.so") ? "preload" : "plain");
	return 0;
}
