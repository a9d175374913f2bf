/* rules.h: which connections use SMC-R, by explicit configuration (docs/design/engine-decisions.md
 * decision 5; the syntax is documented for users in docs/CONFIG.md, libsdp-style).
 *
 *   use <smc|tcp|smc-only> <client|server|both> <program-glob> <address>[:<ports>]
 *
 * address: "*" (any), an IPv4 address "a.b.c.d[/len]", or an IPv6 one "[x::y][/len]";
 * ports: "*", "n" or "n-m". A bare "*" is any address and any port. "#" starts a comment.
 * The program glob (fnmatch(3)) is matched against the program's short name.
 * For role client the address is the connect() destination; for role server it is the
 * local address and port of each accepted connection (what getsockname gives, so a
 * wildcard listener is matched per connection). IPv4-mapped IPv6 addresses match IPv4
 * rules. First match wins; no match means tcp.
 *
 * Sources, in this order: $SMCR_RULES (the same syntax inline, rules separated by
 * newlines or ';'), then the file $SMCR_CONFIG (default /etc/smcr.conf; a missing file is
 * no error). A bad line is logged with its origin and line number and skipped.
 *
 * Threads: a struct rules is immutable once parsed; rules_get() returns the process's set
 * (loaded on first use, replaced only by rules_reload, which tests use: the old set is
 * kept until rules_fini so readers never see it freed). */
#ifndef SMCR_SOCK_RULES_H
#define SMCR_SOCK_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util/err.h"

enum rule_action {
	RULE_TCP = 0,	   /* plain TCP, no CLC */
	RULE_SMC = 1,	   /* propose / expect SMC-R, fall back to TCP when it cannot be used */
	RULE_SMC_ONLY = 2, /* SMC-R or nothing: a fallback fails the connection */
};

#define RULE_ROLE_CLIENT 1u
#define RULE_ROLE_SERVER 2u
#define RULE_PROG_MAX 64

struct rule {
	enum rule_action action;
	unsigned roles;		    /* RULE_ROLE_* mask */
	char prog[RULE_PROG_MAX];   /* fnmatch pattern */
	int family;		    /* 0 any address, AF_INET or AF_INET6 */
	uint8_t addr[16];	    /* network order; IPv4 in the first 4 bytes */
	unsigned prefix;	    /* bits compared */
	uint16_t port_lo, port_hi;  /* inclusive; 0-65535 is any */
	unsigned line;		    /* line in its origin, for logs */
	bool from_env;		    /* origin: $SMCR_RULES (else the file) */
};

struct rules {
	struct rule *v;
	size_t n, cap;
	unsigned bad_lines; /* lines skipped by the parser */
};

/* Parses one line (without its newline). Returns 0 and fills *out, 1 for a blank or
 * comment line, or -SMCR_E_SOCK_RULE_SYNTAX / _ADDR / _PORT. */
SMCR_MUST_CHECK int rules_parse_line(const char *line, struct rule *out);
/* Appends every rule of text (lines separated by '\n' or ';'); bad lines are logged
 * (origin:line) and counted in r->bad_lines. Returns 0 or -SMCR_E_NOMEM. */
SMCR_MUST_CHECK int rules_parse(struct rules *r, const char *text, const char *origin,
				bool from_env);
/* First rule matching (role: one RULE_ROLE_*, prog: short program name, sa: address to
 * match, may be NULL = matches only address "*"). Returns its action, RULE_TCP when none
 * matches; *which (may be NULL) gets the rule or NULL. */
enum rule_action rules_match(const struct rules *r, unsigned role, const char *prog,
			     const struct sockaddr *sa, const struct rule **which);
void rules_free(struct rules *r);

/* The process's rules (see the top of this file). Never NULL. */
const struct rules *rules_get(void);
/* Reads $SMCR_RULES and $SMCR_CONFIG again (tests). */
void rules_reload(void);
/* Frees every set loaded (process end, tests). No reader may run. */
void rules_fini(void);
/* The program's short name used for matching. */
const char *rules_prog_name(void);

#endif
