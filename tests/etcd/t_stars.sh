#!/bin/bash
# t_stars.sh - two stars (mounts) on one etcd member and one shared store
# (a directory store on this host, store=dir:), each with its own data
# directory, star id and listen= port, star_lease_s=2:
#   1. a stream appended on A is refused on B with EREMOTE (NOT_OWNER:
#      B has no redial yet) until A's lease is gone;
#   2. a second star on B's data directory is refused, and so is one with
#      B's id on another data directory;
#   3. kill -9 of A: after A's lease TTL, B takes the stream (its take
#      waits for A's epoch to be settled by B's settle duty) and appends;
#      every record A acked is readable on B exactly once, in order;
#   4. A starts again (same data directory, same id); A leads a second
#      stream with a writer appending; SIGSTOP of A past its lease; B
#      takes that stream and appends; SIGCONT: the writer on A gets no
#      ack after A's deadline (its write fails), A cannot append to the
#      stream any more (EREMOTE), and B reads every record the writer saw
#      acked exactly once and in order, then B's own, and nothing A
#      committed after losing the lease (no duplicate, no gap).
# Members come from tests/etcd/etcd.sh (stopped by PID in the trap).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nv_init
ED=$NV_TMP/etcd
"$here/etcd.sh" start "$ED" 1 > "$NV_TMP/etcd.env" || exit $?
nv_bg "$(cat "$ED/m1.pid")"
. "$ED/env.sh"

SHARED=$NV_TMP/shared
MB=$NV_TMP/mnt-b
DB=$NV_TMP/data-b
LOGB=$NV_TMP/novafs-b.log
mkdir -p "$SHARED" "$MB" "$DB"
: > "$LOGB"
port() { echo $(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000 )); }
COMMON="store=dir:$SHARED,meta=$NOVAFS_ETCD_URL,star_lease_s=2,attr_timeout=0"
B_PID=
stars_cleanup() {
	local rc=$?
	if [ -n "$B_PID" ]; then
		kill -CONT "$B_PID" 2>/dev/null || true
		timeout 10 fusermount3 -u "$MB" 2>/dev/null || kill -9 "$B_PID" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$B_PID" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$B_PID" 2>/dev/null || true
		timeout 10 fusermount3 -uz "$MB" 2>/dev/null || true
	fi
	[ -n "${NV_PID:-}" ] && kill -CONT "$NV_PID" 2>/dev/null || true
	(exit $rc)
	nv_cleanup
}
trap stars_cleanup EXIT

start_b() {
	"$NOVAFS" -f -o "data_dir=$DB,star=sb,listen=127.0.0.1:$(port),$COMMON" "$MB" >> "$LOGB" 2>&1 &
	B_PID=$!
	nv_own "$B_PID"
	nv_await 30 "star B mounts $MB" mountpoint -q "$MB"
}

# append FILE TEXT: one write(); prints OK or the errno name.
append() {
	python3 - "$1" "$2" <<'PY'
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, sys.argv[2].encode())
    os.close(fd)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}

nv_start "star=sa,listen=127.0.0.1:$(port),$COMMON"
start_b
MA=$MNT
say "stars A (pid $NV_PID) and B (pid $B_PID) on etcd $NOVAFS_ETCD_ENDPOINTS"

# 1. A leads the stream; B is refused with EREMOTE.
mkdir "$MA/b"
for i in $(seq 0 49); do
	r=$(append "$MA/b/s" "a $i
")
	[ "$r" = OK ] || fail "append $i on A: $r"
done
nv_await 10 "B sees the stream" test -e "$MB/b/s"
r=$(append "$MB/b/s" "b refused
")
[ "$r" = EREMOTE ] || fail "append on B while A leads: $r (want EREMOTE)"
say "ok: an append on B while A leads is refused with EREMOTE"

# 2. A second star on B's data directory is refused (its lock), and so
#    is one with B's id on another data directory (the registry).
mkdir -p "$NV_TMP/mnt-d"
rc=0
timeout 30 "$NOVAFS" -f -o "data_dir=$DB,star=sd,$COMMON" "$NV_TMP/mnt-d" \
	> "$NV_TMP/novafs-d.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a second star on B's data directory: exit $rc (want 1)"
grep -q "is in use by another novafs" "$NV_TMP/novafs-d.log" ||
	fail "no clear error for a data directory in use: $(tail -3 "$NV_TMP/novafs-d.log")"
say "ok: a second star on B's data directory is refused"
mkdir -p "$NV_TMP/mnt-c" "$NV_TMP/data-c"
rc=0
timeout 30 "$NOVAFS" -f -o "data_dir=$NV_TMP/data-c,star=sb,$COMMON" "$NV_TMP/mnt-c" \
	> "$NV_TMP/novafs-c.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a star with a live star's id: exit $rc (want 1)"
grep -q "registered by a live star" "$NV_TMP/novafs-c.log" ||
	fail "no clear error for a star id in use: $(tail -3 "$NV_TMP/novafs-c.log")"
say "ok: a second star with B's id is refused: $(grep -o 'star id sb is registered[^:]*' "$NV_TMP/novafs-c.log")"

# 3. kill -9 of A: B takes over after the lease TTL.
nv_crash
t0=$EPOCHREALTIME
took() { [ "$(append "$MB/b/s" "b 0
")" = OK ]; }
nv_await 40 "B takes the stream after A died" took
say "ok: B appended $(nv_elapsed "$t0") s after A was killed"
python3 - "$MB/b/s" <<'PY' || fail "B's view of the stream after the takeover"
import sys
want = ["a %d" % i for i in range(50)] + ["b 0"]
got = open(sys.argv[1]).read().splitlines()
if got != want:
    sys.exit("got %d lines, want %d: first difference at %s" % (len(got), len(want),
             next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))))
