/* test_perf_unit.c: smcr-perf's parts without the network: command line, size and
 * duration parsing, percentile math on known samples, medians and the ratio, the JSON
 * shape of compare (issue 6), and the tool's own header / control frames. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "json_mini.h"
#include "out.h"
#include "perf.h"
#include "proc.h"
#include "proto.h"
#include "tr.h"

/* ---- sizes and durations ---- */

static void test_size_parse(void **st)
{
	(void)st;
	static const struct {
		const char *s;
		size_t v;
	} ok[] = {
	    {"64", 64},      {"1", 1},          {"1K", 1024},       {"1k", 1024},
	    {"16K", 16384},  {"64K", 65536},    {"64KiB", 65536},   {"64KB", 65536},
	    {"1M", 1048576}, {"1MiB", 1048576}, {"64M", 64u << 20}, {"100B", 100},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		size_t v = 0;
		assert_int_equal(perf_parse_size(ok[i].s, &v), 0);
		assert_int_equal(v, ok[i].v);
	}
	static const char *const bad[] = {
	    "",
	    "0",
	    "K",
	    "-1",
	    "1.5K",
	    "1X",
	    "1KK",
	    "65M",
	    "1G",
	    " 64",
	    "64 ",
	    "18446744073709551617",
	    "99999999999999999999K",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t v = 12345;
		assert_int_equal(perf_parse_size(bad[i], &v), -1);
		assert_int_equal(v, 12345); /* untouched on failure */
	}
	assert_int_equal(perf_parse_size(NULL, NULL), -1);
}

static void test_size_list(void **st)
{
	(void)st;
	size_t v[PERF_MAX_SIZES];
	assert_int_equal(perf_parse_sizes("64,1K,16K,64K,1M", v, PERF_MAX_SIZES), 5);
	assert_int_equal(v[0], 64);
	assert_int_equal(v[1], 1024);
	assert_int_equal(v[2], 16384);
	assert_int_equal(v[3], 65536);
	assert_int_equal(v[4], 1048576);
	assert_int_equal(perf_parse_sizes("4096", v, PERF_MAX_SIZES), 1);
	assert_int_equal(v[0], 4096);
	assert_int_equal(perf_parse_sizes("64,,1K", v, PERF_MAX_SIZES), -1);
	assert_int_equal(perf_parse_sizes(",64", v, PERF_MAX_SIZES), -1);
	assert_int_equal(perf_parse_sizes("64,", v, PERF_MAX_SIZES), -1);
	assert_int_equal(perf_parse_sizes("", v, PERF_MAX_SIZES), -1);
	assert_int_equal(perf_parse_sizes("64,x", v, PERF_MAX_SIZES), -1);
	assert_int_equal(perf_parse_sizes("1,2,3", v, 2), -1); /* more than max */
}

