/* proc.c: the wrappers of fork (fork, __fork, _Fork, daemon), the exec family and
 * posix_spawn/posix_spawnp.
 *
 * fork: the socket layer's pthread_atfork handlers do the work (a child starts with no
 * engine and no progress thread of its own and makes them when it first needs them; the
 * parent's internal fds are closed in the child without any protocol). _Fork runs no
 * atfork handlers, so after the real _Fork the child runs the same child handler here.
 *
 * exec: with SMCR_STICKY=1 (smcr-run --sticky) an environment passed to execve, execle,
 * execvpe, fexecve, execveat or posix_spawn that lacks this library in LD_PRELOAD or the
 * SMCR_* settings of this process gets them back (onload's habit: programs that scrub
 * their environment, sudo-like wrappers). Without it the environment is passed unchanged,
 * so a program that removes LD_PRELOAD gets what it asked for. */
#define _GNU_SOURCE
#include "preload/pl.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

pid_t fork(void) { return PL_REAL(fork)(); }
pid_t __fork(void) { return PL_REAL(__fork)(); }
pid_t _Fork(void) { return PL_REAL(_Fork)(); }
int daemon(int nochdir, int noclose) { return PL_REAL(daemon)(nochdir, noclose); }

/* _exit and _Exit: the kernel closes a TCP socket's connection with a FIN after every
 * byte; an SMC-R connection's close is protocol run by this process, which _exit would
 * cut off (the peer then sees the link of a dead process fail: ECONNRESET instead of EOF,
 * and the bytes of a just-closed connection may be lost). So they first do what exit()
 * does for smcr (src/sock/engine.c): close what is open and let the closes finish, for at
 * most SMCR_EXIT_WAIT_MS; a process with no SMC-R engine of its own (a forked child that
 * never made a connection, a child after a failed exec) exits at once. */
void sock_exit_flush(void);

void _exit(int status)
{
	sock_exit_flush();
	pl_ensure();
	if (pl_real._exit)
		pl_real._exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

void _Exit(int status)
{
	_exit(status);
}

/* ---- the sticky environment ---- */

static bool pl_sticky(void)
{
	const char *v = getenv("SMCR_STICKY");
	return v && v[0] == '1';
}

/* This library's path (for LD_PRELOAD). */
static const char *pl_self(void)
{
	static char path[4096];
	if (!path[0]) {
		Dl_info di;
		if (dladdr((void *)pl_init, &di) && di.dli_fname && strlen(di.dli_fname) < sizeof(path))
			strcpy(path, di.dli_fname);
	}
	return path;
}

static bool env_has(char *const e[], const char *name, size_t nl)
{
	for (size_t i = 0; e && e[i]; i++)
		if (!strncmp(e[i], name, nl) && e[i][nl] == '=')
			return true;
	return false;
}

/* A new environment: e plus what this process has and e lacks (its SMCR_* variables, and
 * LD_PRELOAD with this library appended). Allocated and never freed: the exec either
 * replaces the process or fails, and a failed exec is rare enough. NULL when nothing is
 * missing (or out of memory: then the exec goes ahead with e). */
static char **pl_sticky_env(char *const e[])
{
	const char *self = pl_self();
	size_t n = 0, add = 0;
	while (e && e[n])
		n++;
	for (char **p = environ; p && *p; p++)
		if (!strncmp(*p, "SMCR_", 5))
			add++;
	char **out = calloc(n + add + 2, sizeof(char *));
	if (!out)
		return NULL;
	size_t k = 0;
	bool have_self = false, changed = false;
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(e[i], "LD_PRELOAD=", 11) && self[0]) {
			if (strstr(e[i] + 11, self)) {
				have_self = true;
			} else {
				size_t l = strlen(e[i]) + strlen(self) + 2;
				char *v = malloc(l);
				if (!v)
					continue;
				snprintf(v, l, "%s%s%s", e[i], e[i][11] ? ":" : "", self);
				out[k++] = v;
				have_self = changed = true;
				continue;
			}
		}
		out[k++] = e[i];
	}
	const char *mine = getenv("LD_PRELOAD");
	if (!have_self && self[0] && mine && strstr(mine, self) &&
	    !env_has(e, "LD_PRELOAD", 10)) {
		/* this process's whole LD_PRELOAD: what came before the library (a sanitizer's
		 * runtime must stay first) comes back too */
		size_t l = strlen(mine) + 12;
		char *v = malloc(l);
		if (v) {
			snprintf(v, l, "LD_PRELOAD=%s", mine);
			out[k++] = v;
			have_self = changed = true;
		}
	}
	if (!have_self && self[0]) {
		size_t l = strlen(self) + 12;
		char *v = malloc(l);
		if (v) {
			snprintf(v, l, "LD_PRELOAD=%s", self);
			out[k++] = v;
			changed = true;
		}
	}
	for (char **p = environ; p && *p; p++) {
		const char *eq = strchr(*p, '=');
		if (strncmp(*p, "SMCR_", 5) || !eq || env_has(e, *p, (size_t)(eq - *p)))
			continue;
		out[k++] = *p;
		changed = true;
	}
	out[k] = NULL;
	if (!changed) {
		free(out);
		return NULL;
	}
	return out;
}

