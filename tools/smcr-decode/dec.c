/* dec.c: message detection, decoding and error reporting of smcr-decode (dec.h).
 * Every read is bounded by the length given; the codecs validate the fields and name the
 * offending one through their error code (smcr_err_name / smcr_err_msg). */
#include "dec.h"

#include <string.h>

#include "print.h"
#include "util/err.h"
#include "wire/cdc.h"
#include "wire/clc.h"
#include "wire/llc.h"
#include "wire/tcpopt.h"

static const uint8_t eye_smcr[4] = { 0xE2, 0xD4, 0xC3, 0xD9 };
static const uint8_t eye_smcd[4] = { 0xE2, 0xD4, 0xC3, 0xC4 };
static const uint8_t opt_smc[TCPOPT_SMC_LEN] = { 0xFE, 0x06, 0xE2, 0xD4, 0xC3, 0xD9 };

void dec_init(struct dec *d, struct out *out, FILE *err, const char *prog)
{
	memset(d, 0, sizeof(*d));
	d->out = out;
	d->err = err;
	d->prog = prog;
}

/* One line on err: "<prog>: <where>: <kind>: <NAME>: <message>". */
static void report(struct dec *d, const struct dec_where *w, const char *kind, int code,
		   const char *detail)
{
	d->malformed++;
	fprintf(d->err, "%s: ", d->prog);
	switch (w->transport) {
	case DEC_HEX:
		fprintf(d->err, "offset %llu: ", (unsigned long long)w->offset);
		break;
	case DEC_TCP:
		fprintf(d->err, "frame %u: tcp %s -> %s stream offset %llu: ", w->frame,
			w->src ? w->src : "?", w->dst ? w->dst : "?",
			(unsigned long long)w->offset);
		break;
	case DEC_ROCE_V1:
	case DEC_ROCE_V2:
		fprintf(d->err, "frame %u: %s %s -> %s qp 0x%06x: ", w->frame,
			w->transport == DEC_ROCE_V1 ? "roce_v1" : "roce_v2", w->src ? w->src : "?",
			w->dst ? w->dst : "?", (unsigned)w->dest_qp);
		break;
	}
	if (code)
		fprintf(d->err, "%s: %s: %s%s%s\n", kind, smcr_err_name(code), smcr_err_msg(code),
			detail ? " " : "", detail ? detail : "");
	else
		fprintf(d->err, "%s: %s\n", kind, detail ? detail : "malformed");
	fflush(d->err);
}

static bool is_eye(const uint8_t *p, size_t len)
{
	return len >= 4 && (!memcmp(p, eye_smcr, 4) || !memcmp(p, eye_smcd, 4));
}

/* Is p a known v1 LLC type or CDC followed by the length byte 44? */
static bool is_llc_hdr(const uint8_t *p, size_t len)
{
	if (len < 2 || p[1] != LLC_MSG_LEN)
		return false;
	enum llc_kind k = llc_kind_of(p[0]);
	return k == LLC_KIND_V1 || k == LLC_KIND_CDC;
}

static bool is_clc_hdr(const uint8_t *p, size_t len)
{
	return is_eye(p, len) && clc_peek_header(p, len, NULL, NULL, NULL) == 0;
}

/* Offset of the next plausible message start after position from, or len. */
static size_t resync(const uint8_t *buf, size_t len, size_t from)
{
	for (size_t i = from; i < len; i++)
		if (is_clc_hdr(buf + i, len - i) || is_llc_hdr(buf + i, len - i))
			return i;
	return len;
}

static const char *clc_kind_of_byte(const uint8_t *p, size_t len)
{
	if (len < 5)
		return "clc";
	switch (p[4]) {
	case CLC_PROPOSAL: return "clc.proposal";
	case CLC_ACCEPT: return "clc.accept";
	case CLC_CONFIRM: return "clc.confirm";
	case CLC_DECLINE: return "clc.decline";
	default: return "clc";
	}
}

/* Decodes one LLC or CDC message of len bytes (the codecs reject len != 44, except a CDC
 * of 26..43 bytes, which Linux accepts: docs/protocol/wire-formats.md 7.1). */
static void dec_llc_cdc(struct dec *d, const uint8_t *p, size_t len, const struct dec_where *w)
{
	if (len >= 1 && p[0] == LLC_TYPE_CDC) {
		struct cdc_msg m;
		int rc = cdc_decode(p, len, &m);
		if (rc) {
			report(d, w, "cdc", rc, NULL);
			return;
		}
		print_cdc(d->out, &m, w, len);
		d->decoded++;
		return;
	}
	struct llc_msg m;
	int rc = llc_decode(p, len, &m);
	if (rc) {
		char detail[32];
		snprintf(detail, sizeof(detail), "(type 0x%02x)", len ? p[0] : 0);
		report(d, w, len ? print_llc_kind(p[0]) : "llc", rc, detail);
		return;
	}
	print_llc(d->out, &m, w);
	d->decoded++;
}

