#!/bin/bash
# t_trim: trim as a hole punch at the head, and what it does to settled
# history.  Checked:
#  - `fallocate -p -o 0 -l N` with N inside a record: exit 0, st_size
#    unchanged, [0, N) reads as zeros, the bytes from N on are unchanged,
#    user.nova.trim is the record holding N and the layout's trim_byte is N;
#    lseek SEEK_DATA from inside the hole gives N and from the data gives the
#    offset; SEEK_HOLE inside the hole gives the offset, in the data gives
#    st_size; both give ENXIO at st_size;
#  - trimming backwards: a shorter punch is a no-op (exit 0, nothing moves),
#    setfattr user.nova.trim with a lower seq is EINVAL; a punch starting
#    inside the hole extends it; a punch that does not start in the head
#    hole, a plain fallocate, zero-range and collapse-range are EOPNOTSUPP
#    (errno checked through fallocate(2) itself); a malformed trim value or
#    one past the end is EINVAL;
#  - setfattr user.nova.trim SEQ on a settled stream of several objects:
#    objects wholly below SEQ leave the layout and, after the read grace
#    (still there grace - 1 s after the trim), the store; the others stay
#    and the bytes from the trim point on read back identical;
#  - unlink of a settled stream: its objects are still in the store grace -
#    1 s after, and gone after the grace;
#  - appends after a trim continue at the old size and settle (the tail
#    object is extended past the trim);
#  - a remount keeps the trim point, the hole and st_size; fsck --full passes;
#  - last, history trimmed or deleted before it ever settled (setfattr trim
#    and a hole punch right after the appends, an unlink): fsck passes on
#    the cleanly unmounted store once the auditor has reclaimed the rows
#    below the trim points; after the next mount the trimmed streams still
#    read right, settle (settled == seq, no span ref) and leave no chain slot
#    behind; fsck --full passes.  Problems there are collected and reported
#    together.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
command -v jq >/dev/null || nv_skip "jq is not installed"
command -v fallocate >/dev/null || nv_skip "fallocate (util-linux) is not installed"

GRACE=3
CAP=$((4 * 1048576))
OPTS="settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=2,age_cap_express_s=2,output_cap_mib=4,read_grace_s=$GRACE,audit_interval_ms=200"
nv_start "$OPTS"
B=$MNT/t
mkdir "$B"

# falloc.py FILE MODE OFF LEN: fallocate(2) with MODE; prints "ok" or the
# errno name.
cat > "$NV_TMP/falloc.py" <<'PY'
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
fd = os.open(sys.argv[1], os.O_WRONLY)
rc = libc.fallocate(fd, int(sys.argv[2], 0), int(sys.argv[3]), int(sys.argv[4]))
e = ctypes.get_errno()
# EOPNOTSUPP and ENOTSUP are one value on Linux; name it as fallocate(2) does.
print("ok" if rc == 0 else "EOPNOTSUPP" if e == errno.EOPNOTSUPP else errno.errorcode.get(e, str(e)))
PY
# seek.py FILE WHENCE OFF...: lseek results ("ENXIO" on that error).
cat > "$NV_TMP/seek.py" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
w = {"data": os.SEEK_DATA, "hole": os.SEEK_HOLE}[sys.argv[2]]
out = []
for o in sys.argv[3:]:
    try:
        out.append(str(os.lseek(fd, int(o), w)))
    except OSError as e:
        out.append(errno.errorcode[e.errno])
print(" ".join(out))
PY
# records.py FILE FIRST COUNT: COUNT records of 60..1559 bytes; writes each
# (one write()) and prints them to stdout.
cat > "$NV_TMP/records.py" <<'PY'
import os, sys
path, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
out = []
for i in range(first, first + count):
    rec = ("%s %05d %s\n" % (os.path.basename(path), i,
                             chr(97 + i % 26) * (50 + i * 613 % 1500))).encode()
    if os.write(fd, rec) != len(rec):
        sys.exit("short write at %d" % i)
    out.append(rec)
