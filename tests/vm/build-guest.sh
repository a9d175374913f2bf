#!/usr/bin/env bash
# build-guest.sh: builds, once, the qemu guest the verbs tests run in (docs/parts/verbs.md
# "The guests") and caches it; a second run finds it and returns at once.
#
# What it makes, all from Debian packages, under $SMCR_VM_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/smcr-vm; never inside the repository):
#   kernel/    Debian 12's linux-image-6.12.*-amd64-unsigned (bookworm-security): a plain
#              vmlinuz whose modules include rdma_rxe, ib_uverbs and smc
#   rootfs/    debootstrap --variant=minbase bookworm with rdma-core, ibverbs-providers,
#              iproute2, kmod and the libraries smcr's test programs load; the kernel's
#              modules copied in and depmod run; shared read-only into the guests (9p)
#   initrd.img busybox (busybox-static) and the 9p modules: mounts rootfs over virtio-9p
#              and switches to it
# Packages are fetched with apt-get from a private apt configuration under the cache (the
# host's own apt sources are neither read nor changed), so the host needs only
# debootstrap, apt and xz. Exit codes: 0 built or cached, 77 cannot build here (no
# debootstrap, no root, no network to the Debian archive), 1 a build step failed.
set -euo pipefail

CACHE=${SMCR_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/smcr-vm}
MIRROR=${SMCR_VM_MIRROR:-http://deb.debian.org/debian}
SECURITY=${SMCR_VM_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# rdma-core/ibverbs-providers: libibverbs and its rxe driver (librxe); iproute2: `rdma link
# add`; kmod: modprobe; libcmocka0, libssl3, libpcap0.8, libbpf1: what the test programs
# link. perftest/ibverbs-utils: ibv_devinfo and ibv_rc_pingpong for diagnosis. tcpdump:
# captures inside the guests (RoCE v2 is UDP 4791 on eth0) for tshark on the host; socat:
# a real program for the interposer.
PKGS=iproute2,rdma-core,ibverbs-utils,ibverbs-providers,kmod,procps,libcmocka0,libssl3,libpcap0.8,libbpf1,libelf1,zlib1g,tcpdump,socat

log() { echo "build-guest: $*" >&2; }

# the cache is valid for the package list it was built with (a changed list rebuilds it)
STAMP="pkgs=$PKGS"
if [ -f "$CACHE/ready" ] && [ "$(cat "$CACHE/ready")" = "$STAMP" ]; then
	log "cached in $CACHE"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	log "SKIP: needs root (debootstrap, chroot depmod)"
	exit 77
fi
for t in debootstrap apt-get dpkg-deb xz; do
	command -v "$t" >/dev/null || { log "SKIP: $t missing (scripts/deps.sh test)"; exit 77; }
done
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
[ -f "$CACHE/ready" ] && [ "$(cat "$CACHE/ready")" = "$STAMP" ] && exit 0
rm -f "$CACHE/ready"

# ---- a private apt configuration: bookworm + bookworm-security, download only ----
APT="$CACHE/apt"
mkdir -p "$APT/lists/partial" "$APT/archives/partial" "$APT/parts" "$CACHE/dl"
cat >"$APT/sources.list" <<EOF
deb [signed-by=$KEYRING] $MIRROR bookworm main
deb [signed-by=$KEYRING] $SECURITY bookworm-security main
EOF
aptopt=(-o "Dir::Etc::SourceList=$APT/sources.list" -o "Dir::Etc::SourceParts=$APT/parts"
	-o "Dir::State::Lists=$APT/lists" -o "Dir::Cache::Archives=$APT/archives"
	-o "Dir::Cache::pkgcache=$APT/pkgcache.bin" -o "Dir::Cache::srcpkgcache=$APT/srcpkgcache.bin"
	-o "APT::Sandbox::User=root")
if [ ! -f "$APT/updated" ]; then
	log "apt-get update (private config in $APT)"
	if ! apt-get "${aptopt[@]}" -qq update; then
		log "SKIP: cannot reach the Debian archive ($MIRROR)"
		exit 77
	fi
	touch "$APT/updated"
fi
kpkg=$(apt-cache "${aptopt[@]}" pkgnames linux-image-6.12 |
	grep -E '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' | sort -V | tail -1)
[ -n "$kpkg" ] || { log "no linux-image-6.12.*+deb12-amd64-unsigned in bookworm-security"; exit 1; }
kver=${kpkg#linux-image-}
kver=${kver%-unsigned}
log "kernel package $kpkg (version $kver)"
(cd "$CACHE/dl" && { ls "${kpkg}"_*.deb >/dev/null 2>&1 || apt-get "${aptopt[@]}" -qq download "$kpkg"; } &&
	{ ls busybox-static_*.deb >/dev/null 2>&1 || apt-get "${aptopt[@]}" -qq download busybox-static; })

# ---- kernel ----
rm -rf "$CACHE/kernel.tmp"
mkdir -p "$CACHE/kernel.tmp"
dpkg-deb -x "$(ls "$CACHE/dl/${kpkg}"_*.deb | head -1)" "$CACHE/kernel.tmp"
[ -f "$CACHE/kernel.tmp/boot/vmlinuz-$kver" ] || { log "no vmlinuz-$kver in $kpkg"; exit 1; }

# ---- root filesystem ----
rm -rf "$CACHE/rootfs.tmp"
log "debootstrap minbase bookworm (about 50 MB of downloads)"
debootstrap --variant=minbase --include="$PKGS" bookworm "$CACHE/rootfs.tmp" "$MIRROR" \
	>"$CACHE/debootstrap.log" 2>&1 || { log "debootstrap failed: see $CACHE/debootstrap.log"; tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
R="$CACHE/rootfs.tmp"
mkdir -p "$R/lib/modules"
cp -a "$CACHE/kernel.tmp/lib/modules/$kver" "$R/lib/modules/"
chroot "$R" depmod "$kver"
mkdir -p "$R/smcr/src" "$R/smcr/out"
echo smcr-guest >"$R/etc/hostname"
rm -rf "$R/var/cache/apt/archives/"*.deb

# ---- initramfs: busybox + the 9p modules in dependency order ----
I="$CACHE/initrd.tmp"
rm -rf "$I" "$CACHE/bb"
mkdir -p "$I/bin" "$I/mods" "$I/newroot" "$I/proc" "$I/dev" "$CACHE/bb"
dpkg-deb -x "$(ls "$CACHE/dl/"busybox-static_*.deb | head -1)" "$CACHE/bb"
cp "$CACHE/bb/bin/busybox" "$I/bin/busybox"
dep="$R/lib/modules/$kver/modules.dep"
order=()
add_mod() { # $1: path relative to the modules dir; its dependencies first
	local m=$1 d
	for x in "${order[@]}"; do [ "$x" = "$m" ] && return 0; done
	for d in $(grep -E "^$m:" "$dep" | cut -d: -f2-); do add_mod "$d"; done
	order+=("$m")
}
for name in virtio_pci 9pnet_virtio 9p; do
	path=$(grep -oE "^[^:]*/$name\.ko(\.xz|\.zst)?:" "$dep" | head -1 | tr -d :) || true
	[ -n "$path" ] && add_mod "$path"
done
: >"$I/mods/order"
for m in "${order[@]}"; do
	b=$(basename "$m")
	case "$b" in
	*.xz) xz -dc "$R/lib/modules/$kver/$m" >"$I/mods/${b%.xz}"; b=${b%.xz} ;;
	*) cp "$R/lib/modules/$kver/$m" "$I/mods/$b" ;;
	esac
	echo "$b" >>"$I/mods/order"
done
cat >"$I/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t devtmpfs dev /dev
for m in $(/bin/busybox cat /mods/order); do /bin/busybox insmod /mods/$m 2>/dev/null; done
if ! /bin/busybox mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=512000 root /newroot; then
	echo "SMCR-VM-INFRA: cannot mount the 9p root"; /bin/busybox sh
fi
# the source tree (read-only) and the results share (writable); the second stage is
# the tree's tests/vm/guest-init.sh, so changing it needs no rebuild of the guest
/bin/busybox mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=512000 src /newroot/smcr/src
/bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /newroot/smcr/out
/bin/busybox umount /proc
/bin/busybox mount --move /dev /newroot/dev
exec /bin/busybox switch_root /newroot /bin/bash /smcr/src/tests/vm/guest-init.sh
EOF
chmod +x "$I/init"
(cd "$I" && find . | "$CACHE/bb/bin/busybox" cpio -o -H newc 2>/dev/null | gzip -1) >"$CACHE/initrd.img.tmp"

# ---- publish ----
rm -rf "$CACHE/kernel" "$CACHE/rootfs"
mv "$CACHE/kernel.tmp" "$CACHE/kernel"
mv "$CACHE/rootfs.tmp" "$CACHE/rootfs"
mv "$CACHE/initrd.img.tmp" "$CACHE/initrd.img"
cp "$CACHE/kernel/boot/vmlinuz-$kver" "$CACHE/vmlinuz"
echo "$kver" >"$CACHE/kver"
rm -rf "$I" "$CACHE/bb"
echo "$STAMP" >"$CACHE/ready"
log "guest ready in $CACHE (kernel $kver)"
