/* test_discovery.c: SMC-R discovery end to end (docs/protocol/procedures.md 2.1;
 * src/sock/discovery.h).
 *
 * Two forked peers in the test's own cgroup (bpfenv: T/in covered by the installed smcr
 * BPF programs, T/out not) and its own network namespace, talking over 127.0.0.1. A peer
 * is an smcr program (smcr API, no rules, SMCR_CONFIG pointing at a missing file) or a
 * plain TCP program (libc sockets, optionally opted in through bpf/optin.h by hand to play
 * a disagreeing peer). Every connection moves 192 KiB each way with the bytes checked, and
 * each smcr end reports its mode and reasons through the SOL_SMCR query.
 *
 * Cases: both smcr with the option installed -> SMC-R; a plain client or server -> TCP with
 * BPF_PEER_NO on the smcr side; not installed -> TCP with BPF_NOT_INSTALLED, or SMC-R by
 * the rules alone; a rule "use tcp" -> never opted in. Disagreement: a peer that opted in
 * but sends data / stays silent / answers the Proposal with garbage / never answers; a
 * plain client whose data starts with a CLC eyecatcher. Needs root (exit 77 otherwise). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <cmocka.h>

#include <smcr/smcr.h>

#include "bpf/optin.h"
#include "lib/bpfenv.h"

#define PORT 7311
#define NBYTES (192u * 1024u)

static struct bpfenv env;
static char ns[64];

enum peer_kind {
	P_SMCR,	       /* smcr API */
	P_PLAIN,       /* libc socket, not opted in */
	P_OPTIN,       /* libc socket opted in by hand (a peer that offers SMC-R) */
};
enum peer_act {
	A_EXCHANGE,    /* the checked exchange */
	A_GARBAGE,     /* server: answer whatever comes with non-CLC bytes */
	A_SILENT,      /* server: read what comes, say nothing until the client leaves */
};

struct side_res {
	int done;	    /* 1 when the peer got that far */
	int connect_errno;  /* client: errno of a failed connect, 0 ok */
	int mode;	    /* SOL_SMCR mode, -1 for plain peers */
	uint32_t local, peer;
	int data_ok;
	long long connect_ms;
	char err[160];
};
struct shared {
	struct side_res srv, cli;
};
static struct shared *sh;

struct peer {
	enum peer_kind kind;
	enum peer_act act;
	int covered;		/* 1: T/in (installed), 0: T/out */
	const char *rules;	/* SMCR_RULES, NULL none */
	int server_first;	/* the server talks first (client silent until then) */
	int clc_prefix;		/* client data starts with a CLC header (set on both peers) */
	const char *env[4];	/* extra NAME=VALUE for the peer */
	int pipe_r, pipe_w;	/* server -> client: listening */
	struct side_res *res;
};

static int pfail(struct side_res *r, const char *what)
{
	snprintf(r->err, sizeof(r->err), "%s (errno %d %s)", what, errno, strerror(errno));
	fprintf(stderr, "peer %d: %s\n", (int)getpid(), r->err);
	return 1;
}

static uint8_t pat(uint32_t i, uint8_t seed)
{
	return (uint8_t)(i * 131u + seed + (i >> 9));
}

static const uint8_t clc_hdr[8] = { 0xE2, 0xD4, 0xC3, 0xD9, 0x01, 0x00, 0x2c, 0x10 };

static uint8_t byte_at(uint32_t i, uint8_t seed, int clc)
{
	return clc && i < sizeof(clc_hdr) ? clc_hdr[i] : pat(i, seed);
}

static int send_pat(int fd, uint8_t seed, int clc)
{
	uint8_t buf[16384];
	for (uint32_t off = 0; off < NBYTES;) {
		uint32_t n = NBYTES - off < sizeof(buf) ? NBYTES - off : (uint32_t)sizeof(buf);
		for (uint32_t k = 0; k < n; k++)
			buf[k] = byte_at(off + k, seed, clc);
		for (uint32_t w = 0; w < n;) {
			ssize_t r = smcr_send(fd, buf + w, n - w, MSG_NOSIGNAL);
			if (r <= 0)
				return -1;
			w += (uint32_t)r;
		}
		off += n;
	}
	return 0;
}

