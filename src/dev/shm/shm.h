/* shm.h: the same-host shared-memory provider's one public entry point. Everything else is
 * reached through the device interface (dev/dev.h); design and trust boundary in
 * docs/parts/dev-shm.md.
 *
 * dev_open("shm") opens a new device instance (one port, a GID of its own that names this
 * host and the instance). dev_open("shm:dir=/path") puts its Unix socket in /path instead of
 * the default rendezvous directory ($SMCR_SHM_DIR, else /run/smcr/shm when writable, else
 * /tmp/smcr-shm-<uid>); peers must use the same directory to find each other, also across
 * network namespaces (a filesystem socket, not an abstract one: abstract names are
 * per network namespace). */
#ifndef SMCR_DEV_SHM_SHM_H
#define SMCR_DEV_SHM_SHM_H

#include "dev/dev.h"

#define SHM_PROVIDER_NAME "shm"

/* Registers the provider "shm" (idempotent, thread-safe). */
SMCR_MUST_CHECK int dev_shm_register(void);

#endif
