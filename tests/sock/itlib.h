/* itlib.h: helpers for the socket layer's two-process integration tests (tests/sock/it_*.c).
 *
 * Each test forks: the children run the server and the client on the smcr API, each its
 * own SMC-R instance (one engine per process, docs/protocol/linux-interop.md 5). A child never uses
 * cmocka (a failed assert would longjmp into the copied test runner): it checks with
 * IT_CHECK, which prints the place and _exit(1)s, and the parent asserts on the exit
 * status. The device each process opens comes from it_child_env(): the same-host provider
 * ("shm") when it is built, else the emulated one on a loopback address of its own. */
#ifndef SMCR_TESTS_SOCK_ITLIB_H
#define SMCR_TESTS_SOCK_ITLIB_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include <smcr/smcr.h>

#define IT_CHECK(cond)                                                                  \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "[child %d] %s:%d: check failed: %s (errno %d)\n",  \
				(int)getpid(), __FILE__, __LINE__, #cond, errno);        \
			if (getenv("IT_HANG"))                                          \
				sleep(60); /* time to attach a debugger */              \
			_exit(1);                                                       \
		}                                                                       \
	} while (0)

/* Per-process device and timers: sets SMCR_DEVICES (and a shared shm directory or a
 * loopback address per role) before the process's first smcr call. role: 0 server,
 * 1 client, 2.. more processes. */
void it_child_env(int role);
/* The test's SMCR_RULES (both roles), applied now (rules_reload). */
void it_rules(const char *rules);
/* Runs fn(arg) in a child; returns its pid. The child _exit()s with fn's return value. */
pid_t it_fork(int (*fn)(void *arg), void *arg);
/* Waits for pid; returns its exit status, or 128 + signal. With timeout_ms > 0, kills it
 * after that long (and returns 200). */
int it_wait(pid_t pid, int timeout_ms);
/* The usual two-process run: forks the server srv(sarg), then the client cli(carg), closes
 * the parent's copy of the listener lfd (the children inherited it) and waits for both,
 * the client first, each with timeout_ms as it_wait. Returns 0 when both exited 0, else
 * the client's status if it failed, else the server's (the failing side is logged). */
int it_run_pair(int lfd, int (*srv)(void *), void *sarg, int (*cli)(void *), void *carg,
		int timeout_ms);

/* Listening smcr socket on 127.0.0.1 (or ::1 with v6), port chosen by the kernel. */
int it_listen(bool v6, uint16_t *port);
/* Blocking smcr connect to 127.0.0.1:port (or ::1). */
int it_connect(bool v6, uint16_t port);
/* In a server child: it_child_env(0), a blocking accept on lfd, lfd closed, the connection
 * checked to run SMC-R (the child exits 1 otherwise). Returns the accepted fd. */
/* The usual pair over SMC-R: rules "use smc both * *", a listener on IPv4 loopback (its fd
 * and port stored in *lfd and *port before the children fork, so they see them), then
 * it_run_pair. Returns -1 (with a message) when the listener cannot be made. */
int it_run_smc_pair(int *lfd, uint16_t *port, int (*srv)(void *), void *sarg,
		    int (*cli)(void *), void *carg, int timeout_ms);
int it_accept_smc(int lfd);
/* A client child's connection over SMC-R: its env, the inherited listener closed, connect
 * to port, SMC-R checked. */
int it_client_smc(int lfd, uint16_t port);
/* A pipe-free rendezvous: the parent creates the listener before forking, so children
 * need nothing else. */

/* Full write / read of n bytes (blocking smcr calls); false on error or early EOF. */
bool it_write_all(int fd, const void *buf, size_t n);
bool it_read_all(int fd, void *buf, size_t n);
/* Reads until EOF; returns bytes read, -1 on error. Hashes them into sha (may be NULL). */
struct it_sha;
long long it_read_to_eof(int fd, struct it_sha *sha, size_t chunk);

/* SHA-256 (OpenSSL libcrypto, tests only). */
struct it_sha *it_sha_new(void);
void it_sha_update(struct it_sha *s, const void *p, size_t n);
void it_sha_final(struct it_sha *s, uint8_t out[32]); /* frees s */
/* Deterministic pseudo-random bytes (xorshift64*), seed != 0. */
void it_fill_random(void *buf, size_t n, uint64_t *seed);