static void test_duration(void **st)
{
	(void)st;
	double d = 0;
	assert_int_equal(perf_parse_duration("2", &d), 0);
	assert_true(d == 2.0);
	assert_int_equal(perf_parse_duration("0.5", &d), 0);
	assert_true(d == 0.5);
	assert_int_equal(perf_parse_duration("500ms", &d), 0);
	assert_true(d == 0.5);
	assert_int_equal(perf_parse_duration("3s", &d), 0);
	assert_true(d == 3.0);
	static const char *const bad[] = {"", "0", "-1", "abc", "2x", "1e9", "nan", "inf", "0ms"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(perf_parse_duration(bad[i], &d), -1);
}

/* ---- command line ---- */

static int parse(struct perf_opts *o, char *err, size_t elen, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	va_start(ap, elen);
	argv[argc++] = "smcr-perf";
	for (char *a = va_arg(ap, char *); a && argc < 31; a = va_arg(ap, char *))
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	return perf_parse_args(argc, argv, o, err, elen);
}

static void test_args_client(void **st)
{
	(void)st;
	struct perf_opts o;
	char err[256];
	assert_int_equal(parse(&o, err, sizeof(err), "client", "10.0.0.2", "-p", "7000", "-t",
	                       "pingpong", "-s", "64,1K", "-d", "0.2", "--json", "--cpu",
	                       "--transport", "tcp", NULL),
	                 0);
	assert_int_equal(o.cmd, PERF_CMD_CLIENT);
	assert_string_equal(o.host, "10.0.0.2");
	assert_int_equal(o.port, 7000);
	assert_int_equal(o.test, PERF_TEST_PINGPONG);
	assert_int_equal(o.nsizes, 2);
	assert_int_equal(o.sizes[1], 1024);
	assert_true(o.duration == 0.2);
	assert_true(o.json && o.cpu && !o.dat);
	assert_int_equal(o.transport, PERF_TR_TCP);

	/* attached and --name=value forms; the host may come after the options */
	assert_int_equal(parse(&o, err, sizeof(err), "client", "-p5302", "--test=conns", "-n",
	                       "1000", "--transport=tcp", "::1", NULL),
	                 0);
	assert_int_equal(o.port, 5302);
	assert_int_equal(o.test, PERF_TEST_CONNS);
	assert_int_equal(o.conns, 1000);
	assert_string_equal(o.host, "::1");
	/* defaults: the test's size, 5 s, the default port */
	assert_int_equal(
	    parse(&o, err, sizeof(err), "client", "h", "-t", "connect", "--transport", "tcp", NULL),
	    0);
	assert_int_equal(o.nsizes, 1);
	assert_int_equal(o.sizes[0], 64);
	assert_true(o.duration == 5.0);
	assert_int_equal(o.port, PERF_DEFAULT_PORT);
	assert_int_equal(parse(&o, err, sizeof(err), "client", "h", "--transport", "tcp", NULL), 0);
	assert_int_equal(o.test, PERF_TEST_STREAM);
	assert_int_equal(o.window, 0); /* the transport's default buffers */
	assert_int_equal(
	    parse(&o, err, sizeof(err), "client", "h", "-w", "512K", "--transport", "tcp", NULL),
	    0);
	assert_int_equal(o.window, 512 * 1024);
	assert_int_equal(o.sizes[0], 65536);
	assert_int_equal(parse(&o, err, sizeof(err), "client", "h", "-w", "32M", NULL), -1);

	/* mistakes, each with a message */
	static const char *const bad[][6] = {
	    {"client", NULL},                     /* no host */
	    {"client", "h", "x", NULL},           /* two hosts */
	    {"client", "h", "-t", "flood", NULL}, /* unknown test */
	    {"client", "h", "-p", "0", NULL},     /* port 0 */
	    {"client", "h", "-p", "65536", NULL},
	    {"client", "h", "-n", "0", NULL},
	    {"client", "h", "-r", "3", NULL}, /* compare only */
	    {"client", "h", "--json", "--dat", NULL},
	    {"client", "h", "--transport", "udp", NULL},
	    {"client", "h", "--bogus", NULL},
	    {"client", "h", "-s", NULL},       /* value missing */
	    {"client", "h", "--json=1", NULL}, /* flag with a value */
	    {"client", "h", "-d", "0", NULL},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[8] = {"smcr-perf"};
		int argc = 1;
		for (int k = 0; bad[i][k]; k++)
			argv[argc++] = (char *)bad[i][k];
		err[0] = 0;
		assert_int_equal(perf_parse_args(argc, argv, &o, err, sizeof(err)), -1);
		assert_true(strlen(err) > 0);
	}
}

static void test_args_server_compare(void **st)
{
	(void)st;
	struct perf_opts o;
	char err[256];
	assert_int_equal(parse(&o, err, sizeof(err), "server", "-p", "6000", "-B", "127.0.0.1",
	                       "--transport", "tcp", "--once", NULL),
	                 0);
	assert_int_equal(o.cmd, PERF_CMD_SERVER);
	assert_int_equal(o.port, 6000);
	assert_string_equal(o.bind, "127.0.0.1");
	assert_true(o.once);
	assert_int_equal(
	    parse(&o, err, sizeof(err), "server", "--window=64K", "--transport", "tcp", NULL), 0);
	assert_int_equal(o.window, 65536);
	assert_int_equal(parse(&o, err, sizeof(err), "server", "-t", "stream", NULL), -1);
	assert_int_equal(parse(&o, err, sizeof(err), "server", "extra", NULL), -1);

	assert_int_equal(parse(&o, err, sizeof(err), "compare", "-t", "pingpong", "-r", "5", "-d",
	                       "1", "--smcr-transport", "tcp", "--dat", NULL),
	                 0);
	assert_int_equal(o.cmd, PERF_CMD_COMPARE);
	assert_int_equal(o.rounds, 5);
	assert_int_equal(o.cmp_smcr, PERF_TR_TCP);
	assert_true(o.dat);
	assert_int_equal(parse(&o, err, sizeof(err), "compare", "--smcr-transport", "tcp", NULL),
	                 0);
	assert_int_equal(o.rounds, PERF_ROUNDS_DEFAULT);
	assert_int_equal(o.warmup, PERF_WARMUP_DEFAULT);
	assert_true(o.duration == 2.0); /* compare's default */
	assert_int_equal(parse(&o, err, sizeof(err), "compare", "--warmup", "0", "--smcr-transport",
	                       "tcp", NULL),
	                 0);
	assert_int_equal(o.warmup, 0);
	assert_int_equal(parse(&o, err, sizeof(err), "compare", "--warmup=10", "--smcr-transport",
	                       "tcp", NULL),
	                 0);
	assert_int_equal(o.warmup, 10);
	assert_int_equal(parse(&o, err, sizeof(err), "compare", "--warmup", "11", NULL), -1);
	assert_int_equal(parse(&o, err, sizeof(err), "compare", "--warmup", "-1", NULL), -1);
	assert_int_equal(parse(&o, err, sizeof(err), "client", "h", "--warmup", "1", NULL), -1);
	/* -r 1: one round (issue 25, as iperf); 0 rounds is no compare */
	assert_int_equal(parse(&o, err, sizeof(err), "compare", "-r", "1", "--smcr-transport", "tcp",
	                       NULL),
	                 0);
	assert_int_equal(o.rounds, 1);
	assert_int_equal(parse(&o, err, sizeof(err), "compare", "-r", "0", NULL), -1);
	assert_int_equal(parse(&o, err, sizeof(err), "compare", "-p", "1", NULL), -1);
	if (!tr_have_smcr()) {
		/* without the smcr library the smcr side must be asked for as tcp */
		assert_int_equal(parse(&o, err, sizeof(err), "compare", NULL), -1);
		assert_int_equal(parse(&o, err, sizeof(err), "server", NULL), 0);
		assert_int_equal(o.transport, PERF_TR_TCP);
	} else {
		assert_int_equal(parse(&o, err, sizeof(err), "compare", NULL), 0);
		assert_int_equal(o.cmp_smcr, PERF_TR_SMCR);
		assert_int_equal(parse(&o, err, sizeof(err), "server", NULL), 0);
		assert_int_equal(o.transport, PERF_TR_SMCR);
	}
	assert_int_equal(parse(&o, err, sizeof(err), "help", NULL), 0);
	assert_int_equal(o.cmd, PERF_CMD_HELP);
	assert_int_equal(parse(&o, err, sizeof(err), "client", "-h", NULL), 0);
	assert_int_equal(o.cmd, PERF_CMD_HELP);
	assert_int_equal(parse(&o, err, sizeof(err), "--version", NULL), 0);
	assert_int_equal(o.cmd, PERF_CMD_VERSION);
	assert_int_equal(parse(&o, err, sizeof(err), "flood", NULL), -1);
	assert_int_equal(parse(&o, err, sizeof(err), NULL), -1);
}

/* ---- percentiles, medians ---- */

static void test_percentiles(void **st)
{
	(void)st;
	double v[10];
	for (int i = 0; i < 10; i++)
		v[i] = i + 1; /* 1..10 */
	/* rank = p/100 * (n-1), linear between neighbours */
	assert_true(fabs(perf_percentile(v, 10, 50.0) - 5.5) < 1e-12);
	assert_true(perf_percentile(v, 10, 0.0) == 1.0);
	assert_true(perf_percentile(v, 10, 100.0) == 10.0);
	assert_true(fabs(perf_percentile(v, 10, 99.0) - 9.91) < 1e-12);
	assert_true(fabs(perf_percentile(v, 10, 99.9) - 9.991) < 1e-12);
	assert_true(fabs(perf_percentile(v, 10, 90.0) - 9.1) < 1e-12);
	assert_true(fabs(perf_percentile(v, 10, 25.0) - 3.25) < 1e-12);
	double one = 7.5;
	assert_true(perf_percentile(&one, 1, 99.9) == 7.5);
	assert_true(isnan(perf_percentile(v, 0, 50.0)));
	assert_true(isnan(perf_percentile(v, 10, 101.0)));
	assert_true(isnan(perf_percentile(v, 10, -1.0)));

	/* 1000 samples 1..1000 in reverse: p99.9 = 999.001, p99 = 990.01, median 500.5 */
	double *w = malloc(1000 * sizeof(*w));
	assert_non_null(w);
	for (int i = 0; i < 1000; i++)
		w[i] = 1000 - i;
	assert_true(fabs(perf_median(w, 1000) - 500.5) < 1e-9);
	assert_true(w[0] == 1.0 && w[999] == 1000.0); /* sorted in place */
	assert_true(fabs(perf_percentile(w, 1000, 99.0) - 990.01) < 1e-9);
	assert_true(fabs(perf_percentile(w, 1000, 99.9) - 999.001) < 1e-9);
	free(w);

	double odd[] = {3, 1, 2}, even[] = {4, 1, 3, 2};
	assert_true(perf_median(odd, 3) == 2.0);
	assert_true(perf_median(even, 4) == 2.5);
}

static void test_fmt_size(void **st)
{
	(void)st;
	char b[32];
	assert_string_equal(perf_fmt_size(64, b, sizeof(b)), "64 B");
	assert_string_equal(perf_fmt_size(1024, b, sizeof(b)), "1 KiB");
	assert_string_equal(perf_fmt_size(1536, b, sizeof(b)), "1.5 KiB");
	assert_string_equal(perf_fmt_size(65536, b, sizeof(b)), "64 KiB");
	assert_string_equal(perf_fmt_size(1048576, b, sizeof(b)), "1 MiB");
}

/* ---- compare's JSON and the ratio ---- */

static char *cmp_json(const struct perf_cmp *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	perf_out_cmp_json(f, c);
	fclose(f);
	return buf;
}

static struct perf_result res(enum perf_test t, double v, enum perf_mode m)
{
	struct perf_result r;
	memset(&r, 0, sizeof(r));
	r.test = t;
	r.value = v;
	r.p99 = v * 2;
	r.p999 = v * 3;
	r.cpu = NAN;
	r.mem_per_conn_kib = r.idle_mem_per_conn_kib = NAN;
	r.mode = m;
	return r;
}

static void check_runs(const struct jv *side, const double *want, size_t n)
{
	const struct jv *runs = jv_get(side, "runs");
	assert_non_null(runs);
	assert_int_equal(runs->type, JV_ARR);
	assert_int_equal(runs->n, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(runs->items[i].type, JV_NUM);
		assert_true(runs->items[i].num == want[i]); /* in run order, not sorted */
	}
}

static void test_json_stream(void **st)
{
	(void)st;
	struct perf_cmp c;
	memset(&c, 0, sizeof(c));
	c.test = PERF_TEST_STREAM;
	c.size = 65536;
	c.duration = 2;
	c.rounds = 3;
	c.tcp.transport = PERF_TR_TCP;
	c.smcr.transport = PERF_TR_SMCR;
	const double tv[] = {10, 30, 20}, sv[] = {50, 40, 60};
	for (int i = 0; i < 3; i++) {
		struct perf_result a = res(PERF_TEST_STREAM, tv[i], PERF_MODE_TCP);
		struct perf_result b = res(PERF_TEST_STREAM, sv[i], PERF_MODE_SMCR);
		perf_side_add(&c.tcp, &a, "NONE", "NONE");
		perf_side_add(&c.smcr, &b, "NONE", "NONE");
	}
	perf_cmp_finish(&c);
	assert_true(c.tcp.median == 20 && c.smcr.median == 50);
	assert_true(c.ratio == 2.5); /* smcr median / tcp median */

	char *txt = cmp_json(&c);
	struct jv *j = jv_parse(txt);
	assert_non_null(j);
	assert_int_equal(j->type, JV_OBJ);
	assert_string_equal(jv_get(j, "test")->str, "stream");
	assert_true(jv_get(j, "size")->num == 65536);
	const struct jv *tcp = jv_get(j, "tcp"), *smcr = jv_get(j, "smcr");
	assert_non_null(tcp);
	assert_non_null(smcr);
	assert_true(jv_get(tcp, "median")->num == 20);
	assert_string_equal(jv_get(tcp, "unit")->str, "Gbit/s");
	check_runs(tcp, tv, 3);
	assert_null(jv_get(tcp, "mode")); /* the shape: mode only on the smcr side */
	assert_true(jv_get(smcr, "median")->num == 50);
	assert_string_equal(jv_get(smcr, "unit")->str, "Gbit/s");
	check_runs(smcr, sv, 3);
	assert_string_equal(jv_get(smcr, "mode")->str, "smcr");
	assert_null(jv_get(smcr, "local_reason"));
	assert_true(jv_get(j, "ratio")->num == 2.5);
	assert_true(jv_get(j, "higher_is_better")->b);
	assert_null(jv_get(j, "cpu_ratio")); /* only with --cpu */
	assert_null(jv_get(j, "warmup"));    /* none run */
	jv_free(j);
	free(txt);

	/* warm-up runs: printed, never in the medians or the ratio */
	struct perf_result wa = res(PERF_TEST_STREAM, 100, PERF_MODE_TCP);
	struct perf_result wb = res(PERF_TEST_STREAM, 1, PERF_MODE_SMCR);
	c.warm_tcp.transport = PERF_TR_TCP;
	c.warm_smcr.transport = PERF_TR_SMCR;
	perf_side_add(&c.warm_tcp, &wa, "NONE", "NONE");
	perf_side_add(&c.warm_smcr, &wb, "NONE", "NONE");
	perf_cmp_finish(&c);
	assert_true(c.tcp.median == 20 && c.smcr.median == 50 && c.ratio == 2.5);
	txt = cmp_json(&c);
	j = jv_parse(txt);
	assert_non_null(j);
	const struct jv *w = jv_get(j, "warmup");
	assert_non_null(w);
	const double wt[] = {100}, ws[] = {1};
	assert_int_equal(jv_get(w, "tcp")->type, JV_ARR);
	assert_int_equal(jv_get(w, "tcp")->n, 1);
	assert_true(jv_get(w, "tcp")->items[0].num == wt[0]);
	assert_int_equal(jv_get(w, "smcr")->n, 1);
	assert_true(jv_get(w, "smcr")->items[0].num == ws[0]);
	assert_string_equal(jv_get(w, "smcr_mode")->str, "smcr");
	check_runs(jv_get(j, "tcp"), tv, 3);
	check_runs(jv_get(j, "smcr"), sv, 3);
	assert_true(jv_get(j, "ratio")->num == 2.5);
	jv_free(j);
	free(txt);

	/* the text says so */
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	perf_out_cmp_text(f, &c);
	fclose(f);
	assert_non_null(strstr(buf, "warm-up, not counted: TCP 100, SMC-R 1 Gbit/s"));
	assert_non_null(strstr(buf, "ratio SMC-R/TCP: 2.50x"));
	free(buf);
}

static void test_json_pingpong_fallback(void **st)
{
	(void)st;
	struct perf_cmp c;
	memset(&c, 0, sizeof(c));
	c.test = PERF_TEST_PINGPONG;
	c.size = 64;
	c.duration = 1;
	c.rounds = 3;
	c.cpu = true;
	c.tcp.transport = PERF_TR_TCP;
	c.smcr.transport = PERF_TR_SMCR;
	const double tv[] = {20, 22, 18}, sv[] = {4, 5, 6};
	for (int i = 0; i < 3; i++) {
		struct perf_result a = res(PERF_TEST_PINGPONG, tv[i], PERF_MODE_TCP);
		/* the second smcr run had a fallen-back connection: the side says so */
		struct perf_result b =
		    res(PERF_TEST_PINGPONG, sv[i], i == 1 ? PERF_MODE_FALLBACK : PERF_MODE_SMCR);
		a.cpu = 10 + i;
		b.cpu = 2 + i;
		perf_side_add(&c.tcp, &a, "NONE", "NONE");
		perf_side_add(&c.smcr, &b, "PEERNOSMC", "NONE");
	}
	perf_cmp_finish(&c);
	char *txt = cmp_json(&c);
	struct jv *j = jv_parse(txt);
	assert_non_null(j);
	const struct jv *tcp = jv_get(j, "tcp"), *smcr = jv_get(j, "smcr");
	assert_string_equal(jv_get(tcp, "unit")->str, "us");
	assert_true(jv_get(tcp, "median")->num == 20);
	assert_true(jv_get(smcr, "median")->num == 5);
	/* latency too: ratio is smcr / tcp, lower is better */
	assert_true(fabs(jv_get(j, "ratio")->num - 0.25) < 1e-9);
	assert_false(jv_get(j, "higher_is_better")->b);
	assert_string_equal(jv_get(smcr, "mode")->str, "tcp-fallback");
	assert_string_equal(jv_get(smcr, "local_reason")->str, "PEERNOSMC");
	assert_true(jv_get(tcp, "p99")->num == 40); /* median of the runs' p99 */
	assert_true(jv_get(smcr, "p999")->num == 15);
	const struct jv *cpu = jv_get(smcr, "cpu");
	assert_non_null(cpu);
	assert_true(jv_get(cpu, "median")->num == 3);
	assert_string_equal(jv_get(cpu, "unit")->str, "cpu_us/op");
	assert_true(fabs(jv_get(j, "cpu_ratio")->num - 3.0 / 11.0) < 1e-5);
	jv_free(j);
	free(txt);

	/* NaN is not JSON: it prints as null */
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	perf_json_num(f, NAN);
	fputc(' ', f);
	perf_json_num(f, INFINITY);
	fclose(f);
	assert_string_equal(buf, "null null");
	free(buf);
}

static void test_json_mini_rejects(void **st)
{
	(void)st;
	static const char *const bad[] = {"",   "{",   "{\"a\":}", "[1,]",     "{\"a\" 1}", "01",
	                                  "1.", "nul", "[1] x",    "\"\x01\"", "{\"a\":1,}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_null(jv_parse(bad[i]));
	struct jv *j = jv_parse(" [1, -2.5e3, \"x\\n\", true, null, {}] ");
	assert_non_null(j);
	assert_int_equal(j->n, 6);
	assert_true(j->items[1].num == -2500);
	jv_free(j);
}

/* ---- the tool's own header and control frames ---- */

static void test_proto(void **st)
{
	(void)st;
	struct proto_hdr h = {.kind = PROTO_KIND_PINGPONG,
	                      .size = 64,
	                      .session = 0x0102030405060708ull},
	                 d;
	uint8_t b[PROTO_HDR_LEN];
	proto_hdr_encode(&h, b);
	static const uint8_t golden[PROTO_HDR_LEN] = {
	    'S', 'P', 'R', 'F', 1, 3, 0, 0, 0, 0, 0, 64, 1, 2, 3, 4, 5, 6, 7, 8,
	};
	assert_memory_equal(b, golden, sizeof(golden));
	assert_int_equal(proto_hdr_decode(b, sizeof(b), &d), 0);
	assert_int_equal(d.kind, PROTO_KIND_PINGPONG);
	assert_int_equal(d.size, 64);
	assert_true(d.session == h.session);

	uint8_t x[PROTO_HDR_LEN];
	assert_int_equal(proto_hdr_decode(b, PROTO_HDR_LEN - 1, &d), -PROTO_E_SHORT);
	memcpy(x, b, sizeof(x));
	x[0] = 'X';
	assert_int_equal(proto_hdr_decode(x, sizeof(x), &d), -PROTO_E_MAGIC);
	/* a CLC message (SMC-R client at a plain TCP server) has its own diagnosis */
	static const uint8_t clc[PROTO_HDR_LEN] = {0xe2, 0xd4, 0xc3, 0xd9, 0x01, 0x00, 0x34};
	assert_int_equal(proto_hdr_decode(clc, sizeof(clc), &d), -PROTO_E_CLC);
	memcpy(x, b, sizeof(x));
	x[4] = 2;
	assert_int_equal(proto_hdr_decode(x, sizeof(x), &d), -PROTO_E_VERSION);
	memcpy(x, b, sizeof(x));
	x[5] = 0;
	assert_int_equal(proto_hdr_decode(x, sizeof(x), &d), -PROTO_E_KIND);
	memcpy(x, b, sizeof(x));
	x[5] = 6;
	assert_int_equal(proto_hdr_decode(x, sizeof(x), &d), -PROTO_E_KIND);
	memcpy(x, b, sizeof(x));
	x[7] = 1;
	assert_int_equal(proto_hdr_decode(x, sizeof(x), &d), -PROTO_E_FLAGS);
	memcpy(x, b, sizeof(x));
	x[31] = 1;
	assert_int_equal(proto_hdr_decode(x, sizeof(x), &d), -PROTO_E_FLAGS);
	memcpy(x, b, sizeof(x));
	x[11] = 0;
	assert_int_equal(proto_hdr_decode(x, sizeof(x), &d), -PROTO_E_SIZE);
	memcpy(x, b, sizeof(x));
	x[8] = 0x04;
	x[11] = 1; /* 64 MiB + 1 */
	assert_int_equal(proto_hdr_decode(x, sizeof(x), &d), -PROTO_E_SIZE);

	struct proto_req rq = {.op = PROTO_OP_END, .arg = 1000}, rd;
	uint8_t rb[PROTO_REQ_LEN];
	proto_req_encode(&rq, rb);
	assert_int_equal(proto_req_decode(rb, sizeof(rb), &rd), 0);
	assert_int_equal(rd.op, PROTO_OP_END);
	assert_int_equal(rd.arg, 1000);
	assert_int_equal(proto_req_decode(rb, 7, &rd), -PROTO_E_SHORT);
	rb[3] = 9;
	assert_int_equal(proto_req_decode(rb, sizeof(rb), &rd), -PROTO_E_OP);

	struct proto_reply p = {.status = 0,
	                        .transport = 1,
	                        .cpu_us = 123456789012ull,
	                        .rss_kib = 5,
	                        .rss_base_kib = 4,
	                        .bytes = 1ull << 40,
	                        .conns = 1000,
	                        .conns_smcr = 999,
	                        .conns_fallback = 1,
	                        .open = 0};
	struct proto_reply q;
	uint8_t pb[PROTO_REPLY_LEN];
	proto_reply_encode(&p, pb);
	assert_int_equal(proto_reply_decode(pb, sizeof(pb), &q), 0);
	assert_memory_equal(&p, &q, sizeof(p));
	assert_int_equal(proto_reply_decode(pb, sizeof(pb) - 1, &q), -PROTO_E_SHORT);
}

/* ---- memory: shared pages count once across the processes sharing them ---- */

/* The other process of test_mem_shared_counted_once: this binary run again (exec, so it
 * shares nothing with the test but the memfd: a forked child would share all of the test's
 * private pages copy-on-write too and halve their PSS as well, a lot of memory under ASan).
 * Maps the memfd, reads every page, answers 0 on done_w, exits when go_r has a byte or EOF. */
static int pss_child(int mfd, size_t len, int done_w, int go_r)
{
	const unsigned char *p = mmap(NULL, len, PROT_READ, MAP_SHARED, mfd, 0);
	char b = 1;
	if (p != MAP_FAILED) {
		unsigned sum = 0;
		for (size_t i = 0; i < len; i += 4096)
			sum += p[i];
		b = (char)(sum != 0x5au * (unsigned)(len / 4096));
	}
	if (write(done_w, &b, 1) != 1)
		return 2;
	return read(go_r, &b, 1) < 0 ? 2 : 0;
}

/* An RMB is a memfd both ends map (owner reads, shm peer WRITEs): conns' memory figure
 * adds client and server, so each must count a shared page half (PSS), or every RMB is
 * counted twice. 16 MiB touched here, then by another process too: ours must drop by about
 * half of it; when that process is gone, back to all of it. */
static void test_mem_shared_counted_once(void **st)
{
	(void)st;
	const size_t len = 16u << 20;
	int fd = memfd_create("perf-pss", 0); /* inherited by the child (exec) */
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)len), 0);
	uint64_t m0 = perf_rss_kib();
	assert_true(m0 > 0);
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 0x5a, len);
	uint64_t m1 = perf_rss_kib();
	/* all 16384 KiB are ours alone (within 10 %: other allocations of this process; under
	 * ASan also the shadow of the new mapping, an eighth of it, which its memset interceptor
	 * touches: about 18600 KiB seen) */
	print_message("PSS KiB: before %llu, mapped %llu\n", (unsigned long long)m0,
	              (unsigned long long)m1);
	assert_true(m1 >= m0 + 16384 * 9 / 10 && m1 <= m0 + 16384 * 11 / 10 + 16384 / 8);
	int go[2], done[2];
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(done), 0);
	char a_fd[16], a_len[24], a_done[16], a_go[16];
	snprintf(a_fd, sizeof(a_fd), "%d", fd);
	snprintf(a_len, sizeof(a_len), "%zu", len);
	snprintf(a_done, sizeof(a_done), "%d", done[1]);
	snprintf(a_go, sizeof(a_go), "%d", go[0]);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* only the parent's ends open elsewhere: if the parent fails (and exits), the
		 * child's read of go sees EOF instead of blocking forever */
		close(go[1]);
		close(done[0]);
		execl("/proc/self/exe", "test_perf_unit", "--pss-child", a_fd, a_len, a_done, a_go,
		      (char *)NULL);
		_exit(3);
	}
	close(go[0]);
	close(done[1]);
	char b = 1;
	assert_int_equal(read(done[0], &b, 1), 1);
	assert_int_equal(b, 0);
	uint64_t m2 = perf_rss_kib();
	print_message("PSS KiB: before %llu, mapped %llu, shared %llu\n", (unsigned long long)m0,
	              (unsigned long long)m1, (unsigned long long)m2);
	/* the child shares the 16 MiB: we hold half of them now. It runs this binary, so
	 * pages of the executable and its libraries that were in m0 may now be shared too
	 * and count half as well (about 3 MiB under ASan): the drop is 8 MiB, plus at most
	 * half of m0. RSS (statm) would not drop at all. */
	assert_true(m2 <= m1 - 8192 * 9 / 10);
	assert_true(m1 - m2 <= 8192 * 11 / 10 + m0 / 2);
	assert_int_equal(write(go[1], "x", 1), 1);
	int status = -1;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	uint64_t m3 = perf_rss_kib();
	assert_true(m3 >= m1 - 16384 / 10); /* ours alone again */
	munmap(p, len);
	close(fd);
	close(go[1]);
	close(done[0]);
}

