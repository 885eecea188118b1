#!/bin/bash
# t_etcd_faults.sh - a mount on a three-member etcd cluster through member
# and cluster failures, on the directory store:
#   1. a follower SIGKILLed during appends: appends go on;
#   2. the leader SIGKILLed: appends stall while etcd elects, then go on;
#   3. every member SIGKILLed for 20 s, on a remount with backlog_mib=1
#      and backlog_wait_s=5: the mount stays up; readers of hot data (an
#      open stream's newest bytes) go on; an open by name fails with
#      ETIMEDOUT after timeout=; appends are acked until the backlog is
#      spent, then one blocks for backlog_wait_s and fails with ETIMEDOUT
#      (the log names the stream); after the members restart the absorb
#      catches up, appends are admitted again, and a clean remount shows
#      every acked record once, in order (verify.py of
#      tests/integration/lib.sh);
#   4. novactl status lists three members and a leader;
#   5. an unmount while no member answers, with acked records not yet
#      absorbed: it gives up on the metastore once (one "giving up" line,
#      no call retried for the whole timeout=) and ends well within 5 s
#      (it took 10 s and more before); the next start recovers those
#      records from the chain's slots: every acked record once, in order.
# Members come from tests/etcd/etcd.sh (stopped by PID in the trap).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nv_init
ED=$NV_TMP/etcd
"$here/etcd.sh" start "$ED" 3 > "$NV_TMP/etcd.env" || exit $?
# The members are the EXIT trap's to stop (lib.sh nv_bg), after every
# (re)start.
own_members() { local i; for i in 1 2 3; do nv_bg "$(cat "$ED/m$i.pid")"; done; }
own_members
. "$ED/env.sh"
export NOVAFS_TEST_META="$NOVAFS_ETCD_URL?timeout=8&request_timeout=2000"
nv_start
nv_crash_tools
nv_writers_setup "$MNT/f" a b

