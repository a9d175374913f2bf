/* devbench.c: smcr-devbench, the device-layer benchmark: per provider, RDMA WRITE bandwidth
 * (64 KiB WRITEs, each followed by a 44-byte SEND as SMC-R's CDC follows its WRITEs,
 * docs/protocol/procedures.md 4.3) and 44-byte SEND ping-pong round trip, next to a TCP loopback
 * stream and ping-pong measured in the same run, as a table with ratios (STYLE.md 30).
 *
 *   smcr-devbench [-t seconds] [-n round-trips] [-s spin-us] [provider ...]
 *
 * Both ends run as threads of this process, each with its own device. Numbers depend on the
 * machine and its load; record them with the date and command (docs/parts/dev-shm.md). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dev/dev.h"
#include "util/clock.h"

#define CONF_PROVIDER(name, reg, spec) int reg(void);
#include "providers.def"
#undef CONF_PROVIDER
static const struct {
	const char *name;
	int (*reg)(void);
	const char *spec;
} providers[] = {
#define CONF_PROVIDER(name, reg, spec) { #name, reg, spec },
#include "providers.def"
#undef CONF_PROVIDER
};

#define CHUNK (64u * 1024u)
#define MSG 44u
#define RMB (4u << 20)
#define WIN 16

static double opt_secs = 1.0;
static long opt_rtts = 20000;
static uint64_t opt_spin_ns = 20000;

static void die(const char *what, int rc)
{
	fprintf(stderr, "smcr-devbench: %s: %s\n", what, rc < 0 ? smcr_err_msg(rc) : strerror(errno));
	exit(1);
}

/* ---- TCP loopback ------------------------------------------------------------------------ */

static void tcp_pair(int *a, int *b)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sa;
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&sa, &sl))
		die("tcp listen", 0);
	*a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*a < 0 || connect(*a, (struct sockaddr *)&sa, sizeof sa))
		die("tcp connect", 0);
	*b = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (*b < 0)
		die("tcp accept", 0);
	close(l);
	int one = 1;
	setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static _Atomic int stream_stop;

static void *tcp_sink(void *arg)
{
	int fd = *(int *)arg;
	static char buf[CHUNK];
	uint64_t *total = calloc(1, sizeof *total);
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n <= 0)
			break;
		*total += (uint64_t)n;
	}
	return total;
}

static double tcp_stream(void)
{
	int a, b;
	tcp_pair(&a, &b);
	pthread_t t;
	pthread_create(&t, NULL, tcp_sink, &b);
	static char buf[CHUNK];
	memset(buf, 1, sizeof buf);
	uint64_t t0 = smcr_now_ns(), end = t0 + (uint64_t)(opt_secs * 1e9);
	while (smcr_now_ns() < end)
		if (write(a, buf, sizeof buf) < 0)
			die("tcp write", 0);
	shutdown(a, SHUT_WR);
	void *r;
	pthread_join(t, &r);
	double secs = (double)(smcr_now_ns() - t0) / 1e9;
	uint64_t total = *(uint64_t *)r;
	free(r);
	close(a);
	close(b);
	return (double)total / secs / 1e9;
}

static void *tcp_echo(void *arg)
{
	int fd = *(int *)arg;
	char m[MSG];
	for (;;) {
		size_t got = 0;
		while (got < MSG) {
			ssize_t n = read(fd, m + got, MSG - got);
			if (n <= 0)
				return NULL;
			got += (size_t)n;
		}
		if (write(fd, m, MSG) != MSG)
			return NULL;
	}
}

static double tcp_pingpong(void)
{
	int a, b;
	tcp_pair(&a, &b);
	pthread_t t;
	pthread_create(&t, NULL, tcp_echo, &b);
	char m[MSG] = { 0 };
	uint64_t t0 = 0;
	for (long i = -1000; i < opt_rtts; i++) {	/* 1000 warm-up rounds */
		if (i == 0)
			t0 = smcr_now_ns();
		if (write(a, m, MSG) != MSG)
			die("tcp write", 0);
		size_t got = 0;
		while (got < MSG) {
			ssize_t n = read(a, m + got, MSG - got);
			if (n <= 0)
				die("tcp read", 0);
			got += (size_t)n;
		}
	}
	double us = (double)(smcr_now_ns() - t0) / 1e3 / (double)opt_rtts;
	close(a);
	pthread_join(t, NULL);
	close(b);
	return us;
}

/* ---- device ------------------------------------------------------------------------------ */

