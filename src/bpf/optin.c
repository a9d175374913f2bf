/* optin.c: opt a socket in to SMC-R discovery and read the outcome through the private
 * socket-option level of the smcr BPF programs (docs/protocol/procedures.md 2.1,
 * docs/protocol/linux-interop.md 3; level and names in bpf/abi.h). libc only. */
#define _GNU_SOURCE
#include "bpf/optin.h"

#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

#include "bpf/abi.h"

struct optin_row {
	const char *name;
	const char *msg;
};

static const struct optin_row optin_rows[SMCR_OPTIN__COUNT] = {
#define X(n, m) [SMCR_OPTIN_##n] = {#n, m},
    SMCR_OPTIN_RESULTS(X)
#undef X
};

/* Results other than SMC, as fallback reasons of the error table. */
static const int optin_errs[SMCR_OPTIN__COUNT] = {
    [SMCR_OPTIN_SMC] = 0,
    [SMCR_OPTIN_PEER_NO] = -SMCR_E_BPF_PEER_NO,
    [SMCR_OPTIN_NOT_INSTALLED] = -SMCR_E_BPF_NOT_INSTALLED,
    [SMCR_OPTIN_NOT_REQUESTED] = -SMCR_E_BPF_NOT_REQUESTED,
    [SMCR_OPTIN_TOO_LATE] = -SMCR_E_BPF_TOO_LATE,
    [SMCR_OPTIN_PENDING] = -SMCR_E_BPF_PENDING,
    [SMCR_OPTIN_LISTENING] = -SMCR_E_BPF_LISTENING,
    [SMCR_OPTIN_NO_SPACE] = -SMCR_E_BPF_NO_SPACE,
    [SMCR_OPTIN_SYNCOOKIE] = -SMCR_E_BPF_SYNCOOKIE,
    [SMCR_OPTIN_NO_ECHO] = -SMCR_E_BPF_NO_ECHO,
    [SMCR_OPTIN_NO_SAVE_SYN] = -SMCR_E_BPF_NO_SAVE_SYN,
    [SMCR_OPTIN_ARM_FAILED] = -SMCR_E_BPF_ARM_FAILED,
    [SMCR_OPTIN_NOT_TCP] = -SMCR_E_BPF_NOT_TCP,
    [SMCR_OPTIN_ABI] = -SMCR_E_BPF_ABI,
    [SMCR_OPTIN_ERROR] = -SMCR_E_BPF_SYSCALL,
};

const char *smcr_optin_name(enum smcr_optin_result r)
{
	if ((unsigned)r >= SMCR_OPTIN__COUNT)
		return "UNKNOWN";
	return optin_rows[r].name;
}

const char *smcr_optin_reason(enum smcr_optin_result r)
{
	if ((unsigned)r >= SMCR_OPTIN__COUNT)
		return "unknown result";
	return optin_rows[r].msg;
}

int smcr_optin_err(enum smcr_optin_result r)
{
	if ((unsigned)r >= SMCR_OPTIN__COUNT)
		return -SMCR_E_INTERNAL;
	return optin_errs[r];
}

static int is_tcp(int fd)
{
	int proto = 0;
	socklen_t len = sizeof(proto);

	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) != 0)
		return -errno;
	return proto == IPPROTO_TCP;
}

int smcr_optin_enable(int fd, int *err)
{
	int t;

	if (err)
		*err = 0;
	t = is_tcp(fd);
	if (t < 0) {
		if (err)
			*err = -t;
		return -SMCR_E_BPF_SYSCALL;
	}
	if (!t)
		return -SMCR_E_BPF_NOT_TCP;
	return smcr_optin_enable_tcp(fd, err);
}

int smcr_optin_enable_tcp(int fd, int *err)
{
	int one = 1;

	if (err)
		*err = 0;
	if (setsockopt(fd, SMCR_SOL, SMCR_SO_ENABLE, &one, sizeof(one)) == 0)
		return 0;
	if (err)
		*err = errno;
	switch (errno) {
	case ENOPROTOOPT:
		return -SMCR_E_BPF_NOT_INSTALLED;
	case EPERM:
		return -SMCR_E_BPF_REFUSED;
	default:
		return -SMCR_E_BPF_SYSCALL;
	}
}

enum smcr_optin_result smcr_optin_classify(uint32_t abi, uint32_t f)
{
	if (abi != SMCR_BPF_ABI)
		return SMCR_OPTIN_ABI;
	if (!(f & SMCR_F_REQUESTED))
		return SMCR_OPTIN_NOT_REQUESTED;
	if (f & SMCR_F_LATE)
		return SMCR_OPTIN_TOO_LATE;
	if (f & SMCR_F_NOSAVESYN)
		return SMCR_OPTIN_NO_SAVE_SYN;
	if (f & SMCR_F_ARMFAIL)
		return SMCR_OPTIN_ARM_FAILED;
	if (!(f & SMCR_F_ARMED))
		return SMCR_OPTIN_PENDING; /* opted in, connect()/listen() not called yet */
	if (f & SMCR_F_CHILD) {
		/* Server: only an echo the SYN-ACK writer confirmed counts (rule R4). */
		if (!(f & SMCR_F_DONE) || (f & SMCR_F_PENDING))
			return SMCR_OPTIN_PENDING;
		if (f & SMCR_F_ECHOED)
			return SMCR_OPTIN_SMC;
		if (f & SMCR_F_COOKIE)
			return SMCR_OPTIN_SYNCOOKIE;
		if (f & SMCR_F_NOSPACE)
			return SMCR_OPTIN_NO_SPACE;
		if (f & SMCR_F_PEER)
			return SMCR_OPTIN_NO_ECHO;
		return SMCR_OPTIN_PEER_NO;
	}
	if (f & SMCR_F_LISTENER)
		return SMCR_OPTIN_LISTENING;
	if (f & SMCR_F_ACTIVE) {
		/* Client: SMC only if our SYN carried it and the SYN-ACK answered with it. */
		if (!(f & SMCR_F_DONE))
			return SMCR_OPTIN_PENDING;
		if (!(f & SMCR_F_SENT))
			return SMCR_OPTIN_NO_SPACE;
		if (f & SMCR_F_PEER)
			return SMCR_OPTIN_SMC;
		return SMCR_OPTIN_PEER_NO;
	}
	return SMCR_OPTIN_PENDING;
}

enum smcr_optin_result smcr_optin_result(int fd, struct smcr_optin_info *info)
{
	struct smcr_bpf_state st = {0, 0};
	socklen_t len = sizeof(st);
	struct smcr_optin_info dummy;
	int t;

	if (!info)
		info = &dummy;
	info->abi = 0;
	info->flags = 0;
	info->err = 0;
	if (getsockopt(fd, SMCR_SOL, SMCR_SO_STATE, &st, &len) != 0) {
		info->err = errno;
		/* Unknown level: the kernel's IPv6 code says ENOPROTOOPT, its IPv4 getsockopt
		 * EOPNOTSUPP (setsockopt says ENOPROTOOPT for both). */
		if (info->err != ENOPROTOOPT && info->err != EOPNOTSUPP)
			return SMCR_OPTIN_ERROR;
		/* An uncovered socket and a non-TCP one get the same errno: tell apart. */
		t = is_tcp(fd);
		if (t == 0)
			return SMCR_OPTIN_NOT_TCP;
		return SMCR_OPTIN_NOT_INSTALLED;
	}
	if (len < sizeof(st)) {
		info->err = EPROTO;
		return SMCR_OPTIN_ABI;
	}
	info->abi = st.abi;
	info->flags = st.flags;
	return smcr_optin_classify(st.abi, st.flags);
}
