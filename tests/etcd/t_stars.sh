#!/bin/bash
# t_stars.sh - two stars (mounts) on one etcd member and one shared store
# (a directory store on this host, store=dir:), each with its own data
# directory, star id, listen= port and the cluster secret (a 0600
# cluster_secret_file), star_lease_s=2, put_timeout_s=2:
#   1. A leads a stream; B's append to it is refused by B's engine
#      (NOT_OWNER), sent by B's cluster client to A and acked there: A
#      reads it exactly once after its own records, and so does B (its
#      st_size and the bytes past its own view come from A);
#      a third mount without cluster_secret_file (and no listen=) gets
#      EHOSTUNREACH for its append, rm and trim, with a log line saying
#      why, and the stream is unchanged;
#   2. a second star on B's data directory is refused, and so is one with
#      B's id on another data directory;
#   3. kill -9 of A: while A's lease lingers B's appends fail with
#      EHOSTUNREACH (A cannot be reached: nothing appended); after A's
#      lease TTL B takes the stream (its take waits for A's epoch to be
#      settled) and appends; every record A acked is on B exactly once,
#      in order;
#   4. A starts again (same data directory, same id) and leads a second
#      stream with a writer appending (every record's outcome logged);
#      SIGSTOP of A past its lease; B takes that stream and appends (its
#      wait on the paused A is bounded by put_timeout_s + star_lease_s);
#      SIGCONT: A acks nothing after its deadline (ETIMEDOUT while it
#      registers again), then its mount sends the writer's appends to B;
#      B reads every acked record exactly once and in order, nothing
#      nobody wrote, B's own, and A reads the same bytes, in the follow
#      view too.
# Set-up and cleanup: tests/etcd/stars_lib.sh.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
# shellcheck source=tests/etcd/stars_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/stars_lib.sh"
nv_init
nv_stars_init
SEC=$NV_SECRET
COMMON="$NV_STARS_BASE,attr_timeout=0"
MB=$NV_TMP/mnt-b
DB=$NV_TMP/data-b
start_b() {
	nv_star b "cluster_secret_file=$SEC,$COMMON"
	B_PID=$NV_STAR_PID
}

# append FILE TEXT: one write(); prints OK or the errno name.
append() { nv_stars_append "$@"; }

nv_start_star "star=sa,cluster_secret_file=$SEC,$COMMON"
start_b
MA=$MNT
say "stars A (pid $NV_PID) and B (pid $B_PID) on etcd $NOVAFS_ETCD_ENDPOINTS"

