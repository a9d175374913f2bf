/* fuzz_shm_ctl.c: libFuzzer target for the shm provider's control-message dispatch
 * (src/dev/shm/shm_dev.c dispatch_locked and what it calls: HELLO, QP_REQ with parking and
 * matching, QP_ACK, QP_RTU, QP_GONE, MR_ADD mapping a peer's memfd, MR_ACK, MR_DEL), with
 * the fds that come with each message (docs/parts/dev-shm.md "trust boundary": the peer
 * process is hostile). fuzz_shm_msg covers the decoder alone.
 *
 * The victim is a real shm device in this process, its device thread reading its rendezvous
 * socket; it has one QP in RTR waiting for a peer QP 0x10001 on the fake GID below. Per
 * input the fuzzer connects to that socket as a peer device and sends records:
 *   byte 0       type (1..8; 0: the record's bytes go out raw, not encoded)
 *   byte 1       flags: bit 0 HELLO src/dst and QP ids made valid (src the fake GID, dst the
 *                victim; QP messages aimed at the victim's QP), bits 4-7 fds (see fd_make)
 *   bytes 2..49  the message fields (shm_msg union, raw)
 * then closes the socket. Checks (abort): the device takes the peer down within 5 s (no hang),
 * and afterwards this process holds as many fds as before (nothing the peer sent is kept
 * past its end; pipes not counted, see count_fds); the device still serves (its QP is
 * re-made per input). ASan/UBSan catch
 * stray accesses. Seed corpus: tests/fuzz/corpus/fuzz_shm_ctl/. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "dev/shm/shm.h"
#include "dev/shm/shm_int.h"
#include "dev/shm/shm_msg.h"
#include "util/clock.h"
#include "util/log.h"
#include "lib/shmdir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REC 50
static struct dev_device *dev;
static struct dev_pd *pd;
static struct dev_cq *cq;
static struct dev_qp *qp;
static struct dev_gid my_gid, fake_gid;
/* This process's fds, without pipes: libFuzzer's sanitizer symbolizer (spawned the first
 * time it prints a new function) keeps two pipes open from then on. The peer's fds of kind 4
 * are timerfds, so none of them is a pipe. Read with getdents64 into a static buffer and
 * fstat (no opendir allocation, no readlink path walk: this runs once or more per input). */
static int count_fds(void)
{
	static char buf[16384];
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int n = 0;
	if (dfd < 0)
		abort();
	for (;;) {
		long k = syscall(SYS_getdents64, dfd, buf, sizeof buf);
		if (k < 0)
			abort();
		if (k == 0)
			break;
		for (long off = 0; off < k;) {
			struct linux_dirent64 {
				uint64_t ino;
				int64_t off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *e = (struct linux_dirent64 *)(void *)(buf + off);
			off += e->reclen;
			if (e->name[0] < '0' || e->name[0] > '9')
				continue;
			int fd = atoi(e->name);
			struct stat st;
			if (fd == dfd || fstat(fd, &st) < 0 || S_ISFIFO(st.st_mode))
				continue;
			n++;
		}
	}
	close(dfd);
	return n;
}

static void list_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char p[300], t[300];
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(p, t, sizeof t - 1);
		t[n > 0 ? n : 0] = 0;
		fprintf(stderr, "  fd %s -> %s\n", e->d_name, t);
	}
	if (d)
		closedir(d);
}

static void qp_make(void)
{
	struct dev_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 16,
						.max_send_sge = 2, .max_recv_sge = 2,
						.max_inline_data = 64 } };
	if (dev_create_qp(pd, &ia, &qp))
		abort();
	struct dev_qp_attr a = { .qp_state = DEV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = DEV_ACCESS_LOCAL_WRITE };
	if (dev_modify_qp(qp, &a, DEV_QP_MASK_INIT | DEV_QP_PKEY_INDEX))
		abort();
	struct dev_qp_attr r = { .qp_state = DEV_QPS_RTR, .path_mtu = DEV_MTU_1024,
				 .dest_qp_num = 0x10001, .rq_psn = 1, .min_rnr_timer = 5,
				 .max_dest_rd_atomic = 1 };
	r.ah_attr.dgid = fake_gid;
	r.ah_attr.hop_limit = 1;
	r.ah_attr.port_num = 1;
	if (dev_modify_qp(qp, &r, DEV_QP_MASK_RTR))
		abort();
}

