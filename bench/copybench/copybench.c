/* copybench.c: smcr-copybench, what the memory of this machine allows the SMC-R data path.
 *
 * On the same-host provider every byte is copied twice: the sender's WRITE copies it from
 * the program's buffer into the peer's RMB (the source is hot, the destination is wherever
 * the ring's producer cursor is), and the receiver's recv copies it out of the RMB into the
 * program's buffer. With 1000 connections the RMBs the writes land in add up to 64-160 MiB,
 * far more than the last-level cache, so the first copy's destination is cold. This program
 * measures, for destination footprints of a few MiB to a few hundred:
 *
 *   write          one thread copies CHUNK-byte blocks (hot source) into the footprint,
 *                  block after block, wrapping (smcr_copy: what the data path uses);
 *   write-nt       the same with non-temporal stores (no read of the destination lines
 *                  first; x86 only);
 *   write+read     the same writer, and a reader thread that copies each block out into its
 *                  own hot buffer as soon as it is written (recv's copy), the writer staying
 *                  at most half the footprint ahead (the RMB's flow control);
 *   write-nt+read  the same with the writer's non-temporal stores.
 *
 * The figure is GB/s of blocks written (for the pairs: written and read). Each measurement
 * runs for -t seconds (default 0.5) and busy-waits on both cores for that long only.
 *
 *   smcr-copybench [-t seconds] [-c chunk-bytes] [footprint-MiB ...]   (default 2 8 32 64 160)
 *
 * Numbers depend on the machine and on what else it runs: record them with the date. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "util/clock.h"
#include "util/copy.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#define HAVE_NT 1
#else
#define HAVE_NT 0
#endif

/* Non-temporal copy: 16-byte streaming stores from a 16-byte aligned destination; the head
 * and tail go through memcpy. */
static void copy_nt(void *dst, const void *src, size_t n)
{
#if HAVE_NT
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t head = (size_t)(-(uintptr_t)d & 15u);
	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
		_mm_stream_si128((__m128i *)(void *)d, a);
		_mm_stream_si128((__m128i *)(void *)(d + 16), b);
		_mm_stream_si128((__m128i *)(void *)(d + 32), c);
		_mm_stream_si128((__m128i *)(void *)(d + 48), e);
	}
	_mm_sfence(); /* the reader must see the blocks once it sees the cursor */
	memcpy(d, s, n);
#else
	memcpy(dst, src, n);
#endif
}

/* Shared by the writer (the main thread) and the reader thread, one run's life. Each cursor
 * has one writer: `written` and `stop` the writer's (release: a block's bytes before the
 * cursor that covers it), `read` the reader's (release: it is done with the block). */
struct run {
	uint8_t *ring;	       /* the footprint: both threads, the writer writes, the reader reads */
	uint8_t *out;	       /* the reader's own buffer (recv's destination): the reader's */
	size_t size, chunk;    /* constant during a run */
	_Atomic size_t written; /* writer stores (release), reader loads (acquire) */
	_Atomic size_t read;	/* reader stores (release), writer loads (acquire) */
	_Atomic bool stop;	/* writer stores when done, reader loads */
};

static void *reader_main(void *arg)
{
	struct run *r = arg;
	uint8_t *buf = r->out;
	size_t pos = 0;
	unsigned long long sum = 0;
	for (;;) {
		size_t w = atomic_load_explicit(&r->written, memory_order_acquire);
		if (pos == w) {
			if (atomic_load_explicit(&r->stop, memory_order_acquire) &&
			    atomic_load_explicit(&r->written, memory_order_acquire) == pos)
				break;
			continue;
		}
		while (pos < w) {
			smcr_copy(buf, r->ring + pos % r->size, r->chunk);
			sum += buf[pos / r->chunk % r->chunk];
			pos += r->chunk;
			atomic_store_explicit(&r->read, pos, memory_order_release);
		}
	}
	/* the sum only keeps the copies from being optimized away */
	return (void *)(uintptr_t)(sum & 1u);
}

