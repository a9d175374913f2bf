/* cap.c: pcap/pcapng reading, TCP stream reassembly and RoCE payload hand-off for
 * smcr-decode (cap.h). The capture is hostile: frame.c bounds every header, the reassembly
 * buffer and flow table are capped, and sequence numbers are compared modulo 2^32. */
/* libpcap's headers use the BSD u_char/u_int types. */
#define _GNU_SOURCE
#include "cap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pcap/pcap.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "wire/tcpopt.h"

#define BTH_OP_RC_SEND_ONLY 0x04

/* One TCP direction. */
struct tcp_dir {
	int ipver;
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
	bool have_base;		/* base is known (SYN seen, or first data began with CLC) */
	bool done;		/* CLC phase over: ignore further data */
	uint32_t base;		/* sequence number of stream byte 0 */
	uint8_t *buf;		/* bufcap bytes, grown on demand up to CAP_STREAM_MAX */
	uint8_t *have;		/* bitmap of bufcap bits: byte i of the stream received */
	size_t bufcap;
	size_t contig;		/* bytes 0..contig-1 all received */
	size_t parsed;		/* bytes consumed by the CLC decoder */
	unsigned last_frame;	/* frame that last extended the stream */
};

struct cap {
	struct dec *d;
	int linktype;
	unsigned frame;
	struct tcp_dir *dirs;
	size_t ndirs, capdirs;
	bool warned_flows;
};

static void addr_text(char *out, size_t cap, int ipver, const uint8_t *ip, uint16_t port)
{
	char a[INET6_ADDRSTRLEN];
	if (!inet_ntop(ipver == 6 ? AF_INET6 : AF_INET, ip, a, sizeof(a)))
		snprintf(a, sizeof(a), "?");
	if (ipver == 6)
		snprintf(out, cap, "[%s]:%u", a, port);
	else
		snprintf(out, cap, "%s:%u", a, port);
}

static struct tcp_dir *dir_get(struct cap *c, const struct frame_info *fi)
{
	for (size_t i = 0; i < c->ndirs; i++) {
		struct tcp_dir *t = &c->dirs[i];
		if (t->ipver == fi->ipver && t->sport == fi->sport && t->dport == fi->dport &&
		    !memcmp(t->src, fi->src_ip, 16) && !memcmp(t->dst, fi->dst_ip, 16))
			return t;
	}
	if (c->ndirs >= CAP_MAX_FLOWS) {
		if (!c->warned_flows)
			fprintf(c->d->err, "%s: more than %u TCP directions; ignoring new ones\n",
				c->d->prog, CAP_MAX_FLOWS);
		c->warned_flows = true;
		return NULL;
	}
	if (c->ndirs == c->capdirs) {
		size_t n = c->capdirs ? 2 * c->capdirs : 16;
		struct tcp_dir *v = realloc(c->dirs, n * sizeof(*v));
		if (!v)
			return NULL;
		c->dirs = v;
		c->capdirs = n;
	}
	struct tcp_dir *t = &c->dirs[c->ndirs++];
	memset(t, 0, sizeof(*t));
	t->ipver = fi->ipver;
	memcpy(t->src, fi->src_ip, 16);
	memcpy(t->dst, fi->dst_ip, 16);
	t->sport = fi->sport;
	t->dport = fi->dport;
	return t;
}

static void dir_free_bufs(struct tcp_dir *t)
{
	free(t->buf);
	free(t->have);
	t->buf = t->have = NULL;
	t->bufcap = 0;
}

/* Makes the buffers hold stream bytes [0, need). 0, or -1 when out of memory. */
static int dir_grow(struct tcp_dir *t, size_t need)
{
	if (need <= t->bufcap)
		return 0;
	size_t cap = t->bufcap ? t->bufcap : 4096;
	while (cap < need)
		cap *= 2;
	if (cap > CAP_STREAM_MAX)
		cap = CAP_STREAM_MAX;
	uint8_t *b = realloc(t->buf, cap);
	if (!b)
		return -1;
	t->buf = b;
	uint8_t *h = realloc(t->have, cap / 8);
	if (!h)
		return -1;
	memset(h + t->bufcap / 8, 0, (cap - t->bufcap) / 8);
	t->have = h;
	t->bufcap = cap;
	return 0;
}

static void dir_reset(struct tcp_dir *t)
{
	dir_free_bufs(t);
	t->have_base = t->done = false;
	t->contig = t->parsed = 0;
}

/* Decodes what became contiguous; final at the end of the capture. */
static void dir_decode(struct cap *c, struct tcp_dir *t, bool final)
{
	if (t->done || !t->buf || t->parsed >= t->contig)
		return;
	char src[64], dst[64];
	addr_text(src, sizeof(src), t->ipver, t->src, t->sport);
	addr_text(dst, sizeof(dst), t->ipver, t->dst, t->dport);
	struct dec_where w = {
		.transport = DEC_TCP, .frame = t->last_frame, .offset = t->parsed,
		.src = src, .dst = dst,
	};
	enum dec_stop stop;
	t->parsed += dec_clc_stream(c->d, t->buf + t->parsed, t->contig - t->parsed, final, &w,
				    &stop);
	if (stop == DEC_STOP_NOT_CLC) {
		/* The CLC phase is over: drop the buffers, keep the direction known. */
		dir_free_bufs(t);
		t->done = true;
	}
}

