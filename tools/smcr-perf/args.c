/* args.c: smcr-perf's command line (issue 6): commands, options, sizes and durations.
 * A small table-driven parser instead of getopt, so it can be called again and again by
 * the unit tests without global state. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"
#include "tr.h"

static const char *const test_names[PERF_TEST_COUNT] = {
    [PERF_TEST_STREAM] = "stream",
    [PERF_TEST_PINGPONG] = "pingpong",
    [PERF_TEST_CONNECT] = "connect",
    [PERF_TEST_CONNS] = "conns",
};

const char *perf_test_name(enum perf_test t)
{
	return (unsigned)t < PERF_TEST_COUNT ? test_names[t] : "?";
}

int perf_test_from_name(const char *s, enum perf_test *out)
{
	for (unsigned i = 0; i < PERF_TEST_COUNT; i++) {
		if (strcmp(s, test_names[i]) == 0) {
			*out = (enum perf_test)i;
			return 0;
		}
	}
	return -1;
}

size_t perf_default_size(enum perf_test t)
{
	switch (t) {
	case PERF_TEST_STREAM:
	case PERF_TEST_CONNS:
		return 64 * 1024;
	case PERF_TEST_PINGPONG:
	case PERF_TEST_CONNECT:
	case PERF_TEST_COUNT:
		return 64;
	}
	return 64;
}

int perf_parse_size(const char *s, size_t *out)
{
	if (!s || *s < '0' || *s > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || v == 0)
		return -1;
	unsigned long long mul = 1;
	if (*end) {
		switch (*end) {
		case 'k':
		case 'K':
			mul = 1ull << 10;
			break;
		case 'm':
		case 'M':
			mul = 1ull << 20;
			break;
		case 'g':
		case 'G':
			mul = 1ull << 30;
			break;
		case 'b':
		case 'B':
			mul = 1;
			break;
		default:
			return -1;
		}
		end++;
		/* "K", "KB", "KiB" (all binary: sizes of buffers) */
		if (mul > 1 && (strcmp(end, "iB") == 0 || strcmp(end, "ib") == 0 ||
		                strcmp(end, "B") == 0 || strcmp(end, "b") == 0))
			end += strlen(end);
		if (*end)
			return -1;
	}
	if (v > PERF_SIZE_MAX / mul)
		return -1;
	*out = (size_t)(v * mul);
	return 0;
}

int perf_parse_sizes(const char *s, size_t *out, size_t max)
{
	char buf[256];
	size_t n = 0;
	if (!s || strlen(s) >= sizeof(buf) || !*s)
		return -1;
	strcpy(buf, s);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == max || perf_parse_size(tok, &out[n]) < 0)
			return -1;
		n++;
	}
	/* strtok_r skips empty fields: "64,,1K" and ",64" are mistakes, not lists */
	if (s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
		return -1;
	return n ? (int)n : -1;
}

