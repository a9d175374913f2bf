/* shm_dev.c: the same-host shared-memory provider's device: identity (GID from the host's
 * boot id and a random instance id), the rendezvous Unix socket, the device thread (accepts
 * peers, runs the control protocol of shm_msg.h, detects peer death, runs timers), async
 * events, ports, and the provider registration. Design: docs/parts/dev-shm.md. */
#define _GNU_SOURCE
#include "dev/shm/shm_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/hfd.h"

/* Devices open in this process (open_by_gid), newest first. shm_devs_lock (leaf)
 * protects the list and shm_dev_count. Reset in a forked child (devices do not survive
 * fork, dev.h). */
static pthread_mutex_t shm_devs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shm_dev *shm_devs;
static unsigned shm_dev_count;

/* fork() without exec: the child must not keep the parent's connections alive (a peer
 * detects the parent's death by its sockets closing) nor see its shared memory. prepare
 * takes every device's lock so the structures are consistent in the child; the child closes
 * its copies of every fd the devices own and forgets them. The inherited device objects are
 * inert in the child: using or destroying them there is not allowed (dev.h, as verbs). */
static void shm_atfork_prepare(void)
{
	pthread_mutex_lock(&shm_devs_lock);
	for (struct shm_dev *sd = shm_devs; sd; sd = sd->next)
		pthread_mutex_lock(&sd->lock);
}
static void shm_atfork_parent(void)
{
	for (struct shm_dev *sd = shm_devs; sd; sd = sd->next)
		pthread_mutex_unlock(&sd->lock);
	pthread_mutex_unlock(&shm_devs_lock);
}
static void shm_atfork_child(void)
{
	for (struct shm_dev *sd = shm_devs; sd; sd = sd->next) {
		int fds[] = { sd->listen_fd, sd->epfd, sd->kick_fd, sd->async_efd, sd->rkey_tab_fd,
			      sd->lock_fd };
		for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		for (struct shm_peer *p = sd->peers; p; p = p->next) {
			if (p->fd >= 0)
				close(p->fd);
			int k = atomic_load_explicit(&p->kick_fd, memory_order_relaxed);
			if (k >= 0)
				close(k);
		}
		for (uint32_t i = 0; i < sd->qp_hi; i++)
			if (sd->qps[i] && sd->qps[i]->peer_cq_fd >= 0)
				close(sd->qps[i]->peer_cq_fd);
		/* taken by this thread in prepare, as shm_devs_lock below: unlocked, so the
		 * child holds none of them (the device itself stays inert) */
		pthread_mutex_unlock(&sd->lock);
	}
	shm_devs = NULL;
	pthread_mutex_unlock(&shm_devs_lock);
}
/* At load (see dev_mem.c): registered before any device or thread exists. */
__attribute__((constructor)) static void shm_atfork_init(void)
{
	pthread_atfork(shm_atfork_prepare, shm_atfork_parent, shm_atfork_child);
}

/* ---- small helpers ------------------------------------------------------------------------ */

void shm_dev_kick(struct shm_dev *sd)
{
	shm_efd_signal(sd->kick_fd);
}

int shm_check_eventfd(int fd)
{
	char path[64], link[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof link - 1);
	if (n < 0)
		return -SMCR_E_SHM_BAD_FD;
	link[n] = 0;
	if (strcmp(link, "anon_inode:[eventfd]") != 0)
		return -SMCR_E_SHM_BAD_FD;
	/* Our writes must never block, whatever the peer did to the counter. */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -SMCR_E_SHM_BAD_FD;
	return 0;
}

/* A memfd a peer passed: regular, sealed against shrinking, at least min_size bytes. */
static int check_memfd(int fd, uint64_t min_size)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || seals < 0 || !(seals & F_SEAL_SHRINK) ||
	    (uint64_t)st.st_size < min_size)
		return -SMCR_E_SHM_BAD_FD;
	return 0;
}

