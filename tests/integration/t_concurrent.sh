#!/bin/bash
# t_concurrent: four concurrent writers append 500 lines each to ONE stream
# (each line one write: two writers `echo >>` opening per line, two keep one
# O_APPEND fd and os.write); the stream must hold exactly 2000 well-formed
# lines (no torn or interleaved records), each writer's lines exactly once
# and in that writer's order, and user.nova.seq must be 2000.  Then four
# writers to four streams concurrently: each stream equals its writer's lines.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
nv_start

N=500
mkdir "$MNT/c"

# Line k,i: "w<k> <i as 4 digits> <padding>|\n"; the padding is letter k
# repeated a length that varies per line (0..2999 bytes), so a torn or
# interleaved record cannot look well formed.
cat > "$NV_TMP/writer.py" <<'PY'
import os, sys
path, k, n, mode, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
def line(i):
    pad = chr(ord('a') + k - 1) * ((i * 37 + k * 101) % 3000)
    return ("w%d %04d %s|\n" % (k, i, pad)).encode()
if mode == "expect":
    sys.stdout.buffer.write(b"".join(line(i) for i in range(n)))
    sys.exit(0)
# Barrier: say "ready" on one FIFO, then wait for a "go" byte on the other.
with open(go + ".ready", "wb", buffering=0) as r:
    r.write(b"r")
with open(go, "rb", buffering=0) as g:
    if g.read(1) != b"g":
        sys.exit("w%d: barrier broken" % k)
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
for i in range(n):
    b = line(i)
    w = os.write(fd, b)
    if w != len(b):
        sys.exit("w%d: short write %d of %d at line %d" % (k, w, len(b), i))
os.close(fd)
PY

# bash_writer K PATH: the same lines with `echo >>` (open, one write, close).
bash_writer() {
	local k=$1 path=$2 i pad letters
	letters=$(printf '%3000s' '' | tr ' ' "$(printf "\\x$(printf %x $((96 + k)))")")
	printf r > "$NV_TMP/go.ready"
	read -r -N 1 < "$NV_TMP/go" || { echo "w$k: barrier broken" >&2; exit 1; }
	for ((i = 0; i < N; i++)); do
		pad=${letters:0:$(((i * 37 + k * 101) % 3000))}
		printf -v line 'w%d %04d %s|' "$k" "$i" "$pad"
		echo "$line" >> "$path" || { echo "w$k: append $i failed" >&2; exit 1; }
	done
}

for k in 1 2 3 4; do
	python3 "$NV_TMP/writer.py" - "$k" "$N" expect - > "$NV_TMP/expect.$k"
done

# run_writers PATH1 PATH2 PATH3 PATH4: writers 1-2 bash, 3-4 python; all
# start together (a FIFO barrier).  Fails if a writer fails.
run_writers() {
	local k pids=() t0=$EPOCHREALTIME
	# Barrier: the test holds both FIFOs open read-write (so no open blocks),
	# collects one "ready" byte per writer, then releases all four at once.
	rm -f "$NV_TMP/go" "$NV_TMP/go.ready"
	mkfifo "$NV_TMP/go" "$NV_TMP/go.ready"
	exec 5<> "$NV_TMP/go.ready" 6<> "$NV_TMP/go"
	for k in 1 2 3 4; do
		if ((k <= 2)); then
			( bash_writer "$k" "${!k}" ) &
		else
			python3 "$NV_TMP/writer.py" "${!k}" "$k" "$N" write "$NV_TMP/go" &
		fi
		pids+=($!)
		nv_bg "$!"
	done
	read -r -t 30 -N 4 -u 5 _ || fail "the writers did not reach the start barrier"
	printf gggg >&6            # releases all four writers at once
	exec 5>&- 6>&-
	for k in 1 2 3 4; do
		nv_wait_bg "${pids[k - 1]}" || fail "writer w$k exited with status $?"
	done
	say "4 writers x $N appends took $(nv_elapsed "$t0") s"
}

say "phase 1: 4 writers, one stream"
S=$MNT/c/shared
: > "$S"
run_writers "$S" "$S" "$S" "$S"
cat "$S" > "$NV_TMP/shared" || fail "cat $S failed"
nv_expect_eq "$(wc -l < "$NV_TMP/shared")" $((4 * N)) "line count"
nv_expect_eq "$(nv_size "$S")" "$(cat "$NV_TMP"/expect.? | wc -c)" "st_size (sum of all lines)"
nv_expect_eq "$(nv_xattr "$S" user.nova.seq)" $((4 * N)) "user.nova.seq"
python3 - "$NV_TMP/shared" "$N" <<'PY' || fail "the shared stream is not the 4 writers' lines interleaved whole (see above)"
import re, sys
path, n = sys.argv[1], int(sys.argv[2])
data = open(path, "rb").read()
pat = re.compile(rb"w([1-4]) (\d{4}) ([a-d]*)\|")
nexts = {k: 0 for k in range(1, 5)}
switches, prev = 0, None
lines = data.split(b"\n")
if lines[-1] != b"":
    sys.exit("stream does not end with a newline: %r" % lines[-1][-80:])
for no, l in enumerate(lines[:-1], 1):
    m = pat.fullmatch(l)
    if not m:
        sys.exit("line %d is malformed (torn or interleaved record): %r" % (no, l[:120]))
    k, i, pad = int(m.group(1)), int(m.group(2)), m.group(3)
    if pad != bytes([ord("a") + k - 1]) * ((i * 37 + k * 101) % 3000):
        sys.exit("line %d (w%d %04d): padding is wrong (len %d)" % (no, k, i, len(pad)))
    if i != nexts[k]:
        sys.exit("line %d: w%d record %d where %d was expected (lost, duplicated or reordered)"
                 % (no, k, i, nexts[k]))
    nexts[k] += 1
    if prev is not None and prev != k:
        switches += 1
    prev = k
for k, v in nexts.items():
    if v != n:
        sys.exit("w%d: %d lines, expected %d" % (k, v, n))
print("t_concurrent: ok: every line well formed; each writer's %d lines once and in order; %d writer switches" % (n, switches))
PY

say "phase 2: 4 writers, 4 streams"
run_writers "$MNT/c/s1" "$MNT/c/s2" "$MNT/c/s3" "$MNT/c/s4"
for k in 1 2 3 4; do
	cat "$MNT/c/s$k" > "$NV_TMP/got.$k" || fail "cat s$k failed"
	nv_same_file "$NV_TMP/got.$k" "$NV_TMP/expect.$k" "stream s$k equals writer w$k's lines"
	nv_expect_eq "$(nv_xattr "$MNT/c/s$k" user.nova.seq)" "$N" "s$k user.nova.seq"
done

say "after a remount"
nv_remount
nv_drop_caches
cmp "$MNT/c/shared" "$NV_TMP/shared" || fail "shared stream changed across a remount"
for k in 1 2 3 4; do
	cmp "$MNT/c/s$k" "$NV_TMP/expect.$k" || fail "stream s$k changed across a remount"
done
say "ok: all five streams unchanged after a remount"
nv_stop
