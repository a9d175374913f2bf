/* verbs.h: the libibverbs provider's public entry points (docs/parts/verbs.md). Everything
 * else is reached through the device interface (dev/dev.h).
 *
 * libibverbs is loaded with dlopen("libibverbs.so.1") on first use, never linked, so a
 * program that never asks for verbs never loads rdma-core. Device specs:
 *   "verbs"              the first RDMA port that is ACTIVE (any device)
 *   "verbs:<dev>"        port 1 of that device (e.g. "verbs:rxe0", "verbs:mlx5_0")
 *   "verbs:<dev>/<port>" that port (e.g. "verbs:rxe0/1")
 * Each opened device shows exactly one port to its users, as port 1 (the core always uses
 * port 1); the real port number is the provider's. Opening the same port again in one
 * process returns the same device, held again. */
#ifndef SMCR_DEV_VERBS_VERBS_H
#define SMCR_DEV_VERBS_VERBS_H

#include "dev/dev.h"

#define VERBS_PROVIDER_NAME "verbs"
#define VERBS_SPEC_MAX 48

/* Registers the provider "verbs" (idempotent, thread-safe). It registers even when
 * libibverbs is missing: opening then fails with DEV_NO_DEVICE and dev_verbs_absent() says
 * why. */
SMCR_MUST_CHECK int dev_verbs_register(void);
/* NULL when libibverbs loaded and has at least one device; otherwise a sentence saying why
 * verbs cannot be used here (no libibverbs.so.1, a missing symbol, no RDMA device). Loads
 * libibverbs if not yet done. */
const char *dev_verbs_absent(void);
/* Writes the spec "verbs:<dev>/<port>" of every ACTIVE port (up to max) and returns how
 * many; 0 when verbs is absent or no port is active. */
int dev_verbs_active_ports(char (*specs)[VERBS_SPEC_MAX], int max);

#endif
