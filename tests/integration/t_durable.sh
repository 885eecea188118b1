#!/bin/bash
# t_durable.sh - durable=fsync (DESIGN.md 5, novafs(8) -o durable and
# user.nova.durable): write() returns at admission, fsync() and close()
# when everything the handle wrote is durable; readers see only acked
# bytes; a failed ack fails fsync/close with EIO and is logged; a crash
# after close loses nothing close acknowledged; a stream's override is
# kept in its row (drop_caches, restarts) until setfattr -x removes it.
set -euo pipefail
. "$TESTLIB"
nv_init

# op.py MODE PATH: one 4 KiB record, then what a reader sees before and
# after the writer's fsync (MODE sync) or close (MODE close).  Prints
# "before=<size>:<bytes read> after=<size>:<bytes read>" or the errno
# name of the call that failed ("fsync=EIO", "close=EIO").
cat > "$NV_TMP/op.py" <<'PY'
import errno, os, sys
mode, path = sys.argv[1], sys.argv[2]
w = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(w, b"r" * 4096)
r = os.open(path, os.O_RDONLY)
before = "%d:%d" % (os.fstat(r).st_size, len(os.pread(r, 1 << 20, 0)))
try:
    if mode == "sync":
        os.fsync(w)
    os.close(w)
except OSError as e:
    print("%s=%s" % ("fsync" if mode == "sync" else "close", errno.errorcode[e.errno]))
    sys.exit(0)
print("before=%s after=%d:%d" % (before, os.stat(path).st_size, len(os.pread(r, 1 << 20, 0))))
PY
op() { python3 "$NV_TMP/op.py" "$@"; }

head -c $((24 << 20)) /dev/urandom > "$NV_TMP/src"
sync "$NV_TMP/src"

say "1. -o durable=fsync: dd bs=1M lands whole at close; readers see only acked bytes"
# Slot PUTs take 1 s each, so the ack of a record comes well after its
# write() returned: a reader right after the write must see nothing.
nv_start "durable=fsync,store_faults=latency_ms=1000:prefix=chains/"
mkdir "$MNT/b"
: > "$MNT/b/s"
nv_expect_eq "$(nv_xattr "$MNT/b/s" user.nova.durable)" fsync "durable of a stream under -o durable=fsync"
got=$(op sync "$MNT/b/a")
nv_expect_eq "$got" "before=0:0 after=4096:4096" "reader around an fsync-mode write, then fsync"
got=$(op close "$MNT/b/c")
nv_expect_eq "$got" "before=0:0 after=4096:4096" "reader around an fsync-mode write, then close"
nv_stop
nv_start "durable=fsync"
dd if="$NV_TMP/src" of="$MNT/b/s" bs=1M status=none || fail "dd into a durable=fsync stream failed"
nv_same_file "$MNT/b/s" "$NV_TMP/src" "content after dd's close"
say "ok: 24 MiB by dd bs=1M, all there after close"

say "2. kill -9 right after close: nothing close acknowledged is lost"
dd if="$NV_TMP/src" of="$MNT/b/k" bs=1M status=none || fail "dd before the crash failed"
nv_crash
nv_start "durable=fsync"
nv_same_file "$MNT/b/k" "$NV_TMP/src" "content after kill -9 and restart"
nv_same_file "$MNT/b/s" "$NV_TMP/src" "earlier stream after kill -9 and restart"
nv_stop

