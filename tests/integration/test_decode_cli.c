/* test_decode_cli.c: smcr-decode end to end (docs/parts/decode.md), run as a program:
 *   - every hex example of the spec (tests/vectors/spec/<name>.hex, docs/protocol/wire-formats.md
 *     3.6, 4, 9, docs/protocol/wireshark.md 6.1) decodes with --json to the fields in the matching
 *     .json file;
 *   - every malformed vector (tests/vectors/malformed/<name>.hex, "# error: NAME") exits 2 with a
 *     one-line reason naming the codec error;
 *   - messages back to back (a CLC stream, LLC/CDC runs) are decoded one by one, also with a
 *     malformed message or garbage in the middle;
 *   - the hex input forms of hexin.h, binary input, usage errors;
 *   - pcap input (tests/lib/pcapw.h): CLC from a reassembled TCP stream (segments split and
 *     out of order), TCP options, LLC/CDC in RoCE v1 and v2 frames, truncated streams. */
#define _GNU_SOURCE
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/jsonmatch.h"
#include "lib/pcapw.h"
#include "lib/runcmd.h"
#include "smcr-decode/hexin.h"

static char decoder[1024];
static char srcdir[1024];
static char tmpdir[256];

static int setup(void **state)
{
	(void)state;
	const char *b = getenv("SMCR_BINARY_DIR"), *s = getenv("SMCR_SOURCE_DIR");
	if (!b || !s) {
		fprintf(stderr, "SMCR_BINARY_DIR / SMCR_SOURCE_DIR not set (run under ctest)\n");
		return -1;
	}
	snprintf(decoder, sizeof(decoder), "%s/tools/smcr-decode/smcr-decode", b);
	snprintf(srcdir, sizeof(srcdir), "%s", s);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/smcr-decode-test-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	return access(decoder, X_OK);
}

static int teardown(void **state)
{
	(void)state;
	struct runcmd r;
	if (runcmd(&r, "rm -rf %s", shq(tmpdir)) == 0)
		runcmd_free(&r);
	return 0;
}

/* Reads a vector file (hex text) into buf; returns its length. */
static size_t load_hex(const char *rel, uint8_t *buf, size_t cap)
{
	char path[2048];
	snprintf(path, sizeof(path), "%s/tests/vectors/%s", srcdir, rel);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	char text[8192];
	size_t n = fread(text, 1, sizeof(text), f);
	fclose(f);
	struct bytebuf b = { 0 };
	char err[256];
	assert_int_equal(hexin_parse(text, n, &b, err, sizeof(err)), 0);
	assert_true(b.len <= cap);
	memcpy(buf, b.p, b.len);
	size_t len = b.len;
	bytebuf_free(&b);
	return len;
}

/* Writes bytes as a hex string (no separators) into out. */
static void to_hex(char *out, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = 0;
}

static void expect_line(const char *out, unsigned idx, const char *expected)
{
	char line[8192], why[512];
	if (!line_at(out, idx, line, sizeof(line)))
		fail_msg("output line %u missing; output:\n%s", idx, out);
	if (!jsonmatch_subset(line, expected, why, sizeof(why)))
		fail_msg("line %u: %s\n  got: %s\n  want: %s", idx, why, line, expected);
}

/* ---- spec vectors ----------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of dir entries ending in ext; returns the count. */
static size_t list_dir(const char *dir, const char *ext, char names[][256], size_t max)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *e;
	size_t n = 0;
	char *ptrs[256];
	static char store[256][256];
	while ((e = readdir(d)) && n < max && n < 256) {
		size_t l = strlen(e->d_name), el = strlen(ext);
		if (l > el && !strcmp(e->d_name + l - el, ext)) {
			snprintf(store[n], sizeof(store[n]), "%s", e->d_name);
			ptrs[n] = store[n];
			n++;
		}
	}
	closedir(d);
	qsort(ptrs, n, sizeof(ptrs[0]), cmp_str);
	for (size_t i = 0; i < n; i++)
		snprintf(names[i], 256, "%s", ptrs[i]);
	return n;
}

