#!/bin/bash
# check-stat.sh BINDIR CC_ARGS... : smcr-stat, the counters and the trace as a user of an
# installed smcr meets them (docs/man/smcr-stat.8, docs/INSTALL.md). Everything it runs comes
# from the installation: BINDIR's smcr-stat and smcr-run (with the interposer it finds beside
# itself), and the examples built with `cc $(pkg-config --cflags --libs smcr) CC_ARGS...`
# (PKG_CONFIG_PATH as the caller set it). Shared by check-prefix.sh and check-deb.sh.
#
#   S   smcr-echo-server (linked against the API), SMC-R for every client that offers it
#   C1  socat under smcr-run, SMC-R: 4096 bytes echoed, then 100 more
#   C2  socat under smcr-run with the rule `use tcp client`: TCP, 1000 bytes echoed
#   C3  plain socat (no smcr at all): TCP, 700 bytes echoed
# It checks, in text and --json (parsed by python3):
#   - C1 and S's end are smcr, same link group on both sides, QPNs and GIDs crossed (our
#     local is the peer's peer), exact byte counts each way;
#   - C2 is tcp with the local reason RULE_TCP, S's ends of C2 and C3 tcp with PEERNOSMC,
#     exact bytes; C3's process is not listed (it is not an smcr process);
#   - -l the listener, -L the link group with its link (state, QPNs, GIDs), -d the device;
#   - S's counters (-s): 1 smcr, 2 tcp, PEERNOSMC 2, bytes of both kinds exact; they move
#     with 100 more bytes; --reset gives zero; after it 10 bytes count 10;
#   - SIGKILL of C1: gone from the first listing after it is reaped; no socket name of it left in
#     /proc/net/unix and no file of it under /dev/shm or /run/smcr;
#   - a second user (made with useradd when root; skipped otherwise) sees none of these
#     processes and gets no byte from their sockets, while its own smcr process is listed
#     for it;
#   - SMCR_TRACE: tests/tshark/check-trace.sh against these installed examples (tshark
#     decodes every CLC, LLC, CDC and RDMA WRITE field; skipped when tshark is missing).
# Exit 0 pass, 1 fail.
set -u
bindir=${1:?usage: check-stat.sh BINDIR CC_ARGS...}
shift
src=${SMCR_SOURCE_DIR:?}
stat=$bindir/smcr-stat run=$bindir/smcr-run
for t in "$stat" "$run"; do [ -x "$t" ] || { echo "FAIL: no $t"; exit 1; }; done
command -v socat >/dev/null || { echo "FAIL: socat missing (scripts/deps.sh test)"; exit 1; }
tmp=$(mktemp -d /tmp/smcr-inst-stat-XXXXXX)
chmod 755 "$tmp"
pids=() user=
cleanup() {
	exec 3>&- 4>&- 5>&- 2>/dev/null
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "$user" ] && { pkill -9 -u "$user" 2>/dev/null; userdel -r "$user" 2>/dev/null; }
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; "$stat" -a; exit 1; }
export SMCR_CONFIG=/nonexistent SMCR_DEVICES=shm SMCR_LOG=error
unset SMCR_STATS SMCR_TRACE SMCR_RULES

flags=$(pkg-config --cflags --libs smcr)
for ex in smcr-echo-server smcr-echo-client; do
	cc -std=c11 -Wall -Werror -o "$tmp/$ex" "$src/examples/$ex.c" $flags "$@" ||
		fail "cc $ex with pkg-config"
done

wait_size() { # wait_size FILE BYTES: until FILE has BYTES (10 s)
	for _ in $(seq 1000); do
		[ "$(stat -c %s "$1" 2>/dev/null)" = "$2" ] && return 0
		sleep 0.01
	done
	return 1
}
# -p: only that process is asked (another process of this user that does not answer, a
# test's hung program, would cost the whole listing its 2 s wait)
listed() { "$stat" -a -p "$1" | grep -Eq "^$1 "; }
# sq FILE "PID..." ARGS...: smcr-stat ARGS into FILE, again (10 tries) while a PID is missing
# from it: a process that is slow to answer (a loaded host) is left out of that listing
# (smcr-stat waits 2 s), which is not what these checks are about
sq() {
	local f=$1 want=$2 p ok
	shift 2
	for _ in $(seq 10); do
		"$stat" "$@" > "$f"
		ok=1
		for p in $want; do grep -Eq "^$p |\"pid\":$p," "$f" || ok=; done
		[ -n "$ok" ] && return 0
	done
	return 1
}

