#!/bin/bash
# t_drain.sh - decommission under load (novactl drain STAR) across three
# stars (tests/etcd/handoff_lib.sh: one etcd member, a shared directory
# store, stars s0 s1 s2, star_lease_s=2):
#   1. s0 leads four streams (b/d0..b/d3); three writers (one per mount)
#      append to b/d0;
#   2. `novactl drain s0` while they write: it reports progress (streams
#      held, epochs unsettled) and exits 0 once the terminate gate passes
#      (s0 leads nothing, every epoch of its chains settled: no batch
#      marker left);
#   3. meanwhile s0 hands every stream to s1 or s2 (getfattr), refuses to
#      be named leader (EHOSTDOWN), places a stream its own mount creates
#      on another star, and the writers go on (acked again after the
#      drain passed);
#   4. every acked record is in b/d0 exactly once, in each writer's
#      order, and the three mounts read identical bytes; s0 then
#      unmounts cleanly.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
STAR_OPTS=
# shellcheck source=tests/etcd/handoff_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/handoff_lib.sh"

mkdir "${M[0]}/b"
for d in 0 1 2 3; do
	printf 'lead %d x\n' "$d" >> "${M[0]}/b/d$d" || fail "append to b/d$d on s0"
done
printf 'ack 0\n' > "$NV_TMP/lead.log"
for d in 0 1 2 3; do
	nv_await 10 "star 1 sees b/d$d" test -e "${M[1]}/b/d$d"
	[[ $(leader_of "${M[1]}/b/d$d") == "s0 "* ]] || fail "s0 should lead b/d$d: $(leader_of "${M[1]}/b/d$d")"
done

# 1-2. Writers, then the drain.
writers_start 1 b/d0
for i in 0 1 2; do nv_await 30 "writer $i gets going" acks_at_least "$NV_TMP/w$i.1.log" 20; done
mkdir -p "$NV_TMP/ctl"
t0=$EPOCHREALTIME
"$NOVACTL" drain -o "data_dir=$NV_TMP/ctl,store=dir:$SHARED,meta=$NOVAFS_ETCD_URL" --timeout 40 s0 \
	> "$NV_TMP/drain.out" 2>&1 &
DRAIN=$!
nv_bg "$DRAIN"

# 3. While it drains.
for d in 0 1 2 3; do
	nv_await 20 "s0 hands b/d$d off" bash -c "l=\$(getfattr --absolute-names --only-values -n user.nova.leader '${M[1]}/b/d$d'); [[ \$l == s[12]' '* ]]"
done
say "ok: s0 handed its four streams to s1/s2 in $(nv_elapsed "$t0") s"
nv_refuse "Host is down" "leader=s0 while it drains" setfattr -n user.nova.leader -v s0 "${M[1]}/b/d1"
printf 'n 0 x\n' >> "${M[0]}/b/n" || fail "append to a new stream on the draining s0"
[[ $(leader_of "${M[2]}/b/n") == s[12]' '* ]] || fail "a stream s0's mount creates while it drains must be placed elsewhere: $(leader_of "${M[2]}/b/n")"
grep -q "placed on star s[12]" "${L[0]}" || fail "s0 did not log the placement"
say "ok: the draining s0 takes no lease: a new stream of its mount is placed on $(leader_of "${M[2]}/b/n")"
nv_await 45 "novactl drain ends" bash -c "! kill -0 $DRAIN 2>/dev/null"
wait "$DRAIN" || fail "novactl drain exited with $?: $(cat "$NV_TMP/drain.out")"
grep -q "the terminate gate passed" "$NV_TMP/drain.out" || fail "novactl drain: $(cat "$NV_TMP/drain.out")"
grep -q "stream(s) still held" "$NV_TMP/drain.out" || fail "novactl drain reported no progress: $(cat "$NV_TMP/drain.out")"
say "ok: novactl drain passed the terminate gate after $(nv_elapsed "$t0") s: $(grep -c 'still held' "$NV_TMP/drain.out") progress line(s)"
for i in 0 1 2; do
	n=$(acks "$NV_TMP/w$i.1.log")
	nv_await 30 "writer $i goes on after the drain" acks_at_least "$NV_TMP/w$i.1.log" $((n + 20))
done
writers_stop 1

# 4. Every acked record, then s0 stops.
logs=("$NV_TMP/lead.log" "$NV_TMP/w0.1.log" "$NV_TMP/w1.1.log" "$NV_TMP/w2.1.log")
say "failed appends during the drain: $(errnames "${logs[@]}")"
out=$(python3 "$RECORDS" verify "${M[1]}/b/d0" "${logs[@]}" 2>&1) || {
	cp "${M[1]}/b/d0" "$NV_TMP/stream.1" || true
	fail "star 1's view: $out (a copy in $NV_TMP/stream.1)"
}
for i in 0 2; do
	nv_await 20 "star $i reads what star 1 reads" cmp -s "${M[1]}/b/d0" "${M[i]}/b/d0"
done
say "ok: $out: every acked record once, each writer's in order; the three mounts read identical bytes"
nv_stop
