#!/bin/bash
# scenario-conf.sh a|b: only the provider's tests: on guest a's rxe0 the conformance suite
# and the CQ-growth test, then the suite's two-host mode with its near end on a and its far
# end on b (b takes its eth0 down and up for the port-events test, as in scenario-smcr.sh).
# For working on the provider: run-pair.sh conf.
set -u
rdma link show
rc=0
if [ "$1" = a ]; then
	"$SMCR_BLD/tests/conformance/conformance" verbs || rc=1
	"$SMCR_BLD/tests/conformance/test_verbs_cq_grow" || rc=1
	"$SMCR_BLD/tests/conformance/conformance" verbs --remote 10.0.0.2 5400 || rc=1
else
	SMCR_CONF_PORT_DOWN='ip link set eth0 down' SMCR_CONF_PORT_UP='ip link set eth0 up' \
		timeout 600 "$SMCR_BLD/tests/conformance/conformance" verbs --serve 5400 || rc=1
fi
exit $rc