struct end {
	struct dev_device *dev;
	struct dev_pd *pd;
	struct dev_cq *scq, *rcq;
	struct dev_mem *rmem, *lmem;
	struct dev_mr *rmr, *lmr;
	struct dev_qp *qp;
	struct dev_gid gid;
};

static void end_open(struct end *e, const char *spec)
{
	int rc;
	struct dev_gid_entry ge;
	memset(e, 0, sizeof *e);
	if ((rc = dev_open(spec, &e->dev)) || (rc = dev_query_gid(e->dev, 1, 0, &ge)) ||
	    (rc = dev_alloc_pd(e->dev, &e->pd)) ||
	    (rc = dev_create_cq(e->dev, 256, NULL, &e->scq)) ||
	    (rc = dev_create_cq(e->dev, 256, NULL, &e->rcq)) ||
	    (rc = dev_mem_alloc(RMB, "bench-rmb", &e->rmem)) ||
	    (rc = dev_mem_alloc(RMB, "bench-snd", &e->lmem)) ||
	    (rc = dev_reg_mr(e->pd, e->rmem->addr, RMB,
			     DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE, &e->rmr)) ||
	    (rc = dev_reg_mr(e->pd, e->lmem->addr, RMB, DEV_ACCESS_LOCAL_WRITE, &e->lmr)))
		die("device setup", rc);
	e->gid = ge.gid;
	struct dev_qp_init_attr ia = { .send_cq = e->scq, .recv_cq = e->rcq,
				       .cap = { .max_send_wr = 3 * WIN, .max_recv_wr = 48,
						.max_send_sge = 2, .max_recv_sge = 1,
						.max_inline_data = MSG } };
	if ((rc = dev_create_qp(e->pd, &ia, &e->qp)))
		die("create_qp", rc);
	memset(e->lmem->addr, 0x5a, RMB);
}

static void end_connect(struct end *a, struct end *b)
{
	struct end *s[2] = { a, b };
	for (int i = 0; i < 2; i++) {
		struct dev_qp_attr at = { .qp_state = DEV_QPS_INIT, .port_num = 1,
					  .qp_access_flags = DEV_ACCESS_LOCAL_WRITE |
							     DEV_ACCESS_REMOTE_WRITE };
		if (dev_modify_qp(s[i]->qp, &at, DEV_QP_MASK_INIT))
			die("INIT", -1);
	}
	for (int i = 0; i < 2; i++) {
		struct dev_qp_attr at = { .qp_state = DEV_QPS_RTR, .path_mtu = DEV_MTU_1024,
					  .dest_qp_num = s[1 - i]->qp->qp_num, .min_rnr_timer = 5,
					  .max_dest_rd_atomic = 1 };
		at.ah_attr.dgid = s[1 - i]->gid;
		at.ah_attr.port_num = 1;
		at.ah_attr.hop_limit = 1;
		if (dev_modify_qp(s[i]->qp, &at, DEV_QP_MASK_RTR))
			die("RTR", -1);
	}
	for (int i = 0; i < 2; i++) {
		struct dev_qp_attr at = { .qp_state = DEV_QPS_RTS, .timeout = 15, .retry_cnt = 7,
					  .rnr_retry = 7, .max_rd_atomic = 1 };
		if (dev_modify_qp(s[i]->qp, &at, DEV_QP_MASK_RTS))
			die("RTS", -1);
	}
	for (int i = 0; i < 2; i++)
		for (uint64_t k = 0; k < 48; k++) {
			struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)s[i]->lmem->addr +
						      RMB - 64 * (k + 1),
					      .length = 64, .lkey = s[i]->lmr->lkey };
			struct dev_recv_wr rw = { .wr_id = k, .sg_list = &sg, .num_sge = 1 };
			if (dev_post_recv(s[i]->qp, &rw, NULL))
				die("post_recv", -1);
		}
}

static void end_close(struct end *e)
{
	int rc;
	if ((rc = dev_destroy_qp(e->qp)) || (rc = dev_dereg_mr(e->rmr)) ||
	    (rc = dev_dereg_mr(e->lmr)))
		die("teardown", rc);
	dev_mem_free(e->rmem);
	dev_mem_free(e->lmem);
	if ((rc = dev_destroy_cq(e->scq)) || (rc = dev_destroy_cq(e->rcq)) ||
	    (rc = dev_dealloc_pd(e->pd)))
		die("teardown", rc);
	dev_close(e->dev);
}