sys.stdout.buffer.write(b"".join(out))
PY
# zeroed REF N: REF with its first N bytes zeroed, to stdout.
zeroed() { head -c "$2" /dev/zero; tail -c +$(($2 + 1)) "$1"; }
# rec_start REF K: byte offset of record K of a records.py stream (one a line).
rec_start() { head -n "$2" "$1" | wc -c; }
# rec_of REF BYTE: the index of the record of REF holding byte BYTE.
rec_of() { head -c "$2" "$1" | wc -l; }
# expect_seek FILE WHENCE "OFFS" "WANT" WHAT
expect_seek() {
	# shellcheck disable=SC2086
	nv_expect_eq "$(python3 "$NV_TMP/seek.py" "$1" "$2" $3)" "$4" "$5"
}
# expect_falloc FILE MODE OFF LEN WANT WHAT
expect_falloc() {
	nv_expect_eq "$(python3 "$NV_TMP/falloc.py" "$1" "$2" "$3" "$4")" "$5" "$6"
}
KEEP=1 PUNCH=2 COLLAPSE=8 ZERO=16

# ---------------------------------------------------------------- hole punch
P=$B/p
python3 "$NV_TMP/records.py" "$P" 0 400 > "$NV_TMP/p.ref" || fail "writing p failed"
SIZE=$(stat -c %s "$NV_TMP/p.ref")
nv_expect_eq "$(nv_size "$P")" "$SIZE" "st_size of p"
nv_wait_settled 30 "$P"
say "p: 400 records, $SIZE bytes, settled"

K=37
N=$(($(rec_start "$NV_TMP/p.ref" $K) + 17))
say "punch: fallocate -p -o 0 -l $N (17 bytes into record $K)"
fallocate -p -o 0 -l "$N" "$P" || fail "fallocate -p -o 0 -l $N failed"
nv_expect_eq "$(nv_size "$P")" "$SIZE" "st_size unchanged by the punch"
nv_expect_eq "$(nv_xattr "$P" user.nova.trim)" "$K" "user.nova.trim (the record holding byte $N)"
nv_expect_eq "$(nv_layout "$P" | jq -r .trim_byte)" "$N" "layout trim_byte"
nv_expect_eq "$(nv_layout "$P" | jq -r .trim_seq)" "$K" "layout trim_seq"
cmp <(dd if="$P" bs="$N" count=1 status=none) <(head -c "$N" /dev/zero) ||
	fail "dd of [0, $N) after the punch does not read as $N zero bytes"
say "ok: dd of [0, $N) reads zeros"
cmp <(dd if="$P" bs=4096 iflag=skip_bytes skip="$N" status=none) <(tail -c +$((N + 1)) "$NV_TMP/p.ref") ||
	fail "bytes from $N on changed after the punch"
say "ok: bytes from $N on unchanged"
nv_drop_caches
zeroed "$NV_TMP/p.ref" "$N" > "$NV_TMP/p.want"
nv_same_file "$P" "$NV_TMP/p.want" "whole read after the punch: zeros then the data"
expect_seek "$P" data "0 1 $((N - 1)) $N $((N + 100)) $((SIZE - 1)) $SIZE" \
	"$N $N $N $N $((N + 100)) $((SIZE - 1)) ENXIO" "SEEK_DATA from 0, 1, N-1, N, N+100, size-1, size"
expect_seek "$P" hole "0 $((N - 1)) $N $((SIZE - 1)) $SIZE" \
	"0 $((N - 1)) $SIZE $SIZE ENXIO" "SEEK_HOLE from 0, N-1, N, size-1, size"

say "trimming backwards"
fallocate -p -o 0 -l $((N - 100)) "$P" || fail "a shorter punch (a no-op) failed"
fallocate -p -o 0 -l "$N" "$P" || fail "the same punch again (a no-op) failed"
nv_expect_eq "$(nv_layout "$P" | jq -r .trim_byte)" "$N" "trim_byte after shorter/equal punches"
nv_expect_eq "$(nv_xattr "$P" user.nova.trim)" "$K" "user.nova.trim after shorter/equal punches"
nv_refuse "Invalid argument" "setfattr user.nova.trim to a lower seq" \
	setfattr -n user.nova.trim -v $((K - 1)) "$P"
nv_refuse "Invalid argument" "setfattr user.nova.trim 0 after a trim" \
	setfattr -n user.nova.trim -v 0 "$P"
setfattr -n user.nova.trim -v "$K" "$P" || fail "setfattr user.nova.trim to the current seq failed"
nv_expect_eq "$(nv_layout "$P" | jq -r .trim_byte)" "$N" "trim_byte after setfattr to the same seq"
nv_refuse "Invalid argument" "setfattr user.nova.trim abc" setfattr -n user.nova.trim -v abc "$P"
nv_refuse "Invalid argument" "setfattr user.nova.trim -5" setfattr -n user.nova.trim -v -5 "$P"
nv_refuse "Invalid argument" "setfattr user.nova.trim past the end" \
	setfattr -n user.nova.trim -v 401 "$P"