/* One measurement: GB/s, or a negative value when it could not run. */
static double measure(size_t size, size_t chunk, double secs, bool nt, bool with_reader)
{
	struct run r = { .size = size, .chunk = chunk };
	r.ring = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		      -1, 0);
	uint8_t *src = malloc(chunk);
	r.out = malloc(chunk); /* here, not in the reader: the writer waits for the reader */
	if (r.ring == MAP_FAILED || !src || !r.out) {
		fprintf(stderr, "copybench: no memory for %zu bytes: %s\n", size, strerror(errno));
		if (r.ring != MAP_FAILED)
			munmap(r.ring, size);
		free(src);
		free(r.out);
		return -1;
	}
	for (size_t i = 0; i < chunk; i++)
		src[i] = (uint8_t)(i * 131u + 7u);
	memset(r.ring, 0, size); /* every page present and written once, as a used RMB */
	pthread_t th;
	if (with_reader && pthread_create(&th, NULL, reader_main, &r) != 0) {
		fprintf(stderr, "copybench: no reader thread\n");
		munmap(r.ring, size);
		free(src);
		free(r.out);
		return -1;
	}
	size_t pos = 0;
	uint64_t t0 = smcr_now_ns(), t1 = t0, dur = (uint64_t)(secs * 1e9);
	while (t1 - t0 < dur) {
		for (int k = 0; k < 16; k++) {
			if (with_reader)
				while (pos - atomic_load_explicit(&r.read, memory_order_acquire) >=
				       size / 2)
					;
			uint8_t *d = r.ring + pos % size;
			if (nt)
				copy_nt(d, src, chunk);
			else
				smcr_copy(d, src, chunk);
			pos += chunk;
			atomic_store_explicit(&r.written, pos, memory_order_release);
		}
		t1 = smcr_now_ns();
	}
	if (with_reader) {
		/* the pair's figure counts what was both written and read */
		while (atomic_load_explicit(&r.read, memory_order_acquire) != pos)
			;
		t1 = smcr_now_ns();
		atomic_store_explicit(&r.stop, true, memory_order_release);
		pthread_join(th, NULL);
	}
	munmap(r.ring, size);
	free(src);
	free(r.out);
	return (double)pos / (double)(t1 - t0); /* bytes per ns = GB/s */
}

static void usage(void)
{
	fprintf(stderr, "usage: smcr-copybench [-t seconds] [-c chunk-bytes] [footprint-MiB ...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	double secs = 0.5;
	size_t chunk = 64 * 1024;
	size_t sizes[16] = { 2, 8, 32, 64, 160 };
	int nsizes = 5, first = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-t") && i + 1 < argc) {
			secs = strtod(argv[++i], NULL);
			if (!(secs > 0 && secs <= 60))
				usage();
		} else if (!strcmp(argv[i], "-c") && i + 1 < argc) {
			long c = strtol(argv[++i], NULL, 0);
			if (c < 64 || c > (1 << 24) || c % 64)
				usage();
			chunk = (size_t)c;
		} else if (argv[i][0] == '-') {
			usage();
		} else {
			long m = strtol(argv[i], NULL, 0);
			if (m < 1 || m > 4096 || nsizes >= 16)
				usage();
			if (first) {
				nsizes = 0;
				first = 0;
			}
			sizes[nsizes++] = (size_t)m;
		}
	}
	printf("%zu-byte blocks, %.2f s each; GB/s (pairs: written and read)%s\n", chunk, secs,
	       HAVE_NT ? "" : "; no non-temporal stores on this CPU: write-nt = write");
	printf("%12s %10s %10s %12s %14s\n", "footprint", "write", "write-nt", "write+read",
	       "write-nt+read");
	for (int i = 0; i < nsizes; i++) {
		size_t size = sizes[i] << 20;
		if (size < 2 * chunk) {
			fprintf(stderr, "copybench: %zu MiB is less than two blocks\n", sizes[i]);
			return 2;
		}
		size -= size % chunk;
		double a = measure(size, chunk, secs, false, false);
		double b = measure(size, chunk, secs, true, false);
		double c = measure(size, chunk, secs, false, true);
		double d = measure(size, chunk, secs, true, true);
		if (a < 0 || b < 0 || c < 0 || d < 0)
			return 1;
		printf("%8zu MiB %10.1f %10.1f %12.1f %14.1f\n", sizes[i], a, b, c, d);
	}
	return 0;
}
