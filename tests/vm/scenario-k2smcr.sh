#!/bin/bash
# scenario-k2smcr.sh a|b: a two-link SMC-R v2 link group between smcr and the Linux
# kernel's SMC-R, two NICs and two Soft-RoCE devices on each guest, the second NICs in the
# first one's subnet (Linux adds a link only on a device with an address there):
#   SMCR_VM_NICS=2 SMCR_VM_IP2_A=10.0.0.11 SMCR_VM_IP2_B=10.0.0.12 run-pair.sh k2smcr
#   a (10.0.0.1, 10.0.0.11): the kernel (vm_kxfer, AF_SMC). Phase 1 server, phase 2 client.
#   b (10.0.0.2, 10.0.0.12): smcr over verbs on rxe0 and rxe1 (vm_xfer), the same UEID.
# Phase 1: the kernel's server adds the second link at first contact (ADD LINK v2 with its
# RMB's keys) and smcr's client accepts it. Phase 2: smcr's server adds it and the
# kernel's client accepts. Each phase: two connections, data both ways SHA-256 checked,
# both links up on both sides (smcr's log, the kernel's link list), the connections on
# different links when the kernel's server puts them there (it chooses). Phase 3: smcr's
# eth1 goes down under a connection; link 2 fails on both sides, the data goes on over
# link 1. Not a CTest (by hand; docs/parts/verbs.md).
set -u
role=$1
B=$SMCR_BLD
UEID=SMCR-VM-2LINK
fail=0
check() {
	local what=$1
	shift
	echo "== $what"
	if "$@"; then echo "== $what: ok"; else echo "== $what: FAILED"; fail=1; fi
}
want() { # N pattern file
	local n
	n=$(grep -cE "$2" "$3" 2>/dev/null)
	[ "$n" = "$1" ] || { echo "expected $1 lines matching '$2' in $3, found $n"; return 1; }
}
has() { grep -qE "$1" "$2" || { echo "no line matching '$1' in $2"; return 1; }; }
for d in eth0 eth1; do
	tcpdump -i $d -s 256 -U -w "$SMCR_OUT/$role-$d.pcap" udp port 4791 >/dev/null 2>&1 &
done
sleep 1
rdma link show
ip -br addr
CASES="idle:65536:65536 half:262144:262144"
export VM_XFER_IDLE_S=8
K=$B/tests/vm/vm_kxfer
X=$B/tests/vm/vm_xfer
if [ "$role" = a ]; then
	modprobe smc && modprobe smc_diag || exit 98
	check "kernel: add UEID" "$K" ueid add $UEID
	# phase 1: the kernel serves; its link list while smcr's client still holds the LG
	"$K" server 5000 2 >/tmp/k1.out 2>&1
	"$K" lgr >/tmp/lgr1.out 2>&1	# smcr's client lingers: the LG still lives
	cat /tmp/k1.out /tmp/lgr1.out
	check "kernel server: 2 connections SMC-R" want 2 "^kernel server conn=[0-9] mode=smcr " /tmp/k1.out
	check "kernel server: data right" want 2 "^server conn=[0-9] ok" /tmp/k1.out
	check "kernel server: two links up in its link group" has "^klink link=2 state=3 " /tmp/lgr1.out
	sleep 20
	# phase 2: the kernel is smcr's client; its LG's links read while it lingers
	VM_XFER_LINGER_S=12 "$K" client 10.0.0.2 5100 $CASES >/tmp/k2.out 2>&1 &
	kc=$!
	for _ in $(seq 120); do
		[ "$(grep -c '^client conn=[0-9] ok' /tmp/k2.out)" = 2 ] && break
		sleep 1
	done
	"$K" lgr >/tmp/lgr2.out 2>&1
	wait $kc
	cat /tmp/k2.out /tmp/lgr2.out
	check "kernel client: 2 connections SMC-R" want 2 "^kernel client conn=[0-9] mode=smcr " /tmp/k2.out
	check "kernel client: data right" want 2 "^client conn=[0-9] ok" /tmp/k2.out
	# vm_kxfer prints its LG's links at each connection's end (smcr's server has ended
	# the LG by the time lgr2 is read)
	check "kernel client: two links up in its link group" has "^klink link=2 state=3 " /tmp/k2.out
	sleep 5
	# phase 3: the kernel serves one long connection while b takes a NIC down
	"$K" server 5200 2 >/tmp/k3.out 2>&1
	cat /tmp/k3.out
	check "kernel server (phase 3): data right" want 2 "^server conn=[01] ok" /tmp/k3.out
	# the kernel may log the removal after its server's data is done: wait for it (60 s)
	for _ in $(seq 60); do
		dmesg >/tmp/dmesg3.out
		grep -Eq "link removed: id [0-9a-f]+02," /tmp/dmesg3.out && break
		sleep 1
	done
	check "kernel (phase 3): link 2 removed" has "link removed: id [0-9a-f]+02," /tmp/dmesg3.out
	"$K" lgr
	dmesg | grep -i smc | tail -30