expect_seek "$P" data "0" "$N" "SEEK_DATA after the refusals"

say "refused fallocate modes"
nv_refuse "" "fallocate -p not at the head (CLI)" fallocate -p -o $((N + 1)) -l 10 "$P"
expect_falloc "$P" $((PUNCH | KEEP)) $((N + 1)) 10 EOPNOTSUPP "punch starting above the hole"
expect_falloc "$P" $((PUNCH | KEEP)) 5000000 10 EOPNOTSUPP "punch past the end"
nv_refuse "" "plain fallocate (CLI)" fallocate -l 1M "$P"
expect_falloc "$P" 0 0 1048576 EOPNOTSUPP "plain fallocate (allocate)"
expect_falloc "$P" 0 "$SIZE" 4096 EOPNOTSUPP "plain fallocate at the end"
expect_falloc "$P" "$KEEP" 0 4096 EOPNOTSUPP "fallocate KEEP_SIZE"
expect_falloc "$P" $((ZERO | KEEP)) 0 10 EOPNOTSUPP "fallocate ZERO_RANGE"
expect_falloc "$P" "$COLLAPSE" 0 4096 EOPNOTSUPP "fallocate COLLAPSE_RANGE"
nv_expect_eq "$(nv_size "$P")" "$SIZE" "st_size after the refused fallocates"
nv_expect_eq "$(nv_layout "$P" | jq -r .trim_byte)" "$N" "trim_byte after the refused fallocates"

N2=$((N + 1000))
say "a punch starting inside the hole extends it: -o $((N / 2)) -l $((N2 - N / 2))"
expect_falloc "$P" $((PUNCH | KEEP)) $((N / 2)) $((N2 - N / 2)) ok "punch from inside the hole to $N2"
nv_expect_eq "$(nv_layout "$P" | jq -r .trim_byte)" "$N2" "trim_byte after the extending punch"
K2=$(rec_of "$NV_TMP/p.ref" "$N2")
nv_expect_eq "$(nv_xattr "$P" user.nova.trim)" "$K2" "user.nova.trim after the extending punch (the record holding byte $N2)"
expect_seek "$P" data "0" "$N2" "SEEK_DATA after the extending punch"
zeroed "$NV_TMP/p.ref" "$N2" > "$NV_TMP/p.want"
nv_same_file "$P" "$NV_TMP/p.want" "p after the extending punch (page cache kept)"

say "appends after the punch continue at the old size"
python3 "$NV_TMP/records.py" "$P" 400 20 > "$NV_TMP/p.more" || fail "appending to p failed"
cat "$NV_TMP/p.more" >> "$NV_TMP/p.ref"
cat "$NV_TMP/p.more" >> "$NV_TMP/p.want"
nv_expect_eq "$(nv_size "$P")" $((SIZE + $(stat -c %s "$NV_TMP/p.more"))) "st_size of p after 20 appends"
cmp <(dd if="$P" bs=4096 iflag=skip_bytes skip="$SIZE" status=none) "$NV_TMP/p.more" ||
	fail "appends after the punch are not at offset $SIZE"
say "ok: the appended records are at offset $SIZE"
nv_expect_eq "$(nv_xattr "$P" user.nova.seq)" 420 "seq of p"
SIZE_P=$(stat -c %s "$NV_TMP/p.want")
nv_wait_settled 30 "$P"
say "$(nv_check_objects "$P" "$CAP")"

# ---------------------------------------------------------------- trim of settled objects
BIG=$B/big
head -c $((20 * 1048576)) /dev/urandom > "$NV_TMP/big.ref"
dd if="$NV_TMP/big.ref" of="$BIG" bs=64k oflag=append conv=notrunc status=none ||
	fail "dd to big failed"
