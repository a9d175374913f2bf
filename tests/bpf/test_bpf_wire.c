/* test_bpf_wire.c: the bytes on the wire (docs/protocol/wire-formats.md 1). Captured with a raw
 * AF_PACKET socket on the server's end of a veth pair between two namespaces:
 *  - a SYN / SYN-ACK of opted-in sockets carries exactly fe 06 e2 d4 c3 d9, padded by the
 *    kernel to 8 bytes with two NOPs (01 01) and placed after every other option, and
 *    nothing else in the IP and TCP headers differs from the same handshake made outside
 *    the covered cgroup (timestamp values masked);
 *  - sockets not opted in, inside the covered cgroup, produce byte for byte the option
 *    blocks of sockets the programs do not see at all;
 *  - a SYN-ACK answering a SYN without the option is untouched even when the listener
 *    opted in; a SYN-ACK of a listener not opted in is untouched even when the SYN had it.
 * IPv4 and IPv6. When tshark is installed it decodes the opted-in SYN too (independent
 * check: tcp.options.experimental.exid == 0xe2d4). Needs root; exits 77 otherwise. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "bpf/abi.h"
#include "bpf/optin.h"
#include "lib/bpfenv.h"
#include "lib/bpfpeers.h"

static struct bpfenv env;
static char ns_a[64], ns_b[64];
static int cap_fd = -1;

static const uint8_t smc_opt_padded[8] = {0xfe, 0x06, 0xe2, 0xd4, 0xc3, 0xd9, 0x01, 0x01};

/* One captured handshake segment: the header fields that must not change, and the
 * option block with timestamp values zeroed. */
struct seg {
	int found;
	uint8_t ip_fixed[8]; /* v4: tos, DF, ttl, proto; v6: version/class, next, hop limit */
	unsigned ip_len;     /* v4 total length / v6 payload length */
	uint8_t tcp_flags;
	uint16_t window;
	uint16_t urg;
	unsigned doff; /* bytes */
	uint8_t opt[40];
	unsigned optlen;
	uint8_t raw[128]; /* IP + TCP header as captured, for the pcap */
	unsigned rawlen;
};

struct handshake {
	struct seg syn, synack;
};

/* Zeroes the timestamp values (kind 8): they differ between any two connections. */
static void mask_options(uint8_t *o, unsigned n)
{
	unsigned i = 0;

	while (i < n) {
		if (o[i] == 0)
			break;
		if (o[i] == 1) {
			i++;
			continue;
		}
		if (i + 1 >= n || o[i + 1] < 2 || i + o[i + 1] > n)
			break;
		if (o[i] == 8 && o[i + 1] == 10)
			memset(o + i + 2, 0, 8);
		i += o[i + 1];
	}
}

