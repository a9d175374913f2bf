/* conf_emu.c: the emu provider's conformance entries (conf_emu.h). "emu_netns" is the emu
 * provider itself behind another name: its ops are emu's (only query_device reports the
 * wrapper's name, which the suite checks), its open() enters a namespace through emu's own
 * netns= argument and picks a free address of that side. */
#define _GNU_SOURCE
#include "conf_emu.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "dev/emu/emu.h"
#include "emu_netns.h"
#include "util/log.h"

int conf_emu_register(void)
{
	emu_raise_nofile();
	return dev_emu_register();
}

#define CONF_EMU_NETNS "emu_netns"

static struct emu_netns conf_ns;
static _Atomic unsigned conf_ns_next;
static struct dev_ops conf_ns_ops;

static int conf_ns_query_device(struct dev_device *dev, struct dev_device_attr *a)
{
	int rc = dev_emu_provider()->ops->query_device(dev, a);
	snprintf(a->provider, sizeof a->provider, "%s", CONF_EMU_NETNS);
	return rc;
}

static int conf_ns_open(const struct dev_ops *ops, const char *args, struct dev_device **out)
{
	(void)args;
	if (!conf_ns.ok)
		return -SMCR_E_DEV_NO_DEVICE;
	/* Consecutive opens alternate sides, so the suite's two sides are in different
	 * namespaces; within a side, the first address no device holds yet. */
	unsigned side = atomic_fetch_add(&conf_ns_next, 1) & 1;
	int rc = -SMCR_E_EMU_LISTEN;
	for (int i = 0; i < EMU_NETNS_ADDRS && rc == -SMCR_E_EMU_LISTEN; i++) {
		char spec[160];
		snprintf(spec, sizeof spec, "netns=%s,if=%s,ip=%s,name=emu-%c%d", conf_ns.ns[side],
			 conf_ns.ifname[side], conf_ns.ip[side][i], 'a' + (int)side, i);
		rc = dev_emu_provider()->open(ops, spec, out);
	}
	return rc;
}

static int conf_ns_open_by_gid(const struct dev_ops *ops, const struct dev_gid *gid,
			       struct dev_device **out)
{
	return dev_emu_provider()->open_by_gid(ops, gid, out);
}

static const struct dev_provider conf_ns_provider = {
	.name = CONF_EMU_NETNS,
	.ops = &conf_ns_ops,
	.open = conf_ns_open,
	.open_by_gid = conf_ns_open_by_gid,
};

int conf_emu_netns_register(void)
{
	emu_raise_nofile();
	conf_ns_ops = *dev_emu_provider()->ops;
	conf_ns_ops.query_device = conf_ns_query_device;
	if (emu_netns_attach(&conf_ns) != 0) {
		char why[160];
		if (emu_netns_setup(&conf_ns, why, sizeof why) != 0)
			fprintf(stderr, "SKIP: emu_netns: %s\n", why);
	}
	return dev_provider_register(&conf_ns_provider);
}
