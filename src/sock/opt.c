/* opt.c: socket options, fcntl, ioctl and the smcr query (SOL_SMCR / SMCR_INFO) of
 * include/smcr/smcr.h.
 *
 * Options are set on the TCP socket where they belong (always, in every mode, so they read
 * back as set and survive a fallback); the ones that change SMC-R behaviour are also kept
 * in the socket: SO_RCVBUF (RMBE size), SO_SNDBUF (send buffer), SO_LINGER, SO_OOBINLINE,
 * SO_RCVTIMEO/SO_SNDTIMEO, TCP_CORK. SO_ERROR and the level SOL_SMCR are answered here. */
#define _GNU_SOURCE
#include <smcr/smcr.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>

#include "sock/errmap.h"
#include "sock/sock.h"
#include "sock/sys.h"
#include "wire/clc.h"

/* ---- names ---- */

const char *smcr_reason_name(uint32_t reason)
{
	switch (reason) {
	case SMCR_REASON_NONE: return "NONE";
	case SMCR_REASON_RULE_TCP: return "RULE_TCP";
	default: return disc_reason_name(reason) ? disc_reason_name(reason)
						 : clc_decline_name(reason);
	}
}

const char *smcr_mode_name(int mode)
{
	switch (mode) {
	case SMCR_MODE_NONE: return "none";
	case SMCR_MODE_LISTEN: return "listen";
	case SMCR_MODE_HANDSHAKE: return "handshake";
	case SMCR_MODE_SMCR: return "smcr";
	case SMCR_MODE_TCP: return "tcp";
	case SMCR_MODE_FAILED: return "failed";
	default: return "?";
	}
}

/* ---- the query ---- */

static void fill_info(struct sock *s, struct smcr_info *in)
{
	memset(in, 0, sizeof(*in));
	in->size = sizeof(*in);
	pthread_mutex_lock(&s->lock);
	switch ((enum sock_state)atomic_load(&s->state)) {
	case SS_NEW: in->mode = SMCR_MODE_NONE; break;
	case SS_LISTEN: in->mode = SMCR_MODE_LISTEN; break;
	case SS_HANDSHAKE: in->mode = SMCR_MODE_HANDSHAKE; break;
	case SS_SMC: in->mode = SMCR_MODE_SMCR; break;
	case SS_TCP: in->mode = s->lazy ? SMCR_MODE_HANDSHAKE : SMCR_MODE_TCP; break;
	case SS_FAILED: in->mode = SMCR_MODE_FAILED; break;
	}
	in->role = s->role == CORE_CLIENT ? SMCR_ROLE_CLIENT
		   : s->role == CORE_SERVER ? SMCR_ROLE_SERVER
					    : SMCR_ROLE_NONE;
	in->local_reason = s->local_reason;
	in->peer_reason = s->peer_reason;
	in->error = s->error;
	struct core_conn *c = s->conn;
	pthread_mutex_unlock(&s->lock);
	if (!c)
		return;
	struct core_conn_info ci;
	core_conn_info(c, &ci);
	if (ci.fallback_local)
		in->local_reason = ci.fallback_local;
	if (ci.fallback_peer)
		in->peer_reason = ci.fallback_peer;
	if (!in->error)
		in->error = ci.error ? sock_errno_of(ci.error) : 0;
	in->first_contact = ci.first_contact;
	in->smc_version = ci.mode == CORE_MODE_SMC ? ci.smc_version : 0;
	in->link_id = ci.link_num;
	in->lgr_id = ci.lg_id;
	in->peer_id[0] = (uint8_t)(ci.peer_id.instance >> 8);
	in->peer_id[1] = (uint8_t)ci.peer_id.instance;
	memcpy(&in->peer_id[2], &ci.peer_id.mac, 6);
	in->local_token = ci.token_local;
	in->peer_token = ci.token_peer;
	in->rmbe_size = ci.rmbe_size;
	in->peer_rmbe_size = ci.peer_rmbe_size;
	in->sndbuf_size = ci.sndbuf_size;
	in->rx_prod = (struct smcr_cursor){ ci.rx_peer_prod.wrap, ci.rx_peer_prod.count };
	in->rx_cons = (struct smcr_cursor){ ci.rx_cons.wrap, ci.rx_cons.count };
	in->tx_prod = (struct smcr_cursor){ ci.tx_prod.wrap, ci.tx_prod.count };
	in->tx_cons = (struct smcr_cursor){ ci.tx_peer_cons.wrap, ci.tx_peer_cons.count };
	in->bytes_sent = ci.bytes_sent;
	in->bytes_received = ci.bytes_received;
	in->cdc_sent = ci.cdc_sent;
	in->cdc_received = ci.cdc_received;
	in->sndbuf_queued = ci.sndbuf_queued;
	in->corked = ci.corked;
	in->close_pending = ci.close_pending;
	in->local_qpn = ci.qpn_local;
	in->peer_qpn = ci.qpn_peer;
	memcpy(in->local_gid, ci.gid_local, sizeof(in->local_gid));
	memcpy(in->peer_gid, ci.gid_peer, sizeof(in->peer_gid));
	in->lgr_links = ci.lg_links;
	in->lgr_conns = ci.lg_conns;
}

