#!/usr/bin/env bash
# bench/apps/run.sh: real programs over plain TCP and under smcr-run (SMC-R), side by side in one
# run. For each pair one server runs plain and one under smcr-run, each on its own loopback
# port, and the client runs against them in turns (TCP, SMC-R, TCP, SMC-R, ...), ROUNDS
# times each; the table gives both medians, the ratio SMC-R / TCP of the medians and the
# spread (min-max) of each. The mode column is read from the SMC-R side's SMCR_STATS lines
# (connections in SMC-R mode / all), never assumed.
#
#   bench/apps/run.sh [-r ROUNDS] [-d SECONDS] [--hogs N] [--only LIST] [--build DIR]
#     -r ROUNDS   runs per transport (default 3)
#     -d SECONDS  seconds per run where the program takes a duration (default 3)
#     --hogs N    N busy CPU loops (`while :; do :; done`) run beside the whole benchmark
#     --only L    comma list of: redis1 redis16 nginx1k nginx64k sockperf iperf3 memcached perf
#     --build DIR the build with smcr-run and smcr-perf (default build)
# Pairs: redis-benchmark SET/GET -c 50 -P 1 and -P 16 (ops/s), nginx + wrk keep-alive 1 KiB
# and 64 KiB (requests/s), sockperf ping-pong 64 B (average latency, lower is better), iperf3
# one stream (Gbit/s), memcached -t 2 with memcslap get (ops/s), and smcr-perf's stream 64 KiB
# and pingpong 64 B once under smcr-run (its TCP transport, interposed) and once with its own
# smcr API (the interposer's cost: there the ratio is preload / API).
# Needs the Debian packages of tests/apps (redis-tools, nginx-light, wrk, sockperf, iperf3,
# memcached, libmemcached-tools). Prints Markdown; also the load (uptime) before and after.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
rounds=3 secs=3 hogs=0 only=redis1,redis16,nginx1k,nginx64k,sockperf,iperf3,memcached,perf build=build
while [ $# -gt 0 ]; do
	case $1 in
	-r) rounds=$2; shift 2 ;;
	-d) secs=$2; shift 2 ;;
	--hogs) hogs=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	*) echo "usage: see the head of $0" >&2; exit 2 ;;
	esac
