/* test_core_pair.c: the engine's vertical slice with two engines in one process
 * (docs/protocol/procedures.md 2.2-2.6 first contact, 4 data path, 5 close), single-threaded over
 * the in-process provider, time passed in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "lib/core_pair.h"

static void test_first_contact(void **state)
{
	const char *spec = *state;
	struct core_engine *ce = cp_engine(spec, NULL), *se = cp_engine(spec, NULL);
	assert_non_null(ce);
	assert_non_null(se);
	struct cp_pair pp = { 0 };
	assert_true(cp_connect_smc(&pp, ce, se));
	struct core_conn_info ci, si;
	core_conn_info(pp.cli, &ci);
	core_conn_info(pp.srv, &si);
	assert_int_equal(ci.mode, CORE_MODE_SMC);
	assert_int_equal(si.mode, CORE_MODE_SMC);
	assert_true(ci.first_contact);
	assert_true(si.first_contact);
	assert_int_equal(ci.token_peer, si.token_local);
	assert_int_equal(si.token_peer, ci.token_local);
	assert_int_equal(ci.rmbe_size, 65536);
	assert_int_equal(ci.peer_rmbe_size, 65536);
	assert_int_equal(ci.link_num, 1);
	assert_int_equal(si.link_num, 1);
	assert_string_equal(ci.state, "ACTIVE");
	struct wire_peer_id sid = core_engine_peer_id(se);
	assert_memory_equal(&ci.peer_id, &sid, sizeof(sid));

	/* A few bytes each way. */
	const char *msg = "hello smc-r";
	struct iovec v = { (void *)msg, strlen(msg) };
	assert_int_equal(core_conn_send(pp.cli, &v, 1, 0), (long)strlen(msg));
	cp_progress(&pp, 2);
	assert_true(core_conn_events(pp.srv) & CORE_EV_IN);
	char buf[64] = { 0 };
	struct iovec r = { buf, sizeof(buf) };
	assert_int_equal(core_conn_recv(pp.srv, &r, 1, 0), (long)strlen(msg));
	assert_string_equal(buf, msg);
	assert_int_equal(core_conn_recv(pp.srv, &r, 1, 0), -SMCR_E_AGAIN);

	cp_release(&pp);
	core_engine_free(ce);
	core_engine_free(se);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		{ "test_first_contact_loop", test_first_contact, NULL, NULL, "loop" },
		{ "test_first_contact_shm", test_first_contact, NULL, NULL, "shm" },
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
