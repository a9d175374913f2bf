/* test_core_failover_netns.c: two paths between two network namespaces (docs/FAILOVER.md):
 * the namespaces of tests/lib/emu_netns.h joined by two veth pairs (emu_netns_setup2:
 * 10.88.0.0/24 and 10.89.0.0/24), two emu devices per engine (one on each veth, each in its namespace; the
 * engines themselves run in this process). Four connections (two on each link), eight streams
 * (each connection both ways), checked byte by byte, while one veth after the other goes down
 * and up again (emu follows the carrier: a port event; the links on it fail over, and the
 * link is added again when it is back). Then both down: every connection ends with
 * ECONNRESET; both up: a new connection works and its group has two links again. Real time
 * (emu is real TCP). Needs root and iproute2 (else exit 77: skipped); makes namespaces, so
 * run it under flock /tmp/smcr-bpf.lock as every namespace test.
 *
 * With --long (ctest test_core_failover_netns_long), issue 22's CI run: 32 slots each
 * running one stream after another (random sizes 4 KiB-4 MiB, one direction, SHA-256 at both
 * ends, a new connection per stream, so new connections land on both links) for 64 s while
 * one veth after the other goes down for 2 s (the next only once the groups have two links
 * again); no byte lost or repeated, no stream without a byte for longer than the spec's link
 * timers (TEST LINK 30 s + 2 s), stream bytes on both veths (their tx counters) in the
 * windows where both are up; then both down: every group ends within that bound and every
 * connection end gives ECONNRESET; both up: new connections on a group with two links. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <openssl/evp.h>

#include "dev/emu/emu.h"
#include "lib/emu_netns.h"
#include "lib/twolink.h"
#include "util/clock.h"
#include "util/err.h"

static struct emu_netns nn;

static int veth(int pair, bool up)
{
	return emu_netns_path(&nn, pair, up);
}

/* Both runs start alike: two emu devices per engine (one per path), a first connection,
 * and the group with its two links. Returns the fixture (pair 0 connected). */
static struct tl_fix *two_paths_up(void)
{
	assert_int_equal(dev_emu_register(), 0);
	unsigned port = 20000u + (unsigned)(smcr_now_ns() / 1000 + (uint64_t)getpid()) % 40000u;
	struct tl_fix *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	assert_int_equal(tl_setup_netns(f, &nn, 2, port), 0);
	assert_true(tl_connect(f, 0));
	assert_int_equal(tl_wait_links(f, 2, 10 * TL_SEC), 0);
	return f;
}

/* Both paths back up after both were down: every device's carrier, then pair 0 connected
 * again on a new group that gets its two links. */
static void both_up_again(struct tl_fix *f, bool (*connect0)(struct tl_fix *))
{
	assert_int_equal(veth(0, true), 0);
	assert_int_equal(veth(1, true), 0);
	assert_int_equal(tl_wait_ports(f, 2, 10 * TL_SEC), 0);
	f->now = smcr_now_ns();
	assert_true(connect0(f));
	assert_int_equal(tl_wait_links(f, 2, 10 * TL_SEC), 0);
}

struct stream {
	struct core_conn *tx, *rx;
	uint64_t seed, sent, got;
	uint8_t sbuf[32768], rbuf[32768];
};

static bool step(struct stream *s, bool sending)
{
	bool moved = false;
	if (sending) {
		cp_stream_fill(s->sbuf, s->sent, sizeof(s->sbuf), s->seed);
		/* random sizes up to 8 KiB: the point is many CDCs in flight, not throughput */
		struct iovec v = { s->sbuf, 1 + (size_t)(s->seed * 7919 + s->sent) % 8192 };
		long n = core_conn_send(s->tx, &v, 1, 0);
		if (n > 0) {
			s->sent += (uint64_t)n;
			moved = true;
		} else {
			assert_int_equal(n, -SMCR_E_AGAIN);
		}
	}
	int r = cp_stream_recv(s->rx, s->rbuf, sizeof(s->rbuf), &s->got, s->seed);
	assert_true(r >= 0);
	return moved || r > 0;
}

static bool connect_pair0(struct tl_fix *f)
{
	return tl_connect(f, 0);
}

