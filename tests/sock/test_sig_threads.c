/* test_sig_threads.c: the readiness rules of sig.h where two threads meet on one socket's
 * token queue (src/sock/sig.c): the engine's callback writing a POLLIN token on the
 * progress thread while the program's receive, which left bytes unread, re-synchronises
 * POLLIN on its own thread (sock_sync_after_call -> sig_readable_if_none).
 *
 * The bug this pins (docs/parts/hold.md): sig_readable counts a token before
 * its send (for sig_drain_in's lock-free check), and sig_readable_if_none's lock-free
 * check took "tokens > 0" for "POLLIN is on". When the callback was between the count and
 * the send, the program's receive returned with data left and its poll right after saw
 * no POLLIN (it_ready test_deferred_token with SMCR_HOLD_US=1000: the progress thread,
 * awake for the hold's timer, took the arrival while the direct-woken reader read it).
 *
 * Made deterministic with the layer's syscall table (sys.h): the token's send blocks
 * until the reading thread has polled (or 200 ms passed), so the reader always runs
 * inside the window. Labels unit + threads (tests/sock/CMakeLists.txt). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sock/sig.h"
#include "sock/sys.h"

/* The hook's state: one token send (to `end`) is held back. */
static pthread_mutex_t hk_lock = PTHREAD_MUTEX_INITIALIZER; /* protects the three below */
static pthread_cond_t hk_cond = PTHREAD_COND_INITIALIZER;
static int hk_end = -1;	     /* the fd whose next 1-byte send is held; -1 none */
static bool hk_in_send;	     /* the held send has begun (writer inside the window) */
static bool hk_reader_done;  /* the reader has polled: the send may go */
static ssize_t (*real_send)(int, const void *, size_t, int);

static ssize_t held_send(int fd, const void *buf, size_t len, int flags)
{
	pthread_mutex_lock(&hk_lock);
	if (fd == hk_end && len == 1) {
		hk_end = -1;
		hk_in_send = true;
		pthread_cond_broadcast(&hk_cond);
		/* Wait for the reader's poll. A reader blocked on the sig lock (the fixed code)
		 * never gets there: the send goes after 200 ms, and the reader then sees it. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (!hk_reader_done)
			if (pthread_cond_timedwait(&hk_cond, &hk_lock, &ts) == ETIMEDOUT)
				break;
	}
	pthread_mutex_unlock(&hk_lock);
	return real_send(fd, buf, len, flags);
}

static short in_bits(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = poll(&p, 1, 0);
	assert_true(n >= 0);
	return (short)(n ? p.revents & POLLIN : 0);
}

static int queued(int fd)
{
	int q = -1;
	assert_int_equal(ioctl(fd, FIONREAD, &q), 0);
	return q;
}

static void *writer(void *arg)
{
	sig_readable(arg); /* the engine's callback: an arrival, a token */
	return NULL;
}

/* The callback's token is counted but not yet sent when the program's call
 * re-synchronises POLLIN: on return from sig_readable_if_none, POLLIN must be on, and
 * exactly one token queued (the callback's; none added). */
static void test_if_none_waits_for_token_in_flight(void **state)
{
	(void)state;
	struct sig s;
	assert_int_equal(sig_open(&s), 0);
	real_send = sock_sys.send;
	hk_in_send = hk_reader_done = false;
	hk_end = s.end;
	sock_sys.send = held_send;

	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, writer, &s), 0);
	pthread_mutex_lock(&hk_lock);
	while (!hk_in_send)
		pthread_cond_wait(&hk_cond, &hk_lock); /* the writer is in the window */
	pthread_mutex_unlock(&hk_lock);

	sig_readable_if_none(&s); /* the receive's end: data left, POLLIN on */
	short bits = in_bits(s.prog);
	int q = queued(s.prog);

	pthread_mutex_lock(&hk_lock);
	hk_reader_done = true;
	pthread_cond_broadcast(&hk_cond);
	pthread_mutex_unlock(&hk_lock);
	assert_int_equal(pthread_join(t, NULL), 0);
	sock_sys.send = real_send;

	assert_int_equal(bits, POLLIN);
	assert_int_equal(q, 1);
	assert_int_equal(queued(s.prog), 1); /* still one token after the writer's send */
	assert_int_equal(s.tokens, 1);
	close(s.prog);
	sig_close(&s);
}

/* The fast path still holds where it is right: a queued token, nothing in flight, no
 * second token (and no lock needed). And a failed send leaves nothing counted. */
static void test_if_none_fast_path_and_failed_send(void **state)
{
	(void)state;
	struct sig s;
	assert_int_equal(sig_open(&s), 0);
	sig_readable(&s);
	assert_false(s.sending);
	sig_readable_if_none(&s);
	assert_int_equal(queued(s.prog), 1);
	assert_int_equal(s.tokens, 1);
	sig_drain_in(&s);
	assert_int_equal(in_bits(s.prog), 0);
	assert_int_equal(s.tokens, 0);
	sig_readable_if_none(&s); /* none queued: one now */
	assert_int_equal(in_bits(s.prog), POLLIN);
	assert_int_equal(s.tokens, 1);
	sig_drain_in(&s);
	/* the send fails (the program end is gone): not counted, not in flight */
	close(s.prog);
	sig_readable(&s);
	assert_int_equal(s.tokens, 0);
	assert_false(s.sending);
	sig_close(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_if_none_waits_for_token_in_flight),
		cmocka_unit_test(test_if_none_fast_path_and_failed_send),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
