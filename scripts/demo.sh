#!/usr/bin/env bash
# demo.sh: the README's first command: SMC-R against TCP, measured now, on this machine.
# Installs what is missing (scripts/deps.sh), builds smcr-perf (build/demo, only when
# something changed), then runs `smcr-perf compare` twice: stream with 64 KiB writes
# (throughput) and pingpong with 64-byte messages (round-trip time), each over plain TCP and
# over SMC-R in turns, 3 rounds of 1 s per transport after one uncounted warm-up round each.
# Prints one short table: the transport the connections really used (read from the smcr
# engine), throughput, round-trip time and the SMC-R / TCP ratio. About 20 s once built.
# DEMO_SECONDS=N changes the seconds per run.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build/demo -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSMCR_TESTS=OFF >/dev/null
cmake --build build/demo -j"$jobs" --target smcr-perf >/dev/null
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

cat <<EOF

More: $perf compare -t stream|pingpong|connect|conns [-s 64,1K,64K] [--json] [--cpu]
      bench/report  (a size sweep: Markdown table and PNG plot)
EOF
