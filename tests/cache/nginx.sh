#!/bin/sh
# nginx.sh - throwaway caching proxies (the object cache tier, DESIGN.md 8)
# in front of an S3 endpoint, for tests and bench/.
#
#   tests/cache/nginx.sh start DIR N ORIGIN TOKEN_FILE [SLICE_KIB]
#                                  start N nginx proxies of ORIGIN
#                                  (http://host:port) under DIR, print
#                                  their environment
#   tests/cache/nginx.sh env DIR   print the environment again
#   tests/cache/nginx.sh stop DIR  stop every proxy by PID, remove DIR
#
# The environment (for `eval`): NOVAFS_CACHE_URLS ('+' between the
# http://127.0.0.1:PORT, the store URL's cache= value), NOVAFS_CACHE_DIR.
# Proxy i keeps its configuration, PID, logs and cache under DIR/p$i;
# DIR/p$i/access.log has one line per request: method, URI, the Range
# asked, the slice fetched, $upstream_cache_status (HIT, MISS, BYPASS) and
# the status.
#
# What every proxy does (engine/store/s3/cache.c, its invariants):
#  - refuses (403) every request whose X-Nova-Cache-Auth is not the token
#    of TOKEN_FILE;
#  - caches 200/206 answers per (path, slice) with the slice module: the
#    cache key is $uri and the slice, never the query (a presigned URL's
#    signature) or the Authorization header;
#  - forwards Host, Authorization and the query as they came (the client
#    signed for the origin's host; Range is not signed, the slice module
#    rewrites it);
#  - with X-Nova-Cache-Refresh the cache is bypassed and the answer stored
#    over the entry: after a delete the origin's 404 replaces the cached
#    bytes for one second (the purge; Debian 12's cache-purge module
#    crashes nginx 1.22's workers on any purge request).
# Workers run as the invoking user (nginx's own default, nobody, cannot
# enter a private test directory).  nginx comes from Debian (packages.txt [test]); exit 77 when it is missing.
set -eu

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start DIR N ORIGIN TOKEN_FILE [SLICE_KIB] | env DIR | stop DIR" >&2; exit 2; }
WAIT_S=${NOVAFS_CACHE_WAIT_S:-20}

log() { echo "nginx.sh: $*" >&2; }

free_port() {
	while :; do
		p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 12000 )) # below the ephemeral ports (32768-): no client socket holds it
		grep -qx "$p" "$dir/ports" 2>/dev/null && continue
		ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p" >>"$dir/ports"; echo "$p"; return; }
	done
}

print_env() {
	urls=
	for f in "$dir"/p*/port; do
		[ -f "$f" ] || continue
		urls="${urls:+$urls+}http://127.0.0.1:$(cat "$f")"
	done
	echo "NOVAFS_CACHE_URLS='$urls'; export NOVAFS_CACHE_URLS"
	echo "NOVAFS_CACHE_DIR='$dir'; export NOVAFS_CACHE_DIR"
}

# conf DIR_I PORT ORIGIN TOKEN SLICE_KIB: one proxy's nginx.conf.
conf() {
	cat <<EOF
daemon on;
user $(id -un) $(id -gn);
worker_processes 1;
pid $1/nginx.pid;
error_log $1/error.log notice;
events { worker_connections 512; }
http {
	log_format nova '\$request_method \$uri range=\$http_range slice=\$slice_range cache=\$upstream_cache_status status=\$status';
	access_log $1/access.log nova;
	client_body_temp_path $1/tmp-body;
	proxy_temp_path $1/tmp-proxy;
	fastcgi_temp_path $1/tmp-fcgi;
	uwsgi_temp_path $1/tmp-uwsgi;
	scgi_temp_path $1/tmp-scgi;
	proxy_cache_path $1/cache keys_zone=nova:16m max_size=2g inactive=1h use_temp_path=off;
	server {
		listen 127.0.0.1:$2;
		location / {
			if (\$http_x_nova_cache_auth != "$4") { return 403; }
			slice ${5}k;
			proxy_cache nova;
			proxy_cache_key \$uri|\$slice_range;
			proxy_cache_valid 200 206 1h;
			proxy_cache_valid 404 410 1s;
			proxy_cache_bypass \$http_x_nova_cache_refresh;
			proxy_cache_lock on;
			proxy_set_header Range \$slice_range;
			proxy_set_header Host \$http_host;
			proxy_set_header X-Nova-Cache-Auth "";
			proxy_set_header X-Nova-Cache-Refresh "";
			proxy_set_header Connection "";
			proxy_http_version 1.1;
			proxy_pass $3;
		}
	}
}
EOF
}

case $cmd in
start)
	n=${3:?N}; origin=${4:?ORIGIN}; tokfile=${5:?TOKEN_FILE}; slice=${6:-1024}
	command -v nginx >/dev/null 2>&1 || { log "nginx is needed (apt-get install nginx)"; exit 77; }
	token=$(cat "$tokfile")
	case $token in *[!A-Za-z0-9._~-]*) log "token must be [A-Za-z0-9._~-]"; exit 2 ;; esac
	mkdir -p "$dir"
	i=0
	while [ "$i" -lt "$n" ]; do
		d="$dir/p$i"
		mkdir -p "$d/cache"
		port=$(free_port)
		echo "$port" >"$d/port"
		conf "$d" "$port" "$origin" "$token" "$slice" >"$d/nginx.conf"
		nginx -q -c "$d/nginx.conf" -p "$d" 2>"$d/start.log" || { log "nginx p$i did not start: $(cat "$d/start.log")"; exit 1; }
		i=$((i + 1))
	done
	for f in "$dir"/p*/port; do
		t=$((WAIT_S * 10))
		until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$(cat "$f")/")" = 403 ]; do
			t=$((t - 1)); [ "$t" -gt 0 ] || { log "proxy on port $(cat "$f") does not answer"; exit 1; }
			sleep 0.1
		done
	done
	print_env
	;;
env)
	print_env
	;;
stop)
	for p in "$dir"/p*/nginx.pid; do
		[ -f "$p" ] || continue
		kill "$(cat "$p")" 2>/dev/null || true
	done
	for p in "$dir"/p*/nginx.pid; do
		[ -f "$p" ] || continue
		t=50
		while kill -0 "$(cat "$p" 2>/dev/null || echo 0)" 2>/dev/null && [ "$t" -gt 0 ]; do sleep 0.1; t=$((t - 1)); done
	done
	rm -rf "$dir"
	;;
*)
	echo "usage: $0 start|env|stop DIR ..." >&2; exit 2 ;;
esac