/* Reads exactly NBYTES (to_eof: then expects EOF) and checks them. */
static int recv_pat(int fd, uint8_t seed, int clc, int to_eof)
{
	uint8_t buf[16384];
	uint32_t got = 0;
	for (;;) {
		size_t want = sizeof(buf);
		if (!to_eof && NBYTES - got < want)
			want = NBYTES - got;
		if (!to_eof && want == 0)
			return 0;
		ssize_t r = smcr_recv(fd, buf, want, 0);
		if (r < 0)
			return -1;
		if (r == 0)
			return got == NBYTES ? 0 : -2;
		for (ssize_t k = 0; k < r; k++)
			if (got + (uint32_t)k >= NBYTES || buf[k] != byte_at(got + (uint32_t)k, seed, clc))
				return -3;
		got += (uint32_t)r;
	}
}

static void peer_env(const struct peer *p)
{
	setenv("SMCR_DEVICES", "shm", 1);
	setenv("SMCR_CONFIG", "/nonexistent/smcr-discovery-test.conf", 1);
	if (!getenv("SMCR_LOG"))
		setenv("SMCR_LOG", "error", 1);
	if (p->rules)
		setenv("SMCR_RULES", p->rules, 1);
	else
		unsetenv("SMCR_RULES");
	for (int i = 0; i < 4 && p->env[i]; i++)
		putenv((char *)p->env[i]);
}

static void record(int fd, struct side_res *r, int kind)
{
	r->mode = -1;
	if (kind != P_SMCR)
		return;
	struct smcr_info in;
	socklen_t l = sizeof(in);
	if (smcr_getsockopt(fd, SOL_SMCR, SMCR_INFO, &in, &l) == 0) {
		r->mode = in.mode;
		r->local = in.local_reason;
		r->peer = in.peer_reason;
	}
}

static int make_socket(const struct peer *p)
{
	if (p->kind == P_SMCR)
		return smcr_socket(AF_INET, SOCK_STREAM, 0);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd >= 0 && p->kind == P_OPTIN) {
		int err = 0;
		if (smcr_optin_enable(fd, &err) != 0) {
			close(fd);
			errno = err ? err : ENOPROTOOPT;
			return -1;
		}
	}
	return fd;
}

static int server_body(void *arg)
{
	struct peer *p = arg;
	struct side_res *r = p->res;
	peer_env(p);
	close(p->pipe_r);
	int lfd = make_socket(p);
	if (lfd < 0)
		return pfail(r, "socket");
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (smcr_bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || smcr_listen(lfd, 8) < 0)
		return pfail(r, "bind/listen");
	if (write(p->pipe_w, "L", 1) != 1)
		return pfail(r, "ready pipe");
	int fd = smcr_accept(lfd, NULL, NULL);
	if (fd < 0)
		return pfail(r, "accept");
	record(fd, r, p->kind);
	if (p->act == A_GARBAGE || p->act == A_SILENT) {
		char buf[512];
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 5000) == 1 && recv(fd, buf, sizeof(buf), 0) > 0)
			r->data_ok = 1; /* the Proposal came (as "data" to this disagreeing peer) */
		if (p->act == A_GARBAGE) {
			static const char g[] = "HTTP/1.0 400 Bad Request\r\n\r\nthis is not CLC at all!!";
			if (send(fd, g, sizeof(g), MSG_NOSIGNAL) < 0)
				return pfail(r, "send garbage");
		}
		/* until the client gives up (EOF or reset) */
		while (poll(&pf, 1, 10000) == 1 && recv(fd, buf, sizeof(buf), 0) > 0)
			;
		close(fd);
		r->done = 1;
		return 0;
	}
	if (p->server_first) {
		if (send_pat(fd, 0x5a, 0) < 0)
			return pfail(r, "server send");
		int rc = recv_pat(fd, 0x33, p->clc_prefix, 1);
		if (rc < 0)
			return pfail(r, rc == -3 ? "server: data differ" : "server recv");
	} else {
		int rc = recv_pat(fd, 0x33, p->clc_prefix, 1);
		if (rc < 0)
			return pfail(r, rc == -3 ? "server: data differ" : "server recv");
		if (send_pat(fd, 0x5a, 0) < 0)
			return pfail(r, "server send");
	}
	record(fd, r, p->kind); /* again: still the same mode after the data */
	r->data_ok = 1;
	smcr_close(fd);
	smcr_close(lfd);
	r->done = 1;
	exit(0); /* exit handlers: the engine finishes its closes */
}