nv_wait_settled 60 "$BIG"
nv_layout "$BIG" | jq -c '.settled_objects[]' > "$NV_TMP/big.objs"
nobj=$(wc -l < "$NV_TMP/big.objs")
((nobj >= 4)) || fail "big: 20 MiB settled into only $nobj objects with a 4 MiB cap"
say "$(nv_check_objects "$BIG" "$CAP")"
# The trim point: 5 records into the third object.
TS=$(($(sed -n 3p "$NV_TMP/big.objs" | jq -r .first_seq) + 5))
jq -r "select(.end_seq <= $TS) | .key" "$NV_TMP/big.objs" > "$NV_TMP/big.below"
jq -r "select(.end_seq > $TS) | .key" "$NV_TMP/big.objs" > "$NV_TMP/big.kept"
nv_expect_eq "$(wc -l < "$NV_TMP/big.below")" 2 "objects wholly below seq $TS"
say "setfattr -n user.nova.trim -v $TS big"
T_TRIM=$EPOCHREALTIME
setfattr -n user.nova.trim -v "$TS" "$BIG" || fail "setfattr user.nova.trim $TS failed"
TB=$((TS * 65536))
nv_expect_eq "$(nv_layout "$BIG" | jq -r .trim_byte)" "$TB" "big: trim_byte"
nv_expect_eq "$(nv_xattr "$BIG" user.nova.trim)" "$TS" "big: user.nova.trim"
while read -r k; do
	[ -f "$DATA/objects/$k" ] || fail "big: $k vanished from the store at once, before the ${GRACE}s grace"
done < "$NV_TMP/big.below"
say "ok: the objects below the trim point are still in the store right after the trim"
below_unlisted() { ! nv_layout "$BIG" | jq -r '.settled_objects[].key' | grep -xFf "$NV_TMP/big.below" > /dev/null; }
nv_await 10 "the objects below seq $TS to leave big's layout" below_unlisted
nv_layout "$BIG" | jq -r '.settled_objects[].key' > "$NV_TMP/big.now"
diff "$NV_TMP/big.now" "$NV_TMP/big.kept" > /dev/null ||
	fail "big: after the trim the layout lists $(tr '\n' ' ' < "$NV_TMP/big.now"); expected $(tr '\n' ' ' < "$NV_TMP/big.kept")"
say "ok: the layout now lists the $(wc -l < "$NV_TMP/big.kept") objects at or above the trim point"
# until_after T SECONDS: sleep until SECONDS after $EPOCHREALTIME value T.
until_after() {
	while awk -v a="$1" -v s="$2" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a < s) }'; do
		sleep 0.05
	done
}
until_after "$T_TRIM" $((GRACE - 1))
while read -r k; do
	[ -f "$DATA/objects/$k" ] || fail "big: $k left the store less than $((GRACE - 1)) s after the trim, before the ${GRACE}s grace"
done < "$NV_TMP/big.below"
say "ok: $((GRACE - 1)) s after the trim the objects below it are still in the store (grace ${GRACE}s)"
below_gone() {
	local k
	while read -r k; do [ ! -e "$DATA/objects/$k" ] || return 1; done < "$NV_TMP/big.below"
}
nv_await $((GRACE + 6)) "the objects below the trim point to leave the store" below_gone
while read -r k; do
	[ -f "$DATA/objects/$k" ] || fail "big: kept object $k is missing from the store"
done < "$NV_TMP/big.kept"
say "ok: the objects below the trim point are gone from the store, the others are there"
say "$(nv_check_objects "$BIG" "$CAP")"
zeroed "$NV_TMP/big.ref" "$TB" > "$NV_TMP/big.want"
nv_drop_caches
nv_same_file "$BIG" "$NV_TMP/big.want" "big after the trim: zeros, then the data from $TB"
expect_seek "$BIG" data "0" "$TB" "big: SEEK_DATA from 0"

say "appends after the trim continue at the old size and settle"
SIZE_BIG=$(stat -c %s "$NV_TMP/big.ref")
head -c 300000 /dev/urandom > "$NV_TMP/big.more"
dd if="$NV_TMP/big.more" of="$BIG" bs=64k oflag=append conv=notrunc status=none ||
	fail "appending to big failed"
cat "$NV_TMP/big.more" >> "$NV_TMP/big.want"
nv_expect_eq "$(nv_size "$BIG")" $((SIZE_BIG + 300000)) "big: st_size after the appends"
cmp <(dd if="$BIG" bs=64k iflag=skip_bytes skip="$SIZE_BIG" status=none) "$NV_TMP/big.more" ||
	fail "big: appends after the trim are not at offset $SIZE_BIG"
