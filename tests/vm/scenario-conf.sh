#!/bin/bash
# scenario-conf.sh a|b: only the provider's tests, on guest a's rxe0 (b idles): the
# conformance suite and the CQ-growth test. For working on the provider: run-pair.sh conf.
set -u
[ "$1" = a ] || exit 0
rdma link show
rc=0
"$SMCR_BLD/tests/conformance/conformance" verbs || rc=1
"$SMCR_BLD/tests/conformance/test_verbs_cq_grow" || rc=1
exit $rc
