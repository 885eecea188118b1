#!/bin/bash
# t_handoff.sh - handoff, idle release and graceful close across three
# stars (tests/etcd/handoff_lib.sh: one etcd member, a shared directory
# store, stars s0 s1 s2 with star_lease_s=2; lease_idle_s=3 on s2 alone,
# lease_idle_s=0 on the others: a mount that does not lead a vacant
# stream keeps its own view of it until a star leads it again, so the
# checks that compare the mounts keep a leader):
#   1. handoff by xattr under load, from any mount: three writers (one
#      per mount) keep appending to one stream while
#      `setfattr -n user.nova.leader -v STAR` moves it round the three
#      stars NV_HANDOFF_MOVES times (4; make check-etcd-full: 20), each time set on a mount that
#      does NOT lead it (the holder is asked through the star API);
#      getfattr on every mount shows the new leader; every acked record
#      is there exactly once, each writer's in its order, and the three
#      mounts read identical bytes;
#   2. the refusals: an unknown star (EINVAL), a malformed id (EINVAL);
#   3. idle release: a stream s2 leads whose writer went idle for
#      lease_idle_s turns vacant (getfattr shows "-"), logged; set from
#      another mount, the vacant stream is placed on the named star, and
#      an append from a third mount goes there;
#   4. graceful unmount of the leader (s1, moved there by xattr) while
#      the other two mounts write:
#      it releases every lease with its flush, ripens its markers and
#      nudges the peers (logged there); the writers on the other mounts
#      go on (acked again after the unmount); every acked record once.
# Env: NV_HANDOFF_MOVES (4).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
STAR_OPTS=lease_idle_s=0
STAR2_OPTS=lease_idle_s=3
# shellcheck source=tests/etcd/handoff_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/handoff_lib.sh"
MOVES=${NV_HANDOFF_MOVES:-4}

mkdir "${M[0]}/b"
python3 - "${M[0]}/b/s" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, b"lead 0 x\n")
PY
printf 'ack 0\n' > "$NV_TMP/lead.log"
for i in 1 2; do nv_await 10 "star $i sees the stream" test -e "${M[i]}/b/s"; done
[[ $(leader_of "${M[1]}/b/s") == "s0 "* ]] || fail "s0 should lead b/s: $(leader_of "${M[1]}/b/s")"

# 1. Handoff by xattr under load.
writers_start 1 b/s
for i in 0 1 2; do nv_await 30 "writer $i gets going" acks_at_least "$NV_TMP/w$i.1.log" 20; done
cur=0
t0=$EPOCHREALTIME
for ((k = 0; k < MOVES; k++)); do
	to=$(((cur + 1) % 3))
	from=$(((cur + 2) % 3)) # neither the leader nor the target
	before=$(acks "$NV_TMP/w$from.1.log")
	setfattr -n user.nova.leader -v "s$to" "${M[from]}/b/s" ||
		fail "setfattr leader=s$to on star $from's mount (s$cur leads) failed"
	for i in 0 1 2; do
		nv_await 10 "star $i sees s$to lead" bash -c "[[ \$(getfattr --absolute-names --only-values -n user.nova.leader '${M[i]}/b/s') == 's$to '* ]]"
	done
	# The writers go on under the new leader before the next move.
	for i in 0 1 2; do
		n=$(acks "$NV_TMP/w$i.1.log")
		nv_await 30 "writer $i acked under s$to" acks_at_least "$NV_TMP/w$i.1.log" $((n + 10))
	done
	cur=$to
done
say "ok: $MOVES handoffs under load in $(nv_elapsed "$t0") s, each asked on a mount that did not lead"
writers_stop 1
# s0 leads for the checks (s2, which may have led last, releases an idle
# stream; a mount that does not lead a vacant stream keeps its own view).
setfattr -n user.nova.leader -v s0 "${M[1]}/b/s" || fail "setfattr leader=s0 of b/s on star 1"
grep -q "handed from star" "${L[1]}" "${L[2]}" "${L[0]}" ||
	fail "no mount logged the handoff it asked for"
logs1=("$NV_TMP/lead.log" "$NV_TMP/w0.1.log" "$NV_TMP/w1.1.log" "$NV_TMP/w2.1.log")
say "failed appends during the handoffs: $(errnames "${logs1[@]}")"
out=$(python3 "$RECORDS" verify "${M[0]}/b/s" "${logs1[@]}" 2>&1) || {
	cp "${M[0]}/b/s" "$NV_TMP/stream.0" || true
	fail "star 0's view: $out (a copy in $NV_TMP/stream.0)"
}
for i in 1 2; do
	nv_await 20 "star $i reads what star 0 reads" cmp -s "${M[0]}/b/s" "${M[i]}/b/s"
