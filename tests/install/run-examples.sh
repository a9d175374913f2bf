#!/bin/bash
# run-examples.sh CC_ARGS... : builds examples/ with `cc ... $(pkg-config --cflags --libs
# smcr)` (PKG_CONFIG_PATH as the caller set it; CC_ARGS such as an rpath are added), runs
# the echo server and a client over SMC-R on loopback with SMCR_STATS, and checks what a
# user would: the client's echoes matched, the connection ran in mode smcr, and the
# stats lines of both processes say one SMC-R connection and the bytes moved.
# Shared by check-prefix.sh and check-deb.sh. Exit 0 on success.
set -eu
src=${SMCR_SOURCE_DIR:?}
tmp=$(mktemp -d /tmp/smcr-inst-ex-XXXXXX)
srv_pid=
cleanup() { [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
flags=$(pkg-config --cflags --libs smcr)
for ex in smcr-echo-server smcr-echo-client; do
	cc -std=c11 -Wall -Werror -o "$tmp/$ex" "$src/examples/$ex.c" $flags "$@"
done
export SMCR_CONFIG=/nonexistent SMCR_DEVICES=shm SMCR_LOG=error SMCR_STATS=$tmp/stats.json
SMCR_RULES='use smc server * *' "$tmp/smcr-echo-server" -p 0 -n 1 > "$tmp/srv.out" &
srv_pid=$!
port=
for _ in $(seq 500); do
	port=$(sed -n 's/^listening on port \([0-9]*\).*/\1/p' "$tmp/srv.out")
	[ -n "$port" ] && break
	sleep 0.01
done
[ -n "$port" ] || { echo "server did not start"; exit 1; }
out=$(SMCR_RULES='use smc client * *' "$tmp/smcr-echo-client" -p "$port" -c 20 -s 50000)
wait "$srv_pid"; srv_pid=
grep -q "^connected: mode smcr" <<<"$out" || { echo "client: $out"; exit 1; }
grep -q "^20 echo(s) of 50000 bytes ok" <<<"$out" || { echo "client: $out"; exit 1; }
n=$(grep -c '"conns":{"smcr":1,"tcp":0,"failed":0}' "$tmp/stats.json")
b=$(grep -c '"bytes_smcr":{"sent":1000000,"received":1000000}' "$tmp/stats.json")
[ "$n" = 2 ] && [ "$b" = 2 ] || { echo "stats:"; cat "$tmp/stats.json"; exit 1; }
echo "examples built with pkg-config ran over SMC-R: $(ldd "$tmp/smcr-echo-client" | grep -o 'libsmcr[^ ]* => [^ ]*')"