/* Reads every frame captured so far; keeps the SYN and SYN-ACK of server port `port`. */
static void collect(uint16_t port, struct handshake *h)
{
	uint8_t f[2048];

	memset(h, 0, sizeof(*h));
	for (;;) {
		ssize_t n = recv(cap_fd, f, sizeof(f), MSG_DONTWAIT);
		if (n < 0)
			break;
		if (n < 14)
			continue;
		uint16_t et = (uint16_t)(f[12] << 8 | f[13]);
		const uint8_t *ip = f + 14, *tcp;
		struct seg s;
		memset(&s, 0, sizeof(s));
		if (et == ETH_P_IP && n >= 14 + 20) {
			unsigned ihl = (ip[0] & 0xf) * 4u;
			if (ip[9] != 6 || n < (ssize_t)(14 + ihl + 20))
				continue;
			tcp = ip + ihl;
			s.ip_fixed[0] = ip[1];
			s.ip_fixed[1] = ip[6] & 0xe0; /* flags (DF) */
			s.ip_fixed[2] = ip[8];
			s.ip_fixed[3] = ip[9];
			s.ip_len = (unsigned)(ip[2] << 8 | ip[3]);
		} else if (et == ETH_P_IPV6 && n >= 14 + 40 + 20) {
			if (ip[6] != 6)
				continue;
			tcp = ip + 40;
			s.ip_fixed[0] =
			    ip[0]; /* version, traffic class; the flow label is per flow */
			s.ip_fixed[1] = ip[1] & 0xf0;
			s.ip_fixed[4] = ip[6];
			s.ip_fixed[5] = ip[7];
			s.ip_len = (unsigned)(ip[4] << 8 | ip[5]);
		} else {
			continue;
		}
		uint16_t sport = (uint16_t)(tcp[0] << 8 | tcp[1]);
		uint16_t dport = (uint16_t)(tcp[2] << 8 | tcp[3]);
		s.doff = (tcp[12] >> 4) * 4u;
		s.tcp_flags = tcp[13];
		s.window = (uint16_t)(tcp[14] << 8 | tcp[15]);
		s.urg = (uint16_t)(tcp[18] << 8 | tcp[19]);
		if (s.doff < 20 || tcp + s.doff > f + n)
			continue;
		s.optlen = s.doff - 20;
		memcpy(s.opt, tcp + 20, s.optlen);
		mask_options(s.opt, s.optlen);
		s.rawlen = (unsigned)(tcp + s.doff - ip);
		if (s.rawlen > sizeof(s.raw))
			continue;
		memcpy(s.raw, ip, s.rawlen);
		s.found = 1;
		if (s.tcp_flags == 0x02 && dport == port && !h->syn.found)
			h->syn = s;
		else if (s.tcp_flags == 0x12 && sport == port && !h->synack.found)
			h->synack = s;
	}
}

static void handshake(int family, uint16_t port, int srv_cov, int srv_opt, int cli_cov, int cli_opt,
                      struct handshake *h)
{
	struct srv_cfg s = {.family = family,
	                    .v6only = 1,
	                    .port = port,
	                    .nlisteners = 1,
	                    .optin = (unsigned)srv_opt,
	                    .count = 1};
	struct cli_cfg c = {.family = family, .port = port, .optin = cli_opt, .count = 1};
	struct outcome o;

	s.addr = c.addr = family == AF_INET ? "10.77.0.1" : "fd77::1";
	peers_run(&env, &s, (struct side){srv_cov, ns_a}, &c, (struct side){cli_cov, ns_b}, &o);
	collect(port, h);
	assert_true(h->syn.found);
	assert_true(h->synack.found);
}

static void dump(const char *what, const struct seg *s)
{
	fprintf(stderr, "%s options:", what);
	for (unsigned i = 0; i < s->optlen; i++)
		fprintf(stderr, " %02x", s->opt[i]);
	fprintf(stderr, "\n");
}

/* b must equal a, plus `extra` option bytes at the end. */
static void same_but(const struct seg *a, const struct seg *b, unsigned extra, const char *what)
{
	if (b->optlen != a->optlen + extra || memcmp(a->opt, b->opt, a->optlen) != 0) {
		dump("baseline", a);
		dump(what, b);
	}
	assert_int_equal(b->optlen, a->optlen + extra);
	assert_memory_equal(a->opt, b->opt, a->optlen);
	if (extra)
		assert_memory_equal(b->opt + a->optlen, smc_opt_padded, sizeof(smc_opt_padded));
	assert_memory_equal(a->ip_fixed, b->ip_fixed, sizeof(a->ip_fixed));
	assert_int_equal(b->ip_len, a->ip_len + extra);
	assert_int_equal(b->doff, a->doff + extra);
	assert_int_equal(a->tcp_flags, b->tcp_flags);
	assert_int_equal(a->window, b->window);
	assert_int_equal(a->urg, b->urg);
}

