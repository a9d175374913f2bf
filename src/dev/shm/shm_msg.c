/* shm_msg.c: codec and socket I/O of the shm control messages (format in shm_msg.h). */
#define _GNU_SOURCE
#include "dev/shm/shm_msg.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/cursor.h"
#include "util/hfd.h"

int shm_msg_nfds(enum shm_msg_type t)
{
	switch (t) {
	case SHM_MSG_HELLO:
	case SHM_MSG_QP_REQ:
	case SHM_MSG_QP_ACK:
		return 2;
	case SHM_MSG_MR_ADD:
		return 1;
	case SHM_MSG_QP_RTU:
	case SHM_MSG_QP_GONE:
	case SHM_MSG_MR_ACK:
	case SHM_MSG_MR_DEL:
		return 0;
	}
	return 0;
}

/* Body length per type. */
static int body_len(enum shm_msg_type t)
{
	switch (t) {
	case SHM_MSG_HELLO: return 2 * DEV_GID_LEN + 4;
	case SHM_MSG_QP_REQ:
	case SHM_MSG_QP_ACK:
	case SHM_MSG_QP_RTU: return 6 * 4 + 2;
	case SHM_MSG_QP_GONE: return 12;
	case SHM_MSG_MR_ADD: return 4 * 4 + 3 * 8;
	case SHM_MSG_MR_ACK:
	case SHM_MSG_MR_DEL: return 4;
	}
	return -1;
}

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

int shm_msg_encode(const struct shm_msg *m, uint8_t *buf, size_t cap)
{
	int blen = body_len(m->type);
	if (blen < 0)
		return -SMCR_E_SHM_MSG_BAD_TYPE;
	struct wcur c = wcur_make(buf, cap);
	TRY(wcur_put_u32(&c, SHM_MSG_MAGIC));
	TRY(wcur_put_u8(&c, SHM_MSG_VERSION));
	TRY(wcur_put_u8(&c, (uint8_t)m->type));
	TRY(wcur_put_u16(&c, (uint16_t)blen));
	switch (m->type) {
	case SHM_MSG_HELLO:
		TRY(wcur_put_bytes(&c, m->u.hello.src.raw, DEV_GID_LEN));
		TRY(wcur_put_bytes(&c, m->u.hello.dst.raw, DEV_GID_LEN));
		TRY(wcur_put_u32(&c, m->u.hello.tab_entries));
		break;
	case SHM_MSG_QP_REQ:
	case SHM_MSG_QP_ACK:
	case SHM_MSG_QP_RTU:
		TRY(wcur_put_u32(&c, m->u.qp.src_qpn));
		TRY(wcur_put_u32(&c, m->u.qp.dst_qpn));
		TRY(wcur_put_u32(&c, m->u.qp.pd_id));
		TRY(wcur_put_u32(&c, m->u.qp.ncells));
		TRY(wcur_put_u32(&c, m->u.qp.caps_size));
		TRY(wcur_put_u32(&c, m->u.qp.max_recv_wr));
		TRY(wcur_put_u8(&c, m->u.qp.min_rnr_timer));
		TRY(wcur_put_u8(&c, m->u.qp.mtu));
		break;
	case SHM_MSG_QP_GONE:
		TRY(wcur_put_u32(&c, m->u.gone.src_qpn));
		TRY(wcur_put_u32(&c, m->u.gone.dst_qpn));
		TRY(wcur_put_u32(&c, m->u.gone.reason));
		break;
	case SHM_MSG_MR_ADD:
		TRY(wcur_put_u32(&c, m->u.mr_add.seq));
		TRY(wcur_put_u32(&c, m->u.mr_add.rkey));
		TRY(wcur_put_u32(&c, m->u.mr_add.pd_id));
		TRY(wcur_put_u32(&c, m->u.mr_add.access));
		TRY(wcur_put_u64(&c, m->u.mr_add.iova));
		TRY(wcur_put_u64(&c, m->u.mr_add.length));
		TRY(wcur_put_u64(&c, m->u.mr_add.mem_off));
		break;
	case SHM_MSG_MR_ACK:
		TRY(wcur_put_u32(&c, m->u.mr_ack.seq));
		break;
	case SHM_MSG_MR_DEL:
		TRY(wcur_put_u32(&c, m->u.mr_del.rkey));
		break;
	}
	return (int)c.off;
}

