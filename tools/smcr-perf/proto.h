/* proto.h: smcr-perf's own little protocol between client and server (not SMC-R: it runs
 * over whichever transport the test uses, as application bytes).
 *
 * Every connection starts with a 32-byte header from the client (the client always
 * speaks first, so an smcr server sees either a CLC Proposal or these bytes and falls back
 * cleanly for plain TCP clients):
 *
 *   0  4  magic "SPRF"
 *   4  1  version (1)
 *   5  1  kind: 1 control, 2 stream, 3 pingpong, 4 connect, 5 conns
 *   6  2  flags (0)
 *   8  4  size: message size (pingpong, connect: the server echoes this many bytes)
 *  12  8  session: ties data connections to their control connection
 *  20 12  reserved, zero
 *
 * A control connection then carries 8-byte requests (op u32, arg u32) and 64-byte replies:
 *   BEGIN: start of a measured interval: the server records its CPU time and RSS and
 *          resets the session's counters.
 *   END arg=n: waits (bounded) until the session has seen n data connections and all of
 *          them have ended, then replies with the counters and the CPU used since BEGIN.
 *   MEM:   replies at once (RSS now, connection counts so far).
 * Reply: status u32 (0 ok, 1 timeout, 2 bad request), transport u32 (0 tcp, 1 smcr),
 * cpu_us u64 (user+sys since BEGIN), rss_kib u64, rss_base_kib u64 (at BEGIN),
 * bytes u64 (payload received on data connections since BEGIN), conns u32 (data connections
 * since BEGIN), conns_smcr u32, conns_fallback u32 (the server's view of their mode),
 * open u32 (still running), 8 bytes reserved. All integers big-endian.
 * Decoders read through util/cursor.h and treat the bytes as hostile. */
#ifndef SMCR_PERF_PROTO_H
#define SMCR_PERF_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_MAGIC "SPRF"
#define PROTO_VERSION 1
#define PROTO_HDR_LEN 32
#define PROTO_REQ_LEN 8
#define PROTO_REPLY_LEN 64
/* The first bytes of every CLC message: "SMCR" in EBCDIC (RFC 7609 3.6, the eyecatcher). */
#define PROTO_CLC_EYECATCHER "\xe2\xd4\xc3\xd9"

enum proto_kind {
	PROTO_KIND_CTRL = 1,
	PROTO_KIND_STREAM = 2,
	PROTO_KIND_PINGPONG = 3,
	PROTO_KIND_CONNECT = 4,
	PROTO_KIND_CONNS = 5,
};

enum proto_op {
	PROTO_OP_BEGIN = 1,
	PROTO_OP_END = 2,
	PROTO_OP_MEM = 3,
};

enum proto_status {
	PROTO_ST_OK = 0,
	PROTO_ST_TIMEOUT = 1,
	PROTO_ST_BAD = 2,
};

/* Distinct decode failures (negative returns). */
enum proto_err {
	PROTO_E_SHORT = 1, /* fewer bytes than the message */
	PROTO_E_MAGIC,     /* not "SPRF" */
	PROTO_E_VERSION,   /* unknown version */
	PROTO_E_KIND,      /* unknown kind */
	PROTO_E_FLAGS,     /* flags or reserved bytes not zero */
	PROTO_E_SIZE,      /* size 0 or above PERF_SIZE_MAX */
	PROTO_E_OP,        /* unknown control op */
	PROTO_E_CLC,       /* the bytes are a CLC message: an SMC-R client, a TCP server */
};

struct proto_hdr {
	enum proto_kind kind;
	uint32_t size;
	uint64_t session;
};

struct proto_req {
	enum proto_op op;
	uint32_t arg;
};

struct proto_reply {
	uint32_t status;
	uint32_t transport;
	uint64_t cpu_us;
	uint64_t rss_kib, rss_base_kib;
	uint64_t bytes;
	uint32_t conns, conns_smcr, conns_fallback, open;
};

void proto_hdr_encode(const struct proto_hdr *h, uint8_t out[PROTO_HDR_LEN]);
/* 0 or -PROTO_E_*. */
int proto_hdr_decode(const uint8_t *buf, size_t len, struct proto_hdr *h);
void proto_req_encode(const struct proto_req *r, uint8_t out[PROTO_REQ_LEN]);
int proto_req_decode(const uint8_t *buf, size_t len, struct proto_req *r);
void proto_reply_encode(const struct proto_reply *r, uint8_t out[PROTO_REPLY_LEN]);
int proto_reply_decode(const uint8_t *buf, size_t len, struct proto_reply *r);
const char *proto_err_name(int err);

#endif
