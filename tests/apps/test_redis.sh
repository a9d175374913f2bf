#!/usr/bin/env bash
# test_redis.sh: redis-server with redis-benchmark and redis-cli, all under smcr-run (SMC-R on
# both ends, proven from SMCR_STATS), then the server alone under smcr-run (the clients plain:
# TCP fallback). Data checked exactly: a 1 MiB random value SET and GET back (sha256), INCR
# counters that must equal the number of commands redis-benchmark sent (SET/GET/LRANGE,
# -c 50, -P 1 and -P 16, --threads 2), and BGSAVE (a fork of the server) under a running
# benchmark with no connection lost and every INCR counted.
. "$(dirname "$0")/lib.sh"
app_init redis
app_need redis-server:redis-server redis-benchmark:redis-tools redis-cli:redis-tools
N=${SMCR_APPS_N:-5000}

# bench MODE TAG ARGS...: redis-benchmark against $port, quiet CSV; fails on any error line.
bench() {
	local mode=$1 tag=$2; shift 2
	app_run "$mode" "$tag" redis-benchmark -h 127.0.0.1 -p "$port" --csv "$@" || return 1
	if grep -qiE 'error|reset|refused' "$APP_TMP/$tag.out" "$APP_TMP/$tag.err"; then
		app_log "$tag: $(grep -iE 'error|reset|refused' "$APP_TMP/$tag.out" "$APP_TMP/$tag.err" | head -3)"
		return 1
	fi
	# every test line has a positive rate: "NAME","rps",...
	awk -F'"' 'NR > 1 && $4 + 0 <= 0 { bad = 1 } NR > 1 { n++ } END { exit (bad || n == 0) }' \
		"$APP_TMP/$tag.out" || { app_log "$tag: $(cat "$APP_TMP/$tag.out")"; return 1; }
	app_log "$tag: $(awk -F'"' 'NR > 1 { printf "%s %s/s  ", $2, $4 }' "$APP_TMP/$tag.out")"
}
cli() { # cli MODE TAG ARGS...: redis-cli against $port, its output in $APP_TMP/TAG.out
	local mode=$1 tag=$2; shift 2
	app_run "$mode" "$tag" redis-cli -h 127.0.0.1 -p "$port" "$@"
}
counter_is() { # counter_is MODE KEY N: GET KEY gives N
	cli "$1" cli-get "GET" "$2" || return 1
	local v; v=$(tr -d '\r\n' <"$APP_TMP/cli-get.out")
	[ "$v" = "$3" ] || { app_log "GET $2 = '$v', want $3"; return 1; }
}
big_value() { # big_value MODE: a 1 MiB random value SET, then GET back byte for byte
	local mode=$1 size=$((1024 * 1024))
	head -c $((size / 4 * 3)) /dev/urandom | base64 -w0 | head -c "$size" >"$APP_TMP/big.in"
	cli "$mode" cli-set -x SET big <"$APP_TMP/big.in" || return 1
	cli "$mode" cli-big --raw GET big || return 1
	head -c "$size" "$APP_TMP/cli-big.out" >"$APP_TMP/big.got"
	app_same "$APP_TMP/big.in" "$APP_TMP/big.got"
}

