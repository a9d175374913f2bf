/* rules.c: parser and matcher of the SMC-R selection rules (rules.h, docs/CONFIG.md). */
#define _GNU_SOURCE
#include "sock/rules.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#define RULE_LINE_MAX 512
#define RULE_FILE_MAX (1 << 20)
#define RULE_DEFAULT_FILE "/etc/smcr.conf"

/* Splits the next whitespace-separated word off *p into w (NUL-terminated, at most cap-1
 * chars). Returns false at the end of the line or when the word is too long. */
static bool next_word(const char **p, char *w, size_t cap)
{
	const char *s = *p;
	while (*s == ' ' || *s == '\t' || *s == '\r')
		s++;
	size_t n = 0;
	while (s[n] && s[n] != ' ' && s[n] != '\t' && s[n] != '\r')
		n++;
	if (n == 0 || n >= cap)
		return false;
	memcpy(w, s, n);
	w[n] = 0;
	*p = s + n;
	return true;
}

static bool parse_uint(const char *s, const char *end, unsigned max, unsigned *out)
{
	if (s == end || end - s > 5)
		return false;
	unsigned v = 0;
	for (const char *c = s; c < end; c++) {
		if (*c < '0' || *c > '9')
			return false;
		v = v * 10 + (unsigned)(*c - '0');
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

static int parse_ports(const char *s, struct rule *r)
{
	if (strcmp(s, "*") == 0) {
		r->port_lo = 0;
		r->port_hi = 65535;
		return 0;
	}
	const char *dash = strchr(s, '-');
	const char *end = s + strlen(s);
	unsigned lo, hi;
	if (!parse_uint(s, dash ? dash : end, 65535, &lo))
		return -SMCR_E_SOCK_RULE_PORT;
	hi = lo;
	if (dash && !parse_uint(dash + 1, end, 65535, &hi))
		return -SMCR_E_SOCK_RULE_PORT;
	if (hi < lo)
		return -SMCR_E_SOCK_RULE_PORT;
	r->port_lo = (uint16_t)lo;
	r->port_hi = (uint16_t)hi;
	return 0;
}

/* address[/len][:ports], or "*" alone. */
static int parse_addr(const char *s, struct rule *r)
{
	char host[64];
	const char *rest;
	r->port_lo = 0;
	r->port_hi = 65535;
	r->family = 0;
	r->prefix = 0;
	memset(r->addr, 0, sizeof(r->addr));
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || (size_t)(close - s - 1) >= sizeof(host))
			return -SMCR_E_SOCK_RULE_ADDR;
		memcpy(host, s + 1, (size_t)(close - s - 1));
		host[close - s - 1] = 0;
		rest = close + 1;
		if (strcmp(host, "*") == 0) {
			r->family = AF_INET6;
			r->prefix = 0;
		} else {
			if (inet_pton(AF_INET6, host, r->addr) != 1)
				return -SMCR_E_SOCK_RULE_ADDR;
			r->family = AF_INET6;
			r->prefix = 128;
		}
	} else {
		size_t n = strcspn(s, "/:");
		if (n >= sizeof(host) || n == 0)
			return -SMCR_E_SOCK_RULE_ADDR;
		memcpy(host, s, n);
		host[n] = 0;
		rest = s + n;
		if (strcmp(host, "*") == 0) {
			r->family = 0;
		} else {
			if (inet_pton(AF_INET, host, r->addr) != 1)
				return -SMCR_E_SOCK_RULE_ADDR;
			r->family = AF_INET;
			r->prefix = 32;
		}
	}
	if (*rest == '/') {
		if (r->family == 0)
			return -SMCR_E_SOCK_RULE_ADDR; /* "*" /len means nothing */
		const char *e = rest + 1 + strcspn(rest + 1, ":");
		unsigned len;
		if (!parse_uint(rest + 1, e, r->family == AF_INET ? 32 : 128, &len))
			return -SMCR_E_SOCK_RULE_ADDR;
		r->prefix = len;
		rest = e;
	}
	if (*rest == ':')
		return parse_ports(rest + 1, r);
	if (*rest != 0)
		return -SMCR_E_SOCK_RULE_ADDR;
	return 0;
}

