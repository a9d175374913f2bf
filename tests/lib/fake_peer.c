/* fake_peer.c: see fake_peer.h. */
#include "fake_peer.h"

#include <string.h>

#include "util/err.h"
#include "wire/cdc.h"
#include "wire/clc.h"
#include "wire/llc.h"

#define MSG 64

static uint8_t *msgbuf(struct fake_peer *f, int i) { return (uint8_t *)f->msg->addr + i * MSG; }

static int post_recv(struct fake_peer *f, int i)
{
	struct dev_sge s = { (uint64_t)(uintptr_t)msgbuf(f, i), MSG, f->msgmr->lkey };
	struct dev_recv_wr w = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1 };
	return dev_post_recv(f->qp, &w, NULL);
}

int fp_open(struct fake_peer *f, const char *spec, size_t mem_len, size_t rmb_off,
	    uint8_t size_code)
{
	memset(f, 0, sizeof(*f));
	f->rmb_off = rmb_off;
	f->size_code = size_code;
	f->rmbe_size = 16384u << size_code;
	f->token = 0x00C0FFEE;
	f->psn = 0x123456;
	if (dev_open(spec, &f->dev) || dev_alloc_pd(f->dev, &f->pd) ||
	    dev_create_cq(f->dev, 256, NULL, &f->cq))
		return -1;
	if (dev_mem_alloc(mem_len, "fake-rmb", &f->mem) ||
	    dev_reg_mr(f->pd, f->mem->addr, mem_len, DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE,
		       &f->mr))
		return -1;
	if (dev_mem_alloc((FP_MSGS + 1) * MSG, "fake-msg", &f->msg) ||
	    dev_reg_mr(f->pd, f->msg->addr, f->msg->len, DEV_ACCESS_LOCAL_WRITE, &f->msgmr))
		return -1;
	struct dev_qp_init_attr qa = { .send_cq = f->cq, .recv_cq = f->cq,
				       .cap = { 64, FP_MSGS, 2, 1, 0 } };
	if (dev_create_qp(f->pd, &qa, &f->qp))
		return -1;
	struct dev_qp_attr at = { .qp_state = DEV_QPS_INIT, .port_num = 1,
				  .qp_access_flags = DEV_ACCESS_LOCAL_WRITE | DEV_ACCESS_REMOTE_WRITE };
	if (dev_modify_qp(f->qp, &at, DEV_QP_MASK_INIT))
		return -1;
	for (int i = 0; i < FP_MSGS; i++)
		if (post_recv(f, i))
			return -1;
	return 0;
}

void fp_close(struct fake_peer *f)
{
	if (f->qp && dev_destroy_qp(f->qp))
		return;
	if (f->msgmr && dev_dereg_mr(f->msgmr))
		return;
	if (f->mr && dev_dereg_mr(f->mr))
		return;
	if (f->msg)
		dev_mem_put(f->msg);
	if (f->mem)
		dev_mem_put(f->mem);
	if (f->cq && dev_destroy_cq(f->cq))
		return;
	if (f->pd && dev_dealloc_pd(f->pd))
		return;
	if (f->dev)
		dev_close(f->dev);
	memset(f, 0, sizeof(*f));
}

int fp_accept(struct fake_peer *f, uint8_t acc[68])
{
	struct dev_gid_entry ge;
	if (dev_query_gid(f->dev, 1, 0, &ge))
		return -1;
	struct clc_accept a;
	memset(&a, 0, sizeof(a));
	a.f.version = 1;
	a.first_contact = true;
	a.peer_id.instance = 0xFA4E;
	memcpy(a.peer_id.mac.b, ge.mac, 6);
	memcpy(a.gid.b, ge.gid.raw, 16);
	memcpy(a.mac.b, ge.mac, 6);
	a.qpn = f->qp->qp_num;
	a.rkey = f->mr->rkey;
	a.rmbe_idx = 1;
	a.token = f->token;
	a.rmbe_size_code = f->size_code;
	a.mtu_code = 3;
	a.rmb_vaddr = (uint64_t)(uintptr_t)((uint8_t *)f->mem->addr + f->rmb_off);
	a.psn = f->psn;
	size_t n;
	return clc_accept_encode(&a, CLC_ACCEPT, acc, 68, &n) ? -1 : 0;
}

