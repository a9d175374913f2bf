/* llccdc_vectors.c: the LLC and CDC hex examples of docs/protocol/wire-formats.md 9 (MAC
 * 98:03:9b:00:00:0X, GID fe80::9a03:9bff:fe00:X; X = 1 client, 2 server). Where the spec
 * describes a variant in words ("byte 3 = 0x83", "rest zero") the bytes below are that
 * description applied; the source field says which. */
#include "llccdc_vectors.h"

#include <string.h>

const struct llccdc_vector llc_vectors[] = {
	{ "confirm_link_req",
	  "01 2c 00 03 98 03 9b 00 00 02 fe 80 00 00 00 00"
	  "00 00 9a 03 9b ff fe 00 00 02 00 01 07 01 00 00"
	  "01 01 02 00 00 00 00 00 00 00 00 00",
	  "9 CONFIRM LINK request" },
	/* Client values; its user ID (unspecified in 9) is 0x201. */
	{ "confirm_link_resp",
	  "01 2c 00 83 98 03 9b 00 00 01 fe 80 00 00 00 00"
	  "00 00 9a 03 9b ff fe 00 00 01 00 02 08 01 00 00"
	  "02 01 02",
	  "9 CONFIRM LINK response (byte 3 0x83, client MAC/GID/QPN 0x208, link 1)" },
	{ "add_link_req",
	  "02 2c 00 00 98 03 9b 00 00 02 00 00 fe 80 00 00"
	  "00 00 00 00 9a 03 9b ff fe 00 00 02 00 01 09 02"
	  "03 0a bc de 00 00 00 00 00 00 00 00",
	  "9 ADD LINK request" },
	{ "add_link_reject",
	  "02 2c 01 c0 98 03 9b 00 00 02 00 00 fe 80 00 00"
	  "00 00 00 00 9a 03 9b ff fe 00 00 02 00 01 09 02"
	  "03 0a bc de 00 00 00 00 00 00 00 00",
	  "9 ADD LINK reject as Linux sends it (byte 2 0x01, byte 3 0xc0)" },
	{ "add_link_cont",
	  "03 2c 00 00 02 01 00 00 00 00 1a 2b 00 00 1a 2c"
	  "00 00 7f 00 12 34 00 00 00 00 00 00 00 00 00 00"
	  "00 00 00 00 00 00 00 00 00 00 00 00",
	  "9 ADD LINK CONTINUATION" },
	{ "delete_link_req",
	  "04 2c 00 20 02 00 01 00 00",
	  "9 DELETE LINK request, link 2, orderly, lost path" },
	{ "delete_link_all",
	  "04 2c 00 60 00 00 03 00 00",
	  "9 DELETE LINK all + orderly, program initiated" },
	{ "confirm_rkey_req",
	  "06 2c 00 00 01 00 00 20 00 00 00 7f 00 aa aa 00"
	  "00 02 00 00 20 01 00 00 7f 00 aa aa 00 00 00 00"
	  "00 00 00 00 00 00 00 00 00 00 00 00",
	  "9 CONFIRM RKEY request" },
	{ "confirm_rkey_resp",
	  "06 2c 00 80 01 00 00 20 00 00 00 7f 00 aa aa 00"
	  "00 02 00 00 20 01 00 00 7f 00 aa aa 00 00 00 00"
	  "00 00 00 00 00 00 00 00 00 00 00 00",
	  "9 CONFIRM RKEY response (byte 3 0x80)" },
	{ "delete_rkey_req",
	  "09 2c 00 00 01 00 00 00 00 00 20 00",
	  "9 DELETE RKEY request" },
	{ "test_link_req",
	  "07 2c 00 00 00 01 02 03 04 05 06 07 08 09 0a 0b"
	  "0c 0d 0e 0f 00 00 00 00 00 00 00 00 00 00 00 00"
	  "00 00 00 00 00 00 00 00 00 00 00 00",
	  "9 TEST LINK request" },
	{ "test_link_resp",
	  "07 2c 00 80 00 01 02 03 04 05 06 07 08 09 0a 0b"
	  "0c 0d 0e 0f",
	  "9 TEST LINK response (byte 3 0x80, same data)" },
};
const size_t llc_vector_count = sizeof(llc_vectors) / sizeof(llc_vectors[0]);

const struct llccdc_vector cdc_vectors[] = {
	{ "cdc_first",
	  "fe 2c 00 01 00 00 00 05 00 00 00 00 00 00 10 00"
	  "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
	  "00 00 00 00 00 00 00 00 00 00 00 00",
	  "9 CDC first data announcement" },
	{ "cdc_wrapped",
	  "fe 2c 00 07 00 00 00 09 00 00 00 01 00 00 00 10"
	  "00 00 00 00 00 00 ff f0 80 00 00 00 00 00 00 00"
	  "00 00 00 00 00 00 00 00 00 00 00 00",
	  "9 CDC producer wrapped, write blocked" },
	{ "cdc_urgent",
	  "fe 2c 00 02 00 00 00 05 00 00 00 00 00 00 10 05 00 00 00 00 00 00 00 00 60 00",
	  "9 CDC with urgent data (P|U)" },
	{ "cdc_close",
	  "fe 2c 00 03 00 00 00 05 00 00 00 00 00 00 10 05 00 00 00 00 00 00 02 00 00 40",
	  "9 CDC close (C)" },
	{ "cdc_failover",
	  "fe 2c 00 02 00 00 00 05 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 08 00",
	  "9 CDC failover validation (F)" },
};
const size_t cdc_vector_count = sizeof(cdc_vectors) / sizeof(cdc_vectors[0]);

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

size_t llccdc_vector_bytes(const struct llccdc_vector *v, uint8_t out[44])
{
	size_t n = 0;
	memset(out, 0, 44);
	for (const char *p = v->hex; *p;) {
		if (*p == ' ') {
			p++;
			continue;
		}
		int hi = hexval(p[0]), lo = p[1] ? hexval(p[1]) : -1;
		if (hi < 0 || lo < 0 || n == 44)
			return 0;
		out[n++] = (uint8_t)(hi << 4 | lo);
		p += 2;
	}
	return 44;
}

const struct llccdc_vector *llccdc_vector_find(const char *name)
{
	for (size_t i = 0; i < llc_vector_count; i++)
		if (!strcmp(llc_vectors[i].name, name))
			return &llc_vectors[i];
	for (size_t i = 0; i < cdc_vector_count; i++)
		if (!strcmp(cdc_vectors[i].name, name))
			return &cdc_vectors[i];
	return NULL;
}