SMCR_RULES='use smc server * *' "$tmp/smcr-echo-server" -p 0 > "$tmp/srv.out" &
S=$!; pids+=($S)
port=
for _ in $(seq 500); do
	port=$(sed -n 's/^listening on port \([0-9]*\).*/\1/p' "$tmp/srv.out")
	[ -n "$port" ] && break
	sleep 0.01
done
[ -n "$port" ] || fail "server did not start"
mkfifo "$tmp/in1" "$tmp/in2" "$tmp/in3"
head -c 10000 /dev/urandom > "$tmp/data"
SMCR_RULES='use smc client * *' "$run" socat - "TCP:127.0.0.1:$port" < "$tmp/in1" > "$tmp/out1" &
C1=$!; pids+=($C1)
exec 3> "$tmp/in1"
head -c 4096 "$tmp/data" >&3
wait_size "$tmp/out1" 4096 || fail "C1: no echo"
SMCR_RULES='use tcp client * *' "$run" socat - "TCP:127.0.0.1:$port" < "$tmp/in2" > "$tmp/out2" &
C2=$!; pids+=($C2)
exec 4> "$tmp/in2"
head -c 1000 "$tmp/data" >&4
wait_size "$tmp/out2" 1000 || fail "C2: no echo"
socat - "TCP:127.0.0.1:$port" < "$tmp/in3" > "$tmp/out3" &
C3=$!; pids+=($C3)
exec 5> "$tmp/in3"
head -c 700 "$tmp/data" >&5
wait_size "$tmp/out3" 700 || fail "C3: no echo"
cmp -s "$tmp/out1" <(head -c 4096 "$tmp/data") || fail "C1 echo differs"

# ---- the listing, text ----
sq "$tmp/text" "$C1 $C2 $S" || fail "not every process answered"
ip='127\.0\.0\.1'
grep -Eq "^$C1 +socat +[0-9]+ +smcr +client +$ip:[0-9]+ +$ip:$port +[0-9]+/[0-9]+ +- +4096 +4096$" \
	"$tmp/text" || fail "C1 line"
grep -Eq "^$C2 +socat +[0-9]+ +tcp +client +$ip:[0-9]+ +$ip:$port +- +RULE_TCP/NONE +1000 +1000$" \
	"$tmp/text" || fail "C2 line"
grep -Eq "^$S +smcr-echo-serve +[0-9]+ +smcr +server +$ip:$port .* 4096 +4096$" "$tmp/text" ||
	fail "S's SMC-R line"
[ "$(grep -Ec "^$S +smcr-echo-serve +[0-9]+ +tcp +server +$ip:$port .* PEERNOSMC/NONE +(1000 +1000|700 +700)$" \
	"$tmp/text")" = 2 ] || fail "S's two TCP lines with PEERNOSMC"
grep -Eq "^$C3 " "$tmp/text" && fail "plain socat listed"
sq "$tmp/l" "$S" -l && grep -Eq "^$S +smcr-echo-serve +[0-9]+ +listen +- +0\.0\.0\.0:$port " "$tmp/l" ||
	fail "-l"
sq "$tmp/d" "$C1 $S" -d || fail "-d: not every process answered"
grep -Eq "^$C1 +socat +shm +1 +1 +1 " "$tmp/d" || fail "-d C1"
grep -Eq "^$S +smcr-echo-serve +shm +1 +1 +1 " "$tmp/d" || fail "-d S"
sq "$tmp/lgs" "$C1 $S" -L || fail "-L: not every process answered"
gid='[0-9a-f:]*:[0-9a-f:]+'
grep -Eq "^$C1 +socat +[0-9]+ +client +ACTIVE +1 +[0-9]+ +ACTIVE +[^ ]+ +1 +[1-9][0-9]* +[1-9][0-9]* +0 $gid $gid$" \
	"$tmp/lgs" || fail "-L C1"
grep -Eq "^$S +smcr-echo-serve +[0-9]+ +server +ACTIVE +1 +[0-9]+ +ACTIVE +[^ ]+ +1 +[1-9][0-9]* +[1-9][0-9]* +0 $gid $gid$" \
	"$tmp/lgs" || fail "-L S"
echo "ok text: C1 smcr, C2 RULE_TCP, S PEERNOSMC x2, exact bytes; -l -L -d"

