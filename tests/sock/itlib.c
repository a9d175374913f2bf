/* itlib.c: helpers for the two-process integration tests (itlib.h). */
#define _GNU_SOURCE
#include "itlib.h"

#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <errno.h>
#include <openssl/evp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "core/core_int.h"
#include "sock/rules.h"
#include "sock/sock.h"
#include "wire/clc.h"
#include "util/clock.h"
#include "util/log.h"

void it_child_env(int role)
{
	const char *dv = getenv("IT_DEVICE");
	if (dv && strcmp(dv, "shm2") == 0) {
		/* two shm devices: link groups of two links (docs/FAILOVER.md) */
		setenv("SMCR_DEVICES", "shm shm", 1);
	} else if (dv && strcmp(dv, "verbs") == 0) {
		/* real verbs (the guests' rxe0, tests/vm/scenario-smcr.sh): both ends of a test
		 * on one device, as rxe's loopback allows */
		setenv("SMCR_DEVICES", "verbs", 1);
	} else if (!dv || strcmp(dv, "emu") != 0) {
		setenv("SMCR_DEVICES", "shm", 1);
	} else {
	/* emu: each process its own loopback address, all on one port per test run */
	char spec[96];
	const char *port = getenv("IT_EMU_PORT");
	snprintf(spec, sizeof(spec), "emu:ip=127.0.0.%d,port=%s", 10 + role, port ? port : "0");
	setenv("SMCR_DEVICES", spec, 1);
	}
	if (!getenv("SMCR_LOG"))
		setenv("SMCR_LOG", "error", 1);
	smcr_log_set_level((enum smcr_log_level)smcr_log_parse_level(getenv("SMCR_LOG")));
}

void it_rules(const char *rules)
{
	setenv("SMCR_RULES", rules, 1);
	setenv("SMCR_CONFIG", "/nonexistent/smcr.conf", 1);
	rules_reload();
}

pid_t it_fork(int (*fn)(void *arg), void *arg)
{
	fflush(NULL);
	pid_t p = fork();
	if (p == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
		/* exit(), not _exit(): the library's exit handler lets closing connections
		 * finish their close protocol, as the kernel does for TCP after a process ends */
		exit(fn(arg));
	}
	return p;
}

int it_wait(pid_t pid, int timeout_ms)
{
	long long t0 = it_now_ms();
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, timeout_ms > 0 ? WNOHANG : 0);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (r < 0 && errno != EINTR)
			return 255;
		if (timeout_ms > 0) {
			if (it_now_ms() - t0 > timeout_ms) {
				fprintf(stderr, "it_wait: pid %d timed out after %d ms; killing\n",
					(int)pid, timeout_ms);
				kill(pid, SIGKILL);
				waitpid(pid, &st, 0);
				return 200;
			}
			usleep(2000);
		}
	}
}

int it_run_pair(int lfd, int (*srv)(void *), void *sarg, int (*cli)(void *), void *carg,
		int timeout_ms)
{
	pid_t s = it_fork(srv, sarg);
	pid_t c = it_fork(cli, carg);
	smcr_close(lfd);
	int rc_c = it_wait(c, timeout_ms);
	int rc_s = it_wait(s, timeout_ms);
	if (rc_c)
		fprintf(stderr, "it_run_pair: client exited with %d\n", rc_c);
	if (rc_s)
		fprintf(stderr, "it_run_pair: server exited with %d\n", rc_s);
	return rc_c ? rc_c : rc_s;
}

int it_run_smc_pair(int *lfd, uint16_t *port, int (*srv)(void *), void *sarg,
		    int (*cli)(void *), void *carg, int timeout_ms)
{
	it_rules("use smc both * *");
	*lfd = it_listen(false, port);
	if (*lfd < 0) {
		fprintf(stderr, "it_run_smc_pair: no listener (errno %d)\n", errno);
		return -1;
	}
	return it_run_pair(*lfd, srv, sarg, cli, carg, timeout_ms);
}

int it_accept_smc(int lfd)
{
	it_child_env(0);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	smcr_close(lfd);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	return fd;
}

int it_client_smc(int lfd, uint16_t port)
{
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in) && in.mode == SMCR_MODE_SMCR);
	return fd;
}

int it_listen(bool v6, uint16_t *port)
{
	int fd = smcr_socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	smcr_setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	socklen_t sl;
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*a);
	}
	if (smcr_bind(fd, (struct sockaddr *)&ss, sl) < 0 || smcr_listen(fd, 512) < 0) {
		smcr_close(fd);
		return -1;
	}
	sl = sizeof(ss);
	smcr_getsockname(fd, (struct sockaddr *)&ss, &sl);
	*port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
			 : ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