static long long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int client_body(void *arg)
{
	struct peer *p = arg;
	struct side_res *r = p->res;
	peer_env(p);
	close(p->pipe_w);
	char c;
	struct pollfd pf = { .fd = p->pipe_r, .events = POLLIN };
	if (poll(&pf, 1, 10000) != 1 || read(p->pipe_r, &c, 1) != 1)
		return pfail(r, "server never listened");
	int fd = make_socket(p);
	if (fd < 0)
		return pfail(r, "socket");
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	long long t0 = now_ms();
	int rc = smcr_connect(fd, (struct sockaddr *)&a, sizeof(a));
	r->connect_ms = now_ms() - t0;
	if (rc < 0) {
		r->connect_errno = errno;
		record(fd, r, p->kind);
		smcr_close(fd);
		r->done = 1;
		exit(0);
	}
	record(fd, r, p->kind);
	if (p->server_first) {
		if (recv_pat(fd, 0x5a, 0, 0) < 0)
			return pfail(r, "client recv (server first)");
		if (send_pat(fd, 0x33, p->clc_prefix) < 0 || smcr_shutdown(fd, SHUT_WR) < 0)
			return pfail(r, "client send");
		char b;
		if (smcr_recv(fd, &b, 1, 0) != 0)
			return pfail(r, "client: no EOF");
	} else {
		if (send_pat(fd, 0x33, p->clc_prefix) < 0 || smcr_shutdown(fd, SHUT_WR) < 0)
			return pfail(r, "client send");
		int x = recv_pat(fd, 0x5a, 0, 1);
		if (x < 0)
			return pfail(r, x == -3 ? "client: data differ" : "client recv");
	}
	record(fd, r, p->kind);
	r->data_ok = 1;
	smcr_close(fd);
	r->done = 1;
	exit(0);
}

/* Runs one server and one client; asserts both ended (exit 0) in time. */
static void run(struct peer srv, struct peer cli)
{
	memset(sh, 0, sizeof(*sh));
	int pp[2];
	assert_int_equal(pipe(pp), 0);
	srv.pipe_r = cli.pipe_r = pp[0];
	srv.pipe_w = cli.pipe_w = pp[1];
	srv.res = &sh->srv;
	cli.res = &sh->cli;
	pid_t ps = bpfenv_spawn(&env, srv.covered, ns, server_body, &srv);
	pid_t pc = bpfenv_spawn(&env, cli.covered, ns, client_body, &cli);
	close(pp[0]);
	close(pp[1]);
	assert_true(ps > 0 && pc > 0);
	int sc = bpfenv_wait(pc, 30000);
	int ss = bpfenv_wait(ps, 30000);
	if (sc != 0 || ss != 0)
		fail_msg("client exit %d (%s), server exit %d (%s)", sc, sh->cli.err, ss,
			 sh->srv.err);
	assert_true(sh->cli.done && sh->srv.done);
}

static void expect(const struct side_res *r, int mode, uint32_t local, const char *who)
{
	if (r->mode != mode || r->local != local)
		fail_msg("%s: mode %s local %s (0x%08x) peer %s, want mode %s local %s (0x%08x)", who,
			 smcr_mode_name(r->mode), smcr_reason_name(r->local), r->local,
			 smcr_reason_name(r->peer), smcr_mode_name(mode), smcr_reason_name(local),
			 local);
}

/* ---- agreement ---- */

static void test_smcr_both_installed(void **state)
{
	(void)state;
	run((struct peer){ .kind = P_SMCR, .covered = 1 }, (struct peer){ .kind = P_SMCR, .covered = 1 });
	expect(&sh->srv, SMCR_MODE_SMCR, 0, "server");
	expect(&sh->cli, SMCR_MODE_SMCR, 0, "client");
	assert_true(sh->srv.data_ok && sh->cli.data_ok);
}

static void test_plain_client_installed(void **state)
{
	(void)state;
	run((struct peer){ .kind = P_SMCR, .covered = 1 }, (struct peer){ .kind = P_PLAIN, .covered = 1 });
	expect(&sh->srv, SMCR_MODE_TCP, SMCR_REASON_BPF_PEER_NO, "server");
	assert_string_equal(smcr_reason_name(sh->srv.local), "BPF_PEER_NO");
	assert_true(sh->srv.data_ok && sh->cli.data_ok);
}

