/* shmdir.h: a private rendezvous directory for the shm devices of one test process
 * (SMCR_SHM_DIR), so that parallel tests' devices never meet, removed with its files when
 * the process exits. */
#ifndef SMCR_TESTS_SHMDIR_H
#define SMCR_TESTS_SHMDIR_H

/* Creates /tmp/<prefix>-XXXXXX, sets SMCR_SHM_DIR to it and removes it at exit (atexit).
 * Once per process. 0, or -1 (errno). */
int shmdir_make(const char *prefix);

#endif