static void gid_hex(const struct dev_gid *g, char out[33])
{
	static const char hx[] = "0123456789abcdef";
	for (int i = 0; i < DEV_GID_LEN; i++) {
		out[2 * i] = hx[g->raw[i] >> 4];
		out[2 * i + 1] = hx[g->raw[i] & 15];
	}
	out[32] = 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Host part of a shm GID: fd 53 + 6 bytes of the boot id (docs: GIDs). */
#define SHM_GID_HOST_LEN 8
static int host_prefix(uint8_t out[SHM_GID_HOST_LEN])
{
	char buf[64];
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -SMCR_E_SHM_BOOT_ID;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -SMCR_E_SHM_BOOT_ID;
	buf[n] = 0;
	out[0] = 0xfd;
	out[1] = 0x53;	/* 'S': a shm GID */
	int k = 0, hi = -1;
	for (ssize_t i = 0; i < n && k < 6; i++) {
		int v = hexval(buf[i]);
		if (v < 0)
			continue;
		if (hi < 0) {
			hi = v;
		} else {
			out[2 + k++] = (uint8_t)(hi << 4 | v);
			hi = -1;
		}
	}
	return k == 6 ? 0 : -SMCR_E_SHM_BOOT_ID;
}

static int is_local_gid(const struct shm_dev *sd, const struct dev_gid *g)
{
	return memcmp(sd->gid.raw, g->raw, SHM_GID_HOST_LEN) == 0;
}

/* Rendezvous directory: "dir=" argument, else $SMCR_SHM_DIR, else /run/smcr/shm, else
 * /tmp/smcr-shm-<uid>. Peers must agree on it (docs: finding peers). */
static int pick_dir(const char *args, char *dir, size_t cap)
{
	const char *d = NULL;
	if (args && strncmp(args, "dir=", 4) == 0 && args[4])
		d = args + 4;
	else if (args && args[0])
		return -SMCR_E_INVAL;
	if (!d)
		d = getenv("SMCR_SHM_DIR");
	if (d && d[0]) {
		if (strlen(d) >= cap)
			return -SMCR_E_SHM_PATH_TOO_LONG;
		if (mkdir(d, 0700) < 0 && errno != EEXIST)
			return -SMCR_E_SHM_DIR;
		snprintf(dir, cap, "%s", d);
		return 0;
	}
	if ((mkdir("/run/smcr", 0755) == 0 || errno == EEXIST) &&
	    (mkdir("/run/smcr/shm", 01777) == 0 || errno == EEXIST) &&
	    access("/run/smcr/shm", W_OK | X_OK) == 0) {
		snprintf(dir, cap, "/run/smcr/shm");
		return 0;
	}
	snprintf(dir, cap, "/tmp/smcr-shm-%u", (unsigned)getuid());
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -SMCR_E_SHM_DIR;
	return 0;
}

static int dir_path(const char *dir, const struct dev_gid *g, const char *suffix, char *out,
		    size_t cap)
{
	char hex[33];
	gid_hex(g, hex);
	int n = snprintf(out, cap, "%s/%s%s", dir, hex, suffix);
	return n < 0 || (size_t)n >= cap ? -SMCR_E_SHM_PATH_TOO_LONG : 0;
}

static int sock_path(const char *dir, const struct dev_gid *g, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	return dir_path(dir, g, ".sock", sa->sun_path, sizeof sa->sun_path);
}

/* A lock file without its socket is a device that died between the two (or one being
 * opened right now, which holds the lock): stale once this old. */
#define SHM_LOCK_ORPHAN_S 60

/* Removes the files of one device of this host if it is gone. A live device holds an
 * exclusive flock on its lock file from before bind() until after unlink(): if the lock is
 * held, it is alive and is left alone: no connection reaches it (connecting to every socket
 * made each live device accept, see the hang-up and log "peer connection down" once per
 * device opened anywhere on the host). If we get the lock, the owner died or is still
 * between creating the file and locking it (it then waits in flock() for us and has not
 * bound yet): the socket decides, as before: ECONNREFUSED means nobody listens on it. A
 * socket without a lock file (a device of an older build) is probed the same way. */
static void clean_one(const char *dir, const struct dev_gid *g)
{
	struct sockaddr_un sa;
	char lock[sizeof sa.sun_path];
	if (sock_path(dir, g, &sa) || dir_path(dir, g, ".lock", lock, sizeof lock))
		return;
	int lfd = open(lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (lfd < 0 && errno != ENOENT)
		return;	/* another user's device (its socket is not ours to probe either) */
	if (lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) < 0) {
		close(lfd);
		return;	/* held: alive */
	}
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s >= 0) {
		int dead = 0;
		if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
			if (errno == ECONNREFUSED) {
				dead = 1;
			} else if (errno == ENOENT && lfd >= 0) {
				struct stat st;
				struct timespec now;
				dead = fstat(lfd, &st) == 0 &&
				       clock_gettime(CLOCK_REALTIME, &now) == 0 &&
				       now.tv_sec - st.st_mtim.tv_sec > SHM_LOCK_ORPHAN_S;
			}
		}
		close(s);
		if (dead) {
			unlink(sa.sun_path);
			if (lfd >= 0)
				unlink(lock);
		}
	}
	if (lfd >= 0)
		close(lfd);	/* releases our flock */
}

/* Removes the files of this host's devices that are gone (their process died without
 * unlinking): nobody accepts on them any more. */
static void clean_stale(const char *dir, const uint8_t host[SHM_GID_HOST_LEN])
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	int budget = 4096;
	while ((e = readdir(d)) && budget-- > 0) {
		if (strlen(e->d_name) != 32 + 5 ||
		    (strcmp(e->d_name + 32, ".sock") != 0 && strcmp(e->d_name + 32, ".lock") != 0))
			continue;
		struct dev_gid g;
		int ok = 1;
		for (int i = 0; i < DEV_GID_LEN && ok; i++) {
			int a = hexval(e->d_name[2 * i]), b = hexval(e->d_name[2 * i + 1]);
			ok = a >= 0 && b >= 0;
			g.raw[i] = (uint8_t)(a << 4 | b);
		}
		if (!ok || memcmp(g.raw, host, SHM_GID_HOST_LEN) != 0)
			continue;
		clean_one(dir, &g);
	}
	closedir(d);
}

static void sock_tune(int fd)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = SHM_SNDTIMEO_MS * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	int sz = 4 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
}

/* ---- async events ------------------------------------------------------------------------ */

#define SHM_MAX_EVENTS 4096u

void shm_dev_event(struct shm_dev *sd, enum dev_event_type type, uint8_t port, struct shm_qp *qp)
{
	struct dev_async_event ev = { .type = type, .port_num = port };
	if (qp) {
		ev.qp_num = qp->qp.qp_num;
		ev.qp_context = qp->qp.qp_context;
	}
	pthread_mutex_lock(&sd->ev_lock);
	if (sd->ev_n == sd->ev_cap) {
		uint32_t nc = sd->ev_cap ? sd->ev_cap * 2 : 16;
		struct dev_async_event *q = nc <= SHM_MAX_EVENTS ? malloc(nc * sizeof *q) : NULL;
		if (!q) {
			/* Full: drop the oldest, keep the newest. */
			sd->ev_head = (sd->ev_head + 1) % sd->ev_cap;
			sd->ev_n--;
		} else {
			for (uint32_t i = 0; i < sd->ev_n; i++)
				q[i] = sd->evq[(sd->ev_head + i) % sd->ev_cap];
			free(sd->evq);
			sd->evq = q;
			sd->ev_cap = nc;
			sd->ev_head = 0;
		}
	}
	sd->evq[(sd->ev_head + sd->ev_n) % sd->ev_cap] = ev;
	sd->ev_n++;
	atomic_store_explicit(&sd->ev_maybe, true, memory_order_release);
	shm_efd_signal(sd->async_efd);
	pthread_mutex_unlock(&sd->ev_lock);
	LOG_DBG("shm", "%s: event %s qp %u", sd->dev.name, dev_event_type_str(type), ev.qp_num);
}

