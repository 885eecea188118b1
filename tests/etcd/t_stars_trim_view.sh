#!/bin/bash
# t_stars_trim_view.sh - a trim and a settlement seen from a star that
# does not lead the stream: its trim point and settled end are the
# metastore's, not what it loaded (engine/starview.c star_view_refresh(),
# the read path's look at the trim on a missing ref, engine/read.c).
# Three stars (tests/etcd/stars_lib.sh), attr_timeout=0, settlement
# knobs small (age cap 2 s, read grace 1 s, audit every 200 ms):
#   1. A leads t/s and appends 200 records; once they are absorbed, B
#      loads the stream (stat, cat) and opens two readers, one of which
#      reads the first 4 KiB;
#   2. A trims to record 80 (setfattr user.nova.trim); the refs wholly
#      below it are reclaimed (awaited in A's layout).  On B, while A
#      leads: the other reader's first 4 KiB are zeros, read before
#      anything else on B looked at the stream; user.nova.trim is 80, st_size unchanged, cat reads what A
#      reads (zeros below the trim point, A's bytes above), dd below, across
#      and above the trim point too; setfattr user.nova.trim 40 is EINVAL
#      (never backwards) as on A;
#   3. the stream settles, its span refs go (awaited in A's layout) and
#      its slots are deleted (awaited in the store):
#      B's user.nova.settled is A's, and B's reader opened in 1 (its ref
#      window names span refs that are gone) reads the rest (zeros up to
#      the trim point, then A's bytes) and the whole stream again;
#   3b. A trims to record 150, inside what settled: B's reader opened
#      before reads zeros below it on its first read after it;
#   4. A appends 20 more records, trims to 210 and unmounts cleanly: the
#      stream is vacant.  On B: st_size, user.nova.seq, user.nova.trim,
#      getfattr -d, cat and the follow view are the committed state
#      (zeros below record 210), and B's settled end reaches its seq;
#   5. C (a new star) trims the vacant stream to 215 without taking it;
#      B, whose kernel cached the pages of its cat in 4 (read-only
#      handles keep the page cache on a stream no other star leads),
#      then reads zeros below 215 too, and the stream stays vacant.
# Every check is made and the failures reported together; no ERROR line
# in B's log.  Set-up and cleanup: tests/etcd/stars_lib.sh.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
# shellcheck source=tests/etcd/stars_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/stars_lib.sh"
nv_init
command -v jq >/dev/null || nv_skip "jq is not installed"
nv_stars_init
COMMON="$NV_STARS_COMMON,attr_timeout=0,age_cap_standard_s=2,age_cap_express_s=2"
COMMON="$COMMON,settle_linger_s=1,read_grace_s=1,audit_interval_ms=200"
nv_star_lead a "$COMMON"
nv_star b "$COMMON"
MA=${NV_STAR_MNT[a]}
MB=${NV_STAR_MNT[b]}
S=t/s
# shellcheck source=tests/etcd/trim_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/trim_lib.sh"
# below_gone FILE SEQ: A's layout holds no ref or object wholly below SEQ.
below_gone() { nv_layout "$1" | jq -e --argjson t "$2" \
	'([.spans[].end_seq, .settled_objects[].end_seq] | min) > $t' > /dev/null; }
settled_all() { nv_layout "$1" | jq -e '.span_refs == 0 and .settled == .seq' > /dev/null; }
leader() { x "$1" user.nova.leader; }
# slots_gone STAR: at most one slot of STAR's chains is left in the shared
# store (a fence at the cut may stay: tests/etcd/t_stars_kill.sh).
slots_gone() { (($(python3 "$NV_SLOTS_PY" "$NV_SHARED" | grep -c "/chains/[a-z]*/$1/" || true) <= 1)); }
# await_or_problem SECONDS WHAT CMD...: as nv_await, a problem when it times out.
await_or_problem() {
	local secs=$1 what=$2 t0=$EPOCHREALTIME
	shift 2
	until "$@"; do
		if awk -v a="$t0" -v b="$EPOCHREALTIME" -v s="$secs" 'BEGIN { exit !(b - a > s) }'; then
			problem "timed out after ${secs}s waiting for $what"
			return 0
		fi
		sleep 0.1
	done
	say "ok: $what"
}

