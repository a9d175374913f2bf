/* runcmd.h: test helper that runs a shell command and captures its stdout, stderr and exit
 * status (for tests of command-line tools: smcr-decode, tshark). Single-threaded. */
#ifndef SMCR_TESTS_RUNCMD_H
#define SMCR_TESTS_RUNCMD_H

#include <stddef.h>

struct runcmd {
	char *out;	/* stdout, NUL-terminated (heap) */
	size_t outlen;
	char *err;	/* stderr, NUL-terminated (heap) */
	size_t errlen;
	int status;	/* exit status 0..255, or 128 + signal, or -1 if it could not run */
};

/* Runs cmd with /bin/sh -c; stdin is /dev/null unless cmd redirects it. 0 if the command
 * ran (whatever its status), -1 if it could not be started. Free with runcmd_free. */
int runcmd(struct runcmd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void runcmd_free(struct runcmd *r);

/* Quotes s for the shell ('...' with embedded quotes escaped) into a static rotating
 * buffer (8 slots); for building commands from paths. */
const char *shq(const char *s);

/* The n-th line (0-based) of text into buf, without the newline. false if absent. */
int line_at(const char *text, unsigned n, char *buf, size_t cap);
/* Number of lines (a last line without newline counts). */
unsigned line_count(const char *text);

#endif
