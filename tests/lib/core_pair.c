/* core_pair.c: see core_pair.h. */
#define _GNU_SOURCE
#include "core_pair.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"

#include "dev/shm/shm.h"
#include "loopdev.h"

const char *cp_dev_spec(void)
{
	static int once;
	if (!once) {
		once = 1;
		if (loopdev_register())
			abort();
		if (dev_shm_register())
			abort();
	}
	const char *s = getenv("SMCR_TEST_DEV");
	return s && *s ? s : "loop";
}

struct core_engine *cp_engine(const char *spec, const struct core_engine_params *p)
{
	struct core_engine_params ep;
	const char *devs[1];
	if (p)
		ep = *p;
	else
		memset(&ep, 0, sizeof(ep));
	devs[0] = spec ? spec : cp_dev_spec();
	if (spec)
		(void)cp_dev_spec();
	ep.devices = devs;
	ep.ndevices = 1;
	struct core_engine *e = NULL;
	if (core_engine_new(&ep, &e))
		return NULL;
	return e;
}

void cp_conn_params(struct core_conn_params *p, enum core_role role, uint32_t rcvbuf)
{
	memset(p, 0, sizeof(*p));
	p->role = role;
	struct sockaddr_in *l = (struct sockaddr_in *)(void *)&p->local;
	struct sockaddr_in *r = (struct sockaddr_in *)(void *)&p->peer;
	l->sin_family = AF_INET;
	r->sin_family = AF_INET;
	l->sin_addr.s_addr = htonl(0x7f000001);
	r->sin_addr.s_addr = htonl(0x7f000001);
	l->sin_port = htons(role == CORE_CLIENT ? 40000 : 7000);
	r->sin_port = htons(role == CORE_CLIENT ? 7000 : 40000);
	p->rcvbuf = rcvbuf;
}

static void stream_consume(struct cp_stream *s, size_t n)
{
	memmove(s->buf, s->buf + n, s->len - n);
	s->len -= n;
}

static void stream_put(struct cp_stream *s, const uint8_t *b, size_t n)
{
	if (s->len + n > sizeof(s->buf))
		abort();
	memcpy(s->buf + s->len, b, n);
	s->len += n;
}

static bool done_status(enum core_clc_status st)
{
	return st == CORE_CLC_SMC || st == CORE_CLC_FALLBACK || st == CORE_CLC_FAILED;
}

void cp_progress(struct cp_pair *pp, int n)
{
	loopdev_clock(pp->now);	/* the loop paths' simulated time (loopdev.h) */
	for (int i = 0; i < n; i++) {
		core_engine_progress(pp->ce, pp->now, NULL);
		if (pp->se != pp->ce)
			core_engine_progress(pp->se, pp->now, NULL);
	}
}

static bool cp_realtime;

void cp_set_realtime(bool on)
{
	cp_realtime = on;
}

void cp_round(struct cp_pair *pp)
{
	if (cp_realtime) {
		uint64_t t = smcr_now_ns();
		if (t > pp->now)
			pp->now = t;
	}
	if (!pp->cli_done && pp->cli) {
		if (core_conn_clc_step(pp->cli, pp->s2c.buf, pp->s2c.len, pp->s2c.eof, pp->now, &pp->rc))
			abort();
		stream_consume(&pp->s2c, pp->rc.consumed);
		stream_put(&pp->c2s, pp->rc.out, pp->rc.out_len);
		pp->cli_done = done_status(pp->rc.status);
	}
	if (!pp->srv_done && pp->srv) {
		if (core_conn_clc_step(pp->srv, pp->c2s.buf, pp->c2s.len, pp->c2s.eof, pp->now, &pp->rs))
			abort();
		stream_consume(&pp->c2s, pp->rs.consumed);
		stream_put(&pp->s2c, pp->rs.out, pp->rs.out_len);
		pp->srv_done = done_status(pp->rs.status);
	}
	cp_progress(pp, 1);
	pp->steps++;
}

bool cp_connect_smc_with(struct cp_pair *pp, struct core_engine *ce, struct core_engine *se,
			 const struct core_conn_params *cli_params,
			 const struct core_conn_params *srv_params)
{
	return cp_connect(pp, ce, se, cli_params, srv_params, 50) == 0 &&
	       pp->rc.status == CORE_CLC_SMC && pp->rs.status == CORE_CLC_SMC;
}

bool cp_connect_smc(struct cp_pair *pp, struct core_engine *ce, struct core_engine *se)
{
	return cp_connect_smc_with(pp, ce, se, NULL, NULL);
}

int cp_engines(const char *spec, struct core_engine **ce, struct core_engine **se)
{
	(void)cp_dev_spec();
	*ce = cp_engine(spec, NULL);
	*se = cp_engine(spec, NULL);
	if (*ce && *se)
		return 0;
	cp_engines_free(*ce, *se);
	*ce = *se = NULL;
	return -1;
}

void cp_close_both(struct cp_pair *pp)
{
	core_conn_close(pp->cli, false, pp->now);
	core_conn_close(pp->srv, false, pp->now);
	cp_progress(pp, 3);
}

int cp_two_setup(void **state)
{
	struct cp_two *t = calloc(1, sizeof(*t));
	*state = t;
	return t && cp_engines(NULL, &t->ce, &t->se) == 0 ? 0 : -1;
}

