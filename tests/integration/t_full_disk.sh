#!/bin/bash
# t_full_disk.sh - a full data directory (issue 12 item 9): appends fail
# with ENOSPC, but the directory store keeps a reserve free, so rm and a
# trim (metastore commits) still work; acknowledged data still reads; the
# retries back off instead of logging several errors a second, also when
# another program takes the last block (the metastore's reserve too) and
# a writer keeps retrying; once space is back, appends work again.  The
# data directory is a small tmpfs.
set -euo pipefail
. "$TESTLIB"
nv_init

FULL=$NV_TMP/full
mkdir "$FULL"
mount -t tmpfs -o size=32m tmpfs "$FULL" || nv_skip "cannot mount a tmpfs"
# The tmpfs goes first (lazily: a daemon still running keeps its files
# until it exits; the filler and ballast first, so that it can close),
# then the usual cleanup, with the test's exit status (set +e: under -e
# a failing status would end the trap before the cleanup).
trap 'rc=$?; set +e; rm -f "$FULL/filler" "$FULL/ballast"; umount -l "$FULL" 2>/dev/null
	(exit $rc); nv_cleanup' EXIT
DATA=$FULL/data
# Ballast: 8 MiB that another program holds, given back in step 5.
head -c 8388608 /dev/zero > "$FULL/ballast"

say "1. fill the data directory"
nv_start "put_timeout_s=2,read_grace_s=0,settle_linger_s=1"
mkdir "$MNT/b"
echo keep >> "$MNT/b/k"
for i in 1 2 3; do echo "t $i" >> "$MNT/b/t"; done
n=0
while head -c 1048576 /dev/urandom >> "$MNT/b/big" 2> "$NV_TMP/full.err"; do
	n=$((n + 1))
	((n < 64)) || fail "64 MiB written into a 32 MiB tmpfs"
done
grep -q "No space left on device" "$NV_TMP/full.err" ||
	fail "the append on a full disk failed with '$(cat "$NV_TMP/full.err")', expected ENOSPC"
say "ok: $n MiB acknowledged, then ENOSPC ($(df -k "$FULL" | awk 'NR == 2 { print $4 }') KiB free)"

say "2. on the full disk: trim and rm work, acknowledged data reads"
setfattr -n user.nova.trim -v 1 "$MNT/b/t" || fail "trim on a full data directory failed"
[ "$(nv_xattr "$MNT/b/t" user.nova.trim)" = 1 ] || fail "the trim did not take"
rm "$MNT/b/big" || fail "rm on a full data directory failed"
[ ! -e "$MNT/b/big" ] || fail "the removed stream is still there"
[ "$(cat "$MNT/b/k")" = keep ] || fail "an acknowledged stream does not read on a full disk"
nv_alive || fail "the daemon died on a full disk"

# lines_between T0 T1: the daemon's own ERROR and WARN lines stamped in
# [T0, T1) (ISO times as the log writes them, compared as text).  The
# fs: lines answer refused calls, which a user provokes at will: they
# are rate-limited like every other refusal and counted with the rest
# (fs_lines_between says how many of them there were).
lines_between() {
	awk -v a="$1" -v b="$2" '($3 == "ERROR" || $3 == "WARN") &&
		$1 >= a && $1 < b' "$LOG"
}
fs_lines_between() {
	lines_between "$1" "$2" | awk '$4 == "fs:"' | wc -l
}
stamp() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }

say "3. the retries back off: few errors in 8 s"
t0=$(stamp)
sleep 8 # the time window measured: nothing to await
n3=$(lines_between "$t0" "$(stamp)" | wc -l)
((n3 <= 12)) || fail "$n3 error and warning lines in 8 s on a full disk: no back-off"
say "ok: $n3 error/warning lines in 8 s"

say "4. the last block taken (another program ate the reserve), a writer retrying"
dd if=/dev/zero of="$FULL/filler" bs=64k 2> /dev/null || true
# A user's script that retries its append every 0.2 s, 20 s long.
(for _ in $(seq 1 100); do echo retry >> "$MNT/b/w" 2> /dev/null || true; sleep 0.2; done) &
NV_BG+=("$!")
nv_own "$!"
sleep 5 # the first failures, before the back-off has grown: not measured
t0=$(stamp)
sleep 12 # the time window measured: nothing to await
t1=$(stamp)
lines_between "$t0" "$t1" > "$NV_TMP/window"
n4=$(wc -l < "$NV_TMP/window")
# Per kind of line (numbers folded): a loop without back-off writes one
# line per try, 60 in 12 s for the writer alone; each kind here is at
# most the rate limit's burst (10, NV_RATELIMIT_BURST) or a back-off's
# few tries.  In all, the registry lease's loss can fall inside the
# window (it lapses star_lease_s after the metastore stopped taking
# writes) and restart both chains: halt, settle, restart and store lines
# for each, 24-33 lines seen, so the total's bound is 3 lines a second.
kind_max=$(sed -E 's/^[^ ]+ [^ ]+ //; s/[0-9]+/N/g' "$NV_TMP/window" | sort | uniq -c | sort -rn |
	awk 'NR == 1 { print $1 } END { if (NR == 0) print 0 }')
if ((n4 > 36 || kind_max > 10)); then
	sed -E 's/^[^ ]+ [^ ]+ //; s/[0-9]+/N/g' "$NV_TMP/window" | sort | uniq -c | sort -rn | head >&2
	fail "$n4 error and warning lines in 12 s on a disk without a free block, $kind_max of one kind: a retry loop does not back off"
fi
say "ok: $n4 error/warning lines in 12 s with no free block, at most $kind_max of a kind, a write retried 5 times a second" \
	"($(fs_lines_between "$t0" "$t1") fs: lines for the refused writes)"
nv_alive || fail "the daemon died on a disk without a free block"

say "5. space comes back: appends work again without a restart"
rm -f "$FULL/filler" "$FULL/ballast"
nv_await 40 "an append to succeed after the disk has room again" \
	bash -c "echo back >> '$MNT/b/k'"
grep -q back "$MNT/b/k" || fail "the append that succeeded does not read back"
nv_stop 60
say "PASS"
