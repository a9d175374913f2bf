/* emu_netns.h: two network namespaces joined by a veth pair, made by a test for the emu
 * provider (tests/emu/test_emu_netns.c, the conformance run "emu_netns"), and optionally by
 * a second veth pair: two paths between the same two namespaces for the two-link tests and
 * bench (tests/core/test_core_failover_netns.c, tests/failover/, bench/failover). Needs root
 * and iproute2; without them setup fails with a reason and the test skips.
 *
 * Names carry the pid of the process that made them: namespaces "smcr-emu-<pid>-a/b",
 * interfaces "smcrA<pid>" / "smcrB<pid>", addresses 10.88.0.1-4/24 (side 0) and
 * 10.88.0.101-104/24 (side 1); the second pair "smcrC<pid>" / "smcrD<pid>", 10.89.0.1/24 and
 * 10.89.0.101/24. A watchdog process deletes the namespaces when the maker exits, however it
 * exits (crash, sanitizer abort, kill), so nothing is left behind (the veths go with them). */
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
	/* the second pair (emu_netns_setup2): path 1; path 0 is ifname[]/ip[][0] */
	char if2[2][16];
	char ip2[2][16];
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

/* emu_netns_setup and a second veth pair between the same namespaces, both carriers up
 * when it returns. 0, or -1 with the reason in why (and nothing left made). */
int emu_netns_setup2(struct emu_netns *p, char *why, size_t whylen);
/* Path path's (0: the first pair, 1: the second) interface on side side. */
const char *emu_netns_path_if(const struct emu_netns *p, int side, int path);
/* Path path's address on side side (10.88.0.1, 10.88.0.101, 10.89.0.1, 10.89.0.101). */
const char *emu_netns_path_ip(const struct emu_netns *p, int side, int path);
/* Takes path path down or up at side 0's end (the veth peer loses its carrier too). */
int emu_netns_path(struct emu_netns *p, int path, int up);
/* Bytes side sent on path's interface (its tx counter), 0 if unreadable. */
unsigned long long emu_netns_tx_bytes(const struct emu_netns *p, int side, int path);
/* Where the ip command is (NULL if none): for exec'ing "ip netns exec ...". */
const char *emu_netns_ip_path(void);

#endif