static void repost(struct end *e, uint64_t k)
{
	struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)e->lmem->addr + RMB - 64 * (k + 1),
			      .length = 64, .lkey = e->lmr->lkey };
	struct dev_recv_wr rw = { .wr_id = k, .sg_list = &sg, .num_sge = 1 };
	if (dev_post_recv(e->qp, &rw, NULL))
		die("post_recv", -1);
}

static int send_msg(struct end *e, uint64_t id, unsigned flags)
{
	char m[MSG] = { 1 };
	struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)m, .length = MSG };
	struct dev_send_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1,
				  .opcode = DEV_WR_SEND,
				  .send_flags = DEV_SEND_INLINE | DEV_SEND_SOLICITED | flags };
	return dev_post_send(e->qp, &wr, NULL);
}

/* Receives one message (spinning spin_ns first), reposts its receive WR. */
static void recv_one(struct end *e, uint64_t spin_ns)
{
	struct dev_wc wc;
	int n = dev_poll_cq_wait(e->rcq, 1, &wc, spin_ns, 5000);
	if (n != 1 || wc.status != DEV_WC_SUCCESS)
		die("receive", n < 0 ? n : -SMCR_E_TIMEDOUT);
	repost(e, wc.wr_id);
}

/* Takes send completions (they free send queue slots). */
static void reap(struct end *e)
{
	struct dev_wc wc[8];
	int n = dev_poll_cq(e->scq, 8, wc);
	for (int i = 0; i < n; i++)
		if (wc[i].status != DEV_WC_SUCCESS)
			die("send completion", -1);
}

struct sink_arg {
	struct end *e;
	uint64_t msgs;
};

static void *dev_sink(void *arg)
{
	struct sink_arg *s = arg;
	while (!atomic_load(&stream_stop) || s->msgs < 1) {
		struct dev_wc wc[16];
		int n = dev_poll_cq_wait(s->e->rcq, 16, wc, opt_spin_ns, 100);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != DEV_WC_SUCCESS)
				die("sink receive", -1);
			repost(s->e, wc[i].wr_id);
		}
		s->msgs += (uint64_t)(n > 0 ? n : 0);
	}
	return NULL;
}

/* 64 KiB WRITE into the peer's RMB ring, then a 44-byte SEND (as a CDC), WIN in flight. */
static double dev_stream(const char *spec)
{
	struct end a, b;
	end_open(&a, spec);
	end_open(&b, spec);
	end_connect(&a, &b);
	atomic_store(&stream_stop, 0);
	struct sink_arg sa = { &b, 0 };
	pthread_t t;
	pthread_create(&t, NULL, dev_sink, &sa);
	uint64_t sent = 0, done = 0, t0 = smcr_now_ns(), end = t0 + (uint64_t)(opt_secs * 1e9);
	while (smcr_now_ns() < end) {
		while (sent - done < WIN) {
			uint32_t off = (uint32_t)(sent % (RMB / CHUNK)) * CHUNK;
			struct dev_sge sg = { .addr = (uint64_t)(uintptr_t)a.lmem->addr + off,
					      .length = CHUNK, .lkey = a.lmr->lkey };
			struct dev_send_wr w = { .wr_id = sent, .sg_list = &sg, .num_sge = 1,
						 .opcode = DEV_WR_RDMA_WRITE };
			w.rdma.remote_addr = (uint64_t)(uintptr_t)b.rmem->addr + off;
			w.rdma.rkey = b.rmr->rkey;
			int rc = dev_post_send(a.qp, &w, NULL);
			if (!rc)
				rc = send_msg(&a, sent, DEV_SEND_SIGNALED);
			if (rc == -SMCR_E_DEV_QUEUE_FULL)
				break;
			if (rc)
				die("post_send", rc);
			sent++;
		}
		struct dev_wc wc[WIN];
		int n = dev_poll_cq_wait(a.scq, WIN, wc, opt_spin_ns, 1000);
		for (int i = 0; i < n; i++)
			if (wc[i].status != DEV_WC_SUCCESS)
				die("send completion", -1);
		done += (uint64_t)(n > 0 ? n : 0);
	}
	while (done < sent) {
		struct dev_wc wc[WIN];
		int n = dev_poll_cq_wait(a.scq, WIN, wc, opt_spin_ns, 1000);
		done += (uint64_t)(n > 0 ? n : 0);
	}
	double secs = (double)(smcr_now_ns() - t0) / 1e9;
	atomic_store(&stream_stop, 1);
	pthread_join(t, NULL);
	end_close(&a);
	end_close(&b);
	return (double)done * CHUNK / secs / 1e9;
}