done
RUN=$(find "$root/$build" -name smcr-run -type f -perm -u+x | head -1)
PERF=$(find "$root/$build" -name smcr-perf -type f -perm -u+x -path '*tools*' | head -1)
[ -x "$RUN" ] || { echo "no smcr-run under $build (cmake --build $build)" >&2; exit 1; }
T=$(mktemp -d /tmp/smcr-bench-apps-XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; done
	sleep 0.5
	for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { local n=100; while [ $n -gt 0 ]; do ss -ltnH "sport = :$1" | grep -q . && return 0; sleep 0.1; n=$((n-1)); done; return 1; }
start() { # start TAG smcr|tcp PORT CMD...: a server in its own session
	local tag=$1 mode=$2 p=$3; shift 3
	if [ "$mode" = smcr ]; then
		setsid env "SMCR_RULES=use smc both * 127.0.0.1/8:$p" "SMCR_STATS=$T/$tag.stats" "$RUN" -- "$@" \
			>"$T/$tag.out" 2>"$T/$tag.err" </dev/null &
	else
		setsid "$@" >"$T/$tag.out" 2>"$T/$tag.err" </dev/null &
	fi
	PIDS+=($!)
	LAST=$!
	wait_port "$p"
}
stop() { # stop PID [SIGNAL]: until it exited (so its SMCR_STATS line is written)
	kill -"${2:-TERM}" "$1" 2>/dev/null
	local n=100
	while [ $n -gt 0 ] && kill -0 "$1" 2>/dev/null; do sleep 0.1; n=$((n-1)); done
	kill -KILL -- "-$1" 2>/dev/null; wait "$1" 2>/dev/null
}
client() { # client smcr|tcp PORT TAG CMD...: runs CMD, stdout to $T/TAG.last
	local mode=$1 p=$2 tag=$3; shift 3
	if [ "$mode" = smcr ]; then
		env "SMCR_RULES=use smc both * 127.0.0.1/8:$p" "SMCR_STATS=$T/$tag-client.stats" "$RUN" -- "$@" >"$T/$tag.last" 2>>"$T/$tag.cerr"
	else
		"$@" >"$T/$tag.last" 2>>"$T/$tag.cerr"
	fi
}
mode_of() { # mode_of STATS...: "smcr N/M" from SMCR_STATS lines
	cat "$@" 2>/dev/null | python3 -c '
import json, sys
s = t = 0
for l in sys.stdin:
    if l.strip():
        c = json.loads(l)["conns"]; s += c["smcr"]; t += c["smcr"] + c["tcp"] + c["failed"]
print("smcr %d/%d" % (s, t) if t else "no stats")'
}
# stats NAME UNIT BETTER VALUES_TCP VALUES_SMCR MODE: one table row
row() {
	python3 - "$@" <<'EOF'
import statistics, sys
name, unit, better, a, b, mode = sys.argv[1:7]
a = [float(x) for x in a.split()]; b = [float(x) for x in b.split()]
if not a or not b:
    print("| %s | - | - | - | - | %s |" % (name, mode)); sys.exit()
ma, mb = statistics.median(a), statistics.median(b)
f = lambda v: ("%.0f" % v) if v >= 100 else ("%.3g" % v)
print("| %s | %s %s (%s-%s) | %s %s (%s-%s) | %.2fx (%s) | %s |" % (name, f(ma), unit, f(min(a)), f(max(a)),
      f(mb), unit, f(min(b)), f(max(b)), mb / ma if ma else 0, better, mode))
EOF
}
# measure NAME UNIT BETTER TAG PORT_TCP PORT_SMCR EXTRACT CMD-with-@PORT@...
measure() {
	local name=$1 unit=$2 better=$3 tag=$4 pt=$5 ps=$6 extract=$7; shift 7
	local va= vb= i m p v
	for i in $(seq 1 "$rounds"); do
		for m in tcp smcr; do
			p=$pt; [ $m = smcr ] && p=$ps
			local cmd=("${@//@PORT@/$p}")
			client $m "$p" "$tag" "${cmd[@]}"
			v=$(eval "$extract" <"$T/$tag.last")
			[ $m = tcp ] && va="$va $v" || vb="$vb $v"
		done
	done
	ROW=("$name" "$unit" "$better" "$va" "$vb")
}
want() { [[ ",$only," == *",$1,"* ]]; }

hog_pids=()
for i in $(seq 1 "$hogs"); do
	setsid bash -c 'while :; do :; done' & hog_pids+=($!); PIDS+=($!)
done

echo "# bench/apps: TCP and SMC-R (smcr-run) in turns, $rounds rounds each, ${secs} s runs, $hogs CPU hog(s)"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg), main $(git rev-parse --short HEAD 2>/dev/null)"
echo
echo "| pair | TCP median (min-max) | SMC-R median (min-max) | SMC-R / TCP | mode (SMC-R side) |"
echo "| --- | ---: | ---: | ---: | --- |"

