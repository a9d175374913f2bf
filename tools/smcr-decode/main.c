/* smcr-decode: decodes SMC-R v1 messages (TCP option, CLC, LLC, CDC; docs/protocol/wire-formats.md
 * 1-7) and SMC-R v2 ones (v2 CLC and LLC; docs/parts/wire-v2.md)
 * from hex text, binary files or pcap/pcapng captures and prints their fields as text or
 * JSON lines. Usage and keys: docs/parts/decode.md, or smcr-decode --help.
 *
 * Exit status: 0 everything decoded; 1 usage or I/O error; 2 malformed input (a message the
 * codecs reject, hex text that is not hex, a damaged capture) -- the other messages are
 * still decoded and printed. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "dec.h"
#include "hexin.h"
#include "out.h"

#define PROG "smcr-decode"
#define TEXT_MAX (256u << 20)	/* largest hex text or binary file read */

static const char usage[] =
	"usage: " PROG " [--json] [HEX...]\n"
	"       " PROG " [--json] -r CAPTURE\n"
	"       " PROG " [--json] -f HEXFILE... | -b BINFILE...\n"
	"\n"
	"Decodes SMC-R v1 messages and prints their fields (RFC 7609; the project's\n"
	"docs/protocol/wire-formats.md): TCP option, CLC Proposal/Accept/Confirm/Decline, the 8 LLC\n"
	"messages, CDC; and SMC-R v2 (docs/parts/wire-v2.md): the v2 Proposal extension,\n"
	"v2 Accept/Confirm, the v2 LLC messages (kinds llc2.*).\n"
	"\n"
	"input (one of; default: HEX arguments, or hex text on stdin if there are none)\n"
	"  HEX...           hex text in the arguments (joined by newlines)\n"
	"  -f, --hex FILE   hex text from FILE ('-' = stdin); repeatable\n"
	"  -b, --bin FILE   raw message bytes from FILE ('-' = stdin); repeatable\n"
	"  -r, --read FILE  pcap or pcapng capture ('-' = stdin): CLC from reassembled TCP\n"
	"                   streams, LLC/CDC from RoCE v1 (Ethertype 0x8915) and RoCE v2\n"
	"                   (UDP 4791) RC SEND Only packets\n"
	"hex text: pairs of hex digits, optionally 0x-prefixed or run together (e2d4c3d9),\n"
	"  separated by blanks/newlines; '#' starts a comment; a line may start with an\n"
	"  offset as hexdump/text2pcap/xxd print it (\"0010  fe 80\", \"00000010: fe80\"),\n"
	"  which must match the bytes read since offset 0. No ASCII columns.\n"
	"Several messages back to back (a CLC stream, LLC/CDC messages) are decoded one by one.\n"
	"\n"
	"output\n"
	"  -j, --json       one JSON object per message and line (default: text)\n"
	"  -h, --help       this help\n"
	"\n"
	"Every record has \"kind\": tcp.option clc.proposal clc.accept clc.confirm clc.decline\n"
	"llc.confirm_link llc.add_link llc.add_link_cont llc.delete_link llc.confirm_rkey\n"
	"llc.confirm_rkey_cont llc.delete_rkey llc.test_link cdc; then where it came from\n"
	"(offset, or frame/transport/src/dst...) and the message's fields.\n"
	"\n"
	"exit status: 0 all decoded, 1 usage or I/O error, 2 malformed input (one line per\n"
	"malformed message on stderr naming the field; the others are still decoded).\n";

enum in_kind {
	IN_HEXFILE,
	IN_BINFILE,
	IN_CAPTURE,
};

struct input {
	enum in_kind kind;
	const char *path;
};

/* Reads a whole file ('-' = stdin) into b. 0, or -1 with errno-based message printed. */
static int slurp(const char *path, struct bytebuf *b)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	if (!f) {
		fprintf(stderr, "%s: %s: %s\n", PROG, path, strerror(errno));
		return -1;
	}
	uint8_t chunk[65536];
	size_t n;
	int rc = 0;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b->len + n > TEXT_MAX || bytebuf_append(b, chunk, n)) {
			fprintf(stderr, "%s: %s: larger than %u bytes\n", PROG, path, TEXT_MAX);
			rc = -1;
			break;
		}
	}
	if (rc == 0 && ferror(f)) {
		fprintf(stderr, "%s: %s: read error\n", PROG, path);
		rc = -1;
	}
	if (f != stdin)
		fclose(f);
	return rc;
}