int it_connect(bool v6, uint16_t port)
{
	int fd = smcr_socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	socklen_t sl;
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		a->sin6_port = htons(port);
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a->sin_port = htons(port);
		sl = sizeof(*a);
	}
	if (smcr_connect(fd, (struct sockaddr *)&ss, sl) < 0) {
		int e = errno;
		smcr_close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

bool it_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t k = smcr_send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

bool it_read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t k = smcr_recv(fd, p, n, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

struct it_sha {
	EVP_MD_CTX *ctx;
};

struct it_sha *it_sha_new(void)
{
	struct it_sha *s = malloc(sizeof(*s));
	s->ctx = EVP_MD_CTX_new();
	EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL);
	return s;
}

void it_sha_update(struct it_sha *s, const void *p, size_t n)
{
	EVP_DigestUpdate(s->ctx, p, n);
}

void it_sha_final(struct it_sha *s, uint8_t out[32])
{
	unsigned len = 32;
	EVP_DigestFinal_ex(s->ctx, out, &len);
	EVP_MD_CTX_free(s->ctx);
	free(s);
}

long long it_read_to_eof(int fd, struct it_sha *sha, size_t chunk)
{
	char *buf = malloc(chunk);
	long long total = 0;
	for (;;) {
		ssize_t k = smcr_recv(fd, buf, chunk, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			total = -1;
			break;
		}
		if (k == 0)
			break;
		if (sha)
			it_sha_update(sha, buf, (size_t)k);
		total += k;
	}
	free(buf);
	return total;
}

void it_fill_random(void *buf, size_t n, uint64_t *seed)
{
	uint8_t *p = buf;
	uint64_t x = *seed;
	for (size_t i = 0; i < n; i += 8) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		uint64_t v = x * 0x2545F4914F6CDD1Dull;
		size_t k = n - i < 8 ? n - i : 8;
		memcpy(p + i, &v, k);
	}
	*seed = x;
}

bool it_info(int fd, struct smcr_info *in)
{
	socklen_t l = sizeof(*in);
	memset(in, 0, sizeof(*in));
	return smcr_getsockopt(fd, SOL_SMCR, SMCR_INFO, in, &l) == 0 && l == sizeof(*in);
}

void it_list_fds(const char *tag)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[300], t[300];
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(p, t, sizeof(t) - 1);
		if (n > 0) {
			t[n] = 0;
			fprintf(stderr, "%s: fd %s -> %s\n", tag, e->d_name, t);
		}
	}
	if (d)
		closedir(d);
}

int it_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ".", "..", the DIR's own fd */
}

long long it_now_ms(void)
{
	return (long long)(smcr_now_ns() / SMCR_NS_PER_MS);
}

bool it_poll_until(bool (*cond)(void *arg), void *arg, int timeout_ms, int step_us)
{
	long long t0 = it_now_ms();
	while (it_now_ms() - t0 < timeout_ms) {
		if (cond(arg))
			return true;
		usleep((useconds_t)step_us);
	}
	return cond(arg);
}

void it_engine_stats(struct core_engine_stats *st)
{
	struct core_engine *e = sock_engine_if_up();
	IT_CHECK(e != NULL);
	core_engine_stats(e, st);
}

static bool no_conns(void *unused)
{
	(void)unused;
	struct core_engine_stats st;
	it_engine_stats(&st);
	return st.conns == 0;
}

bool it_engine_conns_gone(void)
{
	if (it_poll_until(no_conns, NULL, 5000, 500))
		return true;
	struct core_engine_stats st;
	it_engine_stats(&st);
	fprintf(stderr, "[child %d] engine: %u connection(s) after 5 s\n", (int)getpid(), st.conns);
	return false;
}

void *it_shared(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void it_debug_state(int fd, const char *tag)
{
	struct sock *s = sock_get(fd);
	if (!s) {
		fprintf(stderr, "[%d] %s: fd %d is not an smcr socket\n", (int)getpid(), tag, fd);
		return;
	}
	struct core_conn_info ci;
	memset(&ci, 0, sizeof(ci));
	unsigned ev = 0;
	if (s->conn) {
		core_conn_info(s->conn, &ci);
		ev = core_conn_events(s->conn);
	}
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP };
	poll(&p, 1, 0);
	fprintf(stderr,
		"[%d] %s: fd %d state %d core %s events 0x%x err %d cdc rx %llu tx %llu; "
		"sig tokens %u filled %u blocked %d rdhup %d dead %d; poll 0x%x\n",
		(int)getpid(), tag, fd, atomic_load(&s->state), ci.state ? ci.state : "-", ev,
		ci.error, (unsigned long long)ci.cdc_received, (unsigned long long)ci.cdc_sent,
		s->sig.tokens, s->sig.filled, s->sig.out_blocked, s->sig.rdhup, s->sig.dead,
		p.revents);
	struct core_engine *e = sock_engine();
	if (e) {
		struct core_engine_stats st;
		core_engine_stats(e, &st);
		fprintf(stderr, "[%d] %s: engine lgs %u links %u conns %u cdc_dropped %llu "
			"llc_dropped %llu\n", (int)getpid(), tag, st.lgs, st.links, st.conns,
			(unsigned long long)st.cdc_rx_dropped, (unsigned long long)st.llc_rx_dropped);
	}
	sock_put(s);
}

