/* pcapw.c: classic pcap writer and Ethernet/IPv4/TCP and RoCE v1/v2 frame builders for tests
 * (see pcapw.h; framing per docs/protocol/wire-formats.md 10 and docs/protocol/wireshark.md
 * 6.2-6.3). */
#include "pcapw.h"

#include <errno.h>
#include <string.h>

/* ---- pcap file ------------------------------------------------------------------------ */

/* Classic pcap, native byte order (readers detect it from the magic), version 2.4. */
#define PCAP_MAGIC_USEC 0xa1b2c3d4u

static int put32le(FILE *f, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	return fwrite(b, 1, 4, f) == 4 ? 0 : -1;
}

static int put16le(FILE *f, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
	return fwrite(b, 1, 2, f) == 2 ? 0 : -1;
}

int pcapw_open(struct pcapw *w, const char *path)
{
	w->nframes = 0;
	w->f = fopen(path, "wb");
	if (!w->f)
		return -1;
	/* Written little-endian explicitly so the file is the same on every host. */
	if (put32le(w->f, PCAP_MAGIC_USEC) || put16le(w->f, 2) || put16le(w->f, 4) ||
	    put32le(w->f, 0) /* thiszone */ || put32le(w->f, 0) /* sigfigs */ ||
	    put32le(w->f, PCAPW_SNAPLEN) || put32le(w->f, PCAPW_LINKTYPE_ETHERNET)) {
		fclose(w->f);
		w->f = NULL;
		return -1;
	}
	return 0;
}

int pcapw_frame(struct pcapw *w, const void *frame, size_t len)
{
	if (!w->f || len == 0 || len > PCAPW_SNAPLEN) {
		errno = EINVAL;
		return -1;
	}
	/* Timestamps 1 ms apart, starting at 1000000000 s, so frames sort in write order. */
	uint32_t n = w->nframes++;
	if (put32le(w->f, 1000000000u + n / 1000) || put32le(w->f, (n % 1000) * 1000) ||
	    put32le(w->f, (uint32_t)len) || put32le(w->f, (uint32_t)len) ||
	    fwrite(frame, 1, len, w->f) != len)
		return -1;
	return 0;
}

int pcapw_close(struct pcapw *w)
{
	if (!w->f)
		return -1;
	int rc = fclose(w->f);
	w->f = NULL;
	return rc ? -1 : 0;
}

/* The frame builders are in src/util/netframe.c (pcapw.h maps the names). */


void pcapw_flow_init(struct pcapw_flow *fl, const struct pcapw_ep *client,
		     const struct pcapw_ep *server, uint32_t isn_c, uint32_t isn_s)
{
	fl->client = *client;
	fl->server = *server;
	fl->cseq = isn_c;
	fl->sseq = isn_s;
	fl->ip_id = 1;
}

static int flow_write(struct pcapw *w, struct pcapw_flow *fl, bool from_server, uint32_t seq,
		      uint32_t ack, uint8_t flags, const uint8_t *opts, size_t optlen,
		      const void *data, size_t len)
{
	uint8_t frame[PCAPW_FRAME_MAX];
	struct pcapw_tcp s = {
		.src = from_server ? &fl->server : &fl->client,
		.dst = from_server ? &fl->client : &fl->server,
		.seq = seq, .ack = ack, .flags = flags, .window = 65535, .ip_id = fl->ip_id++,
		.opts = opts, .optlen = optlen, .data = data, .len = len,
	};
	size_t n = pcapw_build_tcp4(frame, sizeof(frame), &s);
	if (!n) {
		errno = EMSGSIZE;
		return -1;
	}
	return pcapw_frame(w, frame, n);
}

int pcapw_flow_handshake(struct pcapw *w, struct pcapw_flow *fl, const uint8_t *syn_opts,
			 size_t syn_optlen, const uint8_t *synack_opts, size_t synack_optlen)
{
	if (flow_write(w, fl, false, fl->cseq, 0, TCPF_SYN, syn_opts, syn_optlen, NULL, 0))
		return -1;
	fl->cseq++;	/* the SYN takes one sequence number */
	if (flow_write(w, fl, true, fl->sseq, fl->cseq, TCPF_SYN | TCPF_ACK, synack_opts,
		       synack_optlen, NULL, 0))
		return -1;
	fl->sseq++;
	return flow_write(w, fl, false, fl->cseq, fl->sseq, TCPF_ACK, NULL, 0, NULL, 0);
}

int pcapw_flow_send_at(struct pcapw *w, struct pcapw_flow *fl, bool from_server,
		       uint32_t seq_off, const void *data, size_t len)
{
	uint32_t seq = (from_server ? fl->sseq : fl->cseq) + seq_off;
	uint32_t ack = from_server ? fl->cseq : fl->sseq;
	return flow_write(w, fl, from_server, seq, ack, TCPF_PSH | TCPF_ACK, NULL, 0, data, len);
}

void pcapw_flow_advance(struct pcapw_flow *fl, bool from_server, uint32_t n)
{
	if (from_server)
		fl->sseq += n;
	else
		fl->cseq += n;
}

int pcapw_flow_send(struct pcapw *w, struct pcapw_flow *fl, bool from_server, const void *data,
		    size_t len)
{
	if (pcapw_flow_send_at(w, fl, from_server, 0, data, len))
		return -1;
	pcapw_flow_advance(fl, from_server, (uint32_t)len);
	return 0;
}


int pcapw_roce_v1(struct pcapw *w, const struct pcapw_roce *p)
{
	uint8_t frame[PCAPW_FRAME_MAX];
	size_t n = pcapw_build_roce_v1(frame, sizeof(frame), p);
	if (!n) {
		errno = EMSGSIZE;
		return -1;
	}
	return pcapw_frame(w, frame, n);
}

int pcapw_roce_v2(struct pcapw *w, const struct pcapw_roce *p)
{
	uint8_t frame[PCAPW_FRAME_MAX];
	size_t n = pcapw_build_roce_v2(frame, sizeof(frame), p);
	if (!n) {
		errno = EMSGSIZE;
		return -1;
	}
	return pcapw_frame(w, frame, n);
}
