/* test_shm_ring.c: the shm provider's shared message ring (dev/shm/shm_ring.h): messages of
 * every size through many wraps arrive intact and in order; every hostile value a peer can
 * put into the ring is refused with its own error code; peers' fds are validated. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "dev/shm/shm_ring.h"

struct pair {
	struct shm_ring own, peer;	/* the consumer's mapping and the producer's */
	int fd;
};

static int setup(void **state)
{
	struct pair *p = calloc(1, sizeof *p);
	assert_int_equal(shm_ring_create(16, 8, &p->own, &p->fd), 0);
	assert_int_equal(shm_ring_attach(p->fd, 16, 8, &p->peer), 0);
	assert_ptr_not_equal(p->own.map, p->peer.map);	/* two mappings, one memory */
	*state = p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;
	shm_ring_unmap(&p->own);
	shm_ring_unmap(&p->peer);
	close(p->fd);
	free(p);
	return 0;
}

static void test_cells(void **state)
{
	(void)state;
	assert_int_equal(shm_msg_cells(0), 1);
	assert_int_equal(shm_msg_cells(44), 1);
	assert_int_equal(shm_msg_cells(48), 1);
	assert_int_equal(shm_msg_cells(49), 2);
	assert_int_equal(shm_msg_cells(48 + 64), 2);
	assert_int_equal(shm_msg_cells(48 + 65), 3);
	assert_int_equal(shm_msg_cells(SHM_MAX_SEND), 65);
	assert_int_equal(shm_pow2(1), 1);
	assert_int_equal(shm_pow2(48), 64);
	assert_int_equal(shm_pow2(64), 64);
}

/* Random-size messages (0..600 bytes, rings of 16 cells): wrap many times, in order, intact. */
static void test_stream(void **state)
{
	struct pair *p = *state;
	uint32_t prod = 0, cons = 0, sent = 0, got = 0;
	uint8_t buf[700], out[700];
	srand(7);
	while (got < 3000) {
		uint32_t len = (uint32_t)(rand() % 600), cells = shm_msg_cells(len), fr;
		assert_int_equal(shm_ring_free(&p->peer, prod, &fr), 0);
		if (fr >= cells && sent < 3000) {
			for (uint32_t i = 0; i < len; i++)
				buf[i] = (uint8_t)(sent * 31 + i);
			struct shm_ring_msg m = { .op = SHM_OP_SEND, .cells = (uint16_t)cells,
						  .len = len, .imm = sent, .src_qpn = 9 };
			/* Data in two pieces, as a two-SGE SEND is written. */
			shm_ring_put_data(&p->peer, prod, 0, buf, len / 3);
			shm_ring_put_data(&p->peer, prod, len / 3, buf + len / 3, len - len / 3);
			shm_ring_put_hdr(&p->peer, prod, &m);
			prod += cells;
			(void)shm_ring_publish(&p->peer, prod);
			sent++;
			continue;
		}
		struct shm_ring_msg m;
		int rc = shm_ring_peek(&p->own, cons, &m);
		if (rc == -SMCR_E_AGAIN)
			continue;
		assert_int_equal(rc, 0);
		assert_int_equal(m.imm, got);
		assert_int_equal(m.op, SHM_OP_SEND);
		shm_ring_get_data(&p->own, cons, 0, out, m.len);
		for (uint32_t i = 0; i < m.len; i++)
			assert_int_equal(out[i], (uint8_t)(got * 31 + i));
		cons += m.cells;
		shm_ring_consume(&p->own, cons);
		got++;
	}
	assert_true(prod > 16 * 100);	/* it wrapped, many times */
}

static void put_raw(struct pair *p, uint32_t idx, uint32_t w0, uint32_t w1)
{
	_Atomic uint32_t *w = (_Atomic uint32_t *)(void *)(p->peer.cells + (idx % 16) * SHM_CELL);
	atomic_store(&w[0], w0);
	atomic_store(&w[1], w1);
}

