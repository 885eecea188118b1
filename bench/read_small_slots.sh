#!/bin/bash
# bench/read_small_slots.sh - cold sequential read of a stream made of many
# small slots (one `echo >>` each, the shape a log written by a shell leaves
# before settlement), with and without read-ahead, in one run.
#
# Every such slot costs two GETs (its footer window, then its chunk), so a
# serial reader pays 2 x N round trips.  The read-ahead fans out across
# slots (engine/read.c): up to prefetch_threads footers and chunks are in
# flight at once.  The store's round trip is emulated with the fault
# store's latency (store_faults=latency_ms=LATENCY_MS on every call), since
# a local directory store answers in microseconds.
#
# Setup: N records appended one `echo >>` at a time (one slot each) into
# one stream, settlement deferred (lib.sh), absorb awaited.  Then per
# repetition, interleaved:
#   A  remount with readahead=0 (no read-ahead), drop_caches, time cat
#   B  remount with the defaults (readahead=8, prefetch_threads=4), drop_caches,
#      time cat
# Both compare the bytes with the expected file.  Reported: seconds per
# case, median [min-max], and the ratio A/B.
#
# Environment: N (1500), LATENCY_MS (3), REPS (3), plus the common ones of
# bench/lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

: "${N:=1500}"
: "${LATENCY_MS:=3}"
: "${REPS:=3}"

bench_init read_small_slots
FAULT="store_faults=latency_ms=$LATENCY_MS"
nova_start "$FAULT"
mkdir "$MNT/b"
: > "$B_TMP/expect"
for i in $(seq 1 "$N"); do
	echo "record $i of the small-slot read benchmark" >> "$MNT/b/s"
done
for i in $(seq 1 "$N"); do echo "record $i of the small-slot read benchmark"; done > "$B_TMP/expect"
nova_wait_absorbed "$MNT/b/s"
say "$N records appended, one slot each"

declare -A T=()
for rep in $(seq 1 "$REPS"); do
	for kind in serial fanout; do
		case $kind in
		serial) opts="$FAULT,readahead=0" ;;
		fanout) opts="$FAULT" ;;
		esac
		nova_restart "$opts"
		drop_caches
		t0=$(now)
		cat "$MNT/b/s" > "$B_TMP/got"
		t=$(calc "$(now) - $t0")
		cmp -s "$B_TMP/got" "$B_TMP/expect" || die "$kind: the bytes read differ"
		T[$kind]+="$t "
		result kind=$kind rep="$rep" n="$N" latency_ms="$LATENCY_MS" \
			seconds="$t" load1="$(cut -d' ' -f1 /proc/loadavg)"
	done
done
nova_stop
ms=$(median ${T[serial]}) mf=$(median ${T[fanout]})
# shellcheck disable=SC2086
say "cold cat of $N one-record slots, ${LATENCY_MS} ms a store call: no read-ahead $(summary ${T[serial]}) s; fan-out read-ahead $(summary ${T[fanout]}) s; ratio of medians $(calc "$ms / $mf")x"