/* ---- options ---- */

/* Deferred options of an SMC-R connection (sock.h opt_defer). Only values the kernel
 * would take without error are deferred (so the call's answer, 0, is the kernel's);
 * anything else goes to the kernel at once, which answers it. Whatever reads the TCP
 * socket's options (getsockopt, a setsockopt that goes through) flushes them first, so
 * reads show exactly what TCP would (its own rounding of timeouts included). */
#define SOCK_OPT_RCVTIMEO 1u
#define SOCK_OPT_SNDTIMEO 2u
#define SOCK_OPT_NODELAY 4u

static void opt_flush_locked(struct sock *s)
{
	uint8_t d = s->opt_defer;
	s->opt_defer = 0;
	if (!d || s->tcp < 0)
		return;
	if (d & SOCK_OPT_RCVTIMEO)
		(void)sock_sys.setsockopt(s->tcp, SOL_SOCKET, SO_RCVTIMEO, &s->rcvtimeo,
					  sizeof(s->rcvtimeo));
	if (d & SOCK_OPT_SNDTIMEO)
		(void)sock_sys.setsockopt(s->tcp, SOL_SOCKET, SO_SNDTIMEO, &s->sndtimeo,
					  sizeof(s->sndtimeo));
	if (d & SOCK_OPT_NODELAY)
		(void)sock_sys.setsockopt(s->tcp, IPPROTO_TCP, TCP_NODELAY, &s->nodelay,
					  sizeof(s->nodelay));
}

/* The bit for (level, name, val) if it can be deferred on s, else 0. Caller holds the
 * lock. SO_RCVTIMEO/SO_SNDTIMEO: the kernel answers EDOM for tv_usec outside
 * [0, 1000000) and EINVAL for a short optlen: those go to it. */
static unsigned opt_deferrable_locked(struct sock *s, int level, int name, const void *val,
				      socklen_t len)
{
	if (atomic_load(&s->state) != SS_SMC || s->tcp < 0 || s->tcp == s->fd || !val)
		return 0;
	if (level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO) &&
	    len >= (socklen_t)sizeof(struct timeval)) {
		struct timeval tv;
		memcpy(&tv, val, sizeof(tv));
		if (tv.tv_usec < 0 || tv.tv_usec >= 1000000)
			return 0;
		return name == SO_RCVTIMEO ? SOCK_OPT_RCVTIMEO : SOCK_OPT_SNDTIMEO;
	}
	if (level == IPPROTO_TCP && name == TCP_NODELAY && len >= (socklen_t)sizeof(int))
		return SOCK_OPT_NODELAY;
	return 0;
}

static int opt_int(const void *val, socklen_t len, int *out)
{
	if (!val || len < (socklen_t)sizeof(int))
		return -SMCR_E_SOCK_INVAL;
	memcpy(out, val, sizeof(int));
	return 0;
}

