/* test_socat_failover.c: failover under a real program, through the interposer
 * (docs/FAILOVER.md "What works now"). Two network namespaces joined by two veth pairs
 * (tests/lib/emu_netns.h emu_netns_setup2), an emu device on each veth at each end; socat
 * under smcr-run in each namespace, the server `socat TCP-LISTEN:... STDIO`, the client
 * `socat STDIO TCP:...`. This driver feeds both socats' standard input and reads both
 * standard outputs: two independent streams at once, client to server and server to
 * client, random bytes (a reproducible stream, checked byte by byte) with SHA-256 at the
 * sending and the receiving end. While both flow:
 *
 *   1. both ends' link group has two ACTIVE links (smcr-stat -L in each namespace);
 *   2. the veth carrying the connection goes down mid-transfer; both streams go on;
 *   3. it comes back; both groups have two links again; the connection now runs on the
 *      other path (it moved); that veth goes down; both streams go on; it comes back;
 *   4. the streams end (EOF each way): every byte once, in order, the same SHA-256; both
 *      socats exit 0 with no error message; their SMCR_STATS exit lines say the connection
 *      ran in SMC-R mode (none in TCP), a second link was added and failovers moved it.
 *
 * socat moves 8 KiB blocks (its default). With `-b 65536` both socats can end up blocked in
 * a 64 KiB write at once, each waiting for the other to read: the send ring is 64 KiB (as
 * Linux SMC's net.smc.wmem) and POLLOUT comes with a third of it free, as TCP's with a
 * third of its send buffer, which TCP's autotuning makes megabytes; docs/FAILOVER.md.
 *
 * Needs root, iproute2 and socat (else exit 77: skipped). The namespaces go with this
 * process however it ends (emu_netns.h's watchdog); the socats are killed at its end.
 *
 *   test_socat_failover SMCR_RUN SMCR_STAT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "lib/core_pair.h"
#include "lib/emu_netns.h"
#include "lib/runcmd.h"
#include "util/clock.h"

#define MS 1000000ull
#define SEC 1000000000ull
/* No byte in either direction for this long fails the test: the spec's longest silence
 * before a link is declared down (TEST LINK after 30 s, 2 s for the answer), and more. */
#define STALL_NS (40 * SEC)

static struct emu_netns nn;
static const char *smcr_run, *smcr_stat;
static char tmp[64];

struct proc {
	const char *tag;
	pid_t pid;
	int in, out;			/* our ends: its stdin, its stdout */
};

/* One direction: the driver writes into one socat's stdin, the other's stdout gives it. */
struct dir {
	const char *name;
	int wfd, rfd;
	uint64_t seed, sent, got;
	bool closed, eof;
	EVP_MD_CTX *hs, *hr;
	uint8_t wbuf[65536], rbuf[65536];
	size_t woff, wlen;		/* wbuf's unwritten part */
};

static struct proc srv = { .tag = "server", .pid = -1 }, cli = { .tag = "client", .pid = -1 };
static struct dir dirs[2];

