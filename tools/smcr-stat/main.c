/* smcr-stat: every smcr process's connections, link groups, devices and counters, read from
 * outside, as smc-tools' smcss and `smcr stats` show the kernel's (docs/man/smcr-stat.8).
 *
 *   smcr-stat [-a | -l | -L | -d | -s] [--json] [--reset] [-p PID]
 *
 * The processes are found in /proc/net/unix by their abstract socket name (statsrv.h:
 * "smcr-stat/<euid>/<pid>"); each is asked one question and answers with text lines or
 * one JSON object. Only the caller's own processes answer (root's question is answered by
 * every process). Exit status: 0 done (also when no process was found), 1 error, 2 usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The name every smcr process listens on, after the abstract name's NUL: the library's
 * STATSRV_PREFIX (src/sock/statsrv.h; tools may not include the socket layer's headers). */
#define STATSRV_PREFIX "smcr-stat/"

#define MAXPROC 4096

static const char usage[] =
	"usage: smcr-stat [-a | -l | -L | -d | -s] [--json] [--reset] [-p PID]\n"
	"  (default)   SMC-R and TCP-fallback connections of the smcr processes\n"
	"  -a, --all   every smcr socket: also listeners, handshakes, failed ones\n"
	"  -l          listening sockets\n"
	"  -L          link groups: one line per link (QPNs, GIDs), the group's connections\n"
	"  -d          devices\n"
	"  -s          counters (connections by mode, fallback reasons, bytes, CDC/LLC, ...)\n"
	"  --reset     then set the counters back to zero (alone: -s --reset)\n"
	"  --json      one JSON array: each process with its devices, counters, connections\n"
	"              and link groups\n"
	"  -p PID      only this process\n"
	"Processes of other users are not shown (root sees all).\n";

struct proc {
	unsigned uid;
	int pid;
};

/* The smcr processes listening now, from /proc/net/unix (each once). */
static int find_procs(struct proc *out, int max, int only_pid)
{
	FILE *f = fopen("/proc/net/unix", "r");
	if (!f)
		return -1;
	char line[512];
	int n = 0;
	unsigned me = geteuid();
	while (fgets(line, sizeof(line), f)) {
		char *at = strstr(line, "@" STATSRV_PREFIX);
		if (!at)
			continue;
		unsigned uid;
		int pid;
		if (sscanf(at + 1 + strlen(STATSRV_PREFIX), "%u/%d", &uid, &pid) != 2)
			continue;
		if ((me != 0 && uid != me) || (only_pid && pid != only_pid))
			continue;
		bool dup = false;
		for (int i = 0; i < n && !dup; i++)
			dup = out[i].pid == pid && out[i].uid == uid;
		if (!dup && n < max)
			out[n++] = (struct proc){ uid, pid };
	}
	fclose(f);
	return n;
}

/* One question in flight (ask_all). */
struct ask {
	int fd;		/* -1: done (answered, gone, refused or out of time) */
	bool sent;	/* the request is written */
	char *buf;	/* the reply so far (malloc) */
	size_t n, cap;
};

static void ask_done(struct ask *q)
{
	close(q->fd);
	q->fd = -1;
}

/* Asks every process at once and waits WAIT_MS in all, so a process that does not answer
 * (its progress thread stuck, stopped by a debugger, its listen queue full) costs the
 * listing that wait once, however many there are. out[i]: p[i]'s reply (malloc) or NULL
 * when it is gone, refused or did not finish in time. */
