/* perf.h: smcr-perf, an iperf/sockperf-style benchmark on the smcr socket API (issue 6).
 *
 * The tool runs the same tests over two transports (tr.h): plain kernel TCP through libc, and
 * SMC-R through the smcr_* calls of include/smcr/smcr.h. Every figure is reported next to
 * TCP's, measured in the same run (STYLE.md 30), and the mode of each SMC-R connection
 * ("smcr" or "tcp-fallback") is read from the engine (SOL_SMCR/SMCR_INFO), never assumed.
 *
 * Files: args.c (command line, sizes, durations), stats.c (percentiles, medians, units),
 * proto.c (smcr-perf's own header and control frames), tr.c (transports), server.c,
 * client.c (one test, one transport, one size), compare.c (tcp and smcr in turns), out.c
 * (text, JSON and gnuplot-data output), main.c. docs/parts/perf.md has the whole picture. */
#ifndef SMCR_PERF_H
#define SMCR_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PERF_DEFAULT_PORT 5301
#define PERF_MAX_SIZES 16
#define PERF_SIZE_MAX (64u << 20) /* largest message / write size: 64 MiB */
#define PERF_CONNS_MAX 10000u
#define PERF_ROUNDS_MIN 1u     /* -r 1: a single round, as iperf does */
#define PERF_ROUNDS_DEFAULT 3u /* a median and a spread need 3 (issue 6) */
#define PERF_ROUNDS_MAX 100u
/* compare: uncounted rounds per transport before the first measured one. A fresh process's
 * first rounds pay one-time costs (first touches of new buffers, page tables, caches) that
 * a long-running service pays once; iperf3's --omit leaves out the same. */
#define PERF_WARMUP_DEFAULT 1u
#define PERF_WARMUP_MAX 10u
#define PERF_DURATION_MAX 3600.0 /* seconds */

enum perf_cmd {
	PERF_CMD_NONE = 0,
	PERF_CMD_SERVER,
	PERF_CMD_CLIENT,
	PERF_CMD_COMPARE,
	PERF_CMD_HELP,
	PERF_CMD_VERSION,
};

enum perf_test {
	PERF_TEST_STREAM = 0, /* one-way throughput, writes of SIZE */
	PERF_TEST_PINGPONG,   /* round trips of SIZE bytes */
	PERF_TEST_CONNECT,    /* connect, one SIZE exchange, close: connections per second */
	PERF_TEST_CONNS,      /* N concurrent connections, each streaming */
	PERF_TEST_COUNT,
};

enum perf_trk {
	PERF_TR_TCP = 0,  /* kernel TCP through libc */
	PERF_TR_SMCR = 1, /* the smcr socket API */
};

/* The mode a run's connections used, as read from the engine (tr_query). */
enum perf_mode {
	PERF_MODE_TCP = 0,  /* plain TCP transport: no engine involved */
	PERF_MODE_SMCR,     /* every measured connection said SMCR_MODE_SMCR */
	PERF_MODE_FALLBACK, /* at least one smcr connection fell back to TCP */
	PERF_MODE_UNKNOWN,  /* at least one smcr connection reported another mode */
};

struct perf_opts {
	enum perf_cmd cmd;
	const char *host; /* client: server to connect to */
	const char *bind; /* server: address to bind (NULL: 0.0.0.0) */
	uint16_t port;
	enum perf_test test;
	size_t sizes[PERF_MAX_SIZES];
	size_t nsizes;           /* 0 until -s: then the test's default size is used */
	double duration;         /* seconds per run */
	unsigned conns;          /* conns test: concurrent connections */
	unsigned rounds;         /* compare: runs per transport */
	unsigned warmup;         /* compare: uncounted runs per transport before them */
	size_t window;           /* -w: SO_SNDBUF and SO_RCVBUF of data sockets, 0 = default */
	enum perf_trk transport; /* client/server */
	enum perf_trk cmp_smcr;  /* compare: transport of the "smcr" side (tests: tcp) */
	bool json, dat, cpu;
	bool once;         /* server: exit after the first control session ends */
	bool duration_set; /* -d given (compare and client differ in their default) */
};

