/* bpfenv.c: cgroups, bpffs mount, network namespaces and forked peers for the bpf
 * tests (see bpfenv.h for the lifetime rules). */
#define _GNU_SOURCE
#include "lib/bpfenv.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CGROUP2_MAGIC_ 0x63677270

static struct bpfenv *atexit_env;

static int vsh(char *out, size_t n, const char *fmt, va_list ap)
{
	char cmd[4096];
	FILE *f;
	size_t got = 0;
	int st;

	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	fflush(stdout);
	fflush(stderr);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (out && n) {
		while (got < n - 1) {
			size_t r = fread(out + got, 1, n - 1 - got, f);
			if (r == 0)
				break;
			got += r;
		}
		out[got] = 0;
	}
	{
		char sink[512];
		while (fread(sink, 1, sizeof(sink), f) > 0) {
		}
	}
	st = pclose(f);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int bpfenv_sh(const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsh(NULL, 0, fmt, ap);
	va_end(ap);
	return r;
}

int bpfenv_sh_out(char *out, size_t n, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsh(out, n, fmt, ap);
	va_end(ap);
	return r;
}

static int find_cgroup2(char *out, size_t n)
{
	FILE *f = fopen("/proc/mounts", "r");
	char dev[256], dir[256], type[64];
	int r = -1;

	if (!f)
		return -1;
	while (fscanf(f, "%255s %255s %63s %*s %*d %*d", dev, dir, type) == 3) {
		if (strcmp(type, "cgroup2") == 0) {
			snprintf(out, n, "%s", dir);
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

static void tool_path(char *out, size_t n)
{
	const char *b = getenv("SMCR_BINARY_DIR");

	snprintf(out, n, "%s/tools/smcr-bpf/smcr-bpf", b ? b : ".");
}

int bpfenv_precheck(char *why, size_t n)
{
	char cg[256], tool[512];
	struct statfs sf;

	if (geteuid() != 0) {
		snprintf(why, n, "needs root (cgroups, bpffs, BPF programs, namespaces)");
		return BPFENV_SKIP;
	}
	if (find_cgroup2(cg, sizeof(cg)) != 0 || statfs(cg, &sf) != 0 ||
	    (long)sf.f_type != CGROUP2_MAGIC_) {
		snprintf(why, n, "no cgroup v2 hierarchy mounted");
		return BPFENV_SKIP;
	}
	tool_path(tool, sizeof(tool));
	if (access(tool, X_OK) != 0) {
		snprintf(why, n, "%s not built (clang/bpftool/libbpf missing?)", tool);
		return BPFENV_SKIP;
	}
	if (bpfenv_sh("ip -V >/dev/null 2>&1") != 0) {
		snprintf(why, n, "iproute2 (ip) missing");
		return BPFENV_SKIP;
	}
	return 0;
}

/* Whether the name's owner (the pid it starts with) is gone. Our own pid counts as gone:
 * this process has made nothing yet when setup reaps, so a name with our pid was left by
 * an earlier process that had the same pid (pids are reused), and would make our mkdir
 * fail with EEXIST. */
static int pid_dead(const char *s)
{
	char *end;
	long pid = strtol(s, &end, 10);

	if (end == s || pid <= 0 || (*end != 0 && *end != '-'))
		return 0;
	if ((pid_t)pid == getpid())
		return 1;
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static void kill_cgroup_procs(const char *cg)
{
	char p[700];
	FILE *f;
	int pid;

	snprintf(p, sizeof(p), "%s/cgroup.procs", cg);
	f = fopen(p, "r");
	if (!f)
		return;
	while (fscanf(f, "%d", &pid) == 1)
		if (pid > 0 && pid != getpid())
			kill(pid, SIGKILL);
	fclose(f);
}

static void rmdir_retry(const char *p)
{
	for (int i = 0; i < 400; i++) {
		if (rmdir(p) == 0 || errno == ENOENT)
			return;
		if (errno != EBUSY)
			return;
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "bpfenv: could not remove %s: %s\n", p, strerror(errno));
}

static void remove_cgroup(const char *cg)
{
	char p[700];

	snprintf(p, sizeof(p), "%s/in/sub", cg);
	kill_cgroup_procs(p);
	rmdir_retry(p);
	snprintf(p, sizeof(p), "%s/in", cg);
	kill_cgroup_procs(p);
	rmdir_retry(p);
	snprintf(p, sizeof(p), "%s/out", cg);
	kill_cgroup_procs(p);
	rmdir_retry(p);
	kill_cgroup_procs(cg);
	rmdir_retry(cg);
}

/* Removes what earlier runs, killed before their teardown, left behind. */
static void reap_stale(const char *cg_root)
{
	DIR *d;
	struct dirent *de;
	char p[1024];
	FILE *f;

	d = opendir(cg_root);
	if (d) {
		while ((de = readdir(d)) != NULL) {
			if (strncmp(de->d_name, "smcr-test-", 10) == 0 &&
			    pid_dead(de->d_name + 10)) {
				snprintf(p, sizeof(p), "%s/%s", cg_root, de->d_name);
				remove_cgroup(p);
			}
		}
		closedir(d);
	}
	d = opendir("/run/netns");
	if (d) {
		while ((de = readdir(d)) != NULL)
			if (strncmp(de->d_name, "smcrt-", 6) == 0 && pid_dead(de->d_name + 6))
				bpfenv_sh("ip netns del %s 2>/dev/null", de->d_name);
		closedir(d);
	}
	f = fopen("/proc/mounts", "r");
	if (f) {
		char dev[256], dir[256], type[64];
		while (fscanf(f, "%255s %255s %63s %*s %*d %*d", dev, dir, type) == 3) {
			if (strncmp(dir, "/tmp/smcr-bpftest-", 18) == 0 && pid_dead(dir + 18)) {
				umount2(dir, MNT_DETACH);
				rmdir(dir);
			}
		}
		fclose(f);
	}
}

static void atexit_teardown(void)
{
	if (atexit_env)
		bpfenv_teardown(atexit_env);
}

static void on_signal(int sig)
{
	atexit_teardown();
	signal(sig, SIG_DFL);
	raise(sig);
}

int bpfenv_setup(struct bpfenv *e, int install)
{
	char dir[200];

	memset(e, 0, sizeof(*e));
	if (find_cgroup2(e->cg_root, sizeof(e->cg_root)) != 0)
		return -1;
	reap_stale(e->cg_root);
	tool_path(e->tool, sizeof(e->tool));
	snprintf(e->cg, sizeof(e->cg), "%s/smcr-test-%d", e->cg_root, (int)getpid());
	snprintf(e->cg_in, sizeof(e->cg_in), "%s/in", e->cg);
	snprintf(e->cg_out, sizeof(e->cg_out), "%s/out", e->cg);
	atexit_env = e;
	static int hooked;
	if (!hooked) {
		atexit(atexit_teardown);
		signal(SIGTERM, on_signal);
		signal(SIGINT, on_signal);
		hooked = 1;
	}
	if (mkdir(e->cg, 0755) != 0 || mkdir(e->cg_in, 0755) != 0 || mkdir(e->cg_out, 0755) != 0) {
		fprintf(stderr, "bpfenv: mkdir cgroup %s: %s\n", e->cg, strerror(errno));
		return -1;
	}
	snprintf(dir, sizeof(dir), "/tmp/smcr-bpftest-%d-XXXXXX", (int)getpid());
	if (!mkdtemp(dir)) {
		fprintf(stderr, "bpfenv: mkdtemp: %s\n", strerror(errno));
		return -1;
	}
	snprintf(e->mnt, sizeof(e->mnt), "%s", dir);
	if (mount("bpf", e->mnt, "bpf", 0, "mode=0700") != 0) {
		fprintf(stderr, "bpfenv: mount bpffs on %s: %s\n", e->mnt, strerror(errno));
		rmdir(e->mnt);
		e->mnt[0] = 0;
		return -1;
	}
	e->mounted = 1;
	snprintf(e->pin, sizeof(e->pin), "%s/smcr", e->mnt);
	if (install) {
		if (bpfenv_sh("%s install --cgroup %s --pin-dir %s >/dev/null", e->tool, e->cg_in,
		              e->pin) != 0) {
			fprintf(stderr, "bpfenv: smcr-bpf install failed\n");
			return -1;
		}
		e->installed = 1;
	}
	return 0;
}

void bpfenv_teardown(struct bpfenv *e)
{
	if (!e || !e->cg[0])
		return;
	if (e->installed)
		bpfenv_sh("%s uninstall --pin-dir %s >/dev/null 2>&1", e->tool, e->pin);
	e->installed = 0;
	for (int i = 0; i < e->nns; i++)
		bpfenv_sh("ip netns del %s 2>/dev/null", e->ns[i]);
	e->nns = 0;
	if (e->mounted) {
		umount2(e->mnt, MNT_DETACH);
		e->mounted = 0;
	}
	if (e->mnt[0]) {
		rmdir(e->mnt);
		e->mnt[0] = 0;
	}
	remove_cgroup(e->cg);
	e->cg[0] = 0;
	if (atexit_env == e)
		atexit_env = NULL;
}

int bpfenv_netns(struct bpfenv *e, const char *tag, char *out, size_t n)
{
	if (e->nns >= BPFENV_MAX_NS)
		return -1;
	snprintf(e->ns[e->nns], sizeof(e->ns[0]), "smcrt-%d-%s", (int)getpid(), tag);
	if (bpfenv_sh("ip netns add %s && ip -n %s link set lo up", e->ns[e->nns], e->ns[e->nns]) !=
	    0)
		return -1;
	if (out)
		snprintf(out, n, "%s", e->ns[e->nns]);
	e->nns++;
	return 0;
}

int bpfenv_setns(const char *name)
{
	char p[256];
	int fd, r;

	if (!name)
		return 0;
	snprintf(p, sizeof(p), "/run/netns/%s", name);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	r = setns(fd, CLONE_NEWNET);
	close(fd);
	return r;
}

int bpfenv_enter(const struct bpfenv *e, int covered)
{
	char p[700];
	FILE *f;
	int r;

	if (covered == 2)
		snprintf(p, sizeof(p), "%s/sub/cgroup.procs", e->cg_in);
	else
		snprintf(p, sizeof(p), "%s/cgroup.procs", covered ? e->cg_in : e->cg_out);
	f = fopen(p, "w");
	if (!f)
		return -1;
	r = fprintf(f, "%d\n", (int)getpid()) > 0 ? 0 : -1;
	if (fclose(f) != 0)
		r = -1;
	return r;
}

void *bpfenv_shared(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void bpfenv_unshared(void *p, size_t n)
{
	if (p)
		munmap(p, n);
}

pid_t bpfenv_spawn(const struct bpfenv *e, int covered, const char *netns, int (*fn)(void *),
                   void *arg)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid != 0)
		return pid;
	/* Peer: never returns into the test runner. */
	atexit_env = NULL;
	if (bpfenv_enter(e, covered) != 0) {
		fprintf(stderr, "peer: cannot enter cgroup: %s\n", strerror(errno));
		_exit(120);
	}
	if (bpfenv_setns(netns) != 0) {
		fprintf(stderr, "peer: cannot join netns %s: %s\n", netns, strerror(errno));
		_exit(121);
	}
	_exit(fn(arg));
}

int bpfenv_wait(pid_t pid, int timeout_ms)
{
	int st;

	for (int waited = 0;; waited += 2) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (r < 0)
			return -1;
		if (waited >= timeout_ms) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			fprintf(stderr, "bpfenv: peer %d timed out\n", (int)pid);
			return -1;
		}
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (!WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int bpfenv_veth_pair(struct bpfenv *e, char *a, char *b, size_t n)
{
	if (bpfenv_netns(e, "a", a, n) || bpfenv_netns(e, "b", b, n))
		return -1;
	return bpfenv_sh("ip -n %s link add va type veth peer name vb netns %s && "
			 "ip -n %s addr add 10.77.0.1/24 dev va && "
			 "ip -n %s addr add fd77::1/64 dev va nodad && ip -n %s link set va up && "
			 "ip -n %s addr add 10.77.0.2/24 dev vb && "
			 "ip -n %s addr add fd77::2/64 dev vb nodad && ip -n %s link set vb up",
			 a, b, a, a, a, b, b, b) == 0
		       ? 0
		       : -1;
}

int bpfenv_main(const struct CMUnitTest *tests, size_t n, const char *need_cmd,
		const char *need_what, int (*setup)(void **), int (*teardown)(void **))
{
	char why[256];
	if (bpfenv_precheck(why, sizeof(why)) != 0) {
		printf("SKIP: %s\n", why);
		return BPFENV_SKIP;
	}
	if (need_cmd && bpfenv_sh("%s >/dev/null 2>&1", need_cmd) != 0) {
		printf("SKIP: %s missing\n", need_what);
		return BPFENV_SKIP;
	}
	if (getenv("IT_FILTER"))
		cmocka_set_test_filter(getenv("IT_FILTER"));
	return _cmocka_run_group_tests("bpf", tests, n, setup, teardown);
}

int bpfenv_group_teardown(void **state)
{
	(void)state;
	if (atexit_env)
		bpfenv_teardown(atexit_env);
	return 0;
}