void shm_dev_drop_qp_events(struct shm_dev *sd, uint32_t qpn)
{
	pthread_mutex_lock(&sd->ev_lock);
	uint32_t k = 0;
	for (uint32_t i = 0; i < sd->ev_n; i++) {
		struct dev_async_event e = sd->evq[(sd->ev_head + i) % sd->ev_cap];
		int qp_ev = e.type == DEV_EVENT_QP_FATAL || e.type == DEV_EVENT_QP_REQ_ERR ||
			    e.type == DEV_EVENT_QP_ACCESS_ERR || e.type == DEV_EVENT_COMM_EST;
		if (qp_ev && e.qp_num == qpn)
			continue;
		sd->evq[(sd->ev_head + k++) % sd->ev_cap] = e;
	}
	sd->ev_n = k;
	pthread_mutex_unlock(&sd->ev_lock);
}

static int shm_get_async_event(struct dev_device *dev, struct dev_async_event *ev)
{
	struct shm_dev *sd = shm_dev_of(dev);
	int rc = 0;
	if (!atomic_load_explicit(&sd->ev_maybe, memory_order_acquire))
		return -SMCR_E_AGAIN;	/* nothing queued, eventfd not signalled: no syscall */
	pthread_mutex_lock(&sd->ev_lock);
	if (!sd->ev_n) {
		rc = -SMCR_E_AGAIN;
	} else {
		*ev = sd->evq[sd->ev_head];
		sd->ev_head = (sd->ev_head + 1) % sd->ev_cap;
		sd->ev_n--;
	}
	if (!sd->ev_n) {
		uint64_t v;
		ssize_t r = read(sd->async_efd, &v, sizeof v);	/* readable only while queued */
		(void)r;
		atomic_store_explicit(&sd->ev_maybe, false, memory_order_relaxed);
	}
	pthread_mutex_unlock(&sd->ev_lock);
	return rc;
}

/* ---- peers ------------------------------------------------------------------------------ */

void shm_peer_hold(struct shm_peer *p)
{
	atomic_fetch_add_explicit(&p->refcnt, 1, memory_order_relaxed);
}

static void peer_unmap_all(struct shm_peer *p)
{
	pthread_rwlock_wrlock(&p->rmr_lock);
	for (uint32_t i = 0; i < p->n_rmr; i++)
		munmap(p->rmrs[i].map, p->rmrs[i].map_len);
	p->n_rmr = 0;
	pthread_rwlock_unlock(&p->rmr_lock);
}

void shm_peer_put(struct shm_peer *p)
{
	/* acq_rel: the last putter sees every other holder's writes before freeing. */
	if (atomic_fetch_sub_explicit(&p->refcnt, 1, memory_order_acq_rel) != 1)
		return;
	peer_unmap_all(p);
	if (p->fd >= 0)
		close(p->fd);
	int kfd = atomic_load_explicit(&p->kick_fd, memory_order_relaxed);
	if (kfd >= 0)
		close(kfd);
	if (p->rkey_tab)
		munmap((void *)(uintptr_t)p->rkey_tab, p->rkey_tab_len);
	pthread_rwlock_destroy(&p->rmr_lock);
	pthread_mutex_destroy(&p->tx_lock);
	free(p->rmrs);
	free(p->exported_pds);
	free(p);
}

int shm_peer_send(struct shm_peer *p, const struct shm_msg *m, const int *fds, int nfds)
{
	int rc = -SMCR_E_SHM_PEER_GONE;
	pthread_mutex_lock(&p->tx_lock);
	if (p->fd >= 0)
		rc = shm_msg_send(p->fd, m, fds, nfds);
	pthread_mutex_unlock(&p->tx_lock);
	if (rc && !atomic_exchange_explicit(&p->broken, 1, memory_order_relaxed))
		shm_dev_kick(p->sd);	/* the device thread takes it down */
	return rc;
}