static void tcp_segment(struct cap *c, const struct frame_info *fi)
{
	struct tcp_dir *t = dir_get(c, fi);
	if (!t)
		return;
	if (fi->tcp_flags & TCP_FLAG_SYN) {
		bool found = false;
		if (tcpopt_find(fi->tcp_opts, fi->tcp_optlen, &found) == 0 && found) {
			char src[64], dst[64];
			addr_text(src, sizeof(src), fi->ipver, fi->src_ip, fi->sport);
			addr_text(dst, sizeof(dst), fi->ipver, fi->dst_ip, fi->dport);
			struct dec_where w = {
				.transport = DEC_TCP, .frame = c->frame, .src = src, .dst = dst,
				.syn = true,
			};
			dec_tcp_option(c->d, (fi->tcp_flags & TCP_FLAG_ACK) != 0, &w);
		}
		uint32_t base = fi->seq + 1;
		if (t->have_base && base != t->base)
			dir_reset(t);	/* a new connection on the same ports */
		t->have_base = true;
		t->base = base;
	}
	if (fi->paylen == 0 || t->done)
		return;
	if (!t->have_base) {
		/* Capture started after the SYN: only a stream that begins with CLC is ours. */
		static const uint8_t eye[3] = { 0xE2, 0xD4, 0xC3 };
		if (fi->paylen < 3 || memcmp(fi->payload, eye, 3)) {
			t->done = true;
			return;
		}
		t->have_base = true;
		t->base = fi->seq;
	}
	uint32_t rel = fi->seq - t->base;	/* modulo 2^32 */
	if (rel >= CAP_STREAM_MAX)
		return;	/* before the stream start (a huge value) or beyond the CLC phase */
	size_t n = fi->paylen;
	if (n > CAP_STREAM_MAX - rel)
		n = CAP_STREAM_MAX - rel;
	if (dir_grow(t, rel + n)) {
		fprintf(c->d->err, "%s: out of memory reassembling a TCP stream\n", c->d->prog);
		dir_reset(t);
		t->done = true;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		size_t at = rel + i;
		if (!(t->have[at / 8] & (1u << (at % 8)))) {
			t->buf[at] = fi->payload[i];
			t->have[at / 8] |= (uint8_t)(1u << (at % 8));
		}
	}
	size_t old = t->contig;
	while (t->contig < t->bufcap && (t->have[t->contig / 8] & (1u << (t->contig % 8))))
		t->contig++;
	if (t->contig > old) {
		t->last_frame = c->frame;
		dir_decode(c, t, false);
	}
}

static void roce_packet(struct cap *c, const struct frame_info *fi)
{
	/* SMC-R sends LLC and CDC as RC SEND Only (docs/protocol/wire-formats.md 10). */
	if (fi->opcode != BTH_OP_RC_SEND_ONLY)
		return;
	char src[64], dst[64];
	if (fi->roce_ver == 1) {
		if (!inet_ntop(AF_INET6, fi->sgid, src, sizeof(src)))
			snprintf(src, sizeof(src), "?");
		if (!inet_ntop(AF_INET6, fi->dgid, dst, sizeof(dst)))
			snprintf(dst, sizeof(dst), "?");
	} else {
		addr_text(src, sizeof(src), fi->ipver, fi->src_ip, fi->sport);
		addr_text(dst, sizeof(dst), fi->ipver, fi->dst_ip, fi->dport);
	}
	struct dec_where w = {
		.transport = fi->roce_ver == 1 ? DEC_ROCE_V1 : DEC_ROCE_V2,
		.frame = c->frame, .src = src, .dst = dst,
		.dest_qp = fi->dest_qp, .bth_psn = fi->psn,
	};
	dec_send_payload(c->d, fi->payload, fi->paylen, &w);
}

static void on_packet(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes)
{
	struct cap *c = (struct cap *)user;
	struct frame_info fi;
	c->frame++;
	switch (frame_parse(c->linktype, bytes, h->caplen, &fi)) {
	case FRAME_TCP:
		tcp_segment(c, &fi);
		break;
	case FRAME_ROCE:
		roce_packet(c, &fi);
		break;
	case FRAME_OTHER:
		break;
	}
}

static int run(struct dec *d, pcap_t *p, char *errbuf, size_t errlen)
{
	struct cap c = { .d = d, .linktype = pcap_datalink(p) };
	int rc = pcap_loop(p, -1, on_packet, (u_char *)&c);
	int status = 0;
	if (rc == -1) {
		/* A damaged record: report it, but still flush what was decoded. */
		snprintf(errbuf, errlen, "capture damaged after frame %u: %s", c.frame,
			 pcap_geterr(p));
		status = CAP_ERR_MALFORMED;
	}
	for (size_t i = 0; i < c.ndirs; i++) {
		dir_decode(&c, &c.dirs[i], true);
		dir_free_bufs(&c.dirs[i]);
	}
	free(c.dirs);
	pcap_close(p);
	return status;
}

int cap_decode_file(struct dec *d, FILE *f, char *errbuf, size_t errlen)
{
	char perr[PCAP_ERRBUF_SIZE];
	perr[0] = 0;
	pcap_t *p = pcap_fopen_offline(f, perr);
	if (!p) {
		snprintf(errbuf, errlen, "not a pcap/pcapng capture: %s", perr);
		fclose(f);
		return CAP_ERR_MALFORMED;
	}
	return run(d, p, errbuf, errlen);
}

int cap_decode_path(struct dec *d, const char *path, char *errbuf, size_t errlen)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	if (!f) {
		snprintf(errbuf, errlen, "%s: %s", path, strerror(errno));
		return CAP_ERR_IO;
	}
	return cap_decode_file(d, f, errbuf, errlen);
}
