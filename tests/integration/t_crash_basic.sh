#!/bin/bash
# t_crash_basic: kill -9 in the middle of appends loses no acknowledged
# record and shows no torn or invented one.  Four writers (four streams,
# one of them express, one with records up to 32 KiB) append numbered
# lines; after each write() returns the writer records that number in a file
# of the temp dir.  The daemon is killed
# with SIGKILL at a random moment 1-2 s in, the dead mount is removed, the
# daemon restarts; every number up to the last recorded one must be present
# exactly once and in order, and anything after it only contiguously (the
# one write whose return the writer did not see); the line count equals
# user.nova.seq.  Four rounds, then a clean remount and a last check.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
nv_start

ROUNDS=4
WRITERS=(w1 w2 w3 big)
mkdir "$MNT/crash"
for w in "${WRITERS[@]}"; do : > "$MNT/crash/$w"; done
setfattr -n user.nova.class -v express "$MNT/crash/w3"

# writer.py STREAM FIRST LASTFILE: append lines "<n> <w> <padding>" from
# FIRST on, one write each; after each write returns, store n in LASTFILE
# (fixed width, overwritten in place).  Exits at the first failed write.
cat > "$NV_TMP/writer.py" <<'PY'
import os, sys
path, n, lastfile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
name = os.path.basename(path)
pad = 32771 if name == "big" else 700   # padding length (n * 131) % pad
lf = os.open(lastfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.pwrite(lf, b"%12d\n" % (n - 1), 0)
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
while True:
    rec = ("%d %s %s\n" % (n, name, "x" * (n * 131 % pad))).encode()
    try:
        w = os.write(fd, rec)
    except OSError as e:
        print("%s: write of %d failed: %s" % (name, n, e.strerror), file=sys.stderr)
        sys.exit(0)
    if w != len(rec):
        sys.exit("%s: short write %d of %d at %d" % (name, w, len(rec), n))
    os.pwrite(lf, b"%12d\n" % n, 0)
    n += 1
PY

# verify.py STREAMFILE NAME LAST: lines 1..M exactly, each well formed,
# M >= LAST and M <= LAST + 1 (a writer has one write in flight).  Prints M.
cat > "$NV_TMP/verify.py" <<'PY'
import sys
path, name, last = sys.argv[1], sys.argv[2], int(sys.argv[3])
pad = 32771 if name == "big" else 700
data = open(path, "rb").read()
if data and not data.endswith(b"\n"):
    sys.exit("%s: stream ends inside a record: %r" % (name, data[-60:]))
lines = data.split(b"\n")[:-1] if data else []
for i, l in enumerate(lines, 1):
    want = ("%d %s %s" % (i, name, "x" * (i * 131 % pad))).encode()
    if l != want:
        sys.exit("%s: line %d is %r, expected record %d (lost, duplicated, torn or reordered)"
                 % (name, i, l[:60], i))
m = len(lines)
if m < last:
    sys.exit("%s: stream ends at record %d but the writer saw record %d acknowledged"
             % (name, m, last))
if m > last + 1:
    sys.exit("%s: stream has records up to %d; the writer had at most %d in flight"
             % (name, m, last + 1))
print(m)
PY

declare -A NEXT
for w in "${WRITERS[@]}"; do NEXT[$w]=1; done

# verify_all LABEL: check every stream against its writer's last number.
verify_all() {
	local label=$1 w last m seq
	for w in "${WRITERS[@]}"; do
		last=$(tr -d ' \n' < "$NV_TMP/last.$w" 2>/dev/null || echo $((NEXT[$w] - 1)))
		cat "$MNT/crash/$w" > "$NV_TMP/got.$w" || fail "$label: cat $w failed"
		m=$(python3 "$NV_TMP/verify.py" "$NV_TMP/got.$w" "$w" "$last") ||
			fail "$label: $w is wrong (see above)"
		seq=$(nv_xattr "$MNT/crash/$w" user.nova.seq)
		[ "$seq" = "$m" ] || fail "$label: $w has $m lines but user.nova.seq = $seq"
		[ "$(nv_size "$MNT/crash/$w")" = "$(stat -c %s "$NV_TMP/got.$w")" ] ||
			fail "$label: $w st_size $(nv_size "$MNT/crash/$w") != bytes read $(stat -c %s "$NV_TMP/got.$w")"
		say "ok: $label: $w: records 1..$m intact (last acknowledged $last), seq $seq"
		NEXT[$w]=$((m + 1))
	done
}

for ((round = 1; round <= ROUNDS; round++)); do
	say "round $round: writers start"
	pids=()
	for w in "${WRITERS[@]}"; do
		rm -f "$NV_TMP/last.$w"
		python3 "$NV_TMP/writer.py" "$MNT/crash/$w" "${NEXT[$w]}" "$NV_TMP/last.$w" \
			2> "$NV_TMP/writer.$w.err" &
		pids+=($!)
		nv_bg "$!"
	done
	# Wait until every writer has had at least one append acknowledged.
	n=200
	for w in "${WRITERS[@]}"; do
		until [ -s "$NV_TMP/last.$w" ] &&
			(($(tr -d ' \n' < "$NV_TMP/last.$w") >= NEXT[$w])); do
			((n-- > 0)) || fail "round $round: writer $w made no progress in 10 s: $(cat "$NV_TMP/writer.$w.err")"
			sleep 0.05
		done
	done
	sleep "1.$(printf '%03d' $((RANDOM % 1000)))"   # the random moment
	nv_crash
	for i in "${!pids[@]}"; do
		nv_wait_pid_exit "${pids[i]}" 10 || fail "writer ${WRITERS[i]} hangs after the daemon died"
		nv_wait_bg "${pids[i]}" || fail "writer ${WRITERS[i]} failed: $(cat "$NV_TMP/writer.${WRITERS[i]}.err")"
	done
	for w in "${WRITERS[@]}"; do
		say "round $round: $w acknowledged up to $(tr -d ' \n' < "$NV_TMP/last.$w"); $(tail -n1 "$NV_TMP/writer.$w.err")"
	done
	nv_start
	verify_all "round $round after recovery"
	say "round $round: stats recovered_slots=$(nv_stat recovered_slots) appends=$(nv_stat appends)"
done

say "clean remount after the last recovery"
for w in "${WRITERS[@]}"; do echo $((NEXT[$w] - 1)) > "$NV_TMP/last.$w"; done
nv_remount
nv_drop_caches
verify_all "after a clean remount"
nv_expect_eq "$(nv_xattr "$MNT/crash/w3" user.nova.class)" express "class of w3"
nv_stop
