#!/bin/sh
# rgw.sh - a throwaway single-node Ceph RADOS Gateway for tests.
#
#   tests/s3/rgw.sh start DIR   build and start a cluster under DIR (made
#                               if missing), print its environment
#   tests/s3/rgw.sh env DIR     print the environment again
#   tests/s3/rgw.sh stop DIR    stop radosgw, osd, mon by PID; remove DIR
#
# The environment (for `eval`):
#   NOVAFS_RGW_ENDPOINT, NOVAFS_RGW_ACCESS_KEY, NOVAFS_RGW_SECRET_KEY,
#   NOVAFS_RGW_BUCKET, NOVAFS_RGW_URL (a ready store URL: s3://...).
#
# Everything lives under DIR: every ceph command gets -c DIR/ceph.conf,
# which points run dir, sockets, logs, mon and osd data and the keyring
# into DIR; nothing touches /etc/ceph or /var/lib/ceph.  One ceph-mon,
# one ceph-osd on memstore (data in RAM), one radosgw on 127.0.0.1 only;
# no ceph-mgr.  See /work/shared/notes/s3-peers.md for why each setting
# is there.  Packages are installed when missing (root and the Debian
# mirror needed); exit 77 (skip) when that is impossible.
#
# Not for: anything but tests.  Authentication between the daemons is
# off; the gateway verifies SigV4 for its one user.
set -eu

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|env DIR" >&2; exit 2; }

ACCESS_KEY=NOVAFSTESTACCESSKEY0
SECRET_KEY=novafsTestSecretKey0000000000000000000000
BUCKET=novafs-test
WAIT_S=${NOVAFS_RGW_WAIT_S:-90}

log() { echo "rgw.sh: $*" >&2; }

have_ceph() {
	command -v ceph-mon >/dev/null 2>&1 && command -v ceph-osd >/dev/null 2>&1 &&
	command -v radosgw >/dev/null 2>&1 && command -v radosgw-admin >/dev/null 2>&1 &&
	command -v monmaptool >/dev/null 2>&1 && command -v uuidgen >/dev/null 2>&1 &&
	command -v curl >/dev/null 2>&1 && command -v ss >/dev/null 2>&1
}

install_ceph() {
	have_ceph && return 0
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		log "ceph is not installed and cannot be (not root or no apt-get)"
		exit 77
	fi
	log "installing ceph-mon ceph-osd radosgw (about 70 MB)"
	export DEBIAN_FRONTEND=noninteractive
	if ! { apt-get install -y --no-install-recommends ceph-mon ceph-osd radosgw \
		uuid-runtime iproute2 curl >"${TMPDIR:-/tmp}/novafs-rgw-apt.log" 2>&1 ||
	       { apt-get update >>"${TMPDIR:-/tmp}/novafs-rgw-apt.log" 2>&1 &&
		 apt-get install -y --no-install-recommends ceph-mon ceph-osd radosgw \
			uuid-runtime iproute2 curl >>"${TMPDIR:-/tmp}/novafs-rgw-apt.log" 2>&1; }; }; then
		log "apt-get failed (see ${TMPDIR:-/tmp}/novafs-rgw-apt.log)"
		exit 77
	fi
	have_ceph || { log "ceph tools still missing after install"; exit 77; }
}

# A TCP port nobody listens on (random; ss tells us what is taken) and
# not handed out before by this script ($dir/ports: the monitor's two
# ports once came out equal, and it could bind neither).
free_port() {
	while :; do
		p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 12000 )) # below the ephemeral ports (32768-): no client socket holds it
		grep -qx "$p" "$dir/ports" 2>/dev/null && continue
		ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p" >>"$dir/ports"; echo "$p"; return; }
	done
}

print_env() {
	[ -f "$dir/env" ] || { log "no cluster under $dir"; exit 1; }
	cat "$dir/env"
}

# Wait until "$@" succeeds, at most WAIT_S seconds (by the clock: one
# try of a ceph command can take its 5 s connect timeout); while
# waiting, the daemon named by $WAIT_ALIVE (a pid file's name) must stay
# up, or the wait fails at once.
wait_for() {
	what=$1; shift
	end=$(( $(date +%s) + WAIT_S ))
	while ! "$@" >/dev/null 2>&1; do
		if [ -n "${WAIT_ALIVE:-}" ] && ! alive "$WAIT_ALIVE"; then
			log "$WAIT_ALIVE exited while waiting for $what"
			return 1
		fi
		if [ "$(date +%s)" -ge "$end" ]; then
			log "timed out waiting for $what"
			return 1
		fi
		sleep 0.1
	done
}

alive() { [ -f "$dir/$1.pid" ] && kill -0 "$(cat "$dir/$1.pid")" 2>/dev/null; }

# A signed request with curl's own SigV4 (fine for these plain requests).
s3curl() {
	method=$1 path=$2
	curl -fsS -o /dev/null -X "$method" \
		--aws-sigv4 "aws:amz:us-east-1:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
		-H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
		"http://127.0.0.1:$RGW_PORT$path"
}

