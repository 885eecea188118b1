#!/bin/bash
# t_stars_delete.sh - a stream deleted on one star, as the other star
# sees it (man/novafs.8, the errno list: a write to a deleted stream is
# ENOENT).  Two stars on one etcd member and one shared store
# (tests/etcd/stars_lib.sh); A with attr_timeout=1 (so entry_timeout=1):
# for each of three streams (one A leads, one B leads, one vacant: created,
# never appended to) A holds a write and a read descriptor opened before
# B's `rm`; after it, on A:
#   1. write() on the open descriptor is ENOENT (never EAGAIN), and so
#      is a second one;
#   2. read() on the open descriptor is ENOENT, or (as on one star, where
#      an open descriptor reads a deleted stream's history until it is
#      reclaimed) the bytes acked before the rm: never EAGAIN or EIO;
#   3. within entry_timeout the name is gone: stat, and open without
#      O_CREAT for writing or reading, are ENOENT, and `ls` of the bucket
#      does not list it.
# And a rename on B over a stream A leads (`mv src over-a`, both in b/;
# man/novafs.8, Everyday tools: the stream of the new name is replaced,
# i.e. deleted) is done at A, which deletes over-a in the same
# transaction: A's open write descriptor of over-a gets ENOENT like the
# rm'd ones (1-2 above), and within entry_timeout over-a on A reads src's
# bytes.  And the source of a
# rename keeps working where it is led: a stream A leads, renamed on B
# (`mv mv-a moved-a`), still takes writes on A's open descriptor (as on
# one star: open handles keep working), and moved-a on B shows them
# (B loaded mv-a under its old name, as A loaded src: fs/remote.h,
# invariant 2, a call under the old name is asked again under the new),
# and a follower on B of moved-a, parked at its end, gets A's next append
# (fs/rfollow.c subscribes at A under the name now).
# And a name reused at the leader (issue 15): B holds reuse, which A
# leads, open for appending (`exec 3>>`) and appends once through it; on
# A `mv reuse reused`, then a new reuse is created and appended to; B's
# next write through fd 3 must land in reused, the stream it opened, and
# never in the new reuse (B names the stream by its id: the star API's
# X-Nova-Stream-Id; A answers stream_moved under the old name and B asks
# again under the name now, fs/remote.h invariant 2).  Checked with cat
# of both streams on both mounts.
# And an mv on A over a stream B leads, five times (issue 15: done whole
# at B): a stat poller on B never sees the target ENOENT while they run;
# the target reads the renamed bytes on both mounts; B refuses appends
# through a descriptor of the stream an mv replaced; and an mv whose
# source B removed first fails with ENOENT, the target intact.
# Set-up and cleanup: tests/etcd/stars_lib.sh.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
# shellcheck source=tests/etcd/stars_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/stars_lib.sh"
nv_init
nv_stars_init
nv_star_lead a "$NV_STARS_COMMON,attr_timeout=1"
nv_star b "$NV_STARS_COMMON,attr_timeout=0"
MA=${NV_STAR_MNT[a]}
MB=${NV_STAR_MNT[b]}
say "stars A (pid $NV_PID) and B (pid ${NV_STAR_PIDS[b]}) on etcd $NOVAFS_ETCD_ENDPOINTS"

append() { nv_stars_append "$@"; }

mkdir "$MA/b"
[ "$(append "$MA/b/led-a" "a 0
")" = OK ] || fail "append to b/led-a on A"
nv_await 10 "B sees b/led-a" test -e "$MB/b/led-a"
[ "$(append "$MB/b/led-b" "b 0
")" = OK ] || fail "append to b/led-b on B"
: > "$MB/b/vacant"
[ "$(append "$MA/b/over-a" "o 0
")" = OK ] || fail "append to b/over-a on A"
[ "$(append "$MA/b/mv-a" "m 0
")" = OK ] || fail "append to b/mv-a on A"
[ "$(append "$MB/b/src" "src 0
")" = OK ] || fail "append to b/src on B"
for f in led-a led-b vacant over-a mv-a src; do nv_await 10 "A sees b/$f" test -e "$MA/b/$f"; done
leader() { getfattr --absolute-names --only-values -n user.nova.leader "$1" 2>/dev/null || true; }
[[ $(leader "$MA/b/led-a") == "sa "* ]] || fail "A should lead b/led-a: $(leader "$MA/b/led-a")"
[[ $(leader "$MA/b/led-b") == "sb "* ]] || fail "B should lead b/led-b: $(leader "$MA/b/led-b")"
[ "$(leader "$MA/b/vacant")" = - ] || fail "b/vacant should be vacant: $(leader "$MA/b/vacant")"
for f in over-a mv-a; do
	[[ $(leader "$MB/b/$f") == "sa "* ]] || fail "A should lead b/$f: $(leader "$MB/b/$f")"