int perf_parse_duration(const char *s, double *out)
{
	if (!s || !*s)
		return -1;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v))
		return -1;
	if (strcmp(end, "ms") == 0)
		v /= 1000.0;
	else if (*end && strcmp(end, "s") != 0)
		return -1;
	if (!(v > 0.0) || v > PERF_DURATION_MAX)
		return -1;
	*out = v;
	return 0;
}

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	if (!s || *s < '0' || *s > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

static int parse_trk(const char *s, enum perf_trk *out)
{
	if (strcmp(s, "tcp") == 0)
		*out = PERF_TR_TCP;
	else if (strcmp(s, "smcr") == 0 || strcmp(s, "smc") == 0)
		*out = PERF_TR_SMCR;
	else
		return -1;
	return 0;
}

/* Which commands accept an option. */
#define C_SRV (1u << PERF_CMD_SERVER)
#define C_CLI (1u << PERF_CMD_CLIENT)
#define C_CMP (1u << PERF_CMD_COMPARE)

enum opt_id {
	O_PORT,
	O_BIND,
	O_TEST,
	O_SIZE,
	O_DUR,
	O_CONNS,
	O_ROUNDS,
	O_WARMUP,
	O_TRANSPORT,
	O_CMP_SMCR,
	O_JSON,
	O_DAT,
	O_CPU,
	O_ONCE,
	O_HELP,
	O_WINDOW,
};

struct opt_def {
	enum opt_id id;
	char shortname; /* 0: long only */
	const char *longname;
	int has_arg;
	unsigned cmds;
};

static const struct opt_def opt_defs[] = {
    {O_PORT, 'p', "port", 1, C_SRV | C_CLI},
    {O_BIND, 'B', "bind", 1, C_SRV},
    {O_TEST, 't', "test", 1, C_CLI | C_CMP},
    {O_SIZE, 's', "size", 1, C_CLI | C_CMP},
    {O_DUR, 'd', "duration", 1, C_CLI | C_CMP},
    {O_CONNS, 'n', "conns", 1, C_CLI | C_CMP},
    {O_ROUNDS, 'r', "rounds", 1, C_CMP},
    {O_WARMUP, 0, "warmup", 1, C_CMP},
    {O_WINDOW, 'w', "window", 1, C_SRV | C_CLI | C_CMP},
    {O_TRANSPORT, 0, "transport", 1, C_SRV | C_CLI},
    {O_CMP_SMCR, 0, "smcr-transport", 1, C_CMP},
    {O_JSON, 0, "json", 0, C_CLI | C_CMP},
    {O_DAT, 0, "dat", 0, C_CLI | C_CMP},
    {O_CPU, 0, "cpu", 0, C_CLI | C_CMP},
    {O_ONCE, 0, "once", 0, C_SRV},
    {O_HELP, 'h', "help", 0, C_SRV | C_CLI | C_CMP},
};

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

static void defaults(struct perf_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->port = PERF_DEFAULT_PORT;
	o->test = PERF_TEST_STREAM;
	o->duration = 5.0;
	o->conns = 100;
	o->rounds = PERF_ROUNDS_DEFAULT;
	o->warmup = PERF_WARMUP_DEFAULT;
	o->transport = tr_have_smcr() ? PERF_TR_SMCR : PERF_TR_TCP;
	o->cmp_smcr = PERF_TR_SMCR;
}

static int apply(struct perf_opts *o, const struct opt_def *d, const char *v, char *err,
                 size_t elen)
{
	unsigned u;
	switch (d->id) {
	case O_PORT:
		if (parse_uint(v, 0, 65535, &u) < 0 || (u == 0 && o->cmd == PERF_CMD_CLIENT))
			return fail(err, elen, "bad port '%s'", v);
		o->port = (uint16_t)u;
		return 0;
	case O_BIND:
		o->bind = v;
		return 0;
	case O_TEST:
		if (perf_test_from_name(v, &o->test) < 0)
			return fail(err, elen,
			            "unknown test '%s' (stream, pingpong, connect, conns)", v);
		return 0;
	case O_SIZE: {
		int n = perf_parse_sizes(v, o->sizes, PERF_MAX_SIZES);
		if (n < 0)
			return fail(err, elen,
			            "bad size list '%s' (e.g. 64 or 64,1K,16K,64K,1M; at most %d, "
			            "each 1 B..64 MiB)",
			            v, PERF_MAX_SIZES);
		o->nsizes = (size_t)n;
		return 0;
	}
	case O_DUR:
		if (perf_parse_duration(v, &o->duration) < 0)
			return fail(err, elen, "bad duration '%s' (seconds, e.g. 2, 0.5, 500ms)",
			            v);
		o->duration_set = true;
		return 0;
	case O_CONNS:
		if (parse_uint(v, 1, PERF_CONNS_MAX, &o->conns) < 0)
			return fail(err, elen, "bad connection count '%s' (1..%u)", v,
			            PERF_CONNS_MAX);
		return 0;
	case O_ROUNDS:
		if (parse_uint(v, PERF_ROUNDS_MIN, PERF_ROUNDS_MAX, &o->rounds) < 0)
			return fail(err, elen, "bad rounds '%s' (%u..%u)", v, PERF_ROUNDS_MIN,
			            PERF_ROUNDS_MAX);
		return 0;
	case O_WARMUP:
		if (parse_uint(v, 0, PERF_WARMUP_MAX, &o->warmup) < 0)
			return fail(err, elen, "bad warm-up rounds '%s' (0..%u)", v, PERF_WARMUP_MAX);
		return 0;
	case O_TRANSPORT:
		if (parse_trk(v, &o->transport) < 0)
			return fail(err, elen, "unknown transport '%s' (smcr, tcp)", v);
		return 0;
	case O_CMP_SMCR:
		if (parse_trk(v, &o->cmp_smcr) < 0)
			return fail(err, elen, "unknown transport '%s' (smcr, tcp)", v);
		return 0;
	case O_WINDOW:
		if (perf_parse_size(v, &o->window) < 0 || o->window > (16u << 20))
			return fail(err, elen, "bad window '%s' (e.g. 64K, 512K; at most 16M)", v);
		return 0;
	case O_JSON:
		o->json = true;
		return 0;
	case O_DAT:
		o->dat = true;
		return 0;
	case O_CPU:
		o->cpu = true;
		return 0;
	case O_ONCE:
		o->once = true;
		return 0;
	case O_HELP:
		o->cmd = PERF_CMD_HELP;
		return 0;
	}
	return fail(err, elen, "internal: unknown option");
}

int perf_parse_args(int argc, char **argv, struct perf_opts *o, char *err, size_t elen)
{
	defaults(o);
	if (elen)
		err[0] = 0;
	if (argc < 2)
		return fail(err, elen, "no command (server, client, compare; -h for help)");
	const char *cmd = argv[1];
	if (strcmp(cmd, "server") == 0) {
		o->cmd = PERF_CMD_SERVER;
	} else if (strcmp(cmd, "client") == 0) {
		o->cmd = PERF_CMD_CLIENT;
	} else if (strcmp(cmd, "compare") == 0) {
		o->cmd = PERF_CMD_COMPARE;
		o->duration = 2.0;
	} else if (strcmp(cmd, "help") == 0 || strcmp(cmd, "-h") == 0 ||
	           strcmp(cmd, "--help") == 0) {
		o->cmd = PERF_CMD_HELP;
		return 0;
	} else if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
		o->cmd = PERF_CMD_VERSION;
		return 0;
	} else {
		return fail(err, elen, "unknown command '%s' (server, client, compare)", cmd);
	}
	enum perf_cmd real = o->cmd;

	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const struct opt_def *d = NULL;
		const char *val = NULL;
		if (a[0] != '-' || a[1] == 0) {
			if (real == PERF_CMD_CLIENT && !o->host) {
				o->host = a;
				continue;
			}
			return fail(err, elen, "unexpected argument '%s'", a);
		}
		if (a[1] == '-') {
			const char *name = a + 2;
			const char *eq = strchr(name, '=');
			size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
			for (size_t k = 0; k < sizeof(opt_defs) / sizeof(opt_defs[0]); k++) {
				if (strlen(opt_defs[k].longname) == nlen &&
				    strncmp(opt_defs[k].longname, name, nlen) == 0)
					d = &opt_defs[k];
			}
			if (!d)
				return fail(err, elen, "unknown option '%s'", a);
			if (eq) {
				if (!d->has_arg)
					return fail(err, elen, "option --%s takes no value",
					            d->longname);
				val = eq + 1;
			}
		} else {
			for (size_t k = 0; k < sizeof(opt_defs) / sizeof(opt_defs[0]); k++) {
				if (opt_defs[k].shortname == a[1])
					d = &opt_defs[k];
			}
			if (!d)
				return fail(err, elen, "unknown option '%s'", a);
			if (a[2]) {
				if (!d->has_arg)
					return fail(err, elen, "option -%c takes no value",
					            d->shortname);
				val = a + 2;
			}
		}
		if (!(d->cmds & (1u << real)))
			return fail(err, elen, "option --%s does not apply to '%s'", d->longname,
			            cmd);
		if (d->has_arg && !val) {
			if (i + 1 >= argc)
				return fail(err, elen, "option --%s needs a value", d->longname);
			val = argv[++i];
		}
		if (apply(o, d, val, err, elen) < 0)
			return -1;
	}
	if (o->cmd == PERF_CMD_HELP)
		return 0;
	if (real == PERF_CMD_CLIENT && !o->host)
		return fail(err, elen, "client: which server? (smcr-perf client HOST ...)");
	if (o->json && o->dat)
		return fail(err, elen, "--json and --dat exclude each other");
	if (real == PERF_CMD_COMPARE && o->cmp_smcr == PERF_TR_SMCR && !tr_have_smcr())
		return fail(err, elen,
		            "this build has no smcr transport (smcr socket library "
		            "missing); --smcr-transport tcp runs tcp against tcp");
	if ((real == PERF_CMD_CLIENT || real == PERF_CMD_SERVER) && o->transport == PERF_TR_SMCR &&
	    !tr_have_smcr())
		return fail(err, elen, "this build has no smcr transport; use --transport tcp");
	if (o->nsizes == 0) {
		o->sizes[0] = perf_default_size(o->test);
		o->nsizes = 1;
	}
	return 0;
}