static void test_spec_vectors_json(void **state)
{
	(void)state;
	char dir[2048], names[64][256];
	snprintf(dir, sizeof(dir), "%s/tests/vectors/spec", srcdir);
	size_t n = list_dir(dir, ".hex", names, 64);
	assert_true(n >= 24);	/* every hex example of docs/protocol/wire-formats.md 1, 3.6, 4, 9 + ws 6.1 */
	for (size_t i = 0; i < n; i++) {
		char hex[2304], json[2304], expected[8192];
		snprintf(hex, sizeof(hex), "%s/%s", dir, names[i]);
		snprintf(json, sizeof(json), "%s", hex);
		strcpy(json + strlen(json) - 4, ".json");
		FILE *f = fopen(json, "r");
		if (!f)
			fail_msg("%s has no expected .json", names[i]);
		size_t el = fread(expected, 1, sizeof(expected) - 1, f);
		fclose(f);
		expected[el] = 0;

		struct runcmd r;
		assert_int_equal(runcmd(&r, "%s --json -f %s", shq(decoder), shq(hex)), 0);
		if (r.status != 0 || r.errlen)
			fail_msg("%s: status %d, stderr: %s", names[i], r.status, r.err);
		unsigned want = line_count(expected);
		if (line_count(r.out) != want)
			fail_msg("%s: %u records, want %u:\n%s", names[i], line_count(r.out), want,
				 r.out);
		for (unsigned k = 0; k < want; k++) {
			char e[4096];
			assert_true(line_at(expected, k, e, sizeof(e)));
			expect_line(r.out, k, e);
		}
		runcmd_free(&r);
	}
}