done

# The prober on A: opens a write and a read descriptor on each stream,
# says "ready", waits for "go" (after B's rm), then reports each call's
# outcome as "NAME CALL OK|ERRNO".
cat > "$NV_TMP/probe.py" <<'PY'
import errno, os, sys
d, names = sys.argv[1], sys.argv[2:]
def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))
fds = {n: (os.open(os.path.join(d, n), os.O_WRONLY | os.O_APPEND),
           os.open(os.path.join(d, n), os.O_RDONLY)) for n in names}
print("ready", flush=True)
sys.stdin.readline()
for n in names:
    w, r = fds[n]
    for call, f in (("write", lambda: os.write(w, b"late\n")),
                    ("write2", lambda: os.write(w, b"later\n")),
                    ("read", lambda: os.pread(r, 4096, 0))):
        try:
            got = f()
            print(n, call, "OK:%d" % (got if call != "read" else len(got)), flush=True)
        except OSError as e:
            print(n, call, name(e), flush=True)
PY
coproc PROBE { python3 "$NV_TMP/probe.py" "$MA/b" led-a led-b vacant over-a mv-a; }
nv_bg "$PROBE_PID"
read -r -t 30 line <&"${PROBE[0]}" || fail "the prober on A did not open its descriptors"
[ "$line" = ready ] || fail "the prober on A: $line"
for f in led-a led-b vacant; do rm "$MB/b/$f" || fail "rm b/$f on B"; done
mv "$MB/b/src" "$MB/b/over-a" || fail "mv b/src b/over-a on B"
mv "$MB/b/mv-a" "$MB/b/moved-a" || fail "mv b/mv-a b/moved-a on B"
t0=$EPOCHREALTIME
echo go >&"${PROBE[1]}"
: > "$NV_TMP/probe.out"
for _ in $(seq 15); do
	read -r -t 60 line <&"${PROBE[0]}" || fail "the prober on A stopped: $(cat "$NV_TMP/probe.out")"
	echo "$line" >> "$NV_TMP/probe.out"
done
say "on A after B's rm and mv: $(tr '\n' ';' < "$NV_TMP/probe.out")"
# The renamed source mv-a: every call works (read: 4 + 5 + 6 bytes).
moved=$(grep '^mv-a ' "$NV_TMP/probe.out" | tr '\n' ';')
[ "$moved" = "mv-a write OK:5;mv-a write2 OK:6;mv-a read OK:15;" ] ||
	fail "on A, an open descriptor of b/mv-a, which B renamed to moved-a: $moved (want every call to work, as on one star)"
# The bytes before the rm: 4 in led-a, led-b and over-a, none in vacant.
bad=$(awk '$1 != "mv-a" && $3 != "ENOENT" && !($2 == "read" && $3 == ($1 == "vacant" ? "OK:0" : "OK:4"))' "$NV_TMP/probe.out")
[ -z "$bad" ] || fail "on A, calls on open descriptors of streams B deleted: $(echo "$bad" | tr '\n' ';') (want ENOENT; a read may give the bytes acked before the rm)"
say "ok: writes on A's open descriptors of the deleted and the replaced streams are ENOENT, reads ENOENT or the bytes before; the renamed one's work"

# 3. The names are gone on A within entry_timeout (1 s, +2 s of slack
#    for a loaded host).
gone() {
	local f=$1 r
	[ ! -e "$MA/b/$f" ] || return 1
	r=$(python3 -c '
import errno, os, sys
for how in (os.O_WRONLY | os.O_APPEND, os.O_RDONLY):
    try:
        os.close(os.open(sys.argv[1], how)); print("OK")
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))' "$MA/b/$f" | tr '\n' ' ')
	[ "$r" = "ENOENT ENOENT " ] || return 1
	# shellcheck disable=SC2010 # the listing as ls shows it is under test
	! ls "$MA/b" | grep -qxF "$f"
}
for f in led-a led-b vacant; do
	nv_await 3 "b/$f is gone on A (stat, open, ls)" gone "$f"
done
say "ok: the deleted names are gone on A $(nv_elapsed "$t0") s after the rm: stat and open ENOENT, not listed"

# The replaced name is src's on A now, and moved-a holds what A wrote.
has() { [ "$(cat "$1" 2>/dev/null)" = "$2" ]; }
nv_await 3 "b/over-a on A reads src's bytes" has "$MA/b/over-a" "src 0"
nv_await 3 "b/moved-a on B reads A's writes" has "$MB/b/moved-a" "m 0
late
later"
say "ok: after the mv over it, b/over-a on A is the renamed stream; b/moved-a has A's writes"