say "3. the default stays durable=write; user.nova.durable switches one stream"
nv_start "store_faults=latency_ms=1000:prefix=chains/"
: > "$MNT/b/w"
nv_expect_eq "$(nv_xattr "$MNT/b/w" user.nova.durable)" write "durable by default"
got=$(op sync "$MNT/b/w")
nv_expect_eq "$got" "before=4096:4096 after=4096:4096" "a default write is acked before it returns"
: > "$MNT/b/f"
setfattr -n user.nova.durable -v fsync "$MNT/b/f" || fail "setfattr user.nova.durable=fsync failed"
nv_expect_eq "$(nv_xattr "$MNT/b/f" user.nova.durable)" fsync "durable after setfattr"
nv_expect_eq "$(nv_xattr "$MNT/b/w" user.nova.durable)" write "durable of another stream"
got=$(op sync "$MNT/b/f")
nv_expect_eq "$got" "before=0:0 after=4096:4096" "reader around a write to the fsync stream"
grep -q "b/f ([0-9]*): user.nova.durable set to fsync" "$LOG" || fail "no log line for the setfattr"
say "ok; the setting is kept in the stream's row, not on the inode"
# The kernel forgets idle inodes (the daemon unloads the stream), and a
# restart forgets everything in memory: the override must come back.
sync
echo 2 > /proc/sys/vm/drop_caches
nv_expect_eq "$(nv_xattr "$MNT/b/f" user.nova.durable)" fsync "durable after drop_caches"
nv_stop
nv_start "store_faults=latency_ms=1000:prefix=chains/"
nv_expect_eq "$(nv_xattr "$MNT/b/f" user.nova.durable)" fsync "durable after a restart"
nv_expect_eq "$(nv_xattr "$MNT/b/w" user.nova.durable)" write "durable of the other stream after a restart"
got=$(op sync "$MNT/b/f")
nv_expect_eq "$got" "before=4096:4096 after=8192:8192" "a write to the fsync stream after a restart"
setfattr -n user.nova.durable -v write "$MNT/b/f" || fail "setfattr user.nova.durable=write failed"
got=$(op sync "$MNT/b/f")
nv_expect_eq "$got" "before=12288:12288 after=12288:12288" "the stream back at durable=write"
say "ok; setfattr -x removes it: the mount's -o durable= applies again"
setfattr -n user.nova.durable -v write "$MNT/b/w" || fail "setfattr user.nova.durable=write on w failed"
setfattr -x user.nova.durable "$MNT/b/f" || fail "setfattr -x user.nova.durable failed"
nv_expect_eq "$(nv_xattr "$MNT/b/f" user.nova.durable)" write "durable after removal, under the default mount"
nv_stop
nv_start "durable=fsync"
nv_expect_eq "$(nv_xattr "$MNT/b/f" user.nova.durable)" fsync "a removed override reads as the mount's durable=fsync"
nv_expect_eq "$(nv_xattr "$MNT/b/w" user.nova.durable)" write "a kept override wins over the mount's durable=fsync"
setfattr -x user.nova.durable "$MNT/b/f" || fail "removing an absent override failed"
nv_stop

say "4. every slot PUT fails: close, or fsync, fails with EIO; the bytes never show"
nv_start "durable=fsync,store_faults=put_error=1:prefix=chains/,put_timeout_s=1"
got=$(op close "$MNT/b/e1")
nv_expect_eq "$got" "close=EIO" "close after a failed ack"
nv_expect_eq "$(nv_size "$MNT/b/e1")" 0 "size of the stream whose record failed"
grep -q "b/e1: a 4096-byte append written with durable=fsync failed" "$LOG" ||
	fail "no log line names the stream whose record failed"
nv_alive || fail "daemon died after a failed ack"
nv_stop
# That epoch halted, and its recovery cannot write the fence while every
# chain PUT fails: appends would wait at the gate.  A fresh data dir.
DATA=$NV_TMP/data2
mkdir "$DATA"
nv_start "durable=fsync,store_faults=put_error=1:prefix=chains/,put_timeout_s=1"
mkdir "$MNT/b"
got=$(op sync "$MNT/b/e2")
nv_expect_eq "$got" "fsync=EIO" "fsync after a failed ack"
nv_expect_eq "$(nv_size "$MNT/b/e2")" 0 "size of the stream whose record failed"
nv_stop
say "ok: EIO at fsync and at close, logged, nothing unacked shown"

say "5. -o durable= takes write or fsync only"
nv_start_try "durable=sometimes" && fail "the daemon started with -o durable=sometimes"
grep -q "durable=sometimes: expected write or fsync" "$LOG" ||
	fail "no error names the bad -o durable value"
say "ok"