PY
say "ok: every record A acked is on B exactly once, in order, then B's"

# 4. A again; a writer on A through a SIGSTOP past the lease.
nv_start "star=sa,listen=127.0.0.1:$(port),$COMMON"
: > "$MA/b/t"
cat > "$NV_TMP/writer.py" <<'PY'
import errno, os, sys
path, last = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
n = 0
while True:
    try:
        os.write(fd, b"w %d\n" % n)
    except OSError as e:
        open(last + ".err", "w").write(errno.errorcode.get(e.errno, str(e.errno)))
        sys.exit(0)
    with open(last + ".tmp", "w") as f:
        f.write("%d\n" % n)
    os.rename(last + ".tmp", last)
    n += 1
PY
python3 "$NV_TMP/writer.py" "$MA/b/t" "$NV_TMP/last" &
W_PID=$!
nv_bg "$W_PID"
nv_await 20 "the writer on A gets going" bash -c "[ -s '$NV_TMP/last' ] && (( \$(cat '$NV_TMP/last') >= 20 ))"
kill -STOP "$NV_PID"
stopped=$(cat "$NV_TMP/last")
say "A stopped (the writer had $stopped acked)"
t0=$EPOCHREALTIME
tookt() { [ "$(append "$MB/b/t" "b 0
")" = OK ]; }
nv_await 40 "B takes the paused star's stream" tookt
say "ok: B appended to A's stream $(nv_elapsed "$t0") s after A was stopped"
kill -CONT "$NV_PID"
nv_await 30 "the writer on A stops with an error" test -s "$NV_TMP/last.err"
werr=$(cat "$NV_TMP/last.err")
acked=$(cat "$NV_TMP/last")
case $werr in
ETIMEDOUT|EREMOTE|EIO) ;;
*) fail "the writer on A failed with $werr (want ETIMEDOUT, EREMOTE or EIO)" ;;
esac
say "ok: after SIGCONT the writer on A was refused ($werr); it saw $acked acked ($stopped before the stop)"
nv_await 30 "A refuses the stream B leads" bash -c "[ \"\$(python3 - '$MA/b/t' <<'PY'
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
    os.write(fd, b'late\n')
    print('OK')
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PY
)\" = EREMOTE ]"
say "ok: A's appends to the stream B took are refused with EREMOTE"
r=$(append "$MB/b/t" "b 1
")
[ "$r" = OK ] || fail "B's second append: $r"
python3 - "$MB/b/t" "$acked" <<'PY' || fail "B's view of the stream after the pause"
import sys
got = open(sys.argv[1]).read().splitlines()
acked = int(sys.argv[2])
ws = [l for l in got if l.startswith("w ")]
rest = got[len(ws):]
want = ["w %d" % i for i in range(len(ws))]
if ws != want:
    sys.exit("the writer's records are not 0..%d in order: %r" % (len(ws) - 1, ws[:5]))
# Every acked record is there; at most the one write in doubt beyond them.
if not (acked + 1 <= len(ws) <= acked + 2):
    sys.exit("%d writer records on B, %d acked" % (len(ws), acked + 1))
if rest != ["b 0", "b 1"]:
    sys.exit("after the writer's records: %r (want B's two)" % rest)
PY
say "ok: B reads the $((acked + 1)) acked records once and in order, then its own two; nothing A wrote after its lease"
kill -CONT "$NV_PID" 2>/dev/null || true
nv_stop
fusermount3 -u "$MB"
nv_await 30 "star B exits" bash -c "! kill -0 $B_PID 2>/dev/null"
wait "$B_PID" || fail "star B exited with status $? after a clean unmount"
B_PID=
say "ok: both stars closed cleanly"
