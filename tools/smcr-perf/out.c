/* out.c: smcr-perf's outputs (out.h). The JSON of compare is issue 6's object:
 *   {"test":..,"size":..,"tcp":{"median":..,"unit":..,"runs":[..]},
 *    "smcr":{"median":..,"unit":..,"runs":[..],"mode":"smcr"|"tcp-fallback"},"ratio":..}
 * with a few more fields (duration, rounds, transport, p99/p99.9, cpu, memory, fallback
 * reasons) that readers of the issue's shape may ignore. */
#include "out.h"

#include <math.h>
#include <string.h>

void perf_json_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.6g", v);
	else
		fputs("null", f);
}

/* Strings printed here are our own names (no quotes or backslashes); escape anyway. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void json_runs(FILE *f, const double *v, unsigned n)
{
	fputc('[', f);
	for (unsigned i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		perf_json_num(f, v[i]);
	}
	fputc(']', f);
}

void perf_side_add(struct perf_side *s, const struct perf_result *r, const char *lreason,
                   const char *preason)
{
	if (s->n >= PERF_ROUNDS_MAX)
		return;
	if (s->n == 0 || perf_mode_rank(r->mode) > perf_mode_rank(s->mode)) {
		s->mode = r->mode;
		s->local_reason = r->mode == PERF_MODE_FALLBACK ? lreason : NULL;
		s->peer_reason = r->mode == PERF_MODE_FALLBACK ? preason : NULL;
	}
	if (s->n == 0) {
		s->rmbe = r->rmbe;
		s->peer_rmbe = r->peer_rmbe;
		s->sndbuf = r->sndbuf;
	}
	s->conns += r->conns;
	s->first_contacts += r->first_contacts;
	s->value[s->n] = r->value;
	s->p99[s->n] = r->p99;
	s->p999[s->n] = r->p999;
	s->cpu[s->n] = r->cpu;
	s->mem[s->n] = r->mem_per_conn_kib;
	s->idle_mem[s->n] = r->idle_mem_per_conn_kib;
	s->n++;
}

/* Median of the finite values of v (a copy is sorted: runs stay in run order). */
static double median_of(const double *v, unsigned n)
{
	double tmp[PERF_ROUNDS_MAX];
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++)
		if (isfinite(v[i]))
			tmp[k++] = v[i];
	return perf_median(tmp, k);
}

static void side_finish(struct perf_side *s)
{
	s->median = median_of(s->value, s->n);
	s->p99_median = median_of(s->p99, s->n);
	s->p999_median = median_of(s->p999, s->n);
	s->cpu_median = median_of(s->cpu, s->n);
	s->mem_median = median_of(s->mem, s->n);
	s->idle_mem_median = median_of(s->idle_mem, s->n);
}

void perf_cmp_finish(struct perf_cmp *c)
{
	side_finish(&c->tcp);
	side_finish(&c->smcr);
	c->ratio = c->tcp.median > 0 ? c->smcr.median / c->tcp.median : NAN;
	c->cpu_ratio = c->tcp.cpu_median > 0 ? c->smcr.cpu_median / c->tcp.cpu_median : NAN;
}

/* ---- JSON ---- */