void it_wait_at_least(_Atomic int *v, int want)
{
	for (int i = 0; i < 20000 && *v < want; i++)
		usleep(500);
	IT_CHECK(*v >= want);
}

unsigned it_engine_spinners(void)
{
	struct core_engine *e = sock_engine();
	IT_CHECK(e != NULL);
	pthread_mutex_lock(&e->lock);
	unsigned n = e->spinners;
	pthread_mutex_unlock(&e->lock);
	return n;
}

int it_raw_connect(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	IT_CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	return fd;
}

int it_echo_server(int lfd, struct it_echo_rec *r, int expect)
{
	it_child_env(0);
	IT_CHECK(expect <= IT_ECHO_MAX);
	for (int i = 0; i < expect; i++) {
		int fd = smcr_accept(lfd, NULL, NULL);
		IT_CHECK(fd >= 0);
		struct smcr_info in;
		IT_CHECK(it_info(fd, &in));
		r->mode[i] = in.mode;
		r->local[i] = in.local_reason;
		r->peer[i] = in.peer_reason;
		ssize_t n = smcr_recv(fd, r->data[i], 5, MSG_WAITALL);
		IT_CHECK(n == 5);
		IT_CHECK(it_write_all(fd, r->data[i], 5));
		r->n = i + 1;
		smcr_close(fd);
	}
	return 0;
}

int it_real_client(int lfd, uint16_t port)
{
	int fd = it_client_smc(lfd, port);
	IT_CHECK(it_write_all(fd, "real!", 5));
	char b[5];
	IT_CHECK(it_read_all(fd, b, 5) && memcmp(b, "real!", 5) == 0);
	smcr_close(fd);
	return 0;
}

void it_raw_write(int fd, const void *b, size_t n)
{
	IT_CHECK(write(fd, b, n) == (ssize_t)n);
}

size_t it_raw_read_clc(int fd, uint8_t *buf, size_t cap, int timeout_ms)
{
	size_t got = 0, want = CLC_HDR_LEN;
	while (got < want) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		IT_CHECK(poll(&p, 1, timeout_ms) == 1);
		ssize_t n = read(fd, buf + got, want - got);
		IT_CHECK(n > 0);
		got += (size_t)n;
		if (got == CLC_HDR_LEN) {
			uint16_t len;
			IT_CHECK(clc_peek_header(buf, got, NULL, &len, NULL) == 0);
			IT_CHECK(len >= CLC_HDR_LEN && len <= cap);
			want = len;
		}
	}
	return got;
}

size_t it_clc_enc(const struct clc_msg *m, uint8_t *out, size_t cap)
{
	size_t len = 0;
	IT_CHECK(clc_encode(m, out, cap, &len) == 0);
	return len;
}

size_t it_clc_proposal(uint8_t *out, size_t cap, uint16_t instance, uint8_t gid_last,
		       uint32_t subnet, uint8_t plen, uint8_t path)
{
	struct clc_msg m;
	memset(&m, 0, sizeof(m));
	m.type = CLC_PROPOSAL;
	clc_proposal_init(&m.proposal);
	m.proposal.peer_id.instance = instance;
	m.proposal.gid.b[10] = 0xff;
	m.proposal.gid.b[11] = 0xff;
	m.proposal.gid.b[12] = 127;
	m.proposal.gid.b[15] = gid_last;
	m.proposal.ipv4_subnet = subnet;
	m.proposal.ipv4_prefix_len = plen;
	m.proposal.typev1 = path;
	return it_clc_enc(&m, out, cap);
}

void it_emu_port_env(void)
{
	char port_s[16];
	snprintf(port_s, sizeof(port_s), "%d", 20000 + (int)(getpid() % 20000));
	setenv("IT_EMU_PORT", port_s, 1);
}

int it_main(const struct CMUnitTest *tests, size_t n)
{
	it_emu_port_env();
	if (getenv("IT_FILTER"))
		cmocka_set_test_filter(getenv("IT_FILTER"));
	return _cmocka_run_group_tests("tests", tests, n, NULL, NULL);
}
