#!/bin/bash
# scenario-fallback.sh a|b: guest b has no RDMA device (run-pair.sh with SMCR_VM_RXE_B=0):
# SMCR_DEVICES=verbs finds nothing there, so both ends fall back to TCP on the same
# connection, the data still arrives whole (SHA-256), and the reasons say why.
set -u
role=$1
B=$SMCR_BLD
export SMCR_DEVICES=verbs SMCR_RULES='use smc both * *' SMCR_LOG=${SMCR_LOG:-warn}
fail=0
echo "== rdma devices:"; rdma link show
if [ "$role" = a ]; then
	"$B/tests/vm/vm_sha" server 5000 >/tmp/sha.out 2>&1 || fail=1
else
	"$B/tests/vm/vm_sha" client 10.0.0.1 5000 2097152 >/tmp/sha.out 2>&1 || fail=1
fi
cat /tmp/sha.out
grep -q "mode=tcp " /tmp/sha.out || { echo "expected mode tcp"; fail=1; }
if [ "$role" = b ]; then
	# the client's own reason: no RDMA device in this process
	grep -q "local_reason=NOSMCRDEV\|local_reason=NODEV" /tmp/sha.out || { echo "expected a no-device reason"; fail=1; }
	# and the log says why verbs gave nothing
	grep -q "SMCR_DEVICES=verbs: libibverbs found no RDMA device" /tmp/sha.out || { echo "expected the reason in the log"; fail=1; }
fi
echo "== scenario $role: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