static void json_side(FILE *f, const struct perf_cmp *c, const struct perf_side *s, bool with_mode)
{
	fputs("{\"median\":", f);
	perf_json_num(f, s->median);
	fputs(",\"unit\":", f);
	json_str(f, perf_unit(c->test));
	fputs(",\"runs\":", f);
	json_runs(f, s->value, s->n);
	if (with_mode) {
		fputs(",\"mode\":", f);
		json_str(f, perf_mode_name(s->mode));
	}
	fputs(",\"transport\":", f);
	json_str(f, s->transport == PERF_TR_SMCR ? "smcr" : "tcp");
	fprintf(f, ",\"conns\":%lu,\"first_contacts\":%lu", s->conns, s->first_contacts);
	if (s->transport == PERF_TR_SMCR)
		fprintf(f, ",\"rmbe\":%u,\"peer_rmbe\":%u,\"sndbuf\":%u", s->rmbe, s->peer_rmbe,
		        s->sndbuf);
	if (s->local_reason || s->peer_reason) {
		fputs(",\"local_reason\":", f);
		json_str(f, s->local_reason ? s->local_reason : "NONE");
		fputs(",\"peer_reason\":", f);
		json_str(f, s->peer_reason ? s->peer_reason : "NONE");
	}
	if (c->test == PERF_TEST_PINGPONG) {
		fputs(",\"p99\":", f);
		perf_json_num(f, s->p99_median);
		fputs(",\"p999\":", f);
		perf_json_num(f, s->p999_median);
		fputs(",\"p99_runs\":", f);
		json_runs(f, s->p99, s->n);
		fputs(",\"p999_runs\":", f);
		json_runs(f, s->p999, s->n);
	}
	if (c->test == PERF_TEST_CONNS) {
		fputs(",\"mem_per_conn_kib\":", f);
		perf_json_num(f, s->mem_median);
		fputs(",\"idle_mem_per_conn_kib\":", f);
		perf_json_num(f, s->idle_mem_median);
	}
	if (c->cpu) {
		fputs(",\"cpu\":{\"median\":", f);
		perf_json_num(f, s->cpu_median);
		fputs(",\"unit\":", f);
		json_str(f, perf_cpu_unit(c->test));
		fputs(",\"runs\":", f);
		json_runs(f, s->cpu, s->n);
		fputc('}', f);
	}
	fputc('}', f);
}

void perf_out_cmp_json(FILE *f, const struct perf_cmp *c)
{
	fputs("{\"test\":", f);
	json_str(f, perf_test_name(c->test));
	fprintf(f, ",\"size\":%zu,\"duration\":", c->size);
	perf_json_num(f, c->duration);
	fprintf(f, ",\"rounds\":%u", c->rounds);
	if (c->test == PERF_TEST_CONNS)
		fprintf(f, ",\"conns\":%u", c->conns);
	fputs(",\"tcp\":", f);
	json_side(f, c, &c->tcp, false);
	fputs(",\"smcr\":", f);
	json_side(f, c, &c->smcr, true);
	fputs(",\"ratio\":", f);
	perf_json_num(f, c->ratio);
	if (c->warm_tcp.n || c->warm_smcr.n) {
		fputs(",\"warmup\":{\"tcp\":", f);
		json_runs(f, c->warm_tcp.value, c->warm_tcp.n);
		fputs(",\"smcr\":", f);
		json_runs(f, c->warm_smcr.value, c->warm_smcr.n);
		fputs(",\"smcr_mode\":", f);
		json_str(f, perf_mode_name(c->warm_smcr.mode));
		fputc('}', f);
	}
	fputs(",\"higher_is_better\":", f);
	fputs(perf_higher_is_better(c->test) ? "true" : "false", f);
	if (c->cpu) {
		fputs(",\"cpu_ratio\":", f);
		perf_json_num(f, c->cpu_ratio);
	}
	fputc('}', f);
}

/* ---- text ---- */

/* 3 significant digits, but never an exponent for a rate like 12345 conn/s */
static void fmt_num(char *buf, size_t len, double v)
{
	if (isfinite(v) && fabs(v) >= 1000.0)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.3g", v);
}

static void fmt_value(char *buf, size_t len, enum perf_test t, double v)
{
	if (!isfinite(v))
		snprintf(buf, len, "-");
	else {
		char num[32];
		fmt_num(num, sizeof(num), v);
		snprintf(buf, len, "%s %s", num, perf_unit(t));
	}
}

void perf_out_cmp_progress(FILE *f, const struct perf_cmp *c, unsigned k, bool warm)
{
	const struct perf_side *t = warm ? &c->warm_tcp : &c->tcp;
	const struct perf_side *s = warm ? &c->warm_smcr : &c->smcr;
	if (!t->n || !s->n)
		return;
	char vt[48], vs[48];
	fmt_value(vt, sizeof(vt), c->test, t->value[t->n - 1]);
	fmt_value(vs, sizeof(vs), c->test, s->value[s->n - 1]);
	if (warm)
		fprintf(f, "  warm-up %u: tcp %s, smcr %s\n", k, vt, vs);
	else
		fprintf(f, "  round %u/%u: tcp %s, smcr %s\n", k, c->rounds, vt, vs);
	fflush(f);
}