# 1. A leads the stream; B's append is sent to A by B's cluster client
#    (NOT_OWNER -> redial) and acked there.
mkdir "$MA/b"
for i in $(seq 0 49); do
	r=$(append "$MA/b/s" "a $i
")
	[ "$r" = OK ] || fail "append $i on A: $r"
done
nv_await 10 "B sees the stream" test -e "$MB/b/s"
r=$(append "$MB/b/s" "b 0
")
[ "$r" = OK ] || fail "append on B while A leads: $r (want OK: redialed to A)"
want_s() { python3 -c 'import sys; sys.stdout.write("".join("a %d\n" % i for i in range(50)) + "".join(l + "\n" for l in sys.argv[1:]))' "$@"; }
want_s "b 0" > "$NV_TMP/want.s"
cmp "$MA/b/s" "$NV_TMP/want.s" || fail "A's view after B's redialed append: $(tail -c 200 "$MA/b/s" | od -c | tail -3)"
nv_await 20 "B reads A's stream with its own append" cmp -s "$MB/b/s" "$NV_TMP/want.s"
say "ok: B's append to the stream A leads was acked at A: A reads it once, after A's 50, and so does B"

# 1b. A mount without a cluster secret (and no listen=) cannot reach the
#     holder: EHOSTUNREACH and a log line.
MC=$NV_TMP/mnt-c0
DC=$NV_TMP/data-c0
LOGC=$NV_TMP/novafs-c0.log
mkdir -p "$MC" "$DC"
"$NOVAFS" -f -o "data_dir=$DC,star=sc,$COMMON" "$MC" > "$LOGC" 2>&1 &
C_PID=$!
nv_star_own "$C_PID" "$MC"
nv_await 30 "star C (no secret) mounts $MC" mountpoint -q "$MC"
r=$(append "$MC/b/s" "c refused
")
[ "$r" = EHOSTUNREACH ] || fail "append on C (no cluster secret) while A leads: $r (want EHOSTUNREACH)"
grep -q "star sa leads it, and this mount has no cluster_secret_file" "$LOGC" ||
	fail "no log line for the unreachable holder: $(tail -3 "$LOGC")"
cmp "$MA/b/s" "$NV_TMP/want.s" || fail "C's refused append changed the stream"
# Neither is an rm or a trim there: deleting or trimming it here would
# let A go on acking appends to a stream whose rm returned.
change() { # OP PATH: ok, or the errno's name
	python3 -c 'import errno, os, sys
try:
    os.unlink(sys.argv[2]) if sys.argv[1] == "rm" else os.setxattr(sys.argv[2], "user.nova.trim", b"10")
    print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])' "$1" "$2"
}
for op in rm trim; do
	r=$(change "$op" "$MC/b/s")
	[ "$r" = EHOSTUNREACH ] || fail "$op on C (no cluster secret) while A leads: $r (want EHOSTUNREACH)"
done
grep -q "unlink of b/s: its leader sa .* cannot be asked" "$LOGC" ||
	fail "no log line for the refused rm: $(tail -3 "$LOGC")"
cmp "$MA/b/s" "$NV_TMP/want.s" || fail "C's refused rm or trim changed the stream"
[ "$(getfattr --only-values -n user.nova.trim "$MA/b/s" 2>/dev/null || echo gone)" = 0 ] ||
	fail "C's refused trim moved A's trim point"
fusermount3 -u "$MC"
nv_await 30 "star C exits" bash -c "! kill -0 $C_PID 2>/dev/null"
wait "$C_PID" || fail "star C exited with status $? after a clean unmount"
say "ok: a mount without cluster_secret_file gets EHOSTUNREACH for an append, an rm and a trim, and says why"

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

# 3. kill -9 of A: B's appends fail while A's lease lingers (A cannot
#    be reached: EHOSTUNREACH, nothing appended), then B takes the stream.
nv_crash
t0=$EPOCHREALTIME
: > "$NV_TMP/took.errs"
# try_append FILE TEXT: OK, or the errno is added to took.errs.
try_append() {
	local r
	r=$(append "$1" "$2")
	[ "$r" = OK ] && return 0
	echo "$r" >> "$NV_TMP/took.errs"
	return 1
}
errs() { sort "$NV_TMP/took.errs" | uniq -c | tr -s ' \n' ' '; }
nv_await 40 "B takes the stream after A died" try_append "$MB/b/s" "b 1
"
if grep -qv '^EHOSTUNREACH$' "$NV_TMP/took.errs"; then
	fail "B's appends while A's lease lingered failed with: $(errs) (want EHOSTUNREACH)"
fi
say "ok: B appended $(nv_elapsed "$t0") s after A was killed (refused before: $(errs))"
want_s "b 0" "b 1" > "$NV_TMP/want.s"
cmp "$MB/b/s" "$NV_TMP/want.s" ||
	fail "B's view of the stream after the takeover: $(diff "$MB/b/s" "$NV_TMP/want.s" | head -5)"
say "ok: every record A acked is on B exactly once, in order, then B's"

# 4. A again; a writer on A through a SIGSTOP past the lease.  The
#    writer logs every record's outcome and goes on after an error.
nv_start_star "star=sa,cluster_secret_file=$SEC,$COMMON"
: > "$MA/b/t"
cat > "$NV_TMP/writer.py" <<'PY'
import errno, os, sys
path, log = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
out = open(log, "a", buffering=1)
n = 0
while not os.path.exists(log + ".stop"):
    try:
        os.write(fd, b"w %d\n" % n)
        out.write("ack %d\n" % n)
    except OSError as e:
        out.write("err %d %s\n" % (n, errno.errorcode.get(e.errno, str(e.errno))))
    n += 1
PY
wlog=$NV_TMP/writer.log
: > "$wlog"
acks() { local n; n=$(grep -c '^ack' "$wlog" 2>/dev/null) || true; echo "${n:-0}"; }
acks_at_least() { (($(acks) >= $1)); }
python3 "$NV_TMP/writer.py" "$MA/b/t" "$wlog" &
W_PID=$!
nv_bg "$W_PID"
nv_await 20 "the writer on A gets going" acks_at_least 20
kill -STOP "$NV_PID"
stopped=$(acks)
say "A stopped (the writer had $stopped acked)"
t0=$EPOCHREALTIME
: > "$NV_TMP/took.errs"
nv_await 60 "B takes the paused star's stream" try_append "$MB/b/t" "b 0
"
say "ok: B appended to A's stream $(nv_elapsed "$t0") s after A was stopped (refused before: $(errs))"
kill -CONT "$NV_PID"
# After SIGCONT the writer on A goes on: A lost the lease, so its mount
# sends the appends to B, the holder now.
resumed=$(acks)
nv_await 30 "the writer on A is acked again (through B)" acks_at_least $((resumed + 20))
touch "$wlog.stop"
nv_await 30 "the writer ends" bash -c "! kill -0 $W_PID 2>/dev/null"
r=$(append "$MA/b/t" "a late
")
[ "$r" = OK ] || fail "A's append to the stream B took: $r (want OK: sent to B)"
r=$(append "$MB/b/t" "b 1
")
[ "$r" = OK ] || fail "B's second append: $r"
werrs=$(grep '^err' "$wlog" | awk '{ print $3 }' | sort | uniq -c | tr -s ' \n' ' ')
# Past its deadline A acks nothing: ETIMEDOUT while it registers again,
# EIO for the append in flight when its class restarted.
for e in $(grep '^err' "$wlog" | awk '{ print $3 }' | sort -u); do
	case $e in
	ETIMEDOUT|EIO) ;;
	*) fail "the writer on A failed with $e (want ETIMEDOUT or EIO)" ;;
	esac
done
say "the writer on A: $(acks) acked, failed: ${werrs:-none}"
python3 - "$MB/b/t" "$wlog" <<'PY' || fail "B's view of the stream after the pause"
import sys
got = open(sys.argv[1]).read().splitlines()
acked, failed = set(), set()
for l in open(sys.argv[2]):
    f = l.split()
    (acked if f[0] == "ack" else failed).add(int(f[1]))
ws = [int(l[2:]) for l in got if l.startswith("w ")]
if len(ws) != len(set(ws)):
    sys.exit("a writer record twice")
if ws != sorted(ws):
    sys.exit("the writer's records out of order")
missing = acked - set(ws)
if missing:
    sys.exit("acked records missing: %r" % sorted(missing)[:10])
extra = set(ws) - acked - failed
if extra:
    sys.exit("records nobody wrote: %r" % sorted(extra)[:10])
others = [l for l in got if not l.startswith("w ")]
if others != ["b 0", "a late", "b 1"]:
    sys.exit("the other records: %r (want b 0, a late, b 1)" % others)
print("%d writer records, %d acked, %d failed (%d of them present)" %
      (len(ws), len(acked), len(failed), len(failed & set(ws))))
PY
nv_await 20 "A reads the stream as B does" cmp -s "$MA/b/t" "$MB/b/t"
say "ok: every acked record once and in order, on B and A alike; A's appends after the pause went to B"
# A's follow view of the stream it led (its own view: what A acked)
# reads what B's stream holds there.
n=$(stat -c %s "$MA/.follow/b/t")
((n > 0)) || fail "A's follow view of b/t is empty"
timeout 20 head -c "$n" "$MA/.follow/b/t" > "$NV_TMP/follow.a" ||
	fail "reading $n bytes of A's follow view of b/t failed"
cmp "$NV_TMP/follow.a" <(head -c "$n" "$MB/b/t") || fail "A's follow view differs from B's stream"
say "ok: A's follow view of the stream B took reads the same $n bytes as B"
kill -CONT "$NV_PID" 2>/dev/null || true
nv_stop
fusermount3 -u "$MB"
nv_await 30 "star B exits" bash -c "! kill -0 $B_PID 2>/dev/null"
wait "$B_PID" || fail "star B exited with status $? after a clean unmount"
say "ok: both stars closed cleanly"
