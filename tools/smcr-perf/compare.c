/* compare.c: `smcr-perf compare` (issue 6): TCP and SMC-R side by side, in the same run.
 *
 * Starts two servers on loopback, each in its own child process (forked before this
 * process makes any smcr call, so no engine state or thread is ever duplicated): a plain
 * TCP one and an smcr one, each on a port the kernel picks. Then, for each size, runs the
 * test over TCP and over SMC-R in turns (A B A B ..., o->rounds each) so slow drifts of a
 * shared machine hit both alike, and prints both medians and ratio = smcr / tcp.
 * Before the first size's measured rounds it runs o->warmup rounds of each transport, in the
 * same turns, kept apart from the medians and printed as such: a fresh process's first
 * round pays one-time costs (the first touch of new buffers; for conns, 1000 connections'
 * RMBs and send rings) that a long-running service pays once.
 * The children die with this process (PR_SET_PDEATHSIG) and are killed and reaped at the
 * end. */
#define _GNU_SOURCE
#include "compare.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "out.h"
#include "server.h"
#include "tr.h"
#include "util/log.h"

#define CMP_START_TIMEOUT_MS 10000

struct child {
	pid_t pid;
	uint16_t port;
};

/* Forks a server child for transport kind on 127.0.0.1 port 0 and reads its port back. */
static int start_server(const struct perf_opts *o, enum perf_trk kind, struct child *ch)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		struct perf_opts so = *o;
		so.cmd = PERF_CMD_SERVER;
		so.bind = "127.0.0.1";
		so.port = 0;
		so.once = false;
		so.transport = kind;
		_exit(perf_server_run(&so, tr_get(kind), p[1], true));
	}
	close(p[1]);
	ch->pid = pid;
	char line[16] = "";
	size_t got = 0;
	struct pollfd pfd = {.fd = p[0], .events = POLLIN};
	while (got < sizeof(line) - 1) {
		int r = poll(&pfd, 1, CMP_START_TIMEOUT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		ssize_t n = read(p[0], line + got, sizeof(line) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (memchr(line, '\n', got))
			break;
	}
	close(p[0]);
	line[got] = 0;
	int port = atoi(line);
	if (port <= 0 || port > 65535) {
		errno = ECHILD;
		return -1;
	}
	ch->port = (uint16_t)port;
	return 0;
}

static void stop_server(struct child *ch)
{
	if (ch->pid <= 0)
		return;
	kill(ch->pid, SIGTERM);
	while (waitpid(ch->pid, NULL, 0) < 0 && errno == EINTR)
		;
	ch->pid = 0;
}

static int run_one(const struct perf_opts *o, struct perf_session *sess, uint16_t port, size_t size,
                   struct perf_side *side)
{
	struct perf_client_cfg cfg;
	struct perf_result r;
	char err[512];
	memset(&cfg, 0, sizeof(cfg));
	cfg.tr = sess->tr;
	cfg.test = o->test;
	cfg.size = size;
	cfg.duration = o->duration;
	cfg.conns = o->conns;
	cfg.window = o->window;
	if (tr_resolve("127.0.0.1", port, false, &cfg.addr, &cfg.addrlen, err, sizeof(err)) < 0 ||
	    perf_client_run(&cfg, sess, &r, err, sizeof(err)) < 0) {
		fprintf(stderr, "smcr-perf compare: %s run: %s\n", cfg.tr->name, err);
		return -1;
	}
	perf_side_add(side, &r, cfg.tr->reason_name(r.local_reason),
	              cfg.tr->reason_name(r.peer_reason));
	return 0;
}

static int open_session(enum perf_trk kind, uint16_t port, struct perf_session *sess)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char err[512];
	if (tr_resolve("127.0.0.1", port, false, &ss, &sl, err, sizeof(err)) < 0 ||
	    perf_session_open(tr_get(kind), &ss, sl, sess, err, sizeof(err)) < 0) {
		fprintf(stderr, "smcr-perf compare: %s: %s\n", tr_kind_name(kind), err);
		return -1;
	}
	return 0;
}