static const char *what(enum perf_test t)
{
	switch (t) {
	case PERF_TEST_STREAM:
		return "throughput";
	case PERF_TEST_PINGPONG:
		return "round trip (median)";
	case PERF_TEST_CONNECT:
		return "connections/s";
	case PERF_TEST_CONNS:
		return "aggregate throughput";
	case PERF_TEST_COUNT:
		break;
	}
	return "?";
}

static void text_side(FILE *f, const struct perf_cmp *c, const char *label,
                      const struct perf_side *s)
{
	char v[48], mode[48];
	fmt_value(v, sizeof(v), c->test, s->median);
	snprintf(mode, sizeof(mode), "%s", perf_mode_name(s->mode));
	fprintf(f, "  %-7s %-13s %-16s", label, mode, v);
	for (unsigned i = 0; i < s->n; i++) {
		char num[32];
		fmt_num(num, sizeof(num), s->value[i]);
		fprintf(f, " %s", num);
	}
	fputc('\n', f);
}

/* The "smcr" side's name in text: TCP(2) when a test build compares TCP with TCP. */
static const char *smcr_label(const struct perf_cmp *c)
{
	return c->smcr.transport == PERF_TR_SMCR ? "SMC-R" : "TCP(2)";
}

/* "  warm-up, not counted: TCP 33 31, SMC-R 30 28 Gbit/s" */
static void text_warmup(FILE *f, const struct perf_cmp *c)
{
	const struct perf_side *sides[2] = {&c->warm_tcp, &c->warm_smcr};
	const char *labels[2] = {"TCP", smcr_label(c)};
	fputs("  warm-up, not counted:", f);
	for (int k = 0; k < 2; k++) {
		fprintf(f, "%s %s", k ? "," : "", labels[k]);
		for (unsigned i = 0; i < sides[k]->n; i++) {
			char num[32];
			fmt_num(num, sizeof(num), sides[k]->value[i]);
			fprintf(f, " %s", num);
		}
	}
	fprintf(f, " %s\n", perf_unit(c->test));
}

void perf_out_cmp_text(FILE *f, const struct perf_cmp *c)
{
	char sz[32];
	perf_fmt_size(c->size, sz, sizeof(sz));
	fprintf(f, "%s, %s %s", perf_test_name(c->test), sz,
	        c->test == PERF_TEST_STREAM || c->test == PERF_TEST_CONNS ? "writes" : "messages");
	if (c->test == PERF_TEST_CONNS)
		fprintf(f, ", %u connections", c->conns);
	fprintf(f, ": %u round%s of %g s per transport, in turns, on loopback\n", c->rounds,
	        c->rounds == 1 ? "" : "s", c->duration);
	fprintf(f, "  %-7s %-13s %-16s %s\n", "", "mode", what(c->test), "runs");
	text_side(f, c, "TCP", &c->tcp);
	text_side(f, c, smcr_label(c), &c->smcr);
	if (c->warm_tcp.n || c->warm_smcr.n)
		text_warmup(f, c);
	if (c->smcr.first_contacts)
		fprintf(f, "  SMC-R: %lu of %lu measured connections created a link group\n",
		        c->smcr.first_contacts, c->smcr.conns);
	if (c->smcr.local_reason || c->smcr.peer_reason)
		fprintf(f, "  SMC-R fell back to TCP: local reason %s, peer reason %s\n",
		        c->smcr.local_reason ? c->smcr.local_reason : "NONE",
		        c->smcr.peer_reason ? c->smcr.peer_reason : "NONE");
	if (c->test == PERF_TEST_PINGPONG)
		fprintf(f,
		        "  tail: TCP p99 %.3g us, p99.9 %.3g us; "
		        "SMC-R p99 %.3g us, p99.9 %.3g us\n",
		        c->tcp.p99_median, c->tcp.p999_median, c->smcr.p99_median,
		        c->smcr.p999_median);
	if (c->test == PERF_TEST_CONNS)
		fprintf(f,
		        "  memory per connection, both ends (PSS + kernel slab and TCP buffers):\n"
		        "    idle:      TCP %.1f KiB, SMC-R %.1f KiB\n"
		        "    streaming: TCP %.1f KiB, SMC-R %.1f KiB\n",
		        c->tcp.idle_mem_median, c->smcr.idle_mem_median, c->tcp.mem_median,
		        c->smcr.mem_median);
	if (c->cpu)
		fprintf(f, "  CPU (both ends): TCP %.3g, SMC-R %.3g %s, ratio %.2f\n",
		        c->tcp.cpu_median, c->smcr.cpu_median, perf_cpu_unit(c->test),
		        c->cpu_ratio);
	fprintf(f, "  ratio SMC-R/TCP: %.2fx (%s is better)\n", c->ratio,
	        perf_higher_is_better(c->test) ? "higher" : "lower");
}