static void kill_procs(void)
{
	struct proc *p[2] = { &cli, &srv };
	for (int i = 0; i < 2; i++)
		if (p[i]->pid > 0) {
			kill(p[i]->pid, SIGKILL);
			(void)waitpid(p[i]->pid, NULL, 0);
			p[i]->pid = -1;
		}
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("FAIL: ");
	vprintf(fmt, ap);
	printf("\n(logs in %s)\n", tmp);
	va_end(ap);
	fflush(stdout);
	kill_procs();
	emu_netns_teardown(&nn);
	exit(1);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("# ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
}

/* Starts socat in side's namespace under smcr-run, with both its devices (one per path),
 * stdin and stdout on pipes to us, stderr into tmp/<tag>.err. */
static void spawn(struct proc *p, int side, const char *a1, const char *a2)
{
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	char devs[96], stats[96], err[96];
	snprintf(devs, sizeof devs, "SMCR_DEVICES=emu:if=%s emu:if=%s", emu_netns_path_if(&nn, side, 0),
		 emu_netns_path_if(&nn, side, 1));
	snprintf(stats, sizeof stats, "SMCR_STATS=%s/%s.stats", tmp, p->tag);
	snprintf(err, sizeof err, "%s/%s.err", tmp, p->tag);
	/* Under the sanitizers the test environment turns the smcr-stat socket off
	 * (tests/CMakeLists.txt: forked children that start threads); socat here never forks,
	 * and this test reads the link groups through that socket. The sanitizer runtime, when
	 * the build has one, must come first in an uninstrumented program (SMCR_FO_PRELOAD). */
	const char *rt = getenv("SMCR_FO_PRELOAD");
	char ldp[512];
	snprintf(ldp, sizeof ldp, "LD_PRELOAD=%s", rt ? rt : "");
	const char *argv[] = { "ip", "netns", "exec", nn.ns[side], "env", devs,
			       "SMCR_RULES=use smc both * 10.88.0.0/15", stats, "SMCR_STAT_SOCKET=1",
			       /* socat's own allocations are not ours to judge */
			       "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1", ldp, smcr_run, "--",
			       "socat", "-t", "60", a1, a2, NULL };
	const char *ip = emu_netns_ip_path();
	p->pid = fork();
	if (p->pid < 0)
		die("fork: %s", strerror(errno));
	if (p->pid == 0) {
		int e = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || e < 0 || dup2(e, 2) < 0)
			_exit(126);
		execv(ip, (char *const *)argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	p->in = in[1];
	p->out = out[0];
	if (fcntl(p->in, F_SETFL, O_NONBLOCK) || fcntl(p->out, F_SETFL, O_NONBLOCK))
		die("fcntl: %s", strerror(errno));
}

static bool listening(unsigned port)
{
	struct runcmd r;
	if (runcmd(&r, "ip netns exec %s ss -ltnH 'sport = :%u'", nn.ns[1], port))
		return false;
	bool yes = r.status == 0 && r.out && r.out[0];
	runcmd_free(&r);
	return yes;
}

/* Moves what the pipes take and give, for up to ms milliseconds; dies on a wrong byte, an
 * early EOF or a read error. */
static void pump(unsigned ms)
{
	uint64_t until = smcr_now_ns() + ms * MS;
	do {
		struct pollfd pf[4];
		int n = 0, idx[4];
		for (int d = 0; d < 2; d++) {
			if (!dirs[d].closed) {
				pf[n] = (struct pollfd){ dirs[d].wfd, POLLOUT, 0 };
				idx[n++] = d;
			}
			if (!dirs[d].eof) {
				pf[n] = (struct pollfd){ dirs[d].rfd, POLLIN, 0 };
				idx[n++] = 2 + d;
			}
		}
		if (n == 0)
			return;
		if (poll(pf, (nfds_t)n, 20) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			if (!pf[i].revents)
				continue;
			struct dir *x = &dirs[idx[i] % 2];
			if (idx[i] < 2) {	/* room in a stdin: the stream's next bytes */
				if (x->woff == x->wlen) {
					cp_stream_fill(x->wbuf, x->sent, sizeof x->wbuf, x->seed);
					x->woff = 0;
					x->wlen = sizeof x->wbuf;
				}
				ssize_t k = write(x->wfd, x->wbuf + x->woff, x->wlen - x->woff);
				if (k < 0 && errno != EAGAIN && errno != EINTR)
					die("%s: write to socat: %s", x->name, strerror(errno));
				if (k > 0) {
					if (EVP_DigestUpdate(x->hs, x->wbuf + x->woff, (size_t)k) != 1)
						die("SHA-256");
					x->woff += (size_t)k;
					x->sent += (uint64_t)k;
				}
				continue;
			}
			ssize_t k = read(x->rfd, x->rbuf, sizeof x->rbuf);
			if (k < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (k < 0)
				die("%s: read from socat: %s", x->name, strerror(errno));
			if (k == 0) {
				if (!x->closed || x->got != x->sent)
					die("%s: EOF after %llu of %llu bytes", x->name,
					    (unsigned long long)x->got, (unsigned long long)x->sent);
				x->eof = true;
				continue;
			}
			long bad = cp_stream_check(x->rbuf, x->got, (size_t)k, x->seed);
			if (bad >= 0)
				die("%s: byte %llu differs from what was sent", x->name,
				    (unsigned long long)(x->got + (uint64_t)bad));
			if (EVP_DigestUpdate(x->hr, x->rbuf, (size_t)k) != 1)
				die("SHA-256");
			x->got += (uint64_t)k;
		}
	} while (smcr_now_ns() < until);
}

/* What a stall leaves to look at: each end's connections and counters (smcr-stat) and
 * where each socat thread waits. */
static void dump_state(void)
{
	struct proc *p[2] = { &cli, &srv };
	for (int side = 0; side < 2; side++) {
		struct runcmd r;
		if (runcmd(&r, "ip netns exec %s %s -a; ip netns exec %s %s -L; ip netns exec %s %s -s; "
			       "for t in /proc/%d/task/*; do echo \"$t $(cat $t/comm) $(cat $t/wchan) "
			       "$(cut -d' ' -f1-3 $t/syscall)\"; done",
			   nn.ns[side], shq(smcr_stat), nn.ns[side], shq(smcr_stat), nn.ns[side],
			   shq(smcr_stat), (int)p[side]->pid) == 0) {
			printf("--- %s:\n%s%s", p[side]->tag, r.out ? r.out : "", r.err ? r.err : "");
			runcmd_free(&r);
		}
	}
	printf("driver: client to server sent %llu got %llu, back sent %llu got %llu\n",
	       (unsigned long long)dirs[0].sent, (unsigned long long)dirs[0].got,
	       (unsigned long long)dirs[1].sent, (unsigned long long)dirs[1].got);
}

/* Pumps until each direction has received at least `more` bytes beyond its count now. */
static void flow(uint64_t more, const char *what)
{
	uint64_t want[2] = { dirs[0].got + more, dirs[1].got + more };
	uint64_t last[2] = { dirs[0].got, dirs[1].got }, moved = smcr_now_ns(), t0 = moved;
	while (dirs[0].got < want[0] || dirs[1].got < want[1]) {
		pump(50);
		uint64_t now = smcr_now_ns();
		if (dirs[0].got != last[0] || dirs[1].got != last[1]) {
			last[0] = dirs[0].got;
			last[1] = dirs[1].got;
			moved = now;
		} else if (now - moved > STALL_NS) {
			dump_state();
			die("%s: no byte for %llu s (client to server %llu, server to client %llu)",
			    what, (unsigned long long)(STALL_NS / SEC), (unsigned long long)dirs[0].got,
			    (unsigned long long)dirs[1].got);
		}
	}
	note("%s: %llu MiB more each way in %llu ms", what, (unsigned long long)(more >> 20),
	     (unsigned long long)((smcr_now_ns() - t0) / MS));
}

/* smcr-stat -L in side's namespace: the number of ACTIVE links of the socat's group, the
 * paths they are on (bit i: path i) and the path (0, 1) of the link carrying its connection
 * (-1 if none says so). */
static unsigned links(int side, unsigned *paths, int *path)
{
	struct runcmd r;
	*path = -1;
	*paths = 0;
	if (runcmd(&r, "ip netns exec %s %s -L", nn.ns[side], shq(smcr_stat)) || r.status) {
		runcmd_free(&r);
		return 0;
	}
	unsigned active = 0;
	char line[512];
	/* PID PROGRAM LG ROLE STATE CONNS LINK STATE DEVICE CONNS QPN PEER-QPN FAILOVERS ... */
	for (unsigned i = 1; line_at(r.out, i, line, sizeof line); i++) {
		char prog[64], lstate[16], dev[64];
		unsigned conns;
		if (sscanf(line, "%*s %63s %*s %*s %*s %*s %*s %15s %63s %u", prog, lstate, dev,
			   &conns) != 4 || strcmp(prog, "socat") || strcmp(lstate, "ACTIVE"))
			continue;
		active++;
		/* the devices are named emu<i>-<interface> (the name cut to 12 characters), i
		 * their order in SMCR_DEVICES: path i */
		int on = !strncmp(dev, "emu1-", 5) ? 1 : 0;
		*paths |= 1u << on;
		if (conns)
			*path = on;
	}
	runcmd_free(&r);
	return active;
}

/* Pumps until both ends' groups have two ACTIVE links, one on each path (a link built while
 * a device was still down shares a path with the other until it is replaced: a cut of that
 * path would end the group); the client's path of the connection (the server's names the
 * same veth pair). */
static int two_links(const char *what)
{
	uint64_t t0 = smcr_now_ns();
	for (;;) {
		int pc, ps;
		unsigned mc, ms;
		unsigned lc = links(0, &mc, &pc), ls = links(1, &ms, &ps);
		if (lc == 2 && ls == 2 && mc == 3 && ms == 3 && pc >= 0 && pc == ps) {
			note("%s: two links at both ends after %llu ms, the connection on path %d",
			     what, (unsigned long long)((smcr_now_ns() - t0) / MS), pc);
			return pc;
		}
		if (smcr_now_ns() - t0 > 30 * SEC)
			die("%s: links client %u server %u (paths %u / %u, connection on path %d / %d) "
			    "after 30 s", what, lc, ls, mc, ms, pc, ps);
		pump(100);
	}
}

static void cut(int path, const char *what)
{
	if (dirs[0].closed || dirs[1].closed)
		die("%s: the streams were over before the cut", what);
	if (emu_netns_path(&nn, path, 0))
		die("%s: ip link set down failed", what);
	note("%s: path %d down at %llu / %llu bytes received (client to server / back)", what,
	     path, (unsigned long long)dirs[0].got, (unsigned long long)dirs[1].got);
}

static void restore(int path)
{
	if (emu_netns_path(&nn, path, 1))
		die("path %d: ip link set up failed", path);
}

/* The number after "key": in text (a JSON line's member), or -1 if absent. */
static long long member(const char *text, const char *key)
{
	char k[64];
	snprintf(k, sizeof k, "\"%s\":", key);
	const char *p = text ? strstr(text, k) : NULL;
	return p ? strtoll(p + strlen(k), NULL, 10) : -1;
}

static char *slurp(const char *tag, const char *ext)
{
	char path[128];
	snprintf(path, sizeof path, "%s/%s.%s", tmp, tag, ext);
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	static char buf[2][65536];
	char *b = buf[ext[0] == 'e'];
	size_t n = fread(b, 1, sizeof buf[0] - 1, f);
	b[n] = 0;
	fclose(f);
	return b;
}

static void check_proc(struct proc *p, uint64_t total)
{
	int st;
	uint64_t by = smcr_now_ns() + 30 * SEC;
	pid_t w;
	while ((w = waitpid(p->pid, &st, WNOHANG)) == 0 && smcr_now_ns() < by)
		usleep(10000);
	if (w != p->pid)
		die("%s: socat still runs 30 s after both streams ended", p->tag);
	p->pid = -1;
	const char *err = slurp(p->tag, "err");
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		die("%s: socat ended with status %d: %s", p->tag, st, err ? err : "");
	/* socat's own messages: "... socat[pid] E ..." (error) or F (fatal) */
	for (const char *l = err; l && *l;) {
		const char *s = strstr(l, "socat[");
		const char *nl = strchr(l, '\n');
		if (s && (!nl || s < nl)) {
			const char *c = strchr(s, ']');
			if (c && (c[1] == ' ') && (c[2] == 'E' || c[2] == 'F'))
				die("%s: socat reported an error: %.*s", p->tag,
				    (int)(nl ? nl - l : (long)strlen(l)), l);
		}
		l = nl ? nl + 1 : NULL;
	}
	const char *js = slurp(p->tag, "stats");
	if (!js || !strstr(js, "\"event\":\"exit\""))
		die("%s: no SMCR_STATS exit line", p->tag);
	long long smc = member(js, "smcr"), tcp = member(js, "tcp");
	long long sent = member(strstr(js, "\"bytes_smcr\""), "sent");
	long long added = member(js, "links_added"), fo = member(js, "failovers");
	long long moved = member(js, "conns_moved");
	note("%s: SMCR_STATS conns smcr %lld tcp %lld, bytes_smcr sent %lld, links_added %lld, "
	     "failovers %lld, conns_moved %lld", p->tag, smc, tcp, sent, added, fo, moved);
	if (smc != 1 || tcp != 0)
		die("%s: the connection was not SMC-R (smcr %lld, tcp %lld)", p->tag, smc, tcp);
	if (sent < 0 || (uint64_t)sent < total)
		die("%s: %lld bytes sent over SMC-R, %llu through socat", p->tag, sent,
		    (unsigned long long)total);
	/* a second link at first contact and again after each path came back; the connection
	 * moved at each cut (its link's path went down) */
	if (added < 2 || fo < 2 || moved < 2)
		die("%s: expected links_added >= 2, failovers >= 2, conns_moved >= 2", p->tag);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: test_socat_failover SMCR_RUN SMCR_STAT\n");
		return 2;
	}
	smcr_run = argv[1];
	smcr_stat = argv[2];
	struct runcmd r;
	if (runcmd(&r, "command -v socat") || r.status) {
		printf("skipped: no socat (apt-get install socat)\n");
		return 77;
	}
	runcmd_free(&r);
	char why[256];
	if (emu_netns_setup2(&nn, why, sizeof why)) {
		printf("skipped: %s\n", why);
		return 77;
	}
	snprintf(tmp, sizeof tmp, "/tmp/smcr-fo-socat-XXXXXX");
	if (!mkdtemp(tmp))
		die("mkdtemp: %s", strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	/* each phase's bytes per direction: a few seconds of emu over veth at full speed */
	const uint64_t phase = (cp_quick() ? 4ull : 24ull) << 20;
	unsigned port = 20000u + (unsigned)getpid() % 30000u;
	char lsn[96], conn[96];
	snprintf(lsn, sizeof lsn, "TCP-LISTEN:%u,bind=%s,reuseaddr", port, emu_netns_path_ip(&nn, 1, 0));
	snprintf(conn, sizeof conn, "TCP:%s:%u", emu_netns_path_ip(&nn, 1, 0), port);
	spawn(&srv, 1, lsn, "STDIO");
	uint64_t by = smcr_now_ns() + 20 * SEC;
	while (!listening(port)) {
		if (smcr_now_ns() > by || waitpid(srv.pid, NULL, WNOHANG) == srv.pid)
			die("the socat server does not listen on port %u", port);
		usleep(20000);
	}
	spawn(&cli, 0, "STDIO", conn);
	dirs[0] = (struct dir){ .name = "client to server", .wfd = cli.in, .rfd = srv.out, .seed = 11 };
	dirs[1] = (struct dir){ .name = "server to client", .wfd = srv.in, .rfd = cli.out, .seed = 22 };
	for (int d = 0; d < 2; d++) {
		dirs[d].hs = EVP_MD_CTX_new();
		dirs[d].hr = EVP_MD_CTX_new();
		if (!dirs[d].hs || !dirs[d].hr || EVP_DigestInit_ex(dirs[d].hs, EVP_sha256(), NULL) != 1 ||
		    EVP_DigestInit_ex(dirs[d].hr, EVP_sha256(), NULL) != 1)
			die("SHA-256 contexts");
	}

	flow(phase, "start");
	int p1 = two_links("before the first cut");
	cut(p1, "first cut");
	flow(phase, "after the first cut");
	restore(p1);
	int p2 = two_links("path back");
	if (p2 == p1)
		die("the connection is still on path %d, which went down", p1);
	cut(p2, "second cut");
	flow(phase, "after the second cut");
	restore(p2);
	flow(phase, "both paths up");

	/* the end: EOF each way, everything received once */
	for (int d = 0; d < 2; d++) {
		/* what wbuf holds past woff was never written: not part of the stream */
		close(dirs[d].wfd);
		dirs[d].closed = true;
	}
	by = smcr_now_ns() + 60 * SEC;
	while (!dirs[0].eof || !dirs[1].eof) {
		pump(100);
		if (smcr_now_ns() > by)
			die("no EOF 60 s after the end (client to server %llu of %llu, back %llu of %llu)",
			    (unsigned long long)dirs[0].got, (unsigned long long)dirs[0].sent,
			    (unsigned long long)dirs[1].got, (unsigned long long)dirs[1].sent);
	}
	for (int d = 0; d < 2; d++) {
		uint8_t a[32], b[32];
		unsigned la = 0, lb = 0;
		if (EVP_DigestFinal_ex(dirs[d].hs, a, &la) != 1 || EVP_DigestFinal_ex(dirs[d].hr, b, &lb) != 1 ||
		    la != 32 || lb != 32 || memcmp(a, b, 32) || dirs[d].got != dirs[d].sent)
			die("%s: SHA-256 or length differs (%llu sent, %llu received)", dirs[d].name,
			    (unsigned long long)dirs[d].sent, (unsigned long long)dirs[d].got);
		note("%s: %llu bytes, SHA-256 equal at both ends", dirs[d].name,
		     (unsigned long long)dirs[d].sent);
		EVP_MD_CTX_free(dirs[d].hs);
		EVP_MD_CTX_free(dirs[d].hr);
	}
	close(cli.out);
	close(srv.out);
	check_proc(&cli, dirs[0].sent);
	check_proc(&srv, dirs[1].sent);
	emu_netns_teardown(&nn);
	char cmd[96];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (runcmd(&r, "%s", cmd) == 0)
		runcmd_free(&r);
	printf("PASS\n");
	return 0;
}
