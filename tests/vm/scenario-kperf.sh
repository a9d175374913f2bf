#!/bin/bash
# scenario-kperf.sh a|b: figures between the same two guests, in turns (run-pair.sh kperf;
# docs/PERFORMANCE.md "verbs over Soft-RoCE in two emulated guests"): TCP, the kernel's SMC-R v2, smcr to
# smcr over verbs (v2, same UEID), smcr client to the kernel's server. a serves, b is the
# client. Per transport and round: a 4 MiB stream (client to server, time from connect to
# the server's close) and 50 ping-pongs of 64 bytes (vm_xfer.c cases half and pp, data
# checked as always). Not a CTest (TCG figures take minutes and say little alone); the
# table goes to b's log and results share (perf.txt).
set -u
role=$1
B=$SMCR_BLD
UEID=SMCR-VM-KERNEL
ROUNDS=${VM_PERF_ROUNDS:-2}
CASES="half:4194304:0 pp:50:64"
modprobe smc && modprobe smc_diag || exit 98
"$B/tests/vm/vm_kxfer" ueid add $UEID || exit 98
mkdir -p /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup
"$B/tools/smcr-bpf/smcr-bpf" install || exit 98
export SMCR_DEVICES=verbs SMCR_UEID=$UEID SMCR_LOG=warn
run() { # transport role port
	local t=$1 r=$2 p=$3 prog env=()
	case $t in
	tcp) prog=$B/tests/vm/vm_kxfer; env=(VM_XFER_TCP=1) ;;
	kernel) prog=$B/tests/vm/vm_kxfer ;;
	smcr) prog=$B/tests/vm/vm_xfer ;;
	mixed) if [ "$r" = a ]; then prog=$B/tests/vm/vm_kxfer; else prog=$B/tests/vm/vm_xfer; fi ;;
	esac
	if [ "$r" = a ]; then
		env "${env[@]}" "$prog" server "$p" 2
	else
		env "${env[@]}" "$prog" client 10.0.0.1 "$p" $CASES
	fi
}
port=5400
fail=0
: >/tmp/perf.txt
for round in $(seq "$ROUNDS"); do
	for t in tcp kernel smcr mixed; do
		port=$((port + 1))
		run $t "$role" $port >/tmp/run.out 2>&1 || fail=1
		grep -E "FAILED|mode=" /tmp/run.out | grep -v "^klgr\|^klink" | head -4
		if [ "$role" = b ]; then
			s=$(sed -n 's/^client conn=0 ok elapsed_us=\([0-9]*\).*/\1/p' /tmp/run.out)
			pp=$(sed -n 's/^client conn=1 ok elapsed_us=[0-9]* rtt_us=\([0-9]*\).*/\1/p' /tmp/run.out)
			mode=$(grep -oE "^(smcr|kernel) client conn=0 mode=[a-z]+" /tmp/run.out | grep -oE "mode=[a-z]+")
			echo "round=$round transport=$t ${mode:-mode=tcp} stream_4MiB_us=${s:-?} pingpong_64B_rtt_us=${pp:-?}" | tee -a /tmp/perf.txt
		fi
	done
done
if [ "$role" = b ]; then
	cp /tmp/perf.txt "$SMCR_OUT/perf.txt"
	cat /tmp/perf.txt
fi
exit $fail
