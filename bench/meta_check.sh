#!/bin/bash
# bench/meta_check.sh - what the start-up metastore check costs (issue 12:
# a damaged meta.db is refused at start, after PRAGMA quick_check).
#
# A daemon makes a real meta.db (one bucket, a few streams); ROWS more
# kv rows (100,000 by default, values of VALUE_BYTES, 200 by default) are
# added under a key prefix the daemon never reads, so only the check sees
# them.  Then, REPS times each: PRAGMA quick_check timed directly (python's
# sqlite3 on the same file), and the daemon's start (spawn to mounted) with
# -o meta_check=quick against meta_check=off.
#
# Environment: ROWS, VALUE_BYTES, REPS (3), and bench/lib.sh's.
# Output: RESULT bench=meta_check rows=... db_mib=... quick_check_ms=...
#         start_quick_ms=... start_off_ms=... (medians).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${ROWS:=100000}"
: "${VALUE_BYTES:=200}"
: "${REPS:=3}"
bench_init meta_check

nova_start
mkdir "$MNT/b"
for i in 1 2 3; do echo "rec $i" >> "$MNT/b/s$i"; done
nova_stop

python3 - "$DATA/meta.db" "$ROWS" "$VALUE_BYTES" <<'PY'
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n, vb = int(sys.argv[2]), int(sys.argv[3])
db.executemany("insert into kv(k, v, ver) values (?, ?, 1)",
               ((b"\x7fbench\x00" + i.to_bytes(8, "big"), os.urandom(vb)) for i in range(n)))
db.commit()
db.execute("pragma wal_checkpoint(truncate)")
db.close()
PY

qc=()
for _ in $(seq 1 "$REPS"); do
	qc+=("$(python3 - "$DATA/meta.db" <<'PY'
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
t = time.monotonic()
rows = db.execute("pragma quick_check").fetchall()
assert rows == [("ok",)], rows
print(round((time.monotonic() - t) * 1000, 1))
PY
)")
done

# start_ms OPTS: milliseconds from spawn to a mounted file system, into
# MS (run in this shell: the daemon is its child).
start_ms() {
	local t0=$EPOCHREALTIME
	nova_start "$1"
	MS=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
	nova_stop
}
sq=() so=()
for _ in $(seq 1 "$REPS"); do
	start_ms meta_check=quick
	sq+=("$MS")
	start_ms meta_check=off
	so+=("$MS")
done

size=$(stat -c %s "$DATA/meta.db")
result rows="$ROWS" value_bytes="$VALUE_BYTES" \
	db_mib="$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1048576 }')" \
	quick_check_ms="$(median "${qc[@]}")" \
	start_quick_ms="$(median "${sq[@]}")" start_off_ms="$(median "${so[@]}")" \
	reps="$REPS"
