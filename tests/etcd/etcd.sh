#!/bin/sh
# etcd.sh - throwaway etcd clusters (1 or 3 members) on 127.0.0.1 for tests.
#
#   tests/etcd/etcd.sh start DIR [N] [tls]  start N (1 or 3) members under DIR
#                                           (made if missing), print the env
#   tests/etcd/etcd.sh env DIR              print the environment again
#   tests/etcd/etcd.sh kill DIR I [SIG]     signal member I (1..N) by PID
#                                           (default KILL) and wait it out
#   tests/etcd/etcd.sh restart DIR I        start member I again, same data
#   tests/etcd/etcd.sh leader DIR           print the index of the leader
#   tests/etcd/etcd.sh compact DIR          compact to the current revision
#   tests/etcd/etcd.sh stop DIR             stop every member by PID; rm DIR
#
# The environment (for `eval`): NOVAFS_ETCD_ENDPOINTS ("h:p;h:p"),
# NOVAFS_ETCD_URL (a ready metastore URL with a fresh prefix; with tls,
# etcd+https:// and ?cacert=), NOVAFS_ETCD_CTL (etcdctl with endpoints
# and TLS flags).  Each member has its own client and peer port (free
# ones, found with ss) and its own data directory DIR/mI; logs in
# DIR/mI.log; the PID in DIR/mI.pid; the exact command in DIR/mI.cmd so
# restart brings the member back on its data.  With tls the test makes
# a CA, a server certificate for 127.0.0.1 and a client certificate with
# openssl; members require the client certificate (--client-cert-auth);
# peers talk plain HTTP on loopback.  --unsafe-no-fsync: durability of
# etcd itself is not under test here (a SIGKILL keeps the page cache).
#
# etcd-server and etcd-client are installed when missing (root and apt);
# exit 77 (skip) when that is impossible.  NOVAFS_ETCD_FLAGS adds flags to
# every member's command (e.g. --auth-token-ttl 2).  Not for: anything but
# tests.
set -eu

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|env|kill|restart|leader|compact|stop DIR ..." >&2; exit 2; }
WAIT_S=${NOVAFS_ETCD_WAIT_S:-30}

log() { echo "etcd.sh: $*" >&2; }

install_etcd() {
	command -v etcd >/dev/null 2>&1 && command -v etcdctl >/dev/null 2>&1 && return 0
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		log "etcd is not installed and cannot be (not root or no apt-get)"
		exit 77
	fi
	log "installing etcd-server etcd-client"
	export DEBIAN_FRONTEND=noninteractive
	if ! { apt-get install -y --no-install-recommends etcd-server etcd-client \
		iproute2 openssl >"${TMPDIR:-/tmp}/novafs-etcd-apt.log" 2>&1 ||
	       { apt-get update >>"${TMPDIR:-/tmp}/novafs-etcd-apt.log" 2>&1 &&
		 apt-get install -y --no-install-recommends etcd-server etcd-client \
			iproute2 openssl >>"${TMPDIR:-/tmp}/novafs-etcd-apt.log" 2>&1; }; }; then
		log "apt-get failed (see ${TMPDIR:-/tmp}/novafs-etcd-apt.log)"
		exit 77
	fi
	command -v etcd >/dev/null 2>&1 || { log "etcd still missing after install"; exit 77; }
}

# A TCP port nobody listens on (random; ss tells us what is taken) and
# not handed out before by this script ($dir/ports).
free_port() {
	while :; do
		p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 12000 )) # below the ephemeral ports (32768-): no client socket holds it
		grep -qx "$p" "$dir/ports" 2>/dev/null && continue
		ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p" >>"$dir/ports"; echo "$p"; return; }
	done
}

ctl() { . "$dir/env.sh"; $NOVAFS_ETCD_CTL "$@"; }

# Wait until "$@" succeeds, at most WAIT_S seconds.
wait_for() {
	what=$1; shift
	end=$(( $(date +%s) + WAIT_S ))
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$end" ] || { log "timed out waiting for $what"; return 1; }
		sleep 0.1
	done
}

