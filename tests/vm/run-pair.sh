#!/usr/bin/env bash
# run-pair.sh SCENARIO [BUILD_DIR]: boots two qemu guests joined by a qemu socket netdev on
# 127.0.0.1 (guest a 10.0.0.1, guest b 10.0.0.2; both with Soft-RoCE rxe0 unless
# SMCR_VM_RXE_B=0 leaves b without an RDMA device), runs tests/vm/scenario-SCENARIO.sh in
# both and brings back their logs and exit codes (docs/parts/verbs.md "The guests").
# SMCR_VM_NICS=2 gives each guest a second NIC on a second socket netdev (eth1:
# SMCR_VM_IP2_A, SMCR_VM_IP2_B, default 10.0.1.1 and 10.0.1.2, each a /24) and, with rxe, a
# second Soft-RoCE device on it (rxe1).
#
# The guest is built once and cached (build-guest.sh). Accelerator: KVM if a short probe
# boot reaches the initramfs, else TCG (the probe's answer is cached per host kernel; the
# log says which one ran; SMCR_VM_ACCEL=tcg|kvm forces it).
#
# Exit codes: 0 both guests' scenarios passed; 1 a scenario failed (a test's assertion);
# 2 infrastructure failure: a guest's kernel died ("Kernel panic", "double fault", ...), a
# guest stopped without its end marker, or a timeout (console logs printed; the pair is
# tried once more before giving up, unless SMCR_VM_RETRY=0); 77 cannot run here (no qemu,
# no guest).
# Results: $SMCR_VM_OUT (default BUILD_DIR/vm/SCENARIO): a.log, b.log, a.console, b.console.
set -uo pipefail
scenario=${1:?usage: run-pair.sh SCENARIO [BUILD_DIR]}
# One pair at a time on this host (each guest takes a CPU under TCG): every run-pair.sh
# holds /tmp/smcr-vm.lock (SMCR_VM_LOCK names another) for its whole run, unless a process
# it descends from holds it already (`flock /tmp/smcr-vm.lock run-pair.sh ...`: taking it
# again would wait for ever).
lock_held_above() { # lock file: is its flock held by one of our ancestors?
	[ -e "$1" ] || return 1
	local ino holders p
	ino=$(stat -c %i "$1") || return 1
	holders=$(awk -v i=":$ino" '$2 == "FLOCK" && substr($6, length($6) - length(i) + 1) == i {print $5}' /proc/locks 2>/dev/null)
	[ -n "$holders" ] || return 1
	p=$$
	while [ -n "$p" ] && [ "$p" -gt 1 ]; do
		for h in $holders; do [ "$h" = "$p" ] && return 0; done
		p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
	done
	return 1
}
if [ -z "${SMCR_VM_LOCKED:-}" ] && command -v flock >/dev/null; then
	export SMCR_VM_LOCKED=1
	lock=${SMCR_VM_LOCK:-/tmp/smcr-vm.lock}
	lock_held_above "$lock" || exec flock "$lock" "$0" "$@"
fi
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
bld=$(cd "${2:-${SMCR_BINARY_DIR:-$src/build}}" && pwd)
CACHE=${SMCR_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/smcr-vm}
OUT=${SMCR_VM_OUT:-$bld/vm/$scenario}
TIMEOUT=${SMCR_VM_TIMEOUT:-600}
MEM=${SMCR_VM_MEM:-1536}
NICS=${SMCR_VM_NICS:-1}
IP2_A=${SMCR_VM_IP2_A:-10.0.1.1}
IP2_B=${SMCR_VM_IP2_B:-10.0.1.2}
log() { echo "run-pair[$scenario]: $*" >&2; }

command -v qemu-system-x86_64 >/dev/null || { log "SKIP: qemu-system-x86_64 missing (scripts/deps.sh test)"; exit 77; }
[ -f "$here/scenario-$scenario.sh" ] || { log "no scenario $scenario"; exit 2; }
bash "$here/build-guest.sh"
rc=$?
[ $rc -eq 77 ] && { log "SKIP: the guest cannot be built here"; exit 77; }
[ $rc -ne 0 ] && { log "INFRA FAILURE: the guest build failed"; exit 2; }