/* Parses hex text and decodes it. Returns false if the text is not valid hex. */
static bool decode_hex_text(struct dec *d, const char *text, size_t len)
{
	struct bytebuf bytes = { 0 };
	char err[256];
	bool ok = true;
	if (hexin_parse(text, len, &bytes, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", PROG, err);
		ok = false;
		d->malformed++;
	} else {
		struct dec_where w = { .transport = DEC_HEX };
		dec_buffer(d, bytes.p, bytes.len, &w);
	}
	bytebuf_free(&bytes);
	return ok;
}

int main(int argc, char **argv)
{
	bool json = false;
	struct input *inputs = calloc((size_t)argc, sizeof(*inputs));
	size_t ninputs = 0;
	struct bytebuf args = { 0 };	/* positional hex, joined by newlines */
	bool have_args = false;
	int status = 0;

	if (!inputs) {
		fprintf(stderr, "%s: out of memory\n", PROG);
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			free(inputs);
			bytebuf_free(&args);
			return 0;
		}
		if (!strcmp(a, "-j") || !strcmp(a, "--json")) {
			json = true;
			continue;
		}
		enum in_kind k;
		if (!strcmp(a, "-r") || !strcmp(a, "--read"))
			k = IN_CAPTURE;
		else if (!strcmp(a, "-f") || !strcmp(a, "--hex"))
			k = IN_HEXFILE;
		else if (!strcmp(a, "-b") || !strcmp(a, "--bin"))
			k = IN_BINFILE;
		else if (!strcmp(a, "--")) {
			for (i++; i < argc; i++) {
				if ((have_args && bytebuf_append(&args, "\n", 1)) ||
				    bytebuf_append(&args, argv[i], strlen(argv[i])))
					goto nomem;
				have_args = true;
			}
			break;
		} else if (a[0] == '-' && a[1] != 0) {
			fprintf(stderr, "%s: unknown option '%s' (see --help)\n", PROG, a);
			status = 1;
			goto out;
		} else {
			if ((have_args && bytebuf_append(&args, "\n", 1)) ||
			    bytebuf_append(&args, a, strlen(a)))
				goto nomem;
			have_args = true;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "%s: option '%s' needs a file (see --help)\n", PROG, a);
			status = 1;
			goto out;
		}
		inputs[ninputs].kind = k;
		inputs[ninputs].path = argv[++i];
		ninputs++;
	}
	if (have_args && ninputs) {
		fprintf(stderr, "%s: give hex arguments or -r/-f/-b files, not both\n", PROG);
		status = 1;
		goto out;
	}

	struct out o;
	struct dec d;
	out_init(&o, stdout, json ? OUT_JSON : OUT_TEXT);
	dec_init(&d, &o, stderr, PROG);

	if (have_args) {
		decode_hex_text(&d, (const char *)args.p, args.len);
	} else if (ninputs == 0) {
		struct bytebuf text = { 0 };
		if (slurp("-", &text))
			status = 1;
		else
			decode_hex_text(&d, (const char *)text.p, text.len);
		bytebuf_free(&text);
	}
	for (size_t i = 0; i < ninputs && status != 1; i++) {
		const struct input *in = &inputs[i];
		if (in->kind == IN_CAPTURE) {
			char err[512];
			int rc = cap_decode_path(&d, in->path, err, sizeof(err));
			if (rc) {
				fprintf(stderr, "%s: %s\n", PROG, err);
				if (rc == CAP_ERR_IO)
					status = 1;
				else
					d.malformed++;
			}
			continue;
		}
		struct bytebuf b = { 0 };
		if (slurp(in->path, &b)) {
			status = 1;
		} else if (in->kind == IN_HEXFILE) {
			decode_hex_text(&d, (const char *)b.p, b.len);
		} else {
			struct dec_where w = { .transport = DEC_HEX };
			dec_buffer(&d, b.p, b.len, &w);
		}
		bytebuf_free(&b);
	}
	if (status == 0 && d.malformed)
		status = 2;
	if (status == 0 && d.decoded == 0)
		fprintf(stderr, "%s: no SMC message found\n", PROG);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "%s: write error\n", PROG);
		status = 1;
	}
out:
	free(inputs);
	bytebuf_free(&args);
	return status;
nomem:
	fprintf(stderr, "%s: out of memory\n", PROG);
	free(inputs);
	bytebuf_free(&args);
	return 1;
}
