/* emu.h: the emulated RDMA provider's public entry points: registration, device
 * arguments, and the fault injection API for tests. Everything else goes through the device
 * interface (dev/dev.h). Design, frame format, threads and trust: docs/parts/emu.md.
 *
 * A TEST AND FALLBACK DEVICE. It gives RC semantics (dev.h 1-8) over TCP so smcr can run
 * across network namespaces (veth pairs) and between machines without RDMA NICs. It is
 * not fast and not a security boundary beyond what its checks say; real deployments use
 * the libibverbs provider.
 *
 * Opening: dev_open("emu:<args>"), args comma-separated key=value. dev_open("emu") takes
 * the args from $SMCR_EMU_ARGS, else EMU_DEFAULT_ARGS (a loopback device). args may hold
 * several device descriptions separated by ';': successive opens of the same args take
 * them in turn (per process), e.g. "if=eth0;if=eth1" gives a program that opens "emu"
 * twice a device on each interface (two links), and the two-namespace conformance run
 * opens its two sides in two namespaces (tests/emu/conformance-netns.sh).
 *   if=<name>     the network interface the device is bound to (its port follows the
 *                 interface's link state). Its address is the first IPv4 address of the
 *                 interface, else its first global IPv6 address, unless ip= picks one.
 *   ip=<addr>     the device's IP address (IPv4 dotted or IPv6). Without if=, the
 *                 interface is the one holding the address (an address inside a loopback
 *                 interface's prefix, e.g. 127.0.0.2, counts as the loopback interface's).
 *   ip=<a.b.c.d/len>  IPv4 prefix whose addresses are all local: 127.0.0.0/8 on lo, or an
 *                 AnyIP route ("ip route add local 10.1.0.0/24 dev lo"). Each open takes a
 *                 new device on a free address of the prefix (one no device of any process
 *                 listens on with this port): many distinct GIDs on one host, for tests.
 *                 The interface is if= (whose link the devices follow), else the one
 *                 holding an address of the prefix, else the loopback. port must not be 0.
 *   port=<n>      TCP port the device listens on and connects to on peers (default
 *                 $SMCR_EMU_PORT, else EMU_DEFAULT_PORT). Devices that talk to each other
 *                 must use the same port. 0: an ephemeral port (dev_emu_port() tells which;
 *                 only useful when the peer is opened with that port).
 *   name=<name>   device name shown by dev_query_device (default "emu<n>-<if>").
 *   netns=<name>  open the device in that network namespace ("ip netns" name, i.e.
 *                 /run/netns/<name>, or a path such as /proc/<pid>/ns/net): its sockets
 *                 and I/O thread live there; the caller stays where it is. Needs
 *                 CAP_SYS_ADMIN.
 * A description needs if= or ip=. The port GID is the address: IPv4 as the IPv4-mapped
 * IPv6 address ::ffff:a.b.c.d, IPv6 as is (RoCE v2 style), GID type DEV_GID_TYPE_SOFT.
 * Opening the same address and port again in one process returns the same device with
 * one more reference (prefix devices are never shared). dev_open_by_gid() finds devices
 * this process has open (the first match if namespaces reuse an address).
 *
 * Examples: "emu:ip=127.0.0.1,port=0" (a loopback device on an ephemeral port),
 * "emu:if=veth0" (the device of veth0 on the default port), "emu:ip=fd00::1,port=20000".
 */
#ifndef SMCR_DEV_EMU_EMU_H
#define SMCR_DEV_EMU_EMU_H

#include <stdint.h>

#include "dev/dev.h"

#define EMU_PROVIDER_NAME "emu"
/* What dev_open("emu") opens without $SMCR_EMU_ARGS: a device on a free 127.x.y.z. */
#define EMU_DEFAULT_ARGS "ip=127.0.0.0/8"
/* Default TCP port: RoCE v2's UDP port 4791 with 10000 added (TCP 14791 is unassigned). */
#define EMU_DEFAULT_PORT 14791

/* Registers the provider "emu" (idempotent, thread-safe). */
SMCR_MUST_CHECK int dev_emu_register(void);

/* The TCP port the device listens on (useful after "port=0"). */
SMCR_MUST_CHECK int dev_emu_port(struct dev_device *dev, uint16_t *port);

/* ---- Fault injection (tests). Each returns 0, or -SMCR_E_EMU_NOT_EMU for an object of
 * another provider. They act on one QP of this process; the peer notices through the
 * connection, as it would notice a real fault. ------------------------------------- */

/* Cuts the QP's connection (TCP reset). Both sides go to ERR at once: at each side the WR in
 * progress (oldest not yet acknowledged) completes with DEV_WC_RETRY_EXC_ERR, the rest with
 * DEV_WC_WR_FLUSH_ERR, and DEV_EVENT_QP_FATAL is queued. Works in any state; a QP that has
 * no connection yet just goes to ERR. */
SMCR_MUST_CHECK int dev_emu_qp_cut(struct dev_qp *qp);

/* Every frame this QP sends from now on (data, acks) leaves no earlier than delay_ns after
 * it was queued: a one-way link delay. Order is kept. 0 removes the delay. A delay longer
 * than the QP's transport timeout makes the peer's sends (whose acks are delayed) fail with
 * DEV_WC_RETRY_EXC_ERR, as on a real link. */
SMCR_MUST_CHECK int dev_emu_qp_delay(struct dev_qp *qp, uint64_t delay_ns);

/* on=1 stalls the QP's link in both directions without closing it: nothing is sent, nothing
 * is received (frames wait in the queues and in TCP). Unacknowledged sends on either side
 * fail with DEV_WC_RETRY_EXC_ERR once the transport timeout (docs/parts/emu.md "Timers")
 * passes without progress; then both QPs go to ERR. on=0 before that resumes traffic with
 * nothing lost, as RC retransmission would. */
SMCR_MUST_CHECK int dev_emu_qp_stall(struct dev_qp *qp, int on);

/* The transport timeout the QP uses (ns): 4.096 us * 2^timeout * (retry_cnt + 1) from its
 * RTS attributes, at least EMU_ACK_TIMEOUT_MIN_NS and at most EMU_ACK_TIMEOUT_MAX_NS
 * (timeout 0, "infinite" in IB, gives the maximum). 0 before RTS. */
#define EMU_ACK_TIMEOUT_MIN_NS (10ull * 1000 * 1000)
#define EMU_ACK_TIMEOUT_MAX_NS (1000ull * 1000 * 1000)
/* Until the QP's connection is paired (docs/parts/emu.md "Connection and pairing"),
 * outstanding sends wait up to this long instead: setting up the emulated link is not
 * the peer being silent. A peer QP that never reaches RTR is reported after it. */
#define EMU_PAIR_TIMEOUT_NS (5000ull * 1000 * 1000)
SMCR_MUST_CHECK int dev_emu_qp_timeout(struct dev_qp *qp, uint64_t *ns);

#endif
