/* twolink.c: see twolink.h. */
#define _GNU_SOURCE
#include "twolink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"

static struct core_link *link_of(struct core_engine *e, const struct core_trace_ev *ev)
{
	for (struct core_link *l = e->links; l; l = l->next)
		if (l->qp && l->qp->qp_num == ev->local_qpn &&
		    !memcmp(l->cdev->gid.gid.raw, ev->local_gid, 16))
			return l;
	return NULL;
}

static void on_trace(void *ctx, const struct core_trace_ev *ev)
{
	struct tl_log *t = ctx;
	if (ev->kind == CORE_TRACE_RECV || t->n >= TL_MAX_EV)
		return;
	struct tl_ev *x = &t->ev[t->n++];
	memset(x, 0, sizeof(*x));
	x->kind = ev->kind;
	x->qpn = ev->local_qpn;
	x->rkey = ev->rkey;
	x->addr = ev->remote_addr;
	x->len = (uint32_t)ev->len;
	x->now = t->e ? t->e->last_now : 0;
	x->link = t->e ? link_of(t->e, ev) : NULL;
	x->big = -1;
	if (ev->kind != CORE_TRACE_SEND || !ev->msg)
		return;
	memcpy(x->msg, ev->msg, ev->len < 44 ? ev->len : 44);
	if (ev->len > 44 && t->nbig < TL_MAX_BIG && ev->len <= TL_BIG_LEN) {
		x->big = (int)t->nbig;
		memcpy(t->big[t->nbig++], ev->msg, ev->len);
	}
	if (t->hold_type < 0 || x->msg[0] != (uint8_t)t->hold_type)
		return;
	if (x->msg[0] != CDC_TYPE && ((x->msg[3] & 0x80) != 0) != t->hold_resp)
		return;
	if (++t->seen != t->hold_nth)
		return;
	/* before the post: the message itself waits on the held path */
	struct dev_qp *qp = x->link ? x->link->qp : NULL;
	if (qp) {
		struct loopdev_path p = { .hold = true };
		loopdev_path_set(qp, &p);
		t->held = qp;
	}
	t->hold_type = -1;
}

static const char *mk_ueid;	/* tl_setup_v2's, for mk */

static struct core_engine *mk(const char *const *specs, int ndev, struct tl_log *t)
{
	struct core_engine_params p;
	memset(&p, 0, sizeof(p));
	if (mk_ueid && core_ueid_parse(mk_ueid, &p.ueids))
		return NULL;
	const char *devs[2] = { specs[0], specs[ndev > 1 ? 1 : 0] };
	p.devices = devs;
	p.ndevices = ndev;
	p.trace = on_trace;
	p.trace_ctx = t;
	t->hold_type = -1;
	struct core_engine *e = NULL;
	if (core_engine_new(&p, &e))
		return NULL;
	t->e = e;
	return e;
}

static uint64_t clock_base = 1 * TL_SEC;

int tl_setup(struct tl_fix *fx, int ncli, int nsrv)
{
	return tl_setup_spec(fx, "loop", ncli, nsrv);
}

int tl_setup_spec(struct tl_fix *fx, const char *spec, int ncli, int nsrv)
{
	const char *both[2] = { spec, spec };
	return tl_setup_specs(fx, both, ncli, both, nsrv);
}

int tl_setup_specs(struct tl_fix *fx, const char *const *cli, int ncli, const char *const *srv,
		   int nsrv)
{
	memset(fx, 0, sizeof(*fx));
	(void)cp_dev_spec();
	fx->lc = calloc(1, sizeof(*fx->lc));
	fx->ls = calloc(1, sizeof(*fx->ls));
	if (!fx->lc || !fx->ls)
		return -1;
	fx->ce = mk(cli, ncli, fx->lc);
	fx->se = mk(srv, nsrv, fx->ls);
	if (!fx->ce || !fx->se)
		return -1;
	fx->now = clock_base;	/* the loop paths' clock is one per process, never back */
	return 0;
}

int tl_setup_v2(struct tl_fix *fx, int ncli, int nsrv, const char *ueid)
{
	const char *both[2] = { "loop:gid=v2", "loop:gid=v2" };
	mk_ueid = ueid;
	int rc = tl_setup_specs(fx, both, ncli, both, nsrv);
	mk_ueid = NULL;
	return rc;
}

void tl_teardown(struct tl_fix *fx)
{
	clock_base = fx->now + 100 * TL_SEC;
	for (unsigned i = 0; i < TL_NPP; i++) {
		fx->pp[i].now = fx->now;
		if (fx->pp[i].cli || fx->pp[i].srv)
			cp_release(&fx->pp[i]);
	}
	core_engine_free(fx->ce);
	core_engine_free(fx->se);
	free(fx->lc);
	free(fx->ls);
}