int cp_two_teardown(void **state)
{
	struct cp_two *t = *state;
	if (t)
		cp_engines_free(t->ce, t->se);
	free(t);
	return 0;
}

void cp_engines_free(struct core_engine *ce, struct core_engine *se)
{
	if (ce)
		core_engine_free(ce);
	if (se)
		core_engine_free(se);
}

int cp_connect(struct cp_pair *pp, struct core_engine *ce, struct core_engine *se,
	       const struct core_conn_params *cli_params, const struct core_conn_params *srv_params,
	       unsigned max_steps)
{
	struct core_conn_params cpar, spar;
	uint64_t now = pp->now ? pp->now : 1000000000ull;
	memset(pp, 0, sizeof(*pp));
	pp->now = now;
	pp->ce = ce;
	pp->se = se;
	if (!cli_params) {
		cp_conn_params(&cpar, CORE_CLIENT, 0);
		cli_params = &cpar;
	}
	if (!srv_params) {
		cp_conn_params(&spar, CORE_SERVER, 0);
		srv_params = &spar;
	}
	if (core_conn_new(ce, cli_params, &pp->cli) || core_conn_new(se, srv_params, &pp->srv))
		return -1;
	/* An asynchronous provider (shm: QPs are bound by its device thread) needs real time
	 * too: after max_steps rounds keep going, sleeping a little, for up to 10 s. */
	uint64_t until = 0;
	for (unsigned i = 0;; i++) {
		cp_round(pp);
		if (pp->cli_done && pp->srv_done)
			return 0;
		if (i >= max_steps) {
			uint64_t t = smcr_now_ns();
			if (!until)
				until = t + 10 * SMCR_NS_PER_S;
			if (t > until)
				return -1;
			usleep(100);
		}
	}
}

void cp_release(struct cp_pair *pp)
{
	if (pp->cli)
		core_conn_release(pp->cli, pp->now);
	if (pp->srv)
		core_conn_release(pp->srv, pp->now);
	pp->cli = pp->srv = NULL;
	cp_progress(pp, 3);
}

long cp_pump(struct cp_pair *pp, struct core_conn *tx, struct core_conn *rx, const uint8_t *buf,
	     size_t len, uint8_t *rbuf, size_t wmax)
{
	size_t sent = 0, got = 0;
	unsigned idle = 0;
	while (got < len) {
		bool moved = false;
		if (sent < len) {
			size_t w = len - sent < wmax ? len - sent : wmax;
			struct iovec v = { (void *)(uintptr_t)(buf + sent), w };
			long n = core_conn_send(tx, &v, 1, 0);
			if (n > 0) {
				sent += (size_t)n;
				moved = true;
			} else if (n != -SMCR_E_AGAIN) {
				return -1;
			}
		}
		struct iovec r = { rbuf + got, len - got };
		long m = core_conn_recv(rx, &r, 1, 0);
		if (m > 0) {
			got += (size_t)m;
			moved = true;
		} else if (m != -SMCR_E_AGAIN) {
			return -1;
		}
		cp_progress(pp, 1);
		idle = moved ? 0 : idle + 1;
		if (idle > 1000) {
			usleep(100);	/* an asynchronous provider */
			if (idle > 50000)
				return -1;
		}
	}
	return (long)got;
}

void cp_fill(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed ? seed : 88172645463325252ull;
	size_t i = 0;
	while (i + 8 <= len) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, 8);
		i += 8;
	}
	while (i < len) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i++] = (uint8_t)x;
	}
}

static uint64_t splitmix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

void cp_stream_fill(uint8_t *buf, uint64_t off, size_t len, uint64_t seed)
{
	size_t i = 0;
	while (i < len) {
		uint64_t pos = off + i;
		uint64_t v = splitmix(seed * 0x100000001B3ull + (pos >> 3));
		uint8_t b[8];
		memcpy(b, &v, 8);
		size_t k = pos & 7;
		while (k < 8 && i < len)
			buf[i++] = b[k++];
	}
}

long cp_stream_check(const uint8_t *buf, uint64_t off, size_t len, uint64_t seed)
{
	uint8_t tmp[4096];
	size_t i = 0;
	while (i < len) {
		size_t n = len - i < sizeof(tmp) ? len - i : sizeof(tmp);
		cp_stream_fill(tmp, off + i, n, seed);
		if (memcmp(tmp, buf + i, n)) {
			for (size_t k = 0; k < n; k++)
				if (tmp[k] != buf[i + k])
					return (long)(i + k);
		}
		i += n;
	}
	return -1;
}

uint64_t cp_rand(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x2545F4914F6CDD1Dull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

bool cp_quick(void)
{
	const char *q = getenv("SMCR_TEST_QUICK");
	return q && *q && strcmp(q, "0") != 0;
}

int cp_stream_recv(struct core_conn *rx, uint8_t *buf, size_t cap, uint64_t *got,
		   uint64_t seed)
{
	struct iovec r = { buf, cap };
	long m = core_conn_recv(rx, &r, 1, 0);
	if (m == -SMCR_E_AGAIN)
		return 0;
	if (m <= 0 || cp_stream_check(buf, *got, (size_t)m, seed) != -1)
		return -1;
	*got += (uint64_t)m;
	return 1;
}
