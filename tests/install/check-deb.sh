#!/bin/bash
# check-deb.sh: the packages of scripts/build-deb.sh as a user meets them (needs root and
# dpkg; exit 77 = skipped otherwise, or when smcr packages are installed already, which
# this test must not touch). Builds version V and a later V+t1, then:
#   install V: examples/ built with pkg-config against /usr run over SMC-R, smcr-stat,
#   the counters and the trace are right with them and the installed smcr-run
#   (check-stat.sh), every man page renders, smcr-decode runs; upgrade to V+t1: versions and files right;
#   remove, then purge: dpkg knows none of the packages and none of their files is left.
# Serialized with other users of the host's package database by /tmp/smcr-deb.lock.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=${SMCR_SOURCE_DIR:?}
[ "$(id -u)" = 0 ] || { echo "needs root (dpkg -i): skipped"; exit 77; }
command -v dpkg-deb >/dev/null && command -v dpkg-shlibdeps >/dev/null ||
	{ echo "dpkg-dev missing: skipped"; exit 77; }
pkgs=(libsmcr0 libsmcr-dev smcr-tools)
exec 9>/tmp/smcr-deb.lock
flock 9
for p in "${pkgs[@]}"; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		echo "$p is installed on this machine already: skipped"; exit 77
	fi
done
work=$(mktemp -d /tmp/smcr-debtest-XXXXXX)
cleanup() {
	dpkg --purge "${pkgs[@]}" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
v1=$(sed -n 's/^project(smcr VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
v2=$v1+t1
"$src/scripts/build-deb.sh" -v "$v1" -b "$work/build" -o "$work/v1" > "$work/build1.log" 2>&1 ||
	{ cat "$work/build1.log"; exit 1; }
"$src/scripts/build-deb.sh" -v "$v2" -b "$work/build" -o "$work/v2" > "$work/build2.log" 2>&1 ||
	{ cat "$work/build2.log"; exit 1; }
# lintian: nothing but what docs/INSTALL.md explains (its report is in the build log)
if grep -E '^[EW]: ' "$work/build2.log"; then echo "lintian errors or warnings"; exit 1; fi

dpkg -i "$work"/v1/*.deb > "$work/inst1.log" 2>&1 || { cat "$work/inst1.log"; exit 1; }
for p in "${pkgs[@]}"; do
	[ "$(dpkg-query -W -f='${Version}' "$p")" = "$v1" ] || { echo "$p not at $v1"; exit 1; }
done
[ "$(pkg-config --modversion smcr)" = "$v1" ] || { echo "pkg-config --modversion"; exit 1; }
"$here/run-examples.sh"
# smcr-stat, counters and trace with the packages' tools (/usr/bin on PATH)
if [ -x /usr/bin/smcr-run ]; then
	"$here/check-stat.sh" /usr/bin
else
	echo "smcr-tools has no smcr-run (built without the interposer): check-stat.sh not run"
fi
pages="smcr-perf smcr-bpf smcr-decode smcr-stat smcr"
[ -x /usr/bin/smcr-run ] && pages="$pages smcr-run"
for page in $pages; do
	MANWIDTH=80 man "$page" 2>/dev/null | grep -q "^NAME" || { echo "man $page"; exit 1; }
done
smcr-decode fe06e2d4c3d9 | grep -q "exid: 0xe2d4c3d9" || { echo "smcr-decode"; exit 1; }

dpkg -i "$work"/v2/*.deb > "$work/inst2.log" 2>&1 || { cat "$work/inst2.log"; exit 1; }
for p in "${pkgs[@]}"; do
	[ "$(dpkg-query -W -f='${Version}' "$p")" = "$v2" ] || { echo "$p not upgraded"; exit 1; }
done
"$here/run-examples.sh" >/dev/null
files=$(dpkg -L "${pkgs[@]}" | sort -u)
dpkg -r "${pkgs[@]}" > /dev/null
dpkg --purge "${pkgs[@]}" > "$work/purge.log" 2>&1 || { cat "$work/purge.log"; exit 1; }
for p in "${pkgs[@]}"; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv "not-installed"; then
		echo "$p still known to dpkg"; exit 1
	fi
done
left=0
while read -r f; do
	# directories shared with the system (/usr, /usr/share/man, ...) stay
	if [ -e "$f" ] && [ ! -d "$f" ]; then echo "left behind: $f"; left=1; fi
	if [ -d "$f" ] && [[ $f == */smcr* || $f == */libsmcr* ]]; then echo "left: $f"; left=1; fi
done <<<"$files"
[ $left = 0 ] || exit 1
ldconfig -p | grep -q libsmcr && { echo "ldconfig still lists libsmcr"; exit 1; }
echo "installed $v1, upgraded to $v2, removed and purged: nothing left"
