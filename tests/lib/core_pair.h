/* core_pair.h: test helpers that run two engines in one process (STYLE.md 26): a client
 * and a server engine over an in-process provider, CLC bytes pumped between them through
 * memory instead of a TCP connection, time passed in (a fake clock), progress called by
 * the test. Used by tests/integration/test_core_*.c and tests/core/. */
#ifndef SMCR_TESTS_CORE_PAIR_H
#define SMCR_TESTS_CORE_PAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

/* The device spec tests use: $SMCR_TEST_DEV, else "loop". Registers loop (and shm if
 * available) first. */
const char *cp_dev_spec(void);
/* An engine on cp_dev_spec() (or spec if not NULL) with the given params (NULL: defaults;
 * devices are filled in). */
struct core_engine *cp_engine(const char *spec, const struct core_engine_params *p);

/* A simulated TCP byte stream in one direction. */
struct cp_stream {
	uint8_t buf[8192];
	size_t len;
	bool eof;
};

struct cp_pair {
	struct core_engine *ce, *se;
	struct core_conn *cli, *srv;
	struct cp_stream c2s, s2c;		/* TCP bytes in flight */
	struct core_clc_result rc, rs;		/* last step results */
	bool cli_done, srv_done;
	uint64_t now;				/* fake clock, ns */
	unsigned steps;
};

/* Params for both sides: loopback IPv4 127.0.0.1:port pairs, no prefixes, sizes. */
void cp_conn_params(struct core_conn_params *p, enum core_role role, uint32_t rcvbuf);

/* Creates both conns and drives the handshake until both are done or max_steps pass.
 * Returns 0 when both ended (any status), -1 otherwise. cli_params/srv_params may be NULL. */
int cp_connect(struct cp_pair *pp, struct core_engine *ce, struct core_engine *se,
	       const struct core_conn_params *cli_params, const struct core_conn_params *srv_params,
	       unsigned max_steps);
/* cp_connect with default params (50 steps) that ended in SMC-R on both sides. */
bool cp_connect_smc(struct cp_pair *pp, struct core_engine *ce, struct core_engine *se);
/* The same with these params (NULL: the defaults). */
bool cp_connect_smc_with(struct cp_pair *pp, struct core_engine *ce, struct core_engine *se,
			 const struct core_conn_params *cli_params,
			 const struct core_conn_params *srv_params);
/* A test's two engines on spec (cp_engine with default params; the device spec read
 * first): client *ce, server *se. 0, or -1 (what was made is freed, both NULL). */
int cp_engines(const char *spec, struct core_engine **ce, struct core_engine **se);
/* Frees the two engines (NULL skipped). */
void cp_engines_free(struct core_engine *ce, struct core_engine *se);
/* A cmocka fixture: *state is a struct cp_two with two engines on the default device. */
struct cp_two {
	struct core_engine *ce, *se;
};
int cp_two_setup(void **state);
int cp_two_teardown(void **state);
/* Both ends close (no abort) and the pair runs 3 rounds (the close protocol's messages). */
void cp_close_both(struct cp_pair *pp);
/* Real time for the handshakes of cp_connect (default off: the fake clock stands still
 * during a handshake): each round runs at the later of pp->now and smcr_now_ns(), for
 * tests on real-time providers (emu in namespaces) whose handshake may wait behind an LLC
 * flow that only a timer ends (a DELETE LINK answer lost with its link). */
void cp_set_realtime(bool on);
/* One round: step both handshakes (if not done), progress both engines. */
void cp_round(struct cp_pair *pp);
/* Progress both engines n times at pp->now. */
void cp_progress(struct cp_pair *pp, int n);
/* Releases both conns. */
void cp_release(struct cp_pair *pp);

/* Sends all of buf from a to b's peer, progressing both engines while the window is full,
 * reading on the other side into rbuf (single-threaded pump). Returns bytes moved or -1. */
long cp_pump(struct cp_pair *pp, struct core_conn *tx, struct core_conn *rx, const uint8_t *buf,
	     size_t len, uint8_t *rbuf, size_t wmax);

/* Deterministic bytes (xorshift) for transfers. */
void cp_fill(uint8_t *buf, size_t len, uint64_t seed);



/* A reproducible byte stream: byte i of stream seed is the same wherever it is generated,
 * so a receiver checks any range without keeping what was sent. */
void cp_stream_fill(uint8_t *buf, uint64_t off, size_t len, uint64_t seed);
/* Index of the first byte of buf that differs from the stream, or -1 if all match. */
long cp_stream_check(const uint8_t *buf, uint64_t off, size_t len, uint64_t seed);
/* Receives what rx has, up to cap bytes into buf, checks them against stream seed at *got
 * and advances *got: 1 if bytes came, 0 if none were there (AGAIN), -1 on any other
 * result or a byte that differs from the stream. */
int cp_stream_recv(struct core_conn *rx, uint8_t *buf, size_t cap, uint64_t *got,
		   uint64_t seed);
/* xorshift64 step for test randomness. */
uint64_t cp_rand(uint64_t *s);
/* SMCR_TEST_QUICK set (sanitizer stages): big transfers are cut down. */
bool cp_quick(void);
#endif
