#!/bin/bash
# bench/linger_cost.sh - the cost/latency trade-off of the flight linger:
# a trickle of small records from many writers, at two lingers.
#
# WRITERS writers (30) each append one REC_SIZE-byte record (100) every
# INTERVAL_MS (50) into their own stream (bench/appendbench.py
# --interval-ms), for DURATION s (10), on a store whose slot PUTs wait
# LATENCY_MS (20) first (store_faults=latency_ms=..:prefix=chains/, a
# stand-in for an object store's round trip; 0: the plain directory
# store).  For each linger in LINGERS_US ("1000 50000"), REPS (2) times,
# interleaved, one mount with -o linger_standard_us=L: slot PUTs (store
# requests) per 1,000 appends, records per flight, and the ack latency
# p50/p99 of the writes.
#
# With RGW=1 the store is a throwaway Ceph RGW on 127.0.0.1 instead
# (tests/s3/s3lib.sh; LATENCY_MS is then 0: the PUT's own round trip is
# the cost), the issue-13 figure "requests per 1,000 appends on RGW".
#
# Environment: WRITERS, REC_SIZE, INTERVAL_MS, DURATION, LATENCY_MS,
# LINGERS_US, REPS, RGW (0), plus the common ones of bench/lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

: "${WRITERS:=30}"
: "${REC_SIZE:=100}"
: "${INTERVAL_MS:=50}"
: "${DURATION:=10}"
: "${LATENCY_MS:=20}"
: "${LINGERS_US:=1000 50000}"
: "${REPS:=2}"
: "${RGW:=0}"

bench_init linger_cost
need_space 512
faults=
if [ "$RGW" = 1 ]; then
	LATENCY_MS=0
	. "$BENCH_DIR/../tests/s3/s3lib.sh"
	s3_rgw_start "$B_TMP/rgw" > "$B_TMP/rgw.out" 2>&1 ||
		die "the RGW did not start: $(tail -3 "$B_TMP/rgw.out")"
	# The mount goes (bench_cleanup) before the RGW it writes to.
	linger_cleanup() {
		local rc=$?
		set +e
		nv_is_mounted "$MNT" && timeout 60 fusermount3 -u "$MNT"
		s3_rgw_stop "$B_TMP/rgw"
		(exit "$rc")
		bench_cleanup
	}
	trap linger_cleanup EXIT
	s3_rgw_bucket_create linger || die "cannot create the RGW bucket"
	faults="store=$(s3_rgw_url linger),"
	say "store: RGW at $NOVAFS_RGW_ENDPOINT"
fi
((LATENCY_MS > 0)) && faults="store_faults=latency_ms=$LATENCY_MS:prefix=chains/,"

# kv KEY LINE: the value of KEY=... in a key=value line.
kv() { tr ' ' '\n' <<< "$2" | awk -F= -v k="$1" '$1 == k { print $2 }'; }

declare -A PUTS P50 P99
for rep in $(seq 1 "$REPS"); do
	for l in $LINGERS_US; do
		nova_start "${faults}linger_standard_us=$l"
		mkdir -p "$MNT/trickle$rep-$l"
		s0=$(nova_stats)
		out=$(python3 "$BENCH_DIR/appendbench.py" --dir "$MNT/trickle$rep-$l" --mode streams \
			--writers "$WRITERS" --size "$REC_SIZE" --duration "$DURATION" \
			--warmup 0.2 --interval-ms "$INTERVAL_MS")
		s1=$(nova_stats)
		d=$(stats_delta "$s0" "$s1" appends flights)
		apps=$(kv eng_appends "$d")
		fl=$(kv eng_flights "$d")
		per=$(calc "$fl * 1000 / $apps")
		result "linger_us=$l rep=$rep writers=$WRITERS rec=$REC_SIZE interval_ms=$INTERVAL_MS latency_ms=$LATENCY_MS puts_per_1000_appends=$per recs_per_flight=$(calc "$apps / $fl") $out"
		PUTS[$l]+="$per "
		P50[$l]+="$(kv p50_us "$out") "
		P99[$l]+="$(kv p99_us "$out") "
		nova_stop
	done
done
printf '\n== linger_cost: %d writers x 1 record of %d B every %d ms, PUT latency %d ms%s; median [min-max]\n' \
	"$WRITERS" "$REC_SIZE" "$INTERVAL_MS" "$LATENCY_MS" "$([ "$RGW" = 1 ] && echo ', store RGW')"
printf '%-10s %-28s %-24s %s\n' linger_us puts_per_1000_appends p50_us p99_us
for l in $LINGERS_US; do
	# shellcheck disable=SC2086
	printf '%-10s %-28s %-24s %s\n' "$l" "$(summary ${PUTS[$l]})" "$(summary ${P50[$l]})" \
		"$(summary ${P99[$l]})"
done
