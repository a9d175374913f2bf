# shellcheck shell=bash
# tests/apps/lib.sh: what every real-program test (tests/apps/test_*.sh) shares: installing a
# Debian package or skipping, a free loopback port, running a program under smcr-run (or
# not), stopping and cleaning up every process and file it made, and reading the SMCR_STATS
# lines (docs/INTERPOSER.md) to prove which mode the connections ran in.
#
# Sourced, never run. A test calls app_init NAME first. Exit status 77 is a skip (CTest's
# SKIP_RETURN_CODE): a program that cannot be installed, or no smcr-run in the build.
#
# Environment:
#   SMCR_RUN          the smcr-run to use (CTest passes the built one; else searched in
#                     $SMCR_BINARY_DIR)
#   SMCR_APPS_PLAIN=1 run every program without smcr-run and skip the mode checks: the
#                     harness itself checked against plain TCP
#   SMCR_APPS_KEEP=1  keep the temporary directory (logs, stats) for a look afterwards
#   SMCR_APPS_INSTALL=0  never apt-get install; skip instead

set -uo pipefail

APP_NAME=
APP_TMP=
APP_PIDS=()
APP_FAILS=0
APP_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Debian's python3 (the one libpython3.11-testsuite belongs to), never a wrapper (pyenv's
# shims are shell scripts that fork before they exec python)
APP_PY=/usr/bin/python3

app_log() { printf '[%s %s] %s\n' "$APP_NAME" "$(date +%H:%M:%S)" "$*"; }
app_skip() { printf 'SKIP %s: %s\n' "$APP_NAME" "$*"; exit 77; }
app_die() { printf 'FAIL %s: %s\n' "$APP_NAME" "$*"; exit 1; }
# app_check DESC COMMAND...: runs COMMAND; a failure is counted and the test goes on, so one
# run reports every broken case.
app_check() {
	local desc=$1; shift
	if "$@"; then app_log "ok   $desc"; else app_log "FAIL $desc"; APP_FAILS=$((APP_FAILS + 1)); fi
}
# app_open "WHY" DESC CMD...: a case that fails today for an open bug (WHY names it and where
# it is written down, docs/INTERPOSER.md "Proven programs"). It still runs and its result is
# logged, so a fix shows ("passes now: remove the mark"), but it does not fail the test.
app_open() {
	local why=$1 desc=$2; shift 2
	if "$@"; then app_log "ok   $desc (marked open: $why; passes now: remove the mark)"
	else app_log "OPEN $desc: fails as known ($why)"; fi
}
app_done() {
	if [ "$APP_FAILS" -ne 0 ]; then printf 'FAIL %s: %d check(s) failed (logs: %s)\n' "$APP_NAME" "$APP_FAILS" "$APP_TMP"; SMCR_APPS_KEEP=1; exit 1; fi
	printf 'PASS %s\n' "$APP_NAME"; exit 0
}

app_cleanup() {
	local p
	for p in "${APP_PIDS[@]}"; do app_kill "$p"; done
	if [ -n "$APP_TMP" ] && [ -d "$APP_TMP" ]; then
		if [ "${SMCR_APPS_KEEP:-0}" = 1 ]; then echo "kept $APP_TMP"; else rm -rf "$APP_TMP"; fi
	fi
}

# app_init NAME: temporary directory, cleanup trap, smcr-run located (or skip).
app_init() {
	APP_NAME=$1
	APP_TMP=$(mktemp -d "/tmp/smcr-apps-$APP_NAME-XXXXXX") || app_die "mktemp"
	trap app_cleanup EXIT
	trap 'exit 130' INT TERM
	if [ "${SMCR_APPS_PLAIN:-0}" = 1 ]; then
		app_log "SMCR_APPS_PLAIN=1: every program runs without smcr-run, no mode checks"
		return
	fi
	if [ -z "${SMCR_RUN:-}" ] && [ -n "${SMCR_BINARY_DIR:-}" ]; then
		SMCR_RUN=$(find "$SMCR_BINARY_DIR" -name smcr-run -type f -perm -u+x 2>/dev/null | head -1)
	fi
	[ -n "${SMCR_RUN:-}" ] && [ -x "$SMCR_RUN" ] ||
		app_skip "no smcr-run in the build (set SMCR_RUN, or SMCR_APPS_PLAIN=1 to check the harness on TCP)"
}

# app_need CMD:PACKAGE...: each command present, or its Debian package installed now, or skip.
app_need() {
	local spec cmd pkg missing=()
	for spec in "$@"; do
		cmd=${spec%%:*}; pkg=${spec#*:}
		if [ "${cmd:0:1}" = / ]; then [ -e "$cmd" ] && continue
		else command -v "$cmd" >/dev/null 2>&1 && continue; fi
		missing+=("$pkg")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "${SMCR_APPS_INSTALL:-1}" = 1 ] || app_skip "not installed: ${missing[*]} (SMCR_APPS_INSTALL=0)"
	local sudo=()
	[ "$(id -u)" -eq 0 ] || sudo=(sudo -n)
	app_log "installing ${missing[*]}"
	if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
		--no-install-recommends "${missing[@]}" >"$APP_TMP/apt.log" 2>&1; then
		app_skip "cannot install ${missing[*]}: $(tail -1 "$APP_TMP/apt.log")"
	fi
	for spec in "$@"; do
		cmd=${spec%%:*}
		if [ "${cmd:0:1}" = / ]; then [ -e "$cmd" ] || app_skip "$cmd missing after installing"
		else command -v "$cmd" >/dev/null 2>&1 || app_skip "$cmd missing after installing"; fi
	done
}