/* Sorted by rkey; binary search. Caller holds rmr_lock (shared or exclusive). */
static uint32_t rmr_lower(const struct shm_peer *p, uint32_t rkey)
{
	uint32_t lo = 0, hi = p->n_rmr;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (p->rmrs[mid].rkey < rkey)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct shm_rmr *shm_peer_rmr_find(struct shm_peer *p, uint32_t rkey)
{
	uint32_t i = rmr_lower(p, rkey);
	return i < p->n_rmr && p->rmrs[i].rkey == rkey ? &p->rmrs[i] : NULL;
}

static struct shm_peer *peer_new(struct shm_dev *sd, int fd, int initiator)
{
	struct shm_peer *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->sd = sd;
	p->fd = fd;
	p->initiator = initiator;
	p->state = SHM_PEER_HELLO_WAIT;
	atomic_init(&p->refcnt, 1);	/* the list's; put in peer_down_locked */
	atomic_init(&p->kick_fd, -1);
	atomic_init(&p->broken, 0);
	pthread_rwlock_init(&p->rmr_lock, NULL);
	pthread_mutex_init(&p->tx_lock, NULL);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = p };
	if (epoll_ctl(sd->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		pthread_rwlock_destroy(&p->rmr_lock);
		pthread_mutex_destroy(&p->tx_lock);
		free(p);
		return NULL;
	}
	p->next = sd->peers;
	sd->peers = p;
	return p;
}

static void park_drop(struct shm_parked *pk)
{
	close(pk->ring_fd);
	close(pk->cq_fd);
	shm_peer_put(pk->peer);	/* hold in park */
	free(pk);
}

/* Takes a peer connection down: every QP bound to it goes to ERR with retry exceeded
 * (dev.h rule 5), parked requests from it are dropped, its MRs unmapped. sd->lock held. */
static void peer_down_locked(struct shm_dev *sd, struct shm_peer *p)
{
	if (p->state == SHM_PEER_DOWN)
		return;
	p->state = SHM_PEER_DOWN;
	pthread_mutex_lock(&p->tx_lock);
	if (p->fd >= 0) {
		epoll_ctl(sd->epfd, EPOLL_CTL_DEL, p->fd, NULL);
		close(p->fd);
		p->fd = -1;
	}
	pthread_mutex_unlock(&p->tx_lock);
	for (uint32_t i = 0; i < sd->qp_hi; i++) {
		struct shm_qp *q = sd->qps[i];
		if (q && q->peer == p)
			shm_qp_peer_lost_locked(q, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL, 0, 0);
	}
	for (struct shm_parked **pp = &sd->parked; *pp;) {
		struct shm_parked *pk = *pp;
		if (pk->peer == p) {
			*pp = pk->next;
			sd->n_parked--;
			park_drop(pk);
		} else {
			pp = &pk->next;
		}
	}
	for (struct shm_peer **pp = &sd->peers; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	peer_unmap_all(p);
	pthread_cond_broadcast(&sd->ack_cond);
	LOG_DBG("shm", "%s: peer connection down", sd->dev.name);
	shm_peer_put(p);	/* the list's reference, from peer_new */
}

struct shm_peer *shm_dev_dial_locked(struct shm_dev *sd, const struct dev_gid *gid)
{
	for (struct shm_peer *p = sd->peers; p; p = p->next)
		if (p->initiator && p->state != SHM_PEER_DOWN &&
		    !atomic_load_explicit(&p->broken, memory_order_relaxed) &&
		    memcmp(p->gid.raw, gid->raw, DEV_GID_LEN) == 0)
			return p;
	/* Another host's GID never names a local socket (docs: GIDs). */
	if (!is_local_gid(sd, gid))
		return NULL;
	struct sockaddr_un sa;
	char dir[sizeof sa.sun_path];
	snprintf(dir, sizeof dir, "%s", sd->sock_path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		return NULL;
	*slash = 0;
	if (sock_path(dir, gid, &sa))
		return NULL;
	int fd = hfd_keep(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
	if (fd < 0)
		return NULL;
	sock_tune(fd);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		close(fd);
		return NULL;
	}
	struct shm_peer *p = peer_new(sd, fd, 1);
	if (!p) {
		close(fd);
		return NULL;
	}
	p->gid = *gid;
	struct shm_msg m = { .type = SHM_MSG_HELLO };
	m.u.hello.src = sd->gid;
	m.u.hello.dst = *gid;
	m.u.hello.tab_entries = SHM_RKEY_TAB_ENTRIES;
	int fds[2] = { sd->rkey_tab_fd, sd->kick_fd };
	if (shm_peer_send(p, &m, fds, 2)) {
		peer_down_locked(sd, p);
		return NULL;
	}
	return p;
}

static int on_hello_locked(struct shm_dev *sd, struct shm_peer *p, const struct shm_msg *m,
			   int *fds)
{
	if (p->state != SHM_PEER_HELLO_WAIT ||
	    memcmp(m->u.hello.dst.raw, sd->gid.raw, DEV_GID_LEN) != 0 ||
	    (p->initiator && memcmp(m->u.hello.src.raw, p->gid.raw, DEV_GID_LEN) != 0))
		return -SMCR_E_SHM_MSG_BAD_FIELD;
	size_t len = (size_t)m->u.hello.tab_entries * sizeof(uint32_t);
	if (check_memfd(fds[0], len) || shm_check_eventfd(fds[1]))
		return -SMCR_E_SHM_BAD_FD;
	void *tab = mmap(NULL, len, PROT_READ, MAP_SHARED, fds[0], 0);
	if (tab == MAP_FAILED)
		return -SMCR_E_SHM_BAD_FD;
	madvise(tab, len, MADV_DONTFORK);
	close(fds[0]);
	fds[0] = -1;
	p->rkey_tab = tab;
	p->rkey_tab_len = len;
	p->rkey_tab_entries = m->u.hello.tab_entries;
	/* release: rx paths load it with acquire (wake_producer_locked). */
	atomic_store_explicit(&p->kick_fd, fds[1], memory_order_release);
	fds[1] = -1;
	if (!p->initiator) {
		p->gid = m->u.hello.src;
		struct shm_msg r = { .type = SHM_MSG_HELLO };
		r.u.hello.src = sd->gid;
		r.u.hello.dst = p->gid;
		r.u.hello.tab_entries = SHM_RKEY_TAB_ENTRIES;
		int my[2] = { sd->rkey_tab_fd, sd->kick_fd };
		if (shm_peer_send(p, &r, my, 2))
			return -SMCR_E_SHM_PEER_GONE;
	}
	p->state = SHM_PEER_UP;
	return 0;
}

static int on_mr_add_locked(struct shm_peer *p, const struct shm_msg *m, int fd)
{
	const uint64_t off = m->u.mr_add.mem_off, len = m->u.mr_add.length;
	if (check_memfd(fd, off + len))
		return -SMCR_E_SHM_BAD_FD;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t moff = off & ~(uint64_t)(pg - 1);
	size_t mlen = (size_t)((off + len - moff + pg - 1) & ~(uint64_t)(pg - 1));
	void *map = mmap(NULL, mlen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)moff);
	if (map == MAP_FAILED)
		return -SMCR_E_SHM_BAD_FD;
	madvise(map, mlen, MADV_DONTFORK);
	struct shm_rmr r = { .rkey = m->u.mr_add.rkey, .pd_id = m->u.mr_add.pd_id,
			     .iova = m->u.mr_add.iova, .length = len,
			     .base = (uint8_t *)map + (off - moff), .map = map, .map_len = mlen };
	int rc = 0;
	pthread_rwlock_wrlock(&p->rmr_lock);
	uint32_t i = rmr_lower(p, r.rkey);
	if (i < p->n_rmr && p->rmrs[i].rkey == r.rkey) {
		munmap(p->rmrs[i].map, p->rmrs[i].map_len);
		p->rmrs[i] = r;
	} else if (p->n_rmr >= SHM_MAX_PEER_RMR) {
		rc = -SMCR_E_DEV_LIMIT;
	} else {
		if (p->n_rmr == p->cap_rmr) {
			uint32_t nc = p->cap_rmr ? p->cap_rmr * 2 : 16;
			struct shm_rmr *a = realloc(p->rmrs, nc * sizeof *a);
			if (!a)
				rc = -SMCR_E_NOMEM;
			else {
				p->rmrs = a;
				p->cap_rmr = nc;
			}
		}
		if (!rc) {
			memmove(&p->rmrs[i + 1], &p->rmrs[i], (p->n_rmr - i) * sizeof *p->rmrs);
			p->rmrs[i] = r;
			p->n_rmr++;
		}
	}
	pthread_rwlock_unlock(&p->rmr_lock);
	if (rc) {
		munmap(map, mlen);
		return rc;
	}
	struct shm_msg ack = { .type = SHM_MSG_MR_ACK };
	ack.u.mr_ack.seq = m->u.mr_add.seq;
	return shm_peer_send(p, &ack, NULL, 0);
}

static void on_mr_del_locked(struct shm_peer *p, uint32_t rkey)
{
	pthread_rwlock_wrlock(&p->rmr_lock);
	uint32_t i = rmr_lower(p, rkey);
	if (i < p->n_rmr && p->rmrs[i].rkey == rkey) {
		munmap(p->rmrs[i].map, p->rmrs[i].map_len);
		memmove(&p->rmrs[i], &p->rmrs[i + 1], (p->n_rmr - i - 1) * sizeof *p->rmrs);
		p->n_rmr--;
	}
	pthread_rwlock_unlock(&p->rmr_lock);
}

/* Handles one control message. Returns nonzero if the peer must be taken down. fds[] are
 * closed here unless consumed. sd->lock held. */
static int dispatch_locked(struct shm_dev *sd, struct shm_peer *p, const struct shm_msg *m,
			   int *fds, int nfds)
{
	int rc = 0;
	if (m->type != SHM_MSG_HELLO && p->state != SHM_PEER_UP) {
		rc = -SMCR_E_SHM_MSG_BAD_TYPE;
		goto out;
	}
	switch (m->type) {
	case SHM_MSG_HELLO:
		rc = on_hello_locked(sd, p, m, fds);
		break;
	case SHM_MSG_QP_REQ: {
		struct shm_qp *q = shm_qp_find_locked(sd, m->u.qp.dst_qpn);
		if (sd->port_up && shm_qp_on_req_locked(q, p, &m->u.qp, fds[0], fds[1])) {
			fds[0] = fds[1] = -1;
			break;
		}
		if (sd->n_parked >= SHM_MAX_PARKED) {
			rc = -SMCR_E_DEV_LIMIT;
			break;
		}
		/* Its QP is not in RTR yet (the peers move independently): keep it. */
		struct shm_parked *pk = calloc(1, sizeof *pk);
		if (!pk)
			break;
		shm_peer_hold(p);	/* put in park_drop */
		pk->peer = p;
		pk->req = m->u.qp;
		pk->ring_fd = fds[0];
		pk->cq_fd = fds[1];
		fds[0] = fds[1] = -1;
		pk->expires_ns = smcr_now_ns() + SHM_PARK_NS;
		pk->next = sd->parked;
		sd->parked = pk;
		sd->n_parked++;
		break;
	}
	case SHM_MSG_QP_ACK:
		shm_qp_on_ack_locked(shm_qp_find_locked(sd, m->u.qp.dst_qpn), p, &m->u.qp, fds[0],
				     fds[1]);
		fds[0] = fds[1] = -1;
		break;
	case SHM_MSG_QP_RTU: {
		struct shm_qp *q = shm_qp_find_locked(sd, m->u.qp.dst_qpn);
		if (q && q->peer == p && q->peer_qpn == m->u.qp.src_qpn)
			shm_qp_on_rtu_locked(q);
		break;
	}
	case SHM_MSG_QP_GONE: {
		struct shm_qp *q = shm_qp_find_locked(sd, m->u.gone.dst_qpn);
		if (q && q->peer == p && q->attr.dest_qp_num == m->u.gone.src_qpn) {
			if (m->u.gone.reason == SHM_GONE_ACCESS)
				shm_qp_peer_lost_locked(q, DEV_WC_WR_FLUSH_ERR,
							DEV_EVENT_QP_ACCESS_ERR, 0, 0);
			else
				shm_qp_peer_lost_locked(q, DEV_WC_RETRY_EXC_ERR,
							DEV_EVENT_QP_FATAL, 0, 0);
		}
		for (struct shm_parked **pp = &sd->parked; *pp;) {
			struct shm_parked *pk = *pp;
			if (pk->peer == p && pk->req.src_qpn == m->u.gone.src_qpn) {
				*pp = pk->next;
				sd->n_parked--;
				park_drop(pk);
			} else {
				pp = &pk->next;
			}
		}
		break;
	}
	case SHM_MSG_MR_ADD:
		rc = on_mr_add_locked(p, m, fds[0]);
		break;
	case SHM_MSG_MR_ACK:
		if ((int32_t)(m->u.mr_ack.seq - p->mr_acked) > 0)
			p->mr_acked = m->u.mr_ack.seq;
		pthread_cond_broadcast(&sd->ack_cond);
		break;
	case SHM_MSG_MR_DEL:
		on_mr_del_locked(p, m->u.mr_del.rkey);
		break;
	}
out:
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return rc;
}

static void peer_read_locked(struct shm_dev *sd, struct shm_peer *p)
{
	for (int budget = 256; budget > 0 && p->state != SHM_PEER_DOWN; budget--) {
		struct shm_msg m;
		int fds[SHM_MSG_MAX_FDS], nfds;
		int rc = shm_msg_recv(p->fd, &m, fds, &nfds);
		if (rc == -SMCR_E_AGAIN)
			return;
		if (rc == 0)
			rc = dispatch_locked(sd, p, &m, fds, nfds);
		if (rc) {
			if (rc != -SMCR_E_SHM_PEER_GONE)
				SMCR_LOG_RL(SMCR_LOG_WARN, "shm", "%s: dropping peer: %s",
					    sd->dev.name, smcr_err_msg(rc));
			peer_down_locked(sd, p);
			return;
		}
	}
	shm_dev_kick(sd);	/* budget used up: come back soon (fairness) */
}

/* Out of fds for a while the listener stays readable: take it out of the wait set (events 0)
 * and put it back at the next tick after SHM_ACCEPT_PAUSE_MS, instead of waking at once on
 * it again and again (a spin of the device thread on a 2-core machine). */
#define SHM_ACCEPT_PAUSE_MS 100
static void listen_pause(struct shm_dev *sd, int pause)
{
	struct epoll_event ev = { .events = pause ? 0 : EPOLLIN, .data.ptr = &sd->listen_fd };
	if (epoll_ctl(sd->epfd, EPOLL_CTL_MOD, sd->listen_fd, &ev) < 0)
		return;
	sd->listen_paused_until_ns = pause ? smcr_now_ns() + SHM_ACCEPT_PAUSE_MS * SMCR_NS_PER_MS
					   : 0;
}

static void accept_all_locked(struct shm_dev *sd)
{
	for (;;) {
		int fd = hfd_keep(accept4(sd->listen_fd, NULL, NULL, SOCK_CLOEXEC));
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				SMCR_LOG_RL(SMCR_LOG_WARN, "shm", "%s: accept: %s", sd->dev.name,
					    strerror(errno));
				listen_pause(sd, 1);
			}
			return;
		}
		sock_tune(fd);
		if (!peer_new(sd, fd, 0))
			close(fd);
	}
}

