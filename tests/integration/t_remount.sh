#!/bin/bash
# t_remount: clean close and remount keep everything.  Streams of various
# sizes (a few bytes; ~1 MiB of small records; 20 MiB as 1 MiB records; an
# express stream; an empty stream) are checked by sha256, st_size and
# user.nova.seq across three incarnations, with appends between remounts:
# new bytes land at the old size and seq continues where it stopped.
# st_mtime (the time of the last acknowledged append; the creation time
# of a stream never appended to) is the same after every remount, and
# after settlement rewrote a stream's refs and the stream was reloaded
# within one mount (issue 12 item 4: a reload used to show the creation
# time).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
nv_start

B=$MNT/r
mkdir "$B"
REF=$NV_TMP/ref
mkdir "$REF"
declare -A SEQ
STREAMS=(tiny small big fast empty)

# small_records FILE FIRST COUNT: COUNT records of 200..1799 bytes, one
# write each, appended to FILE (the stream) and printed to stdout.
cat > "$NV_TMP/small.py" <<'PY'
import os, sys
path, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
out = []
for i in range(first, first + count):
    body = ("rec %06d " % i) + chr(ord("a") + i % 26) * ((i * 7919) % 1600 + 188)
    rec = (body + "\n").encode()
    if os.write(fd, rec) != len(rec):
        sys.exit("short write at record %d" % i)
    out.append(rec)
os.close(fd)
sys.stdout.buffer.write(b"".join(out))
PY

# append_all ROUND: append to every stream (except "empty") and to its copy.
append_all() {
	local r=$1 before
	before=$(nv_size "$B/tiny")
	printf 'tiny %d\n' "$r" >> "$B/tiny"
	printf 'tiny %d\n' "$r" >> "$REF/tiny"
	SEQ[tiny]=$((${SEQ[tiny]:-0} + 1))
	dd if="$B/tiny" bs=1 iflag=skip_bytes skip="$before" status=none |
		cmp - <(printf 'tiny %d\n' "$r") || fail "round $r: tiny append not at offset $before"

	before=$(nv_size "$B/small")
	python3 "$NV_TMP/small.py" "$B/small" $((r * 1000)) 1000 > "$NV_TMP/piece" ||
		fail "round $r: small appends failed"
	cat "$NV_TMP/piece" >> "$REF/small"
	SEQ[small]=$((${SEQ[small]:-0} + 1000))
	dd if="$B/small" bs=64k iflag=skip_bytes skip="$before" status=none |
		cmp - "$NV_TMP/piece" || fail "round $r: small appends not at offset $before"

	before=$(nv_size "$B/big")
	head -c $((r == 0 ? 20 * 1048576 : 3 * 1048576 + 12345)) /dev/urandom > "$NV_TMP/piece"
	dd if="$NV_TMP/piece" of="$B/big" bs=1M oflag=append conv=notrunc status=none ||
		fail "round $r: dd append to big failed"
	cat "$NV_TMP/piece" >> "$REF/big"
	SEQ[big]=$((${SEQ[big]:-0} + (r == 0 ? 20 : 4)))
	dd if="$B/big" bs=1M iflag=skip_bytes skip="$before" status=none |
		cmp - "$NV_TMP/piece" || fail "round $r: big append not at offset $before"

	python3 "$NV_TMP/small.py" "$B/fast" $((r * 100)) 100 >> "$REF/fast" ||
		fail "round $r: express appends failed"
	SEQ[fast]=$((${SEQ[fast]:-0} + 100))
	rm -f "$NV_TMP/piece"
}

# mtime_ns FILE: st_mtime in nanoseconds.
mtime_ns() { python3 -c 'import os, sys; print(os.stat(sys.argv[1]).st_mtime_ns)' "$1"; }
declare -A MT

# note_mtimes: remember every stream's mtime (after appends).
note_mtimes() {
	local s
	for s in "${STREAMS[@]}"; do MT[$s]=$(mtime_ns "$B/$s"); done
}