#define WAIT_MS 2000
static void ask_all(const struct proc *p, int np, const char *req, char **out)
{
	struct ask *q = calloc((size_t)np, sizeof(*q));
	struct pollfd *pf = calloc((size_t)np, sizeof(*pf));
	if (!q || !pf) {
		free(q);
		free(pf);
		for (int i = 0; i < np; i++)
			out[i] = NULL;
		return;
	}
	size_t rl = strlen(req);
	for (int i = 0; i < np; i++) {
		q[i].fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (q[i].fd < 0)
			continue;
		struct sockaddr_un a;
		memset(&a, 0, sizeof(a));
		a.sun_family = AF_UNIX;
		int len = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, STATSRV_PREFIX "%u/%d",
				   p[i].uid, p[i].pid);
		socklen_t alen =
			(socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
		/* a Unix stream connect completes at once or fails (EAGAIN: queue full) */
		if (connect(q[i].fd, (struct sockaddr *)&a, alen) < 0)
			ask_done(&q[i]);
	}
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int k = 0;
		for (int i = 0; i < np; i++)
			if (q[i].fd >= 0) {
				pf[k].fd = q[i].fd;
				pf[k].events = q[i].sent ? POLLIN : POLLOUT;
				pf[k].revents = 0;
				k++;
			}
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long el = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (!k || el >= WAIT_MS)
			break;
		if (poll(pf, (nfds_t)k, (int)(WAIT_MS - el)) < 0 && errno != EINTR)
			break;
		k = 0;
		for (int i = 0; i < np; i++) {
			if (q[i].fd < 0)
				continue;
			short re = pf[k++].revents;
			if (!re)
				continue;
			if (!q[i].sent) {
				if (send(q[i].fd, req, rl, MSG_NOSIGNAL) != (ssize_t)rl) {
					ask_done(&q[i]);
					continue;
				}
				q[i].sent = true;
				continue;
			}
			if (q[i].cap - q[i].n < 4096) {
				size_t cap = q[i].cap ? q[i].cap * 2 : 65536;
				char *b = realloc(q[i].buf, cap);
				if (!b) {
					ask_done(&q[i]);
					continue;
				}
				q[i].buf = b;
				q[i].cap = cap;
			}
			ssize_t r = recv(q[i].fd, q[i].buf + q[i].n, q[i].cap - q[i].n - 1, 0);
			if (r > 0)
				q[i].n += (size_t)r;
			else if (r == 0)
				ask_done(&q[i]); /* the whole reply (the process closes after it) */
			else if (errno != EAGAIN && errno != EINTR) {
				q[i].n = 0; /* a broken reply is not shown */
				ask_done(&q[i]);
			}
		}
	}
	for (int i = 0; i < np; i++) {
		bool whole = q[i].fd < 0 && q[i].sent; /* closed by the process after its reply */
		if (q[i].fd >= 0)
			close(q[i].fd); /* out of time: a partial reply is not shown */
		if (whole && q[i].n) {
			q[i].buf[q[i].n] = 0;
			out[i] = q[i].buf;
		} else {
			free(q[i].buf);
			out[i] = NULL;
		}
	}
	free(q);
	free(pf);
}

int main(int argc, char **argv)
{
	enum { O_JSON = 256, O_RESET };
	static const struct option opts[] = {
		{ "all", no_argument, NULL, 'a' },	{ "json", no_argument, NULL, O_JSON },
		{ "reset", no_argument, NULL, O_RESET }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *what = "conns";
	bool json = false, reset = false;
	int only = 0, c;
	while ((c = getopt_long(argc, argv, "alLdsp:h", opts, NULL)) != -1) {
		switch (c) {
		case 'a': what = "all"; break;
		case 'l': what = "listen"; break;
		case 'L': what = "lgs"; break;
		case 'd': what = "devs"; break;
		case 's': what = "stats"; break;
		case 'p': only = atoi(optarg); break;
		case O_JSON: json = true; break;
		case O_RESET: reset = true; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind < argc) {
		fputs(usage, stderr);
		return 2;
	}
	if (reset && !json)
		what = "stats";
	static struct proc procs[MAXPROC];
	int n = find_procs(procs, MAXPROC, only);
	if (n < 0) {
		fprintf(stderr, "smcr-stat: /proc/net/unix: %s\n", strerror(errno));
		return 1;
	}
	char req[64];
	snprintf(req, sizeof(req), "%s %s%s\n", json ? "json" : "text", json ? "all" : what,
		 reset ? " reset" : "");
	if (json)
		fputs("[", stdout);
	else if (!strcmp(what, "lgs"))
		printf("%-7s %-15s %4s %-6s %-6s %5s %4s %-6s %-12s %5s %8s %8s %9s %s %s\n",
		       "PID", "PROGRAM", "LG", "ROLE", "STATE", "CONNS", "LINK", "STATE", "DEVICE",
		       "CONNS", "QPN", "PEER-QPN", "FAILOVERS", "GID", "PEER-GID");
	else if (!strcmp(what, "devs"))
		printf("%-7s %-15s %-16s %7s %4s %6s %12s\n", "PID", "PROGRAM", "DEVICES", "OPEN",
		       "LGS", "LINKS", "RMB-BYTES");
	else if (strcmp(what, "stats") != 0)
		printf("%-7s %-15s %-4s %-9s %-6s %-22s %-22s %-7s %-23s %12s %12s\n", "PID",
		       "PROGRAM", "FD", "MODE", "ROLE", "LOCAL", "PEER", "LG/LNK",
		       "FALLBACK(LOCAL/PEER)", "SENT", "RECEIVED");
	bool first = true;
	static char *replies[MAXPROC];
	ask_all(procs, n, req, replies);
	for (int i = 0; i < n; i++) {
		char *r = replies[i];
		if (!r)
			continue; /* gone since the listing, or not ours */
		if (json) {
			size_t l = strlen(r);
			while (l && (r[l - 1] == '\n'))
				r[--l] = 0;
			printf("%s%s", first ? "" : ",", r);
			first = false;
		} else {
			fputs(r, stdout);
		}
		free(r);
	}
	if (json)
		puts("]");
	return 0;
}
