/* v2cap.c: loads the Linux SMC-R v2 capture frame by frame (v2cap.h). */
#define _GNU_SOURCE	/* libpcap headers use u_char and friends */
#include "lib/v2cap.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smcr-decode/frame.h"
#include "wire/clc_v2.h"
#include "wire/types.h"

static const char *vector_path(const char *name)
{
	static char path[4096];
	const char *src = getenv("SMCR_SOURCE_DIR");

	snprintf(path, sizeof(path), "%s/tests/vectors/%s", src ? src : ".", name);
	return path;
}

const char *v2cap_path(void)
{
	return vector_path("linux-6.12-smcr-v2-rxe.pcap");
}

int v2cap_load(struct v2cap *c)
{
	return v2cap_load_file(c, "linux-6.12-smcr-v2-rxe.pcap");
}

int v2cap_load_file(struct v2cap *c, const char *name)
{
	char err[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *h;
	const u_char *p;
	pcap_t *pc;
	int rc;

	memset(c, 0, sizeof(*c));
	pc = pcap_open_offline(vector_path(name), err);
	if (!pc) {
		fprintf(stderr, "v2cap: %s\n", err);
		return -1;
	}
	while ((rc = pcap_next_ex(pc, &h, &p)) == 1 && c->count < V2CAP_MAX_FRAMES) {
		struct v2cap_frame *f = &c->f[c->count++];
		struct frame_info fi;

		switch (frame_parse(pcap_datalink(pc), p, h->caplen, &fi)) {
		case FRAME_TCP:
			f->kind = V2CAP_TCP;
			break;
		case FRAME_ROCE:
			f->kind = V2CAP_ROCE;
			f->opcode = fi.opcode;
			break;
		case FRAME_OTHER:
			continue;
		}
		if (fi.paylen > sizeof(f->data)) {
			fprintf(stderr, "v2cap: frame %zu payload too big\n", c->count);
			pcap_close(pc);
			return -1;
		}
		memcpy(f->data, fi.payload, fi.paylen);
		f->len = fi.paylen;
	}
	pcap_close(pc);
	return rc == -2 ? 0 : -1;
}

const struct v2cap_frame *v2cap_frame(const struct v2cap *c, size_t n, enum v2cap_kind k)
{
	assert_true(n >= 1 && n <= c->count);
	assert_int_equal(c->f[n - 1].kind, k);
	return &c->f[n - 1];
}

void v2cap_hostname_is(const uint8_t *h, const char *s)
{
	uint8_t want[CLC_HOSTNAME_LEN];
	memset(want, ' ', sizeof(want));
	memcpy(want, s, strlen(s));
	assert_memory_equal(h, want, CLC_HOSTNAME_LEN);
}

void v2cap_gid_v4(uint8_t n, struct wire_gid *g)
{
	memset(g, 0, sizeof(*g));
	g->b[10] = g->b[11] = 0xff;
	g->b[12] = 10;
	g->b[15] = n;
}
