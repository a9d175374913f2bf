#!/usr/bin/env bash
# build-deb.sh [-v VERSION] [-o OUTDIR] [-b BUILDDIR]: builds smcr's Debian packages from this
# tree with CMake and dpkg-deb (no debhelper): configure with the prefix /usr and Debian's
# build flags, `cmake --install` into a staging tree, split it into
#   libsmcr0      the shared library (soname libsmcr.so.0), with its symbols file
#   libsmcr-dev   the header, the .so link and smcr.pc (pkg-config --cflags --libs smcr)
#   smcr-tools    smcr-perf, smcr-decode, smcr-stat, smcr-bpf, smcr-run and the interposer when built,
#                 the BPF object, the man pages
# each with md5sums, copyright and changelog, binaries stripped, dependencies from
# dpkg-shlibdeps; then runs lintian on them when it is installed (warnings are explained in
# docs/INSTALL.md). VERSION defaults to the project's (CMakeLists.txt). Prints the paths of
# the .deb files on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
libver=$(sed -n 's/^project(smcr VERSION \([0-9.]*\).*/\1/p' "$here/CMakeLists.txt")
version=$libver # the packages' version; the library's file name keeps the project's
out=$here/build-deb/out
build=$here/build-deb/build
while getopts v:o:b: opt; do
	case $opt in
	v) version=$OPTARG ;;
	o) out=$OPTARG ;;
	b) build=$OPTARG ;;
	*) echo "usage: $0 [-v VERSION] [-o OUTDIR] [-b BUILDDIR]" >&2; exit 2 ;;
	esac
done
arch=$(dpkg --print-architecture)
multi=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
maint="smcr maintainers <maintainers@users.noreply.a-seed-a71215e7.example>"
work=$(mktemp -d /tmp/smcr-deb-XXXXXX)
trap 'rm -rf "$work"' EXIT

# Debian's hardening flags (dpkg-buildflags), bindnow too; the project adds its own
# warnings and _FORTIFY_SOURCE.
cflags="$(dpkg-buildflags --get CFLAGS) -ffile-prefix-map=$here=."
ldflags="$(dpkg-buildflags --get LDFLAGS) -Wl,-z,now"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
	-DSMCR_TESTS=OFF -DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
	-DCMAKE_SHARED_LINKER_FLAGS="$ldflags" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
DESTDIR="$work/stage" cmake --install "$build" >/dev/null
st=$work/stage

# ---- split the staging tree ----
mk() { mkdir -p "$work/$1/DEBIAN" "$work/$1/usr/share/doc/$1"; }
move() { # move PKG PATH...: paths relative to the staging tree
	local p=$1; shift
	for f in "$@"; do
		mkdir -p "$work/$p/$(dirname "$f")"
		mv "$st/$f" "$work/$p/$f"
	done
}
mk libsmcr0
mk libsmcr-dev
mk smcr-tools
move libsmcr0 "usr/lib/$multi/libsmcr.so.$libver" "usr/lib/$multi/libsmcr.so.0"
move libsmcr-dev "usr/lib/$multi/libsmcr.so" "usr/lib/$multi/pkgconfig/smcr.pc" usr/include/smcr
for f in usr/bin usr/sbin usr/lib/smcr usr/share/man; do
	[ -e "$st/$f" ] && move smcr-tools "$f"
done
left=$(cd "$st" && find . -type f -o -type l)
[ -z "$left" ] || { echo "build-deb: files in no package: $left" >&2; exit 1; }

# ---- contents: stripped binaries, compressed pages, doc files ----
strip_elf() { # strip as dh_strip does; the BPF object keeps its BTF (libbpf needs it)
	find "$work/$1" -type f ! -name '*.bpf.o' | while read -r f; do
		case $(head -c 4 "$f" | od -An -c | tr -d ' ') in
		177ELF)
			if [[ $f == *.so* ]]; then
				strip --remove-section=.comment --remove-section=.note --strip-unneeded "$f"
			else
				strip --remove-section=.comment --remove-section=.note "$f"
			fi ;;
		esac
	done
}
for p in libsmcr0 libsmcr-dev smcr-tools; do
	strip_elf $p
	d=$work/$p/usr/share/doc/$p
	cat > "$d/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: smcr
Upstream-Contact: $maint

Files: *
Copyright: 2026 the smcr authors
License: unspecified
 The smcr source tree carries no licence file yet; this package is built from it for
 the project's own tests and users.
EOF
	printf 'smcr (%s) unstable; urgency=medium\n\n  * Built from the smcr tree by scripts/build-deb.sh.\n\n -- %s  %s\n' \
		"$version" "$maint" "$(date -R -u -d @"${SOURCE_DATE_EPOCH:-$(git -C "$here" log -1 --format=%ct 2>/dev/null || date +%s)}")" |
		gzip -9n > "$d/changelog.gz"
	find "$work/$p" -depth -type d -empty -delete
	mkdir -p "$work/$p/DEBIAN"
