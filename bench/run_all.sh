#!/bin/bash
# bench/run_all.sh - run every novafs benchmark, record the raw results.
#
# Writes bench/results/<date>-<host>.txt: the machine (CPU model, cores,
# RAM, kernel, disk, file system of BENCH_TMPDIR), the date, the commit,
# the environment the scripts ran with, then each script's full output
# (RESULT lines, summaries, profile tops).  Profiles (perf report text,
# strace -c summaries) go to bench/results/<date>-<host>-profile/.
# bench/RESULTS.md is written by hand from these files.
#
# All scripts share one parent temp dir under BENCH_TMPDIR, removed only at
# the very end: deleting many files on a journal-less ext4 slows inode
# allocation there for minutes (ext4 skips recently deleted inodes one by
# one in find_inode_bit/recently_deleted), and novafs creates one file per
# slot, so one script's cleanup would slow the next script's novafs runs.
# COOLDOWN_S seconds of quiet (after sync) precede every script, and
# INITIAL_COOLDOWN_S the first (use 330 after mass deletions: ext4 skips a
# deleted inode for up to 305 s while its inode-table block is dirty).
#
# Environment: BENCHES ("floor append_big append_small read_cold"), QUICK=1
# (small sizes, to check the scripts), PROFILE (1), COOLDOWN_S (10),
# INITIAL_COOLDOWN_S (0), and every
# variable of the individual scripts (SIZE_MB, REPS, DURATION, ...), passed
# through.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT_DIR=$(cd "$BENCH_DIR/.." && pwd)
: "${BENCHES:=floor append_big append_small read_cold}"
: "${QUICK:=0}"
: "${BENCH_TMPDIR:=/var/tmp}"
: "${COOLDOWN_S:=10}"
: "${INITIAL_COOLDOWN_S:=0}"
export PROFILE=${PROFILE:-1}
# Build, then run a private copy of the daemon: others rebuild src/novafs
# while we run (make replaces the file), and every script must measure the
# same binary.
for try in $(seq 1 20); do
	make -C "$ROOT_DIR" -j2 src/novafs src/novactl > /dev/null 2>&1 && break
	echo "build failed (try $try), retrying in 30 s" >&2
	sleep 30
done
[ -x "$ROOT_DIR/src/novafs" ] || { echo "no src/novafs" >&2; exit 1; }
RUN_TMP=$(mktemp -d "$BENCH_TMPDIR/novafs-bench-run.XXXXXX")
cp "$ROOT_DIR/src/novafs" "$RUN_TMP/novafs"
export NOVAFS=$RUN_TMP/novafs
cleanup_run_tmp() {
	if awk -v d="$RUN_TMP/" 'index($5 "/", d) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		echo "WARNING: something is still mounted under $RUN_TMP; leaving it" >&2
	else
		rm -rf "$RUN_TMP"
	fi
}
trap cleanup_run_tmp EXIT
export BENCH_TMPDIR=$RUN_TMP

if [ "$QUICK" = 1 ]; then
	export SIZE_MB=${SIZE_MB:-64} REPS=${REPS:-2} DURATION=${DURATION:-2}
	export SWEEP_DURATION=${SWEEP_DURATION:-1} SWEEP_REPS=${SWEEP_REPS:-1}
	export SETTLE_S=${SETTLE_S:-0.2} FLOOR_ITERS=${FLOOR_ITERS:-200}
fi

stamp=$(date +%Y%m%d-%H%M%S)
host=$(hostname -s)
mkdir -p "$BENCH_DIR/results"
suffix=
[ "$QUICK" = 1 ] && suffix=-quick
OUT=$BENCH_DIR/results/$stamp-$host$suffix.txt
export PROFILE_DIR=${OUT%.txt}-profile
unset RESULTS_FILE

