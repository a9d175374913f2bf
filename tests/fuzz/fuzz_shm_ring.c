/* fuzz_shm_ring.c: libFuzzer target for the shm ring consumer (dev/shm/shm_ring.h) reading a
 * ring a hostile peer filled with anything. The input becomes the producer index, the first
 * cells and the data the peer "wrote"; the consumer loop must stay inside the mapping,
 * never accept a message longer than SHM_MAX_SEND or larger than what was published, and
 * advance monotonically (abort otherwise). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev/shm/shm_ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct shm_ring ring;
static int ring_fd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (ring_fd < 0 && shm_ring_create(64, 8, &ring, &ring_fd) != 0)
		abort();
	if (size < 8)
		return 0;
	uint32_t cons, prod;
	memcpy(&cons, data, 4);
	memcpy(&prod, data + 4, 4);
	size_t cells_len = (size_t)ring.ncells * SHM_CELL;
	memset(ring.cells, 0, cells_len);
	memcpy(ring.cells, data + 8, size - 8 < cells_len ? size - 8 : cells_len);
	atomic_store(&ring.hdr->prod, prod);
	static uint8_t buf[SHM_MAX_SEND];
	for (int i = 0; i < 128; i++) {
		struct shm_ring_msg m;
		int rc = shm_ring_peek(&ring, cons, &m);
		if (rc)
			break;
		if (m.cells == 0 || m.cells > prod - cons || m.cells > ring.ncells)
			abort();
		if (m.op == SHM_OP_SEND) {
			if (m.len > SHM_MAX_SEND || m.cells != shm_msg_cells(m.len))
				abort();
			shm_ring_get_data(&ring, cons, 0, buf, m.len);
		}
		cons += m.cells;
	}
	return 0;
}