/* A v2 LLC message at p: its 16-bit little-endian length when it is 44..left, else 0. */
static size_t llc2_extent(const uint8_t *p, size_t left)
{
	if (left < LLC2_MIN_LEN || !llc2_is_v2_type(p[0]))
		return 0;
	size_t l = (size_t)(p[1] | p[2] << 8);
	return l >= LLC2_MIN_LEN && l <= left ? l : 0;
}

/* Decodes one SMC-R v2 LLC message (docs/parts/wire-v2.md 7) of len bytes. */
static void dec_llc2(struct dec *d, const uint8_t *p, size_t len, const struct dec_where *w)
{
	static struct llc2_msg m;	/* 5 KiB; smcr-decode is single-threaded */
	int rc = llc2_decode(p, len, &m);
	if (rc) {
		char detail[32];
		snprintf(detail, sizeof(detail), "(type 0x%02x)", p[0]);
		report(d, w, print_llc2_kind(p[0]), rc, detail);
		return;
	}
	print_llc2(d->out, &m, w);
	d->decoded++;
}

void dec_tcp_option(struct dec *d, bool ack, const struct dec_where *w)
{
	print_begin(d->out, "tcp.option", w, TCPOPT_SMC_LEN);
	out_bool(d->out, "syn", true);
	out_bool(d->out, "ack", ack);
	out_uint(d->out, "option_kind", TCPOPT_SMC_KIND);
	out_hex(d->out, "exid", TCPOPT_SMC_EXID, 8);
	out_end(d->out);
	d->decoded++;
}

/* A TCP option in hex input: FE 06 <ExID>, or NOP NOP first. Returns its length or 0. */
static size_t hex_tcp_option(struct dec *d, const uint8_t *p, size_t len, struct dec_where *w)
{
	size_t skip = 0;
	if (len >= 2 + TCPOPT_SMC_LEN && p[0] == TCPOPT_NOP && p[1] == TCPOPT_NOP)
		skip = 2;
	if (len - skip < TCPOPT_SMC_LEN || memcmp(p + skip, opt_smc, TCPOPT_SMC_LEN))
		return 0;
	struct rcur c = rcur_make(p + skip, TCPOPT_SMC_LEN);
	int rc = tcpopt_get(&c);
	if (rc) {	/* cannot happen for these bytes unless the codec disagrees */
		report(d, w, "tcp.option", rc, NULL);
		return skip + TCPOPT_SMC_LEN;
	}
	print_begin(d->out, "tcp.option", w, skip + TCPOPT_SMC_LEN);
	out_bool(d->out, "aligned", skip != 0);
	out_uint(d->out, "option_kind", TCPOPT_SMC_KIND);
	out_hex(d->out, "exid", TCPOPT_SMC_EXID, 8);
	out_end(d->out);
	d->decoded++;
	return skip + TCPOPT_SMC_LEN;
}

/* One CLC message at buf (is_eye true). Returns the bytes it takes, 0 if its extent is
 * unknown (malformed header: resynchronise), or SIZE_MAX when it is incomplete and !final. */
static size_t dec_clc_one(struct dec *d, const uint8_t *buf, size_t len, bool final,
			  const struct dec_where *w)
{
	enum clc_type type;
	uint16_t msglen;
	if (len < CLC_HDR_LEN && !final)
		return SIZE_MAX;
	int rc = clc_peek_header(buf, len, &type, &msglen, NULL);
	if (rc) {
		report(d, w, clc_kind_of_byte(buf, len), rc, NULL);
		return 0;
	}
	if (msglen > len && !final)
		return SIZE_MAX;
	size_t n = msglen <= len ? msglen : len;
	struct clc_msg m;
	rc = clc_decode(buf, n, &m);
	if (rc == -SMCR_E_CLC_ACC_V2) {
		/* SMC-R v2 Accept/Confirm (docs/parts/wire-v2.md 4): its own codec */
		struct clc_accept_v2 a;
		rc = clc_accept_v2_decode(buf, n, type, &a);
		if (!rc) {
			print_accept_v2(d->out, &a, type, w, n);
			d->decoded++;
			return n;
		}
	}
	if (rc) {
		char detail[64];
		detail[0] = 0;
		if (msglen > len)
			snprintf(detail, sizeof(detail), "(%zu of %u bytes)", len,
				 (unsigned)msglen);
		report(d, w, print_clc_kind(type), rc, detail[0] ? detail : NULL);
		return n;
	}
	print_clc(d->out, &m, w, n);
	d->decoded++;
	return n;
}

