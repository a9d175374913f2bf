/* v2cap.c: loads the Linux SMC-R v2 capture frame by frame (v2cap.h). */
#define _GNU_SOURCE	/* libpcap headers use u_char and friends */
#include "lib/v2cap.h"

#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smcr-decode/frame.h"

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
