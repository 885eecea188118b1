#!/bin/bash
# t_lease_pause.sh - one star on its embedded SQLite metastore paused past
# its registry lease (star_lease_s=2, SIGSTOP for 4 s): on SIGCONT the
# star finds its lease lost, acks nothing until it has restarted its
# epochs and registered again (a write meanwhile fails with ETIMEDOUT,
# never succeeds twice), then appends go on; every acknowledged record is
# there exactly once, in order, in this mount and after a remount.
# Then SIGTERM right after such a pause, with a writer appending through
# it: exit 0 (man/novafs.8 EXIT STATUS), every acked record kept.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
nv_start "star_lease_s=2"
mkdir "$MNT/b"

# write_rec N: one record "r N"; prints OK or the errno name.
write_rec() {
	python3 - "$MNT/b/s" "$1" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
try:
    os.write(fd, b"r %s\n" % sys.argv[2].encode())
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}

acked=()
for i in 0 1 2; do
	[ "$(write_rec "$i")" = OK ] || fail "write $i before the pause"
	acked+=("r $i")
done
kill -STOP "$NV_PID"
# The pause itself is under test: nothing in a stopped daemon can be
# awaited, so it lasts a fixed 4 s, twice the lease.
sleep 4
kill -CONT "$NV_PID"
n=3
refused=0
ok_after() {
	local r
	r=$(write_rec "$n")
	case $r in
	OK) acked+=("r $n"); n=$((n + 1)); return 0 ;;
	ETIMEDOUT) refused=$((refused + 1)); n=$((n + 1)); return 1 ;;
	*) fail "write $n after the pause: $r (want OK or ETIMEDOUT)" ;;
	esac
}
nv_await 30 "appends go on after the pause" ok_after
nv_await 10 "the loss in the log" grep -q "registry lease lost" "$LOG"
nv_await 10 "registered again" grep -q "registered again" "$LOG"
say "ok: the lease was lost and the star registered again; $refused write(s) refused meanwhile"
for _ in 1 2 3; do ok_after || fail "a write after the star registered again failed"; done
# Every acked record exactly once and in order; a refused one may be
# there too (durable, not acknowledged: in doubt), never twice.
check() {
	python3 - "$MNT/b/s" "${acked[@]}" <<'PY'
import sys
got = open(sys.argv[1]).read().splitlines()
want = sys.argv[2:]
if len(set(got)) != len(got):
    sys.exit("a record twice: %r" % got)
it = iter(got)
for w in want:
    if w not in it:
        sys.exit("acked record %r missing or out of order in %r" % (w, got))
PY
}
check || fail "the stream after the pause"
nv_remount
check || fail "the stream after a remount"
say "ok: ${#acked[@]} acked records once and in order, also after a remount"

# 2. SIGTERM at once after a pause past the lease, a writer appending
#    through it: the star lost its registry lease (and with it every
#    writer lease) and has nothing left to release; its graceful stop
#    exits 0 and every record the writer got acked is there after a
#    restart.  The auditor waits 3 s before it restarts a halted class
#    (a failpoint), so the stop always overtakes that restart.
nv_stop
export NOVAFS_FAILPOINTS=auditor.before_restart=delay:3000
nv_start
unset NOVAFS_FAILPOINTS
# The writer: tests/etcd/records.py ("w n pad" records on b/w, w.log).
RECORDS=$(dirname "$TESTLIB")/../etcd/records.py
wlog=$NV_TMP/w.log
wacks() { local k; k=$(grep -c '^ack' "$wlog" 2>/dev/null) || true; echo "${k:-0}"; }
: > "$MNT/b/w"
python3 "$RECORDS" write "$MNT/b/w" w "$wlog" &
W_PID=$!
nv_bg "$W_PID"
nv_await 20 "the writer gets going" bash -c "(( \$(grep -c '^ack' '$wlog') >= 20 ))"
kill -STOP "$NV_PID"
sleep 4 # as above: a stopped daemon has nothing to await
kill -CONT "$NV_PID"
kill -TERM "$NV_PID"
nv_wait_daemon_exit 60
touch "$wlog.stop"
nv_await 30 "the writer ends" bash -c "! kill -0 $W_PID 2>/dev/null"
((NV_EXIT_RC == 0)) || fail "SIGTERM right after the lease loss: exit $NV_EXIT_RC (want 0): $(grep -E 'WARN|ERR' "$LOG" | tail -5)"
grep -q "left unsettled at the close (.*): it halted with the registry lease loss" "$LOG" ||
	fail "the log does not say what the close left to the settle: $(grep -E 'WARN|ERR' "$LOG" | tail -5)"
say "ok: SIGTERM right after the lease loss: exit 0 (the writer: $(wacks) acked), the halted epoch left to the settle (logged)"
nv_start
out=$(python3 "$RECORDS" verify "$MNT/b/w" "$wlog" 2>&1) ||
	fail "the writer's stream after the stop that followed the lease loss: $out"
check || fail "the stream of section 1 after that stop"
say "ok: $out: every acked record once and in order after that stop"