# The machine, once.
{
	echo "# novafs benchmarks: $stamp on $host"
	echo "date:    $(date -Is)"
	echo "commit:  $(git -C "$ROOT_DIR" rev-parse --short HEAD)$(git -C "$ROOT_DIR" diff --quiet HEAD -- . ':!bench' 2>/dev/null || echo ' (+ uncommitted changes)')"
	echo "cpu:     $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores ($(lscpu | sed -n 's/^Hypervisor vendor: *//p') guest)"
	echo "ram:     $(free -g | awk '/^Mem:/ { print $2 " GiB" }')"
	echo "kernel:  $(uname -srm)"
	src=$(df --output=source "$BENCH_TMPDIR" | tail -1)
	echo "fs:      $BENCH_TMPDIR on $src, $(findmnt -no FSTYPE,OPTIONS -T "$BENCH_TMPDIR" | xargs)"
	j=$(cat "/sys/fs/ext4/$(basename "$src")/journal_task" 2>/dev/null || echo '?')
	echo "journal: ext4 journal_task=$j (<none>: no journal, fsync is ext4_fsync_nojournal)"
	dev=$(basename "$src")
	if [ -d "/sys/block/$dev" ]; then
		echo "disk:    $dev $(lsblk -dno SIZE,MODEL "/dev/$dev" | xargs), rotational=$(cat /sys/block/$dev/queue/rotational), scheduler=$(cat /sys/block/$dev/queue/scheduler), write_cache=$(cat /sys/block/$dev/queue/write_cache 2>/dev/null)"
	fi
	echo "novafs:  $("$NOVAFS" --version 2>&1 | head -1), binary built $(date -r "$ROOT_DIR/src/novafs" -Is), sha256 $(sha256sum "$NOVAFS" | cut -c1-16), tree: $(git -C "$ROOT_DIR" status --short -- '*.c' '*.h' | wc -l) modified/untracked .c/.h files"
	echo "tools:   $(python3 --version 2>&1), $(perf version 2>&1), $(strace -V | head -1)"
	echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; other tenants of this VM included)"
	echo "env:     QUICK=$QUICK PROFILE=$PROFILE COOLDOWN_S=$COOLDOWN_S BENCH_TMPDIR=$BENCH_TMPDIR $(env | grep -E '^(SIZE_MB|REPS|SRCS|SRC|DURATION|WARMUP|WRITERS|REC_SIZE|MODES|SWEEP_[A-Z]+|SETTLE_S|NOVA_OPTS|DIRECT|VERIFY|LOCAL_DSYNC|DIAG|DIAG_[A-Z]+|FLOOR_ITERS)=' | sort | tr '\n' ' ')"
	echo
} > "$OUT"
cat "$OUT"

sync
sleep "$INITIAL_COOLDOWN_S"
for b in $BENCHES; do
	sync
	sleep "$COOLDOWN_S"
	echo "######## $b ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$OUT"
	case $b in
	floor)
		# The disk alone: O_DSYNC appends and the dir store's PUT sequence.
		d=$(mktemp -d "$BENCH_TMPDIR/novafs-bench-floor.XXXXXX")
		python3 "$BENCH_DIR/putfloor.py" --dir "$d" --iters "${FLOOR_ITERS:-2000}" 2>&1 |
			sed 's/^/RESULT bench=floor /' | tee -a "$OUT"
		;;
	*)
		rc=0
		BENCH_KEEP=1 "$BENCH_DIR/$b.sh" 2>&1 | tee -a "$OUT" || rc=${PIPESTATUS[0]}
		[ "$rc" = 0 ] || echo "######## $b FAILED with status $rc" | tee -a "$OUT"
		;;
	esac
	echo | tee -a "$OUT"
done

if awk -v d="$RUN_TMP/" 'index($5 "/", d) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo ||
	pgrep -f "^$RUN_TMP/novafs" > /dev/null; then
	echo "WARNING: a mount or daemon of this run is still around" | tee -a "$OUT"
fi
echo "raw results: $OUT"
echo "profiles:    $PROFILE_DIR"
