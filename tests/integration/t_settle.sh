#!/bin/bash
# t_settle: settlement end to end, with knobs small enough that it happens in
# seconds.  Three streams are written at once: a hot one (40 MiB as 64 KiB
# records, half random and half text, so some chunks compress), a cold one
# (200 small records) and an express one (300 records of 1-7 KiB, class set
# on the empty stream).  Checked:
#  - each settles: user.nova.settled == user.nova.seq, layout span_refs 0,
#    catalog_rows >= 1;
#  - the settled objects the layout lists exist in DATA_DIR/objects, are
#    well-formed bundles of exactly their stream's records, contiguous, and
#    every one but the last was cut at the output cap (at most one sub-cap
#    object, the last); the express stream's objects are in the same
#    streams/<bucket>/<id>/ keyspace;
#  - the bytes read back are identical (page cache dropped), also after a
#    clean remount;
#  - replaced tail revisions and retired chain slots disappear from the
#    store, and not before the read grace: one record more to the cold and
#    the express stream gives each chain one new slot and the cold stream a
#    new tail revision; sampled every 50 ms, the old slot files and the old
#    revision still exist 2 s after the settle was seen and are gone within
#    the grace plus a margin, never earlier than the grace;
#  - stats settle_jobs, settled_objects, slots_deleted > 0;
#  - novactl fsck --full passes on the unmounted store, also on one
#    unmounted mid-settlement (a hot stream settled while a young stream's
#    older marker waits for its age cap).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
command -v jq >/dev/null || nv_skip "jq is not installed"

GRACE=5
CAP_MIB=4
CAP=$((CAP_MIB * 1048576))
nv_start "settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=3,age_cap_express_s=3,output_cap_mib=$CAP_MIB,read_grace_s=$GRACE,audit_interval_ms=200"

B=$MNT/s
mkdir "$B"
: > "$B/fast"
setfattr -n user.nova.class -v express "$B/fast"
nv_expect_eq "$(nv_xattr "$B/fast" user.nova.class)" express "class of the empty stream fast"

# ---------------------------------------------------------------- data
python3 - "$NV_TMP" <<'PY'
import os, random, sys
d = sys.argv[1]
r = random.Random(1234)
with open(os.path.join(d, "hot.ref"), "wb") as f:
    for i in range(640):   # 40 MiB in 64 KiB records
        head = r.randbytes(32768)
        text = (("hot record %06d " % i) * 3000).encode()[:32768]
        f.write(head + text)
with open(os.path.join(d, "cold.recs"), "w") as f:
    for i in range(200):
        f.write("cold %04d %s\n" % (i, "c" * (i * 37 % 300)))
with open(os.path.join(d, "fast.recs"), "w") as f:
    for i in range(300):
        f.write("fast %04d %s\n" % (i, "f" * (1024 + i * 211 % 6144)))
PY
# append_lines SRC STREAM: one write() per line of SRC.
cat > "$NV_TMP/append_lines.py" <<'PY'
import os, sys
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
n = 0
for line in open(sys.argv[1], "rb"):
    if os.write(fd, line) != len(line):
        sys.exit("short write at line %d" % n)
    n += 1
PY
cp "$NV_TMP/cold.recs" "$NV_TMP/cold.ref"
cp "$NV_TMP/fast.recs" "$NV_TMP/fast.ref"

say "writing hot (40 MiB, 64 KiB records), cold (200 records), fast (express, 300 records) at once"
T0=$EPOCHREALTIME
dd if="$NV_TMP/hot.ref" of="$B/hot" bs=64k oflag=append conv=notrunc status=none 2> "$NV_TMP/hot.err" &
p_hot=$!
nv_bg "$p_hot"
python3 "$NV_TMP/append_lines.py" "$NV_TMP/cold.recs" "$B/cold" 2> "$NV_TMP/cold.err" &
p_cold=$!
nv_bg "$p_cold"
python3 "$NV_TMP/append_lines.py" "$NV_TMP/fast.recs" "$B/fast" 2> "$NV_TMP/fast.err" &
p_fast=$!
nv_bg "$p_fast"
nv_wait_bg "$p_hot" || fail "dd to hot failed: $(cat "$NV_TMP/hot.err")"
nv_wait_bg "$p_cold" || fail "writing cold failed: $(cat "$NV_TMP/cold.err")"
nv_wait_bg "$p_fast" || fail "writing fast failed: $(cat "$NV_TMP/fast.err")"
say "written in $(nv_elapsed "$T0") s"
nv_expect_eq "$(nv_xattr "$B/hot" user.nova.seq)" 640 "hot seq"
nv_expect_eq "$(nv_xattr "$B/cold" user.nova.seq)" 200 "cold seq"
nv_expect_eq "$(nv_xattr "$B/fast" user.nova.seq)" 300 "fast seq"
for s in hot cold fast; do
	nv_expect_eq "$(nv_size "$B/$s")" "$(stat -c %s "$NV_TMP/$s.ref")" "st_size of $s"
