/* tr.h: smcr-perf's transports, a table of socket calls per transport.
 *
 * "tcp" is the plain libc call for each entry; "smcr" is the smcr_* call of
 * include/smcr/smcr.h (compiled in only when the build has the smcr socket library,
 * SMCR_PERF_HAVE_SMCR). Both tables have the same shape, so every test runs the very same
 * code over either; the only transport-specific question the tool asks is tr_query(): what
 * mode did this connection really get, read from the engine through getsockopt(SOL_SMCR,
 * SMCR_INFO). The tables are const and shared by every thread. */
#ifndef SMCR_PERF_TR_H
#define SMCR_PERF_TR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "perf.h"

/* What the engine says about one connection. */
struct tr_conn_info {
	int raw_mode;        /* enum smcr_mode for smcr; -1 for the tcp transport */
	enum perf_mode mode; /* PERF_MODE_TCP / SMCR / FALLBACK / UNKNOWN */
	uint32_t local_reason, peer_reason;
	bool first_contact;               /* smcr: this connection created its link group */
	uint32_t rmbe, peer_rmbe, sndbuf; /* smcr: buffer sizes in bytes, 0 if none */
};

struct perf_tr {
	const char *name; /* "tcp" or "smcr" */
	enum perf_trk kind;
	int (*socket)(int domain, int type, int protocol);
	int (*bind)(int fd, const struct sockaddr *a, socklen_t len);
	int (*listen)(int fd, int backlog);
	int (*accept)(int fd, struct sockaddr *a, socklen_t *len);
	int (*connect)(int fd, const struct sockaddr *a, socklen_t len);
	ssize_t (*send)(int fd, const void *buf, size_t len, int flags);
	ssize_t (*recv)(int fd, void *buf, size_t len, int flags);
	int (*shutdown)(int fd, int how);
	int (*close)(int fd);
	int (*setsockopt)(int fd, int level, int name, const void *val, socklen_t len);
	int (*getsockopt)(int fd, int level, int name, void *val, socklen_t *len);
	int (*getsockname)(int fd, struct sockaddr *a, socklen_t *len);
	int (*epoll_ctl)(int epfd, int op, int fd, struct epoll_event *ev);
	/* epoll_wait; smcr: smcr_epoll_wait (the engine's progress runs in the caller) */
	int (*epoll_wait)(int epfd, struct epoll_event *evs, int max, int timeout);
	int (*set_nonblock)(int fd, bool on);
	/* Fills *ci for a connected fd; returns 0 or -1 with errno. */
	int (*query)(int fd, struct tr_conn_info *ci);
	/* Name of a reason code (smcr_reason_name), "NONE" for 0. */
	const char *(*reason_name)(uint32_t reason);
};

/* The transport of that kind, or NULL when it is not built in. */
const struct perf_tr *tr_get(enum perf_trk kind);
bool tr_have_smcr(void);
const char *tr_kind_name(enum perf_trk kind);

/* Makes the smcr rules (docs/CONFIG.md) choose SMC-R for smcr-perf's own connections:
 * puts "use smc <role> * <addr>" in front of $SMCR_RULES (first match wins, so the
 * user's other rules stay as they are). role: "client", "server" or "both"; addr in the
 * rules' syntax ("*", "127.0.0.1:5301", "*:5301"). Must run before the first smcr call
 * (the rules are read once). Does nothing when SMCR_PERF_NO_RULES is set (then the
 * user's rules decide, and the reported mode shows what they chose). */
void tr_smcr_rules(const char *role, const char *addr);

/* Whole-buffer helpers over a transport: loop over partial sends/receives and EINTR.
 * send_all returns 0 or -1 (errno); recv_all returns 1 when len bytes arrived, 0 on an
 * EOF before that, -1 on error (errno). */
/* Resolves host (NULL: 0.0.0.0) and port into *ss (getaddrinfo; the first result, IPv4 or
 * IPv6). Returns 0, or -1 with a message in err. */
int tr_resolve(const char *host, uint16_t port, bool passive, struct sockaddr_storage *ss,
               socklen_t *len, char *err, size_t elen);
/* "127.0.0.1:5301" / "[::1]:5301" for messages. */
const char *tr_fmt_addr(const struct sockaddr *sa, char *buf, size_t len);

int tr_send_all(const struct perf_tr *tr, int fd, const void *buf, size_t len);
int tr_recv_all(const struct perf_tr *tr, int fd, void *buf, size_t len);

#endif
