#!/bin/bash
# t_ranges: byte-range reads.  A stream of small echo records, 5 MiB of random
# bytes as 64 KiB records (one dd run), and more small records is read back
# with dd skip=/count= at many offsets and block sizes (start, middle, across
# record boundaries, around the 512 KiB chunk boundaries, the last bytes, past
# the end) and with random preads; every range is compared with the same range
# of a local copy.  Repeated after a remount with dropped caches (cold reads).
# Last, reads interleaved with appends: a long-lived read fd and fresh opens
# must see each new record at the old end, and st_size must follow.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
nv_start

mkdir "$MNT/b"
S=$MNT/b/ranges
REF=$NV_TMP/ref
: > "$REF"

say "build the stream: 10 echo records, 5 MiB random as 64 KiB records, 3 MiB random as 1 MiB records, 10 echo records"
for i in $(seq 1 10); do
	echo "head record $i" >> "$S"
	echo "head record $i" >> "$REF"
done
head -c $((5 * 1024 * 1024)) /dev/urandom > "$NV_TMP/rand"
dd if="$NV_TMP/rand" of="$S" bs=64k oflag=append conv=notrunc status=none ||
	fail "dd append of 5 MiB failed"
cat "$NV_TMP/rand" >> "$REF"
# 3 MiB + 1000 bytes as 1 MiB records (bigger than the 512 KiB chunk target).
head -c $((3 * 1024 * 1024 + 1000)) /dev/urandom > "$NV_TMP/rand"
dd if="$NV_TMP/rand" of="$S" bs=1M oflag=append conv=notrunc status=none ||
	fail "dd append of 1 MiB records failed"
cat "$NV_TMP/rand" >> "$REF"
for i in $(seq 1 10); do
	echo "tail record $i" >> "$S"
	echo "tail record $i" >> "$REF"
done
rm -f "$NV_TMP/rand"

