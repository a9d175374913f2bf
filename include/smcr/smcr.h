/* smcr.h: the public socket API of smcr, a userspace SMC-R stack (RFC 7609).
 *
 * Every call has the shape, arguments, return value and errno of the BSD socket call it is
 * named after (smcr_connect is connect(2), smcr_recv is recv(2), ...): -1 and errno on
 * failure, errno values those TCP would give in the same situation (ECONNRESET, EPIPE,
 * ETIMEDOUT, ECONNREFUSED, EAGAIN, ...). A program written for TCP stream sockets runs on
 * this API by adding the prefix; the transparent interposer (a later part) maps the libc
 * names here one to one.
 *
 * What an smcr socket is
 *   smcr_socket(AF_INET or AF_INET6, SOCK_STREAM[|SOCK_NONBLOCK|SOCK_CLOEXEC], 0 or
 *   IPPROTO_TCP) creates a kernel TCP socket and returns its fd, recorded as an smcr socket.
 *   Any other socket type is created as asked and never touched again: every smcr_ call on
 *   an fd that is not an smcr socket (pipes, UDP, files, ...) is exactly the libc call.
 *   The fd is always a real kernel fd, so poll(2), select(2) and epoll(7) (level- and
 *   edge-triggered, mixed with any other fds) work on it as on a TCP socket, with the
 *   kernel doing the waiting:
 *     - unconnected, listening, and after a fallback to TCP, it IS the TCP socket and
 *       every call on it is the plain libc call;
 *     - connected over SMC-R, it is one end of an AF_UNIX socket pair whose other end the
 *       engine drives so that POLLIN, POLLOUT, POLLRDHUP, POLLHUP and POLLERR appear
 *       exactly when they would on a TCP socket (docs/parts/sock.md "Readiness"); the
 *       TCP connection stays open behind it, as RFC 7609 wants.
 *   The switch between the two (at the end of the CLC handshake) replaces the file behind
 *   the fd number with dup2(2). For a blocking connect or accept it happens before the call
 *   returns. A non-blocking connect, or an accept on a non-blocking listener, returns at
 *   once (EINPROGRESS / the new fd) and finishes the handshake in the background; while it
 *   runs the fd shows no readiness at all, and at the end it shows the readiness TCP would
 *   (POLLOUT when connected; POLLOUT|POLLERR|POLLHUP when it failed, with the error in
 *   SO_ERROR). Because epoll registrations belong to the file, not to the fd number, a
 *   program that may register such an fd with epoll before the handshake ends must do so
 *   with smcr_epoll_ctl (the interposer routes every epoll_ctl there): it records the
 *   registrations of smcr fds and moves them across the switch. poll and select need
 *   nothing.
 *
 * Which connections use SMC-R
 *   The rules of docs/CONFIG.md (file $SMCR_CONFIG, default /etc/smcr.conf, and the inline
 *   rules of $SMCR_RULES, first match wins; default: SMC-R where the TCP-option discovery is
 *   installed (`smcr-bpf install`), TCP elsewhere). With the option installed, SMC-R is
 *   tried only when both SYN and SYN-ACK carried it (else TCP, reason BPF_PEER_NO ...);
 *   without it, the rules alone decide. A client whose rule says smc
 *   proposes SMC-R (CLC Proposal) on every connect it matches; a server whose rule says smc
 *   expects a CLC Proposal from every client it matches and falls back cleanly to TCP
 *   when the client's first bytes are not CLC. smc-only refuses the fallback.
 *   Both ends must agree: a client that proposes SMC-R to a plain TCP server sends it
 *   bytes it does not expect (the TCP-option discovery of a later part removes this).
 *
 * dup: smcr_fcntl(F_DUPFD, F_DUPFD_CLOEXEC) of an SMC-R-mode fd gives another number of
 * the same connection (the last close ends it); a raw dup(2) gives a copy of the AF_UNIX
 * end that the engine does not know (the interposer maps dup/dup2/dup3 to the former).
 * Not supported on an SMC-R-mode fd (documented in docs/parts/sock.md): dup while the
 * handshake runs, sendfile/splice (the interposer copies), SCM_RIGHTS passing, use after
 * fork() in the child (the interposer makes such a connection foreign there),
 * MSG_OOB of more than one byte outstanding (TCP semantics: only the last urgent byte is
 * kept).
 *
 * Threads: every call is thread-safe in the way the libc call is; an fd must not be closed
 * while another thread is inside a call on it (as with TCP, that is a program bug; here it
 * is memory-safe and the other call returns EBADF or completes). One progress thread per
 * process is started with the first smcr socket (docs/parts/sock.md "Threads"). */