/* ---- args.c ---- */

/* Parses argv (argv[0] is the program) into *o. Returns 0, or -1 with a message in err. */
int perf_parse_args(int argc, char **argv, struct perf_opts *o, char *err, size_t errlen);
/* "64", "1K", "16k", "64KiB", "1M", "1MiB" (K=1024): *out in bytes, 1..PERF_SIZE_MAX.
 * Returns 0 or -1. */
int perf_parse_size(const char *s, size_t *out);
/* A comma-separated list of sizes, at most max. Returns the count or -1. */
int perf_parse_sizes(const char *s, size_t *out, size_t max);
/* "2", "0.5", "500ms", "2s": seconds, > 0 and <= PERF_DURATION_MAX. Returns 0 or -1. */
int perf_parse_duration(const char *s, double *out);
const char *perf_test_name(enum perf_test t);
int perf_test_from_name(const char *s, enum perf_test *out);
/* The size a test uses when -s is not given: 64 KiB for stream and conns, 64 B else. */
size_t perf_default_size(enum perf_test t);
void perf_usage(FILE *f);

/* ---- stats.c ---- */

/* Percentile p (0..100) of n sorted values, linear interpolation between the closest ranks
 * (numpy's default): rank = p/100 * (n-1). n == 0 gives NAN. */
double perf_percentile(const double *sorted, size_t n, double p);
/* Sorts v in place and returns its median (perf_percentile 50). */
double perf_median(double *v, size_t n);
void perf_sort(double *v, size_t n);
/* "64 B", "1 KiB", "64 KiB", "1.5 MiB" into buf. */
const char *perf_fmt_size(size_t n, char *buf, size_t len);

/* ---- results ---- */

/* One run: one test over one transport with one size. value is the headline figure:
 * stream/conns Gbit/s, pingpong median round trip in microseconds, connect connections
 * per second. */
struct perf_result {
	enum perf_test test;
	size_t size;
	double value;
	double p99, p999;        /* pingpong only (us), else NAN */
	double seconds;          /* measured interval */
	uint64_t ops;            /* round trips / connections made */
	uint64_t bytes;          /* payload the server received (stream, conns) */
	unsigned conns;          /* data connections measured */
	unsigned first_contacts; /* of those, how many created a link group (engine's word) */
	/* smcr: the first measured connection's RMBE, the peer's RMBE (which it writes into)
	 * and its send buffer, as the engine reports them; 0 for tcp */
	uint32_t rmbe, peer_rmbe, sndbuf;
	enum perf_mode mode;
	uint32_t local_reason, peer_reason; /* of the first fallen-back connection, else 0 */
	int raw_mode; /* the smcr_info mode of that connection (UNKNOWN case) */
	unsigned server_smcr, server_fallback; /* the server's view of the data connections */
	double cpu; /* --cpu: CPU s per GB (stream, conns) or us per op; NAN if not */
	double cpu_client_s, cpu_server_s;
	/* conns: memory per connection, both ends: resident growth (RSS) of client and server
	 * plus the growth of the kernel's TCP memory (/proc/net/sockstat), in KiB; idle: after
	 * the connections are made, before any payload; loaded: halfway through streaming.
	 * NAN for the other tests. */
	double mem_per_conn_kib, idle_mem_per_conn_kib;
};

/* The unit of perf_result.value and of cpu for a test. */
const char *perf_unit(enum perf_test t);
const char *perf_cpu_unit(enum perf_test t);
/* true when a bigger value is better (throughput, rate); false for latency. */
bool perf_higher_is_better(enum perf_test t);
const char *perf_mode_name(enum perf_mode m);
/* How far a mode is from "every connection used what was asked" (tcp, smcr 0; fallback 1;
 * unknown 2): a run or a compare side reports its worst. */
int perf_mode_rank(enum perf_mode m);

#endif
