/* failbench.c: smcr-failbench, the two targets of two-link groups (docs/FAILOVER.md,
 * docs/PERFORMANCE.md "Two links and failover"), on emu devices over two veth pairs between
 * two network namespaces (tests/lib/emu_netns.h, emu_netns_setup2; the fixture of
 * tests/lib/twolink.h tl_setup_netns, as tests/core/test_core_failover_netns.c); the two engines run in this process, the devices'
 * TCP in the namespaces.
 *
 *   tput   N connections streaming client to server for D seconds, side by side in one
 *          run: one link (one emu device each end, the first veth) and two links (two
 *          devices each end: the server puts every other connection on the second link),
 *          R rounds alternating; prints each round's aggregate throughput and the ratio.
 *   pause  one connection streaming on the first link of a two-link group; its veth goes
 *          down; the receiver's longest gap between two receives around the cut (last byte
 *          before the cut to first byte after) next to the link-down detection time (cut
 *          to the sender's failover) plus one round trip (median of 200 one-byte round
 *          trips on the other link just before); R rounds. nocut_gap: the longest gap in
 *          the second before the cut (what the host's load alone gives).
 *
 *   smcr-failbench [-m tput|pause|both] [-d SECONDS] [-r ROUNDS] [-n CONNS] [-s SIZE]
 *
 * Needs root and iproute2. Not a test: it prints figures only. The loop spins (yielding the
 * CPU between rounds of progress): run it only bounded. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev/emu/emu.h"
#include "lib/emu_netns.h"
#include "lib/twolink.h"
#include "util/clock.h"
#include "util/err.h"

static struct emu_netns nn;
static unsigned port_base;

static int veth(int pair, bool up)
{
	return emu_netns_path(&nn, pair, up);
}

/* Engines with ndev devices (the first ndev paths; every carrier up first: the last round's
 * veth comes back slowly), one connection, the group with ndev links. */
static int setup(struct tl_fix *f, int ndev)
{
	if (tl_setup_netns(f, &nn, ndev, port_base++) || !tl_connect(f, 0))
		return -1;
	return tl_wait_links(f, (unsigned)ndev, 10 * TL_SEC);
}

static uint8_t sbuf[1 << 20], rbuf[1 << 20];

/* Sends what the window takes on c, receives what s has: bytes received. */
static uint64_t pump(struct core_conn *c, struct core_conn *s, size_t size)
{
	long n = core_conn_send(c, &(struct iovec){ sbuf, size }, 1, 0);
	if (n < 0 && n != -SMCR_E_AGAIN) {
		fprintf(stderr, "send: %s\n", smcr_err_msg((int)n));
		exit(1);
	}
	uint64_t got = 0;
	for (;;) {
		long k = core_conn_recv(s, &(struct iovec){ rbuf, sizeof(rbuf) }, 1, 0);
		if (k == -SMCR_E_AGAIN)
			break;
		if (k <= 0) {
			fprintf(stderr, "recv: %s\n", k ? smcr_err_msg((int)k) : "EOF");
			exit(1);
		}
		got += (uint64_t)k;
	}
	return got;
}

