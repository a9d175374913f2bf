/* client.h: one smcr-perf test over one transport with one size (client.c). */
#ifndef SMCR_PERF_CLIENT_H
#define SMCR_PERF_CLIENT_H

#include <stdbool.h>
#include <sys/socket.h>

#include "perf.h"
#include "tr.h"

struct perf_client_cfg {
	const struct perf_tr *tr;
	struct sockaddr_storage addr; /* the server */
	socklen_t addrlen;
	enum perf_test test;
	size_t size;
	double duration; /* seconds */
	unsigned conns;  /* conns test */
	size_t window;   /* SO_SNDBUF/SO_RCVBUF of data sockets, 0 = default */
};

/* A control connection to a server (proto.h): one per client, kept open across runs, so
 * over SMC-R the link group it brings up stays up and every measured connection reuses it.
 * The server's session lives as long as it. */
struct perf_session {
	const struct perf_tr *tr;
	int ctrl; /* -1 when closed */
	uint64_t id;
	/* this process's resident memory (proc.h) before the session's first connection: the
	 * base of conns' memory figure over smcr (see perf_client_run) */
	uint64_t mem_base_kib;
};

/* Connects and checks the server answers (a BEGIN). Returns 0, or -1 with a message. */
int perf_session_open(const struct perf_tr *tr, const struct sockaddr_storage *addr,
                      socklen_t addrlen, struct perf_session *sess, char *err, size_t elen);
void perf_session_close(struct perf_session *sess);

/* Runs the test between BEGIN and END on the session (same transport as cfg) and fills *r
 * (CPU figures always; the caller prints them with --cpu). Returns 0, or -1 with a message
 * in err (connection refused, data lost, the server timed out, ...); after a failure the
 * session is only good for closing. Single-threaded; the only blocking calls are the
 * transport's, each bounded by a receive timeout. */
int perf_client_run(const struct perf_client_cfg *cfg, struct perf_session *sess,
                    struct perf_result *r, char *err, size_t elen);

#endif
