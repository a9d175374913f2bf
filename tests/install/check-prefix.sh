#!/bin/bash
# check-prefix.sh BUILD_DIR: `cmake --install` into a fresh prefix, then, from there only:
# every file the issue names is in place (library with its soname, header, smcr.pc, tools,
# man pages, BPF object when built), pkg-config builds examples/ against it and they run
# over SMC-R (run-examples.sh), the man pages render from the prefix, smcr-stat lists an
# API program's and an smcr-run program's connections, counters and trace are right
# (check-stat.sh), and removing the prefix leaves nothing.
set -eu
build=${1:?usage: check-prefix.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
pfx=$(mktemp -d /tmp/smcr-prefix-XXXXXX)
chmod 755 "$pfx" # as an installed tree is: check-stat.sh's second user runs from it
trap 'rm -rf "$pfx"' EXIT
cmake --install "$build" --prefix "$pfx" >/dev/null
libdir=$(dirname "$(find "$pfx" -name 'libsmcr.so.0' | head -1)")
[ -n "$libdir" ] || { echo "no libsmcr.so.0 under $pfx"; exit 1; }
objdump -p "$libdir/libsmcr.so.0" | grep -q 'SONAME *libsmcr.so.0$' || { echo "soname"; exit 1; }
for f in include/smcr/smcr.h bin/smcr-perf bin/smcr-decode bin/smcr-stat share/man/man7/smcr.7 \
	share/man/man1/smcr-perf.1 share/man/man1/smcr-run.1 share/man/man8/smcr-stat.8; do
	[ -e "$pfx/$f" ] || { echo "missing $f"; exit 1; }
done
[ -e "$libdir/pkgconfig/smcr.pc" ] || { echo "missing smcr.pc"; exit 1; }
if [ -n "$(find "$build/tools" -name smcr-bpf -type f)" ]; then
	[ -x "$pfx/sbin/smcr-bpf" ] && [ -e "$pfx/lib/smcr/bpf/smcr_opt.bpf.o" ] ||
		{ echo "missing smcr-bpf or its BPF object"; exit 1; }
fi
"$pfx/bin/smcr-decode" fe06e2d4c3d9 | grep -q "exid: 0xe2d4c3d9" || { echo "smcr-decode from the prefix"; exit 1; }
for page in smcr-perf smcr-run smcr-stat smcr-decode smcr; do
	MANPATH=$pfx/share/man MANWIDTH=80 man "$page" 2>/dev/null | grep -q "^NAME" ||
		{ echo "man $page does not render from $pfx/share/man"; exit 1; }
done
PKG_CONFIG_PATH=$libdir/pkgconfig "$here/run-examples.sh" -Wl,-rpath,"$libdir"
# smcr-stat, counters and trace from the prefix (with smcr-run when the interposer is built)
if [ -x "$pfx/bin/smcr-run" ]; then
	PKG_CONFIG_PATH=$libdir/pkgconfig "$here/check-stat.sh" "$pfx/bin" -Wl,-rpath,"$libdir"
else
	echo "no smcr-run in this build: check-stat.sh not run"
fi
rm -rf "$pfx"
[ ! -e "$pfx" ] && echo "prefix $pfx removed"
