#!/bin/bash
# scenario-conf.sh a|b: only the provider conformance suite, on guest a's rxe0 (b idles).
# For working on the provider: run-pair.sh conf.
set -u
[ "$1" = a ] || exit 0
rdma link show
exec "$SMCR_BLD/tests/conformance/conformance" verbs
