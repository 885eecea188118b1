#!/bin/bash
# bench/append_bulk.sh - bulk loads: per-write durability against
# durable=fsync, on a store with a given PUT latency.
#
# One mount with store_faults=latency_ms=LATENCY_MS:prefix=chains/ (every
# slot PUT waits that long first: a stand-in for an object store's round
# trip; 0: the plain directory store).  Per repetition, interleaved and in
# rotating order:
#   W  dd if=SRC of=STREAM bs=1M into a fresh stream, user.nova.durable=write
#      (each 1 MiB write() returns when durable: one PUT outstanding)
#   F  the same with user.nova.durable=fsync (write() returns at admission,
#      dd's close when everything is durable: up to put_window PUTs)
# Timed with wall time around dd, i.e. until durable in both modes.  MB/s
# is 10^6 bytes/s; the daemon's CPU s per GiB beside it.
#
# Environment: SIZE_MB (64), REPS (3), LATENCY_MS (20), plus the common
# ones of bench/lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

: "${SIZE_MB:=64}"
: "${REPS:=3}"
: "${LATENCY_MS:=20}"
bytes=$((SIZE_MB * 1048576))

bench_init append_bulk
need_space $((REPS * 2 * SIZE_MB + SIZE_MB + 256))
head -c "$bytes" /dev/urandom > "$B_TMP/src"
sync "$B_TMP/src"
faults=
((LATENCY_MS > 0)) && faults="store_faults=latency_ms=$LATENCY_MS:prefix=chains/"
nova_start "$faults"
mkdir "$MNT/bulk"

# run MODE TAG: seconds, CPU use and CPU s per GiB of one dd.
run() {
	local f="$MNT/bulk/$2" t0 t1 c0 c1 cpu
	: > "$f"
	setfattr -n user.nova.durable -v "$1" "$f"
	c0=$(cpu_snap)
	t0=$(now)
	dd if="$B_TMP/src" of="$f" bs=1M status=none
	t1=$(now)
	c1=$(cpu_snap)
	[ "$(stat -c %s "$f")" = "$bytes" ] || die "$f: size $(stat -c %s "$f"), expected $bytes"
	cpu=$(cpu_delta "$c0" "$c1")
	cores=$(tr ' ' '\n' <<< "$cpu" | sed -n 's/^daemon_cores=//p')
	echo "$(calc "$t1 - $t0") $cpu cpu_s_per_gib=$(calc "$cores * ($t1 - $t0) * 1073741824 / $bytes")"
	nova_wait_absorbed "$f"
}

declare -A MB
for rep in $(seq 1 "$REPS"); do
	order="write fsync"
	((rep % 2 == 0)) && order="fsync write"
	for mode in $order; do
		read -r s cpu <<< "$(run "$mode" "$mode-$rep")"
		m=$(calc "$bytes / $s / 1e6")
		result "mode=$mode rep=$rep size_mib=$SIZE_MB latency_ms=$LATENCY_MS secs=$s mbps=$m $cpu"
		MB[$mode]+="$m "
		settle
	done
done
printf '\n== append_bulk: %d MiB, PUT latency %d ms, %d reps; MB/s median [min-max]\n' \
	"$SIZE_MB" "$LATENCY_MS" "$REPS"
for mode in write fsync; do
	# shellcheck disable=SC2086
	printf '%-6s %s\n' "$mode" "$(summary ${MB[$mode]})"
done
nova_stop