/* The environment an exec passes on: e, or e with the sticky settings back. */
static char *const *pl_exec_env(char *const e[])
{
	/* Connections accepted and never used would show the new image the client's CLC
	 * bytes: each gets a Decline first and goes on as plain TCP (src/sock/lsn.c); SMC-R
	 * connections end with a clear error at both ends (foreign.c). */
	pl_exec_prepare();
	if (!pl_sticky())
		return e;
	char **n = pl_sticky_env(e);
	return n ? n : e;
}

/* posix_spawn runs here, in the parent, which keeps its connections: the environment
 * only (a spawned image inherits what is not close-on-exec: docs/INTERPOSER.md). */
static char *const *pl_spawn_env(char *const e[])
{
	if (!pl_sticky())
		return e;
	char **n = pl_sticky_env(e);
	return n ? n : e;
}

/* The new image starts with the program's own open-files limit (lim.c); a failed exec
 * gets the room for the library's fds back. */
#define PL_EXEC(call)                      \
	do {                               \
		pl_lim_exec_begin();       \
		int r_ = call;             \
		int e_ = errno;            \
		pl_lim_exec_end();         \
		errno = e_;                \
		return r_;                 \
	} while (0)

int execve(const char *p, char *const a[], char *const e[])
{
	PL_EXEC(PL_REAL(execve)(p, a, pl_exec_env(e)));
}
int execv(const char *p, char *const a[])
{
	PL_EXEC(PL_REAL(execve)(p, a, pl_exec_env(environ)));
}
int execvpe(const char *p, char *const a[], char *const e[])
{
	PL_EXEC(PL_REAL(execvpe)(p, a, pl_exec_env(e)));
}
int execvp(const char *p, char *const a[])
{
	PL_EXEC(PL_REAL(execvpe)(p, a, pl_exec_env(environ)));
}
int fexecve(int fd, char *const a[], char *const e[])
{
	PL_HIDDEN(fd, -1);
	PL_EXEC(PL_REAL(fexecve)(fd, a, pl_exec_env(e)));
}
int execveat(int dfd, const char *p, char *const a[], char *const e[], int fl)
{
	PL_HIDDEN(dfd, -1);
	PL_EXEC(PL_REAL(execveat)(dfd, p, a, pl_exec_env(e), fl));
}

/* execl, execlp, execle: the argument list as an array (on the stack: exec copies it),
 * then the array forms. */
#define PL_ARGV(a0, ap, argv, envp_out, want_env)                        \
	size_t argc_ = 1;                                                \
	va_start(ap, a0);                                                \
	while (va_arg(ap, const char *))                                 \
		argc_++;                                                 \
	va_end(ap);                                                      \
	const char *argv[argc_ + 1];                                     \
	argv[0] = a0;                                                    \
	va_start(ap, a0);                                                \
	for (size_t i_ = 1; i_ <= argc_; i_++)                           \
		argv[i_] = va_arg(ap, const char *);                     \
	if (want_env)                                                    \
		envp_out = va_arg(ap, char *const *);                    \
	va_end(ap)

int execl(const char *p, const char *a0, ...)
{
	va_list ap;
	char *const *ignored = NULL;
	PL_ARGV(a0, ap, argv, ignored, false);
	(void)ignored;
	return execv(p, (char *const *)argv);
}
int execlp(const char *p, const char *a0, ...)
{
	va_list ap;
	char *const *ignored = NULL;
	PL_ARGV(a0, ap, argv, ignored, false);
	(void)ignored;
	return execvp(p, (char *const *)argv);
}
int execle(const char *p, const char *a0, ...)
{
	va_list ap;
	char *const *envp = NULL;
	PL_ARGV(a0, ap, argv, envp, true);
	return execve(p, (char *const *)argv, envp);
}

int posix_spawn(pid_t *pid, const char *p, const posix_spawn_file_actions_t *fa,
		const posix_spawnattr_t *at, char *const a[], char *const e[])
{
	PL_EXEC(PL_REAL(posix_spawn)(pid, p, fa, at, a, pl_spawn_env(e)));
}
int posix_spawnp(pid_t *pid, const char *p, const posix_spawn_file_actions_t *fa,
		 const posix_spawnattr_t *at, char *const a[], char *const e[])
{
	PL_EXEC(PL_REAL(posix_spawnp)(pid, p, fa, at, a, pl_spawn_env(e)));
}
