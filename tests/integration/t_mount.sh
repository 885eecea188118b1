#!/bin/bash
# t_mount.sh - mounting as an operator does it (issue 12 items 5, 6, 8):
# `make install DESTDIR=...` installs the daemon, the tool and the man
# pages; `mount -t fuse.novafs novafs MNT -o data_dir=...` and an fstab
# line (through mount.fuse3, which passes SOURCE MOUNTPOINT) mount, and
# umount stops the daemon; without a syslog socket the background daemon
# logs to DATA_DIR/novafs.log and says so; SIGHUP reopens the log file
# (logrotate) and does not unmount; a regular file as mount point, a
# second daemon on a live mount and a second daemon on the same
# metastore are refused with a clear error; refused xattr
# administration is logged, rate-limited.
set -euo pipefail
. "$TESTLIB"
nv_init
command -v mount.fuse3 >/dev/null || nv_skip "mount.fuse3 is not installed"


say "1. make install DESTDIR: novafs, novactl, novagw and the man pages"
top=$(cd "$(dirname "$NOVAFS")/.." && pwd)
inst=$NV_TMP/inst
if [ -f "$top/Makefile" ] && command -v make >/dev/null; then
	MAKEFLAGS= make -s -C "$top" install DESTDIR="$inst" > "$NV_TMP/install.out" 2>&1 ||
		fail "make install DESTDIR failed: $(tail -n 5 "$NV_TMP/install.out")"
	bin=$(dirname "$(find "$inst" -type f -name novafs -perm -u+x | head -n 1)")
	[ -x "$bin/novafs" ] && [ -x "$bin/novactl" ] && [ -x "$bin/novagw" ] ||
		fail "make install did not install novafs, novactl and novagw"
	for m in novafs.8 novactl.8 novagw.8 novafs.7; do
		[ -n "$(find "$inst" -name "$m*")" ] || fail "make install did not install $m"
	done
	say "ok: installed into $bin"
else
	bin=$(dirname "$NOVAFS")
	say "no build tree at $top: using $bin"