static void test_plain_server_installed(void **state)
{
	(void)state;
	run((struct peer){ .kind = P_PLAIN, .covered = 1 }, (struct peer){ .kind = P_SMCR, .covered = 1 });
	expect(&sh->cli, SMCR_MODE_TCP, SMCR_REASON_BPF_PEER_NO, "client");
	assert_true(sh->srv.data_ok && sh->cli.data_ok);
}

static void test_plain_client_server_first_installed(void **state)
{
	(void)state;
	/* the server talks first: no first-byte wait, the option already said TCP */
	run((struct peer){ .kind = P_SMCR, .covered = 1, .server_first = 1 },
	    (struct peer){ .kind = P_PLAIN, .covered = 1, .server_first = 1 });
	expect(&sh->srv, SMCR_MODE_TCP, SMCR_REASON_BPF_PEER_NO, "server");
	assert_true(sh->srv.data_ok && sh->cli.data_ok);
}

static void test_not_installed(void **state)
{
	(void)state;
	run((struct peer){ .kind = P_SMCR, .covered = 0 }, (struct peer){ .kind = P_SMCR, .covered = 0 });
	expect(&sh->srv, SMCR_MODE_TCP, SMCR_REASON_BPF_NOT_INSTALLED, "server");
	expect(&sh->cli, SMCR_MODE_TCP, SMCR_REASON_BPF_NOT_INSTALLED, "client");
	assert_string_equal(smcr_reason_name(sh->cli.local), "BPF_NOT_INSTALLED");
	assert_true(sh->srv.data_ok && sh->cli.data_ok);
}

static void test_rules_only_not_installed(void **state)
{
	(void)state;
	/* without the option the rules are the discovery: smc-only listener, smc client */
	run((struct peer){ .kind = P_SMCR, .covered = 0, .rules = "use smc-only server * *" },
	    (struct peer){ .kind = P_SMCR, .covered = 0, .rules = "use smc client * 127.0.0.0/8" });
	expect(&sh->srv, SMCR_MODE_SMCR, 0, "server");
	expect(&sh->cli, SMCR_MODE_SMCR, 0, "client");
}

static void test_rule_tcp_installed(void **state)
{
	(void)state;
	/* "use tcp" never opts in: the server (opted in) sees no option */
	run((struct peer){ .kind = P_SMCR, .covered = 1 },
	    (struct peer){ .kind = P_SMCR, .covered = 1, .rules = "use tcp client * *:7311" });
	expect(&sh->cli, SMCR_MODE_TCP, SMCR_REASON_RULE_TCP, "client");
	expect(&sh->srv, SMCR_MODE_TCP, SMCR_REASON_BPF_PEER_NO, "server");
	assert_true(sh->srv.data_ok && sh->cli.data_ok);
}

static void test_installed_client_outside_cgroup(void **state)
{
	(void)state;
	/* the client's cgroup is not covered: it cannot offer; the server says PEER_NO */
	run((struct peer){ .kind = P_SMCR, .covered = 1 }, (struct peer){ .kind = P_SMCR, .covered = 0 });
	expect(&sh->cli, SMCR_MODE_TCP, SMCR_REASON_BPF_NOT_INSTALLED, "client");
	expect(&sh->srv, SMCR_MODE_TCP, SMCR_REASON_BPF_PEER_NO, "server");
	assert_true(sh->srv.data_ok && sh->cli.data_ok);
}

/* ---- disagreement ---- */

static void test_offering_client_sends_data(void **state)
{
	(void)state;
	/* the option said SMC, but the client talks its own protocol: no Proposal comes, the
	 * first bytes are not CLC -> fallback, nothing consumed */
	run((struct peer){ .kind = P_SMCR, .covered = 1 }, (struct peer){ .kind = P_OPTIN, .covered = 1 });
	expect(&sh->srv, SMCR_MODE_TCP, SMCR_REASON_PEERNOSMC, "server");
	assert_true(sh->srv.data_ok && sh->cli.data_ok);
}

