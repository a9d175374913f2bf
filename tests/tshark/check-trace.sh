#!/bin/bash
# check-trace.sh EXAMPLES_DIR: SMCR_TRACE as a user meets it. The echo examples run over
# SMC-R with SMCR_TRACE=DIR/trace-%p.pcapng and SMCR_STATS; tshark (Wireshark's SMC
# dissector, not ours) then reads each process's capture, and:
#   - nothing is malformed, timestamps never go back;
#   - CLC: exactly Proposal, Accept, Confirm, in that order, client port to server port;
#   - LLC: CONFIRM LINK request and response; the frames each side sent and received are
#     exactly the LLC counts of its SMCR_STATS line, and so are the CDC frames;
#   - CDC: every CDC the client sent carries the alert token the server's Accept gave,
#     and goes to the QP the Accept named (BTH destination QP); the server's CONFIRM LINK
#     names the same QP;
#   - RDMA WRITEs: every one the client posted uses the Accept's RMB rkey, and their DMA
#     lengths add up to the bytes the client sent (SMCR_STATS bytes_smcr.sent);
#   - SMCR_TRACE_MAX_MB bounds the file, which still reads whole.
# Exit 0 pass, 1 fail, 77 skipped (no tshark).
set -u
ex=${1:?usage: check-trace.sh EXAMPLES_DIR}
command -v tshark >/dev/null || { echo "tshark not installed: skipped"; exit 77; }
tmp=$(mktemp -d /tmp/smcr-trace-XXXXXX)
srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
export SMCR_CONFIG=/nonexistent SMCR_DEVICES=shm SMCR_LOG=error
export SMCR_TRACE=$tmp/trace-%p.pcapng SMCR_STATS=$tmp/stats.json

run_pair() { # run_pair COUNT SIZE: server for one client, the client; pids in spid/cpid
	SMCR_RULES='use smc server * *' "$ex/smcr-echo-server" -p 0 -n 1 > "$tmp/srv.out" &
	srv=$!
	local port=
	for _ in $(seq 500); do
		port=$(sed -n 's/^listening on port \([0-9]*\).*/\1/p' "$tmp/srv.out")
		[ -n "$port" ] && break
		sleep 0.01
	done
	[ -n "$port" ] || fail "server did not start"
	SMCR_RULES='use smc client * *' "$ex/smcr-echo-client" -p "$port" -c "$1" -s "$2" \
		> "$tmp/cli.out" &
	cpid=$!
	wait "$cpid" || fail "client: $(cat "$tmp/cli.out")"
	wait "$srv" || fail "server failed"
	spid=$srv
	srv=
	sport=$port
	grep -q "^connected: mode smcr" "$tmp/cli.out" || fail "not SMC-R: $(cat "$tmp/cli.out")"
}

stat_of() { # stat_of PID KEY SUB: a number from the SMCR_STATS line of PID
	grep "\"pid\":$1," "$tmp/stats.json" | grep -o "\"$2\":{[^}]*}" |
		grep -o "\"$3\":[0-9]*" | cut -d: -f2
}

fields() { # fields FILE FIELD...: one tab-separated line per frame
	local f=$1; shift
	local args=()
	for x in "$@"; do args+=(-e "$x"); done
	tshark -r "$f" -T fields -E occurrence=f "${args[@]}" 2>/dev/null
}

