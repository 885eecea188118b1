#!/bin/bash
# bench/gateway_replay.sh - replay of a settled stream through novagw
# against the same through a star's cold path, side by side in one run.
#
# Setup: SIZE_MB of random bytes appended (dd bs=1M) into one stream and
# settled (settle_trigger_mib=8, settle_linger_s=0, read_grace_s=60), then
# REPS rounds, each replaying the stream once per row, every row on a
# fresh mount after drop_caches (so the star's tail and read caches are
# empty, and the page cache too):
#   star   cat STREAM > /dev/null on the mount (the star's cold path)
#   gw     bench/gw_replay.py: records by offset, max_bytes=PAGE_BYTES per
#          page, one kept-alive connection, through novagw in proxy mode
#          (the star reads the store and sends every byte to the Gateway)
#   plan   the same through novagw --serve-plan --storage-bucket=BUCKET
#          (vended entries fetched by the Gateway from the bucket, the star
#          asked only for the plan and the residual); only with
#          SERVE_PLAN=1 and a novagw whose --help names --serve-plan,
#          otherwise the row is skipped with a note
#   plan0  the same with --plan-cache=0 (every locate and read plans at
#          the star, as before the plan cache), when novagw has
#          --plan-cache; plan rows report the Gateway's cache counters
#          (/healthz: footer hits and misses, plan hits, plans asked)
# Reported per replay: MB/s (wall time of the replay), the star's CPU
# (utime+stime of the novafs process over the replay, in seconds and in
# ns per byte), the Gateway's CPU, bytes the star wrote out over the
# replay to FUSE (/proc/PID/io wchar: the replies to cat) and over the
# star API (TCP bytes_sent of the star port's sockets, sampled by ss),
# the star's store reads (user.nova.stats cold_read_bytes, chunk and
# footer fetches) and plans; the load.  After the rounds, one gw replay
# (and one plan replay) compares every page with the source file.
#
# Environment: SIZE_MB (1024), REPS (3), PAGE_BYTES (1048576, the
# Gateway's max_bytes cap), STORE (dir: the mount's data_dir; s3: an
# s3rver bucket, tests/s3/s3rver.sh, needs node), SERVE_PLAN (0; 1 adds
# the plan row when novagw has --serve-plan), STORAGE_BUCKET (the store
# URL novagw reads raw plans from; default the mount's store: the s3rver
# bucket's URL, or dir:$DATA/objects), READ_GRACE_S (60), plus the common ones of bench/lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gwlib.sh"

: "${SIZE_MB:=1024}"
: "${REPS:=3}"
: "${PAGE_BYTES:=1048576}"
: "${STORE:=dir}"
: "${SERVE_PLAN:=0}"
: "${STORAGE_BUCKET:=}"
: "${READ_GRACE_S:=60}"
command -v curl > /dev/null || die "curl is needed"

bench_init gateway_replay
need_space $((3 * SIZE_MB + 1024))
gw_files

ROWS="star gw"
if [ "$SERVE_PLAN" = 1 ]; then
	if "$NOVAGW" --help 2>&1 | grep -q -- '--plan-cache'; then
		ROWS="$ROWS plan0 plan"
	elif "$NOVAGW" --help 2>&1 | grep -q -- '--serve-plan'; then
		ROWS="$ROWS plan"
	else
		say "NOTE: $NOVAGW --help names no --serve-plan: the plan row is skipped"
		result "row=plan skipped=no_serve_plan_in_novagw"
	fi
fi

STOREOPT=
if [ "$STORE" = s3 ]; then
	. "$ROOT_DIR/tests/s3/s3lib.sh"
	s3_s3rver_start "$B_TMP/s3" > /dev/null || die "s3rver did not start"
	B_BG+=("$(cat "$B_TMP/s3/s3rver.pid")")
	S3URL="s3://$NOVAFS_S3RVER_BUCKET?endpoint=$NOVAFS_S3RVER_ENDPOINT&access_key=$NOVAFS_S3RVER_ACCESS_KEY&secret_key=$NOVAFS_S3RVER_SECRET_KEY"
	STOREOPT="store=$S3URL,"
	: "${STORAGE_BUCKET:=$S3URL}"
	say "s3rver $NOVAFS_S3RVER_ENDPOINT"
fi
# The mount's default store (engine/stack.c open_store): dir:DATA/objects.
: "${STORAGE_BUCKET:=dir:$DATA/objects}"

# ------------------------------------------------------------ the stream
DEFER_SETTLE=0 # shellcheck disable=SC2034 # read by nova_start (lib.sh)
# read_grace_s bounds a plan's TTL (engine/plan.c: under 1 s nothing is
# vended), so it stays above plan_ttl_s (30).
MOPTS="${STOREOPT}settle_trigger_mib=8,settle_linger_s=0,read_grace_s=$READ_GRACE_S,age_cap_standard_s=5"
head -c $((SIZE_MB << 20)) /dev/urandom > "$B_TMP/src"
star_start "$MOPTS"
mkdir -p "$MNT/logs"
dd if="$B_TMP/src" of="$MNT/logs/s" bs=1M status=none
seq=$(xattr "$MNT/logs/s" user.nova.seq)
t=0
until [ "$(xattr "$MNT/logs/s" user.nova.settled)" = "$seq" ]; do
	((t++ < 900)) || die "the stream did not settle in 900 s"
	sleep 1