static void test_spec_vectors_text(void **state)
{
	(void)state;
	static const struct {
		const char *file, *first, *field;
	} cases[] = {
		{ "spec/accept_linux.hex", "clc.accept", "  rmb_rkey: 0x0000157d\n" },
		{ "spec/decline_diffprefix.hex", "clc.decline", "  diagnosis_name: DIFFPREFIX\n" },
		{ "spec/llc_confirm_rkey_req.hex", "llc.confirm_rkey",
		  "  other_links[0].rkey: 0x00002001\n" },
		{ "spec/llc_delete_rkey_req.hex", "llc.delete_rkey", "  rkeys[0]: 0x00002000\n" },
		{ "spec/cdc_wrapped_blocked.hex", "cdc", "  write_blocked: true\n" },
		{ "spec/llc_add_link_req.hex", "llc.add_link", "  qpn: 265 (0x000109)\n" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct runcmd r;
		char path[2048], first[128];
		snprintf(path, sizeof(path), "%s/tests/vectors/%s", srcdir, cases[i].file);
		assert_int_equal(runcmd(&r, "%s -f %s", shq(decoder), shq(path)), 0);
		assert_int_equal(r.status, 0);
		assert_true(line_at(r.out, 0, first, sizeof(first)));
		assert_string_equal(first, cases[i].first);
		if (!strstr(r.out, cases[i].field))
			fail_msg("%s: no '%s' in:\n%s", cases[i].file, cases[i].field, r.out);
		runcmd_free(&r);
	}
}

static void test_malformed_vectors(void **state)
{
	(void)state;
	char dir[2048], names[64][256];
	snprintf(dir, sizeof(dir), "%s/tests/vectors/malformed", srcdir);
	size_t n = list_dir(dir, ".hex", names, 64);
	assert_true(n >= 20);
	for (size_t i = 0; i < n; i++) {
		char path[2304], text[4096], want[128];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		FILE *f = fopen(path, "r");
		assert_non_null(f);
		size_t tl = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
		text[tl] = 0;
		const char *e = strstr(text, "# error: ");
		assert_non_null(e);
		sscanf(e + 9, "%127s", want);

		struct runcmd r;
		assert_int_equal(runcmd(&r, "%s --json -f %s", shq(decoder), shq(path)), 0);
		if (r.status != 2 || !strstr(r.err, want) || line_count(r.err) != 1 || r.outlen)
			fail_msg("%s: status %d (want 2), stderr '%s' (want one line naming %s), "
				 "stdout '%s'",
				 names[i], r.status, r.err, want, r.out);
		/* "<prog>: offset 0: <kind>: <NAME>: <message naming the field>" */
		assert_non_null(strstr(r.err, "smcr-decode: offset 0: "));
		runcmd_free(&r);
	}
}

/* ---- streams ------------------------------------------------------------------------ */

static void test_clc_stream_back_to_back(void **state)
{
	(void)state;
	uint8_t msg[1024];
	size_t n = 0;
	n += load_hex("spec/proposal_smcr_n40.hex", msg + n, sizeof(msg) - n);
	size_t acc = n;
	n += load_hex("spec/accept_wireshark_recipe.hex", msg + n, sizeof(msg) - n);
	size_t conf = n;
	n += load_hex("spec/accept_wireshark_recipe.hex", msg + n, sizeof(msg) - n);
	msg[conf + 4] = 3;	/* a Confirm: same layout (docs/protocol/wire-formats.md 4) */
	msg[conf + 7] = 0x10;
	size_t decl = n;
	n += load_hex("spec/decline_syncerr_oos.hex", msg + n, sizeof(msg) - n);
	assert_int_equal(acc, 92);
	assert_int_equal(n, 92 + 68 + 68 + 28);

	char hex[2 * 1024 + 1];
	to_hex(hex, msg, n);
	struct runcmd r;
	assert_int_equal(runcmd(&r, "%s --json %s", shq(decoder), hex), 0);
	assert_int_equal(r.status, 0);
	assert_int_equal(line_count(r.out), 4);
	expect_line(r.out, 0, "{\"kind\":\"clc.proposal\",\"offset\":0,\"length\":92}");
	expect_line(r.out, 1, "{\"kind\":\"clc.accept\",\"offset\":92,\"first_contact\":true}");
	char e[256];
	snprintf(e, sizeof(e), "{\"kind\":\"clc.confirm\",\"offset\":%zu,\"first_contact\":false,"
		 "\"qpn\":263}", conf);
	expect_line(r.out, 2, e);
	snprintf(e, sizeof(e), "{\"kind\":\"clc.decline\",\"offset\":%zu,\"out_of_sync\":true}",
		 decl);
	expect_line(r.out, 3, e);
	runcmd_free(&r);
}

static void test_stream_malformed_in_middle(void **state)
{
	(void)state;
	uint8_t msg[1024];
	size_t n = 0;
	char hex[2049];
	struct runcmd r;

	/* CLC: Accept, Decline with a bad trailer, Decline: the third is still decoded. */
	n += load_hex("spec/accept_linux.hex", msg + n, sizeof(msg) - n);
	n += load_hex("malformed/clc_decline_bad_trailer.hex", msg + n, sizeof(msg) - n);
	n += load_hex("spec/decline_syncerr_oos.hex", msg + n, sizeof(msg) - n);
	to_hex(hex, msg, n);
	assert_int_equal(runcmd(&r, "%s --json %s", shq(decoder), hex), 0);
	assert_int_equal(r.status, 2);
	assert_int_equal(line_count(r.out), 2);
	expect_line(r.out, 0, "{\"kind\":\"clc.accept\",\"offset\":0}");
	expect_line(r.out, 1, "{\"kind\":\"clc.decline\",\"offset\":96,\"out_of_sync\":true}");
	assert_int_equal(line_count(r.err), 1);
	assert_non_null(strstr(r.err, "offset 68: clc.decline: CLC_BAD_TRAILER"));
	runcmd_free(&r);

	/* LLC/CDC: CDC, CONFIRM LINK with a bad length byte, TEST LINK. */
	n = 0;
	n += load_hex("spec/cdc_first_data.hex", msg + n, sizeof(msg) - n);
	n += load_hex("malformed/llc_bad_length_byte.hex", msg + n, sizeof(msg) - n);
	n += load_hex("spec/llc_test_link_resp.hex", msg + n, sizeof(msg) - n);
	to_hex(hex, msg, n);
	assert_int_equal(runcmd(&r, "%s --json %s", shq(decoder), hex), 0);
	assert_int_equal(r.status, 2);
	assert_int_equal(line_count(r.out), 2);
	expect_line(r.out, 0, "{\"kind\":\"cdc\",\"offset\":0,\"seqno\":1}");
	expect_line(r.out, 1, "{\"kind\":\"llc.test_link\",\"offset\":88,\"response\":true}");
	assert_non_null(strstr(r.err, "offset 44: llc.confirm_link: LLC_BAD_LENGTH"));
	runcmd_free(&r);

	/* Garbage between two messages is skipped up to the next message start. */
	n = 0;
	n += load_hex("spec/decline_diffprefix.hex", msg + n, sizeof(msg) - n);
	memcpy(msg + n, "\x00\x11\x22\x33\x44", 5);
	n += 5;
	n += load_hex("spec/llc_delete_link_all.hex", msg + n, sizeof(msg) - n);
	to_hex(hex, msg, n);
	assert_int_equal(runcmd(&r, "%s --json %s", shq(decoder), hex), 0);
	assert_int_equal(r.status, 2);
	assert_int_equal(line_count(r.out), 2);
	expect_line(r.out, 1, "{\"kind\":\"llc.delete_link\",\"offset\":33,\"all\":true}");
	assert_non_null(strstr(r.err, "offset 28: unknown: no SMC message here (byte 0x00): "
				      "5 bytes skipped"));
	runcmd_free(&r);

	/* A CLC header whose length field is impossible: resynchronised at the next message. */
	n = 0;
	n += load_hex("spec/decline_diffprefix.hex", msg + n, sizeof(msg) - n);
	msg[5] = 0xff;	/* length 0xff1c: above the Decline maximum */
	n += load_hex("spec/decline_syncerr_oos.hex", msg + n, sizeof(msg) - n);
	to_hex(hex, msg, n);
	assert_int_equal(runcmd(&r, "%s --json %s", shq(decoder), hex), 0);
	assert_int_equal(r.status, 2);
	assert_int_equal(line_count(r.out), 1);
	expect_line(r.out, 0, "{\"kind\":\"clc.decline\",\"offset\":28}");
	assert_non_null(strstr(r.err, "offset 0: clc.decline: CLC_LEN_TOO_BIG"));
	runcmd_free(&r);
}

/* ---- hex input forms and usage -------------------------------------------------------- */

static void test_hex_forms(void **state)
{
	(void)state;
	struct runcmd r;
	const char *decl_want = "{\"kind\":\"clc.decline\",\"diagnosis\":\"0x03070000\"}";
	/* 0x prefixes, runs of digits, several arguments. */
	assert_int_equal(runcmd(&r, "%s --json 0xe2d4c3d9 0x04 001c10 abcd98039b000002 "
				    "03070000 00000000 E2D4C3D9", shq(decoder)), 0);
	assert_int_equal(r.status, 0);
	expect_line(r.out, 0, decl_want);
	runcmd_free(&r);

	/* xxd-style offsets with colons, comments, CRLF, from stdin. */
	char path[512];
	snprintf(path, sizeof(path), "%s/xxd.txt", tmpdir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("# a Decline\r\n00000000: e2d4 c3d9 0400 1c10 abcd 9803 9b00 0002\r\n"
	      "00000010: 0307 0000 0000 0000 e2d4 c3d9   # trailer\r\n", f);
	fclose(f);
	assert_int_equal(runcmd(&r, "%s --json < %s", shq(decoder), shq(path)), 0);
	assert_int_equal(r.status, 0);
	expect_line(r.out, 0, decl_want);
	runcmd_free(&r);

	/* -f - reads stdin too; binary input with -b. */
	assert_int_equal(runcmd(&r, "%s --json -f - < %s", shq(decoder), shq(path)), 0);
	assert_int_equal(r.status, 0);
	expect_line(r.out, 0, decl_want);
	runcmd_free(&r);
	uint8_t bin[64];
	size_t bl = load_hex("spec/llc_add_link_cont.hex", bin, sizeof(bin));
	snprintf(path, sizeof(path), "%s/msg.bin", tmpdir);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(bin, 1, bl, f), bl);
	fclose(f);
	assert_int_equal(runcmd(&r, "%s --json -b %s", shq(decoder), shq(path)), 0);
	assert_int_equal(r.status, 0);
	expect_line(r.out, 0, "{\"kind\":\"llc.add_link_cont\",\"num_rkeys\":1}");
	runcmd_free(&r);

	/* Errors in the hex text: exit 2, the line and the reason. */
	assert_int_equal(runcmd(&r, "%s 'e2 d4 c' ", shq(decoder)), 0);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "line 1: 'c' is not whole bytes of hex"));
	runcmd_free(&r);
	assert_int_equal(runcmd(&r, "printf '0000  fe 2c\\n0010  00\\n' | %s", shq(decoder)), 0);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "line 2: offset '0010' does not match the 2 bytes"));
	runcmd_free(&r);
	assert_int_equal(runcmd(&r, "%s 'fe 2c 0g'", shq(decoder)), 0);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "'0g' is not hex"));
	runcmd_free(&r);

	/* The SMC TCP option alone (docs/protocol/wire-formats.md 1). */
	assert_int_equal(runcmd(&r, "%s --json fe06e2d4c3d9", shq(decoder)), 0);
	assert_int_equal(r.status, 0);
	expect_line(r.out, 0,
		    "{\"kind\":\"tcp.option\",\"aligned\":false,\"exid\":\"0xe2d4c3d9\"}");
	runcmd_free(&r);
}