make_certs() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=novafs-test-ca" \
		-keyout "$dir/ca.key" -out "$dir/ca.pem" >/dev/null 2>&1
	openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
		-keyout "$dir/server.key" -out "$dir/server.csr" >/dev/null 2>&1
	printf 'subjectAltName=IP:127.0.0.1\n' >"$dir/san.ext"
	openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
		-CAcreateserial -days 2 -extfile "$dir/san.ext" -out "$dir/server.pem" >/dev/null 2>&1
	openssl req -newkey rsa:2048 -nodes -subj "/CN=novafs-test-client" \
		-keyout "$dir/client.key" -out "$dir/client.csr" >/dev/null 2>&1
	openssl x509 -req -in "$dir/client.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
		-CAcreateserial -days 2 -out "$dir/client.pem" >/dev/null 2>&1
}

start_member() {
	i=$1
	: >"$dir/m$i.log"
	# shellcheck disable=SC2046
	setsid sh -c "exec $(cat "$dir/m$i.cmd")" >>"$dir/m$i.log" 2>&1 </dev/null &
	echo $! >"$dir/m$i.pid"
}

member_alive() { kill -0 "$(cat "$dir/m$1.pid")" 2>/dev/null; }

# Ports for n members, their commands, the members started, env.sh.
start_cluster() {
	cluster=""; eps=""; ctleps=""
	i=1
	while [ "$i" -le "$n" ]; do
		cp=$(free_port); pp=$(free_port)
		echo "$cp" >"$dir/m$i.cport"; echo "$pp" >"$dir/m$i.pport"
		cluster="${cluster:+$cluster,}m$i=http://127.0.0.1:$pp"
		eps="${eps:+$eps;}127.0.0.1:$cp"
		ctleps="${ctleps:+$ctleps,}$scheme://127.0.0.1:$cp"
		i=$((i + 1))
	done
	i=1
	while [ "$i" -le "$n" ]; do
		cp=$(cat "$dir/m$i.cport"); pp=$(cat "$dir/m$i.pport")
		echo "etcd --name m$i --data-dir $dir/m$i" \
			"--listen-client-urls $scheme://127.0.0.1:$cp --advertise-client-urls $scheme://127.0.0.1:$cp" \
			"--listen-peer-urls http://127.0.0.1:$pp --initial-advertise-peer-urls http://127.0.0.1:$pp" \
			"--initial-cluster $cluster --initial-cluster-state new --initial-cluster-token novafs-$$" \
			"--unsafe-no-fsync --logger zap --log-outputs stderr $cflags ${NOVAFS_ETCD_FLAGS:-}" >"$dir/m$i.cmd"
		start_member "$i"
		i=$((i + 1))
	done
	prefix="novafs-test-$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')"
	ctlflags="--endpoints=$ctleps"
	if [ "$tls" = tls ]; then
		url="etcd+https://$eps/$prefix?cacert=$dir/ca.pem&cert=$dir/client.pem&key=$dir/client.key"
		ctlflags="$ctlflags --cacert=$dir/ca.pem --cert=$dir/client.pem --key=$dir/client.key"
	else
		url="etcd://$eps/$prefix"
	fi
	{
		echo "NOVAFS_ETCD_ENDPOINTS='$eps'; export NOVAFS_ETCD_ENDPOINTS"
		echo "NOVAFS_ETCD_URL='$url'; export NOVAFS_ETCD_URL"
		echo "NOVAFS_ETCD_TLS='$tls'; export NOVAFS_ETCD_TLS"
		echo "NOVAFS_ETCD_CA='$( [ "$tls" = tls ] && echo "$dir/ca.pem" )'; export NOVAFS_ETCD_CA"
		echo "NOVAFS_ETCD_CTL='env ETCDCTL_API=3 etcdctl $ctlflags'; export NOVAFS_ETCD_CTL"
	} >"$dir/env.sh"
	echo "$n" >"$dir/n"
}

# Wait, at most WAIT_S seconds, until the endpoints are healthy; a
# member that exits fails the wait at once (no use waiting it out).
wait_healthy() {
	end=$(( $(date +%s) + WAIT_S ))
	while :; do
		i=1
		while [ "$i" -le "$n" ]; do
			member_alive "$i" || { log "member m$i exited"; return 1; }
			i=$((i + 1))
		done
		ctl endpoint health >/dev/null 2>&1 && return 0
		[ "$(date +%s)" -lt "$end" ] || { log "timed out waiting for etcd endpoints healthy"; return 1; }
		sleep 0.1
	done
}

