/* vm_ksmc.c: the kernel's SMC through its netlink interfaces (vm_ksmc.h). Every reply is
 * walked with its own lengths checked; nothing here trusts a length it did not bound. */
#define _GNU_SOURCE
#include "vm_ksmc.h"

#include <ctype.h>
#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/smc.h>
#include <linux/smc_diag.h>
#include <linux/sock_diag.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUFSZ 32768

struct msgbuf {
	unsigned char b[1024];
	size_t len;
};

static void msg_start(struct msgbuf *m, uint16_t type, uint16_t flags)
{
	memset(m, 0, sizeof *m);
	struct nlmsghdr *n = (struct nlmsghdr *)m->b;
	n->nlmsg_type = type;
	n->nlmsg_flags = flags;
	n->nlmsg_seq = 1;
	m->len = NLMSG_HDRLEN;
}

static void msg_put(struct msgbuf *m, const void *p, size_t n)
{
	if (m->len + NLMSG_ALIGN(n) > sizeof m->b)
		abort();
	memcpy(m->b + m->len, p, n);
	m->len += NLMSG_ALIGN(n);
}

static void msg_attr(struct msgbuf *m, uint16_t type, const void *p, size_t n)
{
	struct nlattr a = { .nla_len = (uint16_t)(NLA_HDRLEN + n), .nla_type = type };
	if (m->len + NLA_HDRLEN + NLA_ALIGN(n) > sizeof m->b)
		abort();
	memcpy(m->b + m->len, &a, sizeof a);
	memcpy(m->b + m->len + NLA_HDRLEN, p, n);
	m->len += NLA_HDRLEN + NLA_ALIGN(n);
}

static int msg_send(int fd, struct msgbuf *m)
{
	((struct nlmsghdr *)m->b)->nlmsg_len = (uint32_t)m->len;
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	return sendto(fd, m->b, m->len, 0, (struct sockaddr *)&to, sizeof to) == (ssize_t)m->len ? 0
												  : -1;
}

/* Calls fn for each message of the answer until DONE (dump) or the first message / ACK.
 * Returns 0, or -errno from an NLMSG_ERROR. */
