/* emu_netns.h: two network namespaces joined by a veth pair, made by a test for the emu
 * provider (tests/emu/test_emu_netns.c, the conformance run "emu_netns"). Needs root and
 * iproute2; without them setup fails with a reason and the test skips.
 *
 * Names carry the pid of the process that made them: namespaces "smcr-emu-<pid>-a/b",
 * interfaces "smcrA<pid>" / "smcrB<pid>", addresses 10.88.0.1-4/24 (side 0) and
 * 10.88.0.101-104/24 (side 1). A watchdog process deletes the namespaces when the maker
 * exits, however it exits (crash, sanitizer abort, kill), so nothing is left behind. */
#ifndef SMCR_TESTS_EMU_NETNS_H
#define SMCR_TESTS_EMU_NETNS_H

#include <stddef.h>

#define EMU_NETNS_ADDRS 4
/* Environment variable that hands the pair to exec'd helper processes (its value: the
 * maker's pid). */
#define EMU_NETNS_ENV "SMCR_EMU_NETNS_PID"

struct emu_netns {
	int ok;
	int owner;			/* made by this process (it tears down) */
	char ns[2][40];
	char ifname[2][16];
	char ip[2][EMU_NETNS_ADDRS][16];
};

/* Makes the pair (call while the process has no threads: it forks the watchdog). 0, or -1
 * with the reason in why. */
int emu_netns_setup(struct emu_netns *p, char *why, size_t whylen);
/* Uses a pair made by another process (pid in EMU_NETNS_ENV): 0, or -1 if none. */
int emu_netns_attach(struct emu_netns *p);
/* Deletes the namespaces now (the watchdog would do it at exit). */
void emu_netns_teardown(struct emu_netns *p);
/* "ip -n <ns of side> link set <its interface> up|down": 0 or -1. */
int emu_netns_link(struct emu_netns *p, int side, int up);

#endif