bool tl_connect(struct tl_fix *fx, unsigned i)
{
	fx->pp[i].now = fx->now;
	bool ok = cp_connect_smc(&fx->pp[i], fx->ce, fx->se);
	fx->now = fx->pp[i].now;
	if (i >= fx->npp)
		fx->npp = i + 1;
	tl_at(fx, fx->now);
	return ok;
}

void tl_at(struct tl_fix *fx, uint64_t t)
{
	if (t > fx->now)
		fx->now = t;
	fx->pp[0].now = fx->now;
	fx->pp[0].ce = fx->ce;
	fx->pp[0].se = fx->se;
	cp_progress(&fx->pp[0], 4);
}

int tl_next(struct tl_log *lg, unsigned *from, uint8_t type, int resp)
{
	for (unsigned i = *from; i < lg->n; i++) {
		const struct tl_ev *x = &lg->ev[i];
		if (x->kind != CORE_TRACE_SEND || x->msg[0] != type)
			continue;
		if (type != CDC_TYPE && resp >= 0 && ((x->msg[3] & 0x80) != 0) != (resp != 0))
			continue;
		*from = i + 1;
		return (int)i;
	}
	return -1;
}

struct core_lgr *tl_lg(struct core_engine *e)
{
	for (struct core_lgr *lg = e->lgs; lg; lg = lg->next)
		if (lg->state != CORE_LG_DEAD)
			return lg;
	return NULL;
}

unsigned tl_links(struct core_engine *e)
{
	struct core_lgr *lg = tl_lg(e);
	return lg ? lgr_links_active(lg) : 0;
}

void tl_hold(struct tl_log *lg, uint8_t type, bool resp, unsigned nth)
{
	lg->hold_type = type;
	lg->hold_resp = resp;
	lg->hold_nth = nth;
	lg->seen = 0;
	lg->held = NULL;
}

void tl_release(struct dev_qp *qp)
{
	struct loopdev_path none = { 0 };
	loopdev_link_set(qp, &none);
}

long tl_move(struct tl_fix *fx, struct core_conn *tx, struct core_conn *rx, uint64_t off,
	     size_t len, uint64_t seed)
{
	uint8_t *s = malloc(len), *r = malloc(len);
	if (!s || !r) {
		free(s);
		free(r);
		return -1;
	}
	cp_stream_fill(s, off, len, seed);
	fx->pp[0].now = fx->now;
	long n = cp_pump(&fx->pp[0], tx, rx, s, len, r, 65536);
	if (n == (long)len && cp_stream_check(r, off, len, seed) >= 0)
		n = -2;
	free(s);
	free(r);
	return n;
}

int tl_setup_netns(struct tl_fix *fx, const struct emu_netns *nn, int ndev, unsigned port)
{
	char cs[2][128], ss[2][128];
	for (int i = 0; i < 2; i++) {
		snprintf(cs[i], sizeof(cs[i]), "emu:netns=%s,if=%s,port=%u", nn->ns[0],
			 emu_netns_path_if(nn, 0, i), port);
		snprintf(ss[i], sizeof(ss[i]), "emu:netns=%s,if=%s,port=%u", nn->ns[1],
			 emu_netns_path_if(nn, 1, i), port);
	}
	const char *cli[2] = { cs[0], cs[1] }, *srv[2] = { ss[0], ss[1] };
	if (tl_setup_specs(fx, cli, ndev, srv, ndev))
		return -1;
	if (tl_wait_ports(fx, ndev, 10 * TL_SEC))
		return -1;
	fx->now = smcr_now_ns();
	return 0;
}

int tl_wait_ports(struct tl_fix *fx, int ndev, uint64_t max_ns)
{
	uint64_t by = smcr_now_ns() + max_ns;
	for (;;) {
		bool all = true;
		for (int i = 0; i < ndev; i++) {
			struct dev_port_attr a, b;
			if (dev_query_port(fx->ce->devs[i].dev, 1, &a) ||
			    dev_query_port(fx->se->devs[i].dev, 1, &b) || a.state != DEV_PORT_ACTIVE ||
			    b.state != DEV_PORT_ACTIVE)
				all = false;
		}
		if (all)
			return 0;
		if (smcr_now_ns() > by)
			return -1;
		usleep(1000);
	}
}

void tl_tick(struct tl_fix *fx)
{
	fx->now = smcr_now_ns();
	tl_at(fx, fx->now);
}

int tl_wait_links(struct tl_fix *fx, unsigned want, uint64_t max_ns)
{
	uint64_t by = smcr_now_ns() + max_ns;
	while (tl_links(fx->ce) != want || tl_links(fx->se) != want) {
		tl_tick(fx);
		usleep(200);
		if (smcr_now_ns() > by)
			return -1;
	}
	return 0;
}
