/* test_core_linkassign.c: which link of a link group a new connection goes on
 * (docs/protocol/procedures.md 3.4, src/core/lgr.c lgr_link_assign): the server alternates between
 * the active links by the parity of the LG's connection count (as Linux), skipping links that
 * are down or still being set up, and across a table with holes; the client takes the
 * link the Accept named (its QPN, GID and MAC) and refuses when none matches; first contact uses the
 * link being confirmed. Built on LG and link objects alone (no devices): the rule, not
 * the wire. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/core_int.h"

static struct core_lgr lg;
static struct core_link lk[CORE_LG_LINKS];

/* An Accept naming QPN qpn on the zero GID and MAC (the links' peer_gid/peer_mac here). */
static const struct clc_accept *acc(uint32_t qpn)
{
	static struct clc_accept a;
	memset(&a, 0, sizeof(a));
	a.qpn = qpn;
	return &a;
}

static void reset(enum core_role role)
{
	memset(&lg, 0, sizeof(lg));
	memset(lk, 0, sizeof(lk));
	lg.role = role;
	lg.state = CORE_LG_ACTIVE;
	for (int i = 0; i < CORE_LG_LINKS; i++) {
		lk[i].lg = &lg;
		lk[i].peer_qpn = 100 + (uint32_t)i;
	}
}

static void test_table_size(void **state)
{
	(void)state;
	/* Linux: a table of 3, at most 2 in use (docs/protocol/linux-interop.md 7) */
	assert_int_equal(CORE_LG_LINKS, 3);
	assert_int_equal(CORE_LG_LINKS_USABLE, 2);
}

static void test_server_alternates(void **state)
{
	(void)state;
	reset(CORE_SERVER);
	lg.links[0] = &lk[0];
	lk[0].state = CORE_LINK_ACTIVE;
	for (unsigned n = 0; n < 5; n++) {	/* one link: always it */
		lg.nconns = n;
		assert_ptr_equal(lgr_link_assign(&lg, acc(0)), &lk[0]);
	}
	/* two active links in slots 0 and 2, slot 1 down: 0, 2, 0, 2, ... */
	lg.links[1] = &lk[1];
	lk[1].state = CORE_LINK_DOWN;
	lg.links[2] = &lk[2];
	lk[2].state = CORE_LINK_ACTIVE;
	assert_int_equal(lgr_links_active(&lg), 2);
	unsigned on0 = 0, on2 = 0;
	for (unsigned n = 0; n < 10; n++) {
		lg.nconns = n;
		struct core_link *l = lgr_link_assign(&lg, acc(0));
		assert_ptr_equal(l, n % 2 ? &lk[2] : &lk[0]);
		on0 += l == &lk[0];
		on2 += l == &lk[2];
	}
	assert_int_equal(on0, 5);
	assert_int_equal(on2, 5);
	/* a link still in setup (INIT) carries nothing yet */
	lk[0].state = CORE_LINK_INIT;
	for (unsigned n = 0; n < 4; n++) {
		lg.nconns = n;
		assert_ptr_equal(lgr_link_assign(&lg, acc(0)), &lk[2]);
	}
	assert_ptr_equal(lgr_link_any(&lg), &lk[2]);
	/* none active: no link, the attach fails */
	lk[2].state = CORE_LINK_DOWN;
	assert_null(lgr_link_assign(&lg, acc(0)));
	assert_null(lgr_link_any(&lg));
	assert_int_equal(lgr_links_active(&lg), 0);
}

static void test_client_follows_accept(void **state)
{
	(void)state;
	reset(CORE_CLIENT);
	for (int i = 0; i < 2; i++) {
		lg.links[i] = &lk[i];
		lk[i].state = CORE_LINK_ACTIVE;
	}
	assert_ptr_equal(lgr_link_assign(&lg, acc(101)), &lk[1]);
	assert_ptr_equal(lgr_link_assign(&lg, acc(100)), &lk[0]);
	assert_null(lgr_link_assign(&lg, acc(102)));	/* slot 2 empty */
	/* QP numbers are per device: the same number on another GID is another link */
	struct clc_accept other = *acc(101);
	other.gid.b[0] = 0xfe;
	assert_null(lgr_link_assign(&lg, &other));
	lk[1].state = CORE_LINK_DOWN;
	assert_null(lgr_link_assign(&lg, acc(101)));	/* named link down */
}

static void test_first_contact(void **state)
{
	(void)state;
	reset(CORE_SERVER);
	lg.state = CORE_LG_SETUP;
	lg.links[0] = &lk[0];
	lk[0].state = CORE_LINK_INIT;
	assert_ptr_equal(lgr_link_assign(&lg, acc(0)), &lk[0]);
	reset(CORE_CLIENT);
	lg.state = CORE_LG_SETUP;
	lg.links[0] = &lk[0];
	lk[0].state = CORE_LINK_INIT;
	assert_ptr_equal(lgr_link_assign(&lg, acc(12345)), &lk[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_size),
		cmocka_unit_test(test_server_alternates),
		cmocka_unit_test(test_client_follows_accept),
		cmocka_unit_test(test_first_contact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
