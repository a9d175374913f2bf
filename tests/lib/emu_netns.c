/* emu_netns.c: network namespaces joined by a veth pair for the emu provider's tests
 * (emu_netns.h). Commands run as "ip ..." children (no shell). */
#define _GNU_SOURCE
#include "emu_netns.h"

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

static const char *ip_path(void)
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
	const char *path = ip_path();
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
	if (!ip_path() || run_ip("-V", NULL) != 0) {
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
