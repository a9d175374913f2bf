#!/usr/bin/env bash
# connect-cost.sh [BUILD_DIR] [COUNT] [ROUNDS]: connection setup cost with the smcr BPF
# programs (a benchmark, not a test; docs/parts/bpf.md "Measured costs"). Root.
# Makes its own cgroup (in: covered, out: not), bpffs mount and network namespaces, installs
# smcr-bpf on the "in" cgroup, runs smcr-bench-connect five ways (plain sockets x3, smcr API x2), removes everything.
set -euo pipefail
build=${1:-build/dev}
count=${2:-5000}
rounds=${3:-5}
tool=$build/tools/smcr-bpf/smcr-bpf
bench=$build/bench/bpf/smcr-bench-connect
[ "$(id -u)" -eq 0 ] || { echo "connect-cost.sh: needs root" >&2; exit 1; }
[ -x "$tool" ] && [ -x "$bench" ] || { echo "build $tool and $bench first" >&2; exit 1; }
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$cg2" ] || { echo "no cgroup v2 hierarchy" >&2; exit 1; }
cg=$cg2/smcr-bench-$$
mnt=$(mktemp -d /tmp/smcr-bench-XXXXXX)
cleanup() {
  "$tool" uninstall --pin-dir "$mnt/smcr" >/dev/null 2>&1 || true
  umount "$mnt" 2>/dev/null || true
  rmdir "$mnt" 2>/dev/null || true
  for d in "$cg/in" "$cg/out" "$cg"; do rmdir "$d" 2>/dev/null || true; done
}
trap cleanup EXIT
mkdir -p "$cg/in" "$cg/out"
mount -t bpf bpf "$mnt"
"$tool" install --cgroup "$cg/in" --pin-dir "$mnt/smcr" >/dev/null

run() { # cgroup args...: one measurement in a fresh network namespace
  local where=$1; shift
  sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec unshare -n sh -c "ip link set lo up; exec \"\$@\"" sh "$@"' \
    sh "$where" "$bench" --count "$count" --rounds "$rounds" "$@"
}
printf "%-42s %12s %10s %s\n" "connect+accept+close on loopback" "median us" "min us" "SMC"
read -r med min smc < <(run "$cg/out")
printf "%-42s %12s %10s %s\n" "no program (cgroup not covered)" "$med" "$min" "-"
read -r med min smc < <(run "$cg/in")
printf "%-42s %12s %10s %s\n" "programs attached, not opted in" "$med" "$min" "-"
read -r med min smc < <(run "$cg/in" --optin)
printf "%-42s %12s %10s %s\n" "both ends opted in (+ 2 result reads)" "$med" "$min" "$smc/$((count * rounds))"
# The smcr API (no rules, SMCR_CONFIG pointing nowhere): TCP without the option, SMC-R
# (option exchange + CLC + link group reuse, shm device) with it.
export SMCR_CONFIG=/nonexistent/smcr.conf SMCR_DEVICES=${SMCR_DEVICES:-shm}
unset SMCR_RULES
read -r med min smc < <(run "$cg/out" --api)
printf "%-42s %12s %10s %s\n" "smcr API, not installed (TCP)" "$med" "$min" "$smc/$((count * rounds))"
read -r med min smc < <(run "$cg/in" --api)
printf "%-42s %12s %10s %s\n" "smcr API, installed (SMC-R)" "$med" "$min" "$smc/$((count * rounds))"