/* ---- dat: one line per size, '-' where a figure does not apply (gnuplot: set datafile
 * missing "-") ---- */

static void dat_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, " %.6g", v);
	else
		fputs(" -", f);
}

void perf_out_dat_header_cmp(FILE *f)
{
	fputs("# test size tcp smcr ratio unit mode tcp_p99 smcr_p99 tcp_p999 smcr_p999 "
	      "tcp_cpu smcr_cpu cpu_unit tcp_mem_kib smcr_mem_kib tcp_idle_mem_kib "
	      "smcr_idle_mem_kib\n",
	      f);
}

void perf_out_cmp_dat(FILE *f, const struct perf_cmp *c)
{
	fprintf(f, "%s %zu", perf_test_name(c->test), c->size);
	dat_num(f, c->tcp.median);
	dat_num(f, c->smcr.median);
	dat_num(f, c->ratio);
	fprintf(f, " %s %s", perf_unit(c->test), perf_mode_name(c->smcr.mode));
	dat_num(f, c->tcp.p99_median);
	dat_num(f, c->smcr.p99_median);
	dat_num(f, c->tcp.p999_median);
	dat_num(f, c->smcr.p999_median);
	dat_num(f, c->cpu ? c->tcp.cpu_median : NAN);
	dat_num(f, c->cpu ? c->smcr.cpu_median : NAN);
	fprintf(f, " %s", perf_cpu_unit(c->test));
	dat_num(f, c->tcp.mem_median);
	dat_num(f, c->smcr.mem_median);
	dat_num(f, c->tcp.idle_mem_median);
	dat_num(f, c->smcr.idle_mem_median);
	fputc('\n', f);
}

/* ---- client ---- */

void perf_out_client_text_header(FILE *f, const struct perf_client_out *o)
{
	fprintf(f, "%s to %s over %s, %g s per size", perf_test_name(o->test), o->server,
	        o->transport, o->duration);
	if (o->test == PERF_TEST_CONNS)
		fprintf(f, ", %u connections", o->conns);
	fputc('\n', f);
	fprintf(f, "  %-9s %-13s %-18s", "size", "mode", what(o->test));
	if (o->test == PERF_TEST_PINGPONG)
		fprintf(f, " %-10s %-10s", "p99", "p99.9");
	if (o->test == PERF_TEST_CONNS)
		fprintf(f, " %-24s", "mem/conn idle, streaming");
	if (o->cpu)
		fprintf(f, " %s", perf_cpu_unit(o->test));
	fputc('\n', f);
}