# A follower on B of the renamed stream (B loaded it as mv-a): parked at
# its end, it gets what A appends next (B subscribes at A under the name
# now; fs/remote.h invariant 2).
timeout 20 python3 -c '
import os, sys
out, got = open(sys.argv[2], "wb", 0), 0
fd = os.open(sys.argv[1], os.O_RDONLY)
while got < 20:
    b = os.read(fd, 20 - got)
    if not b:
        sys.exit("end of file at %d" % got)
    out.write(b)
    got += len(b)' "$MB/.follow/b/moved-a" "$NV_TMP/follow.b" 2> "$NV_TMP/follow.err" &
fpid=$!
nv_bg "$fpid"
parked() {
	[ "$(stat -c %s "$NV_TMP/follow.b" 2>/dev/null)" = 15 ] && return 0
	kill -0 "$fpid" 2>/dev/null || fail "B's follower of b/moved-a: $(cat "$NV_TMP/follow.err")"
	return 1
}
nv_await 5 "B's follower of b/moved-a to read its 15 bytes" parked
[ "$(append "$MA/b/moved-a" "more
")" = OK ] || fail "append to b/moved-a on A"
wait "$fpid" || fail "B's follower of b/moved-a did not get A's next append: $(od -c "$NV_TMP/follow.b" | head -3)"
[ "$(tail -c 5 "$NV_TMP/follow.b")" = more ] || fail "B's follower of b/moved-a: $(cat "$NV_TMP/follow.b")"
say "ok: B's follower of b/moved-a, renamed on B and led by A, got A's next append"

# A name reused at the leader (issue 15): B's open descriptor of reuse
# (led by A) keeps reaching the stream it opened after A renamed it and
# created another one under the old name.
[ "$(append "$MA/b/reuse" "r 0
")" = OK ] || fail "append to b/reuse on A"
nv_await 10 "B sees b/reuse" test -e "$MB/b/reuse"
exec 3>>"$MB/b/reuse"
printf 'r 1\n' >&3 2> "$NV_TMP/fd3.err" || fail "B's first write to b/reuse through fd 3: $(cat "$NV_TMP/fd3.err")"
[[ $(leader "$MB/b/reuse") == "sa "* ]] || fail "A should lead b/reuse: $(leader "$MB/b/reuse")"
mv "$MA/b/reuse" "$MA/b/reused" || fail "mv b/reuse b/reused on A"
[ "$(append "$MA/b/reuse" "new 0
")" = OK ] || fail "append to the new b/reuse on A"
printf 'r 2\n' >&3 2> "$NV_TMP/fd3.err" || fail "B's write through fd 3 after A's mv and the new b/reuse: $(cat "$NV_TMP/fd3.err") (want it appended to b/reused)"
exec 3>&-
# reads FILE TEXT: cat FILE gives TEXT within 3 s (A's entry cache),
# else fail showing what it gives.
reads() {
	local t0=$EPOCHREALTIME
	until has "$1" "$2"; do
		awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a > 3) }' &&
			fail "$1 reads '$(tr '\n' ';' < "$1")', want '$(tr '\n' ';' <<< "$2")'"
		sleep 0.1
	done
}
for m in "$MA" "$MB"; do
	reads "$m/b/reuse" "new 0"
	reads "$m/b/reused" "r 0
r 1
r 2"
done
say "ok: B's descriptor of b/reuse, renamed to b/reused on A and its name reused there, appended to b/reused alone"

# An mv on A over a stream B leads (issue 15: the rename is done whole
# at B, one metastore transaction under B's lease).  The target tgt
# (led by B) is replaced five times, each time by a stream src-N that B
# leads, with `mv` on A, while a poller on B (entry_timeout=0: every
# stat is a lookup at B's daemon, from the metastore) stats b/tgt in a
# loop: it must never read ENOENT (the old delete-then-rename left the
# name absent in between).  After each mv b/tgt reads src-N's bytes on
# both mounts and B leads it; B's write descriptor of the first tgt,
# opened before, gets ENOENT (B refuses appends to the stream it
# replaced); a new append through the name goes to the renamed stream.
[ "$(append "$MB/b/tgt" "t 0
")" = OK ] || fail "append to b/tgt on B"
nv_await 10 "A sees b/tgt" test -e "$MA/b/tgt"
[[ $(leader "$MA/b/tgt") == "sb "* ]] || fail "B should lead b/tgt: $(leader "$MA/b/tgt")"
exec 4>>"$MB/b/tgt"
printf 't 1\n' >&4 2> "$NV_TMP/fd4.err" || fail "B's first write to b/tgt through fd 4: $(cat "$NV_TMP/fd4.err")"
cat > "$NV_TMP/statpoll.py" <<'PY'
import errno, os, sys
path, stop, out = sys.argv[1:4]
n = bad = 0
while not os.path.exists(stop):
    try:
        os.stat(path)
    except OSError as e:
        bad += 1
        sys.stderr.write("stat %s: %s\n" % (path, errno.errorcode.get(e.errno, e.errno)))
    n += 1