static void test_two_veths(void **state)
{
	(void)state;
	struct tl_fix *f = two_paths_up();
	for (unsigned i = 1; i < 4; i++)
		assert_true(tl_connect(f, i));
	/* both links carry connections */
	assert_ptr_not_equal(f->pp[0].cli->link, f->pp[1].cli->link);
	assert_ptr_equal(f->pp[0].cli->link, f->pp[2].cli->link);
	static struct stream st[8];
	for (int i = 0; i < 8; i++) {
		struct cp_pair *p = &f->pp[i / 2];
		st[i].tx = i % 2 ? p->srv : p->cli;
		st[i].rx = i % 2 ? p->cli : p->srv;
		st[i].seed = 100 + (uint64_t)i;
	}
	uint64_t run_ns = (cp_quick() ? 8 : 24) * TL_SEC;
	uint64_t t0 = smcr_now_ns(), next = t0 + 2 * TL_SEC, stall = 0;
	uint64_t last_move[8];
	for (int i = 0; i < 8; i++)
		last_move[i] = t0;
	int toggles = 0, down = -1;
	while (smcr_now_ns() < t0 + run_ns) {
		bool moved = false;
		for (int i = 0; i < 8; i++) {
			uint64_t before = st[i].got;
			moved |= step(&st[i], true);
			/* a stall: the receiver got nothing new (printed, not a bound) */
			uint64_t now = smcr_now_ns();
			if (st[i].got > before)
				last_move[i] = now;
			else if (now - last_move[i] > stall)
				stall = now - last_move[i];
		}
		tl_tick(f);
		/* Leave the CPU to emu's threads: on a loaded machine a device thread that does
		 * not run for its transport timeout (1.4 s) fails its QPs, both links at once. */
		usleep(moved ? 200 : 500);
		uint64_t t = smcr_now_ns();
		if (t >= next) {
			if (down < 0) {	/* one veth down, the pairs in turn */
				down = toggles % 2;
				assert_int_equal(veth(down, false), 0);
				toggles++;
				next = t + 1 * TL_SEC;
			} else {	/* and up again */
				assert_int_equal(veth(down, true), 0);
				down = -1;
				next = t + 2 * TL_SEC;
			}
		}
	}
	if (down >= 0)
		assert_int_equal(veth(down, true), 0);
	/* everything sent arrives, once, in order */
	uint64_t drain_until = smcr_now_ns() + 30 * TL_SEC;
	for (bool done = false; !done;) {
		done = true;
		for (int i = 0; i < 8; i++) {
			(void)step(&st[i], false);
			done &= st[i].got == st[i].sent;
		}
		tl_tick(f);
		assert_true(smcr_now_ns() < drain_until);
	}
	struct core_engine_stats sc, ss_;
	core_engine_stats(f->ce, &sc);
	core_engine_stats(f->se, &ss_);
	uint64_t bytes = 0;
	for (int i = 0; i < 8; i++)
		bytes += st[i].got;
	printf("# %d veth toggles, %llu bytes in 8 streams, failovers client %llu server %llu, "
	       "links added %llu, longest time a stream received nothing %llu ms\n",
	       toggles, (unsigned long long)bytes, (unsigned long long)sc.failovers,
	       (unsigned long long)ss_.failovers, (unsigned long long)ss_.links_added,
	       (unsigned long long)(stall / TL_MS));
	assert_true(toggles >= 2);
	assert_true(sc.failovers >= 1);
	for (int i = 0; i < 8; i++)
		assert_true(st[i].got > 0);
	assert_int_equal(tl_wait_links(f, 2, 20 * TL_SEC), 0);	/* the last path back: two links */

	/* both paths down: the group ends, every connection is reset */
	for (int i = 0; i < 8; i += 2)
		assert_int_equal(core_conn_send(st[i].tx, &(struct iovec){ st[i].sbuf, 100 }, 1, 0),
				 100);
	assert_int_equal(veth(0, false), 0);
	assert_int_equal(veth(1, false), 0);
	uint64_t bound = smcr_now_ns() + 20 * TL_SEC;
	while ((tl_lg(f->ce) || tl_lg(f->se)) && smcr_now_ns() < bound) {
		tl_tick(f);
		usleep(500);
	}
	assert_null(tl_lg(f->ce));
	assert_null(tl_lg(f->se));
	for (int i = 0; i < 4; i++) {
		core_conn_tcp_event(f->pp[i].cli, true, f->now);
		core_conn_tcp_event(f->pp[i].srv, true, f->now);
		char b[4];
		struct iovec v = { b, sizeof(b) };
		long r = core_conn_recv(f->pp[i].srv, &v, 1, 0);
		while (r > 0)
			r = core_conn_recv(f->pp[i].srv, &v, 1, 0);
		assert_int_equal(smcr_err_errno((int)r), ECONNRESET);
	}
	/* both up: a new connection, a new group with two links */
	for (int i = 0; i < 4; i++) {
		f->pp[i].now = f->now;
		cp_release(&f->pp[i]);
	}
	both_up_again(f, connect_pair0);
	struct stream s1 = { f->pp[0].cli, f->pp[0].srv, 7, 0, 0, { 0 }, { 0 } };
	while (s1.got < 1000000) {
		(void)step(&s1, s1.sent < 1000000);
		tl_tick(f);
	}
	tl_teardown(f);
	free(f);
}

