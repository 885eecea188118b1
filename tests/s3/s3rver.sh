#!/bin/sh
# s3rver.sh - a throwaway s3rver (npm s3rver 3.7.1) for tests.
#
#   tests/s3/s3rver.sh start DIR   start s3rver with its data under DIR
#                                  (made if missing), print its environment
#   tests/s3/s3rver.sh env DIR     print the environment again
#   tests/s3/s3rver.sh stop DIR    stop it by PID and remove DIR
#
# The environment (for `eval`):
#   NOVAFS_S3RVER_ENDPOINT, NOVAFS_S3RVER_ACCESS_KEY,
#   NOVAFS_S3RVER_SECRET_KEY, NOVAFS_S3RVER_BUCKET, NOVAFS_S3RVER_URL.
#
# s3rver is installed with npm into a cache directory, never globally:
# $NOVAFS_S3RVER_CACHE, default ./.cache/s3rver-3.7.1 below the current
# directory (the build tree under `make check`); exit 77 (skip) when node
# or npm are missing or the install fails.  It listens on 127.0.0.1 only.
# NODE_OPTIONS=--openssl-legacy-provider: without it s3rver's paged
# ListObjectsV2 answers 500 on Node >= 17 (see
# /work/shared/notes/s3-peers.md for what else s3rver gets wrong).
set -eu

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|env DIR" >&2; exit 2; }

VERSION=3.7.1
BUCKET=novafs-test
KEY=S3RVER
CACHE=${NOVAFS_S3RVER_CACHE:-$PWD/.cache/s3rver-$VERSION}
WAIT_S=${NOVAFS_S3RVER_WAIT_S:-30}

log() { echo "s3rver.sh: $*" >&2; }

install_s3rver() {
	[ -x "$CACHE/node_modules/.bin/s3rver" ] && return 0
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		log "node and npm are needed (apt-get install nodejs npm)"
		exit 77
	fi
	mkdir -p "$CACHE"
	log "installing s3rver@$VERSION into $CACHE"
	if ! (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error \
		--no-save "s3rver@$VERSION") >"$CACHE/npm.log" 2>&1; then
		log "npm install failed (see $CACHE/npm.log)"
		exit 77
	fi
}

free_port() {
	while :; do
		p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 12000 )) # below the ephemeral ports (32768-): no client socket holds it
		ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return; }
	done
}

print_env() {
	[ -f "$dir/env" ] || { log "no s3rver under $dir"; exit 1; }
	cat "$dir/env"
}

do_stop() {
	[ -d "$dir" ] || return 0
	if [ -f "$dir/s3rver.pid" ]; then
		pid=$(cat "$dir/s3rver.pid")
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			i=0
			while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
				sleep 0.1; i=$((i + 1))
			done
			kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
		fi
	fi
	rm -rf "$dir"
}

do_start() {
	install_s3rver
	mkdir -p "$dir/data"
	dir=$(cd "$dir" && pwd)
	if [ -f "$dir/s3rver.pid" ] && kill -0 "$(cat "$dir/s3rver.pid")" 2>/dev/null; then
		print_env
		return 0
	fi
	# A port free when picked can be taken before s3rver binds it (CI saw
	# EADDRINUSE): three tries, each on a new port.
	tries=0
	while :; do
		tries=$((tries + 1))
		port=$(free_port)
		NODE_OPTIONS=--openssl-legacy-provider node "$CACHE/node_modules/.bin/s3rver" \
			-d "$dir/data" -a 127.0.0.1 -p "$port" --no-vhost-buckets \
			--configure-bucket "$BUCKET" >"$dir/s3rver.log" 2>&1 </dev/null &
		echo $! >"$dir/s3rver.pid"
		i=0 up=0
		while [ $i -le $((WAIT_S * 10)) ] && kill -0 "$(cat "$dir/s3rver.pid")" 2>/dev/null; do
			if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/$BUCKET")" = 200 ]; then
				up=1
				break
			fi
			i=$((i + 1))
			sleep 0.1
		done
		[ $up = 1 ] && break
		if [ $tries -lt 3 ] && grep -q EADDRINUSE "$dir/s3rver.log" 2>/dev/null; then
			log "port $port was taken before s3rver bound it; another port"
			kill -9 "$(cat "$dir/s3rver.pid")" 2>/dev/null || true
			continue
		fi
		log "s3rver did not come up"
		tail -5 "$dir/s3rver.log" >&2 || true
		do_stop
		exit 1
	done
	ep="http://127.0.0.1:$port"
	cat >"$dir/env" <<ENV
NOVAFS_S3RVER_ENDPOINT='$ep'; export NOVAFS_S3RVER_ENDPOINT
NOVAFS_S3RVER_ACCESS_KEY='$KEY'; export NOVAFS_S3RVER_ACCESS_KEY
NOVAFS_S3RVER_SECRET_KEY='$KEY'; export NOVAFS_S3RVER_SECRET_KEY
NOVAFS_S3RVER_BUCKET='$BUCKET'; export NOVAFS_S3RVER_BUCKET
NOVAFS_S3RVER_URL='s3://$BUCKET?endpoint=$ep&access_key=$KEY&secret_key=$KEY'; export NOVAFS_S3RVER_URL
ENV
	print_env
}

case $cmd in
start) do_start ;;
stop) do_stop ;;
env) print_env ;;
*) echo "usage: $0 start|stop|env DIR" >&2; exit 2 ;;
esac
