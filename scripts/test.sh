#!/usr/bin/env bash
# test.sh: the whole test suite, from a fresh Debian 12 machine (README's second command).
#   1. installs missing packages (scripts/deps.sh test)
#   2. plain build (-O2, -Werror) and every CTest test
#   3. ASan+UBSan build and every CTest test again
#   4. TSan build and the tests labelled "threads"
#   5. clang libFuzzer build and each fuzz target for a few seconds
# Ends with one line "tests: N passed, N failed" over all stages; exit status 0 only if
# every stage passed. SMCR_STAGES="plain asan tsan fuzz" picks stages.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bash scripts/deps.sh test || { echo "tests: 0 passed, 1 failed"; exit 1; }

jobs=$(nproc 2>/dev/null || echo 2)
stages=${SMCR_STAGES:-plain asan tsan fuzz}
passed=0 failed=0 status=0

run_stage() { # name cmake-args... -- ctest-args...
  local name=$1; shift
  local cargs=() targs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do cargs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  targs=("$@")
  local bdir="$root/build/test-$name"
  echo "=== stage $name: configure and build ($bdir)"
  mkdir -p "$bdir"
  if ! cmake -S "$root" -B "$bdir" "${cargs[@]}" >"$bdir.configure.log" 2>&1; then
    cat "$bdir.configure.log"; echo "stage $name: configure FAILED"; failed=$((failed+1)); status=1; return
  fi
  if ! cmake --build "$bdir" -j"$jobs" >"$bdir.build.log" 2>&1; then
    grep -E -B2 -A8 "error|Error" "$bdir.build.log" | head -80
    echo "stage $name: build FAILED"; failed=$((failed+1)); status=1; return
  fi
  echo "=== stage $name: ctest ${targs[*]}"
  local out="$bdir.ctest.log"
  ctest --test-dir "$bdir" --output-on-failure -j"$jobs" "${targs[@]}" 2>&1 | tee "$out"
  local rc=${PIPESTATUS[0]}
  local line total nfail
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$out" | tail -1)
  if [ -n "$line" ]; then
    total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
    nfail=$(sed -E 's/.*passed, ([0-9]+) tests failed.*/\1/' <<<"$line")
    passed=$((passed + total - nfail)); failed=$((failed + nfail))
  elif grep -q "No tests were found" "$out"; then
    echo "stage $name: no tests matched"
  else
    failed=$((failed+1))
  fi
  [ "$rc" -eq 0 ] || status=1
}

for s in $stages; do
  case $s in
    plain) run_stage plain -DCMAKE_BUILD_TYPE=RelWithDebInfo -- ;;
    # SMCR_TEST_QUICK: long transfers (the 1 GiB one) run in the plain stage only.
    # The real programs (label apps) run in the plain stage only: the sanitized interposer is
    # the preload tests' job there, and redis, nginx, python... under an ASan runtime report
    # their own leaks at exit and take minutes each on two cores.
    asan)  SMCR_TEST_QUICK=1 run_stage asan -DCMAKE_BUILD_TYPE=Debug -DSMCR_ASAN=ON -- -LE apps ;;
    tsan)  SMCR_TEST_QUICK=1 run_stage tsan -DCMAKE_BUILD_TYPE=Debug -DSMCR_TSAN=ON -- -L threads ;;
    fuzz)  CC=clang run_stage fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DSMCR_FUZZ=ON -- -L fuzz ;;
    *) echo "unknown stage $s"; status=1 ;;
  esac
done
echo "tests: $passed passed, $failed failed"
exit $status
