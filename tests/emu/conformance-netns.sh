#!/bin/sh
# conformance-netns.sh CONFORMANCE: runs the provider conformance suite for "emu" across two
# network namespaces joined by a veth pair, made here and always removed (docs/parts/emu.md
# "Tests"). Each side of every test pair opens in the other namespace, so all traffic
# crosses the veth:
#   namespace a: veth smcrA<pid> 10.88.0.1/24, every address of 10.88.1.0/24 local (AnyIP)
#   namespace b: veth smcrB<pid> 10.88.0.2/24, every address of 10.88.2.0/24 local
#   SMCR_EMU_ARGS="netns=a,if=smcrA<pid>,ip=10.88.1.0/24;netns=b,if=smcrB<pid>,ip=10.88.2.0/24"
# so dev_open("emu") alternates between the two (emu.h), each device on a free address.
# Exit 77 (CTest: skipped) with a message when not root or namespaces cannot be made.
set -u
conf=$1
a=smcr-emu-$$-a b=smcr-emu-$$-b ia=smcrA$$ ib=smcrB$$
skip() { echo "SKIP: conformance_emu_netns: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root: cannot make network namespaces"
command -v ip >/dev/null 2>&1 || skip "no \"ip\" command (iproute2)"

cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
# If this script is killed outright (a CTest timeout), a watchdog in its own session still
# removes the namespaces once the script is gone.
setsid sh -c "while kill -0 $$ 2>/dev/null; do sleep 1; done; ip netns del $a; ip netns del $b" \
	</dev/null >/dev/null 2>&1 &

ip netns add "$a" 2>/dev/null && ip netns add "$b" 2>/dev/null ||
	skip "\"ip netns add\" failed (no network namespace support?)"
ip -n "$a" link add "$ia" type veth peer name "$ib" netns "$b" 2>/dev/null ||
	skip "cannot make a veth pair"
set -e
ip -n "$a" addr add 10.88.0.1/24 dev "$ia"
ip -n "$b" addr add 10.88.0.2/24 dev "$ib"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "$ia" up
ip -n "$b" link set "$ib" up
ip -n "$a" route add local 10.88.1.0/24 dev lo
ip -n "$a" route add 10.88.2.0/24 via 10.88.0.2
ip -n "$b" route add local 10.88.2.0/24 dev lo
ip -n "$b" route add 10.88.1.0/24 via 10.88.0.1
set +e
# The carrier comes up a moment after both ends are up.
i=0
while [ $i -lt 100 ]; do
	ip -n "$a" link show "$ia" | grep -q LOWER_UP && ip -n "$b" link show "$ib" | grep -q LOWER_UP && break
	sleep 0.05
	i=$((i + 1))
done
SMCR_EMU_ARGS="netns=$a,if=$ia,ip=10.88.1.0/24;netns=$b,if=$ib,ip=10.88.2.0/24"
export SMCR_EMU_ARGS
"$conf" emu
