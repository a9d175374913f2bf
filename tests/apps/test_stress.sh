#!/usr/bin/env bash
# test_stress.sh: tests/apps/stress.c under smcr-run at both ends (SMC-R, from SMCR_STATS), then
# the server alone (the client plain: TCP fallback). 32 client threads with 1000 connections
# open at once, epoll edge-triggered on both sides, random sizes in random-sized writes,
# SHA-256 of each stream both ways; then 10 000 short connections one after another, every
# one served, and the server's open fds and resident memory the same before and after them
# (measured after a first 1000, so warm caches do not count as growth).
. "$(dirname "$0")/lib.sh"
app_init stress
STRESS=${SMCR_APPS_STRESS:-}
[ -z "$STRESS" ] && [ -n "${SMCR_BINARY_DIR:-}" ] && STRESS=$SMCR_BINARY_DIR/tests/apps/smcr-apps-stress
[ -x "$STRESS" ] || app_skip "smcr-apps-stress not built (needs libcrypto: libssl-dev)"
CONNS=${SMCR_APPS_STRESS_CONNS:-1000}
SHORT=${SMCR_APPS_STRESS_SHORT:-10000}
MAXB=${SMCR_APPS_STRESS_BYTES:-262144}
# RSS may grow by at most this much (KiB) over the short connections
RSS_SLACK=${SMCR_APPS_RSS_SLACK_KB:-16384}

fds_of() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
rss_of() { sed -nE 's/^VmRSS:[[:space:]]+([0-9]+) kB/\1/p' "/proc/$1/status"; }
fds_back() { # fds_back PID N: the server's fd count returns to N within 10 s
	local n=100
	while [ $n -gt 0 ]; do [ "$(fds_of "$1")" -le "$2" ] && return 0; sleep 0.1; n=$((n - 1)); done
	app_log "server fds: $(fds_of "$1"), before: $2"
	return 1
}

scenario() { # scenario NAME CLIENT_MODE
	local sc=$1 cm=$2
	port=$(app_port); APP_RULES=$(app_rules "$port")
	app_start smcr "$sc-server" "$STRESS" server "$port" 4
	local srv=$APP_PID
	app_wait_port "$port" 10
	APP_TIMEOUT=240 app_check "$sc: 32 threads, $CONNS connections, sha256 both ways" \
		app_run "$cm" "$sc-client" "$STRESS" client "$port" 32 "$CONNS" "$MAXB"
	cat "$APP_TMP/$sc-client.out"; head -5 "$APP_TMP/$sc-client.err"
	app_check "$sc: 1000 short connections (warm-up)" app_run "$cm" "$sc-warm" "$STRESS" short "$port" 1000
	sleep 1
	local f0 r0 f1 r1
	f0=$(fds_of "$srv"); r0=$(rss_of "$srv")
	APP_TIMEOUT=240 app_check "$sc: $SHORT short connections, all served" app_run "$cm" "$sc-short" "$STRESS" short "$port" "$SHORT"
	cat "$APP_TMP/$sc-short.out"
	app_check "$sc: server fds back to $f0" fds_back "$srv" "$f0"
	f1=$(fds_of "$srv"); r1=$(rss_of "$srv")
	app_log "$sc: server fds $f0 -> $f1, RSS $r0 -> $r1 kB"
	app_check "$sc: server RSS grew less than $RSS_SLACK kB" test $((r1 - r0)) -lt "$RSS_SLACK"
	app_stop "$srv" TERM 15
	cat "$APP_TMP/$sc-server.out"
	local total=$((CONNS + 1000 + SHORT))
	if [ "$cm" = smcr ]; then
		app_check "$sc: server: $total connections in SMC-R mode" app_mode "$sc-server" smcr "$total"
		app_check "$sc: client in SMC-R mode" app_mode "$sc-client" smcr "$CONNS"
		app_check "$sc: short client in SMC-R mode" app_mode "$sc-short" smcr "$SHORT"
	else
		app_check "$sc: server fell back for all $total" app_mode "$sc-server" fallback "$total"
	fi
}

scenario both smcr
scenario fallback tcp
app_done
