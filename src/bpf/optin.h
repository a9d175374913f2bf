/* optin.h: the application side of SMC-R capability discovery (docs/protocol/procedures.md 2.1,
 * docs/protocol/linux-interop.md 3, docs/parts/bpf.md). libc only: no libbpf, no privilege.
 *
 * The engine calls smcr_optin_enable() on a TCP socket after socket() and before
 * connect()/listen(), and smcr_optin_result() after connect() completed or accept()
 * returned. Only SMCR_OPTIN_SMC allows CLC on the connection (docs/protocol/wire-formats.md 1:
 * "never send CLC bytes on a connection where the option exchange failed"); every other result
 * is plain TCP, with a reason (smcr_optin_reason) and an error code of the table
 * (smcr_optin_err) to record as the fallback reason.
 *
 * Both calls go through the private socket-option level SMCR_SOL handled by the installed
 * cgroup programs (bpf/abi.h documents the level and option names). Each is one
 * setsockopt/getsockopt system call, taken under the socket lock, so a read after a
 * completed connect() or a returned accept() sees the handshake's outcome. */
#ifndef SMCR_BPF_OPTIN_H
#define SMCR_BPF_OPTIN_H

#include <stdint.h>

#include "util/err.h"

/* Outcome of the option exchange on one socket. Stable names: tests match on them. */
#define SMCR_OPTIN_RESULTS(X)                                                                      \
	X(SMC, "both sides exchanged the SMC-R option: run the CLC handshake")                     \
	X(PEER_NO, "the peer's SYN/SYN-ACK did not carry the SMC-R option")                        \
	X(NOT_INSTALLED, "smcr BPF programs not installed for this socket's cgroup "               \
	                 "(ENOPROTOOPT; run smcr-bpf install)")                                    \
	X(NOT_REQUESTED, "socket (or its listener) was not opted in")                              \
	X(TOO_LATE, "opted in after connect()/listen(): the SYN had already gone")                 \
	X(PENDING, "handshake not complete yet")                                                   \
	X(LISTENING, "armed listener: read the result on accepted sockets")                        \
	X(NO_SPACE, "no TCP option space left for the SMC-R option")                               \
	X(SYNCOOKIE, "the server answered with a syncookie: no option echoed")                     \
	X(NO_ECHO, "the peer offered but our SYN-ACK did not carry the option")                    \
	X(NO_SAVE_SYN, "listener not armed: TCP_SAVE_SYN could not be set")                        \
	X(ARM_FAILED, "the kernel refused the header-option callbacks")                            \
	X(NOT_TCP, "not a TCP socket")                                                             \
	X(ABI, "installed smcr BPF programs speak another ABI version")                            \
	X(ERROR, "the state could not be read (see errno)")

enum smcr_optin_result {
#define X(name, msg) SMCR_OPTIN_##name,
	SMCR_OPTIN_RESULTS(X)
#undef X
	    SMCR_OPTIN__COUNT
};

/* Raw state for diagnostics (smcr-stat, logs). */
struct smcr_optin_info {
	uint32_t abi;   /* ABI reported by the programs, 0 when not read */
	uint32_t flags; /* SMCR_F_* of bpf/abi.h */
	int err;        /* errno of a failed system call, else 0 */
};

/* Opts a TCP socket in. Returns 0, or -SMCR_E_BPF_NOT_INSTALLED (ENOPROTOOPT: no programs
 * cover this socket's cgroup), -SMCR_E_BPF_NOT_TCP, -SMCR_E_BPF_REFUSED (the programs
 * refused the request) or -SMCR_E_BPF_SYSCALL (errno in *err when err is not NULL). */
int smcr_optin_enable(int fd, int *err) SMCR_MUST_CHECK;
/* The same for a socket the caller knows is TCP (the socket layer makes its objects for
 * TCP sockets only): no SO_PROTOCOL query, one system call less per connection. */
int smcr_optin_enable_tcp(int fd, int *err) SMCR_MUST_CHECK;

/* Reads the outcome. info may be NULL. */
enum smcr_optin_result smcr_optin_result(int fd, struct smcr_optin_info *info);

/* The pure part of smcr_optin_result: what a state read (abi, flags) means. */
enum smcr_optin_result smcr_optin_classify(uint32_t abi, uint32_t flags);

/* "SMC", "PEER_NO", ...; "UNKNOWN" out of range. */
const char *smcr_optin_name(enum smcr_optin_result r);
/* One-line reason for logs and tools. */
const char *smcr_optin_reason(enum smcr_optin_result r);
/* 0 for SMCR_OPTIN_SMC, else the -SMCR_E_BPF_* code to record as the fallback reason. */
int smcr_optin_err(enum smcr_optin_result r);

#endif