/* The device thread: control messages, peer death, handshakes, timers. Never touches the
 * data path except to finish errors and to retry sends a peer unblocked (kick). */
static void *shm_thread(void *arg)
{
	struct shm_dev *sd = arg;
	int need_tick = 0;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);	/* signals go to the application's threads */

	while (!atomic_load_explicit(&sd->stop, memory_order_acquire)) {
		struct epoll_event evs[32];
		int n = epoll_wait(sd->epfd, evs, 32, need_tick ? SHM_TICK_MS : -1);
		pthread_mutex_lock(&sd->lock);
		for (int i = 0; i < n; i++) {
			void *ptr = evs[i].data.ptr;
			if (ptr == &sd->listen_fd) {
				accept_all_locked(sd);
			} else if (ptr == &sd->kick_fd) {
				uint64_t v;
				ssize_t r = read(sd->kick_fd, &v, sizeof v);
				(void)r;
			} else {
				struct shm_peer *p = ptr;
				shm_peer_hold(p);	/* peer_down may drop the list's */
				peer_read_locked(sd, p);
				/* Hang-up: read what it sent before, then it is gone. */
				if (p->state != SHM_PEER_DOWN &&
				    (evs[i].events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)))
					peer_down_locked(sd, p);
				shm_peer_put(p);
			}
		}
		for (struct shm_peer *p = sd->peers, *nx; p; p = nx) {
			nx = p->next;
			if (atomic_load_explicit(&p->broken, memory_order_relaxed))
				peer_down_locked(sd, p);
		}
		uint64_t now = smcr_now_ns();
		if (sd->listen_paused_until_ns && now >= sd->listen_paused_until_ns)
			listen_pause(sd, 0);
		need_tick = sd->n_parked > 0 || sd->listen_paused_until_ns != 0;
		for (struct shm_parked **pp = &sd->parked; *pp;) {
			struct shm_parked *pk = *pp;
			struct shm_qp *q = shm_qp_find_locked(sd, pk->req.dst_qpn);
			int done = sd->port_up && q && q->conn == SHM_CONN_WANT &&
				   shm_qp_on_req_locked(q, pk->peer, &pk->req, pk->ring_fd, pk->cq_fd);
			if (done || now >= pk->expires_ns) {
				if (done)
					pk->ring_fd = pk->cq_fd = -1;
				*pp = pk->next;
				sd->n_parked--;
				if (pk->ring_fd >= 0)
					close(pk->ring_fd);
				if (pk->cq_fd >= 0)
					close(pk->cq_fd);
				shm_peer_put(pk->peer);
				free(pk);
			} else {
				pp = &pk->next;
			}
		}
		for (uint32_t i = 0; i < sd->qp_hi; i++)
			if (sd->qps[i])
				need_tick |= shm_qp_scan_locked(sd->qps[i], now);
		pthread_mutex_unlock(&sd->lock);
	}
	return NULL;
}

