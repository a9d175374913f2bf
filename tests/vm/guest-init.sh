#!/bin/bash
# guest-init.sh: the second stage of a test guest (PID 1 after the initramfs switched to the
# read-only 9p root, tests/vm/build-guest.sh). Reads its part from the kernel command line
# (smcr.role, smcr.ip, smcr.rxe, smcr.scenario), mounts the build tree (9p "bld", read-only)
# at /tmp/bld, brings up eth0 and, with smcr.rxe=1, Soft-RoCE on it (rxe0), runs
# tests/vm/scenario-<name>.sh <role>, writes its log and exit code to the results share
# (/smcr/out/<role>.log, <role>.rc), prints the end marker the host watches for and powers
# off. Anything unexpected still ends with the marker (rc 99), so the host never waits for
# a guest that is alive but lost.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mkdir -p /dev/shm /dev/pts && mount -t tmpfs shm /dev/shm
VM_role=x VM_ip= VM_rxe=0 VM_nics=1 VM_ip2= VM_scenario=none
for w in $(cat /proc/cmdline); do
	case $w in
	smcr.*=*) k=${w%%=*}; k=${k#smcr.}; printf -v "VM_$k" '%s' "${w#*=}" ;;
	esac
done
end() {
	echo "$1" >/smcr/out/$VM_role.rc
	sync
	echo "SMCR-VM-END role=$VM_role rc=$1"
	echo o >/proc/sysrq-trigger
	sleep 10
	exit 0
}
# the host name is the one SMC-R v2's first-contact extension carries (the peer's smc
# netlink shows it): smcr-vm-a, smcr-vm-b
echo "smcr-vm-$VM_role" >/proc/sys/kernel/hostname
mkdir -p /tmp/bld
mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=512000 bld /tmp/bld || end 99
modprobe virtio_net
ip link set lo up
ip addr add "$VM_ip/24" dev eth0 && ip link set eth0 up || end 99
# smcr.nics=2: eth1 on the second netdev with smcr.ip2 (a /24), and rxe1 on it
if [ "$VM_nics" = 2 ]; then
	ip addr add "$VM_ip2/24" dev eth1 && ip link set eth1 up || end 99
fi
if [ "$VM_rxe" = 1 ]; then
	modprobe rdma_rxe && modprobe ib_uverbs && rdma link add rxe0 type rxe netdev eth0 || end 98
	if [ "$VM_nics" = 2 ]; then rdma link add rxe1 type rxe netdev eth1 || end 98; fi
fi
# wait for eth0's carrier and the IPv6 link-local address (the rxe GID table follows it)
for d in eth0 $([ "$VM_nics" = 2 ] && echo eth1); do
	for _ in $(seq 50); do ip -6 addr show dev $d | grep -q 'fe80.*scope link' && ! ip -6 addr show dev $d | grep -q tentative && break; sleep 0.2; done
done
echo "SMCR-VM-START role=$VM_role ip=$VM_ip rxe=$VM_rxe scenario=$VM_scenario"
export VM_role VM_ip VM_rxe VM_nics
export SMCR_SRC=/smcr/src SMCR_BLD=/tmp/bld SMCR_OUT=/smcr/out
export LD_LIBRARY_PATH=$(find /tmp/bld -name '*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' :)
cd /tmp
timeout 900 bash /smcr/src/tests/vm/scenario-$VM_scenario.sh "$VM_role" >/smcr/out/$VM_role.log 2>&1
rc=$?
tail -5 /smcr/out/$VM_role.log
end $rc