int shm_msg_decode(const uint8_t *buf, size_t len, int nfds, struct shm_msg *m)
{
	struct rcur c = rcur_make(buf, len);
	uint32_t magic;
	uint8_t ver, type;
	uint16_t blen;

	memset(m, 0, sizeof *m);
	TRY(rcur_get_u32(&c, &magic));
	if (magic != SHM_MSG_MAGIC)
		return -SMCR_E_SHM_MSG_BAD_MAGIC;
	TRY(rcur_get_u8(&c, &ver));
	if (ver != SHM_MSG_VERSION)
		return -SMCR_E_SHM_MSG_BAD_VERSION;
	TRY(rcur_get_u8(&c, &type));
	int want = body_len((enum shm_msg_type)type);
	if (want < 0)
		return -SMCR_E_SHM_MSG_BAD_TYPE;
	TRY(rcur_get_u16(&c, &blen));
	if (blen != (unsigned)want || rcur_left(&c) != blen)
		return -SMCR_E_SHM_MSG_BAD_LEN;
	m->type = (enum shm_msg_type)type;
	if (nfds != shm_msg_nfds(m->type))
		return -SMCR_E_SHM_MSG_BAD_FDS;
	switch (m->type) {
	case SHM_MSG_HELLO:
		TRY(rcur_get_bytes(&c, m->u.hello.src.raw, DEV_GID_LEN));
		TRY(rcur_get_bytes(&c, m->u.hello.dst.raw, DEV_GID_LEN));
		TRY(rcur_get_u32(&c, &m->u.hello.tab_entries));
		if (m->u.hello.tab_entries == 0 || m->u.hello.tab_entries > (1u << 16))
			return -SMCR_E_SHM_MSG_BAD_FIELD;
		break;
	case SHM_MSG_QP_REQ:
	case SHM_MSG_QP_ACK:
	case SHM_MSG_QP_RTU:
		TRY(rcur_get_u32(&c, &m->u.qp.src_qpn));
		TRY(rcur_get_u32(&c, &m->u.qp.dst_qpn));
		TRY(rcur_get_u32(&c, &m->u.qp.pd_id));
		TRY(rcur_get_u32(&c, &m->u.qp.ncells));
		TRY(rcur_get_u32(&c, &m->u.qp.caps_size));
		TRY(rcur_get_u32(&c, &m->u.qp.max_recv_wr));
		TRY(rcur_get_u8(&c, &m->u.qp.min_rnr_timer));
		TRY(rcur_get_u8(&c, &m->u.qp.mtu));
		if (m->u.qp.src_qpn == 0 || m->u.qp.src_qpn > 0xffffffu || m->u.qp.dst_qpn == 0 ||
		    m->u.qp.dst_qpn > 0xffffffu)
			return -SMCR_E_SHM_MSG_BAD_FIELD;
		if (m->type != SHM_MSG_QP_RTU &&
		    (m->u.qp.max_recv_wr > SHM_CAPS_MAX_WR || m->u.qp.min_rnr_timer > 31))
			return -SMCR_E_SHM_MSG_BAD_FIELD;
		break;
	case SHM_MSG_QP_GONE:
		TRY(rcur_get_u32(&c, &m->u.gone.src_qpn));
		TRY(rcur_get_u32(&c, &m->u.gone.dst_qpn));
		TRY(rcur_get_u32(&c, &m->u.gone.reason));
		if (m->u.gone.reason < SHM_GONE_DISCONNECT || m->u.gone.reason > SHM_GONE_PORT_DOWN)
			return -SMCR_E_SHM_MSG_BAD_FIELD;
		break;
	case SHM_MSG_MR_ADD:
		TRY(rcur_get_u32(&c, &m->u.mr_add.seq));
		TRY(rcur_get_u32(&c, &m->u.mr_add.rkey));
		TRY(rcur_get_u32(&c, &m->u.mr_add.pd_id));
		TRY(rcur_get_u32(&c, &m->u.mr_add.access));
		TRY(rcur_get_u64(&c, &m->u.mr_add.iova));
		TRY(rcur_get_u64(&c, &m->u.mr_add.length));
		TRY(rcur_get_u64(&c, &m->u.mr_add.mem_off));
		/* Lengths/offsets are bounded so every later sum fits in 64 bits; the memfd's
		 * real size is checked when it is mapped. */
		if (m->u.mr_add.rkey == 0 || m->u.mr_add.length == 0 ||
		    m->u.mr_add.length > ((uint64_t)1 << 40) ||
		    m->u.mr_add.mem_off > ((uint64_t)1 << 40) ||
		    m->u.mr_add.iova > UINT64_MAX - m->u.mr_add.length)
			return -SMCR_E_SHM_MSG_BAD_FIELD;
		break;
	case SHM_MSG_MR_ACK:
		TRY(rcur_get_u32(&c, &m->u.mr_ack.seq));
		break;
	case SHM_MSG_MR_DEL:
		TRY(rcur_get_u32(&c, &m->u.mr_del.rkey));
		break;
	}
	return 0;
}

int shm_msg_send(int sock, const struct shm_msg *m, const int *fds, int nfds)
{
	uint8_t buf[SHM_MSG_MAX];
	int len = shm_msg_encode(m, buf, sizeof buf);
	if (len < 0)
		return len;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * SHM_MSG_MAX_FDS)];
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = (size_t)len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	memset(&ctl, 0, sizeof ctl);
	if (nfds > 0) {
		mh.msg_control = ctl.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n == len)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return -SMCR_E_SHM_PEER_GONE;	/* EPIPE, timeout (SO_SNDTIMEO), ... */
	}
}

int shm_msg_recv(int sock, struct shm_msg *m, int fds[SHM_MSG_MAX_FDS], int *nfds)
{
	uint8_t buf[SHM_MSG_MAX + 1];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * (SHM_MSG_MAX_FDS + 2))];
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
			     .msg_controllen = sizeof ctl.b };
	ssize_t n;

	*nfds = 0;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -SMCR_E_AGAIN
							       : -SMCR_E_SHM_PEER_GONE;
	if (n == 0)
		return -SMCR_E_SHM_PEER_GONE;
	/* Collect every fd that came, even when there are too many, so none leaks. */
	int got[SHM_MSG_MAX_FDS + 2];
	int ngot = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k && ngot < SHM_MSG_MAX_FDS + 2; i++)
			memcpy(&got[ngot++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
	}
	int rc = (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) ? -SMCR_E_SHM_MSG_BAD_LEN
			: shm_msg_decode(buf, (size_t)n, ngot, m);
	if (rc) {
		for (int i = 0; i < ngot; i++)
			close(got[i]);
		return rc;
	}
	for (int i = 0; i < ngot; i++)
		fds[i] = hfd_keep(got[i]); /* a peer's fd is ours: hidden from the program */
	*nfds = ngot;
	return 0;
}
