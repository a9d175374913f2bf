/* v2cap.h: the frames of the real Linux 6.12 SMC-R v2 capture
 * (tests/vectors/linux-6.12-smcr-v2-rxe.pcap, docs/parts/wire-v2.md 8) for the golden
 * tests: the TCP payload or RoCE payload (after the BTH, before the ICRC) of every frame,
 * by frame number, read with libpcap and smcr-decode's frame walker. */
#ifndef SMCR_TEST_V2CAP_H
#define SMCR_TEST_V2CAP_H

#include <stddef.h>
#include <stdint.h>

#define V2CAP_MAX_FRAMES 256
#define V2CAP_MAX_PAYLOAD 2048

enum v2cap_kind { V2CAP_OTHER, V2CAP_TCP, V2CAP_ROCE };

struct v2cap_frame {
	enum v2cap_kind kind;
	uint8_t opcode;			/* RoCE BTH opcode */
	size_t len;
	uint8_t data[V2CAP_MAX_PAYLOAD];
};

struct v2cap {
	size_t count;			/* frames; frame n (1-based) is f[n - 1] */
	struct v2cap_frame f[V2CAP_MAX_FRAMES];
};

/* Path of the capture in the source tree (SMCR_SOURCE_DIR), in a static buffer. */
const char *v2cap_path(void);
/* Loads the capture into c (heap: the struct is large). 0, or -1 with a message on stderr. */
int v2cap_load(struct v2cap *c);
/* The same for another capture of tests/vectors/, by file name (e.g. the smcr-to-Linux
 * one, linux-6.12-smcr-interop.pcap). */
int v2cap_load_file(struct v2cap *c, const char *name);

/* The golden tests' checks (cmocka asserts). Frame n (1-based) of c, which must be there
 * and be of kind k. */
const struct v2cap_frame *v2cap_frame(const struct v2cap *c, size_t n, enum v2cap_kind k);
/* h (a CLC hostname field, CLC_HOSTNAME_LEN bytes) is s padded with blanks. */
void v2cap_hostname_is(const uint8_t *h, const char *s);
/* g = ::ffff:10.0.0.n, the RoCE v2 GID of the captures' guest n. */
struct wire_gid;
void v2cap_gid_v4(uint8_t n, struct wire_gid *g);

#endif
