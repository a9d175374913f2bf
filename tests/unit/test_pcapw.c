/* test_pcapw.c: the test library's pcap writer and frame builders (tests/lib/pcapw.h):
 * CRC-32 and Internet checksum against known values, the RoCE v2 ICRC against a real
 * captured packet, and the layout of the TCP/IPv4, RoCE v1 and RoCE v2 frames. */
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

#include "lib/pcapw.h"

static void test_crc32_known(void **state)
{
	(void)state;
	/* The CRC-32 check value (IEEE 802.3 / zlib). */
	assert_int_equal(pcapw_crc32(0, "123456789", 9), 0xCBF43926u);
	/* Continuing a CRC equals computing it in one go. */
	assert_int_equal(pcapw_crc32(pcapw_crc32(0, "12345", 5), "6789", 4), 0xCBF43926u);
	/* 8 bytes of 0xFF leave the register at 0xDEBB20E3 (the ICRC start state). */
	static const uint8_t ff[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	assert_int_equal(~pcapw_crc32(0, ff, 8), 0xDEBB20E3u);
}

static void test_inet_checksum(void **state)
{
	(void)state;
	/* RFC 1071 example bytes 00 01 f2 03 f4 f5 f6 f7: sum 0xddf2, checksum 0x220d. */
	static const uint8_t b[] = { 0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7 };
	assert_int_equal(pcapw_csum_add(0, b, sizeof(b)), 0xddf2);
	assert_int_equal(pcapw_csum_fold(pcapw_csum_add(0, b, sizeof(b))), 0x220d);
}

/* A RoCE v2 CNP captured on a ConnectX-4 Lx (published as test data with Scapy's RoCE
 * layer): IPv4 + UDP 4791 + BTH (opcode 0x81) + 16 bytes + ICRC 82 fd 00 2a. */
static const uint8_t cnp[] = {
	0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32, 0x08, 0x00,
	0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00,
	0x11, 0x01, 0x0a, 0x00, 0x12, 0x01, 0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00,
	0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x82, 0xfd, 0x00, 0x2a,
};

static void test_icrc_real_capture(void **state)
{
	(void)state;
	const uint8_t *ip = cnp + ETH_HDR_LEN;
	size_t covered = sizeof(cnp) - ETH_HDR_LEN - ROCE_ICRC_LEN;
	uint32_t icrc = pcapw_icrc(ip, covered, true);
	/* On the wire least significant byte first. */
	const uint8_t *w = cnp + sizeof(cnp) - 4;
	assert_int_equal(icrc, (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 |
				       (uint32_t)w[3] << 24);
	/* The IPv4 header checksum of that capture is what our helper computes. */
	uint8_t h[20];
	memcpy(h, ip, 20);
	h[10] = h[11] = 0;
	assert_int_equal(pcapw_csum_fold(pcapw_csum_add(0, h, 20)), 0x9161);
}

static const struct pcapw_ep a = {
	.mac = { 2, 0, 0, 0, 0, 1 }, .ip4 = 0x0a000001, .port = 1234,
	.gid = { 0xfe, 0x80, [15] = 1 },
};
static const struct pcapw_ep b = {
	.mac = { 2, 0, 0, 0, 0, 2 }, .ip4 = 0x0a000002, .port = 5678,
	.gid = { 0xfe, 0x80, [15] = 2 },
};

static void test_tcp_frame(void **state)
{
	(void)state;
	uint8_t f[PCAPW_FRAME_MAX];
	static const uint8_t opt[] = { 0x01, 0x01, 0xfe, 0x06, 0xe2, 0xd4, 0xc3, 0xd9, 0x02 };
	struct pcapw_tcp s = { .src = &a, .dst = &b, .seq = 0x11223344, .ack = 0x55667788,
			       .flags = TCPF_SYN | TCPF_ACK, .window = 1000, .ip_id = 7,
			       .opts = opt, .optlen = sizeof(opt), .data = "abc", .len = 3 };
	size_t n = pcapw_build_tcp4(f, sizeof(f), &s);
	assert_int_equal(n, 14 + 20 + 20 + 12 + 3);	/* options padded to 12 */
	assert_memory_equal(f, b.mac, 6);
	assert_int_equal(f[12] << 8 | f[13], ETHERTYPE_IPV4);
	const uint8_t *ip = f + 14, *t = ip + 20;
	assert_int_equal(ip[0], 0x45);
	assert_int_equal(ip[2] << 8 | ip[3], 20 + 32 + 3);
	assert_int_equal(ip[9], 6);
	/* A correct header sums to 0xffff; so do pseudo header + segment. */
	assert_int_equal(pcapw_csum_fold(pcapw_csum_add(0, ip, 20)), 0);
	uint8_t ph[12] = { 10, 0, 0, 1, 10, 0, 0, 2, 0, 6, 0, 32 + 3 };
	assert_int_equal(pcapw_csum_fold(pcapw_csum_add(pcapw_csum_add(0, ph, 12), t, 35)), 0);
	assert_int_equal(t[12] >> 4, 8);	/* data offset 32 bytes */
	assert_int_equal(t[13], TCPF_SYN | TCPF_ACK);
	assert_memory_equal(t + 20, opt, sizeof(opt));
	assert_int_equal(t[20 + 9], 0);	/* padding */
	assert_memory_equal(t + 32, "abc", 3);
	assert_int_equal(pcapw_build_tcp4(f, 60, &s), 0);	/* does not fit */
}

static void test_roce_frames(void **state)
{
	(void)state;
	uint8_t f[PCAPW_FRAME_MAX], msg[44];
	for (int i = 0; i < 44; i++)
		msg[i] = (uint8_t)i;
	struct pcapw_roce p = { .src = &a, .dst = &b, .opcode = BTH_OP_RC_SEND_ONLY, .se = true,
				.dqpn = 0x123456, .psn = 0xabcdef, .payload = msg, .len = 44 };
	size_t n = pcapw_build_roce_v1(f, sizeof(f), &p);
	assert_int_equal(n, 14 + 40 + 12 + 44 + 4);
	assert_int_equal(f[12] << 8 | f[13], ETHERTYPE_ROCE);
	const uint8_t *g = f + 14;
	assert_int_equal(g[0], 0x60);
	assert_int_equal(g[4] << 8 | g[5], 12 + 44 + 4);
	assert_int_equal(g[6], ROCE_GRH_NEXT_BTH);
	assert_int_equal(g[7], 1);
	assert_memory_equal(g + 8, a.gid, 16);
	assert_memory_equal(g + 24, b.gid, 16);
	const uint8_t *t = g + 40;
	assert_int_equal(t[0], 0x04);
	assert_int_equal(t[1], BTH_SE);
	assert_int_equal(t[5] << 16 | t[6] << 8 | t[7], 0x123456);
	assert_int_equal(t[9] << 16 | t[10] << 8 | t[11], 0xabcdef);
	assert_memory_equal(t + 12, msg, 44);
	/* ICRC: changing a masked field (hop limit) keeps it, changing the payload does not. */
	uint32_t icrc = pcapw_icrc(g, 40 + 12 + 44, false);
	const uint8_t *c = t + 12 + 44;
	assert_int_equal(icrc, (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 |
				       (uint32_t)c[3] << 24);
	uint8_t g2[96];
	memcpy(g2, g, sizeof(g2));
	g2[7] = 64;
	g2[1] = 0x5a;
	assert_int_equal(pcapw_icrc(g2, 96, false), icrc);
	g2[60] ^= 1;
	assert_int_not_equal(pcapw_icrc(g2, 96, false), icrc);

	n = pcapw_build_roce_v2(f, sizeof(f), &p);
	assert_int_equal(n, 14 + 20 + 8 + 12 + 44 + 4);
	const uint8_t *ip = f + 14, *u = ip + 20;
	assert_int_equal(ip[9], 17);
	assert_int_equal(pcapw_csum_fold(pcapw_csum_add(0, ip, 20)), 0);
	assert_int_equal(u[2] << 8 | u[3], ROCE_V2_UDP_PORT);
	assert_int_equal(u[4] << 8 | u[5], 8 + 12 + 44 + 4);
	assert_memory_equal(u + 8 + 12, msg, 44);
}

static void test_pcap_file(void **state)
{
	(void)state;
	char path[] = "/tmp/smcr-pcapw-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	struct pcapw w;
	assert_int_equal(pcapw_open(&w, path), 0);
	assert_int_equal(pcapw_frame(&w, "\x01\x02\x03", 3), 0);
	assert_int_equal(pcapw_frame(&w, "\x04", 1), 0);
	assert_int_equal(pcapw_close(&w), 0);
	uint8_t buf[128];
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	unlink(path);
	assert_int_equal(n, 24 + 16 + 3 + 16 + 1);
	static const uint8_t hdr[24] = { 0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0,
					 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0 };
	assert_memory_equal(buf, hdr, 24);
	assert_int_equal(buf[24 + 8], 3);	/* captured length */
	assert_int_equal(buf[24 + 12], 3);	/* original length */
	assert_memory_equal(buf + 40, "\x01\x02\x03", 3);
	assert_int_equal(buf[43 + 8], 1);
	/* usec field of the second record: 1000 (1 ms apart) */
	assert_int_equal(buf[43 + 4] | buf[43 + 5] << 8, 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32_known),
		cmocka_unit_test(test_inet_checksum),
		cmocka_unit_test(test_icrc_real_capture),
		cmocka_unit_test(test_tcp_frame),
		cmocka_unit_test(test_roce_frames),
		cmocka_unit_test(test_pcap_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