say "ok: big's appends are at offset $SIZE_BIG"
nv_wait_settled 30 "$BIG"
say "$(nv_check_objects "$BIG" "$CAP")"
nv_expect_eq "$(nv_layout "$BIG" | jq -r .span_refs)" 0 "big: span refs after settling the appends"

# ---------------------------------------------------------------- unlink
G=$B/gone
head -c $((6 * 1048576)) /dev/urandom | dd of="$G" bs=64k oflag=append conv=notrunc iflag=fullblock status=none ||
	fail "dd to gone failed"
nv_wait_settled 30 "$G"
nv_layout "$G" | jq -r '.settled_objects[].key' > "$NV_TMP/gone.keys"
(($(wc -l < "$NV_TMP/gone.keys") >= 2)) || fail "gone: 6 MiB settled into fewer than 2 objects"
T_UNLINK=$EPOCHREALTIME
rm "$G" || fail "unlink of gone failed"
[ ! -e "$G" ] || fail "gone still exists after unlink"
while read -r k; do
	[ -f "$DATA/objects/$k" ] || fail "gone: $k vanished at the unlink, before the ${GRACE}s grace"
done < "$NV_TMP/gone.keys"
say "ok: right after the unlink the deleted stream's $(wc -l < "$NV_TMP/gone.keys") objects are still in the store"
until_after "$T_UNLINK" $((GRACE - 1))
while read -r k; do
	[ -f "$DATA/objects/$k" ] || fail "gone: $k left the store less than $((GRACE - 1)) s after the unlink, before the ${GRACE}s grace"
done < "$NV_TMP/gone.keys"
say "ok: $((GRACE - 1)) s after the unlink they are still there (grace ${GRACE}s)"
gone_gone() {
	local k
	while read -r k; do [ ! -e "$DATA/objects/$k" ] || return 1; done < "$NV_TMP/gone.keys"
}
nv_await $((GRACE + 6)) "the deleted stream's objects to leave the store" gone_gone
say "ok: the deleted stream's objects are gone from the store after the grace"

# ---------------------------------------------------------------- remount
nv_remount
nv_expect_eq "$(nv_size "$P")" "$SIZE_P" "after remount: st_size of p"
nv_expect_eq "$(nv_xattr "$P" user.nova.trim)" "$K2" "after remount: user.nova.trim of p"
nv_expect_eq "$(nv_layout "$P" | jq -r .trim_byte)" "$N2" "after remount: trim_byte of p"
nv_expect_eq "$(nv_size "$BIG")" $((SIZE_BIG + 300000)) "after remount: st_size of big"
nv_expect_eq "$(nv_xattr "$BIG" user.nova.trim)" "$TS" "after remount: user.nova.trim of big"
expect_seek "$P" data "0" "$N2" "after remount: SEEK_DATA of p"
expect_seek "$BIG" data "0" "$TB" "after remount: SEEK_DATA of big"
nv_drop_caches
nv_same_file "$P" "$NV_TMP/p.want" "after remount: p reads zeros then its data"
nv_same_file "$BIG" "$NV_TMP/big.want" "after remount: big reads zeros then its data"
[ ! -e "$G" ] || fail "after remount: the deleted stream is back"
nv_await $((GRACE + 10)) "every retired chain slot to be deleted ($(nv_slot_files | wc -l) left)" nv_no_slots
say "ok: no chain slot left"
nv_stop
nv_fsck --full

# ---------------------------------------------------------------- trim before settling
# Streams trimmed or deleted while their history is still in chain slots
# (nothing settled yet).  Every problem found here is collected and
# reported together at the end.
say "streams trimmed or deleted before they ever settled"
PROBLEMS=()
problem() {
	say "PROBLEM: $*"
	PROBLEMS+=("$*")
}
nv_start
python3 "$NV_TMP/records.py" "$B/early" 0 100 > "$NV_TMP/early.ref" || fail "writing early failed"
python3 "$NV_TMP/records.py" "$B/early2" 0 100 > "$NV_TMP/early2.ref" || fail "writing early2 failed"
python3 "$NV_TMP/records.py" "$B/early3" 0 100 > /dev/null || fail "writing early3 failed"
setfattr -n user.nova.trim -v 40 "$B/early" || fail "setfattr user.nova.trim 40 on early failed"
NE=$(($(rec_start "$NV_TMP/early2.ref" 60) + 5))
fallocate -p -o 0 -l "$NE" "$B/early2" || fail "fallocate -p -o 0 -l $NE on early2 failed"
rm "$B/early3" || fail "unlink of early3 failed"
nv_expect_eq "$(nv_xattr "$B/early" user.nova.settled)" 0 "early: not settled yet when trimmed"
nv_expect_eq "$(nv_xattr "$B/early2" user.nova.settled)" 0 "early2: not settled yet when trimmed"
zeroed "$NV_TMP/early.ref" "$(rec_start "$NV_TMP/early.ref" 40)" > "$NV_TMP/early.want"
zeroed "$NV_TMP/early2.ref" "$NE" > "$NV_TMP/early2.want"

