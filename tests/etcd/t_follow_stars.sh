#!/bin/bash
# t_follow_stars.sh - follow across hosts (DESIGN.md section 7): three
# stars (A, B, C) on one etcd member and one shared store
# (tests/etcd/stars_lib.sh), star_lease_s=2:
#   1. A leads a stream; a follower reading B's .follow/ view (a python
#      reader parked at the end) sees each record appended on A, one at a
#      time, byte-identical; the latency from A's ack to the follower's
#      read is printed (the test fails only past a generous 10 s bound:
#      without B's subscription at A nothing wakes the follower);
#      `stat` on B shows the size A acked although B caches attributes
#      for 30 s (attr_timeout=30) and stat B's file before the appends
#      (B's subscription invalidates the kernel's attributes at each
#      growth, fuse_lowlevel_notify_inval_inode); and so does stat on C
#      (the default attr_timeout, 1 s, no follower: its getattr asks the
#      holder, fs_remote_size()); B and C read exactly A's bytes through
#      their page caches after having read the first 8 (no zeros, nothing
#      stale);
#   1b. four handoffs by xattr (A -> C -> A -> C -> A) under the parked
#      follower: the new holder's first record reaches it within 1.5 s
#      (the old holder's parked subscription ends when the lease leaves,
#      api/subscribe.c, instead of at its 5 s heartbeat); a descriptor A
#      opened (and read through its page cache) while it led reads C's
#      appended bytes after handoff 0, not zeros (fs_remote_size());
#   2. kill -9 of A: C takes the stream by appending (after A's lease
#      expires; B's follow polls the lease meanwhile), and the same
#      follower, never reopened, goes on with C's records: its bytes are
#      A's, the handoff records, then C's, exactly.
# Every await of a size stats on each try (size_is): `nv_await T MSG
# test "$(nv_size F)" = N` expands the stat once, when nv_await is
# called (that made the check on C fail on an idle machine: C's stat,
# cached for 1 s, was taken within that second).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
# shellcheck source=tests/etcd/stars_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/stars_lib.sh"
nv_init
nv_stars_init
nv_star_lead a "$NV_STARS_COMMON,attr_timeout=0"
nv_star b "$NV_STARS_COMMON,attr_timeout=30"
nv_star c "$NV_STARS_COMMON,attr_timeout=1"
MA=$MNT
MB=${NV_STAR_MNT[b]}
MC=${NV_STAR_MNT[c]}

# size_is FILE N: stat now says N (a fresh stat on every call of an
# await: `nv_await T MSG test "$(nv_size F)" = N` would stat once).
size_is() { [ "$(nv_size "$1")" = "$2" ]; }

mkdir "$MA/b"
printf 'a start\n' > "$MA/b/s"
nv_await 20 "B sees the stream" test -e "$MB/.follow/b/s"

# The follower: parked reads on B's follow view, every byte to follow.out.
: > "$NV_TMP/follow.out"
python3 - "$MB/.follow/b/s" "$NV_TMP/follow.out" <<'PY' &
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
out = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
while True:
    b = os.read(fd, 65536)
    if not b:
        break
    os.write(out, b)
PY
F_PID=$!
nv_bg "$F_PID"
nv_await 20 "the follower reads what is there" grep -q 'a start' "$NV_TMP/follow.out"
sz0=$(nv_size "$MB/b/s") # cached by B's kernel for 30 s, unless invalidated
[ "$sz0" = 8 ] || fail "stat on B before the appends: $sz0 (want 8)"
sz0=$(nv_size "$MC/b/s")
[ "$sz0" = 8 ] || fail "stat on C before the appends: $sz0 (want 8)"
# Both read the 8 bytes through their page cache: the page holding the
# end is cached there with zeros past it (fs.h invariant 2).
for m in "$MB" "$MC"; do
	[ "$(cat "$m/b/s")" = "a start" ] || fail "$m/b/s before the appends: $(od -c "$m/b/s" | head -3)"
done

# drive FILE TAG N OUT: append N records to FILE one at a time; after each
# await it in OUT (the follower's bytes); print latencies (ms).
drive() {
	python3 - "$@" <<'PY'
import os, sys, time
path, tag, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
lat = []
for i in range(n):
    rec = ("%s %d %s\n" % (tag, i, "x" * (i % 50))).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, rec)
    os.close(fd)
    t0 = time.monotonic()
    while True:
        with open(out, "rb") as f:
            if f.read().endswith(rec):
                break
        if time.monotonic() - t0 > 10:
            print("MISSING %s %d" % (tag, i))
            sys.exit(1)
        time.sleep(0.001)
    lat.append((time.monotonic() - t0) * 1000)
lat.sort()
print("n=%d p50=%.1fms p99=%.1fms max=%.1fms" % (n, lat[len(lat) // 2],
      lat[min(len(lat) - 1, int(len(lat) * 0.99))], lat[-1]))
PY
}

