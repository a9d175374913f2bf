/* vm_ksmc.h: the Linux kernel's SMC seen from user space, for the guest tests (tests/vm):
 * its generic netlink family SMC_GEN_NETLINK (UEID table, link groups, counters) and
 * smc_diag (NETLINK_SOCK_DIAG, family AF_SMC). Facts from the kernel's uapi headers
 * <linux/smc.h> and <linux/smc_diag.h>. */
#ifndef VM_KSMC_H
#define VM_KSMC_H
#include <stddef.h>

#ifndef AF_SMC
#define AF_SMC 43
#endif

/* One line describing the AF_SMC socket fd as smc_diag sees it: mode, fallback reason and
 * peer diagnosis, RDMA device, GIDs. */
void ksmc_diag_line(int fd, char *out, size_t n);

/* Prints the kernel's SMC-R link groups and links (lines "klgr ...", "klink ..."). */
int ksmc_lgr(void);

/* vm_kxfer ueid add EID | ueid flush | ueid show | lgr | stats | fallback */
int ksmc_main(int argc, char **argv);

#endif