do_start() {
	n=${1:-1}; tls=${2:-}
	[ "$n" = 1 ] || [ "$n" = 3 ] || { log "N must be 1 or 3"; exit 2; }
	install_etcd
	mkdir -p "$dir"
	scheme=http; cflags=""
	if [ "$tls" = tls ]; then
		command -v openssl >/dev/null 2>&1 || { log "no openssl"; exit 77; }
		make_certs
		scheme=https
		cflags="--cert-file $dir/server.pem --key-file $dir/server.key"
		cflags="$cflags --client-cert-auth --trusted-ca-file $dir/ca.pem"
	fi
	# free_port's ports are free when asked, not when etcd binds them:
	# a member that exits because another process took its port in
	# between is started again, with the whole cluster on new ports
	# (three tries).  Any other failure prints every member's log tail.
	try=1
	while :; do
		start_cluster
		if wait_healthy; then
			break
		fi
		do_stop_keep
		if [ "$try" -lt 3 ] && grep -qi 'address already in use' "$dir"/m*.log 2>/dev/null; then
			log "a member lost its port to another process (try $try of 3); new ports"
			i=1
			while [ "$i" -le "$n" ]; do rm -rf "$dir/m$i"; i=$((i + 1)); done
			try=$((try + 1))
			continue
		fi
		i=1
		while [ "$i" -le "$n" ]; do
			log "member m$i: the last lines of $dir/m$i.log:"
			tail -n 15 "$dir/m$i.log" >&2 || true
			i=$((i + 1))
		done
		exit 1
	done
	cat "$dir/env.sh"
}

do_kill() {
	i=$1; sig=${2:-KILL}
	pid=$(cat "$dir/m$i.pid")
	kill -"$sig" "$pid" 2>/dev/null || true
	if [ "$sig" = KILL ] || [ "$sig" = TERM ]; then
		j=0
		while kill -0 "$pid" 2>/dev/null && [ "$j" -lt 100 ]; do sleep 0.1; j=$((j + 1)); done
	fi
}

do_leader() {
	n=$(cat "$dir/n"); i=1
	while [ "$i" -le "$n" ]; do
		if member_alive "$i"; then
			. "$dir/env.sh"
			cp=$(cat "$dir/m$i.cport")
			scheme=http; [ "$NOVAFS_ETCD_TLS" = tls ] && scheme=https
			if env ETCDCTL_API=3 etcdctl --endpoints="$scheme://127.0.0.1:$cp" \
				${NOVAFS_ETCD_CA:+--cacert=$NOVAFS_ETCD_CA --cert=$dir/client.pem --key=$dir/client.key} \
				endpoint status -w json 2>/dev/null |
				python3 -c 'import json,sys; s=json.load(sys.stdin)[0]["Status"]; sys.exit(0 if s["leader"]==s["header"]["member_id"] else 1)'; then
				echo "$i"; return 0
			fi
		fi
		i=$((i + 1))
	done
	return 1
}

do_stop_keep() {
	for f in "$dir"/m*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		kill -TERM "$pid" 2>/dev/null || true
	done
	for f in "$dir"/m*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f"); j=0
		while kill -0 "$pid" 2>/dev/null && [ "$j" -lt 50 ]; do sleep 0.1; j=$((j + 1)); done
		kill -KILL "$pid" 2>/dev/null || true
	done
}

case $cmd in
start) do_start "${3:-1}" "${4:-}" ;;
env) cat "$dir/env.sh" ;;
kill) do_kill "$3" "${4:-KILL}" ;;
restart) start_member "$3"; wait_for "member $3" ctl endpoint health --cluster=false ;;
leader) do_leader ;;
compact)
	rev=$(ctl endpoint status -w json | python3 -c 'import json,sys; print(max(s["Status"]["header"]["revision"] for s in json.load(sys.stdin)))')
	ctl compact "$rev" >/dev/null ;;
stop) do_stop_keep; rm -rf "$dir" ;;
*) echo "usage: $0 start|env|kill|restart|leader|compact|stop DIR ..." >&2; exit 2 ;;
esac
