/* discovery.h: which connections try SMC-R, combining the rules (rules.h, docs/CONFIG.md)
 * with the TCP-option discovery of the installed BPF programs (docs/protocol/procedures.md 2.1,
 * bpf/optin.h, docs/parts/bpf.md). The preferred source is the option exchange; the rules
 * are the only source when the programs are not installed for the socket's cgroup.
 *
 * Decision, per socket, before connect()/listen() (client: the destination; listener: its
 * bound address, a wildcard listener matching the rules by port only):
 *   rule "use tcp"               never opted in; TCP, reason RULE_TCP.
 *   rule "use smc|smc-only"      opt in. Installed: CLC only if both sides exchanged the
 *                                option, else TCP with the option's reason (smc-only: fail).
 *                                Not installed: rules-only discovery (CLC on every
 *                                connection the rules mark, as before BPF).
 *   no rule matches (default)    opt in. Installed: as "use smc". Not installed: TCP,
 *                                reason BPF_NOT_INSTALLED.
 * "Installed" is detected per socket: the private setsockopt answers (it fails with
 * ENOPROTOOPT outside a covered cgroup). "Not installed" is then remembered for 1 s per
 * process (a system call less per connection; programs attached later are seen within
 * that second; a forked child asks again).
 *
 * After connect() completed (client) or accept() returned (server) the result is read
 * with smcr_optin_result(): only SMCR_OPTIN_SMC lets CLC run; every other result is a
 * fallback before any CLC byte, with local reason SMCR_REASON_BPF(result).
 *
 * Threads: stateless; callers hold the socket's lock for the fields they write. */
#ifndef SMCR_SOCK_DISCOVERY_H
#define SMCR_SOCK_DISCOVERY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sock/rules.h"

/* How a socket's SMC-R capability is discovered (struct sock.disc). */
enum disc_mode {
	DISC_NONE = 0,	/* not decided yet, or TCP chosen before connect/listen */
	DISC_RULES = 1, /* rules only: CLC on every connection the rules mark */
	DISC_BPF = 2,	/* opted in through the TCP option: read the result */
};

struct disc_choice {
	enum rule_action action; /* RULE_TCP: plain TCP with reason below */
	enum disc_mode mode;
	uint32_t reason;	 /* RULE_TCP: SMCR_REASON_RULE_TCP or SMCR_REASON_BPF_* */
};

/* Client, before connect(fd, dst): matches the rules and opts fd in when they allow. */
struct disc_choice disc_client(int fd, const struct sockaddr *dst);
/* Listener, before listen(fd): the same for its bound address. */
struct disc_choice disc_listener(int fd);
/* Whether ss (AF_INET or AF_INET6) is the wildcard address; false for other families. */
bool disc_wildcard(const struct sockaddr_storage *ss);
/* The server rule for a listener bound to ss: for one address the rules' match for it; for
 * the wildcard the first server rule whose program and port match, whatever its address.
 * *which is that rule (NULL: none, RULE_TCP returned). */
enum rule_action disc_listener_rule(const struct sockaddr_storage *ss, const struct rule **which);
/* After connect()/accept() of a socket opted in (DISC_BPF): 0 when both sides exchanged
 * the option (run CLC), else the local fallback reason (SMCR_REASON_BPF_*). */
uint32_t disc_result(int fd);
/* Opt-in system calls made, since start (tests: the "not installed" memory). */
uint64_t disc_optin_probes(void);
/* Name of an SMCR_REASON_BPF_* code ("BPF_PEER_NO", ...), NULL for any other code. */
const char *disc_reason_name(uint32_t reason);

#endif