static void test_usage(void **state)
{
	(void)state;
	struct runcmd r;
	assert_int_equal(runcmd(&r, "%s --help", shq(decoder)), 0);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "usage: smcr-decode"));
	assert_non_null(strstr(r.out, "--json"));
	runcmd_free(&r);
	assert_int_equal(runcmd(&r, "%s --bogus", shq(decoder)), 0);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "unknown option '--bogus'"));
	runcmd_free(&r);
	assert_int_equal(runcmd(&r, "%s -r /nonexistent/x.pcap", shq(decoder)), 0);
	assert_int_equal(r.status, 1);
	runcmd_free(&r);
	assert_int_equal(runcmd(&r, "%s -r", shq(decoder)), 0);
	assert_int_equal(r.status, 1);
	runcmd_free(&r);
	assert_int_equal(runcmd(&r, "%s e2d4 -r x.pcap", shq(decoder)), 0);
	assert_int_equal(r.status, 1);
	runcmd_free(&r);
	/* A hex file given to -r is no capture: malformed input. */
	char path[2048];
	snprintf(path, sizeof(path), "%s/tests/vectors/spec/cdc_close.hex", srcdir);
	assert_int_equal(runcmd(&r, "%s -r %s", shq(decoder), shq(path)), 0);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "not a pcap/pcapng capture"));
	runcmd_free(&r);
}

