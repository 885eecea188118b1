#!/bin/bash
# t_follow_vacant.sh - follow on a vacant stream across stars (DESIGN.md
# section 7 "Follow across hosts"; the read-path seed's "Vacant
# streams": with no writer, committed state is everything and any star
# serves it from refs).  Three stars (A, B, C) on one etcd member and one
# shared store (tests/etcd/stars_lib.sh), star_lease_s=2, audit every
# 200 ms:
#   1. A leads a stream; its first record is absorbed (A's frontier 1);
#      then A's absorb is held (NOVAFS_FAILPOINTS absorb.before_refs
#      delay from its 2nd batch on) and A acks 20 more records, which stay
#      above A's frontier: acked, durable, in no ref.  A follower on B
#      (F1, opened before) gets them live from A's subscription.
#   2. kill -9 of A.  Nobody appends: the stream is vacant.  A second
#      follower on B (F2, opened after the kill), `tail -f` of the plain
#      file on B, and a subscription at B's star API (curl) must each get
#      every record A acked, once the settle duty commits refs over A's
#      residue, with nobody appending (B polls the refs: fs/rfollow.c,
#      fs/remote.c, api/subscribe.c over star_view_refresh()).
#      `cat` on C (no follower there) reads them too (its getattr raises
#      C's view from the refs, fs_remote_size()).
#   3. The subscription at B never takes the stream: while it is open,
#      user.nova.leader says "-" (api/server.c do_subscribe() used
#      star_lead(), which made B the leader).
#   4. C takes the stream by appending 10 records: F1, F2 and tail -f on
#      B go on with C's records (B's subscription at C); the subscription
#      at B ends with not_owner naming C.
#   5. C is stopped (SIGSTOP): B's follow, subscribed at the silent C,
#      looks at the lease again once C has been quiet past a heartbeat,
#      so when a fourth star D takes the stream, F1 on B has D's record
#      within 12 s of the stop (the cluster client's silence bound alone
#      is 20 s).
# Every follower's bytes must be exactly A's then C's.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
# shellcheck source=tests/etcd/stars_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/stars_lib.sh"
unset NOVAFS_FAILPOINTS
nv_init
nv_stars_init
OPTS="$NV_STARS_COMMON,attr_timeout=0,audit_interval_ms=200,settle_linger_s=1,read_grace_s=1"
# A's absorb: the first batch goes through, every later one waits 10 min.
NOVAFS_FAILPOINTS="absorb.before_refs=delay:600000@2" nv_star_lead a "$OPTS"
nv_star b "$OPTS"
nv_star c "$OPTS"
MA=$MNT
MB=${NV_STAR_MNT[b]}
MC=${NV_STAR_MNT[c]}
N=20