static void test_hostile_consumer_view(void **state)
{
	struct pair *p = *state;
	struct shm_ring_msg m;
	assert_int_equal(shm_ring_peek(&p->own, 0, &m), -SMCR_E_AGAIN);
	/* prod more than a ring ahead */
	atomic_store(&p->peer.hdr->prod, 17);
	assert_int_equal(shm_ring_peek(&p->own, 0, &m), -SMCR_E_SHM_RING_BAD_PROD);
	/* prod behind cons (wraps to a huge difference) */
	atomic_store(&p->peer.hdr->prod, 0xffffffffu);
	assert_int_equal(shm_ring_peek(&p->own, 0, &m), -SMCR_E_SHM_RING_BAD_PROD);
	atomic_store(&p->peer.hdr->prod, 2);
	put_raw(p, 0, 10, 99u | 1u << 16);	/* unknown op */
	assert_int_equal(shm_ring_peek(&p->own, 0, &m), -SMCR_E_SHM_RING_BAD_OP);
	put_raw(p, 0, SHM_MAX_SEND + 1, SHM_OP_SEND | 66u << 16);
	assert_int_equal(shm_ring_peek(&p->own, 0, &m), -SMCR_E_SHM_RING_BAD_LEN);
	put_raw(p, 0, 100, SHM_OP_SEND | 1u << 16);	/* 100 bytes need 2 cells */
	assert_int_equal(shm_ring_peek(&p->own, 0, &m), -SMCR_E_SHM_RING_BAD_CELLS);
	put_raw(p, 0, 200, SHM_OP_SEND | 4u << 16);	/* 4 cells, only 2 published */
	assert_int_equal(shm_ring_peek(&p->own, 0, &m), -SMCR_E_SHM_RING_BAD_CELLS);
	put_raw(p, 0, 5, SHM_OP_WRITE_IMM | 2u << 16);
	assert_int_equal(shm_ring_peek(&p->own, 0, &m), -SMCR_E_SHM_RING_BAD_CELLS);
	put_raw(p, 0, 100, SHM_OP_SEND | 2u << 16);
	assert_int_equal(shm_ring_peek(&p->own, 0, &m), 0);
	assert_int_equal(m.len, 100);
	assert_int_equal(m.cells, 2);
}

static void test_hostile_producer_view(void **state)
{
	struct pair *p = *state;
	uint32_t fr;
	assert_int_equal(shm_ring_free(&p->peer, 0, &fr), 0);
	assert_int_equal(fr, 16);
	atomic_store(&p->own.hdr->cons, 5);	/* consumer claims more than was produced */
	assert_int_equal(shm_ring_free(&p->peer, 3, &fr), -SMCR_E_SHM_RING_BAD_CONS);
	atomic_store(&p->own.hdr->cons, 0);
	assert_int_equal(shm_ring_free(&p->peer, 17, &fr), -SMCR_E_SHM_RING_BAD_CONS);
	assert_int_equal(shm_ring_free(&p->peer, 16, &fr), 0);
	assert_int_equal(fr, 0);
}

static void test_wake_flag(void **state)
{
	struct pair *p = *state;
	assert_int_equal(shm_ring_publish(&p->peer, 0), SHM_WAKE_NONE);
	atomic_store(&p->own.hdr->need_wake, SHM_WAKE_SOLICITED);
	assert_int_equal(shm_ring_publish(&p->peer, 0), SHM_WAKE_SOLICITED);
	assert_int_equal(shm_ring_take_wake(&p->peer), 1);
	assert_int_equal(shm_ring_take_wake(&p->peer), 0);	/* exactly one waker */
}

static void test_attach_checks(void **state)
{
	(void)state;
	struct shm_ring r;
	int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	/* Not sealed: a peer could shrink it under us. */
	assert_int_equal(shm_ring_attach(fd, 16, 8, &r), -SMCR_E_SHM_BAD_FD);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	assert_int_equal(shm_ring_attach(fd, 16, 8, &r), 0);
	shm_ring_unmap(&r);
	assert_int_equal(shm_ring_attach(fd, 15, 8, &r), -SMCR_E_SHM_MSG_BAD_FIELD);
	assert_int_equal(shm_ring_attach(fd, 16, 3, &r), -SMCR_E_SHM_MSG_BAD_FIELD);
	assert_int_equal(shm_ring_attach(fd, 1u << 17, 8, &r), -SMCR_E_SHM_MSG_BAD_FIELD);
	assert_int_equal(shm_ring_attach(fd, 65536, 4096, &r), -SMCR_E_SHM_BAD_FD); /* too small */
	close(fd);
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(shm_ring_attach(pfd[0], 16, 8, &r), -SMCR_E_SHM_BAD_FD);
	close(pfd[0]);
	close(pfd[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cells),
		cmocka_unit_test_setup_teardown(test_stream, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_consumer_view, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_producer_view, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wake_flag, setup, teardown),
		cmocka_unit_test(test_attach_checks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
