#!/bin/bash
# t_shutdown.sh - stopping a daemon whose recovery cannot finish (issue 12
# item 3): requests parked at the recovery gate are answered (EIO) and
# the daemon exits on SIGTERM; the log says, and keeps saying, why the
# recovery is stuck and what would unblock it.
set -euo pipefail
. "$TESTLIB"
nv_init

say "1. an unclean epoch: records acknowledged, then kill -9"
nv_start ""
mkdir "$MNT/b"
for i in $(seq 1 20); do echo "rec $i" >> "$MNT/b/s"; done
nv_crash

say "2. restart on a store that fails every GET: recovery cannot settle"
NV_START_TIMEOUT=30 nv_start "store_faults=get_error=1:seed=3"
cat "$MNT/b/s" > "$NV_TMP/cat.out" 2> "$NV_TMP/cat.err" &
reader=$!
NV_BG+=("$reader")
nv_own "$reader"
# The reader is parked at the gate: recovery keeps failing.
nv_await 20 "the log to say why recovery is stuck" \
	grep -q "recovery cannot finish" "$LOG"
grep "recovery cannot finish" "$LOG" | head -n 1 | grep -q "unblock" ||
	fail "the stuck-recovery line does not say what would unblock it"
nv_pid_alive "$reader" || fail "the reader finished although the gate is closed"

say "3. SIGTERM: the parked reader gets EIO and the daemon exits"
kill -TERM "$NV_PID"
if ! nv_wait_pid_exit "$NV_PID" 20; then
	# kill -9 aborts the connection, so the parked reader (D state) and
	# the cleanup can end.
	nv_kill9
	fail "the daemon did not exit within 20 s of SIGTERM (killed)"
fi
nv_reap_daemon
nv_wait_pid_exit "$reader" 10 || fail "the parked reader was never answered"
rc=0
wait "$reader" || rc=$?
((rc != 0)) || fail "the parked reader succeeded: $(cat "$NV_TMP/cat.out")"
grep -q "Input/output error\|shut down" "$NV_TMP/cat.err" ||
	fail "the parked reader failed with '$(cat "$NV_TMP/cat.err")', expected EIO"
say "ok: reader answered ($(cat "$NV_TMP/cat.err")), daemon exited with status $NV_EXIT_RC"

say "4. a healthy store: recovery finishes, every record is there"
nv_start ""
seq 1 20 | sed 's/^/rec /' > "$NV_TMP/expect"
nv_same_file "$MNT/b/s" "$NV_TMP/expect" "content of s"
nv_stop
nv_fsck
say "PASS"
