/* fuzz_emu_frame.c: libFuzzer target for the emu provider's frame decoder
 * (dev/emu/emu_frame.h), fed as a hostile peer's byte stream. For every input:
 *   - frames are decoded one after the other until the bytes run out or one is refused;
 *   - a refused or short decode leaves the cursor exactly where it was;
 *   - the split path the receiver uses (header, then fixed part, then payload) agrees with
 *     the one-shot decoder on every frame;
 *   - every decoded frame re-encodes to exactly the bytes it came from;
 *   - nothing is read outside the input (ASan/UBSan in the fuzz build).
 * Seed corpus: tests/fuzz/corpus/fuzz_emu_frame/ (one valid frame of each type, a stream). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dev/emu/emu_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rcur c = rcur_make(data, size);
	uint8_t *out = malloc(EMU_MAX_FIXED + 4096);
	if (!out)
		return 0;
	for (;;) {
		size_t at = c.off;
		struct emu_frame f;
		const uint8_t *payload = NULL;
		int rc = emu_frame_decode(&c, &f, &payload);

		/* The split path on the same bytes. */
		struct rcur s = rcur_make(data + at, size - at);
		struct emu_frame g;
		int r1 = emu_frame_hdr_decode(&s, &g);
		int r2 = r1 ? r1 : emu_frame_fixed_decode(&s, &g);
		if (r1 && s.off != 0)
			abort();	/* a failed header decode moved the cursor */
		if (!r1 && r2 && s.off != EMU_HDR_LEN)
			abort();	/* a failed fixed-part decode moved the cursor */

		if (rc) {
			if (c.off != at)
				abort();	/* a failed decode moved the cursor */
			if (rc != -SMCR_E_SHORT && r2 == 0 && rcur_left(&s) >= g.payload_len)
				abort();	/* the split path accepted what the whole refused */
			if (rc == -SMCR_E_SHORT && r2 && r2 != -SMCR_E_SHORT)
				abort();	/* the split path refused what was only short */
			break;
		}
		if (r2 || g.type != f.type || g.flags != f.flags || g.body_len != f.body_len ||
		    g.payload_len != f.payload_len || memcmp(&g.u, &f.u, sizeof f.u) != 0)
			abort();	/* the two paths disagree */
		size_t len = c.off - at;
		if (len != emu_frame_len(&f) || f.body_len != len - EMU_HDR_LEN)
			abort();
		if (f.payload_len && payload != data + at + EMU_HDR_LEN + emu_frame_fixed_len(f.type))
			abort();
		/* Re-encode (payloads up to 4 KiB; longer ones only by header) and compare. */
		uint32_t plen = emu_frame_is_data(f.type) ? f.payload_len : 0;
		if (plen <= 4096) {
			struct wcur w = wcur_make(out, EMU_MAX_FIXED + 4096);
			if (emu_frame_encode(&w, &f, payload) != 0 || w.off != len ||
			    memcmp(out, data + at, len) != 0)
				abort();
		}
		if (!rcur_left(&c))
			break;
	}
	free(out);
	return 0;
}