fi
# mount(8) runs mount.fuse3 without our PATH, and mount.fuse3 runs
# `novafs` through /bin/sh, whose default PATH has /usr/local/sbin: in a
# private mount namespace the installed bin directory is bound there, so
# the real mount(8) -> mount.fuse3 -> novafs path runs without touching
# the system.  Everything that sees the mount runs in that namespace.
command -v unshare >/dev/null || nv_skip "unshare is not installed"
cat > "$NV_TMP/inner.sh" <<'INNER'
set -euo pipefail
say() { printf 't_mount (namespace): %s\n' "$*"; }
fail() { printf 't_mount (namespace): FAIL: %s\n' "$*" >&2; exit 1; }
await() { # SECONDS WHAT CMD...
	local n=$(($1 * 10)) what=$2
	shift 2
	until "$@"; do
		((n-- > 0)) || fail "timed out waiting for $what"
		sleep 0.1
	done
}
pid_in() { sed -n 's/.* novafs\[\([0-9]*\)\] .*/\1/p' "$1" | tail -n 1; }
released() { flock -n "$DATA/lock" true; }
cleanup() {
	local p
	if mountpoint -q "$MNT"; then umount "$MNT" 2>/dev/null || umount -l "$MNT"; fi
	for p in $(pid_in "$DATA/novafs.log" 2>/dev/null) $(pid_in "$NV_TMP/a.log" 2>/dev/null); do
		await 20 "daemon $p to exit" released || kill -9 "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT
mount --bind "$BIN" /usr/local/sbin

say "2. mount -t fuse.novafs novafs MNT -o data_dir=DATA"
[ -S /dev/log ] && say "note: /dev/log exists; the log-file fallback is not exercised"
mount -t fuse.novafs novafs "$MNT" -o "data_dir=$DATA" 2> "$NV_TMP/mount.err" ||
	fail "mount -t fuse.novafs failed: $(cat "$NV_TMP/mount.err")"
mountpoint -q "$MNT" || fail "mount -t fuse.novafs returned but $MNT is not mounted"
awk -v m="$MNT" '$2 == m && $3 == "fuse.novafs" { f = 1 } END { exit !f }' /proc/mounts ||
	fail "$MNT is not listed as fuse.novafs in /proc/mounts"
if [ ! -S /dev/log ]; then
	grep -q "logging to $DATA/novafs.log" "$NV_TMP/mount.err" ||
		fail "the background start did not say where it logs: '$(cat "$NV_TMP/mount.err")'"
	await 10 "lines in $DATA/novafs.log" grep -q "serving" "$DATA/novafs.log"
fi
mkdir "$MNT/b"
echo hello >> "$MNT/b/s"
[ "$(cat "$MNT/b/s")" = hello ] || fail "the mount does not serve"

say "3. umount stops the daemon"
umount "$MNT" || fail "umount $MNT failed"
await 60 "the daemon to release $DATA/lock" released
mountpoint -q "$MNT" && fail "$MNT still mounted after umount"

say "4. an fstab line (mount -T FSTAB MNT) with -o log=FILE; SIGHUP reopens the log"
printf 'novafs %s fuse.novafs data_dir=%s,log=%s,noauto 0 0\n' "$MNT" "$DATA" \
	"$NV_TMP/a.log" > "$NV_TMP/fstab"
mount -T "$NV_TMP/fstab" "$MNT" 2> "$NV_TMP/mount.err" ||
	fail "mount through the fstab line failed: $(cat "$NV_TMP/mount.err")"
mountpoint -q "$MNT" || fail "the fstab mount is not mounted"
[ "$(cat "$MNT/b/s")" = hello ] || fail "the fstab mount does not serve the stream"
pid=$(pid_in "$NV_TMP/a.log")
[ -n "$pid" ] || fail "no line in the -o log file $NV_TMP/a.log"
mv "$NV_TMP/a.log" "$NV_TMP/a.log.1"
kill -HUP "$pid"
await 10 "the log to be reopened after SIGHUP" grep -q "reopened" "$NV_TMP/a.log"
mountpoint -q "$MNT" || fail "SIGHUP unmounted the filesystem"
mkdir "$MNT/c"
await 10 "a new line in the reopened log" grep -q "bucket c created" "$NV_TMP/a.log"
umount "$MNT" || fail "umount of the fstab mount failed"
await 60 "the daemon to release $DATA/lock" released
say "ok"
INNER
MNT=$MNT DATA=$DATA NV_TMP=$NV_TMP BIN=$bin \
	unshare -m --propagation private bash "$NV_TMP/inner.sh" ||
	fail "the mount(8) part failed (above)"
cat "$DATA/novafs.log" "$NV_TMP"/a.log* >> "$LOG" 2>/dev/null || true

say "5. refusals: a second daemon on a live mount, a regular file, the same metastore"
nv_start ""
[ "$(cat "$MNT/b/s")" = hello ] || fail "the stream written through mount(8) is not there"
nv_refuse "already a novafs mount" "novafs over a live novafs mount" \
	"$NOVAFS" -f -o "data_dir=$NV_TMP/other" "$MNT"
: > "$NV_TMP/file"
nv_refuse "is not a directory" "a regular file as mount point" \
	"$NOVAFS" -f -o "data_dir=$NV_TMP/other" "$NV_TMP/file"
mkdir "$NV_TMP/mnt2"
nv_refuse "in use by another novafs" "a second daemon on the same metastore" \
	timeout 20 "$NOVAFS" -f -o "data_dir=$NV_TMP/other,meta=sqlite:$DATA/meta.db" "$NV_TMP/mnt2"
nv_is_mounted "$NV_TMP/mnt2" && fail "the refused daemon left a mount on $NV_TMP/mnt2"
"$NOVACTL" status -o "data_dir=$DATA" > "$NV_TMP/status.out" 2>&1 ||
	fail "novactl status beside the running daemon failed: $(cat "$NV_TMP/status.out")"

say "6. a refused xattr administration is logged, naming the stream"
out=$(setfattr -n user.nova.trim -v abc "$MNT/b/s" 2>&1) && fail "setfattr user.nova.trim=abc succeeded"
grep -q "Invalid argument" <<< "$out" || fail "user.nova.trim=abc failed with '$out', expected EINVAL"
nv_await 10 "the refusal in the log" grep -q "user.nova.trim=abc on b/s refused" "$LOG"
for i in $(seq 1 30); do setfattr -n user.nova.trim -v abc "$MNT/b/s" 2>/dev/null || true; done
n=$(grep -c "user.nova.trim=abc on b/s refused" "$LOG")
((n <= 10)) || fail "$n refusal lines for 31 refusals: not rate-limited"
say "ok: $n refusal lines for 31 refusals"
nv_stop
nv_fsck
say "PASS"