int smcr_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	struct sock *s = sock_get(fd);
	if (!s)
		return sock_sys.setsockopt(fd, level, name, val, len);
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	if (level == SOL_SMCR) {
		rc = -SMCR_E_SOCK_NOPROTOOPT;
		goto out;
	}
	if (s->tcp < 0) {
		rc = -SMCR_E_SOCK_INVAL;
		goto out;
	}
	unsigned defer = opt_deferrable_locked(s, level, name, val, len);
	if (defer) {
		s->opt_defer |= (uint8_t)defer;
		if (defer == SOCK_OPT_NODELAY)
			memcpy(&s->nodelay, val, sizeof(int));
	} else {
		opt_flush_locked(s); /* keep the program's order on the TCP socket */
		if (sock_sys.setsockopt(s->tcp, level, name, val, len) < 0) {
			rc = sock_err_sys(errno);
			goto out;
		}
	}
	int v;
	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_RCVBUF:
		case SO_RCVBUFFORCE:
			if (opt_int(val, len, &v) == 0 && v >= 0)
				s->rcvbuf = (uint32_t)v;
			break;
		case SO_SNDBUF:
		case SO_SNDBUFFORCE:
			if (opt_int(val, len, &v) == 0 && v >= 0) {
				/* The ring is sized from the value TCP kept: clamped to
				 * net.core.wmem_max unless FORCE, then doubled; half of what it
				 * reads back is what Linux SMC sizes its send buffer from
				 * (docs/parts/sndbuf.md "The ring"). */
				int kept = 0;
				socklen_t kl = sizeof(kept);
				if (sock_sys.getsockopt(s->tcp, SOL_SOCKET, SO_SNDBUF, &kept, &kl) == 0 &&
				    kept > 0)
					v = kept / 2;
				s->sndbuf = (uint32_t)v;
			}
			break;
		case SO_LINGER:
			if (val && len >= (socklen_t)sizeof(struct linger)) {
				struct linger lg;
				memcpy(&lg, val, sizeof(lg));
				s->linger_set = lg.l_onoff != 0;
				s->linger_secs = lg.l_linger;
			}
			break;
		case SO_OOBINLINE:
			if (opt_int(val, len, &v) == 0) {
				s->oobinline = v != 0;
				if (s->conn)
					core_conn_set_oobinline(s->conn, s->oobinline);
			}
			break;
		case SO_BUSY_POLL:
			/* the kernel checked it (EPERM above its limit without CAP_NET_ADMIN):
			 * a floor under this socket's spins (waitpol.h busy_poll_ns) */
			if (opt_int(val, len, &v) == 0 && v >= 0)
				s->busy_poll_us = (uint32_t)v;
			break;
		case SO_RCVTIMEO:
		case SO_SNDTIMEO:
			if (val && len >= (socklen_t)sizeof(struct timeval)) {
				struct timeval tv;
				memcpy(&tv, val, sizeof(tv));
				if (name == SO_RCVTIMEO)
					s->rcvtimeo = tv;
				else
					s->sndtimeo = tv;
			}
			break;
		default:
			break;
		}
	} else if (level == IPPROTO_TCP && name == TCP_CORK) {
		if (opt_int(val, len, &v) == 0) {
			bool was = s->cork;
			s->cork = v != 0;
			if (was && !s->cork && s->conn && atomic_load(&s->state) == SS_SMC) {
				/* uncork: push what the ring holds (docs/parts/sndbuf.md) */
				(void)core_conn_flush(s->conn);
			}
		}
	}
out:
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
	return rc < 0 ? sock_fail(rc) : 0;
}

int smcr_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct sock *s = sock_get(fd);
	if (!s) {
		if (level == SOL_SMCR) {
			errno = ENOPROTOOPT;
			return -1;
		}
		return sock_sys.getsockopt(fd, level, name, val, len);
	}
	int rc = 0;
	if (level == SOL_SMCR) {
		if (name != SMCR_INFO || !len) {
			rc = -SMCR_E_SOCK_NOPROTOOPT;
		} else {
			struct smcr_info in;
			fill_info(s, &in);
			socklen_t n = *len < (socklen_t)sizeof(in) ? *len : (socklen_t)sizeof(in);
			memcpy(val, &in, (size_t)n);
			*len = n;
		}
		sock_put(s);
		return rc < 0 ? sock_fail(rc) : 0;
	}
	pthread_mutex_lock(&s->lock);
	int st = atomic_load(&s->state);
	if (level == SOL_SOCKET && name == SO_ERROR && st != SS_TCP && st != SS_NEW &&
	    st != SS_LISTEN) {
		int err = s->error;
		s->error = 0;
		if (!err && s->conn && st == SS_SMC) {
			int c = core_conn_error(s->conn);
			err = c ? sock_errno_of(c) : 0;
		}
		if (err && s->has_sig)
			sig_clear_error(&s->sig);
		if (!val || !len || *len < (socklen_t)sizeof(int)) {
			rc = -SMCR_E_SOCK_INVAL;
		} else {
			memcpy(val, &err, sizeof(int));
			*len = sizeof(int);
		}
	} else if (s->tcp < 0) {
		rc = -SMCR_E_SOCK_INVAL;
	} else {
		opt_flush_locked(s);
		if (sock_sys.getsockopt(s->tcp, level, name, val, len) < 0)
			rc = sock_err_sys(errno);
	}
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
	return rc < 0 ? sock_fail(rc) : 0;
}

/* ---- fcntl ---- */