void perf_out_client_text(FILE *f, const struct perf_client_out *o, const struct perf_result *r,
                          const char *lreason, const char *preason)
{
	char sz[32], v[48];
	perf_fmt_size(r->size, sz, sizeof(sz));
	fmt_value(v, sizeof(v), o->test, r->value);
	fprintf(f, "  %-9s %-13s %-18s", sz, perf_mode_name(r->mode), v);
	if (o->test == PERF_TEST_PINGPONG)
		fprintf(f, " %-10.3g %-10.3g", r->p99, r->p999);
	if (o->test == PERF_TEST_CONNS)
		fprintf(f, " %.1f, %.1f KiB", r->idle_mem_per_conn_kib, r->mem_per_conn_kib);
	if (o->cpu)
		fprintf(f, " %.3g", r->cpu);
	fputc('\n', f);
	if (r->mode == PERF_MODE_FALLBACK)
		fprintf(f, "  (fell back to TCP: local reason %s, peer reason %s)\n", lreason,
		        preason);
}

void perf_out_client_json(FILE *f, const struct perf_client_out *o, const struct perf_result *r,
                          const char *lreason, const char *preason)
{
	fputs("{\"test\":", f);
	json_str(f, perf_test_name(o->test));
	fprintf(f, ",\"size\":%zu,\"transport\":", r->size);
	json_str(f, o->transport);
	fputs(",\"mode\":", f);
	json_str(f, perf_mode_name(r->mode));
	if (r->mode == PERF_MODE_FALLBACK) {
		fputs(",\"local_reason\":", f);
		json_str(f, lreason);
		fputs(",\"peer_reason\":", f);
		json_str(f, preason);
	}
	fputs(",\"server\":", f);
	json_str(f, o->server);
	fputs(",\"value\":", f);
	perf_json_num(f, r->value);
	fputs(",\"unit\":", f);
	json_str(f, perf_unit(o->test));
	fputs(",\"seconds\":", f);
	perf_json_num(f, r->seconds);
	fprintf(f, ",\"conns\":%u,\"first_contacts\":%u,\"ops\":%llu,\"bytes\":%llu", r->conns,
	        r->first_contacts, (unsigned long long)r->ops, (unsigned long long)r->bytes);
	if (r->rmbe || r->peer_rmbe || r->sndbuf)
		fprintf(f, ",\"rmbe\":%u,\"peer_rmbe\":%u,\"sndbuf\":%u", r->rmbe, r->peer_rmbe,
		        r->sndbuf);
	if (o->test == PERF_TEST_PINGPONG) {
		fputs(",\"median\":", f);
		perf_json_num(f, r->value);
		fputs(",\"p99\":", f);
		perf_json_num(f, r->p99);
		fputs(",\"p999\":", f);
		perf_json_num(f, r->p999);
	}
	if (o->test == PERF_TEST_CONNS) {
		fputs(",\"mem_per_conn_kib\":", f);
		perf_json_num(f, r->mem_per_conn_kib);
		fputs(",\"idle_mem_per_conn_kib\":", f);
		perf_json_num(f, r->idle_mem_per_conn_kib);
	}
	if (o->cpu) {
		fputs(",\"cpu\":", f);
		perf_json_num(f, r->cpu);
		fputs(",\"cpu_unit\":", f);
		json_str(f, perf_cpu_unit(o->test));
		fputs(",\"cpu_client_s\":", f);
		perf_json_num(f, r->cpu_client_s);
		fputs(",\"cpu_server_s\":", f);
		perf_json_num(f, r->cpu_server_s);
	}
	fputc('}', f);
}

void perf_out_dat_header_client(FILE *f)
{
	fputs("# test size transport mode value unit p99 p999 cpu cpu_unit mem_kib idle_mem_kib\n",
	      f);
}

void perf_out_client_dat(FILE *f, const struct perf_client_out *o, const struct perf_result *r)
{
	fprintf(f, "%s %zu %s %s", perf_test_name(o->test), r->size, o->transport,
	        perf_mode_name(r->mode));
	dat_num(f, r->value);
	fprintf(f, " %s", perf_unit(o->test));
	dat_num(f, r->p99);
	dat_num(f, r->p999);
	dat_num(f, o->cpu ? r->cpu : NAN);
	fprintf(f, " %s", perf_cpu_unit(o->test));
	dat_num(f, r->mem_per_conn_kib);
	dat_num(f, r->idle_mem_per_conn_kib);
	fputc('\n', f);
}