# 1. A leads and appends; B loads the stream and opens a reader.
mkdir "$MA/t"
records "$MA/$S" 0 200 > "$NV_TMP/ref" || fail "A's appends"
SIZE=$(stat -c %s "$NV_TMP/ref")
nv_await 20 "A's 200 records absorbed" is "$MA/$S" user.nova.frontier 200
nv_await 10 "B sees the stream" test -e "$MB/$S"
expect "$(nv_size "$MB/$S")" "$SIZE" "B's st_size before the trim"
same "$MB/$S" "$NV_TMP/ref" "B's cat before the trim"
expect "$(leader "$MB/$S" | cut -d' ' -f1)" sa "the leader seen from B"
# B's readers: one reads 4 KiB now and the rest after settlement (3);
# one opened now reads its first 4 KiB after the trim (2).
mkfifo "$NV_TMP/go1" "$NV_TMP/go2"
python3 - "$MB/$S" "$NV_TMP/held" "$NV_TMP/go1" "$NV_TMP/go2" <<'PY' &
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fd0 = os.open(sys.argv[1], os.O_RDONLY)
head = os.read(fd, 4096)
open(sys.argv[2] + ".head", "wb").write(head)
open(sys.argv[3]).read()                # until the test says go
# Dropped from B's page cache (keep_cache): this read asks the daemon.
os.posix_fadvise(fd0, 0, 0, os.POSIX_FADV_DONTNEED)
mid = os.read(fd0, 4096)                # the file appears whole (the test awaits it)
open(sys.argv[2] + ".mid.tmp", "wb").write(mid)
os.rename(sys.argv[2] + ".mid.tmp", sys.argv[2] + ".mid")
open(sys.argv[4]).read()
rest = b""
while True:
    b = os.read(fd, 4096)
    if not b:
        break
    rest += b
os.lseek(fd, 0, os.SEEK_SET)
again = b""
while True:
    b = os.read(fd, 65536)
    if not b:
        break
    again += b
open(sys.argv[2], "wb").write(head + rest)
open(sys.argv[2] + ".again", "wb").write(again)
PY
HELD=$!
nv_bg "$HELD"
nv_await 10 "B's reader has read its first 4 KiB" test -s "$NV_TMP/held.head"

# 2. A trims; B looks while A leads.
T=80
TB=$(rec_start "$NV_TMP/ref" $T)
setfattr -n user.nova.trim -v $T "$MA/$S" || fail "setfattr user.nova.trim $T on A"
zeroed "$NV_TMP/ref" "$TB" > "$NV_TMP/z80"
nv_await 20 "the refs below record $T reclaimed" below_gone "$MA/$S" $T
# First on B since the trim: a read on a descriptor opened before it,
# with no stat on B to raise its view (the read finds the trim point in
# the row: engine/read.c), its pages dropped from B's kernel cache first.
echo go > "$NV_TMP/go1"
nv_await 10 "B's second reader's first 4 KiB" test -e "$NV_TMP/held.mid"
# Zeros, also when settlement ran before the trim and the settled object
# holding the trim point starts below it (read.h invariant 6: B reads the
# row's trim point with every ref window of a stream it does not lead).
if cmp -s "$NV_TMP/held.mid" <(head -c 4096 /dev/zero); then
	say "ok: B's reader opened before the trim, first on B after it: zeros below it"
elif cmp -s "$NV_TMP/held.mid" <(head -c 4096 "$NV_TMP/ref"); then
	problem "B's reader opened before the trim, first on B after it: the bytes that were there, not zeros (read.h invariant 6)"
else
	problem "B's reader opened before the trim, first on B after it: neither zeros nor the old bytes: $(cmp "$NV_TMP/held.mid" <(head -c 4096 /dev/zero) 2>&1)"