/* ---- pcap input --------------------------------------------------------------------- */

static const struct pcapw_ep client = {
	.mac = { 0x98, 0x03, 0x9b, 0, 0, 1 }, .ip4 = 0x0a000001, .port = 40001,
	.gid = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x9a, 0x03, 0x9b, 0xff, 0xfe, 0, 0, 1 },
};
static const struct pcapw_ep server = {
	.mac = { 0x98, 0x03, 0x9b, 0, 0, 2 }, .ip4 = 0x0a000002, .port = 50002,
	.gid = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x9a, 0x03, 0x9b, 0xff, 0xfe, 0, 0, 2 },
};
static const uint8_t smc_opt[] = { 0x02, 0x04, 0x05, 0xb4, 0x01, 0x01, 0xfe, 0x06,
				   0xe2, 0xd4, 0xc3, 0xd9 };

static void test_pcap_input(void **state)
{
	(void)state;
	char path[512];
	snprintf(path, sizeof(path), "%s/smc.pcap", tmpdir);
	struct pcapw w;
	assert_int_equal(pcapw_open(&w, path), 0);

	uint8_t prop[128], acc[128], conf[128], m[64];
	size_t pl = load_hex("spec/proposal_smcr_n40.hex", prop, sizeof(prop));
	size_t al = load_hex("spec/accept_wireshark_recipe.hex", acc, sizeof(acc));
	memcpy(conf, acc, al);
	conf[4] = 3;
	conf[7] = 0x10;

	struct pcapw_flow fl;
	pcapw_flow_init(&fl, &client, &server, 1000, 0xfffffff0u);	/* server seq wraps */
	assert_int_equal(pcapw_flow_handshake(&w, &fl, smc_opt, sizeof(smc_opt), smc_opt,
					      sizeof(smc_opt)), 0);		/* frames 1-3 */
	assert_int_equal(pcapw_flow_send(&w, &fl, false, prop, 50), 0);	/* 4 */
	assert_int_equal(pcapw_flow_send(&w, &fl, false, prop + 50, pl - 50), 0); /* 5 */
	assert_int_equal(pcapw_flow_send(&w, &fl, true, acc, al), 0);	/* 6 */
	/* Confirm: second half first (7), then the first half (8), then app data (9). */
	assert_int_equal(pcapw_flow_send_at(&w, &fl, false, 30, conf + 30, al - 30), 0);
	assert_int_equal(pcapw_flow_send_at(&w, &fl, false, 0, conf, 30), 0);
	pcapw_flow_advance(&fl, false, (uint32_t)al);
	assert_int_equal(pcapw_flow_send(&w, &fl, false, "hello, world", 12), 0);

	struct pcapw_roce p = { .src = &server, .dst = &client, .opcode = BTH_OP_RC_SEND_ONLY,
				.se = true, .dqpn = 0x208, .psn = 0x10, .len = 44 };
	size_t ml = load_hex("spec/llc_confirm_link_req.hex", m, sizeof(m));
	assert_int_equal(ml, 44);
	p.payload = m;
	assert_int_equal(pcapw_roce_v1(&w, &p), 0);				/* 10 */
	ml = load_hex("spec/cdc_wrapped_blocked.hex", m, sizeof(m));
	p.psn = 0x11;
	assert_int_equal(pcapw_roce_v1(&w, &p), 0);				/* 11 */
	/* An RDMA WRITE of 44 bytes that looks like CDC is data, not a message. */
	p.opcode = BTH_OP_RC_RDMA_WRITE_ONLY;
	p.psn = 0x12;
	assert_int_equal(pcapw_roce_v1(&w, &p), 0);				/* 12 */
	p.opcode = BTH_OP_RC_SEND_ONLY;
	ml = load_hex("malformed/llc_add_link_mtu6.hex", m, sizeof(m));
	p.psn = 0x13;
	assert_int_equal(pcapw_roce_v1(&w, &p), 0);				/* 13 */
	ml = load_hex("spec/llc_test_link_req.hex", m, sizeof(m));
	p.psn = 0x14;
	assert_int_equal(pcapw_roce_v2(&w, &p), 0);				/* 14 */
	assert_int_equal(pcapw_close(&w), 0);

	struct runcmd r;
	assert_int_equal(runcmd(&r, "%s --json -r %s", shq(decoder), shq(path)), 0);
	assert_int_equal(r.status, 2);	/* the ADD LINK with MTU code 6 */
	if (line_count(r.out) != 8)
		fail_msg("want 8 records, got:\n%s\nstderr: %s", r.out, r.err);
	expect_line(r.out, 0, "{\"kind\":\"tcp.option\",\"frame\":1,\"transport\":\"tcp\","
			      "\"src\":\"10.0.0.1:40001\",\"dst\":\"10.0.0.2:50002\","
			      "\"syn\":true,\"ack\":false,\"exid\":\"0xe2d4c3d9\"}");
	expect_line(r.out, 1, "{\"kind\":\"tcp.option\",\"frame\":2,\"ack\":true,"
			      "\"src\":\"10.0.0.2:50002\"}");
	expect_line(r.out, 2, "{\"kind\":\"clc.proposal\",\"frame\":5,\"stream_offset\":0,"
			      "\"length\":92,\"ipv4_subnet\":\"10.0.0.0\"}");
	expect_line(r.out, 3, "{\"kind\":\"clc.accept\",\"frame\":6,\"stream_offset\":0,"
			      "\"src\":\"10.0.0.2:50002\",\"qpn\":263}");
	expect_line(r.out, 4, "{\"kind\":\"clc.confirm\",\"frame\":8,\"stream_offset\":92,"
			      "\"src\":\"10.0.0.1:40001\",\"first_contact\":false}");
	expect_line(r.out, 5, "{\"kind\":\"llc.confirm_link\",\"frame\":10,\"transport\":"
			      "\"roce_v1\",\"src\":\"fe80::9a03:9bff:fe00:2\",\"dst\":"
			      "\"fe80::9a03:9bff:fe00:1\",\"dest_qp\":520,\"bth_psn\":16,"
			      "\"link_num\":1}");
	expect_line(r.out, 6, "{\"kind\":\"cdc\",\"frame\":11,\"seqno\":7,\"write_blocked\":true}");
	expect_line(r.out, 7, "{\"kind\":\"llc.test_link\",\"frame\":14,\"transport\":\"roce_v2\","
			      "\"src\":\"10.0.0.2:50002\",\"dst\":\"10.0.0.1:4791\","
			      "\"bth_psn\":20}");
	assert_int_equal(line_count(r.err), 1);
	assert_non_null(strstr(r.err, "frame 13: roce_v1 fe80::9a03:9bff:fe00:2 -> "
				      "fe80::9a03:9bff:fe00:1 qp 0x000208: llc.add_link: "
				      "LLC_AL_BAD_MTU"));
	runcmd_free(&r);
}

