#!/usr/bin/env bash
# check-infra.sh [BUILD_DIR]: runs run-pair.sh on the panic scenario (one attempt) and
# passes when it reports an infrastructure failure (exit 2, "INFRA FAILURE", the dead
# guest's "Kernel panic" in the printed console) within a minute or two, not a test failure.
here=$(cd "$(dirname "$0")" && pwd)
out=$(SMCR_VM_RETRY=0 SMCR_VM_TIMEOUT=300 bash "$here/run-pair.sh" panic "$@" 2>&1)
rc=$?
echo "$out" | head -80
[ $rc -eq 77 ] && exit 77
if [ $rc -eq 2 ] && grep -q "INFRA FAILURE: guest a's kernel died" <<<"$out" &&
	grep -q "Kernel panic" <<<"$out"; then
	echo "check-infra: ok (exit 2, infrastructure failure reported with the console)"
	exit 0
fi
echo "check-infra: FAILED (exit $rc)"
exit 1
