/* clc_codes.c: the CLC peer diagnosis codes of a Decline (docs/protocol/wire-formats.md 5.2): every
 * code Linux 6.x sends (smc_clc.h SMC_CLC_DECL_*), with its Linux name and meaning, and the
 * Linux 4.11 codes that differ, so a Decline from any Linux version can be named. */
#include "wire/clc.h"

static const struct clc_decline_reason reasons[] = {
	{ 0x01010000, "MEM", "not enough memory / resources", false },
	{ 0x02000000, "TIMEOUT", "timeout (Linux 4.11 code)", true },
	{ 0x02010000, "TIMEOUT_CL", "timeout waiting for CONFIRM LINK", false },
	{ 0x02020000, "TIMEOUT_AL", "timeout waiting for ADD LINK", false },
	{ 0x02040000, "TCL", "timeout waiting for QP CONFIRM LINK (Linux 4.11 code)", true },
	{ 0x03000000, "CNFERR", "configuration error", false },
	{ 0x03010000, "PEERNOSMC", "peer did not indicate SMC (local reason, not sent)", false },
	{ 0x03020000, "IPSEC", "IPsec is used on the connection", false },
	{ 0x03030000, "NOSMCDEV", "no usable SMC device (Linux 4.11: IPSEC, IPsec in use)", false },
	{ 0x03030001, "NOSMCDDEV", "no SMC-D device", false },
	{ 0x03030002, "NOSMCRDEV", "no SMC-R device", false },
	{ 0x03030003, "NOISM2SUPP", "ISM device without v2 support", false },
	{ 0x03030004, "NOV2EXT", "peer sent no v2 extension", false },
	{ 0x03030005, "NOV2DEXT", "peer sent no SMC-D v2 extension", false },
	{ 0x03030006, "NOSEID", "peer sent no SEID", false },
	{ 0x03030007, "NOSMCD2DEV", "no SMC-D v2 device", false },
	{ 0x03030008, "NOUEID", "peer sent no user EID", false },
	{ 0x03030009, "RELEASEERR", "release negotiation failed (v2.1)", false },
	{ 0x0303000a, "MAXCONNERR", "max-connections negotiation failed (v2.1)", false },
	{ 0x0303000b, "MAXLINKERR", "max-links negotiation failed (v2.1)", false },
	{ 0x03040000, "MODEUNSUPP", "SMC modes do not match", false },
	{ 0x03050000, "RMBE_EC", "peer uses RMBE eyecatchers", false },
	{ 0x03060000, "OPTUNSUPP", "socket option not supported with SMC (TCP Fast Open)", false },
	{ 0x03070000, "DIFFPREFIX", "IP prefix / subnet mismatch", false },
	{ 0x03080000, "GETVLANERR", "could not determine the VLAN of the IP device", false },
	{ 0x03090000, "ISMVLANERR", "could not register the VLAN on the ISM device", false },
	{ 0x030a0000, "NOACTLINK", "no active link in the link group", false },
	{ 0x030b0000, "NOSRVLINK", "link named in the Accept not found", false },
	{ 0x030c0000, "VERSMISMAT", "SMC version mismatch", false },
	{ 0x030d0000, "MAX_DMB", "SMC-D DMB limit reached", false },
	{ 0x030e0000, "NOROUTE", "SMC-R v2: no route to peer", false },
	{ 0x030f0000, "NOINDIRECT", "SMC-R v2: direct/indirect mismatch", false },
	{ 0x04000000, "SYNCERR", "link-group state out of sync", false },
	{ 0x05000000, "PEERDECL", "the peer declined (local reason, not sent)", false },
	{ 0x06000000, "REPLY", "reply to a received Decline (Linux 4.11 code)", true },
	{ 0x07000000, "SEND", "sending problem (Linux 4.11 code)", true },
	{ 0x09990000, "INTERR", "internal error", false },
	{ 0x09990001, "ERR_RTOK", "rtoken handling failed", false },
	{ 0x09990002, "ERR_RDYLNK", "bringing the QP up failed", false },
	{ 0x09990003, "ERR_REGBUF", "registering RDMA buffers failed", false },
	{ 0x99990000, "INTERR", "internal error (Linux 4.11 code)", true },
};

const struct clc_decline_reason *clc_decline_table(size_t *count)
{
	*count = sizeof(reasons) / sizeof(reasons[0]);
	return reasons;
}

const struct clc_decline_reason *clc_decline_lookup(uint32_t code)
{
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (reasons[i].code == code)
			return &reasons[i];
	return NULL;
}

const char *clc_decline_name(uint32_t code)
{
	const struct clc_decline_reason *r = clc_decline_lookup(code);
	return r ? r->name : "UNKNOWN";
}

const char *clc_decline_class(uint32_t code)
{
	/* The top byte groups the codes in every Linux version (5.2). */
	switch (code >> 24) {
	case 0x01: return "resources";
	case 0x02: return "timeout";
	case 0x03: return "configuration";
	case 0x04: return "sync";
	case 0x05: return "peer declined";
	case 0x06: return "reply";
	case 0x07: return "send";
	case 0x09:
	case 0x99: return "internal";
	default: return "unknown";
	}
}