/* ---- device ops -------------------------------------------------------------------------- */

static int shm_query_device(struct dev_device *dev, struct dev_device_attr *a)
{
	struct shm_dev *sd = shm_dev_of(dev);
	snprintf(a->provider, sizeof a->provider, "%s", SHM_PROVIDER_NAME);
	snprintf(a->name, sizeof a->name, "%s", dev->name);
	a->phys_port_cnt = 1;
	a->max_qp = SHM_MAX_QP;
	a->max_qp_wr = SHM_MAX_WR;
	a->max_sge = SHM_MAX_SGE;
	a->max_inline_data = SHM_MAX_INLINE_BIG;
	a->max_cq = 1u << 16;
	a->max_cqe = SHM_MAX_CQE;
	a->max_mr = SHM_MAX_MR;
	a->max_mr_size = (uint64_t)1 << 40;
	a->node_guid = sd->node_guid;
	return 0;
}

static int shm_query_port(struct dev_device *dev, uint8_t port, struct dev_port_attr *a)
{
	struct shm_dev *sd = shm_dev_of(dev);
	(void)port;
	pthread_mutex_lock(&sd->lock);
	a->state = sd->port_up ? DEV_PORT_ACTIVE : DEV_PORT_DOWN;
	pthread_mutex_unlock(&sd->lock);
	a->max_mtu = DEV_MTU_4096;
	a->active_mtu = DEV_MTU_4096;
	a->gid_tbl_len = 1;
	a->max_msg_sz = 1u << 30;
	a->max_send_sz = SHM_MAX_SEND;
	return 0;
}

