#!/bin/sh
# run.sh BUILD_DIR [ROUNDS]: smcr-plcost plain and under smcr-run, in turns, ROUNDS each
# (default 5); prints every line, then the medians and their ratio. The load (uptime) goes
# beside the figures: a shared machine moves them.
B=${1:-build}; R=${2:-5}
P=$B/bench/plcost/smcr-plcost; RUN=$B/tools/smcr-run/smcr-run
uptime
for i in $(seq 1 "$R"); do
	"$P" plain
	"$RUN" "$P" smcr-run
done | tee /tmp/plcost.$$ 
for l in plain smcr-run; do
	printf '%s median: write+read %s ns, poll %s ns\n' "$l" \
		"$(awk -v l=$l '$1==l {print $3}' /tmp/plcost.$$ | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" \
		"$(awk -v l=$l '$1==l {print $5}' /tmp/plcost.$$ | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
done
rm -f /tmp/plcost.$$