static void test_offering_client_silent(void **state)
{
	(void)state;
	/* the Proposal never comes and the client waits for the server: the first-byte wait
	 * ends, TCP, the greeting and the reply arrive intact */
	long long t0 = now_ms();
	run((struct peer){ .kind = P_SMCR, .covered = 1, .server_first = 1,
			   .env = { "SMCR_SERVER_WAIT_MS=300" } },
	    (struct peer){ .kind = P_OPTIN, .covered = 1, .server_first = 1 });
	expect(&sh->srv, SMCR_MODE_TCP, SMCR_REASON_PEERNOSMC, "server");
	assert_true(sh->srv.data_ok && sh->cli.data_ok);
	assert_true(now_ms() - t0 < 10000);
}

static void test_clc_bytes_from_plain_client(void **state)
{
	(void)state;
	/* a client that did not offer sends bytes that start like CLC: the option said TCP,
	 * so they are the program's data, untouched */
	run((struct peer){ .kind = P_SMCR, .covered = 1, .clc_prefix = 1 },
	    (struct peer){ .kind = P_PLAIN, .covered = 1, .clc_prefix = 1 });
	expect(&sh->srv, SMCR_MODE_TCP, SMCR_REASON_BPF_PEER_NO, "server");
	assert_true(sh->srv.data_ok && sh->cli.data_ok);
}

static void test_offering_server_answers_garbage(void **state)
{
	(void)state;
	/* the option said SMC, the Proposal went out, the answer is not CLC: the connect
	 * fails (docs/protocol/procedures.md 2.2: malformed -> EPROTO) on the garbage, not at
	 * its CLC wait (60 s here, so that no load can blur the two) */
	run((struct peer){ .kind = P_OPTIN, .covered = 1, .act = A_GARBAGE },
	    (struct peer){ .kind = P_SMCR, .covered = 1, .env = { "SMCR_CLC_WAIT_MS=60000" } });
	assert_true(sh->srv.data_ok); /* the server did get a Proposal */
	if (sh->cli.connect_errno != EPROTO)
		fail_msg("connect errno %d (%s), want EPROTO", sh->cli.connect_errno,
			 strerror(sh->cli.connect_errno));
	assert_true(sh->cli.connect_ms < 30000);
}

static void test_offering_server_silent(void **state)
{
	(void)state;
	/* the option said SMC but the peer never answers the Proposal: the CLC wait ends
	 * (docs/protocol/procedures.md 2.2, 6 s by default) and the connect fails with
	 * ETIMEDOUT. The wait is set longer than the default (8 s), so that a lower bound
	 * alone shows the setting was used: load can lengthen a wait, never shorten it. */
	run((struct peer){ .kind = P_OPTIN, .covered = 1, .act = A_SILENT },
	    (struct peer){ .kind = P_SMCR, .covered = 1, .env = { "SMCR_CLC_WAIT_MS=8000" } });
	assert_true(sh->srv.data_ok);
	if (sh->cli.connect_errno != ETIMEDOUT)
		fail_msg("connect errno %d (%s), want ETIMEDOUT", sh->cli.connect_errno,
			 strerror(sh->cli.connect_errno));
	assert_true(sh->cli.connect_ms >= 7500);
}

static int group_setup(void **state)
{
	(void)state;
	sh = bpfenv_shared(sizeof(*sh));
	if (!sh || bpfenv_setup(&env, 1) != 0)
		return -1;
	return bpfenv_netns(&env, "d", ns, sizeof(ns));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smcr_both_installed),
		cmocka_unit_test(test_plain_client_installed),
		cmocka_unit_test(test_plain_server_installed),
		cmocka_unit_test(test_plain_client_server_first_installed),
		cmocka_unit_test(test_not_installed),
		cmocka_unit_test(test_rules_only_not_installed),
		cmocka_unit_test(test_rule_tcp_installed),
		cmocka_unit_test(test_installed_client_outside_cgroup),
		cmocka_unit_test(test_offering_client_sends_data),
		cmocka_unit_test(test_offering_client_silent),
		cmocka_unit_test(test_clc_bytes_from_plain_client),
		cmocka_unit_test(test_offering_server_answers_garbage),
		cmocka_unit_test(test_offering_server_silent),
	};
	return BPFENV_MAIN(tests, NULL, NULL, group_setup, bpfenv_group_teardown);
}
