#!/bin/bash
# bench/settle.sh - issue 3 (Settlement): how fast an era is assembled into
# per-stream settled objects, and how many store requests a settled MiB
# costs, beside the local disk's copy of the same bytes.
#
# Per repetition and case, on a fresh data dir (embedded defaults: the
# directory store and SQLite under $DATA):
#   1. write   SIZE_MB of random bytes with settlement held back: every
#              batch marker ripens at birth + AGE_CAP_S (the size trigger is
#              out of reach), so the write and the absorb finish first and
#              the settle runs alone;
#                hot   one stream, dd bs=1M (1 MiB records, 1 MiB slots):
#                      extents >= 5 MiB, copied server-side (range copy)
#                many  STREAMS streams, WRITERS threads appending REC_KB
#                      records round-robin: slots mix streams, extents are
#                      small and go by ranged GET + upload part
#   2. settle  snapshot user.nova.stats once absorbed, wait until every
#              stream's user.nova.settled reaches its seq and every slot
#              is deleted (read_grace_s=0), snapshot again.
# Reported: era assembly throughput = settled bytes / the summed durations
# of the eras (the daemon's "settled into N object(s) (B bytes) ... in T ms"
# log lines: fetch-cache warming, assembly, publish and commit); the wall
# time from the first ripening to the last slot deleted; store requests per
# settled MiB by kind (store_* counters; the settle and the trim-check are
# all that runs in between); and the local copy of the same slot bytes
# (every slot's bytes into one file + fsync, after drop_caches), so the
# ratio is settle MB/s / local copy MB/s on the same disk, in the same run.
# VERIFY=1 compares every stream with what was written, after settling.
#
# Case mixed (issue 11), settlement live under load: a hot stream fed
# MIXED_MIBPS MiB/s in 64 KiB records beside MIXED_TRICKLE streams that
# each get a short line every 50 ms, for MIXED_S seconds, with
# settle_trigger_mib=1, settle_linger_s=1, age_cap_standard_s=MIXED_CAP_S
# and one absorb batch per flight.  Every 0.5 s it samples the hot
# stream's transit window (bytes not settled yet), slots_live and the
# markers waiting; the samples go to $B_TMP/../settle-mixed-<rep>.csv and
# an ASCII plot of the transit window over time.  Reported: the transit
# window's median and maximum, store requests per settled MiB (store_*
# counters over the run / the bytes the eras settled), and settle MB/s
# (era bytes / summed era durations).
#
# Environment: SIZE_MB (256), REPS (3), CASES ("hot many"; add "mixed"),
# STREAMS (32), WRITERS (8), REC_KB (64), AGE_CAP_S (10), VERIFY (1),
# MIXED_S (60), MIXED_MIBPS (4), MIXED_TRICKLE (30), MIXED_CAP_S (30), plus
# the common ones of bench/lib.sh (DEFER_SETTLE is forced to 0: this bench
# is the settle).
set -euo pipefail
DEFER_SETTLE=0
. "$(dirname "$0")/lib.sh"
SLOTS_PY=$ROOT_DIR/tests/integration/slots.py

: "${SIZE_MB:=256}"
: "${REPS:=3}"
: "${CASES:=hot many}"
: "${STREAMS:=32}"
: "${WRITERS:=8}"
: "${REC_KB:=64}"
: "${AGE_CAP_S:=10}"
: "${VERIFY:=1}"
: "${MIXED_S:=60}"
: "${MIXED_MIBPS:=4}"
: "${MIXED_TRICKLE:=30}"
: "${MIXED_CAP_S:=30}"
bytes=$((SIZE_MB * 1048576))
OPTS="settle_trigger_mib=1048576,settle_linger_s=0,age_cap_standard_s=$AGE_CAP_S,read_grace_s=0,audit_interval_ms=100"
KINDS="puts gets heads mpu_parts mpu_copies mpu_completes deletes lists"

bench_init settle
need_space $((4 * SIZE_MB + 1024))
printf '== settle: %s, commit %s, daemon sha256 %s, load average %s\n' "$(date -u +%FT%TZ)" \
	"$(git -C "$ROOT_DIR" rev-parse --short HEAD 2> /dev/null || echo '?')" \
	"$(sha256sum "$NOVAFS" | cut -c1-16)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'machine: nproc %s, %s MiB RAM, kernel %s, temp dir on %s (%s)\n' "$(nproc)" \
	"$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)" "$(uname -r)" \
	"$(df --output=source "$B_TMP" | tail -1)" "$(stat -f -c %T "$B_TMP")"
