#!/usr/bin/env bash
# test_pystdlib.sh: CPython's own socket and readiness tests (libpython3.11-testsuite) under
# smcr-run, with rules that make every loopback TCP connection of the test process try SMC-R
# (both ends are in the same process, so each pair negotiates). A module passes here when it
# passes under smcr-run wherever it passes without (each is run both ways: a module that fails
# without smcr-run on this machine is reported and not counted). The SMCR_STATS line of each
# module's run says how many of its connections used SMC-R; a module that made loopback TCP
# connections must have some in SMC-R mode. SMCR_APPS_PYTESTS picks the modules.
. "$(dirname "$0")/lib.sh"
app_init pystdlib
app_need /usr/bin/python3:python3 /usr/lib/python3.11/test/test_socket.py:libpython3.11-testsuite
MODULES=${SMCR_APPS_PYTESTS:-test_selectors test_epoll test_poll test_select test_socketserver test_eintr test_socket}
# Modules that fail under smcr-run today for open bugs (docs/INTERPOSER.md "Proven
# programs"): still run, their result logged, not counted (lib.sh app_open).
declare -A OPEN=()
# test_socket's ThreadedVSOCKSocketStreamTest hangs without smcr-run too where /dev/vsock has
# no loopback transport (AF_VSOCK is never smcr's): left out.
declare -A ARGS=([test_socket]="-i ThreadedVSOCKSocketStreamTest")
APP_RULES='use smc both * 127.0.0.1/8;use smc both * [::1]'
APP_TIMEOUT=${SMCR_APPS_PYTEST_TIMEOUT:-400}

summary=()
for m in $MODULES; do
	# shellcheck disable=SC2086 # ARGS are words
	app_run smcr "$m" "$APP_PY" -m test -u network ${ARGS[$m]:-} "$m"
	under=$?
	res=$(grep -E '^Tests result:|^== Tests result:|^Result:' "$APP_TMP/$m.out" | tail -1)
	mode=$(python3 "$APP_HERE/stats.py" "$APP_TMP/$m.stats" show 2>&1 | sed -nE 's/.*; (smcr [0-9]+, tcp [0-9]+).*(failed [0-9]+).*/\1, \2/p')
	if [ $under -ne 0 ]; then
		# shellcheck disable=SC2086
		app_run tcp "$m-plain" "$APP_PY" -m test -u network ${ARGS[$m]:-} "$m"
		plain=$?
		grep -E '^(FAIL|ERROR):|Timeout' "$APP_TMP/$m.out" "$APP_TMP/$m.err" | head -20
		if [ $plain -ne 0 ]; then
			summary+=("$m: fails without smcr-run too (exit $plain): not counted; under smcr-run ${res:-exit $under}; ${mode:-no stats}")
			continue
		fi
	fi
	summary+=("$m: under smcr-run ${res:-exit $under}; ${mode:-no stats}")
	if [ -n "${OPEN[$m]:-}" ]; then
		app_open "${OPEN[$m]}" "$m under smcr-run" test $under -eq 0
		continue
	fi
	app_check "$m under smcr-run" test $under -eq 0
	if [ "${SMCR_APPS_PLAIN:-0}" != 1 ] && [ "$m" != test_epoll ] && [ "$m" != test_poll ] && [ "$m" != test_selectors ] &&
		[ "$m" != test_select ] && [ "$m" != test_eintr ]; then
		# test_epoll/poll/select/selectors use socketpairs and pipes mostly, test_eintr's one TCP
		# connection is closed by its server at accept: SMC-R not required there
		app_check "$m: some connections in SMC-R mode" python3 "$APP_HERE/stats.py" "$APP_TMP/$m.stats" smcr-some 1
	fi
done
printf '  %s\n' "${summary[@]}"
app_done
