#!/bin/bash
# scenario-panic.sh a|b: the harness's own test (vm_infra): guest a's kernel dies on
# purpose (sysrq crash) while b waits; run-pair.sh must say INFRA FAILURE with a's console,
# kill b, and exit 2, never a test failure.
set -u
if [ "$1" = a ]; then
	sleep 2
	echo c >/proc/sysrq-trigger
fi
sleep 600