#ifndef SMCR_SMCR_H
#define SMCR_SMCR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- sockets ------------------------------------------------------------------------ */

int smcr_socket(int domain, int type, int protocol);
int smcr_bind(int fd, const struct sockaddr *addr, socklen_t addrlen);
int smcr_listen(int fd, int backlog);
/* Returns a connection whose CLC handshake is complete (SMC-R or TCP fallback) when the
 * listener is blocking; on a non-blocking listener returns at once, handshake in the
 * background (see above). A client whose handshake fails in a way the spec says to drop
 * (CLC timeout, malformed CLC) is closed and never returned by a blocking accept (one
 * handshake at a time); a background one shows the failure (POLLERR, SO_ERROR). */
int smcr_accept(int fd, struct sockaddr *addr, socklen_t *addrlen);
int smcr_accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);
/* Blocking: TCP connect, CLC handshake, link group set-up or reuse, then returns.
 * Non-blocking: -1/EINPROGRESS, the rest in the background; completion shows as POLLOUT
 * and SO_ERROR as for TCP. A Decline from the peer falls back to TCP (not an error) unless
 * the rule says smc-only (then ECONNREFUSED). */
int smcr_connect(int fd, const struct sockaddr *addr, socklen_t addrlen);

/* ---- data --------------------------------------------------------------------------- */

/* Flags: MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL, MSG_OOB, MSG_NOSIGNAL (others: EOPNOTSUPP on
 * an SMC-R connection, passed through on TCP). Writing after the peer closed or after
 * shutdown(SHUT_WR) gives EPIPE and SIGPIPE unless MSG_NOSIGNAL, as TCP. */
ssize_t smcr_send(int fd, const void *buf, size_t len, int flags);
ssize_t smcr_recv(int fd, void *buf, size_t len, int flags);
/* A destination/source address is ignored as for a connected TCP socket. */
ssize_t smcr_sendto(int fd, const void *buf, size_t len, int flags,
		    const struct sockaddr *dest, socklen_t destlen);
ssize_t smcr_recvfrom(int fd, void *buf, size_t len, int flags,
		      struct sockaddr *src, socklen_t *srclen);
ssize_t smcr_read(int fd, void *buf, size_t len);
ssize_t smcr_write(int fd, const void *buf, size_t len);
ssize_t smcr_readv(int fd, const struct iovec *iov, int iovcnt);
ssize_t smcr_writev(int fd, const struct iovec *iov, int iovcnt);
/* Control messages are not supported on an SMC-R connection (msg_controllen is set to 0
 * on receive; a send with control data gives EOPNOTSUPP). */
ssize_t smcr_sendmsg(int fd, const struct msghdr *msg, int flags);
ssize_t smcr_recvmsg(int fd, struct msghdr *msg, int flags);

/* ---- ending ------------------------------------------------------------------------- */

/* SHUT_WR sends "sending done" after the data already written (including what still waits
 * in the send buffer); the peer reads every byte, then EOF. */
int smcr_shutdown(int fd, int how);
/* Sends "connection closed" (or "abnormal close" if unread data is left or SO_LINGER is
 * {1, 0}, which also drops the send buffer) after every byte of the send buffer, and
 * releases the fd at once; the rest of the close (flushing, the TCP connection) completes
 * in the background. With SO_LINGER {1, n > 0} it first waits, at most n seconds, until the
 * send buffer is written and "connection closed" sent (also on a non-blocking socket, as
 * Linux TCP); at the timeout it returns 0 and the engine goes on in the background. */
int smcr_close(int fd);

/* ---- names, options, control -------------------------------------------------------- */

