/* fuzz_pcap.c: libFuzzer target for smcr-decode's capture input (cap.h, frame.h): the bytes
 * are read as a pcap/pcapng file by libpcap, every frame is walked (Ethernet/VLAN, IPv4/IPv6,
 * TCP, UDP, GRH, BTH), TCP streams are reassembled and CLC/LLC/CDC messages decoded, with
 * output to /dev/null. Nothing may crash, leak or read outside the frames. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "smcr-decode/cap.h"
#include "smcr-decode/dec.h"
#include "smcr-decode/frame.h"
#include "smcr-decode/out.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	if (!null)
		null = fopen("/dev/null", "w");
	if (!null)
		abort();
	if (size == 0)
		return 0;
	/* The frame walker on its own, for each link type, on the raw bytes. */
	static const int linktypes[] = { 1, 113, 276, 12, 0, 108, 228, 229, 147 };
	for (size_t i = 0; i < sizeof(linktypes) / sizeof(linktypes[0]); i++) {
		struct frame_info fi;
		if (frame_parse(linktypes[i], data, size, &fi) != FRAME_OTHER &&
		    (fi.payload < data || fi.payload + fi.paylen > data + size))
			abort();
	}
	FILE *f = fmemopen((void *)data, size, "rb");
	if (!f)
		return 0;
	struct out o;
	struct dec d;
	out_init(&o, null, OUT_JSON);
	dec_init(&d, &o, null, "fuzz");
	char err[512];
	(void)cap_decode_file(&d, f, err, sizeof(err));	/* closes f */
	return 0;
}
