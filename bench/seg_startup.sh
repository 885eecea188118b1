#!/bin/bash
# bench/seg_startup.sh - start-up time of a mount whose directory store
# holds N live chain slots, as slot files (slot_segments=0) and in segment
# files (slot_segments=1), in one run.
#
# Opening a store with segments rebuilds the slot index by scanning every
# segment (engine/store/dir/seg.c dir_segs_open): its cost grows with the
# bytes of the segments, where slot files cost nothing at open (the
# metastore names them).  This measures that cost as a user meets it: the
# time from starting the daemon until the mount answers.
#
# Setup, per mode: a fresh data dir, settlement deferred (lib.sh), N
# appends of SIZE random bytes, one os.write each, round-robin over
# STREAMS streams (one slot each: one writer, so no two share a flight),
# absorb awaited, clean unmount.  Then per repetition: drop_caches, start,
# time until mounted, stop (cold); start again at once (warm).  The slot
# count is checked against the store (tests/integration/slots.py).
#
# Reported: seconds to mount per mode and cache state, median [min-max],
# and the segment bytes scanned.  Environment: N (10000), SIZE (107374:
# N x SIZE = 1 GiB), STREAMS (8), REPS (3), plus bench/lib.sh's.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

: "${N:=10000}"
: "${SIZE:=107374}"
: "${STREAMS:=8}"
: "${REPS:=3}"

bench_init seg_startup
need_space $((N * SIZE / 1048576 * 2 + 1024))

populate() {
	nova_start "slot_segments=$1"
	mkdir "$MNT/b"
	python3 - "$MNT/b" "$N" "$SIZE" "$STREAMS" <<'PY'
import os, sys
d, n, size, streams = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
buf = os.urandom(size)
fds = [os.open(os.path.join(d, "s%d" % i), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
       for i in range(streams)]
for i in range(n):
    if os.write(fds[i % streams], buf) != size:
        sys.exit("short write")
for fd in fds:
    os.close(fd)
PY
	# shellcheck disable=SC2046
	nova_wait_absorbed $(find "$MNT/b" -type f)
	nova_stop
}

# time_start MODE: mount (in this shell, so nova_stop finds the daemon);
# START_S gets the seconds it took.
START_S=
time_start() {
	local t0
	t0=$(now)
	nova_start "slot_segments=$1"
	START_S=$(calc "$(now) - $t0")
}

declare -A T=()
for mode in 0 1; do
	rm -rf "$DATA"
	mkdir "$DATA"
	populate "$mode"
	slots=$(python3 "$ROOT_DIR/tests/integration/slots.py" "$DATA/objects" | wc -l)
	segbytes=$(du -sb "$DATA/objects/#seg" 2>/dev/null | cut -f1 || echo 0)
	segbytes=${segbytes:-0}
	((slots >= N)) || die "mode $mode: $slots live slots in the store, expected $N"
	say "slot_segments=$mode: $slots live slots, $segbytes bytes of segment files (apparent size, preallocated)"
	for rep in $(seq 1 "$REPS"); do
		drop_caches
		time_start "$mode"
		t=$START_S
		nova_stop
		T[$mode-cold]+="$t "
		result mode="slot_segments=$mode" cache=cold rep="$rep" slots="$slots" \
			seg_file_bytes="$segbytes" seconds="$t" load1="$(cut -d' ' -f1 /proc/loadavg)"
		time_start "$mode"
		t=$START_S
		nova_stop
		T[$mode-warm]+="$t "
		result mode="slot_segments=$mode" cache=warm rep="$rep" slots="$slots" \
			seg_file_bytes="$segbytes" seconds="$t" load1="$(cut -d' ' -f1 /proc/loadavg)"
	done
done
for k in 0-cold 0-warm 1-cold 1-warm; do
	# shellcheck disable=SC2086
	say "slot_segments=${k%-*} ${k#*-}: $(summary ${T[$k]}) s to mount"
done