struct echo_arg {
	struct end *e;
	long n;
	uint64_t spin;
};

static void *dev_echo(void *arg)
{
	struct echo_arg *x = arg;
	for (long i = 0; i < x->n; i++) {
		recv_one(x->e, x->spin);
		/* Every 16th signaled: its completion retires the unsignaled ones' slots. */
		if (send_msg(x->e, (uint64_t)i, i % 16 == 15 ? DEV_SEND_SIGNALED : 0))
			die("echo send", -1);
		reap(x->e);
	}
	return NULL;
}

static double dev_pingpong(const char *spec, uint64_t spin)
{
	struct end a, b;
	end_open(&a, spec);
	end_open(&b, spec);
	end_connect(&a, &b);
	long warm = 1000, n = opt_rtts;
	struct echo_arg ea = { &b, warm + n, spin };
	pthread_t t;
	pthread_create(&t, NULL, dev_echo, &ea);
	uint64_t t0 = 0;
	for (long i = -warm; i < n; i++) {
		if (i == 0)
			t0 = smcr_now_ns();
		if (send_msg(&a, (uint64_t)i, ((i + warm) % 16 == 15) ? DEV_SEND_SIGNALED : 0))
			die("ping send", -1);
		recv_one(&a, spin);
		reap(&a);
	}
	double us = (double)(smcr_now_ns() - t0) / 1e3 / (double)n;
	pthread_join(t, NULL);
	end_close(&a);
	end_close(&b);
	return us;
}

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "t:n:s:h")) != -1) {
		switch (opt) {
		case 't': opt_secs = atof(optarg); break;
		case 'n': opt_rtts = atol(optarg); break;
		case 's': opt_spin_ns = (uint64_t)atol(optarg) * 1000u; break;
		default:
			fprintf(stderr, "usage: %s [-t seconds] [-n round-trips] [-s spin-us] "
					"[provider ...]\n", argv[0]);
			return 2;
		}
	}
	if (opt_secs <= 0 || opt_rtts <= 0)
		return 2;
	time_t now = time(NULL);
	char date[32];
	strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	printf("smcr-devbench  %s  %ld cpus  stream %.1f s, ping-pong %ld round trips, spin %llu us\n",
	       date, ncpu, opt_secs, opt_rtts, (unsigned long long)(opt_spin_ns / 1000));
	double tcp_bw = tcp_stream(), tcp_rtt = tcp_pingpong();
	printf("\n%-34s %12s %12s %8s\n", "test", "value", "tcp", "ratio");
	printf("%-34s %12.2f %12s %8s\n", "tcp stream 64 KiB (GB/s)", tcp_bw, "-", "-");
	printf("%-34s %12.2f %12s %8s\n", "tcp ping-pong 44 B RTT (us)", tcp_rtt, "-", "-");
	for (size_t i = 0; i < sizeof providers / sizeof providers[0]; i++) {
		int wanted = optind >= argc;
		for (int k = optind; k < argc; k++)
			wanted |= strcmp(argv[k], providers[i].name) == 0;
		if (!wanted)
			continue;
		const char *spec = providers[i].spec ? providers[i].spec : providers[i].name;
		struct dev_device *probe;
		if (providers[i].reg() || dev_open(spec, &probe)) {
			printf("%-34s %12s\n", providers[i].name, "(no device: skipped)");
			continue;
		}
		dev_close(probe);
		char label[64];
		double bw = dev_stream(spec);
		snprintf(label, sizeof label, "%s WRITE 64K+SEND stream (GB/s)", providers[i].name);
		printf("%-34s %12.2f %12.2f %7.2fx\n", label, bw, tcp_bw, bw / tcp_bw);
		double rtt = dev_pingpong(spec, opt_spin_ns);
		snprintf(label, sizeof label, "%s SEND 44 B RTT spin (us)", providers[i].name);
		printf("%-34s %12.2f %12.2f %7.2fx\n", label, rtt, tcp_rtt, rtt / tcp_rtt);
		double rtt_sleep = dev_pingpong(spec, 0);
		snprintf(label, sizeof label, "%s SEND 44 B RTT sleep (us)", providers[i].name);
		printf("%-34s %12.2f %12.2f %7.2fx\n", label, rtt_sleep, tcp_rtt, rtt_sleep / tcp_rtt);
	}
	return 0;
}
