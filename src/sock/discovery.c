/* discovery.c: SMC-R capability discovery for the socket layer (discovery.h): the rules
 * plus the TCP option exchanged by the smcr BPF programs (docs/protocol/procedures.md 2.1; opt-in
 * channel bpf/optin.h). */
#define _GNU_SOURCE
#include "sock/discovery.h"

#include <fnmatch.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <smcr/smcr.h>
#include <string.h>

#include "bpf/optin.h"
#include "sock/sys.h"
#include "util/clock.h"
#include "util/log.h"

/* Reason codes: SMCR_REASON_BPF_BASE | enum smcr_optin_result (smcr.h). */
_Static_assert(SMCR_REASON_BPF_PEER_NO == (SMCR_REASON_BPF_BASE | SMCR_OPTIN_PEER_NO),
	       "smcr.h reason codes follow bpf/optin.h");
_Static_assert(SMCR_REASON_BPF_NOT_INSTALLED == (SMCR_REASON_BPF_BASE | SMCR_OPTIN_NOT_INSTALLED),
	       "smcr.h reason codes follow bpf/optin.h");
static const char *const disc_names[SMCR_OPTIN__COUNT] = {
#define X(n, m) [SMCR_OPTIN_##n] = "BPF_" #n,
	SMCR_OPTIN_RESULTS(X)
#undef X
};

const char *disc_reason_name(uint32_t reason)
{
	if ((reason & 0xffff0000u) != SMCR_REASON_BPF_BASE)
		return NULL;
	uint32_t r = reason & 0xffffu;
	if (r == 0 || r >= SMCR_OPTIN__COUNT)
		return NULL;
	return disc_names[r];
}

static uint32_t reason_of(enum smcr_optin_result r)
{
	return SMCR_REASON_BPF_BASE | (uint32_t)r;
}

/* "Not installed" is remembered for DISC_NOINST_NS: the opt-in is a system call on
 * every connect and listen, and without the programs it fails the same way each time
 * (ENOPROTOOPT). Programs attached later (or a move to a covered cgroup) are seen by the
 * sockets made from then on at most DISC_NOINST_NS later; a forked child asks again. */
#define DISC_NOINST_NS (1000ull * SMCR_NS_PER_MS)
static _Atomic uint64_t disc_noinst_until; /* 0: ask; else no programs until then */
static _Atomic uint64_t disc_probes;	    /* opt-in system calls made (tests) */
static pthread_once_t disc_once = PTHREAD_ONCE_INIT; /* the atfork handler, registered */

uint64_t disc_optin_probes(void)
{
	return atomic_load_explicit(&disc_probes, memory_order_relaxed);
}

static void disc_atfork_child(void)
{
	atomic_store_explicit(&disc_noinst_until, 0, memory_order_relaxed);
}

static void disc_init(void)
{
	pthread_atfork(NULL, NULL, disc_atfork_child);
}

/* Opt fd in. Returns 0 when the programs took the request, else the reason (BPF_*). */
static uint32_t disc_optin(int fd)
{
	int err = 0;
	uint64_t now = smcr_now_ns();
	if (now < atomic_load_explicit(&disc_noinst_until, memory_order_relaxed))
		return SMCR_REASON_BPF_NOT_INSTALLED;
	atomic_fetch_add_explicit(&disc_probes, 1, memory_order_relaxed);
	int rc = smcr_optin_enable_tcp(fd, &err); /* every socket object is TCP (api.c) */
	if (rc == 0)
		return 0;
	if (rc == -SMCR_E_BPF_NOT_INSTALLED) {
		(void)pthread_once(&disc_once, disc_init);
		atomic_store_explicit(&disc_noinst_until, now + DISC_NOINST_NS,
				      memory_order_relaxed);
		return SMCR_REASON_BPF_NOT_INSTALLED;
	}
	LOG_WARN("disc", "fd %d: opt-in failed (%s, errno %d): rules only", fd,
		 smcr_err_name(rc), err);
	return rc == -SMCR_E_BPF_NOT_TCP ? reason_of(SMCR_OPTIN_NOT_TCP)
					 : reason_of(SMCR_OPTIN_ERROR);
}

/* The common part once a rule (or none: which == NULL) was chosen. */
static struct disc_choice disc_decide(int fd, enum rule_action a, const struct rule *which)
{
	struct disc_choice c = { .action = a, .mode = DISC_NONE, .reason = 0 };
	if (which && a == RULE_TCP) {
		c.reason = SMCR_REASON_RULE_TCP;
		return c;
	}
	uint32_t why = disc_optin(fd);
	if (why == 0) {
		c.action = which ? a : RULE_SMC; /* default with the option installed: SMC */
		c.mode = DISC_BPF;
		return c;
	}
	if (!which) {
		/* default, no option: TCP, and say why */
		c.action = RULE_TCP;
		c.reason = why;
		return c;
	}
	c.mode = DISC_RULES; /* the rule asks for SMC-R: the rules are the discovery */
	return c;
}

struct disc_choice disc_client(int fd, const struct sockaddr *dst)
{
	const struct rule *which = NULL;
	enum rule_action a =
		rules_match(rules_get(), RULE_ROLE_CLIENT, rules_prog_name(), dst, &which);
	return disc_decide(fd, a, which);
}

bool disc_wildcard(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)ss)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	if (ss->ss_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(
			&((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr);
	return false;
}

enum rule_action disc_listener_rule(const struct sockaddr_storage *ss, const struct rule **which)
{
	const struct rules *rs = rules_get();
	const char *prog = rules_prog_name();
	*which = NULL;
	if (!disc_wildcard(ss))
		return rules_match(rs, RULE_ROLE_SERVER, prog, (const struct sockaddr *)ss, which);
	/* A wildcard listener may accept on any address: a server rule applies when its
	 * program and port match, whatever its address (first match wins). */
	uint16_t port = ntohs(ss->ss_family == AF_INET
				      ? ((const struct sockaddr_in *)(const void *)ss)->sin_port
				      : ((const struct sockaddr_in6 *)(const void *)ss)->sin6_port);
	for (size_t i = 0; i < rs->n; i++) {
		const struct rule *x = &rs->v[i];
		if (!(x->roles & RULE_ROLE_SERVER) || fnmatch(x->prog, prog, 0) != 0 ||
		    port < x->port_lo || port > x->port_hi)
			continue;
		*which = x;
		return x->action;
	}
	return RULE_TCP;
}

struct disc_choice disc_listener(int fd)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);
	memset(&ss, 0, sizeof(ss));
	if (sock_sys.getsockname(fd, (struct sockaddr *)&ss, &l) < 0)
		ss.ss_family = AF_UNSPEC;
	const struct rule *which;
	enum rule_action a = disc_listener_rule(&ss, &which);
	return disc_decide(fd, a, which);
}

uint32_t disc_result(int fd)
{
	struct smcr_optin_info info;
	enum smcr_optin_result r = smcr_optin_result(fd, &info);
	if (r == SMCR_OPTIN_SMC)
		return 0;
	LOG_INFO("disc", "fd %d: option exchange says %s (flags 0x%x): TCP", fd,
		 smcr_optin_name(r), info.flags);
	return reason_of(r);
}