int smcr_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	long iarg = 0;
	void *parg = NULL;
	bool intarg = false;
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
	case F_SETFD:
	case F_SETFL:
	case F_SETOWN:
	case F_SETSIG:
	case F_SETLEASE:
	case F_NOTIFY:
	case F_SETPIPE_SZ:
	case F_ADD_SEALS:
		iarg = va_arg(ap, int);
		intarg = true;
		break;
	case F_GETFD:
	case F_GETFL:
	case F_GETOWN:
	case F_GETSIG:
	case F_GETLEASE:
	case F_GETPIPE_SZ:
	case F_GET_SEALS:
		break;
	default:
		parg = va_arg(ap, void *);
		break;
	}
	va_end(ap);
#define FCNTL_SYS(f) (intarg ? sock_sys.fcntl((f), cmd, (int)iarg) : \
		      parg ? sock_sys.fcntl((f), cmd, parg) : sock_sys.fcntl((f), cmd))
	struct sock *s = sock_get(fd);
	if (!s)
		return FCNTL_SYS(fd);
	int rc;
	pthread_mutex_lock(&s->lock);
	int st = atomic_load(&s->state);
	bool pair = st == SS_HANDSHAKE || st == SS_SMC || st == SS_FAILED ||
		    (st == SS_LISTEN && s->lq.on); /* the accept queue's placeholder (lsn.c) */
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		if (pair) {
			/* an SMC-R connection gets a second number (sock.c) */
			rc = sock_dup_locked(s, -1, (int)iarg, cmd == F_DUPFD_CLOEXEC);
			rc = rc == SOCK_DUP_PLAIN ? FCNTL_SYS(fd) : rc < 0 ? sock_fail(rc) : rc;
			break;
		}
		rc = FCNTL_SYS(fd);
		break;
	case F_SETFL:
		rc = FCNTL_SYS(fd);
		if (rc == 0)
			s->nonblock = (iarg & O_NONBLOCK) != 0;
		if (rc == 0 && s->has_sig) /* prog's flag just changed: its mirror in sig */
			atomic_store_explicit(&s->sig.nonblock, s->nonblock, memory_order_relaxed);
		break;
	case F_SETFD:
		rc = FCNTL_SYS(fd);
		if (rc == 0)
			s->cloexec = (iarg & FD_CLOEXEC) != 0;
		break;
	default:
		rc = FCNTL_SYS(fd);
		break;
	}
	int e = errno;
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
	errno = e;
	return rc;
#undef FCNTL_SYS
}

/* ---- ioctl ---- */

int smcr_ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	struct sock *s = sock_get(fd);
	if (!s)
		return sock_sys.ioctl(fd, req, arg);
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	int st = atomic_load(&s->state);
	if (st == SS_NEW || st == SS_LISTEN || st == SS_TCP) {
		rc = sock_sys.ioctl(fd, req, arg) < 0 ? sock_err_sys(errno) : 0;
		if (rc == 0 && req == FIONBIO && arg)
			s->nonblock = *(int *)arg != 0;
		goto out;
	}
	switch (req) {
	case FIONBIO:
		if (!arg) {
			rc = -SMCR_E_SOCK_INVAL;
			break;
		}
		s->nonblock = *(int *)arg != 0;
		if (s->has_sig)
			sig_set_nonblock(&s->sig, s->nonblock);
		break;
	case FIONREAD: /* == SIOCINQ */
	case SIOCOUTQ:
	case SIOCATMARK: {
		if (!arg) {
			rc = -SMCR_E_SOCK_INVAL;
			break;
		}
		int v = 0;
		if (st == SS_SMC && s->conn) {
			struct core_conn_info ci;
			core_conn_info(s->conn, &ci);
			/* FIONREAD: tcp_inq's value, not poll's. SIOCOUTQ: TCP's is unacked +
			 * unsent; ours is what the peer has not consumed + what waits in the send
			 * ring (docs/parts/sndbuf.md). */
			v = req == FIONREAD ? (int)ci.inq
			    : req == SIOCOUTQ ? (int)(ci.unacked + ci.sndbuf_queued)
					      : ci.at_mark;
		}
		memcpy(arg, &v, sizeof(v));
		break;
	}
	default:
		rc = s->tcp >= 0 && sock_sys.ioctl(s->tcp, req, arg) == 0 ? 0 : sock_err_sys(errno);
		break;
	}
out:
	pthread_mutex_unlock(&s->lock);
	sock_put(s);
	return rc < 0 ? sock_fail(rc) : 0;
}
