#!/bin/bash
# t_stars_trim_remote.sh - a trim made on a star that does not lead the
# stream is done by the leader (issue 15; fs/remote.h invariant 7, the
# star API's POST .../trim): the leader learns it at once.  Two stars
# (tests/etcd/stars_lib.sh), attr_timeout=0:
#   1. A leads t/s and appends 200 records; once they are absorbed, B
#      loads the stream (stat, cat) and A reads it whole (its page cache
#      and tail hold the bytes);
#   2. on B `setfattr user.nova.trim 80`: at once on A (no wait)
#      user.nova.trim is 80, cat and dd below and across the trim point
#      read zeros below it (not the old bytes), st_size is unchanged;
#      B's user.nova.trim is 80 too and its cat is A's;
#   3. on A a trim between A's point before and the real one (40) is
#      EINVAL, as a trim below the current point is on one star (never
#      backwards); 80 again is a no-op;
#   4. on B `fallocate -p -o 0 -l N` (N inside record 120): on A at once
#      user.nova.trim is 120 (the record holding byte N is the first
#      kept), cat reads zeros below N; a shorter punch on B changes
#      nothing and succeeds; on A a trim to 100 is EINVAL;
#   5. the stream is still led by A (user.nova.leader on A and B, no
#      lease moved), and neither star logged an ERROR.
# Every check is made and the failures reported together.  Set-up and
# cleanup: tests/etcd/stars_lib.sh.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
# shellcheck source=tests/etcd/stars_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/stars_lib.sh"
nv_init
nv_stars_init
COMMON="$NV_STARS_COMMON,attr_timeout=0"
nv_star_lead a "$COMMON"
nv_star b "$COMMON"
MA=${NV_STAR_MNT[a]}
MB=${NV_STAR_MNT[b]}
S=t/s
# shellcheck source=tests/etcd/trim_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/trim_lib.sh"
leader() { x "$1" user.nova.leader | cut -d' ' -f1; }
# refused FILE SEQ WHAT: setfattr user.nova.trim SEQ on FILE is EINVAL.
refused() {
	local r
	r=$(setfattr -n user.nova.trim -v "$2" "$1" 2>&1 || true)
	[[ $r == *"Invalid argument"* ]] && say "ok: $3: EINVAL" ||
		problem "$3: '$r', want Invalid argument"
}

# 1. A leads and appends; B loads the stream; A reads it whole.
mkdir "$MA/t"
records "$MA/$S" 0 200 > "$NV_TMP/ref" || fail "A's appends"
SIZE=$(stat -c %s "$NV_TMP/ref")
nv_await 20 "A's 200 records absorbed" is "$MA/$S" user.nova.frontier 200
nv_await 10 "B sees the stream" test -e "$MB/$S"
expect "$(nv_size "$MB/$S")" "$SIZE" "B's st_size before the trim"
same "$MB/$S" "$NV_TMP/ref" "B's cat before the trim"
same "$MA/$S" "$NV_TMP/ref" "A's cat before the trim"
expect "$(leader "$MB/$S")" sa "the leader seen from B"
EPOCH=$(x "$MA/$S" user.nova.leader)

# 2. B trims by seq; A knows at once.
T=80
TB=$(rec_start "$NV_TMP/ref" $T)
setfattr -n user.nova.trim -v $T "$MB/$S" || problem "setfattr user.nova.trim $T on B failed"
zeroed "$NV_TMP/ref" "$TB" > "$NV_TMP/z80"
expect "$(x "$MA/$S" user.nova.trim)" $T "A's user.nova.trim right after B's trim"
expect "$(nv_size "$MA/$S")" "$SIZE" "A's st_size after B's trim"
same "$MA/$S" "$NV_TMP/z80" "A's cat after B's trim (zeros below byte $TB)"
same_range "$MA/$S" "$NV_TMP/z80" 100 300 "A's dd below the trim point"
same_range "$MA/$S" "$NV_TMP/z80" $((TB - 50)) 100 "A's dd across the trim point"
expect "$(x "$MB/$S" user.nova.trim)" $T "B's user.nova.trim after its trim"
expect "$(nv_size "$MB/$S")" "$SIZE" "B's st_size after its trim"
same "$MB/$S" "$NV_TMP/z80" "B's cat after its trim"

# 3. On A, below the real point (above A's old one): never backwards.
refused "$MA/$S" 40 "setfattr user.nova.trim 40 on A (below B's 80)"
setfattr -n user.nova.trim -v $T "$MA/$S" && say "ok: setfattr user.nova.trim $T again on A" ||
	problem "setfattr user.nova.trim $T (the current point) on A failed"

# 4. B punches the head; A knows at once.
T=120
N=$(($(rec_start "$NV_TMP/ref" $T) + 10))
fallocate -p -o 0 -l $N "$MB/$S" || problem "fallocate -p -o 0 -l $N on B failed"
zeroed "$NV_TMP/ref" "$N" > "$NV_TMP/z120"
expect "$(x "$MA/$S" user.nova.trim)" $T "A's user.nova.trim right after B's punch"
expect "$(nv_size "$MA/$S")" "$SIZE" "A's st_size after B's punch"
same "$MA/$S" "$NV_TMP/z120" "A's cat after B's punch (zeros below byte $N)"
same_range "$MA/$S" "$NV_TMP/z120" $((N - 50)) 100 "A's dd across the punched head"
expect "$(x "$MB/$S" user.nova.trim)" $T "B's user.nova.trim after its punch"
fallocate -p -o 0 -l 100 "$MB/$S" && say "ok: a shorter punch on B: a no-op" ||
	problem "fallocate -p -o 0 -l 100 (inside the hole) on B failed"
expect "$(x "$MA/$S" user.nova.trim)" $T "A's user.nova.trim after the shorter punch"
refused "$MA/$S" 100 "setfattr user.nova.trim 100 on A (below B's punch)"
same "$MB/$S" "$NV_TMP/z120" "B's cat after its punch"

# 5. Nobody took the stream.
expect "$(x "$MA/$S" user.nova.leader)" "$EPOCH" "A's user.nova.leader (no lease moved)"
expect "$(leader "$MB/$S")" sa "the leader seen from B after the trims"
for s in a b; do
	if grep -q ' ERROR ' "${NV_STAR_LOG[$s]}"; then
		problem "star $s logged errors: $(grep ' ERROR ' "${NV_STAR_LOG[$s]}" | head -3 | tr '\n' ' ')"
	fi
done
if ((${#PROBLEMS[@]})); then
	for p in "${PROBLEMS[@]}"; do printf '%s: problem: %s\n' "$NV_TEST" "$p" >&2; done
	fail "${#PROBLEMS[@]} problem(s), listed above"
fi
say "PASS"