run_pair 20 100000
for role in client server; do
	pid=$cpid; [ $role = server ] && pid=$spid
	f=$tmp/trace-$pid.pcapng
	[ -s "$f" ] || fail "$role: no trace $f"
	fields "$f" frame.number frame.time_epoch _ws.malformed smc.clc_msg smc.llc_msg \
		infiniband.bth.opcode infiniband.grh.sgid tcp.srcport tcp.dstport \
		> "$tmp/$role.tsv"
	[ -s "$tmp/$role.tsv" ] || fail "$role: tshark read nothing"
	awk -F'\t' '$3 != "" { print "malformed frame " $1; bad = 1 }
		$2 < last { print "time goes back at frame " $1; bad = 1 } { last = $2 }
		END { exit bad }' "$tmp/$role.tsv" || fail "$role: capture"
	clc=$(awk -F'\t' '$4 != "" { printf "%s:%s>%s ", $4, $8, $9 }' "$tmp/$role.tsv")
	cport=$(awk -F'\t' '$4 == 1 { print $8 }' "$tmp/$role.tsv")
	want="1:$cport>$sport 2:$sport>$cport 3:$cport>$sport "
	[ "$clc" = "$want" ] || fail "$role: CLC messages '$clc', want '$want'"
	# our GID: the source of the first LLC we sent (client: CONFIRM LINK response)
	llc_tx=0 llc_rx=0 cdc_tx=0 cdc_rx=0
	mygid=$(fields "$f" infiniband.grh.sgid smc.confirm.link.response smc.llc_msg |
		awk -F'\t' -v r=$role '$3 == "0x01" && (($2 == "1" && r == "client") ||
			($2 == "0" && r == "server")) { print $1; exit }')
	[ -n "$mygid" ] || fail "$role: no CONFIRM LINK of its own"
	read -r llc_tx llc_rx cdc_tx cdc_rx < <(awk -F'\t' -v g="$mygid" '
		$5 != "" { tx = ($7 == g); if ($5 == "0xfe") { if (tx) ct++; else cr++ }
			   else { if (tx) lt++; else lr++ } }
		END { print lt + 0, lr + 0, ct + 0, cr + 0 }' "$tmp/$role.tsv")
	for k in "llc sent $llc_tx" "llc received $llc_rx" "cdc sent $cdc_tx" "cdc received $cdc_rx"; do
		set -- $k
		s=$(stat_of "$pid" "$1" "$2")
		[ "$s" = "$3" ] || fail "$role: $1 $2: $3 frames, SMCR_STATS says $s"
	done
	echo "ok $role: CLC $clc; LLC $llc_tx sent $llc_rx received; CDC $cdc_tx sent $cdc_rx received"
done

# The client's CDCs and WRITEs against what the server's Accept announced.
f=$tmp/trace-$cpid.pcapng
read -r qp rkey token < <(fields "$f" smc.accept.server.qp.number smc.accept.server.rmb.rkey \
	smc.accept.server.rmb.element.alert.token | awk -F'\t' '$1 != "" { print $1, $2, $3; exit }')
[ -n "$qp" ] || fail "no Accept fields"
sqp=$(fields "$tmp/trace-$spid.pcapng" smc.confirm.link.sender.qp.number smc.confirm.link.response |
	awk -F'\t' '$1 != "" && $2 == "0" { print $1; exit }')
[ "$sqp" = "$qp" ] || fail "server CONFIRM LINK QP $sqp, Accept QP $qp"
cgid=$(fields "$f" infiniband.grh.sgid smc.clc_msg smc.llc_msg smc.confirm.link.response |
	awk -F'\t' '$3 == "0x01" && $4 == "1" { print $1; exit }')
fields "$f" infiniband.grh.sgid infiniband.bth.opcode infiniband.bth.destqp smc.llc_msg \
	smc.rmbe.ctrl.alert.token infiniband.reth.r_key infiniband.reth.dmalen |
	awk -F'\t' -v g="$cgid" -v qp="$qp" -v rk="$rkey" -v tok="$token" '
	$1 == g && $2 == 4 && $3 != qp { print "SEND to QP " $3; bad = 1 }
	$1 == g && $4 == "0xfe" && $5 != tok { print "CDC token " $5; bad = 1 }
	$1 == g && $2 == 10 { w++; sum += $7; if ($6 != rk) { print "WRITE rkey " $6; bad = 1 } }
	END { print w + 0, sum + 0 > "/dev/stderr"; exit bad }' 2> "$tmp/writes" ||
	fail "client frames do not match the Accept (QP $qp rkey $rkey token $token)"
read -r nw sum < "$tmp/writes"
sent=$(stat_of "$cpid" bytes_smcr sent)
[ "$sum" = "$sent" ] && [ "$sent" = 2000000 ] ||
	fail "WRITE lengths add up to $sum, the client sent $sent"
echo "ok client: $nw RDMA WRITEs of $sum bytes to rkey $rkey, CDCs to QP $qp token $token"

# The bound: 1 MiB, more traffic than fits; the file stays whole.
rm -f "$tmp"/trace-*.pcapng
SMCR_TRACE_MAX_MB=1 run_pair 20000 64
f=$tmp/trace-$cpid.pcapng
size=$(stat -c %s "$f")
[ "$size" -le 1048576 ] && [ "$size" -gt 900000 ] || fail "bounded file is $size bytes"
errs=$(tshark -r "$f" 2>&1 >/dev/null | grep -v "Running as user" || true)
[ -z "$errs" ] || fail "the bounded file does not read whole: $errs"
echo "ok bound: $size bytes with SMCR_TRACE_MAX_MB=1"