stop_one() {
	f="$dir/$1.pid"
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.1; i=$((i + 1))
		done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
}

do_stop() {
	[ -d "$dir" ] || return 0
	stop_one radosgw
	stop_one osd
	stop_one mon
	rm -rf "$dir"
}

# Ports, ceph.conf, the monitor made and started: 0 once it answers, 1
# when it exits first or the wait times out.
start_mon() {
	FSID=$(uuidgen)
	MON_V1=$(free_port)
	MON_V2=$(free_port)
	RGW_PORT=$(free_port)
	conf="$dir/ceph.conf"
	cat >"$conf" <<CONF
[global]
fsid = $FSID
mon host = [v2:127.0.0.1:$MON_V2,v1:127.0.0.1:$MON_V1]
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
paxos propose interval = 0.01
mon osd reporter subtree level = osd
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
keyring = $dir/keyring
mon data = $dir/mon/\$cluster-\$id
osd data = $dir/osd/\$cluster-\$id
osd objectstore = memstore
memstore device bytes = 2147483648
[client.rgw.test]
# tcp_nodelay=1: radosgw writes a response's head and body separately, and
# without it Nagle holds every small body for the client's delayed ACK
# (~44 ms a GET on loopback).
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT tcp_nodelay=1
rgw data = $dir/rgw
rgw dns name = localhost
CONF
	: >"$dir/keyring"
	monmaptool --create --addv a "[v2:127.0.0.1:$MON_V2,v1:127.0.0.1:$MON_V1]" \
		--fsid "$FSID" "$dir/monmap" >"$dir/log/setup.log" 2>&1
	ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" >>"$dir/log/setup.log" 2>&1
	ceph-mon -c "$conf" -i a -f >"$dir/log/mon.out" 2>&1 </dev/null &
	echo $! >"$dir/mon.pid"
	WAIT_ALIVE=mon wait_for "the monitor" ceph -c "$conf" --connect-timeout 5 mon stat
}

do_start() {
	install_ceph
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if alive radosgw; then print_env; return 0; fi
	mkdir -p "$dir/run" "$dir/log" "$dir/mon" "$dir/osd/ceph-0" "$dir/rgw"
	# A monitor that lost a port to another process between free_port
	# and its bind is started again on new ports (three tries).
	try=1
	while :; do
		start_mon && break
		stop_one mon
		if [ "$try" -lt 3 ] && grep -qi 'address already in use' "$dir/log/mon.out"; then
			log "the monitor lost its port to another process (try $try of 3); new ports"
			rm -rf "$dir/mon" "$dir/monmap" && mkdir -p "$dir/mon"
			try=$((try + 1))
			continue
		fi
		tail -n 15 "$dir/log/mon.out" >&2 || true
		do_stop
		exit 1
	done
	OSD_UUID=$(uuidgen)
	id=$(ceph -c "$conf" osd new "$OSD_UUID" 2>>"$dir/log/setup.log")
	[ "$id" = 0 ] || { log "osd new answered '$id'"; do_stop; exit 1; }
	ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$OSD_UUID" >>"$dir/log/setup.log" 2>&1
	ceph-osd -c "$conf" -i 0 -f >"$dir/log/osd.out" 2>&1 </dev/null &
	echo $! >"$dir/osd.pid"
	wait_for "osd.0 up" sh -c "ceph -c '$conf' osd dump 2>/dev/null | grep -q '^osd.0 up'"
	radosgw-admin -c "$conf" user create --uid=test --display-name=test \
		--access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >>"$dir/log/setup.log" 2>&1
	radosgw -c "$conf" -n client.rgw.test -f >"$dir/log/radosgw.out" 2>&1 </dev/null &
	echo $! >"$dir/radosgw.pid"
	if ! wait_for "radosgw" s3curl GET /; then
		tail -5 "$dir/log/radosgw.out" >&2 || true
		do_stop
		exit 1
	fi
	s3curl PUT "/$BUCKET"
	ep="http://127.0.0.1:$RGW_PORT"
	cat >"$dir/env" <<ENV
NOVAFS_RGW_ENDPOINT='$ep'; export NOVAFS_RGW_ENDPOINT
NOVAFS_RGW_ACCESS_KEY='$ACCESS_KEY'; export NOVAFS_RGW_ACCESS_KEY
NOVAFS_RGW_SECRET_KEY='$SECRET_KEY'; export NOVAFS_RGW_SECRET_KEY
NOVAFS_RGW_BUCKET='$BUCKET'; export NOVAFS_RGW_BUCKET
NOVAFS_RGW_URL='s3://$BUCKET?endpoint=$ep&access_key=$ACCESS_KEY&secret_key=$SECRET_KEY'; export NOVAFS_RGW_URL
ENV
	print_env
}

case $cmd in
start) do_start ;;
stop) do_stop ;;
env) print_env ;;
*) echo "usage: $0 start|stop|env DIR" >&2; exit 2 ;;
esac
