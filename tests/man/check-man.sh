#!/bin/bash
# check-man.sh PAGE...: each man page renders with man-db's man -l (groff) without a
# warning, has NAME, SYNOPSIS or DESCRIPTION, and, for smcr(7), names every SMCR_*
# environment variable that the library's sources read (so the page cannot fall behind).
# Exit 0 when all pass, 77 (skipped) without man/groff, 1 otherwise.
set -u
command -v man >/dev/null && command -v groff >/dev/null || {
	echo "man or groff missing (apt-get install man-db groff-base): skipped"; exit 77; }
src=${SMCR_SOURCE_DIR:-$(dirname "$0")/../..}
rc=0
for page in "$@"; do
	name=$(basename "$page")
	out=$(MANWIDTH=80 LC_ALL=C.UTF-8 man -l "$page" 2>/tmp/smcr-man-$$.err)
	err=$(cat /tmp/smcr-man-$$.err); rm -f /tmp/smcr-man-$$.err
	warn=$(groff -man -ww -z "$page" 2>&1)
	if [ -z "$out" ] || [ -n "$err" ] || [ -n "$warn" ]; then
		echo "FAIL $name: does not render cleanly: $err $warn"; rc=1; continue
	fi
	for sec in NAME DESCRIPTION; do
		grep -q "^$sec" <<<"$out" || { echo "FAIL $name: no $sec section"; rc=1; }
	done
	title=${name%.*}
	first=$(awk '/^NAME/ { getline; print; exit }' <<<"$out")
	case "$first" in
	*"$title - "*) ;;
	*) echo "FAIL $name: NAME does not name $title ($first)"; rc=1 ;;
	esac
	if [ "$name" = smcr.7 ]; then
		vars=$(grep -rhoE '"SMCR_[A-Z0-9_]+"' "$src/src" --include=*.c | tr -d '"' | sort -u)
		for v in $vars; do
			grep -q "$v" <<<"$out" || { echo "FAIL smcr.7: $v (read in src/) is not documented"; rc=1; }
		done
	fi
	[ $rc = 0 ] && echo "ok $name"
done
exit $rc
