#!/bin/bash
# scenario-k2link.sh a|b: the Linux kernel's SMC-R on both guests with two NICs and two
# Soft-RoCE devices each (SMCR_VM_NICS=2 run-pair.sh k2link): how Linux 6.12 builds the
# second link of a link group at first contact (ADD LINK v2 and what follows), captured on
# both NICs for reading against smcr's ADD LINK (docs/PROTOCOL.md). Not a CTest: by hand.
set -u
role=$1
B=$SMCR_BLD
K=$B/tests/vm/vm_kxfer
modprobe smc && modprobe smc_diag || exit 98
"$K" ueid add SMCR-VM-KERNEL || exit 98
rdma link show
for d in eth0 eth1; do
	tcpdump -i $d -s 512 -U -w "$SMCR_OUT/$role-$d.pcap" udp port 4791 >/dev/null 2>&1 &
done
sleep 1
CASES="half:262144:262144 half:131072:131072"
if [ "$role" = a ]; then
	"$K" server 5000 2
	rc=$?
else
	VM_XFER_IDLE_S=3 "$K" client 10.0.0.1 5000 $CASES
	rc=$?
fi
"$K" lgr
sleep 3
kill %1 %2 2>/dev/null
wait
for d in eth0 eth1; do
	echo "== LLC on $d ($role's capture)"
	"$B/tools/smcr-decode/smcr-decode" -r "$SMCR_OUT/$role-$d.pcap" 2>/dev/null |
		awk '/^[a-z]/{k=$1} /^  src:/{s=$2} /^  response:/{r=$2} /^$/{ if (k ~ /^llc/) print k, s, r; k="" }'
done
dmesg | grep -i "smc" | tail -20
exit $rc