fi
same "$MA/$S" "$NV_TMP/z80" "A's cat after the trim (the leader: zeros below byte $TB)"
expect "$(x "$MB/$S" user.nova.trim)" $T "B's user.nova.trim, A leading"
expect "$(nv_size "$MB/$S")" "$SIZE" "B's st_size after the trim, A leading"
same "$MB/$S" "$NV_TMP/z80" "B's cat after the trim, A leading"
same_range "$MB/$S" "$NV_TMP/z80" 100 300 "B's dd below the trim point, A leading"
same_range "$MB/$S" "$NV_TMP/z80" $((TB - 50)) 100 "B's dd across the trim point, A leading"
same_range "$MB/$S" "$NV_TMP/z80" $((TB + 1000)) 3000 "B's dd above the trim point, A leading"
r=$(setfattr -n user.nova.trim -v 40 "$MB/$S" 2>&1 || true)
[[ $r == *"Invalid argument"* ]] && say "ok: setfattr user.nova.trim 40 on B: EINVAL" ||
	problem "setfattr user.nova.trim 40 (below A's 80) on B: '$r', want Invalid argument"

# 3. Settlement; B's settled end and its held reader.
nv_await 30 "the stream settles (no span ref left)" settled_all "$MA/$S"
nv_await 20 "A's slots deleted" slots_gone sa
expect "$(x "$MB/$S" user.nova.settled)" "$(x "$MA/$S" user.nova.settled)" \
	"B's user.nova.settled (A's), A leading"
echo go > "$NV_TMP/go2"
wait "$HELD" || problem "B's held reader failed after settlement (status $?)"
# Its first 4 KiB before the trim, the rest after it.
{ head -c 4096 "$NV_TMP/ref"; tail -c +4097 "$NV_TMP/z80"; } > "$NV_TMP/held.want"
cmp -s "$NV_TMP/held" "$NV_TMP/held.want" && say "ok: B's held reader read on as A acked" ||
	problem "B's held reader, after settlement: $(cmp "$NV_TMP/held" "$NV_TMP/held.want" 2>&1)"
cmp -s "$NV_TMP/held.again" "$NV_TMP/z80" && say "ok: B's held reader read it again" ||
	problem "B's held reader read again: $(cmp "$NV_TMP/held.again" "$NV_TMP/z80" 2>&1)"
same "$MB/$S" "$NV_TMP/z80" "B's cat after settlement, A leading"

# 3b. A trims inside what settled (record 150: the settled object holding
#     it starts below it, and stays): B's reader opened before the trim
#     reads zeros below it on its first read after it, with no stat on B
#     in between (read.h invariant 6: B reads the row's trim point with
#     each ref window of a stream it does not lead).
T=150
TB=$(rec_start "$NV_TMP/ref" $T)
OFF=$(rec_start "$NV_TMP/ref" 140)
mkfifo "$NV_TMP/go3"
python3 - "$MB/$S" "$NV_TMP/in150" "$NV_TMP/go3" "$OFF" $((TB - OFF)) <<'PY' &
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
open(sys.argv[2] + ".opened", "w").close()
open(sys.argv[3]).read()                # until the test says go
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
got, want = b"", int(sys.argv[5])
while len(got) < want:
    b = os.pread(fd, want - len(got), int(sys.argv[4]) + len(got))
    if not b:
        break
    got += b
open(sys.argv[2], "wb").write(got)
PY
IN150=$!
nv_bg "$IN150"
nv_await 10 "B's third reader open" test -e "$NV_TMP/in150.opened"
setfattr -n user.nova.trim -v $T "$MA/$S" || fail "setfattr user.nova.trim $T on A"
echo go > "$NV_TMP/go3"
wait "$IN150" || problem "B's third reader failed (status $?)"
if cmp -s "$NV_TMP/in150" <(head -c $((TB - OFF)) /dev/zero); then
	say "ok: B's reader opened before A's trim to $T, inside what settled: zeros below it"