static void setup(void)
{
	smcr_log_set_level(SMCR_LOG_ERROR + 1);
	/* the devices live until the process ends: their rendezvous files go then */
	if (shmdir_make("smcr-fuzz-shmctl") || dev_shm_register())
		abort();
	struct dev_gid_entry ge;
	if (dev_open("shm", &dev) || dev_alloc_pd(dev, &pd) || dev_create_cq(dev, 64, NULL, &cq) ||
	    dev_query_gid(dev, 1, 0, &ge))
		abort();
	my_gid = ge.gid;
	memset(&fake_gid, 0, sizeof(fake_gid));
	fake_gid.raw[0] = 0xfd;
	fake_gid.raw[15] = 0x42;
	qp_make();
}

/* One fd of kind k (bits of the flags byte); -1 for none. */
static int fd_make(unsigned k, unsigned sz)
{
	static const unsigned sizes[4] = { 0, 4096, 1u << 18, 1u << 20 };
	int fd = -1;
	switch (k & 7) {
	case 0:
	case 1: {
		fd = memfd_create("fz", MFD_ALLOW_SEALING);
		if (fd < 0)
			abort();
		if (ftruncate(fd, sizes[sz & 3]) < 0)
			abort();
		if ((k & 7) == 0)
			(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
		break;
	}
	case 2:
		fd = eventfd(0, EFD_NONBLOCK);
		break;
	case 3:
		fd = open("/dev/null", O_RDWR);
		break;
	case 4:
		fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK); /* an anon inode, not eventfd */
		break;
	default:
		break;
	}
	return fd;
}