void dec_buffer(struct dec *d, const uint8_t *buf, size_t len, struct dec_where *w)
{
	uint64_t base = w->offset;
	size_t i = 0;
	while (i < len) {
		const uint8_t *p = buf + i;
		size_t left = len - i;
		w->offset = base + i;
		if (is_eye(p, left) || (left < 4 && !memcmp(p, eye_smcr, left))) {
			size_t n = dec_clc_one(d, p, left, true, w);
			i = n ? i + n : resync(buf, len, i + 1);
			continue;
		}
		size_t n = hex_tcp_option(d, p, left, w);
		if (n) {
			i += n;
			continue;
		}
		n = llc2_extent(p, left);
		if (n) {
			dec_llc2(d, p, n, w);
			i += n;
			continue;
		}
		enum llc_kind k = llc_kind_of(p[0]);
		if ((k == LLC_KIND_V1 || k == LLC_KIND_CDC) ||
		    (left >= 2 && p[1] == LLC_MSG_LEN)) {
			/* An LLC/CDC type, or any type byte with the length byte 44: one 44-byte
			 * message (the codec reports a bad type or length byte by name). */
			n = left < LLC_MSG_LEN ? left : LLC_MSG_LEN;
			dec_llc_cdc(d, p, n, w);
			i += n;
			continue;
		}
		size_t next = resync(buf, len, i + 1);
		char detail[96];
		snprintf(detail, sizeof(detail),
			 "no SMC message here (byte 0x%02x): %zu bytes skipped", p[0], next - i);
		report(d, w, "unknown", 0, detail);
		i = next;
	}
	w->offset = base + len;
}

size_t dec_clc_stream(struct dec *d, const uint8_t *buf, size_t len, bool final,
		      struct dec_where *w, enum dec_stop *stop)
{
	uint64_t base = w->offset;
	size_t i = 0;
	*stop = DEC_STOP_END;
	while (i < len) {
		const uint8_t *p = buf + i;
		size_t left = len - i;
		w->offset = base + i;
		bool eye_prefix = left < 4 && (!memcmp(p, eye_smcr, left) ||
					       !memcmp(p, eye_smcd, left));
		if (!is_eye(p, left) && !(eye_prefix && !final)) {
			/* Application data or garbage: the CLC phase is over. A stream that ends
			 * inside an eyecatcher is reported as truncated. */
			if (eye_prefix)
				report(d, w, "clc", -SMCR_E_CLC_SHORT_HEADER, NULL);
			*stop = DEC_STOP_NOT_CLC;
			break;
		}
		size_t n = eye_prefix ? SIZE_MAX : dec_clc_one(d, p, left, final, w);
		if (n == SIZE_MAX) {
			*stop = DEC_STOP_PARTIAL;
			break;
		}
		if (n == 0) {
			/* Header unusable: the stream cannot be framed any more (as for Linux). */
			*stop = DEC_STOP_NOT_CLC;
			break;
		}
		i += n;
	}
	w->offset = base + i;
	return i;
}

bool dec_send_payload(struct dec *d, const uint8_t *buf, size_t len, struct dec_where *w)
{
	if (len == 0)
		return false;
	enum llc_kind k = llc_kind_of(buf[0]);
	bool v1 = k == LLC_KIND_V1 || k == LLC_KIND_CDC;
	if (k == LLC_KIND_V2 && len >= LLC2_MIN_LEN) {
		/* SMC-R v2 LLC: the whole SEND (the codec checks the length field against it) */
		w->offset = 0;
		dec_llc2(d, buf, len, w);
		return true;
	}
	/* What tshark's heuristic takes as SMC-R v1 (docs/protocol/wireshark.md 3): a v1 type with
	 * length byte 44 and 44 bytes. A v1 type whose length disagrees is reported; other payloads
	 * (RDMA data, v2 LLC) are not ours. */
	if (!v1 || (len != LLC_MSG_LEN && (len < 2 || buf[1] != LLC_MSG_LEN)))
		return false;
	w->offset = 0;
	/* Any length: the codec names what is wrong (LLC_SHORT/LONG, CDC_SHORT/LONG). */
	dec_llc_cdc(d, buf, len, w);
	return true;
}
