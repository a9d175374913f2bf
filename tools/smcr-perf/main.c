/* main.c: smcr-perf's entry point: parses the command line and runs server, client or
 * compare (issue 6; perf.h has the map of the files). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "compare.h"
#include "out.h"
#include "perf.h"
#include "proc.h"
#include "server.h"
#include "tr.h"
#include "util/log.h"

static int client_main(const struct perf_opts *o)
{
	const struct perf_tr *tr = tr_get(o->transport);
	struct perf_client_cfg cfg;
	struct perf_client_out out;
	char err[512], server[80];

	memset(&cfg, 0, sizeof(cfg));
	if (tr_resolve(o->host, o->port, false, &cfg.addr, &cfg.addrlen, err, sizeof(err)) < 0) {
		fprintf(stderr, "smcr-perf client: %s\n", err);
		return 1;
	}
	tr_fmt_addr((struct sockaddr *)&cfg.addr, server, sizeof(server));
	if (tr->kind == PERF_TR_SMCR)
		tr_smcr_rules("client", server);
	signal(SIGPIPE, SIG_IGN);
	perf_raise_nofile();
	cfg.tr = tr;
	cfg.test = o->test;
	cfg.duration = o->duration;
	cfg.conns = o->conns;
	cfg.window = o->window;
	out = (struct perf_client_out){.test = o->test,
	                               .transport = tr->name,
	                               .server = server,
	                               .duration = o->duration,
	                               .conns = o->conns,
	                               .cpu = o->cpu};
	struct perf_session sess;
	if (perf_session_open(tr, &cfg.addr, cfg.addrlen, &sess, err, sizeof(err)) < 0) {
		fprintf(stderr, "smcr-perf client: %s\n", err);
		return 1;
	}
	if (o->dat)
		perf_out_dat_header_client(stdout);
	else if (!o->json)
		perf_out_client_text_header(stdout, &out);
	if (o->json && o->nsizes > 1)
		fputc('[', stdout);
	for (size_t i = 0; i < o->nsizes; i++) {
		struct perf_result r;
		cfg.size = o->sizes[i];
		if (perf_client_run(&cfg, &sess, &r, err, sizeof(err)) < 0) {
			fflush(stdout);
			fprintf(stderr, "smcr-perf client: %s\n", err);
			perf_session_close(&sess);
			return 1;
		}
		const char *lr = tr->reason_name(r.local_reason);
		const char *pr = tr->reason_name(r.peer_reason);
		if (o->json) {
			if (i)
				fputc(',', stdout);
			perf_out_client_json(stdout, &out, &r, lr, pr);
		} else if (o->dat) {
			perf_out_client_dat(stdout, &out, &r);
		} else {
			perf_out_client_text(stdout, &out, &r, lr, pr);
		}
		fflush(stdout);
	}
	if (o->json)
		fputs(o->nsizes > 1 ? "]\n" : "\n", stdout);
	perf_session_close(&sess);
	/* the run is over: the link going down as the server (--once) exits is expected */
	if (!getenv("SMCR_LOG"))
		smcr_log_set_level(SMCR_LOG_ERROR);
	return 0;
}

int main(int argc, char **argv)
{
	struct perf_opts o;
	char err[256];

	if (perf_parse_args(argc, argv, &o, err, sizeof(err)) < 0) {
		fprintf(stderr, "smcr-perf: %s\n", err);
		return 2;
	}
	switch (o.cmd) {
	case PERF_CMD_HELP:
		perf_usage(stdout);
		return 0;
	case PERF_CMD_VERSION:
		printf("smcr-perf 0.1 (transports: tcp%s)\n", tr_have_smcr() ? " smcr" : "");
		return 0;
	case PERF_CMD_SERVER:
		return perf_server_run(&o, tr_get(o.transport), -1, false);
	case PERF_CMD_CLIENT:
		return client_main(&o);
	case PERF_CMD_COMPARE:
		return perf_compare_run(&o);
	case PERF_CMD_NONE:
		break;
	}
	perf_usage(stderr);
	return 2;
}