else
	problem "B's reader opened before A's trim to $T (bytes $OFF-$TB): $(cmp "$NV_TMP/in150" <(head -c $((TB - OFF)) /dev/zero) 2>&1)"
fi
expect "$(x "$MB/$S" user.nova.trim)" $T "B's user.nova.trim after A's trim to $T"

# 4. A appends, trims again and leaves: the stream is vacant.
records "$MA/$S" 200 20 >> "$NV_TMP/ref" || fail "A's 20 more appends"
SIZE=$(stat -c %s "$NV_TMP/ref")
T=210
TB=$(rec_start "$NV_TMP/ref" $T)
setfattr -n user.nova.trim -v $T "$MA/$S" || fail "setfattr user.nova.trim $T on A"
zeroed "$NV_TMP/ref" "$TB" > "$NV_TMP/z210"
nv_stop 20 # A: a clean close releases its lease
nv_await 10 "the stream vacant on B" is "$MB/$S" user.nova.leader -
expect "$(nv_size "$MB/$S")" "$SIZE" "B's st_size, vacant"
expect "$(x "$MB/$S" user.nova.seq)" 220 "B's user.nova.seq, vacant"
expect "$(x "$MB/$S" user.nova.trim)" $T "B's user.nova.trim, vacant"
getfattr -d -m user.nova "$MB/$S" > "$NV_TMP/attrs" 2>&1 || problem "getfattr -d on B: $(cat "$NV_TMP/attrs")"
grep -qx 'user.nova.seq="220"' "$NV_TMP/attrs" && say "ok: getfattr -d on B: seq 220" ||
	problem "getfattr -d on B: $(tr '\n' ' ' < "$NV_TMP/attrs")"
same "$MB/$S" "$NV_TMP/z210" "B's cat, vacant (zeros below byte $TB)"
same_range "$MB/$S" "$NV_TMP/z210" $((TB - 50)) 100 "B's dd across the trim point, vacant"
if timeout 20 head -c "$SIZE" "$MB/.follow/$S" > "$NV_TMP/followed" 2> "$NV_TMP/followed.err" &&
	cmp -s "$NV_TMP/followed" "$NV_TMP/z210"; then
	say "ok: B's follow view, vacant"
else
	problem "B's follow view, vacant: $(cat "$NV_TMP/followed.err") $(cmp "$NV_TMP/followed" "$NV_TMP/z210" 2>&1)"
fi
settled_b() { is "$MB/$S" user.nova.settled 220; }
await_or_problem 30 "B's user.nova.settled to reach 220, vacant" settled_b

# 5. C trims the vacant stream; B's cached pages read as zeros below it.
nv_star c "$COMMON"
MC=${NV_STAR_MNT[c]}
nv_await 10 "C sees the stream" test -e "$MC/$S"
T=215
TB=$(rec_start "$NV_TMP/ref" $T)
setfattr -n user.nova.trim -v $T "$MC/$S" || fail "setfattr user.nova.trim $T on C"
zeroed "$NV_TMP/ref" "$TB" > "$NV_TMP/z215"
expect "$(leader "$MB/$S")" - "the leader after C's trim (nobody took it)"
expect "$(nv_size "$MB/$S")" "$SIZE" "B's st_size after C's trim"
same "$MB/$S" "$NV_TMP/z215" "B's cat after C's trim of the vacant stream"
expect "$(x "$MB/$S" user.nova.trim)" $T "B's user.nova.trim after C's trim"

if grep -q ' ERROR ' "${NV_STAR_LOG[b]}"; then
	problem "B logged errors: $(grep ' ERROR ' "${NV_STAR_LOG[b]}" | head -3 | tr '\n' ' ')"
fi
if ((${#PROBLEMS[@]})); then
	for p in "${PROBLEMS[@]}"; do printf '%s: problem: %s\n' "$NV_TEST" "$p" >&2; done
	fail "${#PROBLEMS[@]} problem(s), listed above"
fi
say "PASS"