done
# a page for a command this build does not have (smcr-run comes with the interposer)
for pg in "$work"/smcr-tools/usr/share/man/man[18]/*; do
	c=$(basename "$pg" | sed 's/\.[0-9]$//')
	[ -e "$work/smcr-tools/usr/bin/$c" ] || [ -e "$work/smcr-tools/usr/sbin/$c" ] || rm "$pg"
done
find "$work/smcr-tools/usr/share/man" -type f -exec gzip -9n {} +
chmod 0644 "$work"/*/usr/share/doc/*/* "$work/libsmcr0/usr/lib/$multi/libsmcr.so.$libver"

# ---- the library's symbols (dpkg-gensymbols' format): every exported name since 0.1.0 ----
{
	echo "libsmcr.so.0 libsmcr0 #MINVER#"
	echo "* Build-Depends-Package: libsmcr-dev"
	nm -D --defined-only "$work/libsmcr0/usr/lib/$multi/libsmcr.so.$libver" |
		awk -v v="$libver" '$2 ~ /^[TDBRW]$/ { print " " $3 "@Base " v }' | sort
} > "$work/libsmcr0/DEBIAN/symbols"
# the export list is the version script's: the symbols file must say exactly that
want=$(sed -n 's/^ *\(smcr_[a-z0-9_]*\);/\1/p' "$here/src/sock/libsmcr.map" | sort)
got=$(awk 'NR > 2 { sub(/@Base.*/, ""); print $1 }' "$work/libsmcr0/DEBIAN/symbols" | sort)
[ "$want" = "$got" ] || { echo "build-deb: exports differ from libsmcr.map" >&2; diff <(echo "$want") <(echo "$got") >&2; exit 1; }
printf 'activate-noawait ldconfig\n' > "$work/libsmcr0/DEBIAN/triggers"
printf 'libsmcr 0 libsmcr0 (>= %s)\n' "$libver" > "$work/libsmcr0/DEBIAN/shlibs"
# The BPF programs are built for the BPF virtual machine, not for the package's
# architecture, which is what lintian's tag says; they are loaded by libbpf.
if [ -e "$work/smcr-tools/usr/lib/smcr/bpf/smcr_opt.bpf.o" ]; then
	mkdir -p "$work/smcr-tools/usr/share/lintian/overrides"
	printf '%s\n' '# BPF bytecode (ELF machine EM_BPF): loaded into the kernel by libbpf' \
		'smcr-tools: binary-from-other-architecture [usr/lib/smcr/bpf/smcr_opt.bpf.o]' \
		> "$work/smcr-tools/usr/share/lintian/overrides/smcr-tools"
	chmod 0644 "$work/smcr-tools/usr/share/lintian/overrides/smcr-tools"
fi

# ---- control files ----
mkdir -p "$work/debian"
printf 'Source: smcr\n\nPackage: smcr-tools\nArchitecture: any\n' > "$work/debian/control"
shlibs() { # the Depends of the ELF files of a package, as dpkg-shlibdeps computes them
	local files
	files=$(find "$work/$1" -type f ! -name '*.bpf.o' -exec sh -c \
		'head -c 4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
	[ -n "$files" ] || return 0
	(cd "$work" && dpkg-shlibdeps -O \
		$files 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
}
control() { # control PKG SECTION MULTIARCH DEPENDS SUMMARY DESCRIPTION
	local size
	size=$(du -sk --exclude=DEBIAN "$work/$1" | cut -f1)
	{
		echo "Package: $1"
		echo "Source: smcr"
		echo "Version: $version"
		echo "Architecture: $arch"
		echo "Maintainer: $maint"
		echo "Installed-Size: $size"
		[ -n "$4" ] && echo "Depends: $4"
		[ -n "$3" ] && echo "Multi-Arch: $3"
		echo "Section: $2"
		echo "Priority: optional"
		echo "Description: $5"
		echo "$6" | fold -s -w 78 | sed 's/^/ /; s/ *$//'
	} > "$work/$1/DEBIAN/control"
	(cd "$work/$1" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' |
		sort | xargs -r md5sum > DEBIAN/md5sums)
}
control libsmcr0 libs same "$(shlibs libsmcr0)" \
	"SMC-R (RFC 7609) in user space: shared library" \
	"smcr implements Shared Memory Communications over RDMA in user space. A program keeps TCP's socket semantics; after a CLC handshake over TCP the bytes move by RDMA writes into the peer's receive buffer, and connections whose peer cannot do SMC-R stay TCP. This package holds the library behind the smcr_* socket API."
control libsmcr-dev libdevel same "libsmcr0 (= $version)" \
	"SMC-R (RFC 7609) in user space: development files" \
	"smcr implements Shared Memory Communications over RDMA in user space. This package holds the header <smcr/smcr.h>, the link to the library and its pkg-config file (pkg-config --cflags --libs smcr)."
control smcr-tools net "" "$(shlibs smcr-tools)" \
	"SMC-R (RFC 7609) in user space: tools" \
	"smcr implements Shared Memory Communications over RDMA in user space. This package holds smcr-perf (SMC-R beside TCP: throughput, latency, connection rate), smcr-decode (SMC-R messages from hex text or captures), smcr-stat (the connections, link groups and counters of running smcr processes), smcr-bpf (the TCP-option BPF programs), smcr-run and its interposer when they are built, and the manual pages smcr(7) and the tools'."

mkdir -p "$out"
debs=()
for p in libsmcr0 libsmcr-dev smcr-tools; do
	f=$out/${p}_${version}_$arch.deb
	dpkg-deb --root-owner-group -Zxz --build "$work/$p" "$f" >/dev/null
	debs+=("$f")
done
if command -v lintian >/dev/null; then
	lintian --tag-display-limit 0 -I "${debs[@]}" || true
fi
echo "${debs[@]}"
