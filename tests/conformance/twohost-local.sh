#!/bin/sh
# twohost-local.sh CONFORMANCE PROVIDER: the conformance suite's two-host mode with both ends
# on this host (two processes, the control connection on 127.0.0.1), for a provider whose
# devices reach other processes (shm). It keeps the two-host harness (conf_twohost.c) honest
# where no second host is at hand; tests/vm runs it between two guests on verbs.
conf=$1
prov=$2
port=$((30000 + $$ % 20000))
"$conf" "$prov" --serve "$port" &
far=$!
"$conf" "$prov" --remote 127.0.0.1 "$port"
near=$?
wait "$far"
farrc=$?
echo "twohost-local: near end $near, far end $farrc"
[ "$near" = 0 ] && [ "$farrc" = 0 ]
