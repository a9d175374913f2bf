#!/bin/sh
# twohost-local.sh CONFORMANCE PROVIDER: the conformance suite's two-host mode with both ends
# on this host (two processes, the control connection on 127.0.0.1), for a provider whose
# devices reach other processes (shm). It keeps the two-host harness (conf_twohost.c) honest
# where no second host is at hand; tests/vm runs it between two guests on verbs.
# The far end listens on a port the kernel picks (--serve 0) and prints it: a fixed or
# random port can be taken by another process's connection on a shared machine.
conf=$1
prov=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$conf" "$prov" --serve 0 >"$out" &
far=$!
port=
for _ in $(seq 300); do
	port=$(sed -n 's/.*far end listening on \([0-9]*\).*/\1/p' "$out")
	[ -n "$port" ] && break
	kill -0 "$far" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$port" ]; then
	cat "$out"
	echo "twohost-local: the far end did not start listening"
	kill "$far" 2>/dev/null
	wait "$far"
	exit 1
fi
"$conf" "$prov" --remote 127.0.0.1 "$port"
near=$?
wait "$far"
farrc=$?
cat "$out"
echo "twohost-local: near end $near, far end $farrc"
[ "$near" = 0 ] && [ "$farrc" = 0 ]