done

# ---------------------------------------------------------------- settling
T0=$EPOCHREALTIME
nv_wait_settled 60 "$B/hot" "$B/cold" "$B/fast"
say "all three settled $(nv_elapsed "$T0") s after the writes"

# check_layout STREAM: settled == seq, no span ref left, >= 1 catalog row,
# and the objects (nv_check_objects).
check_layout() {
	local f=$B/$1 doc
	doc=$(nv_layout "$f")
	nv_expect_eq "$(jq -r .settled <<< "$doc")" "$(nv_xattr "$f" user.nova.seq)" "$1: layout settled == seq"
	nv_expect_eq "$(jq -r .span_refs <<< "$doc")" 0 "$1: span refs left"
	(($(jq -r .catalog_rows <<< "$doc") >= 1)) || fail "$1: no catalog row: $doc"
	(($(jq -r '.settled_objects | length' <<< "$doc") >= 1)) || fail "$1: no settled object: $doc"
	say "$(nv_check_objects "$f" "$CAP")"
}
for s in hot cold fast; do check_layout "$s"; done
nhot=$(nv_layout "$B/hot" | jq '.settled_objects | length')
# Half of each hot record compresses, so ~21 MiB are stored: >= 5 objects.
((nhot >= 5)) || fail "hot: 40 MiB (~21 MiB stored) with a ${CAP_MIB} MiB cap settled into only $nhot object(s)"
say "ok: hot settled into $nhot objects"

