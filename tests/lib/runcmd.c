/* runcmd.c: run a shell command, capture stdout/stderr/status (runcmd.h). */
#define _GNU_SOURCE
#include "runcmd.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char *slurp_fp(FILE *f, size_t *len)
{
	size_t cap = 4096, n = 0, got;
	char *buf = malloc(cap);
	if (!buf)
		return NULL;
	while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += got;
		if (cap - n < 2) {
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

int runcmd(struct runcmd *r, const char *fmt, ...)
{
	char cmd[8192], full[8400], errpath[] = "/tmp/smcr-runcmd-XXXXXX";
	va_list ap;
	memset(r, 0, sizeof(*r));
	r->status = -1;
	va_start(ap, fmt);
	int n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(cmd))
		return -1;
	int fd = mkstemp(errpath);
	if (fd < 0)
		return -1;
	close(fd);
	snprintf(full, sizeof(full), "( %s ) </dev/null 2>'%s'", cmd, errpath);
	FILE *p = popen(full, "r");
	if (!p) {
		unlink(errpath);
		return -1;
	}
	r->out = slurp_fp(p, &r->outlen);
	int st = pclose(p);
	if (st != -1)
		r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	FILE *e = fopen(errpath, "r");
	if (e) {
		r->err = slurp_fp(e, &r->errlen);
		fclose(e);
	}
	unlink(errpath);
	if (!r->out)
		r->out = strdup("");
	if (!r->err)
		r->err = strdup("");
	return 0;
}

void runcmd_free(struct runcmd *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

const char *shq(const char *s)
{
	static char slots[8][4096];
	static unsigned next;
	char *o = slots[next++ % 8];
	size_t j = 0;
	o[j++] = '\'';
	for (; *s && j + 6 < sizeof(slots[0]); s++) {
		if (*s == '\'') {
			memcpy(o + j, "'\\''", 4);
			j += 4;
		} else {
			o[j++] = *s;
		}
	}
	o[j++] = '\'';
	o[j] = 0;
	return o;
}

int line_at(const char *text, unsigned n, char *buf, size_t cap)
{
	const char *p = text;
	for (unsigned i = 0; i < n; i++) {
		p = strchr(p, '\n');
		if (!p)
			return 0;
		p++;
	}
	if (!*p)
		return 0;
	const char *e = strchr(p, '\n');
	size_t len = e ? (size_t)(e - p) : strlen(p);
	if (len + 1 > cap)
		len = cap - 1;
	memcpy(buf, p, len);
	buf[len] = 0;
	return 1;
}

unsigned line_count(const char *text)
{
	unsigned n = 0;
	const char *p = text;
	while (*p) {
		const char *e = strchr(p, '\n');
		n++;
		if (!e)
			break;
		p = e + 1;
	}
	return n;
}
