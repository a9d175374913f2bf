/* empty.c: keeps smcr_testlib non-empty before tests/lib has sources. */
typedef int smcr_testlib_empty_unit;