static int shm_query_gid(struct dev_device *dev, uint8_t port, int index, struct dev_gid_entry *o)
{
	struct shm_dev *sd = shm_dev_of(dev);
	(void)port;
	if (index != 0)
		return -SMCR_E_INVAL;
	o->gid = sd->gid;
	o->type = DEV_GID_TYPE_SOFT;
	o->vlan_id = DEV_VLAN_NONE;
	memcpy(o->mac, sd->mac, DEV_MAC_LEN);
	return 0;
}

static int shm_set_port_state(struct dev_device *dev, uint8_t port, int up)
{
	struct shm_dev *sd = shm_dev_of(dev);
	pthread_mutex_lock(&sd->lock);
	if (!up && sd->port_up) {
		sd->port_up = 0;
		/* Link loss: every QP using the port goes to ERR, and its peer with it. */
		for (uint32_t i = 0; i < sd->qp_hi; i++) {
			struct shm_qp *q = sd->qps[i];
			if (q && q->conn != SHM_CONN_NONE)
				shm_qp_peer_lost_locked(q, DEV_WC_RETRY_EXC_ERR, DEV_EVENT_QP_FATAL,
							1, SHM_GONE_PORT_DOWN);
		}
		shm_dev_event(sd, DEV_EVENT_PORT_ERR, port, NULL);
	} else if (up && !sd->port_up) {
		sd->port_up = 1;
		shm_dev_event(sd, DEV_EVENT_PORT_ACTIVE, port, NULL);
	}
	pthread_mutex_unlock(&sd->lock);
	return 0;
}

static void shm_free(struct shm_dev *sd)
{
	if (sd->epfd >= 0)
		close(sd->epfd);
	if (sd->kick_fd >= 0)
		close(sd->kick_fd);
	if (sd->async_efd >= 0)
		close(sd->async_efd);
	if (sd->listen_fd >= 0) {
		close(sd->listen_fd);
		unlink(sd->sock_path);
	}
	if (sd->lock_fd >= 0) {	/* after the socket: a live socket always has its lock */
		unlink(sd->lock_path);
		close(sd->lock_fd);
	}
	if (sd->rkey_tab)
		munmap(sd->rkey_tab, sd->rkey_tab_len);
	if (sd->rkey_tab_fd >= 0)
		close(sd->rkey_tab_fd);
	pthread_mutex_destroy(&sd->lock);
	pthread_cond_destroy(&sd->ack_cond);
	pthread_rwlock_destroy(&sd->mr_lock);
	pthread_mutex_destroy(&sd->ev_lock);
	free(sd->qps);
	free(sd->qp_gen);
	free(sd->mrs);
	free(sd->mr_gen);
	free(sd->evq);
	free(sd);
}

static void shm_close_device(struct dev_device *dev)
{
	struct shm_dev *sd = shm_dev_of(dev);

	pthread_mutex_lock(&shm_devs_lock);
	for (struct shm_dev **pp = &shm_devs; *pp; pp = &(*pp)->next) {
		if (*pp == sd) {
			*pp = sd->next;
			break;
		}
	}
	pthread_mutex_unlock(&shm_devs_lock);
	atomic_store_explicit(&sd->stop, 1, memory_order_release);
	shm_dev_kick(sd);
	pthread_join(sd->thread, NULL);
	pthread_mutex_lock(&sd->lock);
	while (sd->parked) {
		struct shm_parked *pk = sd->parked;
		sd->parked = pk->next;
		park_drop(pk);
	}
	while (sd->peers)
		peer_down_locked(sd, sd->peers);
	pthread_mutex_unlock(&sd->lock);
	LOG_DBG("shm", "%s closed", dev->name);
	shm_free(sd);
}

const struct dev_ops shm_ops = {
	.alloc_pd = shm_alloc_pd,
	.close_device = shm_close_device,
	.create_cq = shm_create_cq,
	.create_qp = shm_create_qp,
	.dealloc_pd = shm_dealloc_pd,
	.dereg_mr = shm_dereg_mr,
	.destroy_cq = shm_destroy_cq,
	.destroy_qp = shm_destroy_qp,
	.disarm_cq = shm_disarm_cq,
	.get_async_event = shm_get_async_event,
	.get_cq_event = shm_get_cq_event,
	.modify_qp = shm_modify_qp,
	.poll_cq = shm_poll_cq,
	.post_recv = shm_post_recv,
	.post_send = shm_post_send,
	.query_device = shm_query_device,
	.query_gid = shm_query_gid,
	.query_port = shm_query_port,
	.query_qp = shm_query_qp,
	.reg_mr = shm_reg_mr,
	.req_notify_cq = shm_req_notify_cq,
	.set_port_state = shm_set_port_state,
};

