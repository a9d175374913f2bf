#include <stdio.h>
#include <string.h>
#include "gen.h"
int main(int argc, char **argv)
{
	static struct gen_frame f[GEN_MAX_FRAMES];
	if (argc > 2 && !strcmp(argv[1], "--write")) {
		int n = gen_write(argv[2], f, GEN_MAX_FRAMES);
		printf("%d frames\n", n);
		return n < 0;
	}
	return 0;
}
