#!/usr/bin/env bash
# demo.sh: the README's first command: SMC-R against TCP, measured now, on this machine.
# Installs what is missing (scripts/deps.sh), builds smcr-perf (build/demo, only when
# something changed), then runs `smcr-perf compare` twice: stream with 64 KiB writes
# (throughput) and pingpong with 64-byte messages (round-trip time), each over plain TCP and
# over SMC-R in turns, 3 rounds of 1 s per transport after one uncounted warm-up round each.
# Prints one short table: the transport the connections really used (read from the smcr
# engine), throughput, round-trip time and the SMC-R / TCP ratio. About 20 s once built.
# Then a real program pair: redis-server and redis-benchmark (Debian's redis-server and
# redis-tools, installed when missing), once plain and once both under smcr-run, in turns
# (bench/apps/run.sh --only redis1: 3 rounds each), with the mode read from both ends'
# SMCR_STATS lines. About 20 s more. DEMO_SECONDS=N changes the seconds per run;
# DEMO_NO_REDIS=1 leaves the redis part out.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build/demo -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSMCR_TESTS=OFF >/dev/null
cmake --build build/demo -j"$jobs" --target smcr-perf >/dev/null
# the interposer (smcr-run and libsmcr-preload.so), for the redis part
cmake --build build/demo -j"$jobs" --target smcr-run >/dev/null 2>&1 || true
perf=build/demo/tools/smcr-perf/smcr-perf
secs=${DEMO_SECONDS:-1}

cat <<EOF
smcr demo: SMC-R against TCP, measured now on this machine ($(nproc) cores)

SMC-R (RFC 7609) keeps TCP's socket API, but after a short handshake inside the TCP
connection the bytes move by RDMA writes straight into the peer's memory. Here both ends
run on this host over smcr's same-host shared-memory RDMA device, so no RDMA hardware is
needed. smcr-perf starts a TCP server and an SMC-R server on loopback and runs each test
over plain TCP and over SMC-R in turns (3 rounds each, ${secs} s per round, after one
warm-up round each that is not counted); the figures are medians. "connections used" is what the smcr engine reports for the connections.

EOF

if ! "$perf" --version | grep -q smcr; then
	echo "demo: this build has no smcr socket library (src/sock): nothing to compare" >&2
	exit 1
fi

# --dat columns: test size tcp smcr ratio unit mode ...
stream=$("$perf" compare -t stream -s 64K -d "$secs" --dat | grep -v '^#')
ping=$("$perf" compare -t pingpong -s 64 -d "$secs" --dat | grep -v '^#')

printf '%s\n%s\n' "$stream" "$ping" | awk '
function v(x, unit) { return (x == "-") ? "-" : sprintf("%.3g %s", x, unit) }
{ t[$1] = $3; s[$1] = $4; r[$1] = $5; u[$1] = $6; m[$1] = $7 }
END {
	used = (m["stream"] == m["pingpong"]) ? m["stream"] : m["stream"] " / " m["pingpong"]
	printf "  %-30s %-14s %-14s %s\n", "", "TCP", "SMC-R", "SMC-R / TCP"
	printf "  %-30s %-14s %s\n", "connections used", "tcp", used
	printf "  %-30s %-14s %-14s %.2fx (higher is better)\n", "throughput, 64 KiB writes",
		v(t["stream"], u["stream"]), v(s["stream"], u["stream"]), r["stream"]
	printf "  %-30s %-14s %-14s %.2fx (lower is better)\n", "round trip, 64-byte messages",
		v(t["pingpong"], "us"), v(s["pingpong"], "us"), r["pingpong"]
	if (used != "smcr")
		print "\n  SMC-R was not used for every connection: `" perf " compare -t pingpong` prints why."
}' perf="$perf"

redis_part() {
	[ "${DEMO_NO_REDIS:-0}" = 1 ] && return 0
	if [ ! -x build/demo/tools/smcr-run/smcr-run ]; then
		echo; echo "  (no smcr-run in this build: the redis part is left out)"; return 0
	fi
	if ! command -v redis-benchmark >/dev/null || ! command -v redis-server >/dev/null; then
		local sudo_cmd=()
		[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
		echo; echo "demo: installing redis-server redis-tools (apt-get)"
		DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
			redis-server redis-tools >/dev/null 2>&1 || { echo "  (cannot install redis: the redis part is left out)"; return 0; }
	fi
	cat <<EOT

An unmodified program pair: redis-server and redis-benchmark (SET and GET, 50 clients, no
pipelining), once over plain TCP and once with both started by smcr-run, in turns, 3 rounds
each; "mode" counts the connections each end's smcr library reports in SMC-R mode (SMCR_STATS).

EOT
	local out
	out=$(bash bench/apps/run.sh --only redis1 -r 3 -d "$secs" --build build/demo | grep '^| redis')
	# | name | tcp med (min-max) | smcr med (min-max) | ratio (higher) | mode |
	awk -F' *[|] *' '{
		printf "  %-30s %-14s %-14s %s\n", "", "TCP", "SMC-R", "SMC-R / TCP"
		split($3, a, " "); split($4, b, " "); split($5, r, " ")
		printf "  %-30s %-14s %-14s %s (higher is better)\n", "redis SET+GET ops/s", a[1], b[1], r[1]
		printf "  %-30s %s\n", "mode under smcr-run", $6
	}' <<<"$out"
}
redis_part

cat <<EOF

More: $perf compare -t stream|pingpong|connect|conns [-s 64,1K,64K] [--json] [--cpu]
      bench/report  (a size sweep: Markdown table and PNG plot)
EOF
