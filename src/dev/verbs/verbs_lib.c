/* verbs_lib.c: loads libibverbs at run time (dlopen "libibverbs.so.1") and resolves the
 * exported functions the provider calls (verbs_int.h says why only those), once per
 * process. Also applies rdma-core's fork rule before any device is opened
 * (docs/parts/verbs.md "fork"): when the kernel copies pinned pages on fork
 * (ibv_is_fork_initialized() == IBV_FORK_UNNEEDED, Linux 5.13+), nothing is needed;
 * otherwise ibv_fork_init(), so a forked child's copy-on-write cannot move pages an RDMA
 * device still writes (our RDMA buffers are MADV_DONTFORK anyway, dev_mem.c). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev/verbs/verbs_int.h"
#include "util/log.h"

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static struct vb_lib lib;		/* written once inside lib_once */
static const struct vb_lib *lib_ok;	/* &lib once everything resolved */
static char lib_why[200];		/* why not, when lib_ok is NULL */

#define SYM(field, name, required)                                                       \
	do {                                                                             \
		void *p_ = dlsym(h, name);                                               \
		if (!p_ && (required)) {                                                 \
			snprintf(lib_why, sizeof lib_why,                                \
				 "libibverbs.so.1 has no %s (rdma-core too old)", name); \
			return;                                                          \
		}                                                                        \
		memcpy(&lib.field, &p_, sizeof p_); /* object to function pointer */    \
	} while (0)

static void lib_load(void)
{
	/* $SMCR_VERBS_LIB: another file name (tests: one that does not exist, to see the
	 * provider absent on a machine that has rdma-core) */
	const char *path = getenv("SMCR_VERBS_LIB") ? getenv("SMCR_VERBS_LIB") : "libibverbs.so.1";
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(lib_why, sizeof lib_why, "cannot load libibverbs (%s): install rdma-core's "
			 "libibverbs1 and ibverbs-providers", e ? e : path);
		return;
	}
	SYM(get_device_list, "ibv_get_device_list", 1);
	SYM(free_device_list, "ibv_free_device_list", 1);
	SYM(get_device_name, "ibv_get_device_name", 1);
	SYM(open_device, "ibv_open_device", 1);
	SYM(close_device, "ibv_close_device", 1);
	SYM(query_device, "ibv_query_device", 1);
	SYM(query_port, "ibv_query_port", 1);
	SYM(query_gid, "ibv_query_gid", 1);
	SYM(query_gid_ex, "_ibv_query_gid_ex", 0);
	SYM(alloc_pd, "ibv_alloc_pd", 1);
	SYM(dealloc_pd, "ibv_dealloc_pd", 1);
	SYM(reg_mr, "ibv_reg_mr", 1);
	SYM(dereg_mr, "ibv_dereg_mr", 1);
	SYM(create_comp_channel, "ibv_create_comp_channel", 1);
	SYM(destroy_comp_channel, "ibv_destroy_comp_channel", 1);
	SYM(create_cq, "ibv_create_cq", 1);
	SYM(resize_cq, "ibv_resize_cq", 1);
	SYM(destroy_cq, "ibv_destroy_cq", 1);
	SYM(get_cq_event, "ibv_get_cq_event", 1);
	SYM(ack_cq_events, "ibv_ack_cq_events", 1);
	SYM(create_qp, "ibv_create_qp", 1);
	SYM(modify_qp, "ibv_modify_qp", 1);
	SYM(query_qp, "ibv_query_qp", 1);
	SYM(destroy_qp, "ibv_destroy_qp", 1);
	SYM(get_async_event, "ibv_get_async_event", 1);
	SYM(ack_async_event, "ibv_ack_async_event", 1);
	SYM(fork_init, "ibv_fork_init", 1);
	SYM(is_fork_initialized, "ibv_is_fork_initialized", 0);
	/* The fork rule, before any other verbs call of this process. */
	if (lib.is_fork_initialized && lib.is_fork_initialized() == IBV_FORK_UNNEEDED) {
		LOG_INFO(VB_UNIT, "fork: the kernel copies pinned pages on fork (no ibv_fork_init)");
	} else if (lib.fork_init() != 0) {
		LOG_WARN(VB_UNIT, "ibv_fork_init failed: a forked child must not touch RDMA memory");
	} else {
		LOG_INFO(VB_UNIT, "fork: ibv_fork_init (kernel without copy-on-fork of pinned pages)");
	}
	/* Kept loaded for the process's life (the library is never dlclose()d: its
	 * providers' threads and atfork handlers stay). */
	lib_ok = &lib;
}

const struct vb_lib *vb_lib(void)
{
	pthread_once(&lib_once, lib_load);
	return lib_ok;
}

const char *vb_lib_reason(void)
{
	pthread_once(&lib_once, lib_load);
	return lib_ok ? NULL : lib_why;
}