# ---- accelerator ----
probe_kvm() {
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
	local key f
	key=$(uname -r)
	f="$CACHE/kvm-probe-$key"
	if [ ! -f "$f" ]; then
		local c="$CACHE/kvm-probe.console"
		rm -f "$c"
		timeout 20 qemu-system-x86_64 -accel kvm -cpu host -m 512 -smp 1 -nodefaults \
			-display none -no-reboot -serial "file:$c" -kernel "$CACHE/vmlinuz" \
			-initrd "$CACHE/initrd.img" -append "console=ttyS0 panic=-1 rdinit=/bin/busybox" \
			>/dev/null 2>&1
		# the kernel reached user space (the probe's init then exits: a panic we expect)
		if grep -q "Run /bin/busybox as init" "$c" 2>/dev/null; then echo kvm >"$f"; else echo tcg >"$f"; fi
	fi
	[ "$(cat "$f")" = kvm ]
}
accel=${SMCR_VM_ACCEL:-}
if [ -z "$accel" ]; then
	if probe_kvm; then accel=kvm; else accel=tcg; fi
fi
if [ "$accel" = kvm ]; then
	accel_args=(-accel kvm -cpu host)
else
	accel_args=(-accel tcg -cpu max)
fi
log "accelerator: $accel (KVM probe result cached in $CACHE/kvm-probe-$(uname -r))"

pids=()
kill_pair() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	pids=()
}
trap kill_pair EXIT

