/* corebench.c: smcr-corebench, the engine's data path (src/core + a provider) without the
 * socket layer (docs/protocol/procedures.md 4: RDMA WRITE + CDC, window updates). Two engines in
 * one process, connected through the CLC pump of tests/lib/core_pair, then:
 *
 *   stream    the client sends SIZE-byte writes, the server reads (into a 256 KiB buffer)
 *   pingpong  SIZE bytes each way per round trip
 *
 * Single-threaded (default): one thread sends, progresses both engines and receives, so a
 * run is deterministic: what callgrind counts per operation (bench_run is the function to
 * toggle collection on) and what strace -c counts are the data path's own, with no
 * sleeping and no other thread. With -T: one thread per side, each progressing its own
 * engine between attempts (spinning, bounded by -n): the engine's ceiling on this machine,
 * next to what smcr-perf measures through the socket layer.
 *
 *   smcr-corebench [-m stream|pingpong] [-s SIZE] [-n OPS] [-r RCVBUF] [-d DEV] [-T] [-A]
 *
 * -r sets SO_RCVBUF-like sizes on both ends; -A turns the engine's RMBE auto-sizing on
 * (core_engine_params.rmbe_auto_max = CORE_RMBE_AUTO_MAX).
 *
 * Not a test: it prints figures only. Both ends spin; run it only for bounded -n. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lib/core_pair.h"
#include "util/clock.h"

struct opts {
	const char *mode;
	size_t size;
	long ops;
	uint32_t rcvbuf;
	const char *dev;
	bool threads;
	bool auto_rmbe;
};

static struct cp_pair pp;
static uint8_t *sbuf, *rbuf;
#define RBUF (256u * 1024u)

static void die(const char *what)
{
	fprintf(stderr, "smcr-corebench: %s\n", what);
	exit(1);
}

static void prog(struct core_engine *e)
{
	(void)core_engine_progress(e, pp.now, NULL);
}

/* Single-threaded: the function callgrind collects (--toggle-collect=bench_run). */
__attribute__((noinline)) long bench_run(const struct opts *o);
__attribute__((noinline)) long bench_run(const struct opts *o)
{
	long done = 0;
	unsigned idle = 0;
	if (!strcmp(o->mode, "stream")) {
		size_t off = 0;
		while (done < o->ops) {
			struct iovec v = { sbuf + off, o->size - off };
			long n = core_conn_send(pp.cli, &v, 1, 0);
			if (n > 0) {
				off += (size_t)n;
				if (off == o->size) {
					off = 0;
					done++;
				}
			} else if (n != -SMCR_E_AGAIN) {
				die("send failed");
			}
			prog(pp.se);
			struct iovec r = { rbuf, RBUF };
			long m;
			while ((m = core_conn_recv(pp.srv, &r, 1, 0)) > 0)
				;
			if (m != -SMCR_E_AGAIN)
				die("recv failed");
			prog(pp.ce);
			idle = n > 0 ? 0 : idle + 1;
			if (idle > 100000)
				die("stuck");
		}
		/* drain what is in flight */
		for (int i = 0; i < 100; i++) {
			prog(pp.se);
			struct iovec r = { rbuf, RBUF };
			while (core_conn_recv(pp.srv, &r, 1, 0) > 0)
				;
			prog(pp.ce);
		}
		return done;
	}
	/* pingpong */
	struct core_conn *side[2] = { pp.cli, pp.srv };
	struct core_engine *eng[2] = { pp.ce, pp.se };
	while (done < o->ops) {
		for (int d = 0; d < 2; d++) {
			struct core_conn *tx = side[d], *rx = side[1 - d];
			size_t sent = 0, got = 0;
			while (sent < o->size) {
				struct iovec v = { sbuf + sent, o->size - sent };
				long n = core_conn_send(tx, &v, 1, 0);
				if (n > 0)
					sent += (size_t)n;
				else if (n != -SMCR_E_AGAIN)
					die("send failed");
				prog(eng[1 - d]);
				prog(eng[d]);
			}
			while (got < o->size) {
				struct iovec r = { rbuf + got, o->size - got };
				long m = core_conn_recv(rx, &r, 1, 0);
				if (m > 0)
					got += (size_t)m;
				else if (m != -SMCR_E_AGAIN)
					die("recv failed");
				else
					prog(eng[1 - d]);
				if (++idle > 10000000)
					die("stuck");
			}
			idle = 0;
		}
		done++;
	}
	return done;
}

/* ---- threaded: one side per thread, each spinning on its own engine ---- */

struct side {
	const struct opts *o;
	struct core_conn *c;
	struct core_engine *e;
	bool is_client;
};

static _Atomic bool stop;

static void tprog(struct core_engine *e)
{
	/* Two spinning threads on a loaded 2-core machine: give the core away when somebody
	 * else wants it (else the peer we wait for may not run for a whole time slice). */
	static _Thread_local unsigned n;
	if ((++n & 15) == 0)
		sched_yield();
	(void)core_engine_progress(e, smcr_now_ns(), NULL);
}

