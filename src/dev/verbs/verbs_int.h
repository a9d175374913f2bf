/* verbs_int.h: internals of the libibverbs provider: the table of libibverbs functions
 * resolved with dlsym (verbs_lib.c) and the provider's objects, each embedding the generic
 * one of dev/dev.h (docs/parts/verbs.md "Mapping").
 *
 * Only functions libibverbs exports are resolved. The data path (ibv_post_send,
 * ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq) is static inline in <infiniband/verbs.h>
 * and calls through the context's ops table, so it works without linking; no other inline
 * of verbs.h may be used here (several call exported functions by name, which would need
 * the link-time dependency this provider avoids). */
#ifndef SMCR_DEV_VERBS_VERBS_INT_H
#define SMCR_DEV_VERBS_VERBS_INT_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>

#include "dev/dev.h"
#include "dev/verbs/verbs.h"

#define VB_UNIT "verbs"

/* Resolved once (vb_lib_load, under its own once); read-only afterwards, by any thread. */
struct vb_lib {
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *device);
	struct ibv_context *(*open_device)(struct ibv_device *device);
	int (*close_device)(struct ibv_context *context);
	int (*query_device)(struct ibv_context *context, struct ibv_device_attr *attr);
	/* the exported ibv_query_port fills the first part of struct ibv_port_attr (the
	 * "compat" layout); the caller zeroes the rest */
	int (*query_port)(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid);
	/* optional (rdma-core 32+): GID type and netdev in one call */
	int (*query_gid_ex)(struct ibv_context *context, uint32_t port, uint32_t index,
			    struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *context);
	int (*destroy_comp_channel)(struct ibv_comp_channel *channel);
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe, void *cq_context,
				    struct ibv_comp_channel *channel, int comp_vector);
	int (*resize_cq)(struct ibv_cq *cq, int cqe);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*get_cq_event)(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			struct ibv_qp_init_attr *init);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*get_async_event)(struct ibv_context *context, struct ibv_async_event *event);
	void (*ack_async_event)(struct ibv_async_event *event);
	int (*fork_init)(void);
	/* optional (rdma-core 35+): whether the kernel copies pinned pages on fork */
	enum ibv_fork_status (*is_fork_initialized)(void);
};

/* The loaded library, or NULL (then vb_lib_reason() says why). Thread-safe. */
const struct vb_lib *vb_lib(void);
const char *vb_lib_reason(void);

/* One opened (device, port), shown to users as a device with one port (port 1). */
struct vb_dev {
	struct dev_device dev;
	struct ibv_context *ctx;
	uint8_t port;			/* the real port number */
	char ibname[DEV_NAME_MAX];	/* the RDMA device's name, e.g. "rxe0" */
	struct ibv_device_attr attr;
	uint32_t max_inline;		/* largest inline send a QP was granted (probed at open) */
	struct vb_dev *next;		/* (vb_devs_lock) the process's open devices */
	pthread_mutex_t qps_lock;	/* protects qps */
	struct vb_qp *qps;		/* the device's QPs, for state updates from events */
};

struct vb_pd {
	struct dev_pd pd;
	struct ibv_pd *ibpd;
};

struct vb_mr {
	struct dev_mr mr;
	struct ibv_mr *ibmr;
};

/* cqe_used and cqe_cap under lock: the work requests of the QPs completing into the CQ
 * and the CQ's capacity (grown with ibv_resize_cq as QPs are created, so it never
 * overflows; never shrunk). */
struct vb_cq {
	struct dev_cq cq;
	struct ibv_cq *ibcq;
	struct ibv_comp_channel *ch;
	pthread_mutex_t lock;
	int cqe_used, cqe_cap;
};

/* state of the generic part is written under lock (modify_qp, and the provider when the
 * QP is seen in ERR: async event or error completion). */
struct vb_qp {
	struct dev_qp qp;
	struct ibv_qp *ibqp;
	pthread_mutex_t lock;
	struct vb_qp *next;	/* (vb_dev.qps_lock) */
};

/* Device-level functions used by the other files. */
int vb_errno_to_err(int e);
void vb_dev_qp_add(struct vb_dev *d, struct vb_qp *q);
void vb_dev_qp_del(struct vb_dev *d, struct vb_qp *q);
/* The QP of this number goes to ERR in our records (the hardware is there already). */
void vb_dev_qp_err(struct vb_dev *d, uint32_t qpn);

/* The ops of the other files (sorted into the provider's table in verbs_dev.c). */
int vb_alloc_pd(struct dev_device *dev, struct dev_pd **out);
int vb_dealloc_pd(struct dev_pd *pd);
int vb_reg_mr(struct dev_pd *pd, void *addr, size_t length, unsigned access, struct dev_mr **out);
int vb_dereg_mr(struct dev_mr *mr);
int vb_create_cq(struct dev_device *dev, int cqe, void *cq_context, struct dev_cq **out);
int vb_destroy_cq(struct dev_cq *cq);
int vb_req_notify_cq(struct dev_cq *cq, int solicited_only);
int vb_get_cq_event(struct dev_cq *cq);
int vb_poll_cq(struct dev_cq *cq, int n, struct dev_wc *wc);
int vb_cq_reserve(struct vb_cq *c, int n);
void vb_cq_release(struct vb_cq *c, int n);
int vb_create_qp(struct dev_pd *pd, const struct dev_qp_init_attr *attr, struct dev_qp **out);
int vb_destroy_qp(struct dev_qp *qp);
int vb_modify_qp(struct dev_qp *qp, const struct dev_qp_attr *attr, unsigned mask);
int vb_query_qp(struct dev_qp *qp, struct dev_qp_attr *attr);
int vb_post_send(struct dev_qp *qp, const struct dev_send_wr *wr, const struct dev_send_wr **bad);
int vb_post_recv(struct dev_qp *qp, const struct dev_recv_wr *wr, const struct dev_recv_wr **bad);

#endif
