/* foreign.h: a forked child's SMC-R connections of its parent (foreign.c). */
#ifndef SMCR_PRELOAD_FOREIGN_H
#define SMCR_PRELOAD_FOREIGN_H

#include <stdbool.h>
#include <sys/types.h>

/* True if fd is a connection this process inherited in SMC-R mode (cheap when there is
 * none: one relaxed load). */
bool pl_foreign(int fd);
bool pl_foreign_any(void);
bool pl_foreign_slow(int fd);
/* The failure of a data call on such an fd: ENOTCONN and a log line. Returns -1. */
int pl_foreign_fail(int fd);
/* close on such an fd: the number only. */
int pl_foreign_close(int fd);

/* Before an exec (proc.c): never-used connections declined, owned SMC-R connections
 * without FD_CLOEXEC ended abortively and their numbers made dead sockets, inherited
 * foreign ones replaced by dead sockets. Nothing in a vfork child. */
void pl_exec_prepare(void);
/* This process's pid as the fork handlers last saw it (getpid() differs in a vfork child,
 * which runs in the parent's memory: it must record nothing there). */
extern pid_t pl_pid;

#endif