/* Independent decoding: tshark must see the experimental option with the SMC ExID. */
static void tshark_check(const struct seg *syn, int family)
{
	char path[] = "/tmp/smcr-wire-XXXXXX";
	char out[256];
	uint8_t hdr[24] = {0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0};
	uint8_t rec[16] = {0};
	int fd;

	if (bpfenv_sh("tshark -v >/dev/null 2>&1") != 0)
		return; /* optional second opinion */
	hdr[16] = 0xff;
	hdr[17] = 0xff;                          /* snaplen 65535 */
	hdr[20] = family == AF_INET ? 228 : 229; /* LINKTYPE_IPV4 / LINKTYPE_IPV6 */
	rec[8] = rec[12] = (uint8_t)syn->rawlen;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
	assert_int_equal(write(fd, rec, sizeof(rec)), (ssize_t)sizeof(rec));
	assert_int_equal(write(fd, syn->raw, syn->rawlen), (ssize_t)syn->rawlen);
	close(fd);
	int rc = bpfenv_sh_out(out, sizeof(out),
	                       "tshark -r %s -T fields -e tcp.options.experimental.exid "
	                       "-e tcp.options.experimental.data 2>/dev/null",
	                       path);
	unlink(path);
	assert_int_equal(rc, 0);
	/* Wireshark reads a 16-bit ExID (e2d4) followed by data c3d9
	 * (docs/protocol/wireshark.md). */
	assert_non_null(strstr(out, "0xe2d4"));
	assert_non_null(strstr(out, "c3d9"));
}

static void run_family(int family, uint16_t base)
{
	struct handshake outside, plain, both, cli_only, srv_only;

	handshake(family, base + 0, 0, 1, 0, 1, &outside); /* programs do not see them */
	handshake(family, base + 1, 1, 0, 1, 0, &plain);   /* seen, not opted in */
	handshake(family, base + 2, 1, 1, 1, 1, &both);
	handshake(family, base + 3, 1, 0, 1, 1, &cli_only);
	handshake(family, base + 4, 1, 1, 1, 0, &srv_only);

	same_but(&outside.syn, &plain.syn, 0, "not opted in SYN");
	same_but(&outside.synack, &plain.synack, 0, "not opted in SYN-ACK");
	same_but(&outside.syn, &both.syn, 8, "opted-in SYN");
	same_but(&outside.synack, &both.synack, 8, "opted-in SYN-ACK");
	same_but(&outside.syn, &cli_only.syn, 8, "client-only SYN");
	same_but(&outside.synack, &cli_only.synack, 0, "SYN-ACK of a listener not opted in");
	same_but(&outside.syn, &srv_only.syn, 0, "SYN of a client not opted in");
	same_but(&outside.synack, &srv_only.synack, 0, "SYN-ACK to a SYN without the option");
	tshark_check(&both.syn, family);
}

static void test_wire_ipv4(void **state)
{
	(void)state;
	run_family(AF_INET, 7201);
}

static void test_wire_ipv6(void **state)
{
	(void)state;
	run_family(AF_INET6, 7211);
}

static int group_setup(void **state)
{
	(void)state;
	int self;
	unsigned idx;

	if (bpfenv_setup(&env, 1) != 0)
		return -1;
	if (bpfenv_veth_pair(&env, ns_a, ns_b, sizeof(ns_a)) != 0)
		return -1;
	/* The capture socket lives in the server's namespace, on va. */
	self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0 || bpfenv_setns(ns_a) != 0)
		return -1;
	idx = if_nametoindex("va");
	cap_fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (setns(self, CLONE_NEWNET) != 0)
		return -1;
	close(self);
	if (cap_fd < 0 || idx == 0)
		return -1;
	struct sockaddr_ll sll = {
	    .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = (int)idx};
	return bind(cap_fd, (struct sockaddr *)&sll, sizeof(sll));
}

static int group_teardown(void **state)
{
	(void)state;
	if (cap_fd >= 0)
		close(cap_fd);
	bpfenv_teardown(&env);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wire_ipv4),
	    cmocka_unit_test(test_wire_ipv6),
	};
	return BPFENV_MAIN(tests, NULL, NULL, group_setup, group_teardown);
}