/* ---- the long run: 32 streams of random sizes over connections made and ended all along ---- */

#define NSLOT 32

/* One stream slot: a sequence of connections, each carrying one stream of a random size in
 * one direction (SHA-256 at both ends); when its last byte is in, the connection is released
 * and the slot's next one made, so while both paths are up new connections land on both
 * links (the server alternates) and traffic crosses both veths. */
struct slot {
	struct cp_pair *pp;
	bool s2c;			/* this stream: server to client */
	uint64_t rnd;			/* slot's randomness (sizes, directions, bytes) */
	uint64_t seed, size, sent, got;
	EVP_MD_CTX *hs, *hr;		/* sender's and receiver's SHA-256 */
	uint64_t last_rx;		/* when the receiver last got a byte */
	unsigned streams;		/* completed and checked */
	uint8_t sbuf[65536], rbuf[65536];
};

/* bytes both sides sent on each veth pair (the interfaces' counters; emu's data is real TCP
 * on them) */
static void veth_counters(uint64_t v[2])
{
	for (int path = 0; path < 2; path++)
		v[path] = emu_netns_tx_bytes(&nn, 0, path) + emu_netns_tx_bytes(&nn, 1, path);
}

/* New connections that fell back to TCP, both ends agreeing (allowed while the veths
 * toggle: a handshake whose CONFIRM RKEY went out on the link that just failed times out
 * into the ERR_REGBUF fallback, as Linux's does; the program's connection works over TCP,
 * which this harness does not carry, so the slot makes another). */
static unsigned fallbacks;
static bool fallback_ok;

static void slot_start(struct tl_fix *f, struct slot *s)
{
	for (int tries = 0;; tries++) {
		f->now = smcr_now_ns();
		if (tl_connect(f, (unsigned)(s->pp - f->pp)))
			break;
		if (fallback_ok && tries < 5 && s->pp->rc.status == CORE_CLC_FALLBACK &&
		    s->pp->rs.status == CORE_CLC_FALLBACK) {
			fallbacks++;
			s->pp->now = f->now;
			cp_release(s->pp);
			continue;
		}
		fail_msg("connection not SMC-R: client %d (%s), server %d (%s), %u steps",
			 s->pp->rc.status, smcr_err_name(s->pp->rc.err), s->pp->rs.status,
			 smcr_err_name(s->pp->rs.err), s->pp->steps);
	}
	s->s2c = cp_rand(&s->rnd) & 1;
	/* 4 KiB .. 4 MiB, spread over the orders of magnitude */
	uint64_t r = cp_rand(&s->rnd);
	s->size = (4096ull << (r % 11)) + (r >> 32) % 4096;
	s->seed = cp_rand(&s->rnd);
	s->sent = s->got = 0;
	s->last_rx = smcr_now_ns();
	assert_int_equal(EVP_DigestInit_ex(s->hs, EVP_sha256(), NULL), 1);
	assert_int_equal(EVP_DigestInit_ex(s->hr, EVP_sha256(), NULL), 1);
}

