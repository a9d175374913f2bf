#!/usr/bin/env bash
# run-fuzzer.sh FUZZER SEED_DIR WORK_DIR SECONDS: one time-boxed libFuzzer run from a copy
# of the seed corpus. Fails if the fuzzer finds a crash, leak or sanitizer report.
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 secs=$4
rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
if [ -d "$seeds" ]; then cp -r "$seeds"/. "$work/corpus/"; fi
exec "$fuzzer" -max_total_time="$secs" -print_final_stats=1 -rss_limit_mb=2048 \
  -artifact_prefix="$work/artifacts/" "$work/corpus"
