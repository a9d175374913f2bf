#!/bin/bash
# scenario-kernel.sh a|b: smcr against the Linux kernel's SMC-R v2 over Soft-RoCE
# (run-pair.sh kernel; docs/PROTOCOL.md "Interoperability with Linux").
#   a (10.0.0.1): the kernel. The smc and smc_diag modules, a user EID in the kernel's table
#      (vm_kxfer ueid add: generic netlink SMC_GEN_NETLINK), AF_SMC sockets (vm_kxfer), its
#      TEST LINK interval cut to 2 s (net.smc.smcr_testlink_time). Phase 1 it serves smcr's
#      client; phase 2 it is the client of smcr's server.
#   b (10.0.0.2): smcr over verbs on rxe0 with smcr's BPF option program installed
#      (smcr-bpf install) and SMCR_UEID equal to the kernel's (vm_xfer).
# Each phase runs the cases of vm_xfer.c one connection each: a first contact half-closed
# by the client, then, reusing its link group, a close by the client, a close by the
# server, an abort (SO_LINGER 0), urgent data, and an idle connection (TEST LINK). Every
# connection must be SMC-R on both ends (smc_diag mode smcr on a; SOL_SMCR mode smcr,
# version 2 on b) with both directions' SHA-256 equal; the kernel's link group must say
# version 2, the EID, and smcr's host name; the kernel's counters count v2; the kernel's
# TEST LINKs must be answered (counted in b's capture by smcr-decode); the kernel's link
# groups are gone once smcr's processes ended them (DELETE LINK all, orderly). Phase 3:
# one more smcr client connection with smcr's TEST LINK interval cut to 2 s and its idle
# link-group timer to 3 s (SMCR_TESTLINK_MS, SMCR_LG_FREE_MS): the kernel answers smcr's
# TEST LINK, and smcr's idle timer ends the link group while its process still runs.
# Phase 4: the kernel removes its RDMA device (rdma link delete rxe0) under a link group smcr
# holds; Linux sends nothing then, and smcr must find the silent peer with its TEST LINK
# (2 s) and end the link group on its own, before its process exits.
# Both guests capture eth0 (tcpdump, 256 bytes a frame) into their results share.
set -u
role=$1
B=$SMCR_BLD
UEID=SMCR-VM-KERNEL
# Urgent data only from the kernel to smcr: a Linux 6.12 receiver of urgent data loses
# the stream's order whoever sends it (with smcr's sender the urgent byte stays inline and
# the last byte is lost; with a Linux sender in these guests the stream stops: the kk
# scenario), so that direction tests the kernel, not smcr (docs/PROTOCOL.md).
CASES1="half:262144:131072 cfirst:65536:200000 sfirst:100000:65536 abort:65536:65536 idle:20000:20000"
CASES2="half:131072:262144 cfirst:200000:65536 sfirst:65536:100000 abort:65536:65536 urg:30000:30000 idle:20000:20000"
N1=5
N2=6
export VM_XFER_IDLE_S=5
fail=0
check() { # what, then the command
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
lgr_gone() { # the kernel's link groups are all freed within 10 s (smcr ended them)
	for _ in $(seq 20); do
		"$K" lgr >/tmp/lgr.now 2>&1
		grep -q "^klgr" /tmp/lgr.now || return 0
		sleep 0.5
	done
	cat /tmp/lgr.now
	return 1
}
has() { # pattern file
	grep -qE "$1" "$2" || { echo "no line matching '$1' in $2"; return 1; }
}
atleast() { # N pattern file
	local n
	n=$(grep -cE "$2" "$3" 2>/dev/null)
	[ "$n" -ge "$1" ] || { echo "expected at least $1 lines matching '$2' in $3, found $n"; return 1; }
}
tcpdump -i eth0 -s 256 -U -w "$SMCR_OUT/$role.pcap" >/tmp/tcpdump.log 2>&1 &
tdump=$!
sleep 1
if [ "$role" = a ]; then
	modprobe smc && modprobe smc_diag || exit 98
	K=$B/tests/vm/vm_kxfer
	sysctl -w net.smc.smcr_testlink_time=2
	check "kernel: add UEID $UEID" "$K" ueid add $UEID
	"$K" ueid show
	"$K" server 5000 $N1 >/tmp/k1.out 2>&1
	cat /tmp/k1.out
	check "kernel server: $N1 connections SMC-R" want $N1 "^kernel server conn=[0-9] mode=smcr " /tmp/k1.out
	check "kernel server: every connection's data and end right" want $N1 "^server conn=[0-9] ok" /tmp/k1.out
	check "kernel server: its link group is SMC-R v2 with smcr's EID and host name" \
		atleast 1 "^klgr .*role=server ver=2 rel=1 peer_host=smcr-vm-b eid=$UEID direct=1" /tmp/k1.out
	check "kernel: its link group freed after smcr's process ended it (DELETE LINK)" lgr_gone
	"$K" client 10.0.0.2 5100 $CASES2 >/tmp/k2.out 2>&1
	cat /tmp/k2.out
	check "kernel client: $N2 connections SMC-R" want $N2 "^kernel client conn=[0-9] mode=smcr " /tmp/k2.out
	check "kernel client: every connection's data and end right" want $N2 "^client conn=[0-9] ok" /tmp/k2.out
	check "kernel client: its link group is SMC-R v2 with smcr's EID and host name" \
		atleast 1 "^klgr .*role=client ver=2 rel=1 peer_host=smcr-vm-b eid=$UEID direct=1" /tmp/k2.out
	check "kernel: its client link group freed after smcr's server ended it" lgr_gone
	# phase 3: smcr's own link-group life (its TEST LINK after 2 s idle, its idle timer of
	# 3 s ending the LG while its process lives on)
	"$K" server 5002 1 >/tmp/k3.out 2>&1
	cat /tmp/k3.out
	check "kernel server (phase 3): SMC-R, data right" has "^server conn=0 ok" /tmp/k3.out
	check "kernel: its link group freed by smcr's idle timer (DELETE LINK while smcr lives)" lgr_gone
	"$K" stats | tee /tmp/stats.out
	check "kernel: $((N1 + 1)) v2 successes as server and $N2 as client, no v1" \
		grep -qE "clnt_v1_succ=0 clnt_v2_succ=$N2 srv_v1_succ=0 srv_v2_succ=$((N1 + 1))" /tmp/stats.out
	# phase 4: the kernel's side of a link group smcr holds goes away without a word (its
	# device removed: Linux sends no DELETE LINK then)
	"$K" server 5003 1 >/tmp/k4.out 2>&1
	cat /tmp/k4.out
	check "kernel server (phase 4): SMC-R, data right" has "^server conn=0 ok" /tmp/k4.out
	sleep 1
	rdma link delete rxe0
	echo "== phase 4: rxe0 removed"
else
	mkdir -p /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup
	check "smcr-bpf install" "$B/tools/smcr-bpf/smcr-bpf" install
	export SMCR_DEVICES=verbs SMCR_UEID=$UEID SMCR_LOG=${SMCR_LOG:-info}
	X=$B/tests/vm/vm_xfer
	"$X" client 10.0.0.1 5000 $CASES1 >/tmp/x1.out 2>&1
	cat /tmp/x1.out
	check "smcr client: $N1 connections SMC-R v2" want $N1 "^smcr client conn=[0-9] mode=smcr ver=2 " /tmp/x1.out
	check "smcr client: first contact, then the others reuse its link group" \
		want $((N1 - 1)) "^smcr client conn=[1-9] mode=smcr ver=2 first_contact=0 " /tmp/x1.out
	check "smcr client: every connection's data and end right" want $N1 "^client conn=[0-9] ok" /tmp/x1.out
	"$X" server 5100 $N2 >/tmp/x2.out 2>&1
	cat /tmp/x2.out
	check "smcr server: $N2 connections SMC-R v2" want $N2 "^smcr server conn=[0-9] mode=smcr ver=2 " /tmp/x2.out
	check "smcr server: the others reuse the first one's link group" \
		want $((N2 - 1)) "^smcr server conn=[1-9] mode=smcr ver=2 first_contact=0 " /tmp/x2.out
	check "smcr server: every connection's data and end right" want $N2 "^server conn=[0-9] ok" /tmp/x2.out
	SMCR_TESTLINK_MS=2000 SMCR_LG_FREE_MS=3000 VM_XFER_LINGER_S=8 \
		"$X" client 10.0.0.1 5002 idle:20000:20000 >/tmp/x3.out 2>&1
	cat /tmp/x3.out
	check "smcr client (phase 3): SMC-R v2, data right" has "^client conn=0 ok" /tmp/x3.out
	# ended by the idle timer: the LG's end is logged before the process's exit begins
	check "smcr client (phase 3): its idle timer ended the link group before exit" \
		awk '/LG 1 terminated/ && !e {t=NR} /engine: exit:/ && !e {e=NR} END {exit !(t && e && t < e)}' /tmp/x3.out
	SMCR_TESTLINK_MS=2000 VM_XFER_LINGER_S=10 \
		"$X" client 10.0.0.1 5003 half:20000:20000 >/tmp/x4.out 2>&1
	cat /tmp/x4.out
	check "smcr client (phase 4): SMC-R v2, data right" has "^client conn=0 ok" /tmp/x4.out
	check "smcr client (phase 4): the silent peer found (TEST LINK unanswered), LG ended before exit" \
		awk '/LG 1 terminated/ && !e {t=NR} /engine: exit:/ && !e {e=NR} END {exit !(t && e && t < e)}' /tmp/x4.out
	"$B/tools/smcr-bpf/smcr-bpf" status | grep -E "client_smc|server_smc|peer_syn"
fi
sleep 2
kill $tdump 2>/dev/null
wait $tdump 2>/dev/null
if [ "$role" = b ]; then
	# the LLC in b's capture: kind, sender, response flag (smcr-decode)
	"$B/tools/smcr-decode/smcr-decode" -r "$SMCR_OUT/b.pcap" 2>/dev/null |
		awk '/^[a-z]/{k=$1} /^  src:/{s=$2} /^  response:/{r=$2} /^$/{ if (k ~ /^llc/) print k, s, r; k="" }' \
		>/tmp/llc.txt
	sort /tmp/llc.txt | uniq -c
	check "the kernel's TEST LINKs (2 s interval) answered by smcr" \
		test "$(grep -c '^llc2.test_link 10.0.0.1:[0-9]* false' /tmp/llc.txt)" -ge 2 -a \
		"$(grep -c '^llc2.test_link 10.0.0.2:[0-9]* true' /tmp/llc.txt)" -ge 2
	check "smcr's TEST LINKs (phase 3, 2 s) answered by the kernel" \
		test "$(grep -c '^llc2.test_link 10.0.0.2:[0-9]* false' /tmp/llc.txt)" -ge 1 -a \
		"$(grep -c '^llc2.test_link 10.0.0.1:[0-9]* true' /tmp/llc.txt)" -ge 1
	check "no ADD LINK from the kernel (smcr offers max links 1)" \
		test "$(grep -c '^llc2.add_link' /tmp/llc.txt)" = 0
fi
echo "== scenario $role: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
