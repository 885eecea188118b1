#!/bin/bash
# t_etcd_faults.sh - a mount on a three-member etcd cluster through member
# and cluster failures, on the directory store:
#   1. a follower SIGKILLed during appends: appends go on;
#   2. the leader SIGKILLed: appends stall while etcd elects, then go on;
#   3. every member SIGKILLed for 20 s: the mount stays up; readers of hot
#      data (an open stream's newest bytes) go on; an open by name fails
#      with ETIMEDOUT after timeout=; appends may block, or fail with
#      a clear errno once the bounds pass (meta timeout=8 s), never lose or
#      double a record; after the members restart everything converges:
#      appends go on and a clean remount shows every acked record once, in
#      order (verify.py of tests/integration/lib.sh);
#   4. novactl status lists three members and a leader.
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
import errno, os, sys
path, n, lastfile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
name = os.path.basename(path)
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
lf = os.open(lastfile + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.pwrite(lf, b"%12d\n" % (n - 1), 0)
os.rename(lastfile + ".tmp", lastfile)
while True:
    rec = ("%d %s %s\n" % (n, name, "x" * (n * 131 % 700))).encode()
    try:
        os.write(fd, rec)
    except OSError as e:
        print("write of record %d failed: %s" % (n, errno.errorcode.get(e.errno, e.errno)))
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

# 3. The whole cluster down for 20 s.
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
for i in 1 2 3; do "$here/etcd.sh" kill "$ED" "$i"; done
t0=$EPOCHREALTIME
touch "$NV_TMP/go"
wait "$rpid" || fail "hot data unreadable with etcd down: $(cat "$NV_TMP/hot.err")"
tail -n 1 "$NV_TMP/hot.b" | grep -Eq '^[0-9]+ b x*$' || fail "hot data of b wrong with etcd down"
say "ok: the newest 2 KiB of b read in $(nv_elapsed "$t0") s with every etcd member dead"

during=$(nv_writers_last a)
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
left=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { s = 20 - (b - a); print (s > 0 ? s : 0) }')
sleep "$left"
after=$(nv_writers_last a)
if nv_pid_alive "$wpid"; then
	say "appends during the outage: records $during -> $after (blocked or buffered)"
else
	say "appends during the outage ended: $(cat "$NV_TMP/w2.out")"
	grep -Eq "ETIMEDOUT|EIO|ENOSPC|EAGAIN" "$NV_TMP/w2.out" ||
		fail "appends failed with an unclear error: $(cat "$NV_TMP/w2.out")"
fi
nv_alive || fail "the daemon died while etcd was down"
rp=()
for i in 1 2 3; do "$here/etcd.sh" restart "$ED" "$i" & rp+=($!); done
for p in "${rp[@]}"; do wait "$p" || fail "a member did not come back"; done
own_members
say "ok: cluster restarted after $(nv_elapsed "$t0") s"
if nv_pid_alive "$wpid"; then
	mark=$(nv_writers_last a)
	nv_await 60 "appends go on after the restart" \
		bash -c "(( \$(tr -d ' \n' < '$NV_TMP/last.a') > $mark + 20 ))"
	say "ok: appends went on after the restart"
	kill "$wpid" 2>/dev/null || true
fi
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
nv_stop
