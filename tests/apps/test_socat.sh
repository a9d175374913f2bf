#!/usr/bin/env bash
# test_socat.sh: socat under smcr-run at both ends, then its server alone (the clients plain:
# TCP fallback). A 16 MiB file through a socat pipe (TCP-LISTEN to a file), and
# `socat TCP-LISTEN:...,fork EXEC:/bin/cat` (accept, fork, exec) echoing 4 MiB to four clients
# at once and to one more after them; `EXEC:/bin/cat,nofork` puts the connection itself into
# the exec'ed cat (a connection never used before the exec: it is declined and stays TCP).
# Every byte checked by sha256.
. "$(dirname "$0")/lib.sh"
app_init socat
app_need socat:socat
head -c $((16 << 20)) /dev/urandom >"$APP_TMP/big.in"
head -c $((4 << 20)) /dev/urandom >"$APP_TMP/echo.in"

echo_client() { # echo_client MODE TAG: echo.in through the echo server, back into TAG.out
	app_run "$1" "$2" socat -t 30 -T 30 - "TCP:127.0.0.1:$port" <"$APP_TMP/echo.in" &&
		app_same "$APP_TMP/echo.in" "$APP_TMP/$2.out"
}

scenario() { # scenario NAME CLIENT_MODE
	local sc=$1 cm=$2 i
	# 1. a pipe: one connection, a file each way of socat
	port=$(app_port); APP_RULES=$(app_rules "$port")
	app_start smcr "$sc-pipe-server" socat -u "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr" \
		"CREATE:$APP_TMP/$sc-pipe.got"
	local srv=$APP_PID
	app_wait_port "$port" 10
	app_check "$sc: 16 MiB through socat -u" app_run "$cm" "$sc-pipe-client" socat -u \
		"OPEN:$APP_TMP/big.in" "TCP:127.0.0.1:$port"
	app_check "$sc: pipe server exits after its connection" app_wait_exit "$srv" 20
	app_check "$sc: 16 MiB sha256" app_same "$APP_TMP/big.in" "$APP_TMP/$sc-pipe.got"

	# 2. fork + EXEC:/bin/cat (socat's child relays between the socket and cat)
	port=$(app_port); APP_RULES=$(app_rules "$port")
	app_start smcr "$sc-fork-server" socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" EXEC:/bin/cat
	srv=$APP_PID
	app_wait_port "$port" 10
	local pids=()
	for i in 1 2 3 4; do
		echo_client "$cm" "$sc-fork-c$i" & pids+=($!)
	done
	local ok=0
	for i in "${pids[@]}"; do wait "$i" && ok=$((ok + 1)); done
	app_check "$sc: fork EXEC:/bin/cat, 4 clients at once, 4 MiB echoed each" test "$ok" -eq 4
	app_check "$sc: fork EXEC:/bin/cat, one more client" echo_client "$cm" "$sc-fork-c5"
	app_stop "$srv" TERM 10

	# 3. EXEC:/bin/cat,nofork: the exec'ed cat reads and writes the connection itself
	port=$(app_port); APP_RULES=$(app_rules "$port")
	app_start smcr "$sc-exec-server" socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr" EXEC:/bin/cat,nofork
	srv=$APP_PID
	app_wait_port "$port" 10
	app_check "$sc: EXEC:/bin/cat,nofork, 4 MiB echoed" echo_client "$cm" "$sc-exec-c"
	app_stop "$srv" TERM 10

	if [ "$cm" = smcr ]; then
		app_check "$sc: pipe server in SMC-R mode" app_mode "$sc-pipe-server" smcr 1
		app_check "$sc: pipe client in SMC-R mode" app_mode "$sc-pipe-client" smcr 1
		app_check "$sc: fork server in SMC-R mode (5 connections)" app_mode "$sc-fork-server" smcr 5
		for i in 1 5; do
			app_check "$sc: fork client $i in SMC-R mode" app_mode "$sc-fork-c$i" smcr 1
		done
		# the exec'ed cat gets a connection that was never used: it stays TCP (declined),
		# docs/INTERPOSER.md "fork, exec"
		app_check "$sc: nofork client: TCP after the server's decline" app_mode "$sc-exec-c" tcp 1
	else
		app_check "$sc: pipe server fell back" app_mode "$sc-pipe-server" fallback 1
		app_check "$sc: fork server fell back (5 connections)" app_mode "$sc-fork-server" fallback 5
	fi
}

scenario both smcr
scenario fallback tcp
app_done
