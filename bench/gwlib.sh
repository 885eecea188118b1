# shellcheck shell=bash
# bench/gwlib.sh - Gateway helpers for bench/gateway_*.sh (sourced after
# bench/lib.sh, not run).
#
# What it is for: the cluster secret and API keys files, a mount that
# serves the star API (-o listen=), one novagw in front of it, and reading
# a process's CPU ticks and VmHWM.  What it is not for: tests
# (tests/integration/t_gateway.sh has its own set-up and asserts).
#
# Invariants:
#  1. Every novagw started here is in B_BG, so bench_cleanup kills it by
#     PID; nothing is killed by name.
#  2. The secret and keys files live in $B_TMP with mode 600 (novagw
#     refuses a keys file others can read).
: "${NOVAGW:=$ROOT_DIR/src/novagw}"

GW_PID=
GW_URL=
GW_KEY=
STAR_PORT=

# free_port: a TCP port on 127.0.0.1 nobody listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# gw_files: $B_TMP/secret and $B_TMP/keys (bucket "logs"), sets GW_KEY.
gw_files() {
	head -c 32 /dev/urandom | base64 > "$B_TMP/secret"
	GW_KEY=logs-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
	printf 'logs %s\n' "$GW_KEY" > "$B_TMP/keys"
	chmod 600 "$B_TMP/secret" "$B_TMP/keys"
}

# star_start [OPTS]: nova_start with the star API on a free port.
star_start() {
	STAR_PORT=$(free_port)
	nova_start "listen=127.0.0.1:$STAR_PORT,cluster_secret_file=$B_TMP/secret${1:+,$1}"
}

# gw_start [ARGS...]: novagw on a free port in front of the star; waits
# for /healthz.  Sets GW_PID, GW_URL.  free_port's port is free when
# asked, not when novagw binds it: a novagw that exits at start because
# another process took the port in between is started again on another
# (three tries); any other exit is fatal, with its log.
gw_start() {
	local port try from
	[ -x "$NOVAGW" ] || die "novagw not built: NOVAGW=$NOVAGW (make src/novagw)"
	for try in 1 2 3; do
		port=$(free_port)
		from=1
		[ -f "$B_TMP/novagw.log" ] && from=$(($(wc -l < "$B_TMP/novagw.log") + 1))
		"$NOVAGW" --listen="127.0.0.1:$port" --star="127.0.0.1:$STAR_PORT" \
			--cluster-secret-file="$B_TMP/secret" --api-keys-file="$B_TMP/keys" "$@" \
			>> "$B_TMP/novagw.log" 2>&1 &
		GW_PID=$!
		B_BG+=("$GW_PID")
		GW_URL=http://127.0.0.1:$port
		for _ in $(seq 100); do
			curl -sf "$GW_URL/healthz" > /dev/null && return 0
			nv_pid_alive "$GW_PID" || break
			sleep 0.1
		done
		nv_pid_alive "$GW_PID" && break
		tail -n +"$from" "$B_TMP/novagw.log" | grep -qi 'address already in use' || break
		say "novagw lost port $port to another process (try $try of 3); again on another"
	done
	tail -5 "$B_TMP/novagw.log" >&2
	die "novagw did not come up on $port"
}

# gw_gone_check: die, with novagw's exit status and its log's tail, if
# the Gateway started by gw_start is no longer running (a run whose
# consumers fail says why: the Gateway died, or they did).
gw_gone_check() {
	local st
	[ -n "$GW_PID" ] || return 0
	nv_pid_alive "$GW_PID" && return 0
	st=0
	wait "$GW_PID" 2>/dev/null || st=$?
	tail -20 "$B_TMP/novagw.log" >&2
	die "novagw (pid $GW_PID) exited with status $st during the run (log above; bench_cleanup keeps the logs of a failed run)"
}

# gw_stop: SIGTERM the Gateway, wait for it.
gw_stop() {
	[ -n "$GW_PID" ] || return 0
	kill -TERM "$GW_PID" 2>/dev/null || true
	nv_wait_pid_exit "$GW_PID" 30 || kill -9 "$GW_PID" 2>/dev/null || true
	wait "$GW_PID" 2>/dev/null || true
	GW_PID=
}

# proc_ticks PID: utime+stime of PID in clock ticks.
proc_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# proc_kib PID FIELD: a /proc/PID/status field (VmHWM, VmRSS) in KiB.
proc_kib() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }

# loadavg: the 1-minute load average now.
loadavg() { cut -d' ' -f1 /proc/loadavg; }
