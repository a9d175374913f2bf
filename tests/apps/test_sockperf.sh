#!/usr/bin/env bash
# test_sockperf.sh: sockperf over TCP under smcr-run at both ends (SMC-R, from SMCR_STATS),
# then its server alone (the client plain: TCP fallback). For each multiplexer (-F s, p, e)
# and once more with --nonblocked: ping-pong with --data-integrity (every reply checked, none
# dropped, duplicated or out of order) and throughput (the server handled at least every
# message the client sent).
. "$(dirname "$0")/lib.sh"
app_init sockperf
app_need sockperf:sockperf
SECS=${SMCR_APPS_SECS:-1}

pingpong() { # pingpong MODE TAG ARGS...
	local mode=$1 tag=$2; shift 2
	app_run "$mode" "$tag" sockperf ping-pong -f "$feed" -t "$SECS" -m 64 --data-integrity "$@" || return 1
	local out=$APP_TMP/$tag.out
	cat "$APP_TMP/$tag.err" >>"$out"
	app_log "$tag: $(grep -o 'Summary: Latency is.*' "$out")"
	grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$out" &&
		grep -qE 'Total [1-9][0-9]* observations' "$out" && ! grep -qiE 'error|integrity.*fail' "$out"
}
throughput() { # throughput MODE TAG ARGS...: sets SENT
	local mode=$1 tag=$2; shift 2
	app_run "$mode" "$tag" sockperf throughput -f "$feed" -t "$SECS" -m 1024 "$@" || return 1
	local out=$APP_TMP/$tag.out
	cat "$APP_TMP/$tag.err" >>"$out"
	SENT=$(sed -nE 's/.*Total of ([0-9]+) messages sent.*/\1/p' "$out")
	app_log "$tag: $SENT messages sent, $(grep -o 'BandWidth is.*' "$out")"
	[ "${SENT:-0}" -gt 0 ] && ! grep -qi error "$out"
}

scenario() { # scenario NAME CLIENT_MODE
	local sc=$1 cm=$2 f
	for f in s p e nb; do
		port=$(app_port); APP_RULES=$(app_rules "$port")
		feed=$APP_TMP/feed-$port
		echo "T:127.0.0.1:$port" >"$feed"
		local args=(-F "$f")
		[ "$f" = nb ] && args=(-F e --nonblocked)
		app_start smcr "$sc-server-$f" sockperf server -f "$feed" "${args[@]}"
		local srv=$APP_PID
		app_wait_port "$port" 10
		app_check "$sc: ping-pong ${args[*]}" pingpong "$cm" "$sc-pp-$f" "${args[@]}"
		SENT=0
		app_check "$sc: throughput ${args[*]}" throughput "$cm" "$sc-tp-$f" "${args[@]}"
		app_stop "$srv" INT 10
		local got
		got=$(cat "$APP_TMP/$sc-server-$f.out" "$APP_TMP/$sc-server-$f.err" |
			sed -nE 's/.*Total ([0-9]+) messages received and handled.*/\1/p')
		app_check "$sc: server ${args[*]} handled ${got:-?} >= $SENT messages sent" test "${got:-0}" -ge "$SENT"
		if [ "$cm" = smcr ]; then
			app_check "$sc: server ${args[*]} in SMC-R mode" app_mode "$sc-server-$f" smcr 2
			app_check "$sc: ping-pong client ${args[*]} in SMC-R mode" app_mode "$sc-pp-$f" smcr 1
			app_check "$sc: throughput client ${args[*]} in SMC-R mode" app_mode "$sc-tp-$f" smcr 1
		else
			app_check "$sc: server ${args[*]} fell back" app_mode "$sc-server-$f" fallback 2
		fi
	done
}

scenario both smcr
scenario fallback tcp
app_done
