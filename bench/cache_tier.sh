#!/bin/bash
# bench/cache_tier.sh - replays of a settled stream with and without the
# object cache tier (engine/store/s3/cache.c, tests/cache/nginx.sh).
#
# Setup: one s3rver (the bucket), behind one plain nginx that only passes
# requests on and logs them (the "origin counter": every request that
# reaches the bucket, with the bytes it sent), and NPROXY caching proxies
# (tests/cache/nginx.sh) in front of that counter.  SIZE_MB of random
# bytes are appended into a stream and settled (settle_trigger_mib=8,
# settle_linger_s=0, read_grace_s=0; the retired slots deleted).
# Then two phases, each REPLAYS cold replays (remount: empty tail and read
# caches; drop_caches; cat STREAM > /dev/null):
#   direct  store=...endpoint=COUNTER: every read goes to the bucket
#   tier    store=...endpoint=COUNTER&cache=P0+P1+...: reads go through
#           the proxies, each page to its owner on the ring
# Reported per phase: origin GETs and bytes (from the counter's log) per
# replay and in all, MB/s of each replay (wall time of the cat), and for
# the tier the pages each proxy fetched from the origin and served from
# its cache (the spread), plus the daemon's closing count of pieces that
# went straight to the bucket.
#
# Environment: SIZE_MB (256), REPLAYS (10), NPROXY (3), SLICE_KIB (1024),
# plus the common ones of bench/lib.sh.  Needs node/npm (s3rver) and nginx.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../tests/s3/s3lib.sh"

: "${SIZE_MB:=256}"
: "${REPLAYS:=10}"
: "${NPROXY:=3}"
: "${SLICE_KIB:=1024}"
NGINX_SH=$(cd "$(dirname "$0")/../tests/cache" && pwd)/nginx.sh
command -v nginx >/dev/null || die "nginx is needed (apt-get install nginx)"

bench_init cache_tier
need_space $((3 * SIZE_MB + 1024))

# ------------------------------------------------------------ servers
s3_s3rver_start "$B_TMP/s3" > /dev/null || die "s3rver did not start"
B_BG+=("$(cat "$B_TMP/s3/s3rver.pid")")
TOK=$B_TMP/cache.token
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TOK"
chmod 600 "$TOK"

# The origin counter: a pass-through nginx (no cache) with a log line per
# request: method, status, bytes sent.
CT=$B_TMP/counter
mkdir -p "$CT"
CPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$CT/nginx.conf" <<EOF
daemon on;
user $(id -un) $(id -gn);
worker_processes 1;
pid $CT/nginx.pid;
error_log $CT/error.log notice;
events { worker_connections 512; }
http {
	log_format c '\$request_method \$status \$body_bytes_sent';
	access_log $CT/access.log c;
	client_body_temp_path $CT/tmp-body;
	proxy_temp_path $CT/tmp-proxy;
	fastcgi_temp_path $CT/tmp-fcgi;
	uwsgi_temp_path $CT/tmp-uwsgi;
	scgi_temp_path $CT/tmp-scgi;
	client_max_body_size 0;
	proxy_request_buffering off;
	proxy_buffering off;
	server {
		listen 127.0.0.1:$CPORT;
		location / {
			proxy_set_header Host \$http_host;
			proxy_set_header Connection "";
			proxy_http_version 1.1;
			proxy_pass $NOVAFS_S3RVER_ENDPOINT;
		}
	}
}
EOF
nginx -q -c "$CT/nginx.conf" -p "$CT"
B_BG+=("$(cat "$CT/nginx.pid")")
COUNTER=http://127.0.0.1:$CPORT
eval "$(sh "$NGINX_SH" start "$B_TMP/px" "$NPROXY" "$COUNTER" "$TOK" "$SLICE_KIB")"
for ((i = 0; i < NPROXY; i++)); do B_BG+=("$(cat "$B_TMP/px/p$i/nginx.pid")"); done
STORE="s3://$NOVAFS_S3RVER_BUCKET?endpoint=$COUNTER&access_key=$NOVAFS_S3RVER_ACCESS_KEY&secret_key=$NOVAFS_S3RVER_SECRET_KEY"
TIER="&cache=$NOVAFS_CACHE_URLS&cache_auth_file=$TOK&cache_slice_kib=$SLICE_KIB"
say "s3rver $NOVAFS_S3RVER_ENDPOINT, counter $COUNTER, proxies $NOVAFS_CACHE_URLS"

# origin_gets / origin_bytes: GETs in the counter's log and their bytes.
origin_gets() { awk '$1 == "GET"' "$CT/access.log" | wc -l; }
origin_bytes() { awk '$1 == "GET" { b += $3 } END { printf "%.0f", b }' "$CT/access.log"; }

# ------------------------------------------------------------ the stream
DEFER_SETTLE=0
head -c $((SIZE_MB << 20)) /dev/urandom > "$B_TMP/src"
nova_start "store=$STORE,settle_trigger_mib=8,settle_linger_s=0,read_grace_s=0,age_cap_standard_s=5"
mkdir -p "$MNT/b"
dd if="$B_TMP/src" of="$MNT/b/s" bs=1M status=none
seq=$(xattr "$MNT/b/s" user.nova.seq)
t=0
until [ "$(xattr "$MNT/b/s" user.nova.settled)" = "$seq" ]; do
	((t++ < 600)) || die "the stream did not settle in 600 s"
	sleep 1
done
say "wrote and settled $SIZE_MB MiB ($seq records)"
nova_stop

# replay PHASE N OPTS: one cold replay; prints the RESULT line.
replay() {
	local g0 b0 t0 t1 g1 b1
	nova_start "store=$STORE$3"
	drop_caches
	g0=$(origin_gets); b0=$(origin_bytes)
	t0=$(now)
	cat "$MNT/b/s" > /dev/null
	t1=$(now)
	g1=$(origin_gets); b1=$(origin_bytes)
	nova_stop
	result "phase=$1 replay=$2 origin_gets=$((g1 - g0)) origin_mib=$(calc "($b1 - $b0) / 1048576") mb_s=$(calc "$SIZE_MB * 1.048576 / ($t1 - $t0)")"
}

for ((r = 1; r <= REPLAYS; r++)); do replay direct "$r" ""; done
g_direct=$(origin_gets)
for ((r = 1; r <= REPLAYS; r++)); do replay tier "$r" "$TIER"; done
nova_start "store=$STORE$TIER"
drop_caches
cmp "$MNT/b/s" "$B_TMP/src" || die "a replay through the tier differs from what was written"
nova_stop
for ((i = 0; i < NPROXY; i++)); do
	result "phase=tier proxy=$i fetched=$(grep -c 'cache=MISS ' "$B_TMP/px/p$i/access.log" || true) hits=$(grep -c 'cache=HIT ' "$B_TMP/px/p$i/access.log" || true)"
done
result "phase=tier direct_pieces_total=$(grep -o 'cache tier: [0-9]* pieces through [0-9]* proxies, [0-9]* straight' "$LOG" | awk '{ s += $8 } END { print s + 0 }')"
say "origin GETs: direct $g_direct in $REPLAYS replays, then $(($(origin_gets) - g_direct)) with the tier"
