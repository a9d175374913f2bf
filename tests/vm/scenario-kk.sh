#!/bin/bash
# scenario-kk.sh a|b: the Linux kernel's SMC-R on both guests (vm_kxfer on a and b, the
# same UEID): the reference that smcr's interoperability results are read against
# (run-pair.sh kk; docs/PROTOCOL.md "Interoperability with Linux"). Not a CTest: run by
# hand when a kernel-peer result needs telling apart from a kernel-kernel one.
set -u
role=$1
B=$SMCR_BLD
K=$B/tests/vm/vm_kxfer
modprobe smc && modprobe smc_diag || exit 98
"$K" ueid add SMCR-VM-KERNEL || exit 98
CASES=${VM_KK_CASES:-"half:262144:131072 urg:30000:30000 abort:65536:65536"}
if [ "$role" = a ]; then
	"$K" server 5000 $(echo $CASES | wc -w)
else
	"$K" client 10.0.0.1 5000 $CASES
fi