else
	export SMCR_DEVICES="verbs:rxe0 verbs:rxe1" SMCR_UEID=$UEID SMCR_LOG=${SMCR_LOG:-info}
	mkdir -p /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup
	check "smcr-bpf install" "$B/tools/smcr-bpf/smcr-bpf" install
	sleep 3
	VM_XFER_LINGER_S=10 "$X" client 10.0.0.1 5000 $CASES >/tmp/x1.out 2>&1
	cat /tmp/x1.out
	check "smcr client: 2 connections SMC-R v2" want 2 "^smcr client conn=[0-9] mode=smcr ver=2 " /tmp/x1.out
	check "smcr client: data right" want 2 "^client conn=[0-9] ok" /tmp/x1.out
	check "smcr client: the kernel's ADD LINK v2 accepted, two links" has "LG [0-9]+: link [0-9]+ added, 2 links" /tmp/x1.out
	echo "== smcr client: the kernel's server put its connections on links" \
		$(grep -oE '^smcr client conn=[0-9] .* link=[0-9]+' /tmp/x1.out | sed 's/.*link=//')
	"$X" server 5100 2 >/tmp/x2.out 2>&1
	cat /tmp/x2.out
	check "smcr server: 2 connections SMC-R v2" want 2 "^smcr server conn=[0-9] mode=smcr ver=2 " /tmp/x2.out
	check "smcr server: data right" want 2 "^server conn=[0-9] ok" /tmp/x2.out
	check "smcr server: its ADD LINK v2 accepted by the kernel, two links" has "LG [0-9]+: link [0-9]+ added, 2 links" /tmp/x2.out
	sleep 25	# the kernel's client lingers 12 s, then its phase 3 server starts
	# phase 3: two connections, the second with 8 MiB each way; 3 s into it eth1 goes down
	# for good. Link 2 (rxe1 on eth1) fails on both sides and the link group goes on with
	# link 1, where the kernel's server put the connection in every run so far (its
	# choice). eth0 is not taken down: the kernel's link 1 would then keep retransmitting
	# its CDCs on rxe0 for ever, never failing over (docs/PROTOCOL.md).
	: >/tmp/x3.out
	(
		for _ in $(seq 600); do
			grep -q '^client conn=1 case=' /tmp/x3.out && break
			sleep 0.2
		done
		sleep 3
		ip link set eth1 down
		echo "== eth1 down"
	) &
	down=$!
	"$X" client 10.0.0.1 5200 half:65536:65536 half:8388608:8388608 >/tmp/x3.out 2>&1
	wait $down	# not a bare wait: the captures run in the background too
	cat /tmp/x3.out
	check "smcr client (phase 3): data right" want 2 "^client conn=[01] ok" /tmp/x3.out
	check "smcr client (phase 3): link 2 (eth1) failed, the LG went on" \
		has "link [0-9]+ \\(number 2\\) of LG [0-9]+ down" /tmp/x3.out
fi
sleep 2
kill %1 %2 2>/dev/null
wait 2>/dev/null
for d in eth0 eth1; do
	echo "== LLC on $d ($role's capture)"
	"$B/tools/smcr-decode/smcr-decode" -r "$SMCR_OUT/$role-$d.pcap" 2>/dev/null |
		awk '/^[a-z]/{k=$1} /^  src:/{s=$2} /^  response:/{r=$2} /^$/{ if (k ~ /^llc/) print k, s, r; k="" }'
done
echo "== scenario $role: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