static void test_pcap_truncated_stream(void **state)
{
	(void)state;
	char path[512];
	snprintf(path, sizeof(path), "%s/trunc.pcap", tmpdir);
	struct pcapw w;
	assert_int_equal(pcapw_open(&w, path), 0);
	uint8_t prop[128], decl[64];
	load_hex("spec/proposal_smcr_n40.hex", prop, sizeof(prop));
	size_t dl = load_hex("spec/decline_diffprefix.hex", decl, sizeof(decl));
	struct pcapw_flow fl;
	pcapw_flow_init(&fl, &client, &server, 7, 9);
	assert_int_equal(pcapw_flow_handshake(&w, &fl, NULL, 0, NULL, 0), 0);
	/* The server's Decline arrives; the client's Proposal stops after 60 of 92 bytes. */
	assert_int_equal(pcapw_flow_send(&w, &fl, true, decl, dl), 0);
	assert_int_equal(pcapw_flow_send(&w, &fl, false, prop, 60), 0);
	assert_int_equal(pcapw_close(&w), 0);

	struct runcmd r;
	assert_int_equal(runcmd(&r, "%s --json -r %s", shq(decoder), shq(path)), 0);
	assert_int_equal(r.status, 2);
	assert_int_equal(line_count(r.out), 1);
	expect_line(r.out, 0,
		    "{\"kind\":\"clc.decline\",\"frame\":4,\"diagnosis\":\"0x03070000\"}");
	assert_non_null(strstr(r.err, "clc.proposal: CLC_TRUNCATED"));
	assert_non_null(strstr(r.err, "(60 of 92 bytes)"));
	runcmd_free(&r);
}

