/* shmdir.c: a test process's own shm rendezvous directory (shmdir.h). */
#define _GNU_SOURCE
#include "lib/shmdir.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char shm_dir[256];

static void shmdir_remove(void)
{
	DIR *d = opendir(shm_dir);
	if (!d)
		return;
	struct dirent *e;
	char path[sizeof shm_dir + 300];
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(path, sizeof path, "%s/%s", shm_dir, e->d_name);
			unlink(path);
		}
	closedir(d);
	rmdir(shm_dir);
}

int shmdir_make(const char *prefix)
{
	int n = snprintf(shm_dir, sizeof shm_dir, "/tmp/%s-XXXXXX", prefix);
	if (n < 0 || (size_t)n >= sizeof shm_dir || !mkdtemp(shm_dir) ||
	    setenv("SMCR_SHM_DIR", shm_dir, 1))
		return -1;
	atexit(shmdir_remove);
	return 0;
}
