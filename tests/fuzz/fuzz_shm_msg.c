/* fuzz_shm_msg.c: libFuzzer target for the shm provider's control message decoder
 * (dev/shm/shm_msg.h; the peer device is hostile). First byte: number of fds claimed (0..3),
 * the rest: the message. Decode must not crash or read outside the input; if it decodes,
 * encoding gives back exactly the input bytes (abort otherwise). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dev/shm/shm_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int nfds = data[0] & 3;
	struct shm_msg m;
	if (shm_msg_decode(data + 1, size - 1, nfds, &m) != 0)
		return 0;
	if (nfds != shm_msg_nfds(m.type))
		abort();
	uint8_t out[SHM_MSG_MAX];
	int n = shm_msg_encode(&m, out, sizeof out);
	if (n < 0 || (size_t)n != size - 1 || memcmp(out, data + 1, (size_t)n) != 0)
		abort();
	return 0;
}