SIZE=$(stat -c %s "$REF")
HEAD=0    # length of the 10 head records: "head record N\n"
for i in $(seq 1 10); do HEAD=$((HEAD + ${#i} + 13)); done
nv_expect_eq "$(nv_size "$S")" "$SIZE" "st_size"
nv_expect_eq "$(nv_xattr "$S" user.nova.seq)" $((10 + 80 + 4 + 10)) "user.nova.seq (records)"

KIB=1024
MIB=$((1024 * 1024))
# "offset length" pairs.  HEAD is where the random bytes start.
RANGES=(
	"0 1" "0 14" "0 100" "0 $HEAD" "$((HEAD - 1)) 2" "$((HEAD - 7)) 70000"
	"13 1" "14 15"
	"$((HEAD + 65536 - 1)) 2" "$((HEAD + 65536 - 100)) 200"
	"$((HEAD + 3 * 65536 - 5000)) 140000"
	"$((512 * KIB - 1)) 2" "$((512 * KIB - 4096)) 8192" "$((512 * KIB)) 4096"
	"$((1024 * KIB - 1)) 2" "$((1024 * KIB - 300000)) 600000"
	"$((1536 * KIB - 17)) 34" "$((2 * MIB)) $MIB"
	"$((SIZE / 2)) 4096" "$((SIZE / 2 - 12345)) 54321"
	"$((5 * MIB - 100)) 600" "$((HEAD + 5 * MIB - 10)) 20"
	"$((HEAD + 6 * MIB - 1)) 2" "$((HEAD + 6 * MIB - 600000)) 1200000"
	"$((HEAD + 7 * MIB - 3)) 5000" "$((HEAD + 5 * MIB + 512 * KIB - 9)) 18"
	"$((HEAD + 8 * MIB - 10)) 1010" "$((HEAD + 8 * MIB + 990)) 30"
	"$((SIZE - 1)) 1" "$((SIZE - 1)) 10" "$((SIZE - 100)) 100"
	"$((SIZE - 70000)) 70000" "$((SIZE - 5)) 1000000"
	"$SIZE 1" "$SIZE 4096" "$((SIZE + 12345)) 100"
)
BLOCKS=(1 512 4096 65536 1048576 7777)

# check_ranges LABEL [cold]: every range at every block size, plus full-file
# reads and random preads, against $REF.  With "cold", the page cache is
# dropped before each range and each full read so they reach the daemon.
check_ranges() {
	local label=$1 cold=${2:-} r off len bs want n=0
	for r in "${RANGES[@]}"; do
		read -r off len <<< "$r"
		[ -z "$cold" ] || nv_drop_caches
		want=$(dd if="$REF" bs=65536 iflag=skip_bytes,count_bytes \
			skip="$off" count="$len" status=none | sha256sum)
		for bs in "${BLOCKS[@]}"; do
			# 1-byte blocks only for short ranges (one syscall per byte).
			((bs > 1 || len <= 5000)) || continue
			dd if="$S" of="$NV_TMP/piece" bs="$bs" iflag=skip_bytes,count_bytes \
				skip="$off" count="$len" status=none ||
				fail "$label: dd skip=$off count=$len bs=$bs failed"
			[ "$(sha256sum < "$NV_TMP/piece")" = "$want" ] ||
				fail "$label: range off=$off len=$len bs=$bs: got $(stat -c %s "$NV_TMP/piece") bytes that differ from the reference"
			n=$((n + 1))
		done
	done
	# Past the end: zero bytes.
	[ "$(dd if="$S" bs=4096 iflag=skip_bytes skip="$SIZE" status=none | wc -c)" -eq 0 ] ||
		fail "$label: read at offset == size returned data"
	say "ok: $label: $n dd ranges match"
	for bs in 4096 4093 131072 1048576; do
		[ -z "$cold" ] || nv_drop_caches
		dd if="$S" of="$NV_TMP/whole" bs="$bs" status=none ||
			fail "$label: full read bs=$bs failed"
		cmp "$NV_TMP/whole" "$REF" > "$NV_TMP/cmp.out" 2>&1 ||
			fail "$label: full read bs=$bs: $(cat "$NV_TMP/cmp.out")"
	done
	say "ok: $label: full reads (bs 4096, 4093, 128k, 1M) match"
	[ -z "$cold" ] || nv_drop_caches
	python3 - "$S" "$REF" "$label" <<'PY' || fail "$label: random preads differ (see above)"
import os, random, sys
path, ref, label = sys.argv[1:4]
want = open(ref, "rb").read()
size = len(want)
rng = random.Random(20240611)
fd = os.open(path, os.O_RDONLY)
try:
    for i in range(300):
        off = rng.randrange(0, size + 1000)
        ln = rng.choice([1, 2, 17, 4096, 65536, 70001, 524288, 1 << 20])
        got = os.pread(fd, ln, off)
        if got != want[off:off + ln]:
            print("%s: pread off=%d len=%d returned %d bytes, expected %d (content %s)"
                  % (label, off, ln, len(got), len(want[off:off + ln]),
                     "differs" if len(got) == len(want[off:off + ln]) else "short/long"),
                  file=sys.stderr)
            sys.exit(1)
finally:
    os.close(fd)
PY
	say "ok: $label: 300 random preads match"
}

check_ranges "hot"

say "remount and drop caches: the same ranges must come back cold"
nv_remount
nv_drop_caches
cold0=$(nv_stat cold_reads)
gets0=$(nv_stat store_gets)
check_ranges "cold" cold
cold1=$(nv_stat cold_reads)
gets1=$(nv_stat store_gets)
say "stats cold_reads: $cold0 -> $cold1, store_gets: $gets0 -> $gets1"
((cold1 > cold0)) || fail "reads after a remount did not count as cold reads ($cold0 -> $cold1)"
((gets1 > gets0)) || fail "cold reads made no store GETs in the stats ($gets0 -> $gets1)"
nv_expect_eq "$(nv_size "$S")" "$SIZE" "st_size after remount"

say "reads interleaved with appends"
python3 - "$S" "$REF" <<'PY' || fail "reads interleaved with appends went wrong (see above)"
import os, random, sys
path, ref = sys.argv[1], sys.argv[2]
want = bytearray(open(ref, "rb").read())
rng = random.Random(7)
rfd = os.open(path, os.O_RDONLY)
tail = len(want) - 5000
for i in range(100):
    old = len(want)
    rec = (("inter %d " % i) + "z" * rng.randrange(0, 9000) + "\n").encode()
    wfd = os.open(path, os.O_WRONLY | os.O_APPEND)
    if os.write(wfd, rec) != len(rec):
        sys.exit("short append %d" % i)
    os.close(wfd)
    want += rec
    st = os.stat(path).st_size
    if st != len(want):
        sys.exit("append %d: st_size %d, expected %d" % (i, st, len(want)))
    got = os.pread(rfd, len(want) - tail + 100, tail)      # long-lived fd
    if got != want[tail:]:
        sys.exit("append %d: long-lived fd reads %d bytes from %d, expected %d"
                 % (i, len(got), tail, len(want) - tail))
    fd = os.open(path, os.O_RDONLY)                       # fresh open
    got = os.pread(fd, len(rec) + 50, old - 20)
    os.close(fd)
    if got != want[old - 20:]:
        sys.exit("append %d: fresh fd reads %r at the old end" % (i, got[:40]))
os.close(rfd)
open(ref, "ab").write(want[len(open(ref, "rb").read()):])
PY
say "ok: 100 appends, each visible at once to a long-lived fd and to fresh opens"
cmp "$S" "$REF" || fail "stream differs from the reference after the interleaved appends"
say "ok: whole stream still matches"
nv_stop
