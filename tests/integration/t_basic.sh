#!/bin/bash
# t_basic: one bucket, one stream, 1000 `echo >>` records.  Checks the bytes
# read back, st_size against `wc -c`, user.nova.seq (one write = one record)
# and the root stats counters; and the mount's kernel readahead.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
nv_start

say "the mount's kernel readahead is raised to kernel_readahead_kib (8192)"
ra=/sys/class/bdi/$(mountpoint -d "$MNT")/read_ahead_kb
nv_expect_eq "$(cat "$ra")" 8192 "$ra"

say "mkdir a bucket"
mkdir "$MNT/logs" || fail "mkdir bucket"
[ -d "$MNT/logs" ] || fail "bucket is not a directory"

S=$MNT/logs/app
EXP=$NV_TMP/expected
: > "$EXP"
say "1000 appends with echo >>"
t0=$EPOCHREALTIME
for i in $(seq 1 1000); do
	echo "line $i" >> "$S" || fail "append $i failed"
	echo "line $i" >> "$EXP"
done
say "1000 appends took $(nv_elapsed "$t0") s"

say "cat equals the expected bytes"
cat "$S" > "$NV_TMP/got" || fail "cat $S failed"
nv_same_file "$NV_TMP/got" "$EXP" "content of the stream"

nv_expect_eq "$(wc -c < "$S")" "$(stat -c %s "$EXP")" "wc -c of the stream"
nv_expect_eq "$(nv_size "$S")" "$(wc -c < "$S")" "st_size equals wc -c"
[ -f "$S" ] || fail "$S is not a regular file"

nv_expect_eq "$(nv_xattr "$S" user.nova.seq)" 1000 "user.nova.seq"
getfattr --absolute-names -d -m user.nova "$S" > "$NV_TMP/xattrs" ||
	fail "getfattr -d -m user.nova failed"
for x in seq frontier class epoch; do
	grep -q "^user\.nova\.$x=" "$NV_TMP/xattrs" ||
		fail "getfattr -d -m user.nova does not list user.nova.$x: $(cat "$NV_TMP/xattrs")"
done
say "ok: getfattr -d lists seq, frontier, class, epoch"

appends=$(nv_stat appends)
[[ $appends =~ ^[0-9]+$ ]] && ((appends >= 1000)) ||
	fail "stats appends = '$appends', expected >= 1000"
say "ok: stats appends = $appends (>= 1000)"

say "appends after a clean remount"
nv_remount
cat "$S" > "$NV_TMP/got" || fail "cat after remount failed"
nv_same_file "$NV_TMP/got" "$EXP" "content after remount"
echo "line 1001" >> "$S" || fail "append after remount failed"
echo "line 1001" >> "$EXP"
nv_expect_eq "$(nv_xattr "$S" user.nova.seq)" 1001 "user.nova.seq after remount + 1 append"
cat "$S" > "$NV_TMP/got"
nv_same_file "$NV_TMP/got" "$EXP" "content after the append"
nv_stop
