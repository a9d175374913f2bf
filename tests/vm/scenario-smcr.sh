#!/bin/bash
# scenario-smcr.sh a|b: the verbs provider on Soft-RoCE between two guests (run-pair.sh).
#   a (10.0.0.1): the provider conformance suite on rxe0 (both sides of each pair on the
#      one device; the "peer killed" test is two processes on it), then its two-host mode
#      as the near end (conformance verbs --remote: each test's other end on b's rxe0,
#      over the guests' network), the socket layer's SHA-256 tests it_data and it_stream
#      with both ends on rxe0 (IT_DEVICE=verbs), then the servers: vm_sha (4 MiB, SHA-256), smcr-perf,
#      and a last vm_sha that b uses as its "done".
#   b (10.0.0.2): the two-host conformance's far end (--serve; its port-events test takes
#      b's eth0 down and up), then
#      vm_sha client (must be mode smcr, digest equal), smcr-perf stream and
#      pingpong over smcr and over tcp in turns (3 rounds each), the last vm_sha client
#      (SMCR_DEVICES=verbs:rxe0/1: one port named).
set -u
role=$1
B=$SMCR_BLD
export SMCR_DEVICES=verbs SMCR_RULES='use smc both * *' SMCR_LOG=${SMCR_LOG:-warn}
fail=0
check() { # what, then the command
	local what=$1
	shift
	echo "== $what: $*"
	if "$@"; then echo "== $what: ok"; else echo "== $what: FAILED (rc $?)"; fail=1; fi
}
expect_mode() { # file mode
	grep -q "mode=$2 " "$1" || { echo "expected mode $2 in $1:"; cat "$1"; return 1; }
}
echo "== rdma devices:"; rdma link show; ibv_devices 2>&1 | head -5
if [ "$role" = a ]; then
	# the perf server first, so it listens long before b gets to it
	"$B/tools/smcr-perf/smcr-perf" server -p 5301 >/tmp/perf-server.out 2>&1 &
	perf=$!
	check "conformance verbs (rxe0)" "$B/tests/conformance/conformance" verbs
	check "CQs grow with their QPs (rxe0)" "$B/tests/conformance/test_verbs_cq_grow"
	check "conformance verbs, two hosts (near end here, far end on b)" \
		"$B/tests/conformance/conformance" verbs --remote 10.0.0.2 5400
	# the socket layer's SHA-256 integration tests, both ends on rxe0 (IT_DEVICE=verbs)
	for t in it_data it_stream; do
		check "$t over verbs (rxe0)" env IT_DEVICE=verbs SMCR_TEST_QUICK=1 timeout 600 "$B/tests/sock/$t"
	done
	check "vm_sha server 4 MiB" sh -c "'$B/tests/vm/vm_sha' server 5000 >/tmp/sha1.out; cat /tmp/sha1.out"
	check "server mode smcr" expect_mode /tmp/sha1.out smcr
	check "vm_sha server (end of b's runs)" sh -c "'$B/tests/vm/vm_sha' server 5001 >/tmp/sha2.out; cat /tmp/sha2.out"
	check "server mode smcr (2)" expect_mode /tmp/sha2.out smcr
	kill $perf 2>/dev/null
	wait $perf 2>/dev/null
	cat /tmp/perf-server.out
else
	# port events: the far end takes its port down and up by taking eth0 down and up (the
	# control connection over eth0 waits meanwhile)
	check "conformance verbs, two hosts (far end here)" env SMCR_CONF_PORT_DOWN='ip link set eth0 down' \
		SMCR_CONF_PORT_UP='ip link set eth0 up' timeout 600 "$B/tests/conformance/conformance" verbs --serve 5400
	check "vm_sha client 4 MiB" sh -c "'$B/tests/vm/vm_sha' client 10.0.0.1 5000 4194304 >/tmp/sha1.out; rc=\$?; cat /tmp/sha1.out; exit \$rc"
	check "client mode smcr" expect_mode /tmp/sha1.out smcr
	# figures: smcr against tcp to the same server, in turns (ratios only: TCG is slow)
	for round in 1 2 3; do
		for tr in smcr tcp; do
			for t in stream pingpong; do
				sz=64K; [ $t = pingpong ] && sz=64
				echo "== perf round $round $tr $t $sz"
				"$B/tools/smcr-perf/smcr-perf" client 10.0.0.1 -p 5301 -t $t -s $sz -d 3 \
					--transport $tr --dat 2>&1 | tee -a /tmp/perf.dat
			done
		done
	done
	# every smcr run really ran smcr (the mode column of --dat is read from the engine)
	check "perf: 6 smcr runs in mode smcr" test "$(grep -cE '^(stream|pingpong) [0-9]+ smcr smcr ' /tmp/perf.dat)" = 6
	check "perf: 6 tcp runs in mode tcp" test "$(grep -cE '^(stream|pingpong) [0-9]+ tcp tcp ' /tmp/perf.dat)" = 6
	# this one names the port itself (verbs:<dev>/<port>) instead of "every active port"
	check "vm_sha client 1 MiB (last, verbs:rxe0/1)" env SMCR_DEVICES=verbs:rxe0/1 sh -c "'$B/tests/vm/vm_sha' client 10.0.0.1 5001 1048576 >/tmp/sha2.out; rc=\$?; cat /tmp/sha2.out; exit \$rc"
	check "client mode smcr (2)" expect_mode /tmp/sha2.out smcr
	cp /tmp/perf.dat "$SMCR_OUT/perf.dat" 2>/dev/null
fi
echo "== scenario $role: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