static int shm_dev_open(const struct dev_ops *ops, const char *args, struct dev_device **out)
{
	struct shm_dev *sd = calloc(1, sizeof *sd);
	if (!sd)
		return -SMCR_E_NOMEM;
	sd->listen_fd = sd->epfd = sd->kick_fd = sd->async_efd = sd->rkey_tab_fd = sd->lock_fd = -1;
	pthread_mutex_init(&sd->lock, NULL);
	pthread_cond_init(&sd->ack_cond, NULL);
	pthread_rwlock_init(&sd->mr_lock, NULL);
	pthread_mutex_init(&sd->ev_lock, NULL);
	sd->port_up = 1;
	int rc = -SMCR_E_NOMEM;
	sd->qps = calloc(SHM_MAX_QP, sizeof *sd->qps);
	sd->qp_gen = calloc(SHM_MAX_QP, sizeof *sd->qp_gen);
	sd->mrs = calloc(SHM_MAX_MR, sizeof *sd->mrs);
	sd->mr_gen = calloc(SHM_MAX_MR, sizeof *sd->mr_gen);
	if (!sd->qps || !sd->qp_gen || !sd->mrs || !sd->mr_gen)
		goto err;

	/* Identity: fd 53 | 6 bytes of boot id | 8 random bytes (docs: GIDs). */
	rc = host_prefix(sd->gid.raw);
	if (rc)
		goto err;
	if (getrandom(sd->gid.raw + SHM_GID_HOST_LEN, DEV_GID_LEN - SHM_GID_HOST_LEN, 0) !=
	    DEV_GID_LEN - SHM_GID_HOST_LEN) {
		rc = -SMCR_E_SHM_SYSCALL;
		goto err;
	}
	sd->mac[0] = 0x02;	/* locally administered, unicast */
	sd->mac[1] = 0x53;
	memcpy(sd->mac + 2, sd->gid.raw + 12, 4);
	memcpy(&sd->node_guid, sd->gid.raw + 8, 8);

	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	rc = pick_dir(args, dir, sizeof dir);
	if (rc)
		goto err;
	struct sockaddr_un sa;
	rc = sock_path(dir, &sd->gid, &sa);
	if (rc)
		goto err;
	clean_stale(dir, sd->gid.raw);
	/* Locked before the socket exists, held until after it is gone (clean_one). Blocking:
	 * a cleaner may hold it for the moment it takes to probe. */
	rc = dir_path(dir, &sd->gid, ".lock", sd->lock_path, sizeof sd->lock_path);
	if (rc)
		goto err;
	sd->lock_fd = hfd_keep(open(sd->lock_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
	if (sd->lock_fd < 0 || flock(sd->lock_fd, LOCK_EX) < 0) {
		rc = -SMCR_E_SHM_DIR;
		goto err;
	}

	/* The rkey validity table peers read: sealed so no one else can map it writable. */
	rc = -SMCR_E_SHM_SYSCALL;
	sd->rkey_tab_len = SHM_RKEY_TAB_ENTRIES * sizeof(uint32_t);
	sd->rkey_tab_fd = hfd_keep(memfd_create("smcr-shm-rkeys", MFD_CLOEXEC | MFD_ALLOW_SEALING));
	if (sd->rkey_tab_fd < 0 || ftruncate(sd->rkey_tab_fd, (off_t)sd->rkey_tab_len) < 0)
		goto err;
	void *tab = mmap(NULL, sd->rkey_tab_len, PROT_READ | PROT_WRITE, MAP_SHARED,
			 sd->rkey_tab_fd, 0);
	if (tab == MAP_FAILED)
		goto err;
	sd->rkey_tab = tab;
	madvise(tab, sd->rkey_tab_len, MADV_DONTFORK);
	if (fcntl(sd->rkey_tab_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
			  F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) < 0)
		goto err;

	sd->kick_fd = hfd_keep(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	sd->async_efd = hfd_keep(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	sd->epfd = hfd_keep(epoll_create1(EPOLL_CLOEXEC));
	sd->listen_fd = hfd_keep(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (sd->kick_fd < 0 || sd->async_efd < 0 || sd->epfd < 0 || sd->listen_fd < 0)
		goto err;
	snprintf(sd->sock_path, sizeof sd->sock_path, "%s", sa.sun_path);
	if (bind(sd->listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		close(sd->listen_fd);
		sd->listen_fd = -1;
		rc = -SMCR_E_SHM_DIR;
		goto err;
	}
	chmod(sa.sun_path, 0600);	/* same user only (docs: trust) */
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &sd->listen_fd };
	struct epoll_event kv = { .events = EPOLLIN, .data.ptr = &sd->kick_fd };
	if (listen(sd->listen_fd, 128) < 0 ||
	    epoll_ctl(sd->epfd, EPOLL_CTL_ADD, sd->listen_fd, &ev) < 0 ||
	    epoll_ctl(sd->epfd, EPOLL_CTL_ADD, sd->kick_fd, &kv) < 0)
		goto err;

	pthread_mutex_lock(&shm_devs_lock);
	char name[DEV_NAME_MAX];
	snprintf(name, sizeof name, "shm%u", shm_dev_count++);
	pthread_mutex_unlock(&shm_devs_lock);
	dev_device_init(&sd->dev, ops, SHM_PROVIDER_NAME, name, 1, sd->async_efd);
	if (pthread_create(&sd->thread, NULL, shm_thread, sd) != 0)
		goto err;
	pthread_mutex_lock(&shm_devs_lock);
	sd->next = shm_devs;
	shm_devs = sd;
	pthread_mutex_unlock(&shm_devs_lock);
	char g[DEV_GID_STR_LEN];
	dev_gid_str(&sd->gid, g);
	LOG_INFO("shm", "%s open, GID %s, socket %s", name, g, sd->sock_path);
	*out = &sd->dev;
	return 0;
err:
	shm_free(sd);
	return rc;
}

static int shm_open_by_gid(const struct dev_ops *ops, const struct dev_gid *gid,
			   struct dev_device **out)
{
	(void)ops;
	int rc = -SMCR_E_DEV_NO_DEVICE;
	pthread_mutex_lock(&shm_devs_lock);
	for (struct shm_dev *sd = shm_devs; sd; sd = sd->next) {
		if (memcmp(sd->gid.raw, gid->raw, DEV_GID_LEN) != 0)
			continue;
		/* Hold only if still alive: a device whose last reference is being dropped is
		 * still listed until shm_close_device unlinks it. The caller's: dev_close. */
		uint32_t n = atomic_load_explicit(&sd->dev.refcnt, memory_order_relaxed);
		while (n && !atomic_compare_exchange_weak_explicit(&sd->dev.refcnt, &n, n + 1,
								   memory_order_relaxed,
								   memory_order_relaxed))
			;
		if (n) {
			*out = &sd->dev;
			rc = 0;
		}
		break;
	}
	pthread_mutex_unlock(&shm_devs_lock);
	return rc;
}

static const struct dev_provider shm_provider = {
	.name = SHM_PROVIDER_NAME,
	.ops = &shm_ops,
	.open = shm_dev_open,
	.open_by_gid = shm_open_by_gid,
};

int dev_shm_register(void)
{
	return dev_provider_register(&shm_provider);
}
