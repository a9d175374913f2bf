/* compare.h: `smcr-perf compare` (compare.c). */
#ifndef SMCR_PERF_COMPARE_H
#define SMCR_PERF_COMPARE_H

#include "perf.h"

/* Runs the comparison and prints it (text, --json or --dat) on stdout. Returns the exit
 * status: 0, or 1 after a message on stderr. */
int perf_compare_run(const struct perf_opts *o);

#endif