int smcr_getsockname(int fd, struct sockaddr *addr, socklen_t *addrlen);
int smcr_getpeername(int fd, struct sockaddr *addr, socklen_t *addrlen);
/* Options go to the TCP socket where they belong (TCP_NODELAY, TCP_CORK, keepalive, ...),
 * so getsockopt reads them back as set (SO_SNDBUF/SO_RCVBUF: doubled, as TCP). SO_SNDBUF
 * sizes the send buffer (power of two >= the value, 16 KiB..1 MiB, default 64 KiB) and
 * SO_RCVBUF the RMBE (power of two, 16 KiB..512 KiB, RFC 7609 4.1) of connections made
 * afterwards. TCP_CORK and MSG_MORE hold small writes (at most 200 ms, as TCP).
 * SO_LINGER, SO_OOBINLINE, SO_RCVTIMEO, SO_SNDTIMEO, SO_ERROR have TCP's meaning.
 * Level SOL_SMCR: see below. */
int smcr_setsockopt(int fd, int level, int name, const void *val, socklen_t len);
int smcr_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
/* F_GETFL/F_SETFL (O_NONBLOCK), F_GETFD/F_SETFD; F_DUPFD* on an SMC-R fd: another number
 * of the connection (at most 8 more; EOPNOTSUPP beyond, or while the handshake runs). */
int smcr_fcntl(int fd, int cmd, ...);
/* FIONREAD, SIOCINQ, SIOCOUTQ (bytes the peer has not consumed + bytes in the send
 * buffer), SIOCATMARK, FIONBIO. */
int smcr_ioctl(int fd, unsigned long request, ...);
/* epoll_ctl(2), recording registrations of smcr fds (see the top of this file). */
int smcr_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event);
/* epoll_wait(2) with the same arguments, results and errno (EINTR, EBADF, EINVAL, ...).
 * When epfd holds smcr fds (registered with smcr_epoll_ctl) the calling thread first runs
 * the engine's progress itself, so arrivals for many connections become ready in one go
 * without a wake-up of the progress thread, and polls for a short adaptive time before it
 * sleeps (docs/design/readiness.md). Only the program's own registrations are ever
 * returned. Every event it returns is also the kernel's readiness of that fd at the same
 * moment: a poll() outside the loop sees it too, never later. The interposer maps
 * epoll_wait here. */
int smcr_epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout);

/* 1 if fd is an smcr socket (in any mode), 0 if not. */
int smcr_is_socket(int fd);

/* ---- the smcr query (socket option level SOL_SMCR) ---------------------------------- */

/* getsockopt(fd, SOL_SMCR, SMCR_INFO, &info, &len) fills struct smcr_info (len may be
 * shorter than the struct: that many bytes are copied; info.size says how many the library
 * knows). Works on every smcr socket in every mode; tools, tests and benchmarks read it
 * instead of assuming. On a non-smcr fd: ENOPROTOOPT. */
#define SOL_SMCR 0x534d4352 /* "SMCR" */
#define SMCR_INFO 1

enum smcr_mode {
	SMCR_MODE_NONE = 0,	 /* not connected (new socket) */
	SMCR_MODE_LISTEN = 1,	 /* listening */
	SMCR_MODE_HANDSHAKE = 2, /* TCP connecting or CLC handshake running */
	SMCR_MODE_SMCR = 3,	 /* data moves over SMC-R */
	SMCR_MODE_TCP = 4,	 /* plain TCP (rule said tcp, or fallback); reasons say why */
	SMCR_MODE_FAILED = 5,	 /* connect or handshake failed; SO_ERROR says how */
};

enum smcr_role {
	SMCR_ROLE_NONE = 0,
	SMCR_ROLE_CLIENT = 1,	/* TCP active opener */
	SMCR_ROLE_SERVER = 2,	/* accepted from a listener */
};

/* Reasons. A fallback reason is a CLC peer diagnosis code (docs/protocol/wire-formats.md 5.2: the
 * codes a Decline carries, e.g. 0x03030002 no SMC-R device, 0x04000000 out of sync) or one of the
 * local codes below, which are never sent. smcr_reason_name() names both. */
