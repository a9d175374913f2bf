/* emu_netns.c: network namespaces joined by one or two veth pairs for the emu provider's
 * tests and the two-path tests (emu_netns.h). Commands run as "ip ..." children (no shell). */
#define _GNU_SOURCE
#include "emu_netns.h"

#include "runcmd.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *emu_netns_ip_path(void)
{
	static const char *const where[] = { "/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip" };
	for (size_t i = 0; i < sizeof where / sizeof where[0]; i++)
		if (access(where[i], X_OK) == 0)
			return where[i];
	return NULL;
}

/* Runs ip with the arguments (NULL-terminated), output discarded: its exit status. Only
 * async-signal-safe calls between fork and exec: tests call it with threads running. */
static int run_ip(const char *a0, ...)
{
	const char *path = emu_netns_ip_path();
	if (!path)
		return -1;
	const char *argv[24];
	int n = 0;
	argv[n++] = "ip";
	va_list ap;
	va_start(ap, a0);
	for (const char *s = a0; s && n < 23; s = va_arg(ap, const char *))
		argv[n++] = s;
	va_end(ap);
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int dn = open("/dev/null", O_RDWR);
		if (dn >= 0) {
			dup2(dn, 1);
			dup2(dn, 2);
		}
		execv(path, (char *const *)argv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void names(struct emu_netns *p, long pid)
{
	for (int s = 0; s < 2; s++) {
		snprintf(p->ns[s], sizeof p->ns[s], "smcr-emu-%ld-%c", pid, 'a' + s);
		snprintf(p->ifname[s], sizeof p->ifname[s], "smcr%c%ld", 'A' + s, pid);
		snprintf(p->if2[s], sizeof p->if2[s], "smcr%c%ld", 'C' + s, pid);
		snprintf(p->ip2[s], sizeof p->ip2[s], "10.89.0.%d", s * 100 + 1);
		for (int i = 0; i < EMU_NETNS_ADDRS; i++)
			snprintf(p->ip[s][i], sizeof p->ip[s][i], "10.88.0.%d", s * 100 + 1 + i);
	}
}

/* The watchdog: waits for the maker to exit (its end of the pipe closes), then deletes
 * the namespaces (their veth ends go with them). */
static int start_watchdog(struct emu_netns *p)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		/* Own session: a signal to the test's process group does not take us along. */
		setsid();
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		int dn = open("/dev/null", O_RDWR);
		if (dn >= 0) {
			dup2(dn, 0);
			dup2(dn, 1);
			dup2(dn, 2);
		}
		for (int fd = 3; fd < 1024; fd++)
			if (fd != fds[0])
				close(fd);
		char c;
		while (read(fds[0], &c, 1) < 0 && errno == EINTR)
			;
		run_ip("netns", "del", p->ns[0], NULL);
		run_ip("netns", "del", p->ns[1], NULL);
		_exit(0);
	}
	close(fds[0]);
	/* fds[1] stays open (close-on-exec) for the life of this process. */
	return 0;
}

static int in_ns_running(const char *ns, const char *ifname)
{
	char path[96];
	snprintf(path, sizeof path, "/run/netns/%s", ns);
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int up = 0;
	if (self >= 0 && fd >= 0 && setns(fd, CLONE_NEWNET) == 0) {
		int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		struct ifreq ifr;
		memset(&ifr, 0, sizeof ifr);
		snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
		if (s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0)
			up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
		if (s >= 0)
			close(s);
		(void)setns(self, CLONE_NEWNET);
	}
	if (self >= 0)
		close(self);
	if (fd >= 0)
		close(fd);
	return up;
}

