/* libsmcr.c: the one source of libsmcr.so. The library is the static smcr_sock (and what it
 * links) taken whole (src/sock/CMakeLists.txt), exporting only the public API
 * (include/smcr/smcr.h; src/sock/libsmcr.map); a shared library target needs a source of its
 * own, and this is it. */
typedef int smcr_libsmcr_unit;
