/* it_data.c: data integrity over SMC-R between two processes (docs/design/engine-decisions.md test
 * list): random data both ways at once with SHA-256 checked at 1 MiB and 1 GiB (the latter in the
 * plain stage only: skipped when SMCR_TEST_QUICK is set), writes of random sizes from 1 byte to
 * 1 MiB through every send call (send, write, writev, sendmsg) read back through every
 * receive call (recv, read, readv, recvmsg, MSG_WAITALL), and every write size from 1 to
 * 4096 bytes. Every connection must really be SMC-R (SOL_SMCR query). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/uio.h>

#include "itlib.h"

enum pattern {
	PAT_BULK,   /* fixed 64 KiB writes, both directions at once */
	PAT_RANDOM, /* random write sizes 1..1 MiB through every send call */
	PAT_EVERY,  /* one write of each size 1..4096 */
};

struct side_result {
	uint8_t sent[32];
	uint8_t recvd[32];
	long long nsent, nrecvd;
	int mode;
};

struct shared {
	struct side_result srv, cli;
};

struct job {
	enum pattern pat;
	long long bytes; /* each direction */
	uint64_t seed;
	int fd;
	struct side_result *res;
};

static int lfd;
static uint16_t port;
static struct shared *sh;

/* The sending half: bytes of pseudo-random data in the pattern's write sizes. */
static void *sender(void *arg)
{
	struct job *j = arg;
	uint64_t seed = j->seed, sizes = j->seed ^ 0x9e3779b97f4a7c15ull;
	size_t cap = 1 << 20;
	uint8_t *buf = malloc(cap);
	struct it_sha *sha = it_sha_new();
	long long left = j->bytes;
	unsigned n = 0, call = 0;
	while (left > 0) {
		size_t len;
		if (j->pat == PAT_BULK) {
			len = 65536;
		} else if (j->pat == PAT_EVERY) {
			len = ++n;
		} else {
			uint64_t r;
			it_fill_random(&r, sizeof(r), &sizes);
			/* log-uniform: as many small writes as large ones */
			unsigned bits = (unsigned)(r % 21); /* 2^0 .. 2^20 */
			len = 1 + (size_t)((r >> 8) % ((size_t)1 << bits));
		}
		if ((long long)len > left)
			len = (size_t)left;
		it_fill_random(buf, len, &seed);
		it_sha_update(sha, buf, len);
		size_t off = 0;
		while (off < len) {
			ssize_t k;
			switch (j->pat == PAT_RANDOM ? call++ % 4 : 0) {
			case 1:
				k = smcr_write(j->fd, buf + off, len - off);
				break;
			case 2: {
				size_t a = (len - off) / 3, b = (len - off) / 3;
				struct iovec v[3] = { { buf + off, a },
						      { buf + off + a, b },
						      { buf + off + a + b, len - off - a - b } };
				k = smcr_writev(j->fd, v, 3);
				break;
			}
			case 3: {
				struct iovec v = { buf + off, len - off };
				struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
				k = smcr_sendmsg(j->fd, &m, MSG_NOSIGNAL);
				break;
			}
			default:
				k = smcr_send(j->fd, buf + off, len - off, MSG_NOSIGNAL);
				break;
			}
			IT_CHECK(k > 0);
			off += (size_t)k;
		}
		left -= (long long)len;
	}
	IT_CHECK(smcr_shutdown(j->fd, SHUT_WR) == 0);
	it_sha_final(sha, j->res->sent);
	j->res->nsent = j->bytes;
	free(buf);
	return NULL;
}