void perf_usage(FILE *f)
{
	fprintf(
	    f,
	    "smcr-perf: throughput, latency and connection rate of SMC-R (smcr) next to TCP\n"
	    "\n"
	    "  smcr-perf server [-p PORT] [-B ADDR] [-w SIZE] [--transport smcr|tcp] [--once]\n"
	    "  smcr-perf client HOST [-p PORT] [-t TEST] [-s SIZE[,SIZE...]] [-d SECONDS]\n"
	    "                   [-n CONNS] [-w SIZE] [--transport smcr|tcp] [--json|--dat] "
	    "[--cpu]\n"
	    "  smcr-perf compare [-t TEST] [-s SIZE[,SIZE...]] [-d SECONDS] [-r ROUNDS] [-n "
	    "CONNS]\n"
	    "                   [--warmup N] [-w SIZE] [--json|--dat] [--cpu]\n"
	    "\n"
	    "Tests (-t):\n"
	    "  stream    one-way throughput with writes of SIZE (default 64K)\n"
	    "  pingpong  round trips of SIZE bytes: median, p99, p99.9 (default 64)\n"
	    "  connect   new connections per second: connect, one SIZE exchange, close (default "
	    "64)\n"
	    "  conns     N (-n, default 100) concurrent connections each streaming: aggregate\n"
	    "            throughput and memory per connection\n"
	    "\n"
	    "compare starts its own servers on loopback and runs the test over plain TCP and over\n"
	    "SMC-R in turns (A B A B ..., ROUNDS each, default 3; -r 1: one each), then prints both\n"
	    "medians and ratio = smcr median / tcp median (for pingpong lower is better).\n"
	    "Before the first size it runs --warmup rounds of each transport (default 1), printed\n"
	    "but left out of the medians: a fresh process's first round pays one-time costs.\n"
	    "The mode printed (smcr or tcp-fallback) is read from the engine for every "
	    "connection.\n"
	    "\n"
	    "Options:\n"
	    "  -p PORT        port (default %d)\n"
	    "  -B ADDR        server: address to listen on (default 0.0.0.0)\n"
	    "  -s SIZES       sizes: 64, 1K, 64K, 1M; a comma list sweeps them\n"
	    "  -d SECONDS     seconds per run (client default 5, compare default 2); 0.5 and 500ms "
	    "work\n"
	    "  -r ROUNDS      compare: runs per transport (default 3; 1: a single round)\n"
	    "  --warmup N     compare: uncounted runs per transport first (default 1, 0..10)\n"
	    "  -w SIZE        SO_SNDBUF and SO_RCVBUF of the data sockets (smcr: send buffer and\n"
	    "                 RMBE); server: set on the listener\n"
	    "  --transport T  client/server: smcr (default when built in) or tcp. An smcr server\n"
	    "                 serves TCP clients too (clean fallback).\n"
	    "  --json         one JSON object per size (an array for a size list)\n"
	    "  --dat          one whitespace-separated line per size (bench/report, gnuplot)\n"
	    "  --cpu          add CPU seconds (user+sys, both ends) per GB or per operation\n"
	    "  --once         server: exit when the first client's control connection ends\n"
	    "\n"
	    "Environment: smcr-perf puts a rule 'use smc ...' for its own port in front of\n"
	    "SMCR_RULES (docs/CONFIG.md); SMCR_PERF_NO_RULES=1 leaves the rules to you.\n",
	    PERF_DEFAULT_PORT);
}