done
say "wrote and settled $SIZE_MB MiB ($seq records, store $STORE)"
nova_stop

wchar() { awk '$1 == "wchar:" { print $2 }' "/proc/$1/io"; }

# The star API's TCP sends (the Gateway's questions and fetches): every
# SOCK_MS the star port's established sockets (ss -ti), their bytes_sent
# kept per peer; a connection opened and closed between two samples is
# missed (the cluster client keeps its connections, so few are).
SOCK_MS=${SOCK_MS:-200}
sock_sampler() {
	while :; do
		ss -tinH state established "( sport = :$STAR_PORT )" || true
		sleep "$(calc "$SOCK_MS / 1000")"
	done
}
# sock_mib FILE: the sum over peers of the last bytes_sent seen, in MiB.
sock_mib() {
	awk '/^[0-9]/ { peer = $4; next }
		match($0, /bytes_sent:[0-9]+/) { b[peer] = substr($0, RSTART + 11, RLENGTH - 11) }
		END { for (p in b) t += b[p]; printf "%.2f", t / 1048576 }' "$1"
}
KEYS_STATS="cold_read_bytes chunk_fetches footer_fetches plans plan_entries"

# replay ROW ROUND [CMP]: one cold replay; prints the RESULT line.
replay() {
	local row=$1 c0 c1 s0 s1 w0 w1 t0 t1 g0=0 g1=0 out='' hz
	hz=$(getconf CLK_TCK)
	star_start "$MOPTS"
	case $row in
	gw) gw_start ;;
	plan) gw_start --serve-plan --storage-bucket="$STORAGE_BUCKET" ;;
	plan0) gw_start --serve-plan --plan-cache=0 --storage-bucket="$STORAGE_BUCKET" ;;
	esac
	drop_caches
	sock_sampler > "$B_TMP/ss-$row-$2.txt" 2>/dev/null &
	local samp=$!
	B_BG+=("$samp")
	s0=$(nova_stats)
	w0=$(wchar "$NV_PID")
	[ -n "$GW_PID" ] && g0=$(proc_ticks "$GW_PID")
	c0=$(cpu_snap)
	t0=$(now)
	case $row in
	star)
		if [ -n "${3:-}" ]; then
			cmp "$MNT/logs/s" "$B_TMP/src" || die "the cold path differs from the source"
		else
			cat "$MNT/logs/s" > /dev/null
		fi
		;;
	*) out=$(python3 "$BENCH_DIR/gw_replay.py" "$GW_URL/v1/streams/logs/s/records" \
		"$GW_KEY" "$PAGE_BYTES" ${3:+"$B_TMP/src"}) || die "$row replay failed" ;;
	esac
	t1=$(now)
	c1=$(cpu_snap)
	[ -n "$GW_PID" ] && g1=$(proc_ticks "$GW_PID")
	w1=$(wchar "$NV_PID")
	s1=$(nova_stats)
	local caches=''
	case $row in
	plan*) caches=$(curl -s "$GW_URL/healthz" | python3 -c '
import json, sys
d = json.load(sys.stdin)
f, p = d["footer_cache"], d.get("plans", {})
print("gw_footer_hits=%d gw_footer_misses=%d gw_footer_cached=%d gw_plan_hits=%d gw_plans_asked=%d"
      % (f.get("hits", 0), f.get("misses", 0), f.get("cached", 0), p.get("hits", 0), p.get("asked", 0)))' \
		|| true) ;;
	esac
	sleep "$(calc "$SOCK_MS / 1000")"
	kill "$samp" 2>/dev/null || true
	wait "$samp" 2>/dev/null || true
	local star_s
	star_s=$(calc "($(cut -d' ' -f2 <<< "$c1") - $(cut -d' ' -f2 <<< "$c0")) / $hz")
	result "row=$row round=$2 ${3:+checked=1 }mb_s=$(calc "$SIZE_MB * 1.048576 / ($t1 - $t0)")" \
		"wall_s=$(calc "$t1 - $t0") star_cpu_s=$star_s" \
		"star_ns_per_byte=$(calc "$star_s * 1e9 / ($SIZE_MB * 1048576)")" \
		"gw_cpu_s=$(calc "($g1 - $g0) / $hz") star_fuse_out_mib=$(calc "($w1 - $w0) / 1048576")" \
		"star_api_out_mib=$(sock_mib "$B_TMP/ss-$row-$2.txt")" \
		"$(stats_delta "$s0" "$s1" $KEYS_STATS) $out $caches $(cpu_delta "$c0" "$c1")"
	gw_stop
	nova_stop
}

for ((r = 1; r <= REPS; r++)); do
	for row in $ROWS; do replay "$row" "$r"; done
done
for row in $ROWS; do replay "$row" check 1; done
say "done: rows $ROWS, $REPS rounds of $SIZE_MB MiB"