# A writer that reports any failed write (and its errno) and stops.
cat > "$NV_TMP/w2.py" <<'PY'
import errno, os, sys, time
path, n, lastfile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
name = os.path.basename(path)
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
lf = os.open(lastfile + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.pwrite(lf, b"%12d\n" % (n - 1), 0)
os.rename(lastfile + ".tmp", lastfile)
while True:
    rec = ("%d %s %s\n" % (n, name, "x" * (n * 131 % 700))).encode()
    t0 = time.monotonic()
    try:
        os.write(fd, rec)
    except OSError as e:
        print("write of record %d failed after %.1f s: %s" % (n, time.monotonic() - t0,
              errno.errorcode.get(e.errno, e.errno)), flush=True)
        sys.exit(0)
    os.pwrite(lf, b"%12d\n" % n, 0)
    n += 1
PY

nv_writers_start
nv_writers_progress 10
follower=1
leader=$("$here/etcd.sh" leader "$ED")
[ "$leader" = 1 ] && follower=2
# 1. A follower dies.
"$here/etcd.sh" kill "$ED" "$follower"
mark_a=$(nv_writers_last a)
nv_await 20 "appends go on with a follower dead" \
	bash -c "(( \$(tr -d ' \n' < '$NV_TMP/last.a') > $mark_a + 50 ))"
say "ok: appends go on with member $follower dead"
"$here/etcd.sh" restart "$ED" "$follower"
own_members
# 2. The leader dies: a stall, then appends go on.
leader=$("$here/etcd.sh" leader "$ED")
t0=$EPOCHREALTIME
"$here/etcd.sh" kill "$ED" "$leader"
mark_a=$(nv_writers_last a)
nv_await 30 "appends go on after the leader died" \
	bash -c "(( \$(tr -d ' \n' < '$NV_TMP/last.a') > $mark_a + 50 ))"
say "ok: appends went on $(nv_elapsed "$t0") s after the leader (member $leader) was killed"
"$here/etcd.sh" restart "$ED" "$leader"
own_members
kill "${NV_W_PIDS[@]}" 2>/dev/null || true
for p in "${NV_W_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
NV_W_PIDS=()
nv_writers_verify "after member and leader kills"
say "ok: every acked record once and in order after the member kills ($NV_W_CHECKED checked)"

# 3. The whole cluster down for 20 s, with a backlog that fills in it.
nv_stop
nv_start "backlog_mib=1,backlog_wait_s=5"
# b's newest bytes hot again in this incarnation's tail cache.
python3 "$NV_TMP/w2.py" "$MNT/f/b" "${NV_W_NEXT[b]}" "$NV_TMP/last.b" > "$NV_TMP/w2b.out" 2>&1 &
wpid=$!
nv_bg "$wpid"
nv_await 20 "appends to b" bash -c "(( \$(tr -d ' \n' < '$NV_TMP/last.b' 2>/dev/null || echo 0) > ${NV_W_NEXT[b]} + 50 ))"
kill "$wpid"
wait "$wpid" 2>/dev/null || true
python3 "$NV_TMP/w2.py" "$MNT/f/a" "${NV_W_NEXT[a]}" "$NV_TMP/last.a" > "$NV_TMP/w2.out" 2>&1 &
wpid=$!
nv_bg "$wpid"
nv_await 10 "the writer started" test -e "$NV_TMP/last.a"
# Readers of hot data go on while no member answers: a reader that had b
# open reads its newest bytes (the tail cache).  Opening a stream by name
# or a cold read needs the metastore and waits for it (timeout=).
python3 - "$MNT/f/b" "$NV_TMP/go" > "$NV_TMP/hot.b" 2> "$NV_TMP/hot.err" <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
size = os.fstat(fd).st_size
sys.stdout.buffer.write(os.pread(fd, 2048, max(0, size - 2048)))
PY
rpid=$!
nv_bg "$rpid"
sleep 0.5
before=$(nv_writers_last a)
for i in 1 2 3; do "$here/etcd.sh" kill "$ED" "$i"; done
t0=$EPOCHREALTIME
touch "$NV_TMP/go"
wait "$rpid" || fail "hot data unreadable with etcd down: $(cat "$NV_TMP/hot.err")"
tail -n 1 "$NV_TMP/hot.b" | grep -Eq '^[0-9]+ b x*$' || fail "hot data of b wrong with etcd down"
say "ok: the newest 2 KiB of b read in $(nv_elapsed "$t0") s with every etcd member dead"

# An open by name needs the metastore: it fails with ETIMEDOUT once the
# URL's timeout= (8 s) has passed (man novafs.8, ERRORS).
t1=$EPOCHREALTIME
python3 -c '
import errno, os, sys
try:
    os.open(sys.argv[1], os.O_RDONLY)
except OSError as e:
    sys.exit(0 if e.errno == errno.ETIMEDOUT else "open failed with %s" % errno.errorcode.get(e.errno))
sys.exit("open succeeded with every etcd member dead")' "$MNT/f/b" ||
	fail "an open by name with etcd down did not fail with ETIMEDOUT"
say "ok: an open by name with etcd down: ETIMEDOUT after $(nv_elapsed "$t1") s"
# Appends: acked while the 1 MiB backlog has room, then one blocks for
# backlog_wait_s (5 s) and fails with ETIMEDOUT.
nv_await 20 "a write to fail with the backlog spent" bash -c "! kill -0 $wpid 2>/dev/null"
wait "$wpid" 2>/dev/null || true
after=$(nv_writers_last a)
say "appends during the outage: records $before -> $after acked, then: $(cat "$NV_TMP/w2.out")"
grep -q "failed after .* s: ETIMEDOUT" "$NV_TMP/w2.out" ||
	fail "a write with the backlog spent did not fail with ETIMEDOUT: $(cat "$NV_TMP/w2.out")"
waited=$(sed -n 's/.*failed after \([0-9.]*\) s.*/\1/p' "$NV_TMP/w2.out")
awk -v w="$waited" 'BEGIN { exit !(w >= 4.5 && w < 15) }' ||
	fail "the failed write waited $waited s, not about backlog_wait_s=5"
(( after > before + 100 )) || fail "appends were not acked with etcd down ($before -> $after; the backlog should take them)"
grep -q "stream f/a: a write failed (ETIMEDOUT) after waiting 5 s for backlog tokens" "$LOG" ||
	fail "the daemon did not log which stream failed and why"
say "ok: with etcd down appends were acked until the 1 MiB backlog was spent, then one blocked $waited s and failed with ETIMEDOUT"
left=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { s = 20 - (b - a); print (s > 0 ? s : 0) }')
sleep "$left"
nv_alive || fail "the daemon died while etcd was down"
rp=()
for i in 1 2 3; do "$here/etcd.sh" restart "$ED" "$i" & rp+=($!); done
for p in "${rp[@]}"; do wait "$p" || fail "a member did not come back"; done
own_members
say "ok: cluster restarted after $(nv_elapsed "$t0") s"
# The absorb catches up and writers are admitted again: the failed
# record first (nothing of it was admitted).
mark=$(nv_writers_last a)
python3 "$NV_TMP/w2.py" "$MNT/f/a" $((mark + 1)) "$NV_TMP/last.a" > "$NV_TMP/w2.out" 2>&1 &
wpid=$!
nv_bg "$wpid"
nv_await 60 "appends go on after the restart" \
	bash -c "(( \$(tr -d ' \n' < '$NV_TMP/last.a') > $mark + 20 ))"
say "ok: appends admitted again after the restart"
kill "$wpid" 2>/dev/null || true
wait "$wpid" 2>/dev/null || true
nv_stop
nv_start
nv_writers_verify "after the outage and a clean remount"
say "ok: every acked record once and in order after the outage ($NV_W_CHECKED checked)"

# 4. Status names the members.
"$NOVACTL" status -o "data_dir=$DATA$(nv_meta_opt)" > "$NV_TMP/status.out" 2>&1 ||
	fail "novactl status failed: $(cat "$NV_TMP/status.out")"
[ "$(grep -c 'member http.*: ok' "$NV_TMP/status.out")" = 3 ] && grep -q leader "$NV_TMP/status.out" ||
	fail "novactl status: $(cat "$NV_TMP/status.out")"
say "ok: novactl status: $(grep -c ': ok' "$NV_TMP/status.out") members answer"

# 5. Unmount with every member dead and acked records not absorbed.
python3 "$NV_TMP/w2.py" "$MNT/f/a" $(($(nv_writers_last a) + 1)) "$NV_TMP/last.a" > "$NV_TMP/w2.out" 2>&1 &
wpid=$!
nv_bg "$wpid"
nv_await 10 "the writer started" test -e "$NV_TMP/last.a"
mark=$(nv_writers_last a)
for i in 1 2 3; do "$here/etcd.sh" kill "$ED" "$i"; done
nv_await 20 "appends acked with etcd down" \
	bash -c "(( \$(tr -d ' \n' < '$NV_TMP/last.a') > $mark + 20 ))"
kill "$wpid" 2>/dev/null || true
wait "$wpid" 2>/dev/null || true
from=$(wc -l < "$LOG")
t1=$EPOCHREALTIME
# Not every append could be absorbed: exit status 1 (novafs(8), EXIT
# STATUS), after a bounded close.
nv_daemon_unmount "$MNT" 100 || fail "$NV_DAEMON_ERR"
nv_daemon_wait_exit 30 || fail "$NV_DAEMON_ERR"
took=$(nv_elapsed "$t1")
: > "$NV_TMP/daemon.pid"
[ "$NV_DAEMON_RC" = 1 ] || fail "the close with appends not absorbed exited with $NV_DAEMON_RC, not 1"
nv_is_mounted "$MNT" && fail "$MNT still mounted after the daemon exited"
tail -n +"$((from + 1))" "$LOG" > "$NV_TMP/close.log"
gave=$(grep -c "giving up on the metastore" "$NV_TMP/close.log" || true)
full=$(grep -c "no member answered for" "$NV_TMP/close.log" || true)
[ "$gave" = 1 ] && [ "$full" = 0 ] ||
	fail "the close gave up $gave time(s) and retried $full call(s) for the whole timeout: $(grep -E 'etcd|closed|absorb' "$NV_TMP/close.log" | head -20)"
awk -v t="$took" 'BEGIN { exit !(t < 5) }' || fail "the unmount with etcd down took $took s"
say "ok: unmount with etcd down in $took s ($(grep -c 'not closed cleanly' "$NV_TMP/close.log" || true) class(es) left to the next start)"
rp=()
for i in 1 2 3; do "$here/etcd.sh" restart "$ED" "$i" & rp+=($!); done
for p in "${rp[@]}"; do wait "$p" || fail "a member did not come back"; done
own_members
nv_start
nv_writers_verify "after an unmount with etcd down and a restart"
say "ok: every acked record once and in order after the unmount with etcd down ($NV_W_CHECKED checked)"
nv_stop
