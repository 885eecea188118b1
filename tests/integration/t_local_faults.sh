#!/bin/bash
# t_local_faults.sh - local faults: the data directory fills up (ENOSPC),
# the metastore is corrupt, busy, or the scratch directory vanishes:
# clear errors and log lines, no crash, nothing acknowledged lost, and the
# daemon heals when the fault goes away.
set -euo pipefail
. "$TESTLIB"
nv_init
command -v sqlite3 >/dev/null || nv_skip "sqlite3 CLI not installed"

small=$NV_TMP/small
mkdir "$small"
mount -t tmpfs -o size=48m tmpfs "$small" || nv_skip "cannot mount a tmpfs"
cleanup_small() { umount -l "$small" 2>/dev/null || true; }
trap 'cleanup_small; nv_cleanup' EXIT

say "1. the data directory fills up"
DATA=$small/data
mkdir "$DATA"
nv_start "put_timeout_s=1,backlog_mib=8"
mkdir "$MNT/b"
# Take most of the space with a filler, then append until the store is full.
dd if=/dev/zero of="$small/filler" bs=1M count=36 status=none
: > "$NV_TMP/acked"
err=
# One write() of 64 KiB per append: dd reading a pipe may get a short read
# and split a block into several writes (records), so read a file.
head -c 65536 /dev/urandom > "$NV_TMP/rec64k"
for i in $(seq 1 400); do
	if ! out=$(dd if="$NV_TMP/rec64k" of="$MNT/b/s" bs=64k oflag=append conv=notrunc status=none 2>&1); then
		err=$out
		break
	fi
	echo "$i" >> "$NV_TMP/acked"
done
[ -n "$err" ] || fail "appends never failed on a full data directory"
grep -q "No space left on device" <<< "$err" || fail "a full data directory gave '$err', expected ENOSPC"
nv_alive || fail "daemon died when the data directory filled up"
n=$(wc -l < "$NV_TMP/acked")
size=$(nv_size "$MNT/b/s")
((size == n * 65536)) || fail "size $size after $n acked 64 KiB appends"
cat "$MNT/b/s" > /dev/null || fail "acked data unreadable on a full disk"
say "ok: ENOSPC after $n appends; acked data intact and readable"
rm -f "$small/filler"
# The halted chain settles and a new epoch starts once there is room.
nv_await 60 "appends to work again after space was freed" \
	sh -c "echo again >> '$MNT/b/s'"
nv_await 10 "size to grow" sh -c "[ \"\$(stat -c %s '$MNT/b/s')\" -gt $size ]"
grep -q "starting a new epoch" "$LOG" || fail "no log line about the halted chain"
say "ok: appends work again after space was freed"
nv_stop
nv_fsck

say "2. the metastore is corrupt: a clear refusal, no crash"
DATA=$NV_TMP/data2
mkdir "$DATA"
nv_start ""
mkdir "$MNT/b"
echo x >> "$MNT/b/s"
nv_stop
printf 'this is not a database at all, it is garbage %.0s' $(seq 1 200) > "$DATA/meta.db"
rm -f "$DATA/meta.db-wal" "$DATA/meta.db-shm"
rc=0
"$NOVAFS" -f -o "data_dir=$DATA" "$MNT" > "$NV_TMP/corrupt.out" 2>&1 || rc=$?
((rc == 1)) || fail "a corrupt metastore: exit status $rc, expected 1"
grep -qi "corrupt\|not a database\|Input/output" "$NV_TMP/corrupt.out" ||
	fail "no clear message about the corrupt metastore: $(tail -3 "$NV_TMP/corrupt.out")"
nv_is_mounted "$MNT" && fail "mounted on a corrupt metastore"
say "ok: refused with: $(grep -i 'metastore\|corrupt' "$NV_TMP/corrupt.out" | tail -1)"

say "3. the metastore is busy for a while: appends go on, nothing lost"
DATA=$NV_TMP/data3
mkdir "$DATA"
nv_start ""
mkdir "$MNT/b"
# The stream exists before the lock: creating one is a metastore write,
# which waits out SQLite's busy timeout (5 s) and then fails with EAGAIN.
echo "busy 0" >> "$MNT/b/s"
echo "busy 0" > "$NV_TMP/expect3"
nv_await 10 "the absorb of the first record" \
	sh -c "[ \"\$(getfattr --absolute-names --only-values -n user.nova.frontier '$MNT/b/s')\" = 1 ]"
# .timeout: the locker waits out a commit of the daemon's instead of
# failing to lock at all (the CLI's busy timeout is 0).
(sqlite3 "$DATA/meta.db" ".timeout 5000" "BEGIN EXCLUSIVE; SELECT 1;" ".shell sleep 7" "COMMIT;" > /dev/null 2>&1) &
locker=$!
nv_bg "$locker"
# Another writer is refused at once (the CLI's busy timeout is 0) once the
# lock is held.
nv_await 10 "the exclusive lock on the metastore" \
	sh -c "! sqlite3 '$DATA/meta.db' 'BEGIN IMMEDIATE; ROLLBACK;' > /dev/null 2>&1"
for i in $(seq 1 100); do
	echo "busy $i" >> "$MNT/b/s" || fail "append $i failed while the metastore was busy"
	echo "busy $i" >> "$NV_TMP/expect3"
done
wait "$locker" || true
nv_await 30 "the absorb to catch up after the lock" \
	sh -c "[ \"\$(getfattr --absolute-names --only-values -n user.nova.frontier '$MNT/b/s')\" = 101 ]"
nv_same_file "$MNT/b/s" "$NV_TMP/expect3" "content of s"
nv_alive || fail "daemon died while the metastore was busy"
say "ok: 100 appends through a 7 s exclusive lock"
nv_stop

say "4. the scratch directory vanishes: settling goes on"
nv_start "settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=2,read_grace_s=1,audit_interval_ms=100"
rm -rf "$DATA/scratch"
head -c 3000000 /dev/urandom > "$NV_TMP/blob"
dd if="$NV_TMP/blob" of="$MNT/b/big" bs=64k oflag=append conv=notrunc status=none
nv_await 60 "the stream to settle" nv_is_settled "$MNT/b/big"
nv_same_file "$MNT/b/big" "$NV_TMP/blob" "content of big"
nv_stop
nv_fsck
say "PASS"