# 1. Appends on A, the follower on B.
r=$(drive "$MA/b/s" a 40 "$NV_TMP/follow.out") || fail "the follower on B: $r"
say "ok: A -> follower on B: $r (includes the 1 ms poll of the follower's output)"
want() { python3 -c '
import sys
s = "a start\n"
for tag, n in zip(sys.argv[1::2], sys.argv[2::2]):
    s += "".join("%s %d %s\n" % (tag, i, "x" * (i % 50)) for i in range(int(n)))
sys.stdout.write(s)' "$@"; }
want a 40 > "$NV_TMP/want"
cmp "$NV_TMP/follow.out" "$NV_TMP/want" || fail "the follower's bytes differ from A's"
sz=$(nv_size "$NV_TMP/want")
nv_await 15 "stat on B shows A's $sz bytes within its 30 s attr_timeout" \
	size_is "$MB/b/s" "$sz"
say "ok: byte-identical on B's follower; stat on B shows $sz (attr_timeout=30)"
nv_await 15 "stat on C shows A's $sz bytes (a lookup says the holder's end)" \
	size_is "$MC/b/s" "$sz"
say "ok: stat on C (no follower, attr_timeout=1) shows $sz"
# What stat says is what a read gives: no zeros from the page cached at
# the old end, nothing stale (issue 15: "B's page cache never shows
# stale or zero bytes").
for m in "$MB" "$MC"; do
	cmp "$m/b/s" "$NV_TMP/want" ||
		fail "$m/b/s after the appends differs from A's bytes: $(cmp "$m/b/s" "$NV_TMP/want" 2>&1 | head -1); $(od -c "$m/b/s" | sed -n 2,3p)"
done
say "ok: B and C read A's $sz bytes exactly through their page caches"

# 1b. Handoffs under the parked follower: the leader's subscription for
#     B is parked (nothing to push); leadership departing must end it
#     at once (api/subscribe.c re-checks the lease while parked), so B
#     reopens on the new holder: its first record reaches the follower
#     within 1.5 s, not at the next heartbeat (5 s) of the old holder's
#     parked subscription.  Four rounds: A -> C -> A -> C -> A.
# A reader on A that opened and read the file while A led (through A's
# page cache: the page at the end is cached with zeros past it) reads
# again, with the same descriptor, after handoff 0 and C's append: it
# must get C's bytes, not those zeros (JuiceFS #5038's symptom).
python3 - "$MA/b/s" "$NV_TMP/old.out" <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
first = os.pread(fd, 65536, 0)
open(sys.argv[2] + ".ready", "w").write("%d\n" % len(first))
while not os.path.exists(sys.argv[2] + ".go"):
    time.sleep(0.01)
size = os.stat(sys.argv[1]).st_size
again = os.pread(fd, size, 0)
open(sys.argv[2], "wb").write(again)
PY
OLD_PID=$!
nv_bg "$OLD_PID"
nv_await 10 "the reader on A read the file" test -s "$NV_TMP/old.out.ready"
from=a
for k in 0 1 2 3; do
	case $from in a) to=c ;; *) to=a ;; esac
	mfrom=${NV_STAR_MNT[$from]}
	setfattr -n user.nova.leader -v "s$to" "$mfrom/b/s" || fail "handoff $from -> $to"
	nv_await 10 "s$to leads b/s" bash -c "getfattr --absolute-names --only-values -n user.nova.leader '$MB/b/s' | grep -q '^s$to '"
	r=$(drive "${NV_STAR_MNT[$to]}/b/s" "h$k" 1 "$NV_TMP/follow.out") ||
		fail "the follower on B after handoff $k ($from -> $to): $r"
	ms=$(sed -n 's/.*max=\([0-9]*\)\..*/\1/p' <<<"$r")
	((ms < 1500)) || fail "handoff $k ($from -> $to): the follower on B saw the new holder's first record after $ms ms (want < 1500: the old holder's parked subscription must end when leadership leaves)"
	say "ok: handoff $k ($from -> $to): the follower on B has the new holder's record after $ms ms"
	if [ "$k" = 0 ]; then
		touch "$NV_TMP/old.out.go"
		nv_wait_bg "$OLD_PID" || fail "the reader on A failed"
		want a 40 h0 1 > "$NV_TMP/want.h0"
		cmp "$NV_TMP/old.out" "$NV_TMP/want.h0" ||
			fail "A's descriptor opened while A led reads, after C's append: $(cmp "$NV_TMP/old.out" "$NV_TMP/want.h0" 2>&1 | head -1); past the old end: $(tail -c +1019 "$NV_TMP/old.out" | od -c | head -2)"
		say "ok: A (no longer the leader) reads C's bytes through the descriptor it opened as the leader"
	fi
	from=$to
done

# 2. kill -9 of A; C takes the stream; the follower goes on.
nv_crash
t0=$EPOCHREALTIME
took() { python3 - "$MC/b/s" <<'PY'
import os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"c take\n")
    os.close(fd)
except OSError:
    sys.exit(1)
PY
}
nv_await 40 "C takes the stream after A died" took
say "ok: C appended $(nv_elapsed "$t0") s after A was killed"
want a 40 h0 1 h1 1 h2 1 h3 1 > "$NV_TMP/want"
printf 'c take\n' >> "$NV_TMP/want"
nv_await 20 "the follower on B sees C's first record" cmp -s "$NV_TMP/follow.out" "$NV_TMP/want"
r=$(drive "$MC/b/s" c 20 "$NV_TMP/follow.out") || fail "the follower on B after the takeover: $r"
say "ok: C -> follower on B after the takeover: $r"
{ want a 40 h0 1 h1 1 h2 1 h3 1; printf 'c take\n'; want c 20 | tail -n +2; } > "$NV_TMP/want"
cmp "$NV_TMP/follow.out" "$NV_TMP/want" || fail "the follower's bytes after the takeover differ"
say "ok: the follower's bytes are A's then C's, exactly"
kill "$F_PID" 2>/dev/null || true
F_PID=
