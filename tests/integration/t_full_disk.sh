#!/bin/bash
# t_full_disk.sh - a full data directory (issue 12 item 9): appends fail
# with ENOSPC, but the directory store keeps a reserve free, so rm and a
# trim (metastore commits) still work; acknowledged data still reads; the
# retries back off instead of logging several errors a second.  The data
# directory is a small tmpfs.
set -euo pipefail
. "$TESTLIB"
nv_init

FULL=$NV_TMP/full
mkdir "$FULL"
mount -t tmpfs -o size=32m tmpfs "$FULL" || nv_skip "cannot mount a tmpfs"
# The tmpfs goes first (lazily: a daemon still running keeps its files
# until it exits), then the usual cleanup, with the test's exit status.
trap 'rc=$?; umount -l "$FULL" 2>/dev/null; (exit $rc); nv_cleanup' EXIT
DATA=$FULL/data

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

say "3. the retries back off: few errors in 10 s"
before=$(grep -c "ERROR\|WARN" "$LOG" || true)
sleep 10 # the time window measured: nothing to await
after=$(grep -c "ERROR\|WARN" "$LOG" || true)
((after - before <= 15)) ||
	fail "$((after - before)) error and warning lines in 10 s on a full disk: no back-off"
say "ok: $((after - before)) error/warning lines in 10 s"
nv_stop 60
say "PASS"