/* The real Linux 6.12 SMC-R v2 capture (docs/parts/wire-v2.md 8): every CLC and LLC
 * message of it decodes (exit 0, nothing on stderr) with the fields the capture holds; the
 * text form names the v2 fields too; a v2 LLC message as hex decodes by its 16-bit length. */
static void test_linux_v2_capture(void **state)
{
	(void)state;
	char path[1200];
	struct runcmd r;
	size_t cdc = 0;
	snprintf(path, sizeof(path), "%s/tests/vectors/linux-6.12-smcr-v2-rxe.pcap", srcdir);
	assert_int_equal(runcmd(&r, "%s --json -r %s", shq(decoder), shq(path)), 0);
	assert_int_equal(r.status, 0);
	assert_int_equal(line_count(r.err), 0);
	/* 4 TCP options, Decline, Proposal, Accept, Confirm, 8 LLC v2, 35 CDC */
	assert_int_equal(line_count(r.out), 4 + 4 + 8 + 35);
	for (const char *q = r.out; (q = strstr(q, "{\"kind\":\"cdc\"")); q++)
		cdc++;
	assert_int_equal(cdc, 35);
	expect_line(r.out, 2, "{\"kind\":\"clc.decline\",\"frame\":4,\"version\":1,"
			      "\"diagnosis\":\"0x03030000\",\"diagnosis_name\":\"NOSMCDEV\"}");
	expect_line(r.out, 5, "{\"kind\":\"clc.proposal\",\"frame\":62,\"length\":156,"
			      "\"version\":2,\"typev1_name\":\"none\",\"typev2_name\":\"SMC-R\","
			      "\"v2ext_roce_gid\":\"::ffff:10.0.0.1\",\"v2ext_max_conns\":255,"
			      "\"v2ext_max_links\":2,\"user_eids\":[\"SPIKE-UEID\"]}");
	expect_line(r.out, 6, "{\"kind\":\"clc.accept\",\"frame\":64,\"length\":160,"
			      "\"version\":2,\"first_contact\":true,\"qpn\":18,"
			      "\"rmb_rkey\":\"0x0000042f\",\"eid\":\"SPIKE-UEID\",\"os_type\":2,"
			      "\"release\":1,\"hostname\":\"srv\",\"max_conns\":255,"
			      "\"max_links\":2}");
	expect_line(r.out, 7, "{\"kind\":\"clc.confirm\",\"frame\":66,\"length\":180,"
			      "\"stream_offset\":156,\"hostname\":\"cli\","
			      "\"gids\":[\"::ffff:10.0.0.1\"]}");
	expect_line(r.out, 8, "{\"kind\":\"llc2.confirm_link\",\"frame\":67,"
			      "\"transport\":\"roce_v2\",\"response\":false,"
			      "\"no_rmbe_eyecatcher\":3,\"link_num\":1,\"max_links\":2,"
			      "\"max_conns\":255}");
	expect_line(r.out, 10, "{\"kind\":\"llc2.add_link\",\"frame\":71,\"length\":88,"
			       "\"qpn\":19,\"link_num\":2,\"num_rkeys\":1,"
			       "\"rkeys\":[{\"rkey\":\"0x0000042f\",\"rkey_new\":\"0x00000677\","
			       "\"vaddr_new\":\"0xffff888008440000\"}]}");
	expect_line(r.out, 11, "{\"kind\":\"llc2.add_link\",\"frame\":74,\"response\":true,"
			       "\"rejected\":true}");
	runcmd_free(&r);

	assert_int_equal(runcmd(&r, "%s -r %s", shq(decoder), shq(path)), 0);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "llc2.delete_rkey\n  frame: 164\n"));
	assert_non_null(strstr(r.out, "  eid: SPIKE-UEID\n"));
	assert_non_null(strstr(r.out, "  target_gid: ::ffff:10.0.0.2\n"));
	runcmd_free(&r);

	/* frame 67 as hex; then with its length field big-endian (as a network-order reader
	 * would write it): 11264 bytes do not fit, so nothing decodes as v2 */
	const char *cl = "212c000352540000000200000000000000000000ffff0a000002000012010000010102ff"
			 "0000000000000000";
	assert_int_equal(runcmd(&r, "%s --json %s", shq(decoder), cl), 0);
	assert_int_equal(r.status, 0);
	expect_line(r.out, 0, "{\"kind\":\"llc2.confirm_link\",\"length\":44,"
			      "\"qpn\":18,\"max_conns\":255}");
	runcmd_free(&r);
	assert_int_equal(runcmd(&r, "%s --json 21002c03525400000002000000000000000000"
				    "00ffff0a000002000012010000010102ff0000000000000000",
				shq(decoder)), 0);
	assert_int_not_equal(r.status, 0);
	assert_null(strstr(r.out, "llc2."));
	runcmd_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spec_vectors_json),
		cmocka_unit_test(test_spec_vectors_text),
		cmocka_unit_test(test_malformed_vectors),
		cmocka_unit_test(test_clc_stream_back_to_back),
		cmocka_unit_test(test_stream_malformed_in_middle),
		cmocka_unit_test(test_hex_forms),
		cmocka_unit_test(test_usage),
		cmocka_unit_test(test_pcap_input),
		cmocka_unit_test(test_pcap_truncated_stream),
		cmocka_unit_test(test_linux_v2_capture),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