static void *side_main(void *arg)
{
	struct side *s = arg;
	const struct opts *o = s->o;
	uint8_t *buf = s->is_client ? sbuf : rbuf;
	if (!strcmp(o->mode, "stream")) {
		if (s->is_client) {
			for (long i = 0; i < o->ops && !atomic_load(&stop); i++) {
				size_t off = 0;
				while (off < o->size) {
					struct iovec v = { buf + off, o->size - off };
					long n = core_conn_send(s->c, &v, 1, 0);
					if (n > 0)
						off += (size_t)n;
					else if (n != -SMCR_E_AGAIN)
						die("send failed");
					else
						tprog(s->e);
				}
			}
		} else {
			uint64_t want = (uint64_t)o->ops * o->size, got = 0;
			while (got < want && !atomic_load(&stop)) {
				struct iovec r = { buf, RBUF };
				long m = core_conn_recv(s->c, &r, 1, 0);
				if (m > 0)
					got += (uint64_t)m;
				else if (m != -SMCR_E_AGAIN)
					die("recv failed");
				else
					tprog(s->e);
			}
		}
		return NULL;
	}
	for (long i = 0; i < o->ops && !atomic_load(&stop); i++) {
		for (int d = 0; d < 2; d++) {
			bool sending = (d == 0) == s->is_client;
			size_t k = 0;
			while (k < o->size) {
				long n;
				if (sending) {
					struct iovec v = { buf + k, o->size - k };
					n = core_conn_send(s->c, &v, 1, 0);
				} else {
					struct iovec v = { buf + k, o->size - k };
					n = core_conn_recv(s->c, &v, 1, 0);
				}
				if (n > 0)
					k += (size_t)n;
				else if (n != -SMCR_E_AGAIN)
					die("transfer failed");
				else
					tprog(s->e);
			}
		}
	}
	return NULL;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end == 'K' || *end == 'k')
		v <<= 10;
	else if (*end == 'M' || *end == 'm')
		v <<= 20;
	return (size_t)v;
}

int main(int argc, char **argv)
{
	struct opts o = { "stream", 65536, 20000, 0, "shm", false, false };
	int ch;
	while ((ch = getopt(argc, argv, "m:s:n:r:d:TA")) != -1) {
		switch (ch) {
		case 'm': o.mode = optarg; break;
		case 's': o.size = parse_size(optarg); break;
		case 'n': o.ops = atol(optarg); break;
		case 'r': o.rcvbuf = (uint32_t)parse_size(optarg); break;
		case 'd': o.dev = optarg; break;
		case 'T': o.threads = true; break;
		case 'A': o.auto_rmbe = true; break;
		default:
			fprintf(stderr, "usage: smcr-corebench [-m stream|pingpong] [-s SIZE] [-n OPS] "
					"[-r RCVBUF] [-d DEV] [-T] [-A]\n");
			return 2;
		}
	}
	if (strcmp(o.mode, "stream") && strcmp(o.mode, "pingpong"))
		die("mode is stream or pingpong");
	if (!o.size || o.size > (64u << 20) || o.ops <= 0)
		die("bad size or count");
	sbuf = malloc(o.size > RBUF ? o.size : RBUF);
	rbuf = malloc(o.size > RBUF ? o.size : RBUF);
	if (!sbuf || !rbuf)
		die("out of memory");
	cp_fill(sbuf, o.size, 1);
	(void)cp_dev_spec();
	struct core_engine_params ep;
	memset(&ep, 0, sizeof(ep));
	if (o.auto_rmbe)
		ep.rmbe_auto_max = CORE_RMBE_AUTO_MAX;
	struct core_engine *ce = cp_engine(o.dev, &ep), *se = cp_engine(o.dev, &ep);
	if (!ce || !se)
		die("no engine (device?)");
	struct core_conn_params cpar, spar;
	cp_conn_params(&cpar, CORE_CLIENT, o.rcvbuf);
	cp_conn_params(&spar, CORE_SERVER, o.rcvbuf);
	if (cp_connect(&pp, ce, se, &cpar, &spar, 50) || pp.rc.status != CORE_CLC_SMC ||
	    pp.rs.status != CORE_CLC_SMC)
		die("handshake did not reach SMC");
	struct core_conn_info ci;
	core_conn_info(pp.srv, &ci);

	double c0 = cpu_s();
	uint64_t t0 = smcr_now_ns();
	long done;
	if (!o.threads) {
		done = bench_run(&o);
	} else {
		struct side s[2] = { { &o, pp.cli, ce, true }, { &o, pp.srv, se, false } };
		pthread_t th[2];
		for (int i = 0; i < 2; i++)
			if (pthread_create(&th[i], NULL, side_main, &s[i]))
				die("thread");
		for (int i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
		done = o.ops;
	}
	uint64_t t1 = smcr_now_ns();
	double c1 = cpu_s();
	double sec = (double)(t1 - t0) / 1e9;
	struct core_conn_info a, b;
	core_conn_info(pp.cli, &a);
	core_conn_info(pp.srv, &b);
	printf("mode %s size %zu ops %ld rmbe %u threads %d dev %s\n", o.mode, o.size, done,
	       ci.rmbe_size, o.threads, o.dev);
	if (!strcmp(o.mode, "stream"))
		printf("  %.3f GB/s, %.2f us/op, cpu %.3f s/GB\n",
		       (double)done * (double)o.size / sec / 1e9, sec * 1e6 / (double)done,
		       (c1 - c0) / ((double)done * (double)o.size / 1e9));
	else
		printf("  round trip %.3f us, cpu %.2f us/rt\n", sec * 1e6 / (double)done,
		       (c1 - c0) * 1e6 / (double)done);
	printf("  CDCs: client sent %llu recv %llu; server sent %llu recv %llu\n",
	       (unsigned long long)a.cdc_sent, (unsigned long long)a.cdc_received,
	       (unsigned long long)b.cdc_sent, (unsigned long long)b.cdc_received);
	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
	free(sbuf);
	free(rbuf);
	return 0;
}
