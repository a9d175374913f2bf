/* prefix.c: the IP prefixes of the interface a connection uses, for the Proposal's IP area
 * and the server's prefix check (docs/protocol/wire-formats.md 3.3; sock.h sock_prefixes).
 *
 * getifaddrs() is a netlink dump (a socket, several messages, a close: tens of
 * microseconds and most of the kernel's per-connection work in a connect-rate profile,
 * docs/parts/connect.md), and the interface set rarely changes. So the addresses are kept
 * in a cache, refreshed when it is older than SOCK_PFX_TTL_NS (1 s), or at once when a
 * connection's local address is on no cached interface (a change we have not seen yet)
 * and the cache is older than SOCK_PFX_MISS_NS (a bound on how often an address that is
 * on no interface at all can cost a dump). An IPv4-mapped address (an IPv4 peer of a
 * dual-stack socket) is looked up as the IPv4 address it maps.
 *
 * Threads: pfx_lock (a leaf) protects the cache; the dump runs with it held (callers wait
 * for one dump rather than run several at once). */
#define _GNU_SOURCE
#include "sock/sock.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"

#define PFX_MAX 256 /* interface addresses kept; more are ignored (logged once) */

struct pfx_ent {
	int family;
	uint8_t addr[16]; /* the address itself (IPv4 in the first 4) */
	uint8_t mask[16];
	char ifname[IF_NAMESIZE];
};

static pthread_mutex_t pfx_lock = PTHREAD_MUTEX_INITIALIZER;
/* All protected by pfx_lock: */
static struct pfx_ent pfx_v[PFX_MAX];
static int pfx_n;
static uint64_t pfx_time;     /* smcr_now_ns() of the last dump, 0 = never */
static uint64_t pfx_refreshes;

/* fork() while another thread held the lock (a dump in progress): the child's copy of the
 * lock is re-initialised, and so is the cache, which that dump may have left half filled
 * (a server whose child found no prefix for its address declined its clients with
 * DIFFPREFIX): the child's first use reads the interfaces again. */
static void pfx_atfork_child(void)
{
	pthread_mutex_init(&pfx_lock, NULL);
	pfx_n = 0;
	pfx_time = 0;
}

/* Registered at load, before any thread can take pfx_lock: a registration at first use
 * came after other modules' handlers, and a child whose earlier handler let anything run
 * before this one inherited the lock held. */
__attribute__((constructor)) static void pfx_init(void)
{
	pthread_atfork(NULL, NULL, pfx_atfork_child);
}

/* Caller holds pfx_lock. */
static void pfx_refresh_locked(uint64_t now)
{
	struct ifaddrs *ifs = NULL;
	pfx_n = 0;
	pfx_time = now ? now : 1;
	pfx_refreshes++;
	if (getifaddrs(&ifs) != 0) {
		SMCR_LOG_RL(SMCR_LOG_WARN, "sock", "getifaddrs failed: no IP prefixes in CLC");
		return;
	}
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || !i->ifa_netmask || !i->ifa_name)
			continue;
		int fam = i->ifa_addr->sa_family;
		if (fam != AF_INET && fam != AF_INET6)
			continue;
		if (pfx_n == PFX_MAX) {
			SMCR_LOG_RL(SMCR_LOG_WARN, "sock", "more than %d interface addresses: "
				    "the rest are not used for CLC prefixes", PFX_MAX);
			break;
		}
		struct pfx_ent *e = &pfx_v[pfx_n++];
		memset(e, 0, sizeof(*e));
		e->family = fam;
		if (fam == AF_INET) {
			memcpy(e->addr, &((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr, 4);
			memcpy(e->mask,
			       &((const struct sockaddr_in *)(const void *)i->ifa_netmask)->sin_addr, 4);
		} else {
			memcpy(e->addr,
			       &((const struct sockaddr_in6 *)(const void *)i->ifa_addr)->sin6_addr, 16);
			memcpy(e->mask,
			       &((const struct sockaddr_in6 *)(const void *)i->ifa_netmask)->sin6_addr,
			       16);
		}
		size_t nl = strlen(i->ifa_name);
		if (nl >= sizeof(e->ifname))
			nl = sizeof(e->ifname) - 1;
		memcpy(e->ifname, i->ifa_name, nl);
	}
	freeifaddrs(ifs);
}

/* The interface holding (fam, a), or -1. Caller holds pfx_lock. */
static int pfx_find_locked(int fam, const uint8_t *a, size_t len)
{
	for (int i = 0; i < pfx_n; i++)
		if (pfx_v[i].family == fam && memcmp(pfx_v[i].addr, a, len) == 0)
			return i;
	return -1;
}

int sock_prefixes(const struct sockaddr *local, struct core_ip_prefix *out, int max)
{
	int fam = local->sa_family;
	const uint8_t *a;
	size_t len;
	if (fam == AF_INET) {
		a = (const uint8_t *)&((const struct sockaddr_in *)(const void *)local)->sin_addr;
		len = 4;
	} else if (fam == AF_INET6) {
		a = ((const struct sockaddr_in6 *)(const void *)local)->sin6_addr.s6_addr;
		len = 16;
		if (IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)(const void *)a)) {
			/* an IPv4 peer of a dual-stack socket: the connection is IPv4, and so
			 * are the interface's address and the prefixes the peer compares */
			fam = AF_INET;
			a += 12;
			len = 4;
		}
	} else {
		return 0;
	}
	uint64_t now = smcr_now_ns();
	int n = 0;
	pthread_mutex_lock(&pfx_lock);
	if (!pfx_time || now - pfx_time >= SOCK_PFX_TTL_NS)
		pfx_refresh_locked(now);
	int k = pfx_find_locked(fam, a, len);
	if (k < 0 && now - pfx_time >= SOCK_PFX_MISS_NS) {
		pfx_refresh_locked(now);
		k = pfx_find_locked(fam, a, len);
	}
	if (k >= 0) {
		const char *ifname = pfx_v[k].ifname;
		for (int i = 0; i < pfx_n && n < max; i++) {
			const struct pfx_ent *e = &pfx_v[i];
			if (e->family != fam || strcmp(e->ifname, ifname) != 0)
				continue;
			struct core_ip_prefix *x = &out[n++];
			memset(x, 0, sizeof(*x));
			x->family = fam;
			unsigned bits = 0;
			for (size_t j = 0; j < sizeof(e->mask); j++) {
				bits += (unsigned)__builtin_popcount(e->mask[j]);
				x->addr[j] = e->addr[j] & e->mask[j];
			}
			x->len = (uint8_t)bits;
		}
	}
	pthread_mutex_unlock(&pfx_lock);
	return n;
}

uint64_t sock_prefix_refreshes(void)
{
	pthread_mutex_lock(&pfx_lock);
	uint64_t v = pfx_refreshes;
	pthread_mutex_unlock(&pfx_lock);
	return v;
}