int emu_netns_setup(struct emu_netns *p, char *why, size_t whylen)
{
	memset(p, 0, sizeof *p);
	if (geteuid() != 0) {
		snprintf(why, whylen, "not root: cannot make network namespaces");
		return -1;
	}
	if (!emu_netns_ip_path() || run_ip("-V", NULL) != 0) {
		snprintf(why, whylen, "no \"ip\" command (iproute2)");
		return -1;
	}
	names(p, (long)getpid());
	if (start_watchdog(p)) {
		snprintf(why, whylen, "cannot start the cleanup watchdog: %s", strerror(errno));
		return -1;
	}
	p->owner = 1;
	if (run_ip("netns", "add", p->ns[0], NULL) || run_ip("netns", "add", p->ns[1], NULL)) {
		snprintf(why, whylen, "\"ip netns add\" failed (no namespace support?)");
		emu_netns_teardown(p);
		return -1;
	}
	char cidr[24];
	int rc = run_ip("-n", p->ns[0], "link", "add", p->ifname[0], "type", "veth", "peer",
			"name", p->ifname[1], "netns", p->ns[1], NULL);
	for (int s = 0; s < 2 && !rc; s++) {
		for (int i = 0; i < EMU_NETNS_ADDRS && !rc; i++) {
			snprintf(cidr, sizeof cidr, "%s/24", p->ip[s][i]);
			rc = run_ip("-n", p->ns[s], "addr", "add", cidr, "dev", p->ifname[s], NULL);
		}
		if (!rc)
			rc = run_ip("-n", p->ns[s], "link", "set", "lo", "up", NULL);
		if (!rc)
			rc = run_ip("-n", p->ns[s], "link", "set", p->ifname[s], "up", NULL);
	}
	if (rc) {
		snprintf(why, whylen, "cannot make the veth pair (\"ip link add ... type veth\")");
		emu_netns_teardown(p);
		return -1;
	}
	/* The carrier comes up shortly after both ends are up. */
	for (int t = 0; t < 200; t++) {
		if (in_ns_running(p->ns[0], p->ifname[0]) && in_ns_running(p->ns[1], p->ifname[1])) {
			p->ok = 1;
			char v[16];
			snprintf(v, sizeof v, "%ld", (long)getpid());
			setenv(EMU_NETNS_ENV, v, 1);
			return 0;
		}
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	snprintf(why, whylen, "the veth pair did not come up");
	emu_netns_teardown(p);
	return -1;
}

int emu_netns_attach(struct emu_netns *p)
{
	memset(p, 0, sizeof *p);
	const char *v = getenv(EMU_NETNS_ENV);
	if (!v || !*v)
		return -1;
	names(p, strtol(v, NULL, 10));
	p->ok = 1;
	return 0;
}

void emu_netns_teardown(struct emu_netns *p)
{
	if (p->owner) {
		run_ip("netns", "del", p->ns[0], NULL);
		run_ip("netns", "del", p->ns[1], NULL);
	}
	p->ok = 0;
}

int emu_netns_link(struct emu_netns *p, int side, int up)
{
	return run_ip("-n", p->ns[side], "link", "set", p->ifname[side], up ? "up" : "down",
		      NULL) == 0 ? 0 : -1;
}

/* Both ends of a pair running (carrier up), waited for up to 2 s. */
static int wait_running(const struct emu_netns *p, const char *if0, const char *if1)
{
	for (int t = 0; t < 200; t++) {
		if (in_ns_running(p->ns[0], if0) && in_ns_running(p->ns[1], if1))
			return 0;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return -1;
}

int emu_netns_setup2(struct emu_netns *p, char *why, size_t whylen)
{
	if (emu_netns_setup(p, why, whylen))
		return -1;
	char cidr[2][24];
	for (int s = 0; s < 2; s++)
		snprintf(cidr[s], sizeof cidr[s], "%s/24", p->ip2[s]);
	int rc = run_ip("-n", p->ns[0], "link", "add", p->if2[0], "type", "veth", "peer", "name",
			p->if2[1], "netns", p->ns[1], NULL);
	for (int s = 0; s < 2 && !rc; s++) {
		rc = run_ip("-n", p->ns[s], "addr", "add", cidr[s], "dev", p->if2[s], NULL);
		if (!rc)
			rc = run_ip("-n", p->ns[s], "link", "set", p->if2[s], "up", NULL);
	}
	if (rc || wait_running(p, p->if2[0], p->if2[1])) {
		snprintf(why, whylen, "cannot make the second veth pair, or it did not come up");
		emu_netns_teardown(p);
		return -1;
	}
	return 0;
}

const char *emu_netns_path_if(const struct emu_netns *p, int side, int path)
{
	return path ? p->if2[side] : p->ifname[side];
}

const char *emu_netns_path_ip(const struct emu_netns *p, int side, int path)
{
	return path ? p->ip2[side] : p->ip[side][0];
}

int emu_netns_path(struct emu_netns *p, int path, int up)
{
	return run_ip("-n", p->ns[0], "link", "set", emu_netns_path_if(p, 0, path),
		      up ? "up" : "down", NULL) == 0 ? 0 : -1;
}

unsigned long long emu_netns_tx_bytes(const struct emu_netns *p, int side, int path)
{
	/* "ip netns exec" mounts the namespace's own /sys: this process's shows its own
	 * namespace's interfaces only */
	struct runcmd r;
	if (runcmd(&r, "ip netns exec %s cat /sys/class/net/%s/statistics/tx_bytes", p->ns[side],
		   emu_netns_path_if(p, side, path)))
		return 0;
	unsigned long long v = r.status == 0 && r.out ? strtoull(r.out, NULL, 10) : 0;
	runcmd_free(&r);
	return v;
}