done
say "ok: $out: every acked record once, each writer's in order; the three mounts read identical bytes"

# 2. Refusals.
nv_refuse "Invalid argument" "leader=an unknown star" setfattr -n user.nova.leader -v nosuch "${M[1]}/b/s"
nv_refuse "Invalid argument" "leader=a malformed id" setfattr -n user.nova.leader -v 'Not_A_Star' "${M[1]}/b/s"

# 3. Idle release (s2), then a vacant stream set from another mount.
printf 'v 0 x\n' >> "${M[2]}/b/v" || fail "append to b/v on star 2"
[[ $(leader_of "${M[0]}/b/v") == "s2 "* ]] || fail "s2 should lead b/v: $(leader_of "${M[0]}/b/v")"
nv_await 40 "b/v goes vacant (lease_idle_s=3 on s2)" bash -c "[ \"\$(getfattr --absolute-names --only-values -n user.nova.leader '${M[0]}/b/v')\" = - ]"
grep -q "no append for 3 s: releasing its writer lease" "${L[2]}" ||
	fail "star 2 did not log the idle release of b/v"
setfattr -n user.nova.leader -v s1 "${M[0]}/b/v" || fail "setfattr leader=s1 of vacant b/v on star 0"
[[ $(leader_of "${M[2]}/b/v") == "s1 "* ]] || fail "vacant b/v set to s1 from star 0: $(leader_of "${M[2]}/b/v")"
printf 'v 1 x\n' >> "${M[0]}/b/v" || fail "append to b/v on star 0 (s1 leads it)"
nv_await 10 "star 2 reads both records of b/v" bash -c "[ \"\$(cat '${M[2]}/b/v')\" = \"\$(printf 'v 0 x\\nv 1 x')\" ]"
say "ok: an idle stream goes vacant (logged); set from another mount it is placed on the named star"

# 4. Graceful unmount of the leader (s1) while the others write.
setfattr -n user.nova.leader -v s1 "${M[2]}/b/s" || fail "setfattr leader=s1 of b/s on star 2"
[[ $(leader_of "${M[0]}/b/s") == "s1 "* ]] || fail "b/s should be led by s1: $(leader_of "${M[0]}/b/s")"
P1=${P[1]}
unset 'P[1]'
writers_start 2 b/s
for i in 0 2; do nv_await 30 "writer $i.2 gets going" acks_at_least "$NV_TMP/w$i.2.log" 20; done
t0=$EPOCHREALTIME
fusermount3 -u "${M[1]}" || fail "unmounting star 1"
nv_await 30 "star 1 exits" bash -c "! kill -0 $P1 2>/dev/null"
wait "$P1" || fail "star 1 exited with status $? after a clean unmount"
grep -q "writer lease(s) released with their flush" "${L[1]}" || fail "star 1 did not release its leases at close"
for i in 0 2; do
	nv_await 10 "star $i is nudged by the closing star" grep -q "nudged by star s1" "${L[i]}"
done
for i in 0 2; do
	n=$(acks "$NV_TMP/w$i.2.log")
	nv_await 30 "writer $i goes on after star 1 closed" acks_at_least "$NV_TMP/w$i.2.log" $((n + 20))
done
say "ok: star 1 closed gracefully in $(nv_elapsed "$t0") s; the writers on stars 0 and 2 go on"
writers_stop 2
say "failed appends around the close: $(errnames "$NV_TMP/w0.2.log" "$NV_TMP/w2.2.log")"
# The closing star left b/s vacant and a writer took it; s0 leads it now
# (a take on its mount: its view reloaded), so star 2 reads through it.
setfattr -n user.nova.leader -v s0 "${M[0]}/b/s" || fail "setfattr leader=s0 of b/s on star 0"
logs=("${logs1[@]}" "$NV_TMP/w0.2.log" "$NV_TMP/w2.2.log")
out=$(python3 "$RECORDS" verify "${M[0]}/b/s" "${logs[@]}" 2>&1) || {
	cp "${M[0]}/b/s" "$NV_TMP/stream.0" || true
	fail "star 0's view after the close: $out (a copy in $NV_TMP/stream.0)"
}
nv_await 20 "star 2 reads what star 0 reads" cmp -s "${M[0]}/b/s" "${M[2]}/b/s"
say "ok: $out: every acked record once across the handoffs, the idle release and the close"