fast_id=$(nv_layout "$B/fast" | jq -r .stream)
nv_layout "$B/fast" | jq -r '.settled_objects[].key' > "$NV_TMP/fast.keys"
while read -r k; do
	[[ $k == streams/s/$fast_id/* ]] ||
		fail "express stream fast: settled object key $k is not in streams/s/$fast_id/"
	[ -f "$DATA/objects/$k" ] || fail "express stream fast: $k is not in the store"
done < "$NV_TMP/fast.keys"
say "ok: the express stream settled into the standard keyspace streams/s/$fast_id/"

# compare_all LABEL: every stream reads back identical to what was written.
compare_all() {
	local s
	nv_drop_caches
	for s in hot cold fast; do
		nv_same_file "$B/$s" "$NV_TMP/$s.ref" "$1: $s reads back identical"
	done
}
compare_all "settled"

# ---------------------------------------------------------------- reclamation
# listed_keys: every settled object key the three layouts name.
listed_keys() {
	local s
	for s in hot cold fast; do nv_layout "$B/$s" | jq -r '.settled_objects[].key'; done | sort
}
# stored_keys: every settled object in the store.
stored_keys() {
	if [ -d "$DATA/objects/streams" ]; then
		(cd "$DATA/objects" && find streams -type f ! -name '*#*' | sort)
	fi
}
no_stray_objects() { [ -z "$(comm -13 <(listed_keys) <(stored_keys))" ]; }
stray=$(comm -13 <(listed_keys) <(stored_keys) | wc -l)
say "settled objects in the store that no layout names (replaced revisions): $stray"
nv_await $((GRACE + 10)) "replaced settled objects to be reclaimed: $(comm -13 <(listed_keys) <(stored_keys) | tr '\n' ' ')" no_stray_objects
missing=$(comm -23 <(listed_keys) <(stored_keys))
[ -z "$missing" ] || fail "settled objects named by a layout are missing from the store: $missing"
say "ok: the store holds exactly the $(listed_keys | wc -l) settled objects the layouts name"

nv_await $((GRACE + 15)) "every retired chain slot to be deleted ($(nv_slot_files | wc -l) left)" nv_no_slots
say "ok: no chain slot left in the store"
for k in settle_jobs settled_objects slots_deleted slots_written; do
	v=$(nv_stat "$k")
	((v > 0)) || fail "stats $k is $v, expected > 0"
	say "ok: stats $k = $v"
done
say "stats range_copies=$(nv_stat range_copies) copy_fallbacks=$(nv_stat copy_fallbacks) fetch_cache_bytes=$(nv_stat fetch_cache_bytes)"
nv_expect_eq "$(nv_stat slots_deleted)" "$(nv_stat slots_written)" "stats slots_deleted == slots_written"

# ---------------------------------------------------------------- the read grace
say "read grace: one more record to cold (a new tail revision) and to fast"
old_tail=$(nv_layout "$B/cold" | jq -r '.settled_objects[-1].key')
[ -f "$DATA/objects/$old_tail" ] || fail "cold's tail object $old_tail is not in the store"
# The sampler notes, every 50 ms, when each watched file disappears.
cat > "$NV_TMP/sampler.py" <<'PY'
import os, sys, time
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
from slots import segment_slots
root, stop, out, paths = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
gone = {}
# The test makes the stop file once it saw every file gone, maybe before
# the sampler did: a pass that starts after the stop file exists sees
# them gone too, and is the last.
while True:
    stopping = os.path.exists(stop)
    now = time.time()
    # A slot may be a file or a segment record (-o slot_segments).
    in_segments = segment_slots(root)
    for p in paths:
        if p not in gone and not os.path.exists(p) and p not in in_segments:
            gone[p] = now
    if stopping:
        break
    time.sleep(0.05)
with open(out, "w") as f:
    for p in paths:
        f.write("%s %s\n" % (p, repr(gone[p]) if p in gone else "-"))
PY
T_append=$EPOCHREALTIME
printf 'cold %04d one more\n' 200 >> "$B/cold"
printf 'cold %04d one more\n' 200 >> "$NV_TMP/cold.ref"
printf 'fast %04d one more\n' 300 >> "$B/fast"
printf 'fast %04d one more\n' 300 >> "$NV_TMP/fast.ref"
mapfile -t slots < <(nv_slot_files)
((${#slots[@]} >= 2)) || fail "expected the new slots of both chains, found: ${slots[*]:-none}"
[[ "${slots[*]}" == */express/* ]] || fail "no express slot among ${slots[*]}"
[[ "${slots[*]}" == */standard/* ]] || fail "no standard slot among ${slots[*]}"
say "new slot files: ${#slots[@]} (${slots[*]##*/chains/})"
python3 "$NV_TMP/sampler.py" "$(dirname "$NV_SLOTS_PY")" "$DATA/objects" \
	"$NV_TMP/sampler.stop" "$NV_TMP/sampler.out" \
	"${slots[@]}" "$DATA/objects/$old_tail" &
p_sampler=$!
nv_bg "$p_sampler"

# When did each stream settle?  Polls every 50 ms; a stream first seen
# settled by a poll settled after the previous poll started (the settle
# commits, then publishes the new settled point, then resolves the
# markers whose slots the grace then protects), so that start time is a
# lower bound of its commit and of its slots' retirement.
T_cold= T_fast=
prev=$T_append
n=0
while [ -z "$T_cold" ] || [ -z "$T_fast" ]; do
	now=$EPOCHREALTIME
	[ -z "$T_cold" ] && nv_is_settled "$B/cold" && T_cold=$prev
	[ -z "$T_fast" ] && nv_is_settled "$B/fast" && T_fast=$prev
	((n++ < 400)) || fail "the extra records did not settle within 20 s"
	prev=$now
	sleep 0.05
done
say "settled (lower bounds): cold $(awk -v a="$T_append" -v b="$T_cold" 'BEGIN { printf "%.2f", b - a }') s, fast $(awk -v a="$T_append" -v b="$T_fast" 'BEGIN { printf "%.2f", b - a }') s after the appends"
new_tail=$(nv_layout "$B/cold" | jq -r '.settled_objects[-1].key')
[ "$new_tail" != "$old_tail" ] || fail "cold's tail object was not rewritten: still $old_tail"
say "cold's tail object $old_tail was extended into $new_tail"
T_late=$(awk -v a="$T_cold" -v b="$T_fast" 'BEGIN { print (a > b ? a : b) }')
T_early=$(awk -v a="$T_cold" -v b="$T_fast" 'BEGIN { print (a < b ? a : b) }')
# 2 s after the earlier settle, everything must still be there.
while awk -v a="$T_early" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a < 2) }'; do sleep 0.05; done
# A slot found gone proves a deletion inside the grace only if the look
# ended before T_early + GRACE (on a loaded host one look can take
# seconds; a later miss is the sampler's to judge, below).
for p in "${slots[@]}" "$DATA/objects/$old_tail"; do
	nv_slot_exists "$p" && continue
	awk -v a="$T_early" -v b="$EPOCHREALTIME" -v g="$GRACE" 'BEGIN { exit !(b - a < g - 0.1) }' &&
		fail "${p#"$DATA"/objects/} was deleted within $(awk -v a="$T_early" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }') s of its settle, before the ${GRACE}s read grace"
