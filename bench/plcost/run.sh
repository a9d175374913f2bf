#!/bin/sh
# run.sh BUILD_DIR [ROUNDS]: smcr-plcost plain and under smcr-run, in turns, ROUNDS each
# (default 3); prints every line, then per figure the median of the rounds, plain and under
# smcr-run, and the difference. Under smcr-run the TCP pair stays TCP (SMCR_RULES: use tcp),
# so its calls are those of an smcr socket in TCP mode. The load (uptime) goes beside the
# figures: a shared machine moves them (the "best" columns much less than the means).
B=${1:-build}; R=${2:-3}
P=$B/bench/plcost/smcr-plcost; RUN=$B/tools/smcr-run/smcr-run
uptime
for i in $(seq 1 "$R"); do
	"$P" plain
	SMCR_RULES='use tcp both * *' "$RUN" "$P" smcr-run
done | tee /tmp/plcost.$$
med() { awk -v l="$1" -v c="$2" '$1==l {print $c}' /tmp/plcost.$$ | sort -n |
	awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-22s %10s %10s %10s\n' "median of $R (ns/call)" plain smcr-run diff
for f in "pipe write+read mean:3" "pipe write+read best:4" "poll mean:6" "poll best:7" \
	"tcp write+read mean:9" "tcp write+read best:10"; do
	n=${f%:*}; c=${f##*:}
	a=$(med plain "$c"); b=$(med smcr-run "$c")
	printf '%-22s %10s %10s %10s\n' "$n" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.1f", b - a}')"
done
uptime
rm -f /tmp/plcost.$$
