#!/bin/bash
# two-paths.sh: smcr-perf through the socket layer between two network namespaces joined by
# two veth pairs (emu devices), one path against two, and TCP on one veth, side by side in
# one run: each round runs `smcr-perf client -t conns -n N --cpu` with SMCR_DEVICES naming
# one veth's emu device at each end, then both, then plain TCP over the first veth
# (docs/PERFORMANCE.md "Two links and failover"). Each line: throughput, CPU seconds of both
# ends per GB (user+sys, every thread: the emu devices' too) and the cores that makes
# (CPU s/GB x GB/s: what the run took of the host's cores); with THREADS=1 also each
# thread's share of a core, on stderr. Root and iproute2.
#   bench/failover/two-paths.sh BUILD_DIR [ROUNDS] [CONNS] [SECONDS]
set -u
B=${1:?usage: two-paths.sh BUILD_DIR [ROUNDS] [CONNS] [SECONDS]}
R=${2:-3}; N=${3:-8}; D=${4:-3}
PERF=$B/tools/smcr-perf/smcr-perf
A=smcr-tp-a-$$; Z=smcr-tp-b-$$
cleanup() { kill $(jobs -p) 2>/dev/null; ip netns del $A 2>/dev/null; ip netns del $Z 2>/dev/null; }
trap cleanup EXIT
ip netns add $A && ip netns add $Z || exit 77
for i in 0 1; do
  ip link add tpA$i netns $A type veth peer name tpB$i netns $Z || exit 77
  ip -n $A addr add 10.9$((i + 2)).0.1/24 dev tpA$i; ip -n $Z addr add 10.9$((i + 2)).0.2/24 dev tpB$i
  ip -n $A link set tpA$i up; ip -n $Z link set tpB$i up
done
ip -n $A link set lo up; ip -n $Z link set lo up
sleep 2  # the emu ports follow the carrier: active a moment after "up"
# ticks (user+sys) of each thread of the pids: "pid/tid comm ticks" lines
ticks() { for p in "$@"; do for t in /proc/$p/task/*; do
  [ -r $t/stat ] && echo "$p/${t##*/} $(cut -d' ' -f2 $t/stat) $(cut -d')' -f2 $t/stat | awk '{ print $12 + $13 }')"
done; done; }
# With THREADS=1: each thread's share of a core over the middle of the run (one second in
# to one second before the end), on stderr: which thread is the bottleneck.
threads() { # label server-pid client-pid
  local hz; hz=$(getconf CLK_TCK)
  sleep 1; ticks $2 $3 >/tmp/tp-$$.a; local t0; t0=$(date +%s.%N)
  sleep $(awk -v d=$D 'BEGIN { print (d > 2.5 ? d - 2 : 0.5) }')
  ticks $2 $3 >/tmp/tp-$$.b; local t1; t1=$(date +%s.%N)
  awk -v hz=$hz -v dt=$(awk -v a=$t0 -v b=$t1 'BEGIN { print b - a }') -v label="$1" -v srv=$2 -v cli=$3 '
    NR == FNR { a[$1] = $3; next }
    { split($1, id, "/"); c = ($3 - a[$1]) / hz / dt * 100; tot[id[1]] += c
      s = s sprintf(" %s:%s=%.0f%%", id[1] == srv ? "srv" : "cli", $2, c) }
    END { printf "#   %s threads:%s (server %.0f%%, client %.0f%%)\n", label, s, tot[srv], tot[cli] }' \
    /tmp/tp-$$.a /tmp/tp-$$.b >&2
  rm -f /tmp/tp-$$.a /tmp/tp-$$.b
}
run() { # devices-of-client devices-of-server port transport: "Gbit/s cpu_s/GB cores mode"
  ip netns exec $Z env SMCR_DEVICES="$2" $PERF server -p $3 --once --transport $4 >/dev/null 2>&1 &
  local spid=$!
  sleep 0.5
  ip netns exec $A env SMCR_DEVICES="$1" $PERF client 10.92.0.2 -p $3 -t conns -n $N -d $D \
    --transport $4 --dat --cpu 2>/dev/null >/tmp/tp-$$.out &
  local cpid=$!
  [ "${THREADS:-0}" = 1 ] && threads "$4 ${1:-tcp}" $spid $cpid
  wait $cpid
  awk '!/^#/ && NF { printf "%s %s %.2f %s\n", $5, $9, $5 / 8 * $9, $4; exit }' /tmp/tp-$$.out
  rm -f /tmp/tp-$$.out
  wait
}
echo "# smcr-perf -t conns -n $N -d $D --cpu over emu: one path (tpA0/tpB0) vs two (both veths), TCP on tpA0; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# round kind Gbit/s cpu_s/GB cores mode"
p=6000
for r in $(seq 1 $R); do
  one=$(run "emu:if=tpA0" "emu:if=tpB0" $p smcr); p=$((p + 1))
  two=$(run "emu:if=tpA0 emu:if=tpA1" "emu:if=tpB0 emu:if=tpB1" $p smcr); p=$((p + 1))
  tcp=$(run "" "" $p tcp); p=$((p + 1))
  echo "$r one $one"
  echo "$r two $two"
  echo "$r tcp $tcp"
  echo "$r two/one $(awk -v a="$one" -v b="$two" 'BEGIN { split(a, x); split(b, y); printf "%.2f", y[1] / x[1] }')"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