int rules_parse_line(const char *line, struct rule *out)
{
	char w[RULE_LINE_MAX];
	const char *p = line;
	char buf[RULE_LINE_MAX];
	/* cut the comment */
	size_t n = strcspn(line, "#");
	if (n >= sizeof(buf))
		return -SMCR_E_SOCK_RULE_SYNTAX;
	memcpy(buf, line, n);
	buf[n] = 0;
	p = buf;
	if (!next_word(&p, w, sizeof(w)))
		return 1; /* blank or comment */
	memset(out, 0, sizeof(*out));
	if (strcmp(w, "use") != 0)
		return -SMCR_E_SOCK_RULE_SYNTAX;
	if (!next_word(&p, w, sizeof(w)))
		return -SMCR_E_SOCK_RULE_SYNTAX;
	if (strcmp(w, "smc") == 0)
		out->action = RULE_SMC;
	else if (strcmp(w, "tcp") == 0)
		out->action = RULE_TCP;
	else if (strcmp(w, "smc-only") == 0)
		out->action = RULE_SMC_ONLY;
	else
		return -SMCR_E_SOCK_RULE_SYNTAX;
	if (!next_word(&p, w, sizeof(w)))
		return -SMCR_E_SOCK_RULE_SYNTAX;
	if (strcmp(w, "client") == 0)
		out->roles = RULE_ROLE_CLIENT;
	else if (strcmp(w, "server") == 0)
		out->roles = RULE_ROLE_SERVER;
	else if (strcmp(w, "both") == 0)
		out->roles = RULE_ROLE_CLIENT | RULE_ROLE_SERVER;
	else
		return -SMCR_E_SOCK_RULE_SYNTAX;
	if (!next_word(&p, w, sizeof(w)) || strlen(w) >= sizeof(out->prog))
		return -SMCR_E_SOCK_RULE_SYNTAX;
	strcpy(out->prog, w);
	if (!next_word(&p, w, sizeof(w)))
		return -SMCR_E_SOCK_RULE_SYNTAX;
	int rc = parse_addr(w, out);
	if (rc < 0)
		return rc;
	if (next_word(&p, w, sizeof(w)))
		return -SMCR_E_SOCK_RULE_SYNTAX; /* trailing words */
	return 0;
}

static int rules_push(struct rules *r, const struct rule *x)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 8;
		struct rule *v = realloc(r->v, cap * sizeof(*v));
		if (!v)
			return -SMCR_E_NOMEM;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = *x;
	return 0;
}

int rules_parse(struct rules *r, const char *text, const char *origin, bool from_env)
{
	unsigned lineno = 0;
	const char *p = text;
	while (*p) {
		size_t n = strcspn(p, from_env ? "\n;" : "\n");
		char line[RULE_LINE_MAX];
		lineno++;
		struct rule x;
		int rc;
		if (n >= sizeof(line)) {
			rc = -SMCR_E_SOCK_RULE_SYNTAX;
		} else {
			memcpy(line, p, n);
			line[n] = 0;
			rc = rules_parse_line(line, &x);
		}
		if (rc == 0) {
			x.line = lineno;
			x.from_env = from_env;
			if (rules_push(r, &x) < 0)
				return -SMCR_E_NOMEM;
		} else if (rc < 0) {
			r->bad_lines++;
			LOG_WARN("rules", "%s:%u: %s; line skipped", origin, lineno,
				 smcr_err_msg(rc));
		}
		p += n;
		if (*p)
			p++;
	}
	return 0;
}

static bool prefix_eq(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;
	if (memcmp(a, b, full) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[full] & mask) == (b[full] & mask);
}

static bool rule_addr_match(const struct rule *x, const struct sockaddr *sa)
{
	if (!sa)
		return x->family == 0 && x->port_lo == 0 && x->port_hi == 65535;
	uint8_t a[16];
	int fam;
	uint16_t port;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
		memcpy(a, &in->sin_addr, 4);
		fam = AF_INET;
		port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
		port = ntohs(in6->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			memcpy(a, &in6->sin6_addr.s6_addr[12], 4);
			fam = AF_INET;
		} else {
			memcpy(a, &in6->sin6_addr, 16);
			fam = AF_INET6;
		}
	} else {
		return false;
	}
	if (port < x->port_lo || port > x->port_hi)
		return false;
	if (x->family == 0)
		return true;
	if (x->family != fam)
		return false;
	return prefix_eq(a, x->addr, x->prefix);
}

