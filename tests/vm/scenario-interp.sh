#!/bin/bash
# scenario-interp.sh a|b: the interposer over verbs between two guests (run-pair.sh
# interp; docs/parts/verbs.md "The guests"): an unmodified socat under smcr-run on both,
# smcr's BPF option program installed on both, SMC-R over rxe0. a: an echo server (socat
# TCP-LISTEN ... PIPE), b: sends 2 MiB of random bytes through it and gets them back (its
# stdin's EOF is a half-close); both logs must say the connection ran SMC-R, and b
# compares the SHA-256 of what it sent and what came back.
set -u
role=$1
B=$SMCR_BLD
fail=0
check() { # what, then the command
	local what=$1
	shift
	echo "== $what"
	if "$@"; then echo "== $what: ok"; else echo "== $what: FAILED"; fail=1; fi
}
mkdir -p /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup
"$B/tools/smcr-bpf/smcr-bpf" install || exit 98
export SMCR_PRELOAD_LIB=$B/src/preload/libsmcr-preload.so SMCR_LOG=info
RUN=("$B/tools/smcr-run/smcr-run" --devices verbs --)
if [ "$role" = a ]; then
	"${RUN[@]}" socat -T 120 -t 60 TCP-LISTEN:5500,reuseaddr PIPE 2>/tmp/srv.err
	echo "socat exit $?"
	grep -E "smcr|SMC" /tmp/srv.err | head -20
	check "server socat: the connection ran SMC-R" grep -qE "hs: fd [0-9]+: SMC-R \(link group" /tmp/srv.err
else
	head -c 2097152 /dev/urandom >/tmp/data
	"${RUN[@]}" socat -T 120 -t 60 - TCP:10.0.0.1:5500,retry=240,interval=0.5 </tmp/data >/tmp/back 2>/tmp/cli.err
	echo "socat exit $?"
	grep -E "smcr|SMC" /tmp/cli.err | head -20
	check "client socat: the connection ran SMC-R" grep -qE "hs: fd [0-9]+: SMC-R \(link group" /tmp/cli.err
	a=$(sha256sum </tmp/data | cut -d' ' -f1)
	b=$(sha256sum </tmp/back | cut -d' ' -f1)
	echo "sent $(stat -c %s /tmp/data) bytes sha256 $a; back $(stat -c %s /tmp/back) bytes sha256 $b"
	check "2 MiB echoed through socat: SHA-256 equal" test "$a" = "$b"
fi
echo "== scenario $role: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
