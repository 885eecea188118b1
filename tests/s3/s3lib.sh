# tests/s3/s3lib.sh - helpers for the scripts that run novafs against
# throwaway S3 servers (tests/s3/t_s3_suite.sh, tests/s3/t_express_zones.sh,
# bench/peers/run.sh).  Sourced by bash; every function works on the
# server directories of tests/s3/rgw.sh and tests/s3/s3rver.sh.
#
# What it adds to rgw.sh / s3rver.sh:
#  - s3_rgw_start restarts radosgw with `tcp_nodelay=1` on its beast
#    frontend.  Without it every ranged GET of a small object costs ~44 ms
#    on loopback (radosgw writes the response head and body separately;
#    Nagle holds the body until the client's delayed ACK), which turns a
#    cold read of 1000 one-record slots from 2 s into 90 s.  A real S3
#    endpoint has no such stall, so tests and benchmarks should not either.
#  - a signed curl for bucket create and plain requests, and the request
#    count of radosgw's log ("req done" lines, debug rgw = 1, its default).
#
# Exit statuses of the start functions follow automake: 77 = the server
# cannot be installed here (skip), anything else non-zero = it failed.

S3LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# s3_curl ENDPOINT ACCESS SECRET METHOD PATH [curl args...]: one SigV4-signed
# request with an empty body (curl's own signer is fine for these).
s3_curl() {
	local ep=$1 ak=$2 sk=$3 method=$4 path=$5
	shift 5
	curl -fsS -X "$method" --aws-sigv4 "aws:amz:us-east-1:s3" --user "$ak:$sk" \
		-H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
		"$@" "$ep$path"
}

# s3_wait_http SECONDS URL: until URL answers any HTTP status.
s3_wait_http() {
	local n=$(($1 * 10))
	until [ "$(curl -s -o /dev/null -w '%{http_code}' "$2")" != 000 ]; do
		((n-- > 0)) || return 1
		sleep 0.1
	done
}

# s3_rgw_start DIR: start a throwaway RGW under DIR (tests/s3/rgw.sh), then
# restart its radosgw with tcp_nodelay=1; evals the NOVAFS_RGW_* variables.
# Status: 0, 77 (cannot be installed), other (failed; nothing left running).
s3_rgw_start() {
	local dir=$1 out rc pid conf
	out=$(sh "$S3LIB_DIR/rgw.sh" start "$dir") || {
		rc=$?
		return "$rc"
	}
	eval "$out"
	conf=$dir/ceph.conf
	grep -q 'tcp_nodelay' "$conf" && return 0
	sed -i 's/^\(rgw frontends = beast endpoint=[0-9.:]*\)$/\1 tcp_nodelay=1/' "$conf"
	grep -q 'tcp_nodelay=1' "$conf" || { echo "s3lib: cannot set tcp_nodelay in $conf" >&2; return 0; }
	pid=$(cat "$dir/radosgw.pid")
	kill "$pid" 2>/dev/null || true
	local n=100
	while kill -0 "$pid" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
	radosgw -c "$conf" -n client.rgw.test -f >>"$dir/log/radosgw.out" 2>&1 </dev/null &
	echo $! >"$dir/radosgw.pid"
	if ! s3_wait_http 60 "$NOVAFS_RGW_ENDPOINT/"; then
		echo "s3lib: radosgw did not come back with tcp_nodelay=1" >&2
		sh "$S3LIB_DIR/rgw.sh" stop "$dir" >/dev/null 2>&1
		return 1
	fi
}

# s3_rgw_stop DIR: stop radosgw, osd, mon by PID and remove DIR.
s3_rgw_stop() {
	sh "$S3LIB_DIR/rgw.sh" stop "$1" >/dev/null 2>&1 || true
}

# s3_rgw_bucket_create NAME: a new bucket on the RGW of NOVAFS_RGW_*.
s3_rgw_bucket_create() {
	s3_curl "$NOVAFS_RGW_ENDPOINT" "$NOVAFS_RGW_ACCESS_KEY" "$NOVAFS_RGW_SECRET_KEY" \
		PUT "/$1" -o /dev/null
}

# s3_rgw_bucket_purge DIR NAME: delete a bucket and all its objects (frees
# the memstore's RAM at once: --bypass-gc).
s3_rgw_bucket_purge() {
	radosgw-admin -c "$1/ceph.conf" bucket rm --bucket="$2" --purge-objects \
		--bypass-gc >/dev/null 2>>"$1/log/setup.log"
}

# s3_rgw_url BUCKET [EXTRA]: a store URL for BUCKET on the RGW of
# NOVAFS_RGW_*, EXTRA appended to the query ("&k=v...").
s3_rgw_url() {
	printf 's3://%s?endpoint=%s&access_key=%s&secret_key=%s%s' "$1" \
		"$NOVAFS_RGW_ENDPOINT" "$NOVAFS_RGW_ACCESS_KEY" "$NOVAFS_RGW_SECRET_KEY" "${2:-}"
}

# s3_rgw_requests DIR: requests radosgw has completed so far (its log's
# "req done" lines; debug rgw = 1 is radosgw's default level).
s3_rgw_requests() {
	grep -c 'req done' "$1/log/client.rgw.test.log" 2>/dev/null || echo 0
}

# s3_rgw_used_bytes DIR: bytes stored in the cluster (ceph df, all pools).
s3_rgw_used_bytes() {
	ceph -c "$1/ceph.conf" df --format json 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["stats"]["total_used_raw_bytes"])' 2>/dev/null ||
		echo "?"
}

# s3_s3rver_start DIR: start s3rver under DIR (tests/s3/s3rver.sh); evals
# NOVAFS_S3RVER_*.  Status as s3_rgw_start.
s3_s3rver_start() {
	local out
	out=$(sh "$S3LIB_DIR/s3rver.sh" start "$1") || return $?
	eval "$out"
}

# s3_s3rver_stop DIR: stop it by PID, remove DIR.
s3_s3rver_stop() {
	sh "$S3LIB_DIR/s3rver.sh" stop "$1" >/dev/null 2>&1 || true
}
