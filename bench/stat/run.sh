#!/bin/bash
# pingpong 64 B and stream 64 KiB over SMC-R with and without smcr-stat asking both
# processes every 10 ms, interleaved, 3 runs each (docs/PERFORMANCE.md "smcr-stat and the
# data path"). bench/stat/run.sh [BUILD_DIR]
B=${1:-build}; perf=$B/tools/smcr-perf/smcr-perf st=$B/tools/smcr-stat/smcr-stat
export SMCR_CONFIG=/nonexistent SMCR_DEVICES=shm SMCR_LOG=error
uptime
port=$((30000 + RANDOM % 20000))
$perf server -p $port > /dev/null 2>&1 & S=$!
sleep 0.5
for t in "pingpong -s 64" "stream -s 64K"; do
 for i in 1 2 3; do
  for mode in off on; do
    $perf client 127.0.0.1 -p $port -t $t -d 3 --json > /tmp/smcr-statbench-$mode.json 2>/dev/null & C=$!
    q=0
    if [ $mode = on ]; then
      while kill -0 $C 2>/dev/null; do $st -a -p $S >/dev/null; $st --json -p $C > /dev/null; q=$((q+2)); sleep 0.01; done
    fi
    wait $C
    v=$(python3 -c "
import json,sys
d=json.load(open('/tmp/smcr-statbench-$mode.json'))
r=d
print(r['value'], r['unit'], r['mode'])" 2>/dev/null)
    echo "$t run $i stat=$mode queries=$q: $v"
  done
 done
done
kill $S; uptime
