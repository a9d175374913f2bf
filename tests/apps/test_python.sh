#!/usr/bin/env bash
# test_python.sh: Python 3 programs under smcr-run at both ends (SMC-R, from SMCR_STATS), then
# the server alone (the clients plain: TCP fallback): python3 -m http.server to curl (an 8 MiB
# file and 20 small ones, sha256 each), and tests/apps/pyapps.py's echo servers (asyncio
# streams, socketserver ForkingMixIn and ThreadingMixIn) to 8 clients at once, threaded and
# asyncio, 1 MiB each in random-sized writes, sha256 of every echo.
. "$(dirname "$0")/lib.sh"
app_init python
app_need /usr/bin/python3:python3 curl:curl
PY="$APP_PY $APP_HERE/pyapps.py"

www=$APP_TMP/www
mkdir -p "$www"
head -c $((8 << 20)) /dev/urandom >"$www/big"
for i in $(seq 1 20); do head -c $(( (RANDOM * 3 + i) % 20000 + 1 )) /dev/urandom >"$www/s$i"; done

http_small() { # http_small MODE TAG
	local f args=()
	mkdir -p "$APP_TMP/$2.d"
	for f in $(seq 1 20); do args+=("http://127.0.0.1:$port/s$f" -o "$APP_TMP/$2.d/s$f"); done
	app_run "$1" "$2" curl -sSf "${args[@]}" || return 1
	for f in $(seq 1 20); do app_same "$www/s$f" "$APP_TMP/$2.d/s$f" || return 1; done
}

scenario() { # scenario NAME CLIENT_MODE
	local sc=$1 cm=$2 kind
	port=$(app_port); APP_RULES=$(app_rules "$port")
	app_start smcr "$sc-http" $PY http-server "$port" "$www"   # python3 -m http.server
	local srv=$APP_PID
	app_wait_port "$port" 10
	app_check "$sc: http.server 8 MiB to curl" app_run "$cm" "$sc-curl-big" curl -sSf -o "$APP_TMP/$sc.big" "http://127.0.0.1:$port/big"
	app_check "$sc: 8 MiB sha256" app_same "$www/big" "$APP_TMP/$sc.big"
	app_check "$sc: http.server 20 small files to curl" http_small "$cm" "$sc-curl-small"
	app_stop "$srv" TERM 10
	if [ "$cm" = smcr ]; then
		app_check "$sc: http.server in SMC-R mode" app_mode "$sc-http" smcr 21
		app_check "$sc: curl in SMC-R mode" app_mode "$sc-curl-big" smcr 1
	else
		app_check "$sc: http.server fell back" app_mode "$sc-http" fallback 21
	fi

	for kind in asyncio forking threading; do
		port=$(app_port); APP_RULES=$(app_rules "$port")
		app_start smcr "$sc-$kind" $PY "$kind-server" "$port"
		srv=$APP_PID
		app_wait_port "$port" 10
		app_check "$sc: $kind server, 8 threaded clients" app_run "$cm" "$sc-$kind-c" $PY client "$port" 8 $((1 << 20))
		app_check "$sc: $kind server, 8 asyncio clients" app_run "$cm" "$sc-$kind-a" $PY asyncio-client "$port" 8 $((1 << 20))
		app_stop "$srv" TERM 10
		if [ "$cm" = smcr ]; then
			# a ForkingMixIn child ends with os._exit (no SMCR_STATS line): its connections
			# are proven from the clients' side, whose SMC-R needs the child's
			[ "$kind" = forking ] || app_check "$sc: $kind server in SMC-R mode" app_mode "$sc-$kind" smcr 16
			app_check "$sc: $kind's threaded client in SMC-R mode" app_mode "$sc-$kind-c" smcr 8
			app_check "$sc: $kind's asyncio client in SMC-R mode" app_mode "$sc-$kind-a" smcr 8
		elif [ "$kind" != forking ]; then
			app_check "$sc: $kind server fell back" app_mode "$sc-$kind" fallback 16
		fi
	done
}

scenario both smcr
scenario fallback tcp
app_done