#define SMCR_REASON_NONE 0u
#define SMCR_REASON_PEERNOSMC 0x03010000u /* server: the client's first bytes were not CLC */
#define SMCR_REASON_PEERDECL 0x05000000u  /* local reason: the peer declined */
#define SMCR_REASON_RULE_TCP 0x0f010000u  /* the rules (or their default) chose TCP */
#define SMCR_REASON_NODEV 0x03030002u	  /* no usable RDMA device in this process */
/* The TCP-option discovery (BPF, docs/protocol/procedures.md 2.1) said TCP before any CLC byte:
 * SMCR_REASON_BPF_BASE | the option result (src/bpf/optin.h order; names "BPF_<RESULT>"). */
#define SMCR_REASON_BPF_BASE 0x0f020000u
#define SMCR_REASON_BPF_PEER_NO 0x0f020001u	  /* peer did not offer SMC (no option) */
#define SMCR_REASON_BPF_NOT_INSTALLED 0x0f020002u /* BPF not installed (smcr-bpf install) */

struct smcr_cursor {
	uint16_t wrap;	/* wrap count */
	uint32_t count; /* byte offset in the ring */
};

struct smcr_info {
	uint32_t size;		/* bytes of this struct the library filled (versioning) */
	uint8_t mode;		/* enum smcr_mode */
	uint8_t role;		/* enum smcr_role */
	uint8_t first_contact;	/* 1 if this connection created its link group */
	uint8_t link_id;	/* link number (on the wire) carrying the connection, 0 none */
	uint32_t local_reason;	/* why this side did not use SMC-R (sent in our Decline) */
	uint32_t peer_reason;	/* diagnosis code of the Decline the peer sent */
	int32_t error;		/* pending socket error (SO_ERROR, not cleared by this) */
	uint32_t lgr_id;	/* process-local link group number, 0 when none */
	uint8_t peer_id[8];	/* the peer instance's peer ID (RFC 7609 App. A.2.1) */
	uint16_t lgr_conns;	/* connections in the link group now */
	uint8_t lgr_links;	/* active links in the link group */
	uint8_t smc_version;	/* SMC-R version the handshake ran: 1, or 2 (SMC-R v2) */
	uint32_t local_qpn;	/* QP of the link carrying the connection */
	uint32_t peer_qpn;
	uint32_t local_token;	/* our RMBE alert token (the peer puts it in its CDCs) */
	uint32_t peer_token;	/* the peer's alert token (we put it in ours) */
	uint32_t rmbe_size;	/* our receive ring (RMBE) in bytes */
	uint32_t peer_rmbe_size; /* the peer's RMBE, which we write into */
	uint32_t sndbuf_size;	/* our send ring in bytes (docs/parts/sndbuf.md) */
	uint32_t rsvd1;
	struct smcr_cursor rx_prod; /* the peer's producer cursor in our RMBE, as last received */
	struct smcr_cursor rx_cons; /* our consumer cursor in our RMBE */
	struct smcr_cursor tx_prod; /* our producer cursor in the peer's RMBE */
	struct smcr_cursor tx_cons; /* the peer's consumer cursor, as last received */
	uint64_t bytes_sent;	    /* payload bytes written to the peer */
	uint64_t bytes_received;    /* payload bytes read by the program */
	uint64_t cdc_sent;
	uint64_t cdc_received;
	/* send ring */
	uint32_t sndbuf_queued;	/* bytes in our send ring, not yet written to the peer */
	uint8_t corked;		/* bytes are held by TCP_CORK / MSG_MORE */
	uint8_t close_pending;	/* "sending done"/"closed" waits for the ring to empty */
	uint8_t rsvd_sb[2];
	/* the link carrying the connection (zero when none): GIDs as in the GID table */
	uint8_t local_gid[16];	/* ours (SMC-R v2: the RoCE v2 GID) */
	uint8_t peer_gid[16];
};

/* Name of a reason code: a Linux decline name ("NOSMCRDEV") or an smcr one ("RULE_TCP"),
 * "NONE" for 0, "UNKNOWN" otherwise. Never NULL. */
const char *smcr_reason_name(uint32_t reason);
/* Name of a mode ("smcr", "tcp", ...). */
const char *smcr_mode_name(int mode);

#ifdef __cplusplus
}
#endif

#endif