/* The receiving half: to EOF, in varying read sizes and calls. */
static void receiver(struct job *j)
{
	size_t cap = 1 << 20;
	uint8_t *buf = malloc(cap);
	struct it_sha *sha = it_sha_new();
	uint64_t r = j->seed * 7 + 1;
	long long total = 0;
	unsigned call = 0, n = 0;
	for (;;) {
		size_t len;
		ssize_t k;
		if (j->pat == PAT_EVERY && total < j->bytes) {
			/* exactly the writer's sizes, with MSG_WAITALL */
			len = ++n;
			if ((long long)len > j->bytes - total)
				len = (size_t)(j->bytes - total);
			k = smcr_recv(j->fd, buf, len, MSG_WAITALL);
			IT_CHECK(k == (ssize_t)len);
		} else {
			uint64_t x;
			it_fill_random(&x, sizeof(x), &r);
			len = j->pat == PAT_RANDOM ? 1 + (size_t)(x % cap) : cap;
			switch (j->pat == PAT_RANDOM ? call++ % 4 : 0) {
			case 1:
				k = smcr_read(j->fd, buf, len);
				break;
			case 2: {
				struct iovec v[2] = { { buf, len / 2 }, { buf + len / 2, len - len / 2 } };
				k = smcr_readv(j->fd, v, 2);
				break;
			}
			case 3: {
				struct iovec v = { buf, len };
				struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
				k = smcr_recvmsg(j->fd, &m, 0);
				break;
			}
			default:
				k = smcr_recv(j->fd, buf, len, 0);
				break;
			}
		}
		IT_CHECK(k >= 0);
		if (k == 0)
			break;
		it_sha_update(sha, buf, (size_t)k);
		total += k;
	}
	it_sha_final(sha, j->res->recvd);
	j->res->nrecvd = total;
	free(buf);
}

static void run_side(int fd, enum pattern pat, long long bytes, uint64_t seed,
		     struct side_result *res)
{
	struct smcr_info in;
	IT_CHECK(it_info(fd, &in));
	res->mode = in.mode;
	struct job snd = { pat, bytes, seed, fd, res };
	struct job rcv = { pat, bytes, seed, fd, res };
	pthread_t t;
	IT_CHECK(pthread_create(&t, NULL, sender, &snd) == 0);
	receiver(&rcv);
	pthread_join(t, NULL);
	IT_CHECK(smcr_close(fd) == 0);
}

struct params {
	enum pattern pat;
	long long bytes;
};

static int server(void *arg)
{
	struct params *p = arg;
	it_child_env(0);
	int fd = smcr_accept(lfd, NULL, NULL);
	IT_CHECK(fd >= 0);
	smcr_close(lfd);
	run_side(fd, p->pat, p->bytes, 1111, &sh->srv);
	return 0;
}

static int client(void *arg)
{
	struct params *p = arg;
	it_child_env(1);
	smcr_close(lfd);
	int fd = it_connect(false, port);
	IT_CHECK(fd >= 0);
	run_side(fd, p->pat, p->bytes, 2222, &sh->cli);
	return 0;
}

static void run(enum pattern pat, long long bytes, int timeout_ms)
{
	memset(sh, 0, sizeof(*sh));
	it_rules("use smc both * *");
	lfd = it_listen(false, &port);
	assert_true(lfd >= 0);
	struct params p = { pat, bytes };
	assert_int_equal(it_run_pair(lfd, server, &p, client, &p, timeout_ms), 0);
	assert_int_equal(sh->srv.mode, SMCR_MODE_SMCR);
	assert_int_equal(sh->cli.mode, SMCR_MODE_SMCR);
	/* each direction: what one side sent is what the other received */
	assert_int_equal(sh->cli.nsent, bytes);
	assert_int_equal(sh->srv.nrecvd, bytes);
	assert_memory_equal(sh->cli.sent, sh->srv.recvd, 32);
	assert_int_equal(sh->srv.nsent, bytes);
	assert_int_equal(sh->cli.nrecvd, bytes);
	assert_memory_equal(sh->srv.sent, sh->cli.recvd, 32);
}

static void test_1mib_both_ways(void **state)
{
	(void)state;
	run(PAT_BULK, 1 << 20, 30000);
}

static void test_random_sizes(void **state)
{
	(void)state;
	run(PAT_RANDOM, getenv("SMCR_TEST_QUICK") ? 8ll << 20 : 32ll << 20, 60000);
}

static void test_every_size_1_to_4096(void **state)
{
	(void)state;
	run(PAT_EVERY, 4096ll * 4097 / 2, 60000);
}

static void test_1gib_both_ways(void **state)
{
	(void)state;
	if (getenv("SMCR_TEST_QUICK")) {
		fprintf(stderr, "1 GiB transfer skipped: SMCR_TEST_QUICK is set (sanitizer stage)\n");
		skip();
	}
	run(PAT_BULK, 1ll << 30, 110000);
}

int main(void)
{
	sh = it_shared(sizeof(*sh));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_1mib_both_ways),
		cmocka_unit_test(test_random_sizes),
		cmocka_unit_test(test_every_size_1_to_4096),
		cmocka_unit_test(test_1gib_both_ways),
	};
	return IT_MAIN(tests);
}