# app_port: a loopback TCP port that was free a moment ago (the kernel's pick of port 0).
app_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# app_rules PORT...: the rule that makes every loopback connection to these ports try SMC-R
# (docs/CONFIG.md), for both the connecting and the accepting end.
app_rules() {
	local p r=
	for p in "$@"; do r="${r:+$r;}use smc both * 127.0.0.1/8:$p"; done
	printf '%s' "$r"
}

# app_cmd MODE TAG CMD...: prints nothing, sets APP_CMD to run CMD in MODE:
#   smcr: under smcr-run with $APP_RULES and SMCR_STATS=$APP_TMP/TAG.stats
#   tcp:  as is (the peer of a fallback case, or SMCR_APPS_PLAIN)
app_cmd() {
	local mode=$1 tag=$2; shift 2
	if [ "$mode" = smcr ] && [ "${SMCR_APPS_PLAIN:-0}" != 1 ]; then
		APP_CMD=(env "SMCR_RULES=$APP_RULES" "SMCR_STATS=$APP_TMP/$tag.stats" "$SMCR_RUN" -- "$@")
	else
		APP_CMD=("$@")
	fi
}

# app_run MODE TAG CMD...: runs CMD in the foreground (a client), output in $APP_TMP/TAG.out.
app_run() {
	local mode=$1 tag=$2; shift 2
	app_cmd "$mode" "$tag" "$@"
	timeout -k 5 "${APP_TIMEOUT:-60}" "${APP_CMD[@]}" >"$APP_TMP/$tag.out" 2>"$APP_TMP/$tag.err"
	local rc=$?
	[ $rc -eq 0 ] || app_log "$tag exited $rc: $(tail -3 "$APP_TMP/$tag.err" | tr '\n' ' ')"
	return $rc
}

# app_start MODE TAG CMD...: starts CMD in the background in its own session (a server);
# APP_PID is its pid, output in $APP_TMP/TAG.out/.err, input from $APP_STDIN (or nothing).
app_start() {
	local mode=$1 tag=$2; shift 2
	app_cmd "$mode" "$tag" "$@"
	setsid "${APP_CMD[@]}" >"$APP_TMP/$tag.out" 2>"$APP_TMP/$tag.err" <"${APP_STDIN:-/dev/null}" &
	APP_PID=$!
	APP_PIDS+=("$APP_PID")
}

# app_wait_port PORT [SECONDS]: until something listens on 127.0.0.1:PORT.
app_wait_port() {
	local port=$1 n=$(( ${2:-10} * 10 ))
	while [ $n -gt 0 ]; do
		ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && return 0
		sleep 0.1; n=$((n - 1))
	done
	app_log "nothing listens on port $port"
	return 1
}

# app_stop PID [SIGNAL] [SECONDS]: signals the process (default TERM) and waits for it to
# exit, so its SMCR_STATS line is written; then the rest of its session is ended.
app_stop() {
	local pid=$1 sig=${2:-TERM} n=$(( ${3:-10} * 10 ))
	kill -"$sig" "$pid" 2>/dev/null || return 0
	while [ $n -gt 0 ] && kill -0 "$pid" 2>/dev/null; do
		# a zombie child of this shell counts as exited
		[ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" = Z ] && break
		sleep 0.1; n=$((n - 1))
	done
	app_kill "$pid"
}
# app_wait_exit PID [SECONDS]: waits for a server that ends by itself (one connection, -1);
# fails if it is still running after SECONDS (default 20); its exit status in APP_RC.
app_wait_exit() {
	local pid=$1 n=$(( ${2:-20} * 10 ))
	while [ $n -gt 0 ]; do
		if ! kill -0 "$pid" 2>/dev/null || [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" = Z ]; then
			wait "$pid" 2>/dev/null; APP_RC=$?
			return 0
		fi
		sleep 0.1; n=$((n - 1))
	done
	app_log "pid $pid still runs after ${2:-20} s"
	return 1
}
# app_kill PID: ends what is left of the session PID leads (its pid is its process group).
app_kill() {
	local pid=$1
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || return 0
	local n=20
	while [ $n -gt 0 ] && kill -0 -- "-$pid" 2>/dev/null; do sleep 0.1; n=$((n - 1)); done
	kill -KILL -- "-$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

# app_sha FILE: its sha256.
app_sha() { sha256sum "$1" | cut -d' ' -f1; }
app_same() { # app_same FILE1 FILE2: same bytes (by sha256)
	local a b; a=$(app_sha "$1"); b=$(app_sha "$2")
	[ "$a" = "$b" ] || { app_log "sha256 differs: $1 $a, $2 $b"; return 1; }
}

# app_mode TAG EXPECT [MIN]: the SMCR_STATS lines of TAG (every process of it) show what
# EXPECT says (tests/apps/stats.py): smcr: at least MIN connections (default 1) in SMC-R
# mode, none that fell back; fallback: at least MIN connections fell back to TCP because
# the peer did not propose or answer SMC-R, none in SMC-R mode. Passes at once (with a note)
# under SMCR_APPS_PLAIN.
app_mode() {
	local tag=$1 expect=$2 min=${3:-1}
	if [ "${SMCR_APPS_PLAIN:-0}" = 1 ]; then return 0; fi
	python3 "$APP_HERE/stats.py" "$APP_TMP/$tag.stats" "$expect" "$min"
}
