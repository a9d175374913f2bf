/* client.h: one smcr-perf test over one transport with one size (client.c). */
#ifndef SMCR_PERF_CLIENT_H
#define SMCR_PERF_CLIENT_H

#include <stdbool.h>
#include <sys/socket.h>

#include "perf.h"
#include "tr.h"

struct perf_client_cfg {
	const struct perf_tr *tr;
	struct sockaddr_storage addr;	/* the server */
	socklen_t addrlen;
	enum perf_test test;
	size_t size;
	double duration;		/* seconds */
	unsigned conns;			/* conns test */
};

/* Connects a control connection, runs the test between BEGIN and END, and fills *r (CPU
 * figures always; the caller prints them with --cpu). Returns 0, or -1 with a message in
 * err (connection refused, data lost, the server timed out, ...). Single-threaded; the
 * only blocking calls are the transport's, each bounded by a receive timeout. */
int perf_client_run(const struct perf_client_cfg *cfg, struct perf_result *r, char *err,
		    size_t elen);

#endif
