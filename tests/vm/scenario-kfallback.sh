#!/bin/bash
# scenario-kfallback.sh a|b: smcr and the Linux kernel's SMC fall back to TCP together, each
# with the reason it should give (run-pair.sh kfallback; docs/PROTOCOL.md
# "Interoperability with Linux"). a (10.0.0.1) is the kernel (vm_kxfer, UEID
# SMCR-VM-KERNEL), b (10.0.0.2) smcr over verbs (vm_xfer). One connection per step, each on
# its own port, data both ways SHA-256 checked on the TCP connection:
#   1/2 UEID mismatch (smcr's SMCR_UEID differs), smcr client / kernel client
#   3   the kernel side sends no SMC option: a plain TCP server (AF_INET) to smcr's client
#   4/5 smcr without its BPF program (smcr-bpf uninstall): its SYN / SYN-ACK carry no
#       option; kernel server / kernel client
#   6/7 smcr without an RDMA device (rdma link delete rxe0 on b): smcr client / server
# Reasons: smcr's from the SOL_SMCR query (local_reason, peer_reason), the kernel's from
# smc_diag (reason, peer_reason) and its fallback counters (SMC_GEN_NETLINK).
set -u
role=$1
B=$SMCR_BLD
UEID=SMCR-VM-KERNEL
C=half:40000:30000
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
step() { # n: the step's output file, shown
	cat "/tmp/s$1.out"
}
if [ "$role" = a ]; then
	modprobe smc && modprobe smc_diag || exit 98
	K=$B/tests/vm/vm_kxfer
	check "kernel: add UEID $UEID" "$K" ueid add $UEID
	"$K" server 5201 1 >/tmp/s1.out 2>&1; step 1
	check "1 kernel server, UEID mismatch: TCP, it declined NOSMCDEV (no EID for v2, no RoCE v1 GID for v1)" \
		has "^kernel server conn=0 mode=tcp .*reason=0x03030000 peer_reason=0x00000000" /tmp/s1.out
	"$K" client 10.0.0.2 5202 $C >/tmp/s2.out 2>&1; step 2
	check "2 kernel client, UEID mismatch: TCP, smcr declined (peer NOSMCDEV)" \
		has "^kernel client conn=0 mode=tcp .*reason=0x05000000 peer_reason=0x03030000" /tmp/s2.out
	VM_XFER_TCP=1 "$K" server 5203 1 >/tmp/s3.out 2>&1; step 3
	check "3 plain TCP server: data right" has "^server conn=0 ok" /tmp/s3.out
	"$K" server 5204 1 >/tmp/s4.out 2>&1; step 4
	check "4 kernel server, smcr without option: TCP, PEERNOSMC" \
		has "^kernel server conn=0 mode=tcp .*reason=0x03010000 peer_reason=0x00000000" /tmp/s4.out
	"$K" client 10.0.0.2 5205 $C >/tmp/s5.out 2>&1; step 5
	check "5 kernel client, smcr without option: TCP, PEERNOSMC" \
		has "^kernel client conn=0 mode=tcp .*reason=0x03010000 peer_reason=0x00000000" /tmp/s5.out
	"$K" server 5206 1 >/tmp/s6.out 2>&1; step 6
	check "6 kernel server, smcr without device: TCP, smcr declined NOSMCRDEV" \
		has "^kernel server conn=0 mode=tcp .*reason=0x05000000 peer_reason=0x03030002" /tmp/s6.out
	"$K" client 10.0.0.2 5207 $C >/tmp/s7.out 2>&1; step 7
	check "7 kernel client, smcr without device: TCP, smcr declined NOSMCRDEV" \
		has "^kernel client conn=0 mode=tcp .*reason=0x05000000 peer_reason=0x03030002" /tmp/s7.out
	for i in 1 2 4 5 6 7; do
		check "$i: data right on the kernel side" has "^(server|client) conn=0 ok" /tmp/s$i.out
	done
	"$K" stats | tee /tmp/stats.out
	check "kernel counters: no SMC-R success, the fallbacks counted by reason" \
		grep -qE "clnt_v1_succ=0 clnt_v2_succ=0 srv_v1_succ=0 srv_v2_succ=0" /tmp/stats.out
else
	mkdir -p /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup
	check "smcr-bpf install" "$B/tools/smcr-bpf/smcr-bpf" install
	export SMCR_DEVICES=verbs SMCR_UEID=SMCR-VM-OTHER SMCR_LOG=${SMCR_LOG:-info}
	X=$B/tests/vm/vm_xfer
	"$X" client 10.0.0.1 5201 $C >/tmp/s1.out 2>&1; step 1
	check "1 smcr client, UEID mismatch: TCP, the kernel declined" \
		has "^smcr client conn=0 mode=tcp .*local_reason=0x05000000\(PEERDECL\) peer_reason=0x03030000\(NOSMCDEV\)" /tmp/s1.out
	"$X" server 5202 1 >/tmp/s2.out 2>&1; step 2
	check "2 smcr server, UEID mismatch: TCP, it declined NOSMCDEV" \
		has "^smcr server conn=0 mode=tcp .*local_reason=0x03030000\(NOSMCDEV\) peer_reason=0x00000000" /tmp/s2.out
	export SMCR_UEID=$UEID
	"$X" client 10.0.0.1 5203 $C >/tmp/s3.out 2>&1; step 3
	check "3 smcr client to a plain TCP server: TCP, the peer did not offer SMC" \
		has "^smcr client conn=0 mode=tcp .*local_reason=0x0f02[0-9a-f]{4}\(BPF_PEER_NO\)" /tmp/s3.out
	"$B/tools/smcr-bpf/smcr-bpf" uninstall
	"$X" client 10.0.0.1 5204 $C >/tmp/s4.out 2>&1; step 4
	check "4 smcr client without BPF: TCP, not installed" \
		has "^smcr client conn=0 mode=tcp .*\(BPF_NOT_INSTALLED\)" /tmp/s4.out
	"$X" server 5205 1 >/tmp/s5.out 2>&1; step 5
	check "5 smcr server without BPF: TCP, not installed" \
		has "^smcr server conn=0 mode=tcp .*\(BPF_NOT_INSTALLED\)" /tmp/s5.out
	"$B/tools/smcr-bpf/smcr-bpf" install
	rdma link delete rxe0
	rdma link show
	"$X" client 10.0.0.1 5206 $C >/tmp/s6.out 2>&1; step 6
	check "6 smcr client without device: TCP, no device" \
		has "^smcr client conn=0 mode=tcp .*local_reason=0x03030002\(NOSMCRDEV\)" /tmp/s6.out
	"$X" server 5207 1 >/tmp/s7.out 2>&1; step 7
	check "7 smcr server without device: TCP, no device" \
		has "^smcr server conn=0 mode=tcp .*local_reason=0x03030002\(NOSMCRDEV\)" /tmp/s7.out
	for i in 1 2 3 4 5 6 7; do
		check "$i: data right on the smcr side" has "^(server|client) conn=0 ok" /tmp/s$i.out
	done
fi
echo "== scenario $role: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