printf 'settings: SIZE_MB=%s REPS=%s CASES="%s" STREAMS=%s WRITERS=%s REC_KB=%s AGE_CAP_S=%s NOVA_OPTS=%s\n' \
	"$SIZE_MB" "$REPS" "$CASES" "$STREAMS" "$WRITERS" "$REC_KB" "$AGE_CAP_S" "$NOVA_OPTS"
SRC=$B_TMP/src.dat
head -c "$bytes" /dev/urandom > "$SRC"

# many_writer DIR: WRITERS threads append REC_KB records of $SRC to STREAMS
# streams DIR/sNN, round-robin, one write() per record; stream k gets the
# records i with i % STREAMS == k, so its content is known.
many_writer() {
	python3 - "$1" "$SRC" "$STREAMS" "$WRITERS" "$((REC_KB * 1024))" <<'PY'
import os, sys, threading
d, src, ns, nw, rec = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
data = open(src, "rb").read()
n = len(data) // rec
fds = [os.open(os.path.join(d, "s%02d" % k), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
       for k in range(ns)]
locks = [threading.Lock() for _ in range(ns)]
nxt = [0]
lk = threading.Lock()
def work():
    while True:
        with lk:
            i = nxt[0]
            nxt[0] += 1
        if i >= n:
            return
        k = i % ns
        # one stream's records in order: hold its lock across the write
        with locks[k]:
            while order[k] != i:
                cv[k].wait()
            os.write(fds[k], data[i * rec:(i + 1) * rec])
            order[k] = i + ns
            cv[k].notify_all()
order = list(range(ns))
cv = [threading.Condition(locks[k]) for k in range(ns)]
th = [threading.Thread(target=work) for _ in range(nw)]
for t in th: t.start()
for t in th: t.join()
for fd in fds: os.close(fd)
PY
}

# expect_many K OUT: what stream sK must hold.
expect_many() {
	python3 - "$SRC" "$STREAMS" "$((REC_KB * 1024))" "$1" "$2" <<'PY'
import sys
src, ns, rec, k, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
data = open(src, "rb").read()
with open(out, "wb") as f:
    for i in range(k, len(data) // rec, ns):
        f.write(data[i * rec:(i + 1) * rec])
PY
}

stat_key() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# all_settled FILE...: every stream settled up to its seq, no slot left.
all_settled() {
	local f
	for f in "$@"; do
		[ "$(xattr "$f" user.nova.settled)" = "$(xattr "$f" user.nova.seq)" ] || return 1
	done
	[ -z "$(python3 "$SLOTS_PY" "$DATA/objects")" ]
}

# era_sums FROM_LINE: "bytes ms eras" of the settle log lines after line FROM_LINE.
era_sums() {
	tail -n "+$(($1 + 1))" "$LOG" | python3 -c '
import re, sys
b = ms = n = 0
for line in sys.stdin:
    m = re.search(r"settled into \d+ object\(s\) \((\d+) bytes\).* in (\d+) ms", line)
    if m:
        b += int(m.group(1)); ms += int(m.group(2)); n += 1
print(b, ms, n)'
}

# local_copy: seconds to copy every live slot's bytes (slot files or
# segment records) into one file and fsync it, caches dropped first (the
# bytes a settle must read and write once).  The slots are listed before
# the caches are dropped and the clock starts: finding the records in
# segment files is not part of the copy (9574e1b timed that scan too, and
# so halved the baseline: the 0.76x of settle-hot-20261202-2217.txt).
local_copy() {
	local t0 t1 out=$B_TMP/local-copy.dat list=$B_TMP/local-copy.list
	python3 - "$(dirname "$SLOTS_PY")" "$DATA/objects" > "$list" <<'PY'
import sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
from slots import live_records
for _, path, off, n in live_records(sys.argv[2]):
    print(off, n, path)
PY
	drop_caches
	t0=$(now)
	python3 -c '
import os, sys
files = {}
with open(sys.argv[2], "wb") as out:
    for line in open(sys.argv[1]):
        off, n, path = line.rstrip("\n").split(" ", 2)
        f = files.get(path) or files.setdefault(path, open(path, "rb"))
        out.write(os.pread(f.fileno(), int(n), int(off)))
    out.flush()
    os.fsync(out.fileno())
' "$list" "$out"
	t1=$(now)
	rm -f "$out" "$list"
	calc "$t1 - $t0"
}

declare -A R
add() { R[$1]+="$2 "; }

# mixed_run REP: the mixed case once (see the header); prints its RESULT.
mixed_run() {
	local rep=$1 csv=$B_TMP/settle-mixed-$1.csv s0 s1 lines eb ems eras d req
	[ -z "$NV_PID" ] || nova_stop
	rm -rf "${DATA:?}"/*
	nova_start "settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=$MIXED_CAP_S,read_grace_s=1,audit_interval_ms=200,absorb_batch=1,absorb_linger_us=0"
	mkdir -p "$MNT/b"
	s0=$(nova_stats)
	lines=$(wc -l < "$LOG")
	python3 - "$MNT" "$MIXED_S" "$MIXED_MIBPS" "$MIXED_TRICKLE" "$csv" <<'PY'
import json, os, sys, threading, time
mnt, secs, mibps, ntr, csv = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rec = os.urandom(65536)
stop = threading.Event()
def writer(path, data, period):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    nxt = time.monotonic()
    while not stop.is_set():
        os.write(fd, data)
        nxt += period
        stop.wait(max(0.0, nxt - time.monotonic()))
    os.close(fd)
hot = os.path.join(mnt, "b", "hot")
th = [threading.Thread(target=writer, args=(hot, rec, 65536 / (mibps * 1048576)))]
th += [threading.Thread(target=writer, args=(os.path.join(mnt, "b", "t%02d" % i), b"trickle line\n", 0.05))
       for i in range(ntr)]
for t in th: t.start()
t0 = time.monotonic()
with open(csv, "w") as out:
    out.write("t_s,transit_mib,slots_live,markers_waiting\n")
    while time.monotonic() - t0 < secs:
        time.sleep(0.5)
        st = json.loads(os.getxattr(mnt, "user.nova.stats"))
        w = (int(os.getxattr(hot, "user.nova.seq")) - int(os.getxattr(hot, "user.nova.settled"))) * 65536
        out.write("%.1f,%.2f,%d,%d\n" % (time.monotonic() - t0, w / 1048576, st["slots_live"],
                                          st.get("settle_markers_waiting", -1)))
stop.set()
for t in th: t.join()
PY
	s1=$(nova_stats)
	read -r eb ems eras <<< "$(era_sums "$lines")"
	d=$(stats_delta "$s0" "$s1" $(printf 'store_%s ' $KINDS) settle_jobs settled_objects)
	req=0
	for k in $KINDS; do
		req=$((req + $(tr ' ' '\n' <<< "$d" | awk -F= -v k="eng_store_$k" '$1 == k { print $2 }')))
	done
	python3 - "$csv" <<'PY' >&2
import sys
rows = [l.strip().split(",") for l in open(sys.argv[1]).read().splitlines()[1:]]
top = max(float(r[1]) for r in rows) or 1
print("transit window of the hot stream (MiB) over time, one row per 2 samples:")
for r in rows[::2]:
    print("%6s s %7s MiB |%s" % (r[0], r[1], "#" * int(50 * float(r[1]) / top)))
PY
	result "$(python3 - "$csv" "$rep" "$eb" "$ems" "$eras" "$req" "$d" <<'PY'
import statistics, sys
rows = [l.strip().split(",") for l in open(sys.argv[1]).read().splitlines()[1:]]
w = sorted(float(r[1]) for r in rows)
eb, ems, eras, req = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
mib = eb / 1048576 or 1
print("case=mixed rep=%s transit_median_mib=%.2f transit_max_mib=%.2f slots_live_max=%d "
      "markers_waiting_max=%d eras=%d era_bytes=%d era_ms=%d settle_mbps=%.1f requests=%d "
      "requests_per_mib=%.1f %s" % (sys.argv[2], statistics.median(w), w[-1],
      max(int(r[2]) for r in rows), max(int(r[3]) for r in rows), eras, eb, ems,
      eb / (ems / 1000.0) / 1e6 if ems else 0, req, req / mib, sys.argv[7]))
PY
)"
	nova_stop
}

for rep in $(seq 1 "$REPS"); do
	for case in $CASES; do
		if [ "$case" = mixed ]; then
			mixed_run "$rep"
			continue
		fi
		[ -z "$NV_PID" ] || nova_stop
		rm -rf "${DATA:?}"/*
		nova_start "$OPTS"
		mkdir -p "$MNT/b"
		t0=$(now)
		case $case in
		hot)
			dd if="$SRC" of="$MNT/b/hot" bs=1M oflag=append conv=notrunc status=none
			files=("$MNT/b/hot")
			;;
		many)
			many_writer "$MNT/b"
			files=("$MNT"/b/s*)
			;;
		*) die "unknown case $case" ;;
		esac
		t1=$(now)
		nova_wait_absorbed "${files[@]}"
		s0=$(nova_stats)
		slots=$(stat_key "$s0" slots_written)
		# The local copy of the same slot files, before the markers ripen.
		lc=$(local_copy)
		drop_caches # the settle reads the slots from the disk too
		lines=$(wc -l < "$LOG")
		w0=$(now)
		n=$((AGE_CAP_S * 10 + 3000))
		until all_settled "${files[@]}"; do
			((n-- > 0)) || die "$case: not settled after $((AGE_CAP_S + 300)) s"
			sleep 0.1
		done
		w1=$(now)
		s1=$(nova_stats)
		read -r eb ems eras <<< "$(era_sums "$lines")"
		((eb > 0 && ems > 0)) || die "$case: no settle log lines"
		mbps=$(calc "$eb / ($ems / 1000) / 1e6")
		lmbps=$(calc "$bytes / $lc / 1e6")
		ratio=$(calc "$mbps / $lmbps")
		d=$(stats_delta "$s0" "$s1" $(printf 'store_%s ' $KINDS) settle_jobs settled_objects range_copies copy_fallbacks slots_deleted store_bytes_got store_bytes_put)
		req=0
		for k in $KINDS; do
			v=$(tr ' ' '\n' <<< "$d" | awk -F= -v k="eng_store_$k" '$1 == k { print $2 }')
			req=$((req + v))
		done
		mib=$(calc "$eb / 1048576")
		rpm=$(calc "$req / $mib")
		result "case=$case rep=$rep size_mib=$SIZE_MB slots=$slots write_s=$(calc "$t1 - $t0") eras=$eras era_bytes=$eb era_ms=$ems settle_mbps=$mbps wall_s=$(calc "$w1 - $w0") local_copy_s=$lc local_copy_mbps=$lmbps ratio=$ratio requests=$req requests_per_mib=$rpm $d"
		add "mbps-$case" "$mbps"
		add "local-$case" "$lmbps"
		add "ratio-$case" "$ratio"
		add "rpm-$case" "$rpm"
		for k in $KINDS; do
			v=$(tr ' ' '\n' <<< "$d" | awk -F= -v k="eng_store_$k" '$1 == k { print $2 }')
			add "k-$case-$k" "$(calc "$v / $mib")"
		done
		if [ "$VERIFY" = 1 ]; then
			drop_caches
			if [ "$case" = hot ]; then
				cmp "$MNT/b/hot" "$SRC" || die "hot: the settled stream differs from what was written"
			else
				for k in $(seq 0 $((STREAMS - 1))); do
					expect_many "$k" "$B_TMP/expect"
					cmp "$MNT/b/s$(printf %02d "$k")" "$B_TMP/expect" ||
						die "many: stream s$k differs from what was written"
				done
			fi
			say "$case rep $rep: verified every stream after settling"
		fi
		nova_stop
		settle
	done
done

# shellcheck disable=SC2086
{
	printf '\n== settle: %d MiB of random bytes, %d reps; median [min-max]\n' "$SIZE_MB" "$REPS"
	printf '%-6s %-26s %-26s %-24s %s\n' case "settle MB/s" "local copy MB/s" ratio "requests/MiB"
	for case in $CASES; do
		[ "$case" != mixed ] || continue
		printf '%-6s %-26s %-26s %-24s %s\n' "$case" "$(summary ${R[mbps-$case]})" \
			"$(summary ${R[local-$case]})" "$(summary ${R[ratio-$case]})" "$(summary ${R[rpm-$case]})"
	done
	for case in $CASES; do
		[ "$case" != mixed ] || continue
		printf '%-6s per settled MiB:' "$case"
		for k in $KINDS; do printf ' %s %s' "$k" "$(median ${R[k-$case-$k]})"; done
		printf '\n'
	done
}