enum rule_action rules_match(const struct rules *r, unsigned role, const char *prog,
			     const struct sockaddr *sa, const struct rule **which)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct rule *x = &r->v[i];
		if (!(x->roles & role))
			continue;
		if (fnmatch(x->prog, prog ? prog : "", 0) != 0)
			continue;
		if (!rule_addr_match(x, sa))
			continue;
		if (which)
			*which = x;
		return x->action;
	}
	if (which)
		*which = NULL;
	return RULE_TCP;
}

void rules_free(struct rules *r)
{
	free(r->v);
	memset(r, 0, sizeof(*r));
}

/* ---- the process's set ---- */

/* Every set ever loaded, newest first; current points at the newest. Sets are freed only
 * by rules_fini, so a reader holding an old pointer never reads freed memory. */
struct rules_node {
	struct rules r;
	struct rules_node *older;
};
static pthread_mutex_t rules_lock = PTHREAD_MUTEX_INITIALIZER; /* protects rules_all */
static struct rules_node *rules_all;
static _Atomic(struct rules_node *) rules_current;
static struct rules rules_empty;

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno != ENOENT)
			LOG_WARN("rules", "cannot read %s: errno %d; using no rules from it", path,
				 errno);
		return NULL;
	}
	char *buf = malloc(RULE_FILE_MAX + 1);
	size_t n = buf ? fread(buf, 1, RULE_FILE_MAX, f) : 0;
	fclose(f);
	if (buf)
		buf[n] = 0;
	return buf;
}

static struct rules_node *rules_load(void)
{
	struct rules_node *nd = calloc(1, sizeof(*nd));
	if (!nd)
		return NULL;
	const char *env = getenv("SMCR_RULES");
	if (env && rules_parse(&nd->r, env, "SMCR_RULES", true) < 0)
		LOG_ERR("rules", "out of memory reading SMCR_RULES");
	const char *path = getenv("SMCR_CONFIG");
	if (!path || !*path)
		path = RULE_DEFAULT_FILE;
	char *text = read_file(path);
	if (text) {
		if (rules_parse(&nd->r, text, path, false) < 0)
			LOG_ERR("rules", "out of memory reading %s", path);
		free(text);
	}
	LOG_INFO("rules", "%zu rules loaded (%u bad lines)", nd->r.n, nd->r.bad_lines);
	return nd;
}

static void rules_install(struct rules_node *nd)
{
	pthread_mutex_lock(&rules_lock);
	nd->older = rules_all;
	rules_all = nd;
	atomic_store_explicit(&rules_current, nd, memory_order_release);
	pthread_mutex_unlock(&rules_lock);
}

const struct rules *rules_get(void)
{
	struct rules_node *nd = atomic_load_explicit(&rules_current, memory_order_acquire);
	if (nd)
		return &nd->r;
	pthread_mutex_lock(&rules_lock);
	nd = atomic_load_explicit(&rules_current, memory_order_acquire);
	if (!nd) {
		nd = rules_load();
		if (nd) {
			nd->older = rules_all;
			rules_all = nd;
			atomic_store_explicit(&rules_current, nd, memory_order_release);
		}
	}
	pthread_mutex_unlock(&rules_lock);
	return nd ? &nd->r : &rules_empty;
}

void rules_reload(void)
{
	struct rules_node *nd = rules_load();
	if (nd)
		rules_install(nd);
}

void rules_fini(void)
{
	pthread_mutex_lock(&rules_lock);
	atomic_store(&rules_current, NULL);
	while (rules_all) {
		struct rules_node *o = rules_all->older;
		rules_free(&rules_all->r);
		free(rules_all);
		rules_all = o;
	}
	pthread_mutex_unlock(&rules_lock);
}

const char *rules_prog_name(void)
{
	return program_invocation_short_name;
}
