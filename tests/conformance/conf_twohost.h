/* conf_twohost.h: the conformance suite's two-host mode (conf_twohost.c). */
#ifndef SMCR_TESTS_CONF_TWOHOST_H
#define SMCR_TESTS_CONF_TWOHOST_H

/* argv[0] is "--serve" (argv[1] the port) or "--remote" (argv[1] the host, argv[2] the
 * port); self is the suite's own path (the far end execs it as the killed peer). Returns
 * the exit code: 0 passed, 1 failed, 2 setup error. */
int conf_twohost_main(const char *self, int argc, char **argv);

#endif