if want redis1 || want redis16; then
	a=$(port); b=$(port)
	start redis-tcp tcp "$a" redis-server --port "$a" --bind 127.0.0.1 --save '' --appendonly no --protected-mode no; st=$LAST
	start redis-smcr smcr "$b" redis-server --port "$b" --bind 127.0.0.1 --save '' --appendonly no --protected-mode no; ss_=$LAST
	ex='awk -F"\"" '"'"'NR > 1 { s += $4; n++ } END { printf "%.0f", s / n }'"'"
	if want redis1; then
		measure "redis-benchmark SET+GET -c 50 -P 1" ops/s higher redis1 "$a" "$b" "$ex" \
			redis-benchmark -h 127.0.0.1 -p @PORT@ -c 50 -P 1 -n $((secs * 25000)) -t set,get --csv
		R1=("${ROW[@]}")
	fi
	if want redis16; then
		measure "redis-benchmark SET+GET -c 50 -P 16" ops/s higher redis16 "$a" "$b" "$ex" \
			redis-benchmark -h 127.0.0.1 -p @PORT@ -c 50 -P 16 -n $((secs * 250000)) -t set,get --csv
		R16=("${ROW[@]}")
	fi
	stop "$st"; stop "$ss_"
	want redis1 && row "${R1[@]}" "server $(mode_of "$T/redis-smcr.stats"), client $(mode_of "$T/redis1-client.stats")"
	want redis16 && row "${R16[@]}" "server $(mode_of "$T/redis-smcr.stats"), client $(mode_of "$T/redis16-client.stats")"
fi

if want nginx1k || want nginx64k; then
	www=$T/www; mkdir -p "$www"
	head -c 1024 /dev/urandom >"$www/1k"; head -c 65536 /dev/urandom >"$www/64k"
	for m in tcp smcr; do
		p=$(port); eval "np_$m=$p"; mkdir -p "$T/ngx-$m"
		cat >"$T/ngx-$m/nginx.conf" <<EOF
daemon off; master_process on; worker_processes 2; user root;
pid $T/ngx-$m/nginx.pid; error_log $T/ngx-$m/error.log warn;
events { worker_connections 1024; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000;
  client_body_temp_path $T/ngx-$m/b; proxy_temp_path $T/ngx-$m/p; fastcgi_temp_path $T/ngx-$m/f;
  uwsgi_temp_path $T/ngx-$m/u; scgi_temp_path $T/ngx-$m/s; types { } default_type application/octet-stream;
  server { listen 127.0.0.1:$p; root $www; } }
EOF
		start "nginx-$m" $m "$p" /usr/sbin/nginx -p "$T/ngx-$m" -c "$T/ngx-$m/nginx.conf" -e "$T/ngx-$m/error.log"
		eval "npid_$m=$LAST"
	done
	ex='sed -nE "s/^Requests\/sec: *([0-9.]+).*/\1/p"'
	if want nginx1k; then
		measure "nginx + wrk 1 KiB keep-alive (-t 1 -c 8)" req/s higher wrk1k "$np_tcp" "$np_smcr" "$ex" \
			wrk -t 1 -c 8 -d "${secs}s" http://127.0.0.1:@PORT@/1k
		N1=("${ROW[@]}")
	fi
	if want nginx64k; then
		measure "nginx + wrk 64 KiB keep-alive (-t 1 -c 8)" req/s higher wrk64k "$np_tcp" "$np_smcr" "$ex" \
			wrk -t 1 -c 8 -d "${secs}s" http://127.0.0.1:@PORT@/64k
		N64=("${ROW[@]}")
	fi
	stop "$npid_tcp" QUIT; stop "$npid_smcr" QUIT
	want nginx1k && row "${N1[@]}" "server $(mode_of "$T/nginx-smcr.stats"), client $(mode_of "$T/wrk1k-client.stats")"
	want nginx64k && row "${N64[@]}" "server $(mode_of "$T/nginx-smcr.stats"), client $(mode_of "$T/wrk64k-client.stats")"
fi

if want sockperf; then
	a=$(port); b=$(port)
	start sp-tcp tcp "$a" sockperf server --tcp -i 127.0.0.1 -p "$a"; st=$LAST
	start sp-smcr smcr "$b" sockperf server --tcp -i 127.0.0.1 -p "$b"; ss_=$LAST
	measure "sockperf ping-pong 64 B, average latency" us lower sockperf "$a" "$b" \
		'sed -nE "s/.*Summary: Latency is ([0-9.]+) usec.*/\1/p"' \
		bash -c "sockperf ping-pong --tcp -i 127.0.0.1 -p @PORT@ -m 64 -t $secs 2>&1"
	stop "$st" INT; stop "$ss_" INT
	row "${ROW[@]}" "server $(mode_of "$T/sp-smcr.stats"), client $(mode_of "$T/sockperf-client.stats")"