/* ---- memory: the kernel's share (sockets' objects) and the settle before a run ---- */

/* A socket's objects are kernel slab, in no PSS: the figure must grow with sockets. 500
 * AF_UNIX pairs are ~1.9 MiB of slab on this kernel (3.9 KiB a pair, measured); half of
 * that is the bar, so another program's churn beside the test does not make it flake. */
static void test_mem_kernel_counts_sockets(void **st)
{
	(void)st;
	enum { PAIRS = 500 };
	static int sv[PAIRS][2];
	assert_true(perf_slab_kib() > 0);
	uint64_t k0 = perf_kernel_mem_kib();
	for (int i = 0; i < PAIRS; i++)
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]), 0);
	uint64_t k1 = perf_kernel_mem_kib();
	print_message("kernel KiB: before %llu, with %d socket pairs %llu\n",
	              (unsigned long long)k0, PAIRS, (unsigned long long)k1);
	assert_true(k1 >= k0 + PAIRS * 2);
	for (int i = 0; i < PAIRS; i++) {
		close(sv[i][0]);
		close(sv[i][1]);
	}
}

/* Frees 1 MiB of a touched mapping every 10 ms until it is gone (the late frees of an
 * earlier run that perf_mem_settle must wait out). */
struct shrinker {
	unsigned char *p;
	size_t len;
};

