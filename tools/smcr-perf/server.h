/* server.h: `smcr-perf server` (server.c). */
#ifndef SMCR_PERF_SERVER_H
#define SMCR_PERF_SERVER_H

#include <stdbool.h>

#include "perf.h"
#include "tr.h"

/* Serves until killed (or, with o->once, until the first control session ends: returns 0).
 * report_fd >= 0: after listen, writes the bound port as a decimal line there and closes it
 * (compare starts servers on port 0). One server per process. Returns 1 on a set-up error. */
int perf_server_run(const struct perf_opts *o, const struct perf_tr *tr, int report_fd, bool quiet);

#endif