int fp_confirm(struct fake_peer *f, const uint8_t *conf, size_t len, uint8_t cl_flags)
{
	struct clc_accept c;
	if (clc_accept_decode(conf, len, CLC_CONFIRM, &c))
		return -1;
	f->peer_token = c.token;
	f->peer_rkey = c.rkey;
	f->peer_qpn = c.qpn;
	f->peer_psn = c.psn;
	f->peer_size = 16384u << c.rmbe_size_code;
	f->peer_vaddr = c.rmb_vaddr;
	struct dev_qp_attr at = { .qp_state = DEV_QPS_RTR, .path_mtu = DEV_MTU_1024,
				  .dest_qp_num = c.qpn, .rq_psn = c.psn, .max_dest_rd_atomic = 1,
				  .min_rnr_timer = 5 };
	memcpy(at.ah_attr.dgid.raw, c.gid.b, 16);
	at.ah_attr.port_num = 1;
	at.ah_attr.hop_limit = 1;
	if (dev_modify_qp(f->qp, &at, DEV_QP_MASK_RTR))
		return -1;
	struct dev_qp_attr rts = { .qp_state = DEV_QPS_RTS, .sq_psn = f->psn, .timeout = 15,
				   .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1 };
	if (dev_modify_qp(f->qp, &rts, DEV_QP_MASK_RTS))
		return -1;
	struct dev_gid_entry ge;
	if (dev_query_gid(f->dev, 1, 0, &ge))
		return -1;
	uint8_t m[44] = { LLC_CONFIRM_LINK, 44, 0, cl_flags };
	memcpy(m + 4, ge.mac, 6);
	memcpy(m + 10, ge.gid.raw, 16);
	m[26] = (uint8_t)(f->qp->qp_num >> 16);
	m[27] = (uint8_t)(f->qp->qp_num >> 8);
	m[28] = (uint8_t)f->qp->qp_num;
	m[29] = 1;	/* link number */
	m[33] = 7;	/* link user id */
	m[34] = 2;	/* max links */
	return fp_send(f, m);
}

int fp_send(struct fake_peer *f, const uint8_t msg[44])
{
	uint8_t *b = msgbuf(f, FP_MSGS);
	memcpy(b, msg, 44);
	struct dev_sge s = { (uint64_t)(uintptr_t)b, 44, f->msgmr->lkey };
	struct dev_send_wr w = { .wr_id = 1000, .sg_list = &s, .num_sge = 1, .opcode = DEV_WR_SEND,
				 .send_flags = DEV_SEND_SIGNALED | DEV_SEND_SOLICITED };
	return dev_post_send(f->qp, &w, NULL) ? -1 : 0;
}

int fp_cdc(struct fake_peer *f, uint16_t seq, uint32_t token, struct curs prod, struct curs cons,
	   uint8_t pflags, uint8_t cflags)
{
	uint8_t m[44] = { CDC_TYPE, 44 };
	uint32_t t = token ? token : f->peer_token;
	m[2] = (uint8_t)(seq >> 8);
	m[3] = (uint8_t)seq;
	m[4] = (uint8_t)(t >> 24);
	m[5] = (uint8_t)(t >> 16);
	m[6] = (uint8_t)(t >> 8);
	m[7] = (uint8_t)t;
	m[10] = (uint8_t)(prod.wrap >> 8);
	m[11] = (uint8_t)prod.wrap;
	m[12] = (uint8_t)(prod.count >> 24);
	m[13] = (uint8_t)(prod.count >> 16);
	m[14] = (uint8_t)(prod.count >> 8);
	m[15] = (uint8_t)prod.count;
	m[18] = (uint8_t)(cons.wrap >> 8);
	m[19] = (uint8_t)cons.wrap;
	m[20] = (uint8_t)(cons.count >> 24);
	m[21] = (uint8_t)(cons.count >> 16);
	m[22] = (uint8_t)(cons.count >> 8);
	m[23] = (uint8_t)cons.count;
	m[24] = pflags;
	m[25] = cflags;
	return fp_send(f, m);
}

int fp_write(struct fake_peer *f, uint64_t off, const void *data, size_t len)
{
	uint8_t *b = msgbuf(f, FP_MSGS);
	if (len > 44)
		return -1;
	memcpy(b, data, len);
	struct dev_sge s = { (uint64_t)(uintptr_t)b, (uint32_t)len, f->msgmr->lkey };
	struct dev_send_wr w = { .wr_id = 1001, .sg_list = &s, .num_sge = 1,
				 .opcode = DEV_WR_RDMA_WRITE };
	w.rdma.remote_addr = f->peer_vaddr + off;
	w.rdma.rkey = f->peer_rkey;
	return dev_post_send(f->qp, &w, NULL) ? -1 : 0;
}

int fp_recv(struct fake_peer *f, uint8_t (*out)[44], int max)
{
	struct dev_wc wc[16];
	int n = 0, k;
	while ((k = dev_poll_cq(f->cq, 16, wc)) > 0) {
		for (int i = 0; i < k; i++) {
			if (wc[i].opcode != DEV_WC_RECV || wc[i].status != DEV_WC_SUCCESS)
				continue;
			int idx = (int)wc[i].wr_id;
			if (n < max)
				memcpy(out[n++], msgbuf(f, idx), 44);
			if (post_recv(f, idx))
				return -1;
		}
	}
	return n;
}

uint8_t *fp_rmbe(struct fake_peer *f) { return (uint8_t *)f->mem->addr + f->rmb_off; }
