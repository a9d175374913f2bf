#!/usr/bin/env bash
# report_smoke.sh PERF_BIN OUTDIR: bench/report still works end to end (a 2-size sweep of
# 0.1 s runs, no plot): its Markdown table has one row per test and size, each with both
# medians, the ratio, and the mode the engine reported (smcr when the binary has it).
set -euo pipefail
perf=$1 out=$2
root=${SMCR_SOURCE_DIR:?}
extra=()
mode=smcr
if ! "$perf" --version | grep -q 'smcr)'; then
	extra=(--smcr-transport tcp)
	mode=tcp
fi
rm -rf "$out"
SMCR_PERF=$perf bash "$root/bench/report" -s 64,1K -d 0.1 -o "$out" --no-plot "${extra[@]}" \
	>"$out.stdout"
md=$out/report.md
fail() { echo "report_smoke: $*" >&2; cat "$md" >&2; exit 1; }
[ "$(grep -c '^| stream throughput |' "$md")" -eq 2 ] || fail "want 2 stream rows"
[ "$(grep -c '^| pingpong round trip |' "$md")" -eq 2 ] || fail "want 2 pingpong rows"
for size in "64 B" "1 KiB"; do
	grep -q "^| stream throughput | $size | [0-9.]* Gbit/s | [0-9.]* Gbit/s | [0-9.]*x | $mode |" \
		"$md" || fail "stream $size row"
	grep -q "^| pingpong round trip | $size | [0-9.]* us (p99 [0-9.]*) | [0-9.]* us (p99 [0-9.]*) | [0-9.]*x | $mode |" \
		"$md" || fail "pingpong $size row"
done
# the dat files have one line per size after the header
[ "$(grep -vc '^#' "$out/stream.dat")" -eq 2 ] || fail "stream.dat lines"
echo "report_smoke: ok ($mode)"
