/* llc_golden.c: LLC golden-vector load and round trip for the cmocka tests (llc_golden.h). */
#include "llc_golden.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "llccdc_vectors.h"

void llc_golden_load(const char *name, uint8_t b[LLC_MSG_LEN])
{
	const struct llccdc_vector *v = llccdc_vector_find(name);
	assert_non_null(v);
	assert_int_equal(llccdc_vector_bytes(v, b), LLC_MSG_LEN);
}

struct llc_msg llc_golden(const char *name)
{
	uint8_t b[LLC_MSG_LEN], again[LLC_MSG_LEN];
	struct llc_msg m;
	llc_golden_load(name, b);
	assert_int_equal(llc_decode(b, sizeof(b), &m), 0);
	assert_int_equal(llc_encode(&m, again), 0);
	assert_memory_equal(again, b, LLC_MSG_LEN);
	return m;
}