static void slot_end(struct tl_fix *f, struct slot *s)
{
	uint8_t a[32], b[32];
	unsigned la = 0, lb = 0;
	assert_int_equal(EVP_DigestFinal_ex(s->hs, a, &la), 1);
	assert_int_equal(EVP_DigestFinal_ex(s->hr, b, &lb), 1);
	assert_int_equal(s->got, s->size);
	assert_memory_equal(a, b, 32);
	s->streams++;
	s->pp->now = f->now;
	cp_release(s->pp);
}

/* One step of a slot: send what the window takes, receive what is there. Returns true if a
 * byte moved; *stall gets the longest time the receiver went without a byte while bytes of
 * its stream were still to come. */
static bool slot_step(struct tl_fix *f, struct slot *s, uint64_t *stall, bool more)
{
	struct core_conn *tx = s->s2c ? s->pp->srv : s->pp->cli;
	struct core_conn *rx = s->s2c ? s->pp->cli : s->pp->srv;
	bool moved = false;
	if (s->sent < s->size) {
		uint64_t left = s->size - s->sent;
		size_t w = 1 + (size_t)(cp_rand(&s->rnd) % sizeof(s->sbuf));
		if (w > left)
			w = (size_t)left;
		cp_stream_fill(s->sbuf, s->sent, w, s->seed);
		long n = core_conn_send(tx, &(struct iovec){ s->sbuf, w }, 1, 0);
		if (n > 0) {
			assert_int_equal(EVP_DigestUpdate(s->hs, s->sbuf, (size_t)n), 1);
			s->sent += (uint64_t)n;
			moved = true;
		} else {
			assert_int_equal(n, -SMCR_E_AGAIN);
		}
	}
	uint64_t now = smcr_now_ns();
	for (;;) {
		long n = core_conn_recv(rx, &(struct iovec){ s->rbuf, sizeof(s->rbuf) }, 1, 0);
		if (n == -SMCR_E_AGAIN)
			break;
		assert_true(n > 0);	/* no EOF, no error: the stream is not over */
		assert_true(s->got + (uint64_t)n <= s->size);	/* nothing duplicated */
		assert_int_equal(EVP_DigestUpdate(s->hr, s->rbuf, (size_t)n), 1);
		s->got += (uint64_t)n;
		s->last_rx = now;
		moved = true;
	}
	if (s->got < s->size && now - s->last_rx > *stall)
		*stall = now - s->last_rx;
	if (s->got == s->size) {
		slot_end(f, s);
		if (more)
			slot_start(f, s);
	}
	return moved;
}

/* Every group of e that carries connections has two active links: redundancy is back, so
 * the other path may go (taking it before would be a double failure, which ends a group). */
static bool redundant(struct core_engine *e)
{
	for (struct core_lgr *lg = e->lgs; lg; lg = lg->next)
		if (lg->state != CORE_LG_DEAD && lg->nconns && lgr_links_active(lg) < 2)
			return false;
	return true;
}

static bool slots_idle(const struct slot *sl)
{
	for (int i = 0; i < NSLOT; i++)
		if (sl[i].pp->cli)
			return false;
	return true;
}

static struct slot *slots;

/* The long run's first connection after both paths came back: slot 0's next stream. */
static bool start_slot0(struct tl_fix *f)
{
	slot_start(f, &slots[0]);
	return true;
}

