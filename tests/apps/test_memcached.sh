#!/usr/bin/env bash
# test_memcached.sh: memcached -t 2 under smcr-run with libmemcached's tools under smcr-run
# (SMC-R at both ends, from SMCR_STATS), then memcached alone under smcr-run (the tools plain:
# TCP fallback). memccapable (the protocol conformance suite, ASCII and binary) passes;
# memcslap sets and gets with 4 threads and the server counts every get as a hit; a 500 kB
# random value stored with memccp reads back the same with memccat.
. "$(dirname "$0")/lib.sh"
app_init memcached
app_need memcached:memcached memccapable:libmemcached-tools memcslap:libmemcached-tools
N=${SMCR_APPS_N:-5000}

stat_of() { # stat_of MODE NAME: the server's counter NAME (memcstat)
	app_run "$1" stat memcstat --servers="127.0.0.1:$port" >/dev/null || return 1
	sed -nE "s/^[[:space:]]*$2: ([0-9]+).*/\1/p" "$APP_TMP/stat.out"
}
slap() { # slap MODE TAG TEST
	app_run "$1" "$2" memcslap --servers="127.0.0.1:$port" -t "$3" -c 4 -e "$N" || return 1
	app_log "$2: $(grep -E "Time to $3" "$APP_TMP/$2.out" | tr -s ' ')"
}
value() { # value MODE: memccp then memccat of a 500 kB value
	(cd "$APP_TMP" && app_run "$1" cp memccp --servers="127.0.0.1:$port" value) || return 1
	app_run "$1" cat memccat --servers="127.0.0.1:$port" value || return 1
	head -c "$(stat -c %s "$APP_TMP/value")" "$APP_TMP/cat.out" >"$APP_TMP/value.got"
	app_same "$APP_TMP/value" "$APP_TMP/value.got"
}

scenario() { # scenario NAME CLIENT_MODE
	local sc=$1 cm=$2
	port=$(app_port); APP_RULES=$(app_rules "$port")
	app_start smcr "$sc-server" memcached -t 2 -l 127.0.0.1 -p "$port" -U 0 -u root
	local srv=$APP_PID
	app_wait_port "$port" 10
	app_check "$sc: memccapable" app_run "$cm" "$sc-capable" memccapable -h 127.0.0.1 -p "$port"
	grep -vE '\[pass\]' "$APP_TMP/$sc-capable.out" | grep -v '^$' | head -5
	app_check "$sc: memcslap set" slap "$cm" "$sc-set" set
	local h0 h1 m0 m1
	h0=$(stat_of "$cm" get_hits); m0=$(stat_of "$cm" get_misses)
	app_check "$sc: memcslap get" slap "$cm" "$sc-get" get
	h1=$(stat_of "$cm" get_hits); m1=$(stat_of "$cm" get_misses)
	app_log "$sc: get hits $h0 -> $h1, misses $m0 -> $m1"
	app_check "$sc: every get of memcslap a hit" test "$((h1 - h0))" -ge "$((4 * N))" -a "$m1" -eq "$m0"
	app_check "$sc: 500 kB value through memccp/memccat" value "$cm"
	app_stop "$srv" TERM 10
	if [ "$cm" = smcr ]; then
		app_check "$sc: memcached in SMC-R mode" app_mode "$sc-server" smcr 10
		app_check "$sc: memccapable in SMC-R mode" app_mode "$sc-capable" smcr 1
		app_check "$sc: memcslap in SMC-R mode" app_mode "$sc-get" smcr 4
		app_check "$sc: memccat in SMC-R mode" app_mode cat smcr 1
	else
		app_check "$sc: memcached fell back" app_mode "$sc-server" fallback 10
	fi
	rm -f "$APP_TMP"/{stat,cp,cat}.stats
}

head -c 500000 /dev/urandom >"$APP_TMP/value"
scenario both smcr
scenario fallback tcp
app_done
