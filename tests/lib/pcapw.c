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

/* ---- checksums ------------------------------------------------------------------------ */

uint32_t pcapw_csum_add(uint32_t sum, const void *data, size_t len)
{
	const uint8_t *p = data;
	/* Callers add whole headers and an even pseudo header; an odd tail is padded with 0. */
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

uint16_t pcapw_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

uint32_t pcapw_crc32(uint32_t crc, const void *data, size_t len)
{
	/* Bitwise reflected CRC-32, polynomial 0xEDB88320: small and fast enough for tests. */
	const uint8_t *p = data;
	crc = ~crc;
	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
	}
	return ~crc;
}

/* The ICRC covers the packet from the GRH (v1) or IP header (v2) to the end of the payload,
 * preceded by 8 bytes of 0xFF standing for the (absent) IB local route header, with the
 * fields routers may change replaced by ones: v1 GRH traffic class, flow label and hop
 * limit; v2 IPv4 TOS, TTL and header checksum, UDP checksum; in both the BTH reserved byte
 * 4 ("resv8a"). (IBTA Annex A16/A17; the same masking Linux rxe uses.) */
uint32_t pcapw_icrc(const uint8_t *grh_or_ip, size_t len, bool v2)
{
	static const uint8_t lrh[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t hdr[IPV4_HDR_LEN + UDP_HDR_LEN + ROCE_BTH_LEN];	/* 40 bytes, = GRH size */
	uint8_t grh[ROCE_GRH_LEN + ROCE_BTH_LEN];
	uint32_t crc = pcapw_crc32(0, lrh, sizeof(lrh));
	if (v2) {
		if (len < sizeof(hdr))
			return 0;
		memcpy(hdr, grh_or_ip, sizeof(hdr));
		hdr[1] = 0xff;				/* TOS */
		hdr[8] = 0xff;				/* TTL */
		hdr[10] = hdr[11] = 0xff;		/* header checksum */
		hdr[IPV4_HDR_LEN + 6] = hdr[IPV4_HDR_LEN + 7] = 0xff;	/* UDP checksum */
		hdr[IPV4_HDR_LEN + UDP_HDR_LEN + 4] = 0xff;		/* BTH resv8a */
		crc = pcapw_crc32(crc, hdr, sizeof(hdr));
		return pcapw_crc32(crc, grh_or_ip + sizeof(hdr), len - sizeof(hdr));
	}
	if (len < sizeof(grh))
		return 0;
	memcpy(grh, grh_or_ip, sizeof(grh));
	grh[0] |= 0x0f;					/* traffic class (high nibble) */
	grh[1] = grh[2] = grh[3] = 0xff;		/* traffic class (low) + flow label */
	grh[7] = 0xff;					/* hop limit */
	grh[ROCE_GRH_LEN + 4] = 0xff;			/* BTH resv8a */
	crc = pcapw_crc32(crc, grh, sizeof(grh));
	return pcapw_crc32(crc, grh_or_ip + sizeof(grh), len - sizeof(grh));
}

/* ---- builders ------------------------------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16); p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)v;
}
static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static size_t eth(uint8_t *out, const struct pcapw_ep *src, const struct pcapw_ep *dst,
		  uint16_t type)
{
	memcpy(out, dst->mac, 6);
	memcpy(out + 6, src->mac, 6);
	put16(out + 12, type);
	return ETH_HDR_LEN;
}

/* IPv4 header without options, checksum filled. */
static void ipv4(uint8_t *ip, const struct pcapw_ep *src, const struct pcapw_ep *dst,
		 uint8_t proto, size_t total, uint16_t id, uint8_t ttl)
{
	memset(ip, 0, IPV4_HDR_LEN);
	ip[0] = 0x45;
	put16(ip + 2, (uint16_t)total);
	put16(ip + 4, id);
	put16(ip + 6, 0x4000);			/* DF */
	ip[8] = ttl;
	ip[9] = proto;
	put32(ip + 12, src->ip4);
	put32(ip + 16, dst->ip4);
	put16(ip + 10, pcapw_csum_fold(pcapw_csum_add(0, ip, IPV4_HDR_LEN)));
}

size_t pcapw_build_tcp4(uint8_t *out, size_t cap, const struct pcapw_tcp *s)
{
	size_t optpad = (s->optlen + 3) & ~(size_t)3;
	if (optpad > 40)
		return 0;
	size_t tcplen = TCP_HDR_LEN + optpad + s->len;
	size_t total = ETH_HDR_LEN + IPV4_HDR_LEN + tcplen;
	if (total > cap || IPV4_HDR_LEN + tcplen > 0xffff)
		return 0;
	size_t off = eth(out, s->src, s->dst, ETHERTYPE_IPV4);
	ipv4(out + off, s->src, s->dst, 6, IPV4_HDR_LEN + tcplen, s->ip_id, 64);
	uint8_t *t = out + off + IPV4_HDR_LEN;
	memset(t, 0, TCP_HDR_LEN + optpad);
	put16(t, s->src->port);
	put16(t + 2, s->dst->port);
	put32(t + 4, s->seq);
	put32(t + 8, s->ack);
	t[12] = (uint8_t)(((TCP_HDR_LEN + optpad) / 4) << 4);
	t[13] = s->flags;
	put16(t + 14, s->window);
	if (s->optlen)
		memcpy(t + TCP_HDR_LEN, s->opts, s->optlen);
	if (s->len)
		memcpy(t + TCP_HDR_LEN + optpad, s->data, s->len);
	/* Checksum over the pseudo header (src, dst, 0, proto, TCP length) and the segment. */
	uint8_t ph[12];
	put32(ph, s->src->ip4);
	put32(ph + 4, s->dst->ip4);
	ph[8] = 0;
	ph[9] = 6;
	put16(ph + 10, (uint16_t)tcplen);
	uint32_t sum = pcapw_csum_add(0, ph, sizeof(ph));
	sum = pcapw_csum_add(sum, t, tcplen);
	put16(t + 16, pcapw_csum_fold(sum));
	return total;
}

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

/* BTH (IBTA 9.2): opcode | SE M pad(2) tver(4) | P_Key | resv8a | dest QP | A resv7 | PSN. */
static void bth(uint8_t *b, const struct pcapw_roce *p)
{
	b[0] = p->opcode;
	b[1] = p->se ? BTH_SE : 0;
	put16(b + 2, 0xffff);			/* default P_Key */
	b[4] = 0;
	put24(b + 5, p->dqpn & 0xffffff);
	b[8] = 0x80;				/* AckReq */
	put24(b + 9, p->psn & 0xffffff);
}

static void put_icrc(uint8_t *p, uint32_t icrc)
{
	/* Sent least significant byte first, like the Ethernet FCS. */
	p[0] = (uint8_t)icrc; p[1] = (uint8_t)(icrc >> 8);
	p[2] = (uint8_t)(icrc >> 16); p[3] = (uint8_t)(icrc >> 24);
}

size_t pcapw_build_roce_v1(uint8_t *out, size_t cap, const struct pcapw_roce *p)
{
	size_t body = ROCE_BTH_LEN + p->len + ROCE_ICRC_LEN;
	size_t total = ETH_HDR_LEN + ROCE_GRH_LEN + body;
	if (total > cap || body > 0xffff)
		return 0;
	size_t off = eth(out, p->src, p->dst, ETHERTYPE_ROCE);
	uint8_t *g = out + off;
	put32(g, 0x60000000u);			/* IP version 6, traffic class 0, flow label 0 */
	put16(g + 4, (uint16_t)body);		/* payload length: BTH + payload + ICRC */
	g[6] = ROCE_GRH_NEXT_BTH;
	g[7] = 1;				/* hop limit 1: RoCE v1 is not routed */
	memcpy(g + 8, p->src->gid, 16);
	memcpy(g + 24, p->dst->gid, 16);
	bth(g + ROCE_GRH_LEN, p);
	if (p->len)
		memcpy(g + ROCE_GRH_LEN + ROCE_BTH_LEN, p->payload, p->len);
	size_t covered = ROCE_GRH_LEN + ROCE_BTH_LEN + p->len;
	put_icrc(g + covered, pcapw_icrc(g, covered, false));
	return total;
}

size_t pcapw_build_roce_v2(uint8_t *out, size_t cap, const struct pcapw_roce *p)
{
	size_t udplen = UDP_HDR_LEN + ROCE_BTH_LEN + p->len + ROCE_ICRC_LEN;
	size_t total = ETH_HDR_LEN + IPV4_HDR_LEN + udplen;
	if (total > cap || IPV4_HDR_LEN + udplen > 0xffff)
		return 0;
	size_t off = eth(out, p->src, p->dst, ETHERTYPE_IPV4);
	uint8_t *ip = out + off;
	ipv4(ip, p->src, p->dst, 17, IPV4_HDR_LEN + udplen, 0, 64);
	uint8_t *u = ip + IPV4_HDR_LEN;
	put16(u, p->src->port);
	put16(u + 2, ROCE_V2_UDP_PORT);
	put16(u + 4, (uint16_t)udplen);
	put16(u + 6, 0);			/* no UDP checksum: allowed over IPv4 */
	bth(u + UDP_HDR_LEN, p);
	if (p->len)
		memcpy(u + UDP_HDR_LEN + ROCE_BTH_LEN, p->payload, p->len);
	size_t covered = IPV4_HDR_LEN + UDP_HDR_LEN + ROCE_BTH_LEN + p->len;
	put_icrc(ip + covered, pcapw_icrc(ip, covered, true));
	return total;
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