# scenario NAME CLIENT_MODE: a fresh server under smcr-run, clients in CLIENT_MODE.
scenario() {
	local sc=$1 cm=$2
	port=$(app_port)
	APP_RULES=$(app_rules "$port")
	mkdir -p "$APP_TMP/$sc"
	app_start smcr "$sc-server" redis-server --port "$port" --bind 127.0.0.1 --protected-mode no \
		--daemonize no --save '' --appendonly no --dir "$APP_TMP/$sc" --dbfilename dump.rdb
	local srv=$APP_PID
	app_wait_port "$port" 10 || { app_check "$sc: redis-server listens" false; return; }

	app_check "$sc: 1 MiB value SET/GET, sha256" big_value "$cm"
	app_check "$sc: redis-benchmark SET/GET/LRANGE -c 50 -P 1" \
		bench "$cm" "$sc-b1" -c 50 -n "$N" -P 1 -r 1000 -t set,get,lrange_100
	app_check "$sc: redis-benchmark SET/GET/LRANGE -c 50 -P 16" \
		bench "$cm" "$sc-b16" -c 50 -n "$((N * 4))" -P 16 -r 1000 -t set,get,lrange_100
	app_check "$sc: redis-benchmark --threads 2 SET/GET -c 50" \
		bench "$cm" "$sc-bt" -c 50 -n "$N" --threads 2 -t set,get
	# INCR on one key (redis-benchmark's "counter:__rand_int__" without -r): the counter is
	# exactly the number of commands that arrived.
	app_check "$sc: redis-benchmark INCR -P 16, every command counted" \
		bench "$cm" "$sc-incr" -c 50 -n "$((N * 4))" -P 16 -t incr
	app_check "$sc: INCR counter = $((N * 4))" counter_is "$cm" 'counter:__rand_int__' "$((N * 4))"

	# BGSAVE under load: a benchmark runs while the server forks three times.
	cli "$cm" cli-del DEL 'counter:__rand_int__' >/dev/null
	app_cmd "$cm" "$sc-load" redis-benchmark -h 127.0.0.1 -p "$port" --csv -c 20 -n "$((N * 4))" -P 1 -t incr
	"${APP_CMD[@]}" >"$APP_TMP/$sc-load.out" 2>"$APP_TMP/$sc-load.err" &
	local load=$!
	local i saves=0
	for i in 1 2 3; do
		sleep 0.3
		cli "$cm" cli-bgsave BGSAVE && grep -q 'Background saving started' "$APP_TMP/cli-bgsave.out" &&
			saves=$((saves + 1))
		# wait for the child to finish before the next one
		local w=50
		while [ $w -gt 0 ]; do
			cli "$cm" cli-info INFO persistence && grep -q 'rdb_bgsave_in_progress:0' "$APP_TMP/cli-info.out" && break
			sleep 0.1; w=$((w - 1))
		done
	done
	wait "$load"; local lrc=$?
	app_check "$sc: benchmark under BGSAVE exited 0" test "$lrc" -eq 0
	app_check "$sc: no error under BGSAVE" \
		bash -c "! grep -qiE 'error|reset|refused' '$APP_TMP/$sc-load.out' '$APP_TMP/$sc-load.err'"
	app_check "$sc: 3 BGSAVE started" test "$saves" -eq 3
	app_check "$sc: last BGSAVE ok" grep -q 'rdb_last_bgsave_status:ok' "$APP_TMP/cli-info.out"
	app_check "$sc: dump.rdb written" test -s "$APP_TMP/$sc/dump.rdb"
	app_check "$sc: INCR under BGSAVE, every command counted" counter_is "$cm" 'counter:__rand_int__' "$((N * 4))"
	cli "$cm" cli-stats INFO stats
	app_log "$sc: $(grep -E 'total_connections_received|rejected_connections' "$APP_TMP/cli-stats.out" | tr -d '\r' | tr '\n' ' ')"

	app_stop "$srv" TERM 15
	if [ "$cm" = smcr ]; then
		app_check "$sc: server connections in SMC-R mode" app_mode "$sc-server" smcr 50
		app_check "$sc: client connections in SMC-R mode" app_mode cli-get smcr 1
		app_check "$sc: benchmark connections in SMC-R mode" app_mode "$sc-b1" smcr 50
		app_check "$sc: benchmark (threads) connections in SMC-R mode" app_mode "$sc-bt" smcr 50
	else
		app_check "$sc: server fell back to TCP for plain clients" app_mode "$sc-server" fallback 50
	fi
	rm -f "$APP_TMP"/cli-*.stats
}

scenario both smcr
scenario fallback tcp
app_done