# ---- JSON ----
sq "$tmp/j1" "$C1 $C2 $S" --json || fail "--json: not every process answered"
python3 - "$tmp/j1" "$C1" "$C2" "$C3" "$S" <<'PY' || fail "JSON"
import json, sys
doc = json.load(open(sys.argv[1]))
c1, c2, c3, s = (int(x) for x in sys.argv[2:6])
procs = {p["pid"]: p for p in doc}
assert c3 not in procs, "plain socat listed"
def conns(pid, mode):
    return [c for c in procs[pid]["conns"] if c["mode"] == mode]
(a,) = conns(c1, "smcr")
(b,) = conns(s, "smcr")
assert a["role"] == "client" and b["role"] == "server"
assert a["local"] == b["peer"] and a["peer"] == b["local"], (a, b)
assert a["bytes_sent"] == a["bytes_received"] == 4096, a
assert b["bytes_sent"] == b["bytes_received"] == 4096, b
assert a["local_qpn"] == b["peer_qpn"] > 0 and a["peer_qpn"] == b["local_qpn"] > 0
assert a["local_gid"] == b["peer_gid"] and a["peer_gid"] == b["local_gid"], (a, b)
assert ":" in a["local_gid"] and a["local_gid"] != a["peer_gid"]
assert a["link"] == b["link"] > 0 and a["rmbe"] == b["peer_rmbe"] > 0
assert a["local_reason"] == "NONE" and a["peer_reason"] == "NONE"
(t2,) = conns(c2, "tcp")
assert t2["local_reason"] == "RULE_TCP" and t2["bytes_sent"] == t2["bytes_received"] == 1000, t2
st = sorted((c for c in conns(s, "tcp")), key=lambda c: c["bytes_sent"])
assert [c["local_reason"] for c in st] == ["PEERNOSMC"] * 2, st
assert [c["bytes_sent"] for c in st] == [700, 1000] and [c["bytes_received"] for c in st] == [700, 1000]
assert t2["local"] in [c["peer"] for c in st]
for pid, role in ((c1, "client"), (s, "server")):
    (lg,) = procs[pid]["lgs"]
    assert lg["role"] == role and lg["state"] == "ACTIVE" and lg["conns"] == 1, lg
    (l,) = lg["links"]
    mine = a if pid == c1 else b
    assert l["state"] == "ACTIVE" and l["local_qpn"] == mine["local_qpn"], l
    assert l["conns"] == 1 and l["device"] and lg["failovers"] == 0, l
    assert l["local_gid"] == mine["local_gid"] and l["peer_gid"] == mine["peer_gid"], l
ctr = procs[s]["counters"]
assert ctr["conns"] == {"smcr": 1, "tcp": 2, "failed": 0}, ctr
assert ctr["fallback_local"] == {"PEERNOSMC": 2}, ctr
assert ctr["bytes_smcr"] == {"sent": 4096, "received": 4096}, ctr
assert ctr["bytes_tcp"] == {"sent": 1700, "received": 1700}, ctr
c2c = procs[c2]["counters"]
assert c2c["conns"] == {"smcr": 0, "tcp": 1, "failed": 0} and c2c["fallback_local"] == {"RULE_TCP": 1}, c2c
assert procs[c1]["devices"]["open"] == 1 and procs[c1]["engine"]["lgs"] == 1
print("ok json: QPNs", a["local_qpn"], b["local_qpn"], "GIDs", a["local_gid"], b["local_gid"])
PY

# ---- counters: move, reset, move again ----
tail -c +4097 "$tmp/data" | head -c 100 >&3
wait_size "$tmp/out1" 4196 || fail "C1: no echo of 100 more"
sq "$tmp/s" "$S" -s -p "$S" || fail "-s: no answer"
s1=$(cat "$tmp/s")
grep -q '"bytes_smcr":{"sent":4196,"received":4196}' <<<"$s1" || fail "-s after 100 more: $s1"
grep -q '"cdc":{"sent":[1-9]' <<<"$s1" || fail "-s: no CDC counted: $s1"
sq "$tmp/r" "$S" --reset -p "$S" || fail "--reset: no answer"
sq "$tmp/s" "$S" -s -p "$S" || fail "-s: no answer"
s2=$(cat "$tmp/s")
for want in '"conns":{"smcr":0,"tcp":0,"failed":0}' '"fallback_local":{}' \
	'"bytes_smcr":{"sent":0,"received":0}' '"bytes_tcp":{"sent":0,"received":0}' \
	'"cdc":{"sent":0,"received":0,' '"llc":{"sent":0,"received":0,'; do
	grep -qF "$want" <<<"$s2" || fail "after --reset, want $want: $s2"
