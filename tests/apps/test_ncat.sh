#!/usr/bin/env bash
# test_ncat.sh: ncat (nmap's netcat) under smcr-run at both ends (SMC-R, from SMCR_STATS), then
# its listener alone (the clients plain: TCP fallback). 16 MiB --send-only to a --recv-only
# listener, and 16 MiB from a --send-only listener to a --recv-only client, sha256 checked.
# (ncat --exec is not here: on a client's half-close it cuts the exec'ed program's output
# even on plain TCP; socat's fork + EXEC covers that case, test_socat.sh.)
. "$(dirname "$0")/lib.sh"
app_init ncat
app_need ncat:ncat
head -c $((16 << 20)) /dev/urandom >"$APP_TMP/big.in"

scenario() { # scenario NAME CLIENT_MODE
	local sc=$1 cm=$2 i
	port=$(app_port); APP_RULES=$(app_rules "$port")
	app_start smcr "$sc-recv" ncat -l 127.0.0.1 "$port" --recv-only
	local srv=$APP_PID
	app_wait_port "$port" 10
	# ncat's listener reads its (non-blocking) connection after select() and closes it on
	# any read that is not > 0, EAGAIN included: a POLLIN with nothing to read ends the
	# transfer early (tests/sock/it_stale_token.c)
	app_check "$sc: 16 MiB --send-only" app_run "$cm" "$sc-send" ncat --send-only 127.0.0.1 "$port" <"$APP_TMP/big.in"
	app_check "$sc: listener exits after its connection" app_wait_exit "$srv" 20
	app_check "$sc: 16 MiB sha256" app_same "$APP_TMP/big.in" "$APP_TMP/$sc-recv.out"

	# the other way: the listener sends, the client receives
	port=$(app_port); APP_RULES=$(app_rules "$port")
	APP_STDIN=$APP_TMP/big.in app_start smcr "$sc-lsend" ncat -l 127.0.0.1 "$port" --send-only
	srv=$APP_PID
	app_wait_port "$port" 10
	app_check "$sc: 16 MiB from the listener to --recv-only" app_run "$cm" "$sc-crecv" ncat --recv-only 127.0.0.1 "$port"
	app_check "$sc: 16 MiB sha256 (listener to client)" app_same "$APP_TMP/big.in" "$APP_TMP/$sc-crecv.out"
	app_wait_exit "$srv" 10 || app_stop "$srv" TERM 5
	if [ "$cm" = smcr ]; then
		app_check "$sc: --recv-only in SMC-R mode" app_mode "$sc-recv" smcr 1
		app_check "$sc: --send-only in SMC-R mode" app_mode "$sc-send" smcr 1
		app_check "$sc: sending listener in SMC-R mode" app_mode "$sc-lsend" smcr 1
		app_check "$sc: receiving client in SMC-R mode" app_mode "$sc-crecv" smcr 1
	else
		app_check "$sc: --recv-only fell back" app_mode "$sc-recv" fallback 1
		app_check "$sc: sending listener fell back" app_mode "$sc-lsend" fallback 1
	fi
}

scenario both smcr
scenario fallback tcp
app_done