static void test_long_run(void **state)
{
	(void)state;
	/* the longest a link may stay silent before smcr calls it down (TEST LINK after 30 s
	 * without receipt, 2 s for the answer): no stream waits longer, and a group with no
	 * path left ends within it */
	const uint64_t bound = CORE_TESTLINK_NS + CORE_LLC_WAIT_NS;
	cp_set_realtime(true);
	struct tl_fix *f = two_paths_up();
	struct slot *sl = slots = calloc(NSLOT, sizeof(*sl));
	assert_non_null(sl);
	f->pp[0].now = f->now;
	cp_release(&f->pp[0]);
	for (int i = 0; i < NSLOT; i++) {
		sl[i].pp = &f->pp[i];
		sl[i].rnd = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) + (uint64_t)getpid();
		sl[i].hs = EVP_MD_CTX_new();
		sl[i].hr = EVP_MD_CTX_new();
		assert_non_null(sl[i].hs);
		assert_non_null(sl[i].hr);
		slot_start(f, &sl[i]);
	}
	/* 64 s, a veth down for 2 s every 4 s, the pairs in turn, the next one only once the
	 * groups have two links again (at most 15 s later); under the sanitizers 20 s */
	uint64_t run_ns = (cp_quick() ? 20 : 64) * TL_SEC;
	uint64_t t0 = smcr_now_ns(), next = t0 + 2 * TL_SEC, stall = 0;
	int toggles = 0, down = -1;
	fallback_ok = true;
	/* traffic on both veths while both are up: counters at the start of each such window
	 * (when both engines have two links again) and at its end */
	uint64_t w0[2] = { 0, 0 }, seen[2] = { 0, 0 };
	bool in_window = false;
	unsigned windows = 0, windows_both = 0;
	uint64_t relink_wait = 0;	/* longest wait for two links before a cut */
	while (smcr_now_ns() < t0 + run_ns) {
		bool moved = false;
		for (int i = 0; i < NSLOT; i++)
			moved |= slot_step(f, &sl[i], &stall, true);
		tl_tick(f);
		usleep(moved ? 200 : 500);
		uint64_t t = smcr_now_ns();
		if (down < 0 && !in_window && tl_links(f->ce) == 2 && tl_links(f->se) == 2) {
			veth_counters(w0);
			in_window = true;
		}
		if (t >= next && down < 0 && (!redundant(f->ce) || !redundant(f->se)) &&
		    t < next + 15 * TL_SEC)
			continue;	/* not yet: the groups are still single */
		if (t >= next) {
			if (down < 0) {	/* one veth down, the pairs in turn */
				if (t - next > relink_wait)
					relink_wait = t - next;
				if (in_window) {
					uint64_t w1[2];
					veth_counters(w1);
					windows++;
					/* more than keepalives: stream bytes (64 KiB) */
					if (w1[0] - w0[0] > 65536 && w1[1] - w0[1] > 65536)
						windows_both++;
					seen[0] += w1[0] - w0[0];
					seen[1] += w1[1] - w0[1];
					in_window = false;
				}
				down = toggles % 2;
				assert_int_equal(veth(down, false), 0);
				toggles++;
				next = t + 2 * TL_SEC;
			} else {	/* and up again */
				assert_int_equal(veth(down, true), 0);
				down = -1;
				next = t + 2 * TL_SEC;
			}
		}
	}
	if (down >= 0)
		assert_int_equal(veth(down, true), 0);
	fallback_ok = false;
	/* every stream in flight finishes: all bytes, once, the same SHA-256 */
	uint64_t drain_until = smcr_now_ns() + 60 * TL_SEC;
	while (!slots_idle(sl)) {
		for (int i = 0; i < NSLOT; i++)
			if (sl[i].pp->cli)
				(void)slot_step(f, &sl[i], &stall, false);
		tl_tick(f);
		usleep(200);
		assert_true(smcr_now_ns() < drain_until);
	}
	struct core_engine_stats sc, ss_;
	core_engine_stats(f->ce, &sc);
	core_engine_stats(f->se, &ss_);
	unsigned streams = 0;
	for (int i = 0; i < NSLOT; i++)
		streams += sl[i].streams;
	printf("# %d veth toggles in %llu s, %u streams checked (SHA-256) in %d slots, failovers "
	       "client %llu server %llu, links added %llu; both-up windows %u, with stream traffic "
	       "on both veths %u (veth 1 %llu bytes, veth 2 %llu); longest time a stream received "
	       "nothing %llu ms; %u new connections fell back to TCP; longest wait for two links "
	       "before a cut %llu ms\n",
	       toggles, (unsigned long long)(run_ns / TL_SEC), streams, NSLOT,
	       (unsigned long long)sc.failovers, (unsigned long long)ss_.failovers,
	       (unsigned long long)ss_.links_added, windows, windows_both,
	       (unsigned long long)seen[0], (unsigned long long)seen[1],
	       (unsigned long long)(stall / TL_MS), fallbacks,
	       (unsigned long long)(relink_wait / TL_MS));
	assert_true(toggles >= (cp_quick() ? 3 : 8));
	assert_true(fallbacks * 100 <= streams);	/* rare: at a failover's instant only */
	assert_true(sc.failovers + ss_.failovers >= 1);
	assert_true(streams >= NSLOT);
	assert_true(stall < bound);
	assert_true(windows >= 2);
	assert_true(windows_both >= 1);
	assert_true(seen[0] > 1000000 && seen[1] > 1000000);

	/* both paths down with every slot's stream half sent: every connection is reset (the
	 * run's groups, one or two links each: a group whose last ADD LINK failed stays single
	 * until a device comes back) */
	for (int i = 0; i < NSLOT; i++) {
		slot_start(f, &sl[i]);
		sl[i].size = 1ull << 40;	/* no end: it is cut */
		for (int k = 0; k < 4; k++) {
			(void)slot_step(f, &sl[i], &stall, false);
			tl_tick(f);
		}
	}
	uint64_t cut = smcr_now_ns();
	assert_int_equal(veth(0, false), 0);
	assert_int_equal(veth(1, false), 0);
	while ((tl_lg(f->ce) || tl_lg(f->se)) && smcr_now_ns() < cut + bound) {
		tl_tick(f);
		usleep(500);
	}
	uint64_t ended = smcr_now_ns() - cut;
	assert_null(tl_lg(f->ce));
	assert_null(tl_lg(f->se));
	unsigned resets = 0;
	for (int i = 0; i < NSLOT; i++) {
		/* the TCP connection under it ends too (the peer's RST) */
		core_conn_tcp_event(f->pp[i].cli, true, f->now);
		core_conn_tcp_event(f->pp[i].srv, true, f->now);
		struct core_conn *c[2] = { f->pp[i].cli, f->pp[i].srv };
		for (int k = 0; k < 2; k++) {
			long r = core_conn_recv(c[k], &(struct iovec){ sl[i].rbuf, sizeof(sl[i].rbuf) }, 1, 0);
			while (r > 0)
				r = core_conn_recv(c[k], &(struct iovec){ sl[i].rbuf, sizeof(sl[i].rbuf) }, 1, 0);
			assert_int_equal(smcr_err_errno((int)r), ECONNRESET);
			/* as TCP after the reset was reported: EPIPE */
			long w = core_conn_send(c[k], &(struct iovec){ sl[i].sbuf, 1 }, 1, 0);
			assert_int_equal(smcr_err_errno((int)w), EPIPE);
			resets++;
		}
	}
	printf("# both veths down: link groups ended after %llu ms, %u connection ends reset\n",
	       (unsigned long long)(ended / TL_MS), resets);
	for (int i = 0; i < NSLOT; i++) {
		sl[i].pp->now = f->now;
		cp_release(sl[i].pp);
	}
	/* both up: new connections, a new group with two links again, streams checked */
	both_up_again(f, start_slot0);
	for (int i = 1; i < 4; i++)
		slot_start(f, &sl[i]);
	assert_ptr_not_equal(f->pp[1].cli->link, f->pp[2].cli->link);	/* both links */
	while (!slots_idle(sl)) {
		for (int i = 0; i < 4; i++)
			if (sl[i].pp->cli)
				(void)slot_step(f, &sl[i], &stall, false);
		tl_tick(f);
	}
	for (int i = 0; i < NSLOT; i++) {
		EVP_MD_CTX_free(sl[i].hs);
		EVP_MD_CTX_free(sl[i].hr);
	}
	tl_teardown(f);
	cp_set_realtime(false);
	free(sl);
	free(f);
}

int main(int argc, char **argv)
{
	char why[256];
	if (emu_netns_setup2(&nn, why, sizeof(why))) {
		printf("skipped: %s\n", why);
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_veths),
	};
	const struct CMUnitTest long_tests[] = {
		cmocka_unit_test(test_long_run),
	};
	int rc = argc > 1 && !strcmp(argv[1], "--long") ? cmocka_run_group_tests(long_tests, NULL, NULL)
						    : cmocka_run_group_tests(tests, NULL, NULL);
	emu_netns_teardown(&nn);
	return rc;
}
