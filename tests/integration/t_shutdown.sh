#!/bin/bash
# t_shutdown.sh - stopping a daemon whose recovery cannot finish (issue 12
# item 3): requests parked at the recovery gate are answered (EIO) and
# the daemon exits on SIGTERM; the log says, and keeps saying, why the
# recovery is stuck and what would unblock it.  Without a signal too:
# `fusermount3 -u` is refused while a reader is parked (the kernel's
# busy mount), `fusermount3 -uz` detaches the mount and the daemon
# answers the parked reader and exits; `umount -f` aborts the connection
# (the kernel answers the reader) and the daemon, whose loop then joins
# its workers, still exits.
set -euo pipefail
. "$TESTLIB"
nv_init

say "1. an unclean epoch: records acknowledged, then kill -9"
nv_start ""
mkdir "$MNT/b"
for i in $(seq 1 20); do echo "rec $i" >> "$MNT/b/s"; done
nv_crash

# park_reader: restart on a store that fails every GET (recovery cannot
# settle) and park a reader of b/s at the recovery gate; sets reader.
park_reader() {
	NV_START_TIMEOUT=30 nv_start "store_faults=get_error=1:seed=3"
	cat "$MNT/b/s" > "$NV_TMP/cat.out" 2> "$NV_TMP/cat.err" &
	reader=$!
	NV_BG+=("$reader")
	nv_own "$reader"
	# The reader is parked at the gate: recovery keeps failing.
	nv_await 20 "the log to say why recovery is stuck" \
		grep -q "recovery cannot finish" "$LOG"
	nv_await 10 "the reader to park in a FUSE request" \
		grep -q fuse "/proc/$reader/stack"
	nv_pid_alive "$reader" || fail "the reader finished although the gate is closed"
}

# reader_failed HOW ERRTEXT: the parked reader ended (bounded) with a
# failure whose message matches ERRTEXT.
reader_failed() {
	local rc=0
	nv_wait_pid_exit "$reader" 10 || fail "$1: the parked reader was never answered"
	wait "$reader" || rc=$?
	((rc != 0)) || fail "$1: the parked reader succeeded: $(cat "$NV_TMP/cat.out")"
	grep -q "$2" "$NV_TMP/cat.err" ||
		fail "$1: the parked reader failed with '$(cat "$NV_TMP/cat.err")', expected $2"
	say "ok: $1: reader answered ($(cat "$NV_TMP/cat.err"))"
}

# daemon_exits HOW: the daemon ends on its own within 20 s (else kill -9
# and fail), reaped.
daemon_exits() {
	if ! nv_wait_pid_exit "$NV_PID" 20; then
		# kill -9 aborts the connection, so the parked reader (D state) and
		# the cleanup can end.
		nv_kill9
		fail "the daemon did not exit within 20 s of $1 (killed)"
	fi
	nv_reap_daemon
	say "ok: $1: daemon exited with status $NV_EXIT_RC"
}

say "2. restart on a store that fails every GET: recovery cannot settle"
park_reader
grep "recovery cannot finish" "$LOG" | head -n 1 | grep -q "unblock" ||
	fail "the stuck-recovery line does not say what would unblock it"

say "3. SIGTERM: the parked reader gets EIO and the daemon exits"
kill -TERM "$NV_PID"
daemon_exits SIGTERM
reader_failed SIGTERM "Input/output error\|shut down"

say "3b. fusermount3 -u while a reader is parked: refused (busy); -uz detaches"
park_reader
if err=$(fusermount3 -u "$MNT" 2>&1); then
	fail "fusermount3 -u unmounted although a reader is parked in the mount"
fi
grep -q "busy" <<< "$err" || fail "fusermount3 -u failed with '$err', expected busy"
say "ok: fusermount3 -u: $err"
nv_pid_alive "$reader" || fail "the refused unmount ended the parked reader"
fusermount3 -uz "$MNT" || fail "fusermount3 -uz failed"
reader_failed "fusermount3 -uz" "Input/output error\|shut down"
daemon_exits "fusermount3 -uz"
grep -q "the mount was detached while recovery is unfinished" "$LOG" ||
	fail "the log does not say why the parked reader was answered"

say "3c. umount -f aborts the connection: the loop ends, the daemon exits"
park_reader
# The kernel answers the reader (ECONNABORTED) and may still call the
# mount busy while the reader lets go of it.
umount -f "$MNT" 2>/dev/null || true
reader_failed "umount -f" "abort\|not connected"
daemon_exits "umount -f"

say "3d. umount -f once recovery is done (the device no longer watched): the daemon exits"
nv_start ""
nv_await 20 "recovery to finish" sh -c "cat '$MNT/b/s' > /dev/null"
umount -f "$MNT" 2>/dev/null || true
daemon_exits "umount -f after recovery"

say "4. a healthy store: recovery finishes, every record is there"
nv_start ""
seq 1 20 | sed 's/^/rec /' > "$NV_TMP/expect"
nv_same_file "$MNT/b/s" "$NV_TMP/expect" "content of s"
nv_stop
nv_fsck
say "PASS"