static bool peer_gone(struct shm_dev *sd)
{
	pthread_mutex_lock(&sd->lock);
	bool none = sd->peers == NULL && sd->parked == NULL;
	pthread_mutex_unlock(&sd->lock);
	return none;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SMCR_NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* A wait for the device thread: 20 us, well under one input's time. */
static void short_wait(void)
{
	struct timespec ts = { 0, 20000 };
	nanosleep(&ts, NULL);
}

static void send_raw(int s, const void *buf, size_t len, const int *fds, int nfds)
{
	struct iovec iov = { (void *)(uintptr_t)buf, len };
	union {
		char b[CMSG_SPACE(sizeof(int) * SHM_MSG_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (nfds > 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	(void)sendmsg(s, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dev)
		setup();
	struct shm_dev *sd = shm_dev_of(dev);
	static int before = -1;
	if (before < 0)
	{
		before = count_fds(); /* the device's own fds, before any peer */
		if (getenv("FUZZ_SHM_CTL_FDS"))
			list_fds();
	}
	if (getenv("FUZZ_SHM_CTL_FDS") && count_fds() != before)
		fprintf(stderr, "fds changed between inputs\n");
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		abort();
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sd->sock_path);
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		abort();
	size_t nrec = size / REC;
	if (nrec > 16)
		nrec = 16;
	for (size_t k = 0; k < nrec; k++) {
		const uint8_t *r = data + REC * k;
		unsigned type = r[0] % 9, flags = r[1];
		int fds[SHM_MSG_MAX_FDS];
		int nfds = 0;
		unsigned want = type ? (unsigned)shm_msg_nfds((enum shm_msg_type)type) : 0;
		if (flags & 0x80)
			want = (flags >> 5) & 3; /* a wrong count on purpose */
		for (unsigned i = 0; i < want && i < SHM_MSG_MAX_FDS; i++) {
			int fd = fd_make((flags >> 4) + i * 3, r[2 + i]);
			if (fd >= 0)
				fds[nfds++] = fd;
		}
		uint8_t buf[SHM_MSG_MAX];
		int len = -1;
		if (type) {
			struct shm_msg m;
			memset(&m, 0, sizeof(m));
			m.type = (enum shm_msg_type)type;
			memcpy(&m.u, r + 2, sizeof(m.u) < REC - 2 ? sizeof(m.u) : REC - 2);
			if (flags & 1) {
				switch (m.type) {
				case SHM_MSG_HELLO:
					m.u.hello.src = fake_gid;
					m.u.hello.dst = my_gid;
					m.u.hello.tab_entries %= 65537;
					break;
				case SHM_MSG_QP_REQ:
				case SHM_MSG_QP_ACK:
				case SHM_MSG_QP_RTU:
					m.u.qp.src_qpn = 0x10001;
					m.u.qp.dst_qpn = qp->qp_num;
					break;
				case SHM_MSG_QP_GONE:
					m.u.gone.src_qpn = 0x10001;
					m.u.gone.dst_qpn = qp->qp_num;
					break;
				case SHM_MSG_MR_ADD:
					m.u.mr_add.length %= (1u << 20) + 1;
					m.u.mr_add.mem_off %= (1u << 20) + 1;
					break;
				case SHM_MSG_MR_ACK:
				case SHM_MSG_MR_DEL:
					break;
				}
			}
			len = shm_msg_encode(&m, buf, sizeof(buf));
		}
		if (len < 0) {
			len = REC - 2 < SHM_MSG_MAX ? REC - 2 : SHM_MSG_MAX;
			memcpy(buf, r + 2, (size_t)len);
		}
		send_raw(s, buf, (size_t)len, fds, nfds);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
	}
	/* Hang up our sending side and read until the device closes its end: then it has read
	 * everything we sent (a connection still in its accept queue, or unread messages, could
	 * otherwise be handled after the check below) and taken the peer down. */
	shutdown(s, SHUT_WR);
	for (int i = 0;; i++) {
		struct pollfd pf = { .fd = s, .events = POLLIN };
		if (poll(&pf, 1, 10) == 1) {
			uint8_t junk[SHM_MSG_MAX];
			struct msghdr mh = { 0 };
			struct iovec iov = { junk, sizeof(junk) };
			union {
				char b[CMSG_SPACE(sizeof(int) * 4)];
				struct cmsghdr align;
			} u;
			mh.msg_iov = &iov;
			mh.msg_iovlen = 1;
			mh.msg_control = u.b;
			mh.msg_controllen = sizeof(u.b);
			ssize_t n = recvmsg(s, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n >= 0 && c;
			     c = CMSG_NXTHDR(&mh, c)) {
				int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
				for (int j = 0; j < k; j++) {
					int fd;
					memcpy(&fd, CMSG_DATA(c) + j * sizeof(int), sizeof(int));
					close(fd); /* the device's answers (its HELLO's fds) */
				}
			}
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				break;
		}
		if (i > 500) {
			fprintf(stderr, "shm device did not end the connection in 5 s\n");
			abort();
		}
	}
	close(s);
	/* The device notices the hang-up and drops everything of that peer (usually by now:
	 * polled in short steps, not whole milliseconds, as most inputs need no wait at all). */
	uint64_t until = mono_ns() + 5 * SMCR_NS_PER_S;
	while (!peer_gone(sd)) {
		if (mono_ns() > until) {
			fprintf(stderr, "shm device kept the peer for 5 s\n");
			abort();
		}
		short_wait();
	}
	struct dev_wc wc[16];
	struct dev_async_event ev;
	while (dev_poll_cq(cq, 16, wc) > 0)
		;
	while (dev_get_async_event(dev, &ev) == 0)
		;
	if (dev_destroy_qp(qp))
		abort();
	qp_make();
	/* The peer's last fds (its kick eventfd) go with its last reference, which the device
	 * thread may drop just after it left the list: wait for that, bounded. */
	int after = count_fds();
	until = mono_ns() + 2 * SMCR_NS_PER_S;
	while (after != before && mono_ns() < until) {
		short_wait();
		after = count_fds();
	}
	if (after != before) {
		fprintf(stderr, "fds: %d before, %d after\n", before, after);
		for (size_t k = 0; k < nrec; k++)
			fprintf(stderr, "  record %zu: type %u flags %#x\n", k, data[REC * k] % 9,
				data[REC * k + 1]);
		list_fds();
		abort();
	}
	return 0;
}
