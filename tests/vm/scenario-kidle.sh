#!/bin/bash
# scenario-kidle.sh a|b: the Linux kernel's idle link-group timer against smcr (run-pair.sh
# kidle; docs/PROTOCOL.md "Interoperability with Linux").
# Linux frees an SMC-R link group that has had no connection for 600 s (the server's side;
# its client waits 610 s) and says so with an orderly DELETE LINK "all"; no sysctl of 6.12
# changes that delay, so this scenario waits it out (about 11 minutes, the guests idle).
#   a (10.0.0.1): the kernel, server of two connections (vm_kxfer, AF_SMC, UEID set). After
#      the first one closed it watches its link-group list (netlink) until the LG is gone,
#      and checks it lived at least the kernel's delay (it was the kernel's timer, not
#      anything smcr did). The second connection must get a new link group.
#   b (10.0.0.2): smcr over verbs, the client (vm_xfer, BPF option program installed), its
#      own idle timer set far beyond the kernel's (SMCR_LG_FREE_MS, 30 min) so only the
#      kernel can end the LG. One connection, made and closed; then the process waits
#      (vm_xfer's wait: case) until smcr's log says the peer deleted the link group and LG 1
#      ended; then a second connection, which must be a new first contact (LG 2) carrying
#      data both ways (SHA-256). No warning or error line in smcr's log; b's capture of the
#      LLC (UDP 4791) shows the kernel's DELETE LINK "all", orderly, as the first one.
set -u
role=$1
B=$SMCR_BLD
UEID=SMCR-VM-KIDLE
# the kernel's delay (server side) and how long the scenario waits for it at most
KDELAY=600
WAIT_MAX=780
fail=0
check() { # what, then the command
	local what=$1
	shift
	echo "== $what"
	if "$@"; then echo "== $what: ok"; else echo "== $what: FAILED"; fail=1; fi
}
has() { # pattern file
	grep -qE "$1" "$2" || { echo "no line matching '$1' in $2"; return 1; }
}
want() { # N pattern file
	local n
	n=$(grep -cE "$2" "$3" 2>/dev/null)
	[ "$n" = "$1" ] || { echo "expected $1 lines matching '$2' in $3, found $n"; return 1; }
}
until_line() { # pattern file seconds: wait until the file has the line
	local i
	for i in $(seq $(($3 * 2))); do
		grep -qE "$1" "$2" 2>/dev/null && return 0
		sleep 0.5
	done
	echo "no line matching '$1' in $2 after $3 s"
	return 1
}
if [ "$role" = a ]; then
	modprobe smc && modprobe smc_diag || exit 98
	K=$B/tests/vm/vm_kxfer
	# the kernel's SMC knobs (none sets the idle link-group delay)
	for f in /proc/sys/net/smc/*; do echo "sysctl ${f#/proc/sys/}=$(cat "$f" 2>/dev/null)"; done
	check "kernel: add UEID $UEID" "$K" ueid add $UEID
	"$K" server 5000 2 >/tmp/k.out 2>&1 &
	srv=$!
	check "kernel server: the first connection ended" until_line "^server conn=0 (ok|FAILED)" /tmp/k.out 300
	t0=$SECONDS
	"$K" lgr >/tmp/lgr0.out 2>&1
	cat /tmp/lgr0.out
	check "kernel: its link group lives on after the connection closed" has "^klgr .*role=server" /tmp/lgr0.out
	gone=
	while [ $((SECONDS - t0)) -lt $WAIT_MAX ]; do
		sleep 5
		"$K" lgr >/tmp/lgr.now 2>&1
		grep -q "^klgr" /tmp/lgr.now || { gone=$((SECONDS - t0)); break; }
	done
	echo "== kernel: link group gone after ${gone:-(not gone)} s without connections"
	check "kernel: its idle timer freed the link group (after >= $((KDELAY - 10)) s)" \
		test -n "$gone" -a "${gone:-0}" -ge $((KDELAY - 10))
	wait $srv
	echo "== kernel server exit: $?"
	cat /tmp/k.out
	check "kernel server: 2 connections SMC-R" want 2 "^kernel server conn=[01] mode=smcr " /tmp/k.out
	check "kernel server: both connections' data and end right" want 2 "^server conn=[01] ok" /tmp/k.out
	# the link group of each connection: the klgr line printed right after its report
	awk '/^kernel server conn=/ {c=$3} /^klgr/ && c != "" {match($0, / id=[0-9]+/); print c, substr($0, RSTART + 4, RLENGTH - 4); c=""}' \
		/tmp/k.out >/tmp/ids.txt
	cat /tmp/ids.txt
	check "kernel: the second connection has a new link group" \
		awk '{id[$1]=$2} END {exit !(id["conn=0"] != "" && id["conn=1"] != "" && id["conn=0"] != id["conn=1"])}' /tmp/ids.txt
	dmesg | grep -i smc | tail -20
else
	tcpdump -i eth0 -s 256 -U -w "$SMCR_OUT/b.pcap" udp port 4791 >/tmp/tcpdump.log 2>&1 &
	tdump=$!
	sleep 1
	mkdir -p /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup
	check "smcr-bpf install" "$B/tools/smcr-bpf/smcr-bpf" install
	export SMCR_DEVICES=verbs SMCR_UEID=$UEID SMCR_LOG=${SMCR_LOG:-info}
	rm -f /tmp/go
	SMCR_LG_FREE_MS=1800000 VM_XFER_GO=/tmp/go "$B/tests/vm/vm_xfer" client 10.0.0.1 5000 \
		half:65536:100000 wait:$((WAIT_MAX + 60)) half:200000:131072 >/tmp/x.out 2>&1 &
	x=$!
	check "smcr client: the first connection ended" until_line "^client conn=0 (ok|FAILED)" /tmp/x.out 300
	check "smcr: the kernel deleted the link group (DELETE LINK all) and LG 1 ended" \
		until_line "LG 1 terminated" /tmp/x.out $((WAIT_MAX + 30))
	touch /tmp/go
	wait $x
	echo "== smcr client exit: $?"
	cat /tmp/x.out
	check "smcr client: 2 connections SMC-R v2" want 2 "^smcr client conn=[01] mode=smcr ver=2 " /tmp/x.out
	check "smcr client: the second is a new first contact (LG 2)" \
		has "^smcr client conn=1 mode=smcr ver=2 first_contact=1 lgr=2 " /tmp/x.out
	check "smcr client: both connections' data and end right" want 2 "^client conn=[01] ok" /tmp/x.out
	check "smcr: it was the peer that ended LG 1" has "LG 1: peer deleted the link group" /tmp/x.out
	check "smcr: no warning or error in its log" want 0 '^smcr\[[0-9]+\] (warn|error) ' /tmp/x.out
	sleep 2
	kill $tdump 2>/dev/null
	wait $tdump 2>/dev/null
	"$B/tools/smcr-decode/smcr-decode" -r "$SMCR_OUT/b.pcap" 2>/dev/null |
		awk '/^[a-z]/{k=$1} /^  src:/{s=$2} /^  response:/{r=$2} /^  all:/{a=$2} /^  orderly:/{o=$2}
		     /^  reason_name:/{n=$2} /^$/{ if (k ~ /delete_link/) print k, s, r, a, o, n; k=""; a=o=n="" }' \
		>/tmp/del.txt
	cat /tmp/del.txt
	check "capture: the first DELETE LINK is the kernel's, all and orderly" \
		awk 'NR == 1 {exit !($2 ~ /^10\.0\.0\.1:/ && $4 == "true" && $5 == "true")} END {if (!NR) exit 1}' /tmp/del.txt
fi
echo "== scenario $role: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