done
tail -c +5000 "$tmp/data" | head -c 10 >&3
wait_size "$tmp/out1" 4206 || fail "C1: no echo after reset"
sq "$tmp/s" "$S" -s -p "$S" || fail "-s: no answer"
s3=$(cat "$tmp/s")
grep -q '"bytes_smcr":{"sent":10,"received":10}' <<<"$s3" || fail "after reset + 10 bytes: $s3"
echo "ok counters: 4196 bytes, reset to 0, then 10"

# ---- SIGKILL ----
# Once the killed process is reaped its files are closed and its socket's name is gone
# (abstract: no file to remove), so the very first listing after that must not show it:
# "within a second" holds with no timing in the test.
t0=$(date +%s%N)
kill -9 "$C1"
wait "$C1" 2>/dev/null
listed "$C1" && fail "killed C1 still listed once reaped"
ms=$((($(date +%s%N) - t0) / 1000000))
"$stat" -a | grep -Eq "^$C1 " && fail "killed C1 in the full listing"
grep -q "smcr-stat/[0-9]*/$C1\$" /proc/net/unix && fail "C1's socket name is left"
grep -Eq "[/@]smcr[^ ]*[-/.]$C1([^0-9]|\$)" /proc/net/unix && fail "a socket of C1 is left"
left=$(find /dev/shm /run/smcr -name "*$C1*" 2>/dev/null)
[ -z "$left" ] || fail "C1 left: $left"
"$stat" --json | python3 -c "import json,sys; assert $C1 not in [p['pid'] for p in json.load(sys.stdin)]" ||
	fail "C1 in the JSON listing"
echo "ok SIGKILL: C1 gone from the listing after $ms ms, nothing left"

# ---- a second user ----
if [ "$(id -u)" = 0 ] && command -v useradd >/dev/null && command -v setpriv >/dev/null; then
	user=smcrst$$
	useradd -M -d /nonexistent -s /usr/sbin/nologin "$user" || fail "useradd"
	uid=$(id -u "$user") gid=$(id -g "$user")
	as() { setpriv --reuid="$uid" --regid="$gid" --clear-groups "$@"; }
	SMCR_RULES='use smc server * *' setpriv --reuid="$uid" --regid="$gid" --clear-groups \
		"$tmp/smcr-echo-server" -p 0 > "$tmp/srv2.out" 2>&1 &
	S2=$!; pids+=($S2)
	for _ in $(seq 500); do grep -q "^listening" "$tmp/srv2.out" && break; sleep 0.01; done
	grep -q "^listening" "$tmp/srv2.out" || fail "second user's server did not start"
	for _ in $(seq 500); do as "$stat" -l | grep -Eq "^$S2 " && break; sleep 0.01; done
	theirs=$(as "$stat" -a | tail -n +2)
	grep -Eq "^$S2 +smcr-echo-serve +[0-9]+ +listen " <<<"$theirs" ||
		fail "the second user's own server not listed for it: $theirs"
	grep -Ev "^$S2 " <<<"$theirs" | grep -q . && fail "the second user sees: $theirs"
	as "$stat" --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert [p['pid'] for p in d] == [$S2], d
assert all(p['uid'] == $uid for p in d)" || fail "the second user's JSON"
	for w in -L -d -s; do
		as "$stat" $w | grep -Eq "^($S|$C2) " && fail "the second user sees with $w"
	done
	# asked directly, the first user's process answers nothing at all
	got=$(echo "json all" | as socat -t 2 - "ABSTRACT-CONNECT:smcr-stat/$(id -u)/$S" 2>/dev/null |
		wc -c)
	[ "$got" = 0 ] || fail "the first user's process answered $got bytes to the second"
	mine=$(echo "json all" | socat -t 2 - "ABSTRACT-CONNECT:smcr-stat/$(id -u)/$S" | wc -c)
	[ "$mine" -gt 100 ] || fail "the same query by its own user got $mine bytes"
	# and root sees both users' processes
	"$stat" -a | grep -Eq "^$S2 " || fail "root does not see the second user's process"
	echo "ok second user ($user, uid $uid): sees only its own process, gets nothing from ours"
else
	echo "not root (or no useradd/setpriv): the second-user check is skipped"
fi
exec 3>&- 4>&- 5>&-

# ---- the trace, from these installed examples ----
bash "$src/tests/tshark/check-trace.sh" "$tmp"
rc=$?
case $rc in
0) ;;
77) echo "tshark missing: the trace check is skipped" ;;
*) fail "trace (check-trace.sh on the installed examples)" ;;
esac
echo "smcr-stat from $bindir: all checks passed"
