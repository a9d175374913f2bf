/* conf_emu.h: the emu provider's entries in the conformance suite
 * (tests/conformance/providers.def):
 *   emu        loopback, one namespace: dev_open("emu:ip=127.0.0.0/8") gives each side its
 *              own device on a free 127.x.y.z address;
 *   emu_netns  the same devices, but alternately in two network namespaces joined by a veth
 *              pair that the suite makes itself (root); skipped with a message otherwise. */
#ifndef SMCR_TESTS_CONF_EMU_H
#define SMCR_TESTS_CONF_EMU_H

/* Registers "emu" (and raises the open-file limit: 1000 QP pairs are 2000 sockets). */
int conf_emu_register(void);
/* Makes the namespaces (or attaches to the parent's, in the suite's peer process) and
 * registers "emu_netns", a wrapper of the emu provider that opens each device in turn in
 * one namespace and the other. Without namespaces its devices do not open
 * (-SMCR_E_DEV_NO_DEVICE: the suite reports a skip). */
int conf_emu_netns_register(void);

#endif