int perf_compare_run(const struct perf_opts *o)
{
	struct child tcp = {0}, smcr = {0};
	struct perf_session stcp = {.ctrl = -1}, ssmcr = {.ctrl = -1};
	int rc = 1;

	if (!tr_get(o->cmp_smcr)) {
		fprintf(stderr, "smcr-perf compare: the smcr transport is not built in\n");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	/* both servers before this process's first smcr call (smcr.h: no use after fork) */
	if (start_server(o, PERF_TR_TCP, &tcp) < 0 || start_server(o, o->cmp_smcr, &smcr) < 0) {
		fprintf(stderr, "smcr-perf compare: cannot start the servers: %s\n",
		        strerror(errno));
		goto out;
	}
	if (o->cmp_smcr == PERF_TR_SMCR) {
		char rule[32];
		snprintf(rule, sizeof(rule), "127.0.0.1:%u", smcr.port);
		tr_smcr_rules("client", rule);
	}
	/* one control connection per transport for the whole compare: over SMC-R it keeps
	 * the link group up, so every measured connection reuses it */
	if (open_session(PERF_TR_TCP, tcp.port, &stcp) < 0 ||
	    open_session(o->cmp_smcr, smcr.port, &ssmcr) < 0)
		goto out;
	/* A person watching a terminal sees each round as it ends (a long run otherwise
	 * prints nothing for minutes); JSON, --dat and pipes get only the results. */
	bool progress = !o->json && !o->dat && isatty(STDOUT_FILENO);
	if (o->dat)
		perf_out_dat_header_cmp(stdout);
	if (o->json && o->nsizes > 1)
		fputc('[', stdout);
	for (size_t i = 0; i < o->nsizes; i++) {
		struct perf_cmp c;
		memset(&c, 0, sizeof(c));
		c.test = o->test;
		c.size = o->sizes[i];
		c.duration = o->duration;
		c.rounds = o->rounds;
		c.conns = o->conns;
		c.cpu = o->cpu;
		c.tcp.transport = c.warm_tcp.transport = PERF_TR_TCP;
		c.smcr.transport = c.warm_smcr.transport = o->cmp_smcr;
		for (unsigned k = 0; i == 0 && k < o->warmup; k++) {
			if (run_one(o, &stcp, tcp.port, c.size, &c.warm_tcp) < 0 ||
			    run_one(o, &ssmcr, smcr.port, c.size, &c.warm_smcr) < 0)
				goto out;
			if (progress)
				perf_out_cmp_progress(stdout, &c, k + 1, true);
		}
		for (unsigned k = 0; k < o->rounds; k++) {
			if (run_one(o, &stcp, tcp.port, c.size, &c.tcp) < 0 ||
			    run_one(o, &ssmcr, smcr.port, c.size, &c.smcr) < 0)
				goto out;
			if (progress)
				perf_out_cmp_progress(stdout, &c, k + 1, false);
		}
		perf_cmp_finish(&c);
		if (o->json) {
			if (i)
				fputc(',', stdout);
			perf_out_cmp_json(stdout, &c);
		} else if (o->dat) {
			perf_out_cmp_dat(stdout, &c);
		} else {
			if (i)
				fputc('\n', stdout);
			perf_out_cmp_text(stdout, &c);
		}
		fflush(stdout);
	}
	if (o->json) {
		if (o->nsizes > 1)
			fputc(']', stdout);
		fputc('\n', stdout);
	}
	rc = 0;
out:
	fflush(stdout);
	/* Killing the smcr server takes its end of the link group down: this process's engine
	 * then sees the link fail, as it should, and would say so at warn level. That is the
	 * expected end of a compare, so it is not printed (unless SMCR_LOG asks for it). */
	if (!getenv("SMCR_LOG"))
		smcr_log_set_level(SMCR_LOG_ERROR);
	if (stcp.tr)
		perf_session_close(&stcp);
	if (ssmcr.tr)
		perf_session_close(&ssmcr);
	stop_server(&tcp);
	stop_server(&smcr);
	return rc;
}