/* getsockopt(SOL_SMCR, SMCR_INFO). */
bool it_info(int fd, struct smcr_info *in);
/* Number of fds open in this process (/proc/self/fd). */
int it_count_fds(void);

/* CLOCK_MONOTONIC in ms. */
long long it_now_ms(void);
/* Waits for a state, not a time: calls cond(arg) every step_us until it returns true or
 * timeout_ms have passed; returns its last answer (asked once more at the end). */
bool it_poll_until(bool (*cond)(void *arg), void *arg, int timeout_ms, int step_us);
/* This process's engine's counters (the child fails with IT_CHECK when it has none). */
struct core_engine_stats;
void it_engine_stats(struct core_engine_stats *st);
/* Waits (up to 5 s) until this process's engine holds no connection (both sides' closes
 * done and the connections released); false, with a message, if it did not happen. */
bool it_engine_conns_gone(void);
/* Lists them on stderr (debugging a growth). */
void it_list_fds(const char *tag);

/* Prints the socket's engine and readiness state (debugging a failure). */
void it_debug_state(int fd, const char *tag);

/* Shared memory between parent and children (anonymous MAP_SHARED). */
void *it_shared(size_t n);
/* main()'s start: IT_EMU_PORT from the pid (20000-39999), so parallel tests' emu devices
 * do not meet. */
void it_emu_port_env(void);
struct CMUnitTest;
/* An it_ test's run: it_emu_port_env, $IT_FILTER (only the tests it matches), then the
 * cmocka group tests[0..n) without fixtures; its exit status. */
int it_main(const struct CMUnitTest *tests, size_t n);
#define IT_MAIN(tests) it_main(tests, sizeof(tests) / sizeof((tests)[0]))
/* Wait (up to 10 s, polling every 0.5 ms) until *v >= want: the stage handshake between
 * the two processes of a test through it_shared memory; IT_CHECK fails after that. */
void it_wait_at_least(_Atomic int *v, int want);

/* An echo server's record of what it accepted (in it_shared memory): per connection its
 * mode, reasons and first 5 bytes; n is published after each connection's fields. */
#define IT_ECHO_MAX 16
struct it_echo_rec {
	_Atomic int n;
	int mode[IT_ECHO_MAX];
	uint32_t local[IT_ECHO_MAX], peer[IT_ECHO_MAX];
	char data[IT_ECHO_MAX][8];
};
/* A server child's body: accepts expect (at most IT_ECHO_MAX) connections on lfd in turn,
 * records each in r and echoes its first 5 bytes back. 0 (IT_CHECK fails otherwise). */
int it_echo_server(int lfd, struct it_echo_rec *r, int expect);
/* A client child's body: connects over SMC-R (it_client_smc), sends "real!" and reads it
 * back. 0 (IT_CHECK fails otherwise). */
int it_real_client(int lfd, uint16_t port);
/* The engine's spinners (threads holding core_engine_spin_begin): 0 when nobody polls and
 * the CQs may be armed. */
unsigned it_engine_spinners(void);

/* A fake CLC peer on a plain TCP socket (it_clc, it_clcspin): write all n bytes; read one
 * whole CLC message within timeout_ms per read (its length from the header, at most cap)
 * and return its length; encode m into out. Each fails the test (IT_CHECK) otherwise. */
struct clc_msg;
int it_raw_connect(uint16_t port); /* a plain libc TCP connect to 127.0.0.1:port */
void it_raw_write(int fd, const void *b, size_t n);
size_t it_raw_read_clc(int fd, uint8_t *buf, size_t cap, int timeout_ms);
size_t it_clc_enc(const struct clc_msg *m, uint8_t *out, size_t cap);
/* A raw client's Proposal (SMC-R v1 fields only): peer instance, the last byte of an
 * IPv4-mapped 127.0.0.x GID, the IPv4 prefix it offers and its path (CLC_PATH_*). */
size_t it_clc_proposal(uint8_t *out, size_t cap, uint16_t instance, uint8_t gid_last,
		       uint32_t subnet, uint8_t plen, uint8_t path);

#endif
