#!/bin/bash
# t_stars_vacant.sh - a vacant stream on a mount that led it before: its
# st_size, its bytes and its follow view are the committed state, not
# the view the mount kept from when it led (star_view_refresh()).  Two
# stars (tests/etcd/stars_lib.sh), attr_timeout=0, lease_idle_s=0:
#   1. B creates the stream and leads it (one record); leadership moves
#      to A by xattr; A appends 40 more records; A unmounts gracefully,
#      which releases its lease: the stream is vacant (getfattr "-");
#   2. on B, with nobody leading: st_size and `cat` are the 41 records A
#      committed (B's own view stopped at one record when it handed the
#      stream off), and B's follow view, opened at 0, reads all of them
#      without anybody appending;
#   3. B appends once more (it takes the vacant stream): the record
#      lands after the 41, once, and the follow view reads it.
# Set-up and cleanup: tests/etcd/stars_lib.sh.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
# shellcheck source=tests/etcd/stars_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/stars_lib.sh"
nv_init
nv_stars_init
COMMON="$NV_STARS_COMMON,attr_timeout=0,lease_idle_s=0"
nv_star b "$COMMON"
nv_star a "$COMMON"
A_PID=${NV_STAR_PIDS[a]}
MA=${NV_STAR_MNT[a]}
MB=${NV_STAR_MNT[b]}
leader() { getfattr --absolute-names --only-values -n user.nova.leader "$1" 2>/dev/null; }
leads() { [[ $(leader "$1") == "$2"* ]]; }

# 1. B leads, then A does and appends, then A leaves.
mkdir "$MB/b"
printf 'rec 0 from b\n' >> "$MB/b/s"
leads "$MB/b/s" "sb " || fail "B should lead b/s after its append: $(leader "$MB/b/s")"
nv_await 10 "A sees the stream" test -e "$MA/b/s"
setfattr -n user.nova.leader -v sa "$MB/b/s" || fail "setfattr leader=sa on B"
nv_await 10 "A leads b/s" leads "$MA/b/s" "sa "
for i in $(seq 1 40); do printf 'rec %d from a\n' "$i" >> "$MA/b/s"; done
cp "$MA/b/s" "$NV_TMP/want"
want=$(stat -c %s "$NV_TMP/want")
fusermount3 -u "$MA" || fail "graceful unmount of A"
nv_wait_pid_exit "$A_PID" 20 || fail "star A did not exit after its unmount"
wait "$A_PID" 2>/dev/null || fail "star A exited with status $? after a clean unmount"
nv_await 10 "b/s vacant on B" bash -c "[[ \$(getfattr --absolute-names --only-values -n user.nova.leader '$MB/b/s') == '-'* ]]"

# 2. B's view of the vacant stream: A's committed records.
got=$(stat -c %s "$MB/b/s")
[ "$got" = "$want" ] || fail "B's st_size of the vacant stream is $got; A committed $want bytes"
cmp "$MB/b/s" "$NV_TMP/want" || fail "B reads other bytes than A committed"
timeout 20 head -c "$want" "$MB/.follow/b/s" > "$NV_TMP/followed" ||
	fail "B's follow view did not read the $want committed bytes of the vacant stream"
cmp "$NV_TMP/followed" "$NV_TMP/want" || fail "B's follow view reads other bytes"
say "ok: the vacant stream reads as committed on B ($want bytes): st_size, cat, follow view"

# 3. B takes the vacant stream with its append.
last='rec 41 from b'
more=$((${#last} + 1))
timeout 20 head -c $((want + more)) "$MB/.follow/b/s" > "$NV_TMP/followed2" &
F=$!
nv_own "$F"
printf '%s\n' "$last" >> "$MB/b/s" || fail "B's append to the vacant stream"
leads "$MB/b/s" "sb " || fail "B should lead b/s after its append: $(leader "$MB/b/s")"
printf '%s\n' "$last" >> "$NV_TMP/want"
cmp "$MB/b/s" "$NV_TMP/want" || fail "B's stream after its append is not A's records and B's"
wait "$F" || fail "B's follow view did not read B's new record"
cmp "$NV_TMP/want" "$NV_TMP/followed2" ||
	fail "B's follow view read other bytes after the take"
say "ok: B took the vacant stream; its record follows A's once"
say "PASS"
