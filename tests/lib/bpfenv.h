/* bpfenv.h: the private world of one bpf test (docs/parts/bpf.md, "Tests").
 *
 * Each test gets its own cgroup v2 directory T (never the real root, which other
 * programs on the machine use; named smcr-test-<pid>) with two children: T/in, where smcr-bpf
 * installs the programs, and T/out, not covered. It gets its own bpffs mount in a temporary
 * directory for the pins, and its own named network namespaces. Test peers are forked processes
 * that move themselves into T/in or T/out and into a namespace; the test process itself
 * never moves. bpfenv_teardown() (also run at exit) removes everything, and setup first
 * removes what killed earlier runs left behind.
 *
 * Ownership: one struct bpfenv per test process, written only by that process (the
 * forked peers get copies and only read them). */
#ifndef SMCR_TESTS_BPFENV_H
#define SMCR_TESTS_BPFENV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BPFENV_SKIP 77 /* CTest SKIP_RETURN_CODE */
#define BPFENV_MAX_NS 6

struct bpfenv {
	char cg_root[256]; /* the cgroup v2 mount */
	char cg[512];      /* T: this test's cgroup */
	char cg_in[600];   /* T/in: covered by the programs */
	char cg_out[600];  /* T/out: not covered */
	char mnt[256];     /* bpffs mount point (temporary directory) */
	char pin[300];     /* mnt/smcr: the pin dir */
	char tool[512];    /* smcr-bpf */
	char ns[BPFENV_MAX_NS][64];
	int nns;
	int mounted;
	int installed;
};

/* Checks root, cgroup v2, bpffs and the smcr-bpf binary. Returns 0, or BPFENV_SKIP with
 * a reason in why. */
int bpfenv_precheck(char *why, size_t n);
/* Creates the cgroups, the bpffs mount and (install != 0) installs on T/in. 0 or -1. */
int bpfenv_setup(struct bpfenv *e, int install);
/* Removes everything setup and bpfenv_netns created. Safe to call twice. */
void bpfenv_teardown(struct bpfenv *e);

/* Creates a named network namespace "smcrt-<pid>-<tag>" with lo up; name copied to
 * out. 0 or -1. */
int bpfenv_netns(struct bpfenv *e, const char *tag, char *out, size_t n);
/* Joins a named namespace (NULL: stay). 0 or -1. */
int bpfenv_setns(const char *name);
/* Moves the calling process into T/in (covered 1), T/out (0) or T/in/sub (2, which the
 * test creates itself; removed by teardown). 0 or -1. */
int bpfenv_enter(const struct bpfenv *e, int covered);

/* Runs a shell command built from fmt; returns its exit status (-1 if it could not). */
int bpfenv_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Runs a command and captures its stdout (NUL-terminated, truncated to n-1). */
int bpfenv_sh_out(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Shared memory for peers' results (MAP_SHARED anonymous). */
void *bpfenv_shared(size_t n);
void bpfenv_unshared(void *p, size_t n);

/* Forks a peer: it joins cgroup (covered) and netns, runs fn(arg) and exits with its
 * return value. Returns the pid, or -1. */
pid_t bpfenv_spawn(const struct bpfenv *e, int covered, const char *netns, int (*fn)(void *),
                   void *arg);
/* Waits for a peer; returns its exit status, or -1 if it died of a signal or did not
 * end within timeout_ms (then it is killed). */
int bpfenv_wait(pid_t pid, int timeout_ms);

/* Two namespaces of e, "<pid>-a" and "<pid>-b" (names to a and b, each of size n), joined by
 * a veth pair: va in a (10.77.0.1/24, fd77::1/64), vb in b (10.77.0.2/24, fd77::2/64), both
 * up. 0 or -1. */
int bpfenv_veth_pair(struct bpfenv *e, char *a, char *b, size_t n);

struct CMUnitTest;
/* The main() of a bpf test: bpfenv_precheck, then need_cmd (a shell command that succeeds
 * when a tool the test needs is there, need_what its name; NULL: none). Either failing
 * prints "SKIP: <reason>" and returns BPFENV_SKIP; else the cmocka group tests[0..n) runs
 * with setup and teardown ($IT_FILTER: only the tests it matches). */
int bpfenv_main(const struct CMUnitTest *tests, size_t n, const char *need_cmd,
		const char *need_what, int (*setup)(void **), int (*teardown)(void **));
#define BPFENV_MAIN(tests, need_cmd, need_what, setup, teardown)                            \
	bpfenv_main(tests, sizeof(tests) / sizeof((tests)[0]), need_cmd, need_what, setup,   \
		    teardown)
/* A group teardown: bpfenv_teardown of the environment the last bpfenv_setup made. */
int bpfenv_group_teardown(void **state);

#endif
