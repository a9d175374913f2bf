/* bpfpeers.h: the small TCP client and server the bpf tests run as forked peers (plain
 * sockets + the opt-in API of src/bpf/optin.h), and where they leave their results.
 *
 * Shared memory (struct peer_results) is written by the peers, each in its own half, and
 * read by the test process only after both exited (bpfenv_wait): no locking needed. */
#ifndef SMCR_TESTS_BPFPEERS_H
#define SMCR_TESTS_BPFPEERS_H

#include <stdint.h>

#include "bpf/optin.h"
#include "lib/bpfenv.h"

#define PEER_MAX_CONN 1024
#define PEER_MAX_LISTENERS 4
#define PEER_DEFAULT_CONN 1000

struct conn_rec {
	uint16_t port;    /* the client's port: pairs a server record with a client one */
	uint8_t result;   /* enum smcr_optin_result */
	uint8_t listener; /* server: which listener accepted */
	uint32_t flags;   /* SMCR_F_* as read */
};

struct peer_results {
	struct conn_rec srv[PEER_MAX_CONN];
	struct conn_rec cli[PEER_MAX_CONN];
	int nsrv, ncli;
	int enable_srv[PEER_MAX_LISTENERS]; /* smcr_optin_enable() of each listener */
	int enable_cli;                     /* of the first client socket */
	char err[256];                      /* first failure, if any */
};

struct srv_cfg {
	int family; /* AF_INET or AF_INET6 */
	int v6only; /* AF_INET6: 1 refuses v4-mapped clients */
	const char *addr;
	uint16_t port;
	int nlisteners; /* > 1: SO_REUSEPORT group */
	unsigned optin; /* bit i: listener i opts in */
	int fastopen;   /* TCP_FASTOPEN queue length, 0: off */
	int count;      /* connections to accept */
	int ready_fd;   /* write end: one byte once listening */
	int timeout_ms;
	struct peer_results *res;
};

struct cli_cfg {
	int family;
	const char *addr;
	uint16_t port;
	int optin;
	int count;
	int parallel; /* all connections at once, non-blocking */
	int fastopen; /* first byte with sendto(MSG_FASTOPEN) */
	int ready_fd; /* read end: waits for the server's byte */
	int timeout_ms;
	struct peer_results *res;
};

/* Peer bodies for bpfenv_spawn (arg: struct srv_cfg * / struct cli_cfg *). Return 0 on
 * success, else a nonzero exit code with res->err filled. */
int peer_server(void *arg);
int peer_client(void *arg);

/* Where a peer runs: covered (1: T/in, 0: T/out, 2: T/in/sub) and network namespace. */
struct side {
	int covered;
	const char *netns;
};

/* What a case produced, counted over its connections. */
struct outcome {
	int smc, plain;
	int cli_counts[SMCR_OPTIN__COUNT];
	int srv_counts[SMCR_OPTIN__COUNT];
	int per_listener_smc[PEER_MAX_LISTENERS];
	int per_listener_plain[PEER_MAX_LISTENERS];
};

/* Runs a server and a client peer (count connections, default 1000) and asserts (cmocka)
 * that both peers succeeded and that the two ends agree on every connection. */
void peers_run(const struct bpfenv *env, struct srv_cfg *s, struct side ss, struct cli_cfg *c,
               struct side cs, struct outcome *o);
/* Asserts that all n connections ended with these results (prints the spread if not). */
void peers_expect_all(const struct outcome *o, int n, enum smcr_optin_result cli,
                      enum smcr_optin_result srv);

#endif