frontier() { getfattr --absolute-names --only-values -n user.nova.frontier "$1" 2>/dev/null; }
leader() { getfattr --absolute-names --only-values -n user.nova.leader "$1" 2>/dev/null; }
want() { python3 -c '
import sys
s = "a start\n"
for tag, n in zip(sys.argv[1::2], sys.argv[2::2]):
    s += "".join("%s %d %s\n" % (tag, i, "x" * (i % 50)) for i in range(int(n)))
sys.stdout.write(s)' "$@"; }
# follower PATH OUT: every byte read from PATH (parked reads) into OUT.
follower() {
	: > "$2"
	python3 - "$1" "$2" <<'PY' &
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
out = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
while True:
    b = os.read(fd, 65536)
    if not b:
        break
    os.write(out, b)
PY
	nv_bg "$!"
}

mkdir "$MA/b"
printf 'a start\n' > "$MA/b/s"
frontier_is() { [ "$(frontier "$1")" = "$2" ]; }
nv_await 20 "A's first record is absorbed" frontier_is "$MA/b/s" 1
nv_await 20 "B sees the stream" test -e "$MB/.follow/b/s"
# C loads the stream now (its view: the one record), and keeps it.
c_size8() { [ "$(nv_size "$MC/b/s")" = 8 ]; }
nv_await 20 "C sees the stream" c_size8
exec {c_fd}< "$MC/b/s"
nv_on_exit 'exec {c_fd}<&- 2>/dev/null || true'
follower "$MB/.follow/b/s" "$NV_TMP/f1.out"
nv_await 20 "F1 on B reads the first record" grep -q 'a start' "$NV_TMP/f1.out"

# 1. A acks N records its absorb does not commit.
python3 - "$MA/b/s" "$N" <<'PY'
import os, sys
for i in range(int(sys.argv[2])):
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
    os.write(fd, ("a %d %s\n" % (i, "x" * (i % 50))).encode())
    os.close(fd)
PY
want a "$N" > "$NV_TMP/want.a"
nv_await 20 "F1 on B gets A's records live" cmp -s "$NV_TMP/f1.out" "$NV_TMP/want.a"
[ "$(frontier "$MA/b/s")" = 1 ] ||
	fail "A's frontier moved to $(frontier "$MA/b/s"): the records are not residue (the failpoint did not hold the absorb)"
say "ok: A acked $N records above its frontier (1); F1 on B has them"

# 2. kill -9 of A; the stream is left vacant, nobody appends.
nv_crash
t0=$EPOCHREALTIME
vacant() { [ "$(leader "$MB/b/s")" = - ]; }
nv_await 20 "A's lease expires (vacant)" vacant
follower "$MB/.follow/b/s" "$NV_TMP/f2.out"
tail -c +1 -s 0.2 -f "$MB/b/s" > "$NV_TMP/tail.out" 2>"$NV_TMP/tail.err" &
nv_bg "$!"
TAIL_PID=$!
# B's star API address, from its log; the subscription from offset 0.
addr=$(sed -n 's/.*star API listening on \([0-9.:]*\).*/\1/p' "${NV_STAR_LOG[b]}" | tail -1)
[ -n "$addr" ] || fail "B's star API address is not in its log"
curl -sN -H "Authorization: Bearer $(cat "$NV_SECRET")" \
	"http://$addr/v1/streams/b/s/subscribe?offset=0" > "$NV_TMP/sub.out" 2>"$NV_TMP/sub.err" &
CURL_PID=$!
nv_bg "$CURL_PID"
nv_await 20 "the subscription at B answers its first frame" grep -aq 'a start' "$NV_TMP/sub.out"
# 3. The subscription did not make B the leader.
[ "$(leader "$MB/b/s")" = - ] ||
	fail "a subscription at B took the vacant stream: user.nova.leader = $(leader "$MB/b/s")"
say "ok: a subscription at B of the vacant stream leaves it vacant"
nv_await 30 "F2 on B gets A's residue (committed by settlement, nobody appending)" \
	cmp -s "$NV_TMP/f2.out" "$NV_TMP/want.a"
say "ok: F2 on B has every record A acked, $(nv_elapsed "$t0") s after the kill"
nv_await 10 "tail -f on B gets A's residue" cmp -s "$NV_TMP/tail.out" "$NV_TMP/want.a"
nv_await 10 "the subscription at B pushes A's residue" \
	grep -aq "a $((N - 1)) x" "$NV_TMP/sub.out"
[ "$(leader "$MB/b/s")" = - ] ||
	fail "the stream is led by $(leader "$MB/b/s") before anybody appended"
cmp "$NV_TMP/f1.out" "$NV_TMP/want.a" || fail "F1 on B changed while the stream was vacant"
say "ok: tail -f and the subscription at B have them too; still vacant"
# C neither follows nor subscribed: its getattr reads the refs.
nv_await 10 "cat on C reads A's residue" cmp -s "$MC/b/s" "$NV_TMP/want.a"
[ "$(leader "$MC/b/s")" = - ] || fail "C's cat took the stream: $(leader "$MC/b/s")"
say "ok: cat on C (no follower there) reads every record A acked"
exec {c_fd}<&-

# 4. C takes the stream; every follower on B goes on.
python3 - "$MC/b/s" <<'PY'
import os, sys
for i in range(10):
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
    os.write(fd, ("c %d %s\n" % (i, "x" * (i % 50))).encode())
    os.close(fd)
PY
[ "$(leader "$MB/b/s" | cut -d' ' -f1)" = sc ] || fail "C does not lead after its appends: $(leader "$MB/b/s")"
want a "$N" c 10 > "$NV_TMP/want"
for f in f1 f2 tail; do
	nv_await 20 "$f on B gets C's records" cmp -s "$NV_TMP/$f.out" "$NV_TMP/want"
done
say "ok: F1, F2 and tail -f on B have A's records then C's, exactly"
nv_await 10 "the subscription at B ends with not_owner naming C" \
	grep -aqE '"error": *"not_owner", *"leader": *"sc"' "$NV_TMP/sub.out"
nv_wait_bg "$CURL_PID" || true
say "ok: the subscription at B ended with not_owner (sc) when C took the stream"
kill "$TAIL_PID" 2>/dev/null || true

# 5. The holder C stops (SIGSTOP): its lease expires in star_lease_s,
#    but its socket stays open and silent.  B's follow notices within a
#    few seconds (the cluster client re-checks the lease each second once
#    the holder has been quiet past a heartbeat: api/client.c), not after
#    the client's 20 s silence bound; a fourth star D takes the stream
#    and F1 on B has D's record soon after.
nv_star d "$OPTS"
MD=${NV_STAR_MNT[d]}
nv_await 20 "D sees the stream" test -e "$MD/b/s"
kill -STOP "${NV_STAR_PIDS[c]}"
t0=$EPOCHREALTIME
vacant_d() { [ "$(leader "$MD/b/s")" = - ]; }
nv_await 20 "C's lease expires while it is stopped" vacant_d
printf 'd take\n' >> "$MD/b/s"
{ cat "$NV_TMP/want"; printf 'd take\n'; } > "$NV_TMP/want.d"
nv_await 30 "F1 on B gets D's record" cmp -s "$NV_TMP/f1.out" "$NV_TMP/want.d"
el=$(nv_elapsed "$t0")
awk -v e="$el" 'BEGIN { exit !(e < 12) }' ||
	fail "F1 on B got D's record $el s after C was stopped (want < 12: the follow must re-check the lease while the stopped holder is silent, not wait out the client's 20 s silence bound)"
say "ok: C stopped: F1 on B has D's record $el s after the stop"
kill -CONT "${NV_STAR_PIDS[c]}"