fi

if want iperf3; then
	a=$(port); b=$(port)
	start ip-tcp tcp "$a" iperf3 -s -B 127.0.0.1 -p "$a"; st=$LAST
	start ip-smcr smcr "$b" iperf3 -s -B 127.0.0.1 -p "$b"; ss_=$LAST
	measure "iperf3, one stream" Gbit/s higher iperf3 "$a" "$b" \
		'python3 -c "import json,sys; print(json.load(sys.stdin)[\"end\"][\"sum_received\"][\"bits_per_second\"]/1e9)"' \
		iperf3 -c 127.0.0.1 -p @PORT@ -t "$secs" -J
	stop "$st"; stop "$ss_"
	row "${ROW[@]}" "server $(mode_of "$T/ip-smcr.stats"), client $(mode_of "$T/iperf3-client.stats")"
fi

if want memcached; then
	a=$(port); b=$(port)
	start mc-tcp tcp "$a" memcached -t 2 -l 127.0.0.1 -p "$a" -U 0 -u root; st=$LAST
	start mc-smcr smcr "$b" memcached -t 2 -l 127.0.0.1 -p "$b" -U 0 -u root; ss_=$LAST
	n=$((secs * 10000))
	measure "memcached -t 2, memcslap get -c 4" ops/s higher memcached "$a" "$b" \
		"sed -nE 's/.*Time to get +([0-9]+) keys by +[0-9]+ threads: +([0-9.]+) seconds.*/\\1 \\2/p' | awk '{ printf \"%.0f\", \$1 / \$2 }'" \
		memcslap --servers=127.0.0.1:@PORT@ -t get -c 4 -e "$n"
	stop "$st"; stop "$ss_"
	row "${ROW[@]}" "server $(mode_of "$T/mc-smcr.stats"), client $(mode_of "$T/memcached-client.stats")"
fi

if want perf && [ -x "$PERF" ]; then
	# smcr-perf's own SMC-R (the API, linked) against its TCP transport under smcr-run
	a=$(port); b=$(port)
	setsid "$PERF" server -B 127.0.0.1 -p "$a" --transport smcr >"$T/perf-api.out" 2>&1 </dev/null &
	PIDS+=($!); pa=$!; wait_port "$a"
	SMCR_PERF_NO_RULES=1 start perf-pre smcr "$b" "$PERF" server -B 127.0.0.1 -p "$b" --transport tcp; pb=$LAST
	for t in "stream 64K higher Gbit/s" "pingpong 64 lower us"; do
		set -- $t
		va= vb=
		for i in $(seq 1 "$rounds"); do
			"$PERF" client 127.0.0.1 -p "$a" --transport smcr -t "$1" -s "$2" -d "$secs" --dat >"$T/perf.last" 2>>"$T/perf.cerr"
			va="$va $(grep -v '^#' "$T/perf.last" | awk '{ print $5 }')"
			SMCR_PERF_NO_RULES=1 client smcr "$b" perf "$PERF" client 127.0.0.1 -p "$b" --transport tcp -t "$1" -s "$2" -d "$secs" --dat
			vb="$vb $(grep -v '^#' "$T/perf.last" | awk '{ print $5 }')"
		done
		eval "P_$1=(\"smcr-perf $1 $2: API (TCP column) vs smcr-run\" \"$4\" \"$3\" \"$va\" \"$vb\")"
	done
	stop "$pa"; stop "$pb"
	md="server $(mode_of "$T/perf-pre.stats"), client $(mode_of "$T/perf-client.stats")"
	row "${P_stream[@]}" "$md"
	row "${P_pingpong[@]}" "$md"
fi
echo
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