typedef void (*msg_fn)(const unsigned char *payload, size_t len, void *arg);
static int msg_recv(int fd, int dump, msg_fn fn, void *arg)
{
	static unsigned char buf[BUFSZ];
	for (;;) {
		ssize_t r = recv(fd, buf, sizeof buf, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		size_t left = (size_t)r;
		for (struct nlmsghdr *n = (struct nlmsghdr *)buf; NLMSG_OK(n, left);
		     n = NLMSG_NEXT(n, left)) {
			if (n->nlmsg_type == NLMSG_DONE)
				return 0;
			if (n->nlmsg_type == NLMSG_ERROR) {
				if (n->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
					return -EPROTO;
				const struct nlmsgerr *e = NLMSG_DATA(n);
				return e->error;
			}
			if (fn)
				fn(NLMSG_DATA(n), n->nlmsg_len - NLMSG_HDRLEN, arg);
			if (!dump)
				return 0;
		}
	}
}

/* Attributes of one level: fn(type, value, len). */
typedef void (*attr_fn)(uint16_t type, const unsigned char *v, size_t n, void *arg);
static void attrs(const unsigned char *p, size_t len, attr_fn fn, void *arg)
{
	while (len >= NLA_HDRLEN) {
		struct nlattr a;
		memcpy(&a, p, sizeof a);
		if (a.nla_len < NLA_HDRLEN || a.nla_len > len)
			return;
		fn(a.nla_type & NLA_TYPE_MASK, p + NLA_HDRLEN, a.nla_len - NLA_HDRLEN, arg);
		size_t step = NLA_ALIGN(a.nla_len);
		if (step >= len)
			return;
		p += step;
		len -= step;
	}
}

static uint64_t uval(const unsigned char *v, size_t n)
{
	if (n == 1)
		return v[0];
	if (n == 2) {
		uint16_t x;
		memcpy(&x, v, 2);
		return x;
	}
	if (n == 4) {
		uint32_t x;
		memcpy(&x, v, 4);
		return x;
	}
	if (n == 8) {
		uint64_t x;
		memcpy(&x, v, 8);
		return x;
	}
	return 0;
}

static void sval(const unsigned char *v, size_t n, char *out, size_t on)
{
	size_t k = 0;
	for (size_t i = 0; i < n && v[i] && k + 1 < on; i++)
		out[k++] = isprint(v[i]) ? (char)v[i] : '?';
	while (k && out[k - 1] == ' ')
		k--;
	out[k] = 0;
}

/* ---- generic netlink: the SMC_GEN_NETLINK family ---- */

static void family_attr(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	if (t == CTRL_ATTR_FAMILY_ID && n >= 2)
		*(int *)arg = (int)uval(v, 2);
}

static void family_msg(const unsigned char *p, size_t len, void *arg)
{
	if (len >= GENL_HDRLEN)
		attrs(p + GENL_HDRLEN, len - GENL_HDRLEN, family_attr, arg);
}

static int genl_open(int *family)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (fd < 0) {
		perror("netlink socket");
		return -1;
	}
	struct msgbuf m;
	msg_start(&m, GENL_ID_CTRL, NLM_F_REQUEST);
	struct genlmsghdr g = { .cmd = CTRL_CMD_GETFAMILY, .version = 1 };
	msg_put(&m, &g, sizeof g);
	msg_attr(&m, CTRL_ATTR_FAMILY_NAME, SMC_GENL_FAMILY_NAME, sizeof SMC_GENL_FAMILY_NAME);
	*family = -1;
	int rc = msg_send(fd, &m) ? -errno : msg_recv(fd, 0, family_msg, family);
	if (rc || *family < 0) {
		fprintf(stderr, "generic netlink family %s not found (%s): is the smc module loaded?\n",
			SMC_GENL_FAMILY_NAME, rc ? strerror(-rc) : "no id");
		close(fd);
		return -1;
	}
	return fd;
}

static int genl_cmd(int fd, int family, uint8_t cmd, int dump, uint16_t attr, const char *s,
		    msg_fn fn, void *arg)
{
	struct msgbuf m;
	msg_start(&m, (uint16_t)family, NLM_F_REQUEST | (dump ? NLM_F_DUMP : NLM_F_ACK));
	struct genlmsghdr g = { .cmd = cmd, .version = SMC_GENL_FAMILY_VERSION };
	msg_put(&m, &g, sizeof g);
	if (s)
		msg_attr(&m, attr, s, strlen(s) + 1);
	if (msg_send(fd, &m))
		return -errno;
	return msg_recv(fd, dump, fn, arg);
}

/* The kernel's UEID form: upper case, blank padded to 32 bytes (docs/parts/wire-v2.md 2.3). */
static int ueid_norm(const char *in, char out[SMC_MAX_EID_LEN + 1])
{
	size_t n = strlen(in);
	if (n == 0 || n > SMC_MAX_EID_LEN)
		return -1;
	for (size_t i = 0; i < SMC_MAX_EID_LEN; i++)
		out[i] = i < n ? (char)toupper((unsigned char)in[i]) : ' ';
	out[SMC_MAX_EID_LEN] = 0;
	return 0;
}

static void ueid_attr(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	(void)arg;
	char s[64];
	if (t == SMC_NLA_EID_TABLE_ENTRY) {
		sval(v, n, s, sizeof s);
		printf("ueid %s\n", s);
	}
}

static void ueid_msg(const unsigned char *p, size_t len, void *arg)
{
	if (len >= GENL_HDRLEN)
		attrs(p + GENL_HDRLEN, len - GENL_HDRLEN, ueid_attr, arg);
}

/* link groups: SMC_GEN_LGR_SMCR { id, role, conns, v2 common { ver, rel, eid, host }, v2 } */
struct lgr_out {
	char line[512];
	size_t len;
};

static void lgr_add(struct lgr_out *o, const char *fmt, const char *s, uint64_t u)
{
	if (o->len >= sizeof o->line)
		return;
	int w = s ? snprintf(o->line + o->len, sizeof o->line - o->len, fmt, s)
		  : snprintf(o->line + o->len, sizeof o->line - o->len, fmt, (unsigned long long)u);
	if (w > 0)
		o->len += (size_t)w;
}

static void lgr_v2c_attr(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	char s[64];
	switch (t) {
	case SMC_NLA_LGR_V2_VER:
		lgr_add(arg, " ver=%llu", NULL, uval(v, n));
		break;
	case SMC_NLA_LGR_V2_REL:
		lgr_add(arg, " rel=%llu", NULL, uval(v, n));
		break;
	case SMC_NLA_LGR_V2_NEG_EID:
		sval(v, n, s, sizeof s);
		lgr_add(arg, " eid=%s", s, 0);
		break;
	case SMC_NLA_LGR_V2_PEER_HOST:
		sval(v, n, s, sizeof s);
		lgr_add(arg, " peer_host=%s", s, 0);
		break;
	}
}

static void lgr_v2_attr(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	if (t == SMC_NLA_LGR_R_V2_DIRECT)
		lgr_add(arg, " direct=%llu", NULL, uval(v, n));
}

static void lgr_attr(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	switch (t) {
	case SMC_NLA_LGR_R_ID:
		lgr_add(arg, " id=%llu", NULL, uval(v, n));
		break;
	case SMC_NLA_LGR_R_ROLE:
		lgr_add(arg, " role=%s", uval(v, n) ? "server" : "client", 0);
		break;
	case SMC_NLA_LGR_R_CONNS_NUM:
		lgr_add(arg, " conns=%llu", NULL, uval(v, n));
		break;
	case SMC_NLA_LGR_R_V2_COMMON:
		attrs(v, n, lgr_v2c_attr, arg);
		break;
	case SMC_NLA_LGR_R_V2:
		attrs(v, n, lgr_v2_attr, arg);
		break;
	}
}

static void link_attr(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	char s[64];
	switch (t) {
	case SMC_NLA_LINK_ID:
		lgr_add(arg, " link=%llu", NULL, uval(v, n));
		break;
	case SMC_NLA_LINK_IB_DEV:
		sval(v, n, s, sizeof s);
		lgr_add(arg, " ibdev=%s", s, 0);
		break;
	case SMC_NLA_LINK_GID:
		sval(v, n, s, sizeof s);
		lgr_add(arg, " gid=%s", s, 0);
		break;
	case SMC_NLA_LINK_PEER_GID:
		sval(v, n, s, sizeof s);
		lgr_add(arg, " peer_gid=%s", s, 0);
		break;
	case SMC_NLA_LINK_CONN_CNT:
		lgr_add(arg, " conns=%llu", NULL, uval(v, n));
		break;
	case SMC_NLA_LINK_STATE:
		lgr_add(arg, " state=%llu", NULL, uval(v, n));
		break;
	}
}

static void lgr_top(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	if (t == SMC_GEN_LGR_SMCR)
		attrs(v, n, lgr_attr, arg);
	else if (t == SMC_GEN_LINK_SMCR)
		attrs(v, n, link_attr, arg);
}

static void lgr_msg(const unsigned char *p, size_t len, void *arg)
{
	struct lgr_out o = { .len = 0 };
	o.line[0] = 0;
	if (len >= GENL_HDRLEN)
		attrs(p + GENL_HDRLEN, len - GENL_HDRLEN, lgr_top, &o);
	printf("%s%s\n", (const char *)arg, o.line);
}

/* counters: SMC_GEN_STATS { SMCR_TECH { v1/v2 successes }, handshake errors } */
static void tech_attr(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	static const struct {
		uint16_t t;
		const char *name;
	} names[] = {
		{ SMC_NLA_STATS_T_CLNT_V1_SUCC, "clnt_v1_succ" },
		{ SMC_NLA_STATS_T_CLNT_V2_SUCC, "clnt_v2_succ" },
		{ SMC_NLA_STATS_T_SRV_V1_SUCC, "srv_v1_succ" },
		{ SMC_NLA_STATS_T_SRV_V2_SUCC, "srv_v2_succ" },
		{ SMC_NLA_STATS_T_URG_DATA_CNT, "urg_data" },
		{ SMC_NLA_STATS_T_RX_BYTES, "rx_bytes" },
		{ SMC_NLA_STATS_T_TX_BYTES, "tx_bytes" },
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (names[i].t == t)
			printf(" %s=%llu", names[i].name, (unsigned long long)uval(v, n));
	(void)arg;
}

static void stats_attr(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	if (t == SMC_NLA_STATS_SMCR_TECH)
		attrs(v, n, tech_attr, arg);
	else if (t == SMC_NLA_STATS_CLNT_HS_ERR_CNT)
		printf(" clnt_hs_err=%llu", (unsigned long long)uval(v, n));
	else if (t == SMC_NLA_STATS_SRV_HS_ERR_CNT)
		printf(" srv_hs_err=%llu", (unsigned long long)uval(v, n));
}

static void stats_top(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	if (t == SMC_GEN_STATS)
		attrs(v, n, stats_attr, arg);
}

static void stats_msg(const unsigned char *p, size_t len, void *arg)
{
	printf("kstats smcr");
	if (len >= GENL_HDRLEN)
		attrs(p + GENL_HDRLEN, len - GENL_HDRLEN, stats_top, arg);
	printf("\n");
}

/* fallback counters: one message per (side, reason) */
struct fb {
	int type;
	uint32_t code;
	unsigned cnt;
	unsigned long long srv, clnt;
};

static void fb_attr(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	struct fb *f = arg;
	if (t == SMC_NLA_FBACK_STATS_TYPE)
		f->type = (int)uval(v, n);
	else if (t == SMC_NLA_FBACK_STATS_RSN_CODE)
		f->code = (uint32_t)uval(v, n);
	else if (t == SMC_NLA_FBACK_STATS_RSN_CNT)
		f->cnt = (unsigned)uval(v, n);
	else if (t == SMC_NLA_FBACK_STATS_SRV_CNT)
		f->srv = uval(v, n);
	else if (t == SMC_NLA_FBACK_STATS_CLNT_CNT)
		f->clnt = uval(v, n);
}

static void fb_top(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	if (t == SMC_GEN_FBACK_STATS)
		attrs(v, n, fb_attr, arg);
}

static void fb_msg(const unsigned char *p, size_t len, void *arg)
{
	(void)arg;
	struct fb f = { .type = -1 };
	if (len >= GENL_HDRLEN)
		attrs(p + GENL_HDRLEN, len - GENL_HDRLEN, fb_top, &f);
	/* the kernel's type: 1 server, 0 client (its smc_nl_get_fback_details) */
	if (f.srv || f.clnt)
		printf("kfallback totals server=%llu client=%llu\n", f.srv, f.clnt);
	printf("kfallback side=%s reason=0x%08x count=%u\n",
	       f.type == 1 ? "server" : f.type == 0 ? "client" : "?", f.code, f.cnt);
}

/* ---- smc_diag ---- */

struct diag_q {
	ino_t ino; /* 0: every socket */
	char *out;
	size_t n;
	int found;
};

struct diag_one {
	int has_fb, has_lgr;
	struct smc_diag_fallback fb;
	struct smc_diag_lgrinfo lgr;
};

static void diag_attr(uint16_t t, const unsigned char *v, size_t n, void *arg)
{
	struct diag_one *d = arg;
	if (t == SMC_DIAG_FALLBACK && n >= sizeof d->fb) {
		memcpy(&d->fb, v, sizeof d->fb);
		d->has_fb = 1;
	} else if (t == SMC_DIAG_LGRINFO && n >= sizeof d->lgr) {
		memcpy(&d->lgr, v, sizeof d->lgr);
		d->has_lgr = 1;
	}
}

static void diag_msg(const unsigned char *p, size_t len, void *arg)
{
	struct diag_q *q = arg;
	struct smc_diag_msg m;
	if (len < NLMSG_ALIGN(sizeof m))
		return;
	memcpy(&m, p, sizeof m);
	if (q->ino && m.diag_inode != q->ino)
		return;
	struct diag_one d;
	memset(&d, 0, sizeof d);
	attrs(p + NLMSG_ALIGN(sizeof m), len - NLMSG_ALIGN(sizeof m), diag_attr, &d);
	const char *mode = m.diag_mode == SMC_DIAG_MODE_SMCR	     ? "smcr"
			   : m.diag_mode == SMC_DIAG_MODE_FALLBACK_TCP ? "tcp"
			   : m.diag_mode == SMC_DIAG_MODE_SMCD	     ? "smcd"
								     : "?";
	char lgr[300] = "";
	if (d.has_lgr) {
		char ib[IB_DEVICE_NAME_MAX + 1], g[41], pg[41];
		sval(d.lgr.lnk[0].ibname, sizeof d.lgr.lnk[0].ibname, ib, sizeof ib);
		sval(d.lgr.lnk[0].gid, sizeof d.lgr.lnk[0].gid, g, sizeof g);
		sval(d.lgr.lnk[0].peer_gid, sizeof d.lgr.lnk[0].peer_gid, pg, sizeof pg);
		snprintf(lgr, sizeof lgr, " ibdev=%s link=%u gid=%s peer_gid=%s role=%s", ib,
			 d.lgr.lnk[0].link_id, g, pg, d.lgr.role ? "server" : "client");
	}
	char line[512];
	snprintf(line, sizeof line, "mode=%s state=%u reason=0x%08x peer_reason=0x%08x%s", mode,
		 m.diag_state, d.has_fb ? d.fb.reason : 0, d.has_fb ? d.fb.peer_diagnosis : 0, lgr);
	if (q->out)
		snprintf(q->out, q->n, "%s", line);
	else
		printf("kdiag inode=%llu %s\n", (unsigned long long)m.diag_inode, line);
	q->found = 1;
}

static int diag_dump(struct diag_q *q)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	struct msgbuf m;
	msg_start(&m, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP);
	struct smc_diag_req r;
	memset(&r, 0, sizeof r);
	r.diag_family = AF_SMC;
	r.diag_ext = (1 << (SMC_DIAG_LGRINFO - 1)) | (1 << (SMC_DIAG_FALLBACK - 1));
	msg_put(&m, &r, sizeof r);
	int rc = msg_send(fd, &m) ? -errno : msg_recv(fd, 1, diag_msg, q);
	close(fd);
	return rc;
}

void ksmc_diag_line(int fd, char *out, size_t n)
{
	struct stat st;
	snprintf(out, n, "mode=? (no smc_diag answer: is smc_diag loaded?)");
	if (fstat(fd, &st))
		return;
	struct diag_q q = { .ino = st.st_ino, .out = out, .n = n };
	int rc = diag_dump(&q);
	if (rc)
		snprintf(out, n, "mode=? (smc_diag: %s)", strerror(-rc));
}

int ksmc_lgr(void)
{
	int fam;
	int fd = genl_open(&fam);
	if (fd < 0)
		return -1;
	int rc = genl_cmd(fd, fam, SMC_NETLINK_GET_LGR_SMCR, 1, 0, NULL, lgr_msg, "klgr");
	if (!rc)
		rc = genl_cmd(fd, fam, SMC_NETLINK_GET_LINK_SMCR, 1, 0, NULL, lgr_msg, "klink");
	close(fd);
	return rc;
}

int ksmc_main(int argc, char **argv)
{
	const char *cmd = argv[1];
	if (!strcmp(cmd, "diag")) {
		struct diag_q q = { 0 };
		int rc = diag_dump(&q);
		if (rc)
			fprintf(stderr, "smc_diag: %s\n", strerror(-rc));
		return rc ? 2 : 0;
	}
	int fam;
	int fd = genl_open(&fam);
	if (fd < 0)
		return 2;
	int rc = -EINVAL;
	if (!strcmp(cmd, "ueid") && argc == 4 && !strcmp(argv[2], "add")) {
		char e[SMC_MAX_EID_LEN + 1];
		if (ueid_norm(argv[3], e)) {
			fprintf(stderr, "bad EID %s\n", argv[3]);
			return 2;
		}
		rc = genl_cmd(fd, fam, SMC_NETLINK_ADD_UEID, 0, SMC_NLA_EID_TABLE_ENTRY, e, NULL, NULL);
	} else if (!strcmp(cmd, "ueid") && argc == 3 && !strcmp(argv[2], "flush")) {
		rc = genl_cmd(fd, fam, SMC_NETLINK_FLUSH_UEID, 0, 0, NULL, NULL, NULL);
	} else if (!strcmp(cmd, "ueid") && argc == 3 && !strcmp(argv[2], "show")) {
		rc = genl_cmd(fd, fam, SMC_NETLINK_DUMP_UEID, 1, 0, NULL, ueid_msg, NULL);
	} else if (!strcmp(cmd, "lgr") && argc == 2) {
		rc = genl_cmd(fd, fam, SMC_NETLINK_GET_LGR_SMCR, 1, 0, NULL, lgr_msg, "klgr");
		if (!rc)
			rc = genl_cmd(fd, fam, SMC_NETLINK_GET_LINK_SMCR, 1, 0, NULL, lgr_msg, "klink");
	} else if (!strcmp(cmd, "stats") && argc == 2) {
		rc = genl_cmd(fd, fam, SMC_NETLINK_GET_STATS, 1, 0, NULL, stats_msg, NULL);
		if (!rc)
			rc = genl_cmd(fd, fam, SMC_NETLINK_GET_FBACK_STATS, 1, 0, NULL, fb_msg, NULL);
	} else {
		fprintf(stderr, "usage: %s ueid add EID | ueid flush | ueid show | lgr | stats | diag\n",
			argv[0]);
		close(fd);
		return 2;
	}
	close(fd);
	if (rc) {
		fprintf(stderr, "%s: %s\n", cmd, strerror(-rc));
		return 1;
	}
	return 0;
}