done
say "ok: 2 s after the settle the old slots and the replaced tail revision still exist"
gone_all() {
	local p
	for p in "${slots[@]}" "$DATA/objects/$old_tail"; do ! nv_slot_exists "$p" || return 1; done
}
nv_await $((GRACE + 6)) "the old slots and tail revision to be deleted after the ${GRACE}s grace" gone_all
: > "$NV_TMP/sampler.stop"
nv_wait_bg "$p_sampler" || fail "the sampler failed"
while read -r p t; do
	case $p in
	*/express/*) ref=$T_fast ;;
	*) ref=$T_cold ;;
	esac
	[ "$t" != - ] || fail "the sampler never saw ${p#"$DATA"/objects/} disappear"
	d=$(awk -v a="$ref" -v b="$t" 'BEGIN { printf "%.2f", b - a }')
	# Deleted no earlier than the grace after the commit (0.1 s slack for
	# the few ms between commit and publishing the settled point).
	awk -v d="$d" -v g="$GRACE" 'BEGIN { exit !(d >= g - 0.1) }' ||
		fail "${p#"$DATA"/objects/} disappeared ${d}s after its settle was seen, before the ${GRACE}s read grace"
	awk -v d="$d" -v g="$GRACE" 'BEGIN { exit !(d <= g + 4) }' ||
		fail "${p#"$DATA"/objects/} disappeared only ${d}s after its settle was seen (grace ${GRACE}s)"
	say "ok: ${p#"$DATA"/objects/} deleted ${d}s after its settle (grace ${GRACE}s)"
done < "$NV_TMP/sampler.out"
check_layout cold
check_layout fast
compare_all "after the grace"

# ---------------------------------------------------------------- remount
nv_remount
for s in hot cold fast; do
	nv_expect_eq "$(nv_size "$B/$s")" "$(stat -c %s "$NV_TMP/$s.ref")" "after remount: st_size of $s"
	check_layout "$s"
done
compare_all "after remount"
nv_stop
nv_fsck --full

# ---------------------------------------------------------------- fsck mid-settlement
# Markers resolve out of order: an era settles the streams that qualify
# and keeps older markers whose streams do not yet (residue).  A store
# unmounted cleanly in that state is healthy (the next mount settles the
# rest), so fsck must pass on it too.
say "fsck of a store unmounted mid-settlement: a hot stream settled past a young stream's older marker"
nv_start "settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=600,age_cap_express_s=600,output_cap_mib=$CAP_MIB,read_grace_s=$GRACE,audit_interval_ms=200"
for i in $(seq 0 9); do printf 'young %d\n' "$i"; done > "$NV_TMP/young.ref"
python3 "$NV_TMP/append_lines.py" "$NV_TMP/young.ref" "$B/young" || fail "writing young failed"
head -c $((2 * 1048576)) "$NV_TMP/hot.ref" > "$NV_TMP/hot2.ref"
dd if="$NV_TMP/hot2.ref" of="$B/hot2" bs=64k oflag=append conv=notrunc status=none || fail "dd to hot2 failed"
hot2_settling() { (($(nv_xattr "$B/hot2" user.nova.settled) > 0)); }
nv_await 20 "hot2 (2 MiB, past the 1 MiB trigger) to settle" hot2_settling
nv_expect_eq "$(nv_xattr "$B/young" user.nova.settled)" 0 "young (10 records, age cap 600 s): settled"
say "hot2 settled to seq $(nv_xattr "$B/hot2" user.nova.settled) of $(nv_xattr "$B/hot2" user.nova.seq); young's older marker stands"
nv_stop
nv_fsck --full
