#!/bin/bash
# t_full_disk_rm.sh - rm of a stream on a full data directory gives its
# space back within a few audit passes, not when its batches reach their
# age cap (issue 12 item 9; engine/trim.c ripen_deleted()).  Nothing
# settles by size here (the trigger is out of reach) and the age caps are
# 600 s, so the removed stream's batch markers would wait 10 minutes;
# reclaiming its history ripens them, the next era resolves them without
# a byte, and trim-check deletes the slots.  Another stream (express: its
# own chain, so its waiting batches hold no slot of the removed one) reads
# back byte for byte, and a new stream can be written and read once the
# space is back.  The data directory is a small tmpfs.
set -euo pipefail
. "$TESTLIB"
nv_init

FULL=$NV_TMP/full
mkdir "$FULL"
mount -t tmpfs -o size=32m tmpfs "$FULL" || nv_skip "cannot mount a tmpfs"
# (set +e: under -e the failing (exit $rc) would end the trap before the cleanup.)
trap 'rc=$?; set +e; umount -l "$FULL" 2>/dev/null; (exit $rc); nv_cleanup' EXIT
DATA=$FULL/data
CAP_S=600
WAIT_S=40 # a few audit passes (200 ms) plus retry back-offs; far below CAP_S

avail_kib() { df -k --output=avail "$FULL" | tail -1 | tr -d ' '; }

say "1. another stream, then fill the data directory with one big stream"
nv_start "put_timeout_s=2,read_grace_s=0,settle_linger_s=1,settle_trigger_mib=1024,age_cap_standard_s=$CAP_S,age_cap_express_s=$CAP_S,audit_interval_ms=200"
mkdir "$MNT/b"
: > "$MNT/b/keep"
setfattr -n user.nova.class -v express "$MNT/b/keep"
head -c 300000 /dev/urandom > "$NV_TMP/keep"
cat "$NV_TMP/keep" >> "$MNT/b/keep"
n=0
while head -c 1048576 /dev/urandom >> "$MNT/b/big" 2> "$NV_TMP/full.err"; do
	n=$((n + 1))
	((n < 64)) || fail "64 MiB written into a 32 MiB tmpfs"
done
grep -q "No space left on device" "$NV_TMP/full.err" ||
	fail "the append on a full disk failed with '$(cat "$NV_TMP/full.err")', expected ENOSPC"
full=$(avail_kib)
say "ok: $n MiB acknowledged, then ENOSPC ($full KiB free)"

say "2. rm the big stream: its space comes back well before the age cap"
rm "$MNT/b/big" || fail "rm on a full data directory failed"
back=$((full + n * 1024 / 2)) # at least half of what it held
t0=$EPOCHREALTIME
nv_await "$WAIT_S" "the removed stream's space ($n MiB) to come back (free: $(avail_kib) KiB, want $back)" \
	eval '(($(avail_kib) >= back))'
say "ok: $(avail_kib) KiB free after $(nv_elapsed "$t0") s (age cap $CAP_S s)"

say "3. nothing else lost; the disk takes appends again"
nv_same_file "$MNT/b/keep" "$NV_TMP/keep" "the other stream reads back"
head -c 2000000 /dev/urandom > "$NV_TMP/after"
cat "$NV_TMP/after" >> "$MNT/b/after" || fail "an append after the space came back failed"
nv_same_file "$MNT/b/after" "$NV_TMP/after" "a new stream reads back"
nv_alive || fail "the daemon died"
nv_stop 60
say "PASS"