# A clean unmount once the auditor has reclaimed the rows below the trim
# points and the deleted stream's rows (the grace): the store is healthy,
# the next mount settles the rest, so fsck must pass.
refs_reclaimed() {
	[ "$(nv_layout "$B/early" | jq '[.spans[] | select(.end_seq <= 40)] | length')" = 0 ] &&
		grep -q "early3, deleted): history reclaimed" "$LOG"
}
nv_await $((GRACE + 10)) "the rows below the trim point and of the deleted stream to be reclaimed" refs_reclaimed
nv_stop
rc=0
"$NOVACTL" fsck -o "data_dir=$DATA" > "$NV_TMP/fsck.out" 2>&1 || rc=$?
if ((rc != 0)); then
	problem "fsck of the cleanly unmounted store exits $rc after a trim and an unlink of unsettled history: $(grep -c 'covered by no ref' "$NV_TMP/fsck.out") violations like '$(grep -m1 VIOLATION "$NV_TMP/fsck.out")'; $(tail -n 1 "$NV_TMP/fsck.out")"
else
	say "ok: fsck passes right after a trim and an unlink of unsettled history"
fi

nv_start
nv_drop_caches
nv_same_file "$B/early" "$NV_TMP/early.want" "early reads zeros then records 40.."
nv_same_file "$B/early2" "$NV_TMP/early2.want" "early2 reads zeros then its data from $NE"
[ ! -e "$B/early3" ] || fail "early3 is back after the remount"
# Age cap 2 s: everything is due within a few seconds.
T0=$EPOCHREALTIME
all_settled() { nv_is_settled "$B/early" && nv_is_settled "$B/early2"; }
while ! all_settled && awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a < 20) }'; do
	sleep 0.1
done
for s in early early2; do
	if nv_is_settled "$B/$s"; then
		nv_expect_eq "$(nv_layout "$B/$s" | jq -r .span_refs)" 0 "$s: span refs"
		say "$(nv_check_objects "$B/$s" "$CAP")"
	else
		problem "$s, trimmed before it settled, never settles: after 20 s seq $(nv_xattr "$B/$s" user.nova.seq), settled $(nv_xattr "$B/$s" user.nova.settled), span refs $(nv_layout "$B/$s" | jq .span_refs); daemon log: $(grep -c 'no ref at seq' "$LOG") x '$(grep -m1 'no ref at seq' "$LOG" | cut -d' ' -f3-)'"
	fi
done
T0=$EPOCHREALTIME
while ! nv_no_slots && awk -v a="$T0" -v b="$EPOCHREALTIME" -v g="$GRACE" 'BEGIN { exit !(b - a < g + 5) }'; do
	sleep 0.1
done
nv_no_slots || problem "$(nv_slot_files | wc -l) chain slots are never deleted (their markers never resolve)"
nv_drop_caches
nv_same_file "$B/early" "$NV_TMP/early.want" "early still reads zeros then records 40.."
nv_same_file "$B/early2" "$NV_TMP/early2.want" "early2 still reads zeros then its data from $NE"
nv_stop
rc=0
"$NOVACTL" fsck -o "data_dir=$DATA" --full > "$NV_TMP/fsck.out" 2>&1 || rc=$?
if ((rc != 0)); then
	problem "final fsck --full exits $rc: '$(grep -m1 VIOLATION "$NV_TMP/fsck.out")'; $(tail -n 1 "$NV_TMP/fsck.out")"
else
	say "ok: fsck --full: $(tail -n 1 "$NV_TMP/fsck.out")"
fi
((${#PROBLEMS[@]} == 0)) || fail "${#PROBLEMS[@]} problem(s) with history trimmed or deleted before it settled: $(printf '[%s] ' "${PROBLEMS[@]}")"
