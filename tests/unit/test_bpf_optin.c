/* test_bpf_optin.c: the opt-in channel's pure part (what a state read means, rules R1-R7
 * of src/bpf/smcr_opt.bpf.c seen from the application) and its error paths that need no
 * BPF: non-TCP sockets, bad descriptors. The kernel half is tested in tests/bpf/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "bpf/abi.h"
#include "bpf/optin.h"

#define F(x) SMCR_F_##x
#define CLIENT (F(REQUESTED) | F(ARMED) | F(ACTIVE))
#define CHILD (F(REQUESTED) | F(ARMED) | F(LISTENER) | F(CHILD))

static enum smcr_optin_result cl(uint32_t flags)
{
	return smcr_optin_classify(SMCR_BPF_ABI, flags);
}

static void test_classify_client(void **state)
{
	(void)state;
	assert_int_equal(cl(0), SMCR_OPTIN_NOT_REQUESTED);
	assert_int_equal(cl(F(REQUESTED)), SMCR_OPTIN_PENDING); /* before connect() */
	assert_int_equal(cl(F(REQUESTED) | F(LATE)), SMCR_OPTIN_TOO_LATE);
	assert_int_equal(cl(F(REQUESTED) | F(ARMFAIL)), SMCR_OPTIN_ARM_FAILED);
	assert_int_equal(cl(CLIENT), SMCR_OPTIN_PENDING);
	assert_int_equal(cl(CLIENT | F(SENT)), SMCR_OPTIN_PENDING); /* SYN-ACK not seen yet */
	assert_int_equal(cl(CLIENT | F(SENT) | F(DONE)), SMCR_OPTIN_PEER_NO);
	assert_int_equal(cl(CLIENT | F(SENT) | F(PEER) | F(DONE)), SMCR_OPTIN_SMC);
	/* Our SYN never carried it: whatever came back, plain TCP (R7). */
	assert_int_equal(cl(CLIENT | F(NOSPACE) | F(PEER) | F(DONE)), SMCR_OPTIN_NO_SPACE);
	/* A retransmitted SYN carried it after a first one had no room: SMC. */
	assert_int_equal(cl(CLIENT | F(NOSPACE) | F(SENT) | F(PEER) | F(DONE)), SMCR_OPTIN_SMC);
}

static void test_classify_server(void **state)
{
	(void)state;
	assert_int_equal(cl(F(REQUESTED) | F(ARMED) | F(LISTENER)), SMCR_OPTIN_LISTENING);
	assert_int_equal(cl(F(REQUESTED) | F(NOSAVESYN)), SMCR_OPTIN_NO_SAVE_SYN);
	assert_int_equal(cl(CHILD), SMCR_OPTIN_PENDING);
	assert_int_equal(cl(CHILD | F(DONE)), SMCR_OPTIN_PEER_NO);
	assert_int_equal(cl(CHILD | F(PEER) | F(ECHOED) | F(DONE)), SMCR_OPTIN_SMC);
	/* R4: the peer offered, but only a confirmed echo counts. */
	assert_int_equal(cl(CHILD | F(PEER) | F(DONE)), SMCR_OPTIN_NO_ECHO);
	assert_int_equal(cl(CHILD | F(PEER) | F(NOSPACE) | F(DONE)), SMCR_OPTIN_NO_SPACE);
	/* R3: syncookie child (no saved SYN). */
	assert_int_equal(cl(CHILD | F(NOSYN) | F(COOKIE) | F(DONE)), SMCR_OPTIN_SYNCOOKIE);
	/* Confirmed echo without a saved SYN (the echo implies the SYN had it). */
	assert_int_equal(cl(CHILD | F(NOSYN) | F(ECHOED) | F(DONE)), SMCR_OPTIN_SMC);
	/* R5: TFO child before its echo is known. */
	assert_int_equal(cl(CHILD | F(TFO) | F(PENDING) | F(PEER)), SMCR_OPTIN_PENDING);
	assert_int_equal(cl(CHILD | F(TFO) | F(PEER) | F(ECHOED) | F(DONE)), SMCR_OPTIN_SMC);
	/* Listener opted in too late: its children say so. */
	assert_int_equal(cl(F(REQUESTED) | F(LATE) | F(CHILD)), SMCR_OPTIN_TOO_LATE);
}

static void test_classify_abi(void **state)
{
	(void)state;
	assert_int_equal(smcr_optin_classify(SMCR_BPF_ABI + 1, CLIENT | F(SENT) | F(PEER)),
	                 SMCR_OPTIN_ABI);
	assert_int_equal(smcr_optin_classify(0, 0), SMCR_OPTIN_ABI);
}

static void test_names_and_errors(void **state)
{
	(void)state;
	assert_string_equal(smcr_optin_name(SMCR_OPTIN_SMC), "SMC");
	assert_string_equal(smcr_optin_name(SMCR_OPTIN_NOT_INSTALLED), "NOT_INSTALLED");
	assert_string_equal(smcr_optin_name(SMCR_OPTIN__COUNT), "UNKNOWN");
	assert_string_equal(smcr_optin_name((enum smcr_optin_result) - 1), "UNKNOWN");
	assert_int_equal(smcr_optin_err(SMCR_OPTIN_SMC), 0);
	for (int r = 0; r < SMCR_OPTIN__COUNT; r++) {
		assert_true(strlen(smcr_optin_reason(r)) > 10);
		if (r != SMCR_OPTIN_SMC) {
			int e = smcr_optin_err(r);
			assert_true(e < 0);
			assert_true(strncmp(smcr_err_name(e), "BPF_", 4) == 0);
			assert_int_equal(smcr_err_decline(e),
			                 0); /* before CLC: nothing to decline */
		}
	}
	assert_int_equal(smcr_err_errno(smcr_optin_err(SMCR_OPTIN_NOT_INSTALLED)), ENOPROTOOPT);
}

static void test_not_tcp_and_bad_fd(void **state)
{
	(void)state;
	int err = 0;
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	struct smcr_optin_info info;

	assert_true(u >= 0);
	assert_int_equal(smcr_optin_enable(u, &err), -SMCR_E_BPF_NOT_TCP);
	assert_int_equal(smcr_optin_result(u, &info), SMCR_OPTIN_NOT_TCP);
	assert_int_equal(info.abi, 0);
	close(u);
	assert_int_equal(smcr_optin_enable(-1, &err), -SMCR_E_BPF_SYSCALL);
	assert_int_equal(err, EBADF);
	assert_int_equal(smcr_optin_result(-1, &info), SMCR_OPTIN_ERROR);
	assert_int_equal(info.err, EBADF);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_classify_client),    cmocka_unit_test(test_classify_server),
	    cmocka_unit_test(test_classify_abi),       cmocka_unit_test(test_names_and_errors),
	    cmocka_unit_test(test_not_tcp_and_bad_fd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