/* Aggregate MB/s of nconn streams over ndev links for d seconds. */
static double tput(int ndev, unsigned nconn, double d, size_t size, unsigned *links_used)
{
	struct tl_fix *f = calloc(1, sizeof(*f));
	if (!f || setup(f, ndev)) {
		fprintf(stderr, "setup with %d devices failed\n", ndev);
		exit(1);
	}
	for (unsigned i = 1; i < nconn; i++)
		if (!tl_connect(f, i)) {
			fprintf(stderr, "connection %u: not SMC-R\n", i);
			exit(1);
		}
	struct core_link *l0 = f->pp[0].cli->link;
	*links_used = 1;
	for (unsigned i = 1; i < nconn; i++)
		if (f->pp[i].cli->link != l0)
			*links_used = 2;
	/* warm up 0.3 s, then measure */
	uint64_t t0 = smcr_now_ns(), tw = t0 + 300 * TL_MS, te = tw + (uint64_t)(d * 1e9);
	uint64_t bytes = 0;
	for (uint64_t t = t0; t < te; t = smcr_now_ns()) {
		uint64_t got = 0;
		for (unsigned i = 0; i < nconn; i++)
			got += pump(f->pp[i].cli, f->pp[i].srv, size);
		if (t >= tw)
			bytes += got;
		tl_tick(f);
		sched_yield();
	}
	tl_teardown(f);
	free(f);
	return (double)bytes / d / 1e6;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* One failover: pause, detection, RTT (ns). */
static int pause_round(uint64_t *pause, uint64_t *detect, uint64_t *rtt, uint64_t *nocut)
{
	struct tl_fix *f = calloc(1, sizeof(*f));
	if (!f || setup(f, 2) || !tl_connect(f, 1))
		return -1;
	struct cp_pair *a = &f->pp[0], *b = &f->pp[1];
	if (a->cli->link == b->cli->link)
		return -1;
	/* which veth carries a: its client link's device */
	int pair = a->cli->link->cdev == &f->ce->devs[0] ? 0 : 1;
	/* one round trip on b's link: 200 one-byte exchanges, the median */
	static uint64_t rt[200];
	for (int i = 0; i < 200; i++) {
		uint64_t t = smcr_now_ns();
		if (core_conn_send(b->cli, &(struct iovec){ sbuf, 1 }, 1, 0) != 1)
			return -1;
		while (core_conn_recv(b->srv, &(struct iovec){ rbuf, 1 }, 1, 0) != 1)
			tl_tick(f);
		if (core_conn_send(b->srv, &(struct iovec){ sbuf, 1 }, 1, 0) != 1)
			return -1;
		while (core_conn_recv(b->cli, &(struct iovec){ rbuf, 1 }, 1, 0) != 1)
			tl_tick(f);
		rt[i] = smcr_now_ns() - t;
	}
	qsort(rt, 200, sizeof(rt[0]), cmp_u64);
	*rtt = rt[100];
	struct core_engine_stats st;
	core_engine_stats(f->ce, &st);
	uint64_t fo0 = st.failovers, sdet = 0, first_after = 0;
	core_engine_stats(f->se, &st);
	uint64_t sfo0 = st.failovers;
	uint64_t t0 = smcr_now_ns(), cut = t0 + TL_SEC, tdet = 0, last = 0, gap = 0, base = 0;
	bool down = false;
	for (uint64_t t = t0; t < cut + 3 * TL_SEC; t = smcr_now_ns()) {
		if (pump(a->cli, a->srv, 65536)) {
			uint64_t now = smcr_now_ns();
			/* the gap around the cut: from the last receive before it */
			if (down && last && now - last > gap)
				gap = now - last;
			/* the same gap in the second before the cut: what the load alone gives */
			if (!down && last && now > t0 + 200 * TL_MS && now - last > base)
				base = now - last;
			if (down && !first_after && now - last > TL_MS)
				first_after = now - cut;
			last = now;
		}
		tl_tick(f);
		if (!down && t >= cut) {
			if (veth(pair, false))
				return -1;
			cut = smcr_now_ns();
			down = true;
		}
		if (down && !tdet) {
			core_engine_stats(f->ce, &st);
			if (st.failovers > fo0)
				tdet = smcr_now_ns() - cut;
		}
		if (down && !sdet) {
			core_engine_stats(f->se, &st);
			if (st.failovers > sfo0)
				sdet = smcr_now_ns() - cut;
		}
		sched_yield();
	}
	if (veth(pair, true))
		return -1;
	if (getenv("FAILBENCH_DEBUG"))
		fprintf(stderr, "cut +0: client failover +%.2f ms, server failover +%.2f ms, first "
				"byte after a gap +%.2f ms\n", tdet / 1e6, sdet / 1e6, first_after / 1e6);
	*pause = gap;
	*nocut = base;
	*detect = tdet;
	tl_teardown(f);
	free(f);
	return tdet && gap ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *mode = "both";
	double d = 3;
	int rounds = 3;
	unsigned nconn = 8;
	size_t size = 65536;
	int o;
	while ((o = getopt(argc, argv, "m:d:r:n:s:")) != -1) {
		switch (o) {
		case 'm': mode = optarg; break;
		case 'd': d = atof(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'n': nconn = (unsigned)atoi(optarg); break;
		case 's': size = (size_t)atol(optarg); break;
		default:
			fprintf(stderr, "usage: smcr-failbench [-m tput|pause|both] [-d SECONDS] "
					"[-r ROUNDS] [-n CONNS] [-s SIZE]\n");
			return 2;
		}
	}
	if (nconn < 2 || nconn > TL_NPP || size > sizeof(sbuf) || d <= 0 || rounds < 1) {
		fprintf(stderr, "smcr-failbench: -n 2..%d, -s up to 1 MiB\n", TL_NPP);
		return 2;
	}
	char why[256];
	if (emu_netns_setup2(&nn, why, sizeof(why))) {
		fprintf(stderr, "smcr-failbench: %s\n", why);
		return 77;
	}
	if (dev_emu_register()) {
		emu_netns_teardown(&nn);
		return 1;
	}
	port_base = 20000u + (unsigned)(getpid() % 20000);
	cp_set_realtime(true);
	cp_fill(sbuf, sizeof(sbuf), 1);
	int rc = 0;
	if (!strcmp(mode, "tput") || !strcmp(mode, "both")) {
		printf("# stream throughput, %u connections, %zu-byte writes, %.1f s per run\n",
		       nconn, size, d);
		printf("%-6s %12s %12s %8s\n", "round", "1link_MB/s", "2links_MB/s", "ratio");
		for (int r = 0; r < rounds; r++) {
			unsigned u1, u2;
			double one = tput(1, nconn, d, size, &u1);
			double two = tput(2, nconn, d, size, &u2);
			printf("%-6d %12.1f %12.1f %8.2f%s\n", r + 1, one, two, two / one,
			       u2 == 2 ? "" : " (two-link run used one link)");
			fflush(stdout);
		}
	}
	if (!strcmp(mode, "pause") || !strcmp(mode, "both")) {
		printf("# failover pause: receiver's gap around the cut vs detection + one RTT\n");
		printf("%-6s %10s %10s %10s %10s %8s %12s\n", "round", "pause_ms", "detect_ms",
		       "rtt_us", "bound_ms", "ratio", "nocut_gap_ms");
		for (int r = 0; r < rounds; r++) {
			uint64_t p, dt, rt, nc;
			if (pause_round(&p, &dt, &rt, &nc)) {
				printf("%-6d failed\n", r + 1);
				rc = 1;
				continue;
			}
			printf("%-6d %10.2f %10.2f %10.1f %10.2f %8.2f %12.2f\n", r + 1, p / 1e6,
			       dt / 1e6, rt / 1e3, (dt + rt) / 1e6, (double)p / (double)(dt + rt),
			       nc / 1e6);
			fflush(stdout);
		}
	}
	emu_netns_teardown(&nn);
	return rc;
}