static void *shrink_main(void *arg)
{
	struct shrinker *s = arg;
	for (size_t off = 0; off < s->len; off += 1u << 20) {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000000L};
		nanosleep(&ts, NULL);
		munmap(s->p + off, 1u << 20);
	}
	return NULL;
}

/* While this process's memory falls by 2 MiB per 20 ms (over 400 ms), settle with a
 * 256 KiB tolerance must keep waiting: at least 300 ms (the fall's last steps may be seen
 * as quiet); and it ends at its bound. */
static void test_mem_settle_waits_for_frees(void **st)
{
	(void)st;
	struct shrinker s = {.len = 40u << 20};
	s.p = mmap(NULL, s.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(s.p != MAP_FAILED);
	memset(s.p, 1, s.len);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, shrink_main, &s), 0);
	unsigned waited = perf_mem_settle(2000, 256);
	assert_int_equal(pthread_join(t, NULL), 0);
	print_message("settle waited %u ms while 40 MiB were freed over 400 ms\n", waited);
	assert_true(waited >= 300 && waited <= 2000);
}

int main(int argc, char **argv)
{
	if (argc == 6 && strcmp(argv[1], "--pss-child") == 0)
		return pss_child(atoi(argv[2]), (size_t)strtoull(argv[3], NULL, 10), atoi(argv[4]),
		                 atoi(argv[5]));
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_size_parse),
	    cmocka_unit_test(test_size_list),
	    cmocka_unit_test(test_duration),
	    cmocka_unit_test(test_args_client),
	    cmocka_unit_test(test_args_server_compare),
	    cmocka_unit_test(test_percentiles),
	    cmocka_unit_test(test_fmt_size),
	    cmocka_unit_test(test_json_stream),
	    cmocka_unit_test(test_json_pingpong_fallback),
	    cmocka_unit_test(test_json_mini_rejects),
	    cmocka_unit_test(test_proto),
	    cmocka_unit_test(test_mem_shared_counted_once),
	    cmocka_unit_test(test_mem_kernel_counts_sockets),
	    cmocka_unit_test(test_mem_settle_waits_for_frees),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