# no_timer_check: under TCG on a loaded host the kernel's early check of the IO-APIC timer
# can miss its ticks and panic ("IO-APIC + timer doesn't work!") at 0.05 s; the check is
# for real chipsets, the emulated one works.
boot() { # role ip rxe netdev-args...
	local role=$1 ip=$2 rxe=$3 ip2=$IP2_A
	[ "$1" = b ] && ip2=$IP2_B
	shift 3
	mkdir -p "$OUT/share-$role"
	rm -f "$OUT/share-$role"/*
	qemu-system-x86_64 "${accel_args[@]}" -m "$MEM" -smp 1 -nodefaults -display none \
		-no-reboot -serial "file:$OUT/$role.console" \
		-kernel "$CACHE/vmlinuz" -initrd "$CACHE/initrd.img" \
		-append "console=ttyS0 panic=-1 loglevel=4 no_timer_check smcr.role=$role smcr.ip=$ip smcr.rxe=$rxe smcr.nics=$NICS smcr.ip2=$ip2 smcr.scenario=$scenario" \
		-fsdev "local,id=root,path=$CACHE/rootfs,security_model=none,readonly=on" \
		-device virtio-9p-pci,fsdev=root,mount_tag=root \
		-fsdev "local,id=src,path=$src,security_model=none,readonly=on" \
		-device virtio-9p-pci,fsdev=src,mount_tag=src \
		-fsdev "local,id=bld,path=$bld,security_model=none,readonly=on" \
		-device virtio-9p-pci,fsdev=bld,mount_tag=bld \
		-fsdev "local,id=out,path=$OUT/share-$role,security_model=none" \
		-device virtio-9p-pci,fsdev=out,mount_tag=out \
		"$@" >"$OUT/$role.qemu" 2>&1 &
	pids+=($!)
}

DEATH='Kernel panic|double fault|BUG: unable|general protection fault|Oops:|watchdog: BUG'

# One attempt: 0/1 the scenarios' verdict, 2 infrastructure failure.
attempt() {
	mkdir -p "$OUT"
	rm -f "$OUT"/*.console "$OUT"/*.log "$OUT"/*.qemu
	local port listening=0 nic2a=() nic2b=()
	# a listens on a random port (another one if that is taken), b connects to it
	for _ in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 40000))
		if [ "$NICS" = 2 ]; then
			nic2a=(-netdev "socket,id=n1,listen=127.0.0.1:$((port + 1))"
				-device virtio-net-pci,netdev=n1,mac=52:54:00:5c:01:01)
			nic2b=(-netdev "socket,id=n1,connect=127.0.0.1:$((port + 1))"
				-device virtio-net-pci,netdev=n1,mac=52:54:00:5c:01:02)
		fi
		boot a 10.0.0.1 1 -netdev "socket,id=n0,listen=127.0.0.1:$port" \
			-device virtio-net-pci,netdev=n0,mac=52:54:00:5c:00:01 "${nic2a[@]}"
		for _ in $(seq 50); do
			ss -ltn 2>/dev/null | grep -q "127.0.0.1:$port " &&
				{ [ "$NICS" != 2 ] || ss -ltn 2>/dev/null | grep -q "127.0.0.1:$((port + 1)) "; } &&
				{ listening=1; break; }
			kill -0 "${pids[0]}" 2>/dev/null || break
			sleep 0.1
		done
		[ $listening = 1 ] && break
		grep -q "Address already in use" "$OUT/a.qemu" 2>/dev/null || break
		log "port $port taken, another one"
		kill_pair
	done
	boot b 10.0.0.2 "${SMCR_VM_RXE_B:-1}" -netdev "socket,id=n0,connect=127.0.0.1:$port" \
		-device virtio-net-pci,netdev=n0,mac=52:54:00:5c:00:02 "${nic2b[@]}"
	local t0=$SECONDS why=""
	while :; do
		local done_a=0 done_b=0
		grep -q "SMCR-VM-END" "$OUT/a.console" 2>/dev/null && done_a=1
		grep -q "SMCR-VM-END" "$OUT/b.console" 2>/dev/null && done_b=1
		[ $done_a = 1 ] && [ $done_b = 1 ] && break
		for r in a b; do
			if grep -qE "$DEATH" "$OUT/$r.console" 2>/dev/null; then
				why="guest $r's kernel died"
			fi
		done
		[ -n "$why" ] && break
		if ! kill -0 "${pids[0]}" 2>/dev/null && [ $done_a = 0 ]; then why="guest a's qemu exited without the end marker"; break; fi
		if ! kill -0 "${pids[1]}" 2>/dev/null && [ $done_b = 0 ]; then why="guest b's qemu exited without the end marker"; break; fi
		if [ $((SECONDS - t0)) -ge "$TIMEOUT" ]; then why="timeout after ${TIMEOUT}s"; break; fi
		sleep 1
	done
	sleep 1
	kill_pair
	for r in a b; do
		cp "$OUT/share-$r/$r.log" "$OUT/$r.log" 2>/dev/null
	done
	if [ -n "$why" ]; then
		log "INFRA FAILURE: $why after $((SECONDS - t0))s"
		for r in a b; do
			echo "---- guest $r console: the lines that tell a death ----" >&2
			grep -E "$DEATH" "$OUT/$r.console" >&2 2>/dev/null
			echo "---- guest $r console (last 40 lines) ----" >&2
			tail -40 "$OUT/$r.console" >&2 2>/dev/null
			echo "---- guest $r qemu ----" >&2
			tail -5 "$OUT/$r.qemu" >&2 2>/dev/null
		done
		return 2
	fi
	local ra rb
	ra=$(cat "$OUT/share-a/a.rc" 2>/dev/null || echo 99)
	rb=$(cat "$OUT/share-b/b.rc" 2>/dev/null || echo 99)
	log "both guests ended after $((SECONDS - t0))s: a rc=$ra, b rc=$rb"
	for r in a b; do
		echo "==== guest $r: scenario log ====" >&2
		cat "$OUT/$r.log" >&2 2>/dev/null
	done
	if [ "$ra" = 98 ] || [ "$rb" = 98 ] || [ "$ra" = 99 ] || [ "$rb" = 99 ]; then
		log "INFRA FAILURE: a guest could not set up its network or rxe0 (rc 98/99)"
		return 2
	fi
	[ "$ra" = 0 ] && [ "$rb" = 0 ] && return 0
	log "TEST FAILURE (see the logs above; consoles in $OUT)"
	return 1
}

attempt
rc=$?
if [ $rc -eq 2 ] && [ "${SMCR_VM_RETRY:-1}" != 0 ]; then
	log "retrying the pair once"
	attempt
	rc=$?
fi
exit $rc
