/* fuzz_lgr_msgs.c: libFuzzer target for the code that applies LLC and CDC messages to a live
 * link group (src/core/llc_proc.c, rx.c, lgr.c; RFC 7609 3.x and 4.x): fuzz_llc and fuzz_cdc
 * cover the decoders alone. Two engines in this process on the in-process provider
 * (tests/lib/core_pair, loopdev) hold an SMC-R connection; the input is a sequence of
 * 44-byte messages the client's link sends to the server (link_send_msg: exactly what a
 * hostile peer can put on the wire), between real data in both directions.
 *
 * Input: 44-byte records; byte 0 of a record is its type byte as sent, except:
 *   a record whose first byte is 0xFE (CDC) and whose byte 43 has bit 0 set gets the live
 *   connection's token (so the cursor and flag checks are reached, not only the token
 *   lookup); bit 1 of byte 43 then also sets the sequence number to the next one.
 * After each record both engines progress and the clock moves on by 0.1 s; every fourth
 * record the client sends 100 bytes and the server reads what it can. At the end the
 * connections are released, the clock jumps past every timer, and both engines must hold
 * no connection and no link group (abort otherwise); the engines live for the process and
 * each input starts them from the same state and the clock from the same time
 * (fuzz_engine.h). ASan/UBSan catch any stray access:
 * nothing the peer sends may make the server read or write outside its buffers.
 * An input whose size is not a multiple of 44 runs on a v2 link group instead (devices with
 * RoCE v2 GIDs and a common user EID: the SMC-R v2 LLC paths, docs/parts/wire-v2.md 9); the
 * bytes past the last whole record only select that. On a v2 link group a record whose
 * byte 0 is a v2 type (high nibble 2) and whose length field (bytes 1-2, little-endian) is
 * 45..LONG_MAX and fits in the input is sent that long (link_send_long: the peer's long v2
 * LLC messages, ADD LINK with its RKey list among them, through the receive tail); the next
 * record starts after it.
 * Seed corpus: tests/fuzz/corpus/fuzz_lgr_msgs/ (v2_*: v2 LLC messages on a v2 LG). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "core/core_int.h"
#include "fuzz_engine.h"
#include "lib/core_pair.h"
#include "util/clock.h"
#include "util/log.h"
#include "wire/cdc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LONG_MAX_LEN 4200	/* an ADD LINK v2 with 255 RKeys is 4152 bytes */

static struct core_engine *ce, *se;
static struct core_engine *ce1, *se1, *ce2, *se2;	/* v1; v2 (loop:gid=v2, one UEID) */
static uint64_t now;

static void progress(void)
{
	core_engine_progress(ce, now, NULL);
	core_engine_progress(se, now, NULL);
}

static void check_empty(void)
{
	struct core_engine_stats a, b;
	for (int round = 0; round < 8; round++) {
		core_engine_stats(ce, &a);
		core_engine_stats(se, &b);
		if (a.conns == 0 && b.conns == 0 && a.lgs == 0 && b.lgs == 0)
			return;
		now += 700 * SMCR_NS_PER_S;
		for (int i = 0; i < 4; i++)
			progress();
	}
	fprintf(stderr, "left: client conns %u lgs %u, server conns %u lgs %u\n", a.conns, a.lgs,
		b.conns, b.lgs);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ce1) {
		smcr_log_set_level(SMCR_LOG_ERROR);
		ce1 = fuzz_engine("loop", NULL, 0x1001);
		se1 = fuzz_engine("loop", NULL, 0x2002);
		ce2 = fuzz_engine("loop:gid=v2", "FUZZ", 0x1001);
		se2 = fuzz_engine("loop:gid=v2", "FUZZ", 0x2002);
	}
	bool v2 = size % 44 != 0;
	ce = v2 ? ce2 : ce1;
	se = v2 ? se2 : se1;
	/* every input starts from the same state (fuzz_engine.h) */
	fuzz_engine_reset(ce, 0x5eed0001);
	fuzz_engine_reset(se, 0x5eed0002);
	now = FUZZ_T0;
	struct cp_pair pp;
	memset(&pp, 0, sizeof(pp));
	pp.now = now;
	if (!cp_connect_smc(&pp, ce, se))
		abort();
	struct core_conn_info ci;
	core_conn_info(pp.cli, &ci);
	if (ci.smc_version != (v2 ? 2 : 1))
		abort();
	now = pp.now;
	struct core_conn *cli = pp.cli, *srv = pp.srv;
	uint8_t rbuf[4096], sbuf[100];
	memset(sbuf, 0x33, sizeof(sbuf));
	size_t off = 0;
	for (size_t k = 0; k < 64 && off + 44 <= size; k++) {
		uint8_t msg[44];
		const uint8_t *rec = data + off;
		size_t rlen = 44;
		if (v2 && (rec[0] >> 4) == 2) {
			size_t want = (size_t)rec[1] | (size_t)rec[2] << 8;
			if (want > 44 && want <= LONG_MAX_LEN && off + want <= size)
				rlen = want;
		}
		off += rlen;
		memcpy(msg, rec, 44);
		pthread_mutex_lock(&cli->lock);
		struct core_link *l = cli->link;
		uint32_t token = cli->peer_token;
		uint16_t seq = (uint16_t)(cli->tx_seq + 1);
		pthread_mutex_unlock(&cli->lock);
		if (!l)
			break; /* the link group is gone (a violation ended it) */
		if (msg[0] == CDC_TYPE && (msg[43] & 1)) {
			struct cdc_msg m;
			uint8_t flags = msg[43];
			msg[1] = CDC_MSG_LEN;
			memset(&m, 0, sizeof(m));
			if (cdc_decode(msg, sizeof(msg), &m) != 0) {
				msg[4] = msg[5] = msg[6] = 0;
				msg[7] = 1; /* a non-zero token: then it decodes */
				if (cdc_decode(msg, sizeof(msg), &m) != 0)
					abort();
			}
			m.token = token ? token : 1;
			if (flags & 2)
				m.seqno = seq;
			if (cdc_encode(&m, msg))
				abort();
		}
		if (rlen > 44)
			(void)link_send_long(l, rec, rlen);
		else
			(void)link_send_msg(l, msg);
		progress();
		now += 100 * SMCR_NS_PER_MS;
		progress();
		if (k % 4 == 3) {
			struct iovec v = { sbuf, sizeof(sbuf) };
			(void)core_conn_send(cli, &v, 1, 0);
			progress();
			struct iovec r = { rbuf, sizeof(rbuf) };
			(void)core_conn_recv(srv, &r, 1, 0);
			struct iovec w = { sbuf, 10 };
			(void)core_conn_send(srv, &w, 1, 0);
			progress();
			(void)core_conn_recv(cli, &r, 1, 0);
		}
	}
	cp_release(&pp);
	progress();
	check_empty();
	return 0;
}
