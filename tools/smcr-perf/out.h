/* out.h: smcr-perf's results and how they are printed: text for people, JSON (issue 6's
 * shape) for programs, and --dat lines for bench/report and gnuplot (out.c). */
#ifndef SMCR_PERF_OUT_H
#define SMCR_PERF_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "perf.h"

/* One transport's runs of one compare (one size), in run order. */
struct perf_side {
	enum perf_trk transport;
	unsigned n;
	double value[PERF_ROUNDS_MAX];
	double p99[PERF_ROUNDS_MAX], p999[PERF_ROUNDS_MAX];
	double cpu[PERF_ROUNDS_MAX];
	double mem[PERF_ROUNDS_MAX], idle_mem[PERF_ROUNDS_MAX];
	/* worst mode over the runs, as read from the engine (client.c note_mode) */
	enum perf_mode mode;
	const char *local_reason, *peer_reason; /* names; NULL when no fallback */
	/* measured connections over all runs, and how many of them created a link group */
	unsigned long conns, first_contacts;
	uint32_t rmbe, peer_rmbe, sndbuf; /* of the first run's first measured connection */
	/* medians, filled by perf_cmp_finish */
	double median, p99_median, p999_median, cpu_median, mem_median, idle_mem_median;
};

struct perf_cmp {
	enum perf_test test;
	size_t size;
	double duration;
	unsigned rounds, conns;
	bool cpu;
	struct perf_side tcp, smcr;
	/* warm-up runs (--warmup), in the first size's compare only: printed, never in the
	 * medians; n == 0 when there were none */
	struct perf_side warm_tcp, warm_smcr;
	double ratio;     /* smcr median / tcp median, always (latency: lower is better) */
	double cpu_ratio; /* smcr cpu median / tcp cpu median */
};

/* Adds one run to a side (mode folds in: the worst wins). */
void perf_side_add(struct perf_side *s, const struct perf_result *r, const char *lreason,
                   const char *preason);
/* Medians of both sides and the ratios. */
void perf_cmp_finish(struct perf_cmp *c);

/* compare */
void perf_out_cmp_text(FILE *f, const struct perf_cmp *c);
void perf_out_cmp_json(FILE *f, const struct perf_cmp *c);
void perf_out_dat_header_cmp(FILE *f);
void perf_out_cmp_dat(FILE *f, const struct perf_cmp *c);
/* One progress line after round k (from 1; warm: a warm-up round) of both transports,
 * for a terminal: "round 2/3: tcp 25.1 Gbit/s, smcr 113 Gbit/s". */
void perf_out_cmp_progress(FILE *f, const struct perf_cmp *c, unsigned k, bool warm);

/* client: one result per size */
struct perf_client_out {
	enum perf_test test;
	const char *transport; /* "tcp" / "smcr" */
	const char *server;    /* "127.0.0.1:5301" */
	double duration;
	unsigned conns;
	bool cpu;
};
void perf_out_client_text_header(FILE *f, const struct perf_client_out *o);
void perf_out_client_text(FILE *f, const struct perf_client_out *o, const struct perf_result *r,
                          const char *lreason, const char *preason);
void perf_out_client_json(FILE *f, const struct perf_client_out *o, const struct perf_result *r,
                          const char *lreason, const char *preason);
void perf_out_dat_header_client(FILE *f);
void perf_out_client_dat(FILE *f, const struct perf_client_out *o, const struct perf_result *r);

/* JSON number: %.6g, or null for NaN and infinities (JSON has neither). */
void perf_json_num(FILE *f, double v);

#endif