# check_all LABEL: sha256, st_size, seq and mtime of every stream.
check_all() {
	local label=$1 s
	for s in "${STREAMS[@]}"; do
		[ "$(mtime_ns "$B/$s")" = "${MT[$s]}" ] ||
			fail "$label: $s st_mtime $(mtime_ns "$B/$s") ns, expected ${MT[$s]} (the last append's)"
		[ "$(nv_size "$B/$s")" = "$(stat -c %s "$REF/$s")" ] ||
			fail "$label: $s st_size $(nv_size "$B/$s"), expected $(stat -c %s "$REF/$s")"
		[ "$(sha256sum < "$B/$s")" = "$(sha256sum < "$REF/$s")" ] ||
			fail "$label: $s content differs: $(cmp "$B/$s" "$REF/$s" 2>&1)"
		[ "$(nv_xattr "$B/$s" user.nova.seq)" = "${SEQ[$s]:-0}" ] ||
			fail "$label: $s user.nova.seq $(nv_xattr "$B/$s" user.nova.seq), expected ${SEQ[$s]:-0}"
	done
	say "ok: $label: $(for s in "${STREAMS[@]}"; do printf '%s=%sB/%s ' "$s" "$(nv_size "$B/$s")" "${SEQ[$s]:-0}"; done)"
}

say "incarnation 1: write the streams"
: > "$B/empty"
: > "$B/tiny"; : > "$B/small"; : > "$B/big"
: > "$B/fast"
setfattr -n user.nova.class -v express "$B/fast"
: > "$REF/tiny"; : > "$REF/small"; : > "$REF/big"; : > "$REF/fast"; : > "$REF/empty"
t0=$EPOCHREALTIME
append_all 0
note_mtimes
say "wrote $(du -sb "$REF" | cut -f1) bytes in $(nv_elapsed "$t0") s"
check_all "incarnation 1"

for inc in 2 3; do
	say "clean close, incarnation $inc"
	nv_remount
	nv_drop_caches
	check_all "incarnation $inc, before appends"
	nv_expect_eq "$(nv_xattr "$B/fast" user.nova.class)" express "class of fast"
	append_all $((inc - 1))
	note_mtimes
	check_all "incarnation $inc, after appends"
done

say "final remount"
nv_remount
nv_drop_caches
check_all "incarnation 4 (read only)"
# On an object store a small slot that is mostly one stream's is one GET
# (engine/chunkfetch.h); a directory store reads footer and chunk.
if [ -n "${NOVAFS_TEST_STORE:-}" ]; then
	(($(nv_stat whole_fetches) > 0)) || fail "no small slot was read whole on $NOVAFS_TEST_STORE"
else
	nv_expect_eq "$(nv_stat whole_fetches)" 0 "whole_fetches on a directory store"
fi
say "ok: $(nv_stat whole_fetches) objects read whole, $(nv_stat footer_fetches) footers"
nv_stop

say "settlement within one mount keeps mtime"
nv_start "settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=2,audit_interval_ms=200"
S=$MNT/r/settled
head -c 1500000 /dev/urandom | dd of="$S" bs=64k oflag=append conv=notrunc status=none ||
	fail "appends to $S failed"
want=$(mtime_ns "$S")
nseq=$(nv_xattr "$S" user.nova.seq)
nv_await 60 "$S to settle (settled $(nv_xattr "$S" user.nova.settled) of $nseq)" nv_is_settled "$S"
# Let the kernel forget every node, so the engine drops its streams; the
# next stat loads the stream again, from the catalog row settlement wrote.
loaded_none() { nv_drop_caches; [ "$(nv_stat streams_loaded)" = 0 ]; }
nv_await 20 "the engine to unload its streams (streams_loaded $(nv_stat streams_loaded))" loaded_none
nv_expect_eq "$(mtime_ns "$S")" "$want" "st_mtime of the settled stream, reloaded in the same mount"
nv_remount
nv_expect_eq "$(mtime_ns "$S")" "$want" "st_mtime of the settled stream after a remount"
nv_stop
