/* fuzz_clc_sm.c: libFuzzer target for the code that applies CLC messages: the client and
 * server state machines of src/core/handshake.c (core_conn_clc_step, RFC 7609 3.5), with the
 * link-group and link set-up they start, over two engines in this process on the in-process
 * provider (tests/lib/core_pair, loopdev). fuzz_clc covers the decoder alone.
 *
 * Input: byte 0 picks the mode (byte 0 % 3) and the engines ((byte 0 / 3) & 1: 0 = the
 * default devices, SMC-R v1 only; 1 = devices with RoCE v2 GIDs and the user EID
 * SPIKE-UEID, so the SMC-R v2 paths run, docs/parts/wire-v2.md 6), the rest is a list of
 * chunks, each [n][n bytes]:
 *   mode 0  the server under attack: the chunks are the client's TCP bytes
 *   mode 1  the client under attack: after its Proposal, the chunks are the server's bytes
 *   mode 2  a real client and server, every message in flight XORed with the next chunk
 *           (structure kept, any field changed: Accepts and Confirms that decode)
 * Between chunks both engines progress and the clock moves on by 0.3 s (the CLC and LLC
 * timers fire). At the end EOF is fed, the clock jumps past every timer (idle link groups
 * too) and the connections are released. Checks (abort): a step never fails, never
 * consumes more than it was given, a finished handshake stays finished, and afterwards
 * neither engine holds a connection or a link group (nothing leaks across inputs). The
 * engines live for the process; each input starts them from the same state and the clock
 * from the same time (fuzz_engine.h), so an input's path does not depend on earlier ones.
 * Seed corpus: tests/fuzz/corpus/fuzz_clc_sm/ (a real Proposal, Accept, Confirm; v2_*: the
 * Linux 6.12 capture's v2 Proposal and Accept, and a v2 pair in flight). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_engine.h"
#include "lib/core_pair.h"
#include "util/clock.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct core_engine *ce, *se;		/* the pair this input runs on */
static struct core_engine *ce1, *se1, *ce2, *se2;	/* v1 only; v2 capable */
static uint64_t now;

static void setup(void)
{
	smcr_log_set_level(SMCR_LOG_ERROR);
	ce1 = fuzz_engine("loop", NULL, 0x1001);
	se1 = fuzz_engine("loop", NULL, 0x2002);
	ce2 = fuzz_engine("loop:gid=v2", "SPIKE-UEID", 0x1001);
	se2 = fuzz_engine("loop:gid=v2", "SPIKE-UEID", 0x2002);
}

static bool done(enum core_clc_status st)
{
	return st == CORE_CLC_SMC || st == CORE_CLC_FALLBACK || st == CORE_CLC_FAILED;
}

/* One step of c with the bytes of in (consumed ones removed); its output appended to out. */
static void step(struct core_conn *c, struct cp_stream *in, struct cp_stream *out, bool *fin,
		 enum core_clc_status *st)
{
	if (!c || *fin)
		return;
	struct core_clc_result r;
	if (core_conn_clc_step(c, in->buf, in->len, in->eof, now, &r))
		abort();
	if (r.consumed > in->len)
		abort();
	memmove(in->buf, in->buf + r.consumed, in->len - r.consumed);
	in->len -= r.consumed;
	if (out && r.out_len) {
		size_t n = r.out_len < sizeof(out->buf) - out->len ? r.out_len
								   : sizeof(out->buf) - out->len;
		memcpy(out->buf + out->len, r.out, n);
		out->len += n;
	}
	if (done(*st) && !done(r.status))
		abort(); /* a finished handshake came back to life */
	*st = r.status;
	*fin = done(r.status);
}

static void progress(void)
{
	core_engine_progress(ce, now, NULL);
	core_engine_progress(se, now, NULL);
}

static void put(struct cp_stream *s, const uint8_t *b, size_t n)
{
	if (n > sizeof(s->buf) - s->len)
		n = sizeof(s->buf) - s->len;
	memcpy(s->buf + s->len, b, n);
	s->len += n;
}

static void check_empty(void)
{
	for (int round = 0; round < 8; round++) {
		struct core_engine_stats a, b;
		core_engine_stats(ce, &a);
		core_engine_stats(se, &b);
		if (a.conns == 0 && b.conns == 0 && a.lgs == 0 && b.lgs == 0)
			return;
		now += 700 * SMCR_NS_PER_S; /* past the idle LG timers (600/610 s) */
		for (int i = 0; i < 4; i++)
			progress();
	}
	struct core_engine_stats a, b;
	core_engine_stats(ce, &a);
	core_engine_stats(se, &b);
	fprintf(stderr, "left: client conns %u lgs %u, server conns %u lgs %u\n", a.conns, a.lgs,
		b.conns, b.lgs);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ce1)
		setup();
	if (size < 1)
		return 0;
	unsigned mode = data[0] % 3;
	bool v2 = (data[0] / 3) & 1;
	ce = v2 ? ce2 : ce1;
	se = v2 ? se2 : se1;
	/* every input starts from the same state (fuzz_engine.h) */
	fuzz_engine_reset(ce, 0x5eed0001);
	fuzz_engine_reset(se, 0x5eed0002);
	now = FUZZ_T0;
	const uint8_t *p = data + 1, *end = data + size;
	struct core_conn_params cp, sp;
	cp_conn_params(&cp, CORE_CLIENT, 0);
	cp_conn_params(&sp, CORE_SERVER, 0);
	struct core_conn *cli = NULL, *srv = NULL;
	if (mode != 0 && core_conn_new(ce, &cp, &cli))
		abort();
	if (mode != 1 && core_conn_new(se, &sp, &srv))
		abort();
	static struct cp_stream c2s, s2c;
	memset(&c2s, 0, sizeof(c2s));
	memset(&s2c, 0, sizeof(s2c));
	bool cfin = false, sfin = false;
	enum core_clc_status cst = CORE_CLC_NEED_INPUT, sst = CORE_CLC_NEED_INPUT;
	/* mode 1: the client's Proposal goes nowhere */
	step(cli, &s2c, mode == 2 ? &c2s : NULL, &cfin, &cst);
	for (int rounds = 0; rounds < 64 && p < end; rounds++) {
		size_t n = *p++;
		if (n > (size_t)(end - p))
			n = (size_t)(end - p);
		const uint8_t *chunk = p;
		p += n;
		switch (mode) {
		case 0:
			put(&c2s, chunk, n);
			break;
		case 1:
			put(&s2c, chunk, n);
			break;
		default:
			/* mutate what is in flight, both ways */
			for (size_t i = 0; i < n && i < c2s.len; i++)
				c2s.buf[i] ^= chunk[i];
			for (size_t i = 0; i < n && i < s2c.len; i++)
				s2c.buf[i] ^= chunk[n - 1 - i];
			break;
		}
		step(srv, &c2s, mode == 2 ? &s2c : NULL, &sfin, &sst);
		step(cli, &s2c, mode == 2 ? &c2s : NULL, &cfin, &cst);
		progress();
		now += 300 * SMCR_NS_PER_MS;
		progress();
	}
	c2s.eof = s2c.eof = true;
	for (int i = 0; i < 4; i++) {
		step(srv, &c2s, NULL, &sfin, &sst);
		step(cli, &s2c, NULL, &cfin, &cst);
		now += 3 * SMCR_NS_PER_S;
		progress();
	}
	if (cli)
		core_conn_release(cli, now);
	if (srv)
		core_conn_release(srv, now);
	progress();
	check_empty();
	return 0;
}