open(out, "w").write("%d %d\n" % (n, bad))
PY
rm -f "$NV_TMP/statpoll.stop"
python3 "$NV_TMP/statpoll.py" "$MB/b/tgt" "$NV_TMP/statpoll.stop" "$NV_TMP/statpoll.out" \
	2> "$NV_TMP/statpoll.err" &
spid=$!
nv_bg "$spid"
for i in 1 2 3 4 5; do
	[ "$(append "$MB/b/src-$i" "src $i
")" = OK ] || fail "append to b/src-$i on B"
	nv_await 10 "A sees b/src-$i" test -e "$MA/b/src-$i"
	mv "$MA/b/src-$i" "$MA/b/tgt" 2> "$NV_TMP/mv.err" ||
		fail "mv b/src-$i b/tgt on A: $(cat "$NV_TMP/mv.err")"
	for m in "$MB" "$MA"; do reads "$m/b/tgt" "src $i"; done
	[[ $(leader "$MB/b/tgt") == "sb "* ]] || fail "B should lead b/tgt (src-$i): $(leader "$MB/b/tgt")"
	[ ! -e "$MB/b/src-$i" ] || fail "b/src-$i is still there on B after the mv on A"
done
touch "$NV_TMP/statpoll.stop"
wait "$spid" || fail "the stat poller on B: $(cat "$NV_TMP/statpoll.err")"
read -r polls enoent < "$NV_TMP/statpoll.out"
[ "$enoent" = 0 ] || fail "b/tgt on B read ENOENT $enoent times in $polls stats during the mvs on A: $(sort "$NV_TMP/statpoll.err" | uniq -c | tr '\n' ';')"
[ "$polls" -gt 5 ] || fail "the stat poller on B made only $polls stats"
say "ok: 5 mvs on A over b/tgt (led by B): $polls stats of b/tgt on B meanwhile, none ENOENT; b/tgt reads the renamed stream on both mounts"
r=$( { printf 't 2\n' >&4; } 2>&1 ) && fail "B's write through fd 4, opened on the b/tgt the first mv replaced, was accepted (want ENOENT)"
[[ $r == *"No such file or directory"* ]] || fail "B's write through fd 4 to the replaced b/tgt: $r (want ENOENT)"
exec 4>&-
[ "$(append "$MB/b/tgt" "src 5 more
")" = OK ] || fail "append to b/tgt (the renamed src-5) on B"
for m in "$MA" "$MB"; do reads "$m/b/tgt" "src 5
src 5 more"; done
say "ok: B refuses appends to the stream the mv replaced (ENOENT); the name takes them into the renamed stream"

# A rename whose source is gone by the time it is done leaves the
# target intact: src-gone (led by B) is seen on A, removed on B, then
# `mv src-gone tgt` on A (A's kernel may still hold the name: the
# daemon is asked, and B finds no source) fails with ENOENT, and b/tgt
# still reads the same bytes, led by B, on both mounts.
[ "$(append "$MB/b/src-gone" "gone 0
")" = OK ] || fail "append to b/src-gone on B"
nv_await 10 "A sees b/src-gone" test -e "$MA/b/src-gone"
rm "$MB/b/src-gone" || fail "rm b/src-gone on B"
r=$(python3 -c '
import errno, os, sys
try:
    os.rename(sys.argv[1], sys.argv[2]); print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))' "$MA/b/src-gone" "$MA/b/tgt")
[ "$r" = ENOENT ] || fail "mv b/src-gone b/tgt on A after B's rm of the source: $r (want ENOENT)"
for m in "$MA" "$MB"; do reads "$m/b/tgt" "src 5
src 5 more"; done
[[ $(leader "$MA/b/tgt") == "sb "* ]] || fail "B should still lead b/tgt: $(leader "$MA/b/tgt")"
[ "$(append "$MB/b/tgt" "after
")" = OK ] || fail "append to b/tgt on B after the failed mv"
say "ok: an mv on A whose source B removed fails with ENOENT and leaves b/tgt intact"
