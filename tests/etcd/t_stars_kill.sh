#!/bin/bash
# t_stars_kill.sh - kill -9 across three stars and the settle duty
# (engine/duty.h, engine/runner.h): three mounts on one etcd member and
# one shared directory store, star_lease_s=2, settlement knobs small
# (age caps 2 s, read grace 1 s, audit every 200 ms):
#   1. exactly one star holds the settle duty (user.nova.stats
#      settle_duty on each mount; sampled all through the test: never two);
#   2. star 0 leads one stream; writers on all three mounts append; star 0
#      is killed (-9) during the appends: the writers on stars 1 and 2 are
#      acked again within the documented bound (2 x star_lease_s for the
#      lease to expire, then the take's walk of star 0's epoch, waited
#      for at most take_wait = 3 x star_lease_s + 10 s); every record anybody acked,
#      star 0's included, is read exactly once from both survivors;
#   3. star 0's chains are settled by the duty and every slot of star 0
#      is deleted from the store (awaited);
#   4. the duty holder among stars 1 and 2 is killed (-9): the duty moves
#      to the last star, which settles and deletes the dead holder's
#      slots too.
# Records are "NAME n pad\n"; every writer logs "ack n" / "err n ERRNO".
# Set-up and cleanup: tests/etcd/stars_lib.sh (star 0 is the lib's
# daemon, $NV_PID; the sampler is stopped first, nv_on_exit).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
# shellcheck source=tests/etcd/stars_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/stars_lib.sh"
nv_init
nv_stars_init
SHARED=$NV_SHARED
COMMON="$NV_STARS_COMMON,attr_timeout=0,age_cap_standard_s=2,age_cap_express_s=2"
COMMON="$COMMON,settle_linger_s=1,read_grace_s=1,audit_interval_ms=200"
nv_on_exit 'kill "${SAMPLER:-}" 2>/dev/null || true'
nv_stars_012 "$COMMON"
say "three stars (pids ${P[*]}) on etcd $NOVAFS_ETCD_ENDPOINTS"

# duty I: star I's settle_duty gauge ("" when its mount does not answer).
duty() { getfattr --absolute-names --only-values -n user.nova.stats "${M[$1]}" 2>/dev/null | jq -r .settle_duty 2>/dev/null || true; }
# holders I...: the stars among I... that say they hold the duty.
holders() { local i; for i in "$@"; do [ "$(duty "$i")" = 1 ] && printf '%s ' "$i"; done; true; }
# one_holder I...: exactly one of them holds it; HOLDER gets it.
one_holder() { local h; h=$(holders "$@"); [ "$(wc -w <<< "$h")" = 1 ]; }
holder_of() { holders "$@" | tr -d ' '; }
# slots_of STAR: the live slots of STAR's chains in the shared store,
# but for the fence at the cut of each class's newest epoch: engine/trim.c
# keeps a star's mint head fenced (its row and fence) until the star
# mints a later epoch, since the head may still be live (a take's
# recovery fenced it while the star was renewing its registry lease).
slots_of() {
	python3 "$NV_SLOTS_PY" "$SHARED" | grep "/chains/[a-z]*/$1/" | python3 -c '
import sys
rows = [l.strip().split("/chains/")[1].split("/") for l in sys.stdin if l.strip()]
head = {}
for cls, star, ep, slot in rows:
    head[cls] = max(head.get(cls, ""), ep)
per = {}
for cls, star, ep, slot in rows:
    per.setdefault((cls, ep), []).append(slot)
left = sum(len(v) for (cls, ep), v in per.items() if ep != head[cls] or len(v) > 1)
print(left)'
}
no_slots_of() { [ "$(slots_of "$1")" = 0 ]; }

nv_await 20 "one star holds the settle duty" one_holder 0 1 2
h0=$(holder_of 0 1 2)
say "ok: star $h0 holds the settle duty, the others do not"
# The sampler: every 100 ms, how many live stars say they hold the duty
# (a killed star's mount is skipped: its file goes with it).
echo "0 1 2" > "$NV_TMP/alive"
(
	while :; do
		read -r -a live < "$NV_TMP/alive"
		h=$(holders "${live[@]}")
		echo "$(wc -w <<< "$h") $h" >> "$NV_TMP/duty.samples"
		sleep 0.1
	done
) &
SAMPLER=$!

cat > "$NV_TMP/writer.py" <<'PY'
import errno, os, sys
path, name, log = sys.argv[1:4]
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
out = open(log, "w", buffering=1)
n = 0
while not os.path.exists(log + ".stop"):
    try:
        os.write(fd, b"%s %d %s\n" % (name.encode(), n, b"-" * 40))
        out.write("ack %d\n" % n)
    except OSError as e:
        out.write("err %d %s\n" % (n, errno.errorcode.get(e.errno, str(e.errno))))
        if e.errno in (errno.ENOTCONN, errno.ECONNABORTED, errno.ENXIO):
            break
    n += 1
PY
# check.py STREAM LOG...: every acked record exactly once, nothing
# nobody wrote; a failed one at most once.
cat > "$NV_TMP/check.py" <<'PY'
import collections, os, sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
if lines[-1]:
    sys.exit("a torn last record: %r" % lines[-1][:60])
count = collections.Counter()
for l in lines[:-1]:
    f = l.split(b" ")
    if len(f) != 3 or not f[1].isdigit():
        sys.exit("a record nobody wrote: %r" % l[:60])
    count[(f[0].decode(), int(f[1]))] += 1
acked = 0
names = set()
for log in sys.argv[2:]:
    name = os.path.basename(log)[:-4]
    names.add(name)
    for l in open(log):
        k, n = l.split()[:2]
        c = count[(name, int(n))]
        if k == "ack" and c != 1:
            sys.exit("%s record %s acked, read %d times" % (name, n, c))
        if c > 1:
            sys.exit("%s record %s (failed) read %d times" % (name, n, c))
        acked += k == "ack"
extra = [k for k in count if k[0] not in names]
if extra:
    sys.exit("records of nobody: %r" % extra[:3])
print("%d records read, %d acked" % (len(lines) - 1, acked))
PY
acks() { local n; n=$(grep -c '^ack' "$1" 2>/dev/null) || true; echo "${n:-0}"; }
acks_at_least() { (($(acks "$1") >= $2)); }
errnames() { cat "$@" | awk '$1 == "err" { print $3 }' | sort | uniq -c | tr -s ' \n' ' '; }

# kill9 I: kill -9 star I, remove its dead mount, drop it from the sampler.
kill9() {
	local i=$1
	{ kill -9 "${P[i]}"; nv_wait_pid_exit "${P[i]}" 10 || fail "star $i survived kill -9"; } 2>/dev/null
	if ((i == 0)); then
		wait "$NV_PID" 2>/dev/null || true
		NV_PID=
		: > "$NV_TMP/daemon.pid"
		nv_unmount_dead || fail "could not remove the dead mount ${M[0]}"
	else
		wait "${P[i]}" 2>/dev/null || true
		timeout 10 fusermount3 -uz "${M[i]}" 2>/dev/null || true
	fi
	P[i]=
	local live=() j
	for j in 0 1 2; do [ -n "${P[j]}" ] && live+=("$j"); done
	echo "${live[*]}" > "$NV_TMP/alive"
	say "star $i killed (-9)"
}

# 2. Star 0 takes the stream; three writers; kill -9 of star 0.
mkdir "${M[0]}/b"
python3 -c 'import os, sys; os.write(os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644), b"lead 0 x\n")' "${M[0]}/b/s"
printf 'ack 0\n' > "$NV_TMP/lead.log"
for i in 1 2; do nv_await 10 "star $i sees the stream" test -e "${M[i]}/b/s"; done
declare -a W
for i in 0 1 2; do
	python3 "$NV_TMP/writer.py" "${M[i]}/b/s" "w$i" "$NV_TMP/w$i.log" &
	W[i]=$!
	nv_bg "${W[i]}"
done
for i in 0 1 2; do nv_await 30 "writer $i gets going" acks_at_least "$NV_TMP/w$i.log" 20; done
kill9 0
t0=$EPOCHREALTIME
nv_await 10 "the writer on star 0 ends" bash -c "! kill -0 ${W[0]} 2>/dev/null"
b1=$(acks "$NV_TMP/w1.log")
b2=$(acks "$NV_TMP/w2.log")
# The documented bound (novafs.8 "Demand settlement"): the lease expires
# within 2 x star_lease_s (4 s), the take's walk of star 0's epoch waits
# at most 3 x star_lease_s + 10 s (16 s): 20 s, and a redial.
nv_await 22 "writer 1 is acked again after the takeover" acks_at_least "$NV_TMP/w1.log" $((b1 + 20))
nv_await 22 "writer 2 is acked again after the takeover" acks_at_least "$NV_TMP/w2.log" $((b2 + 20))
say "ok: stars 1 and 2 acked again $(nv_elapsed "$t0") s after the leader died"
touch "$NV_TMP/w1.log.stop" "$NV_TMP/w2.log.stop"
for i in 1 2; do nv_await 20 "writer $i ends" bash -c "! kill -0 ${W[i]} 2>/dev/null"; done
logs=("$NV_TMP/lead.log" "$NV_TMP/w0.log" "$NV_TMP/w1.log" "$NV_TMP/w2.log")
say "failed appends: $(errnames "${logs[@]}")"
out=$(python3 "$NV_TMP/check.py" "${M[1]}/b/s" "${logs[@]}" 2>&1) ||
	fail "star 1's view: $out"
nv_await 20 "star 2 reads what star 1 reads" cmp -s "${M[1]}/b/s" "${M[2]}/b/s"
say "ok: $out: every acked record (the dead leader's too) once, on stars 1 and 2"
say "star 0's epochs settled on demand by a take: $(cat "$NV_TMP"/novafs-[12].log | grep -c '/s0 epoch [0-9]*: settling on demand' || true)"

# 3. The duty settles star 0's chains and deletes its slots.
nv_await 30 "one of stars 1 and 2 holds the settle duty" one_holder 1 2
t0=$EPOCHREALTIME
nv_await 30 "every slot of star 0 deleted (left: \$(slots_of s0))" no_slots_of s0
h1=$(holder_of 1 2)
say "ok: star $h1 holds the duty; star 0's slots are gone $(nv_elapsed "$t0") s later"
grep -q 'holds the settle duty' "$NV_TMP/novafs-$h1.log" ||
	fail "star $h1 never logged taking the duty"

# 4. Kill the duty holder: the last star takes the duty and deletes the
# dead holder's slots.
last=$((3 - h1))
kill9 "$h1"
t0=$EPOCHREALTIME
nv_await 20 "star $last takes the settle duty" one_holder "$last"
say "ok: the settle duty moved to star $last $(nv_elapsed "$t0") s after its holder died"
nv_await 30 "every slot of star $h1 deleted (left: \$(slots_of s$h1))" no_slots_of "s$h1"
# Nobody appends any more: the duty, not a take, settled them.
grep -q "/s$h1 epoch [0-9]*: settling (" "$NV_TMP/novafs-$last.log" ||
	fail "star $last never settled star $h1's epochs"
! grep -q "/s$h1 epoch [0-9]*: settling on demand" "$NV_TMP/novafs-$last.log" ||
	fail "star $h1's epochs were settled on demand, not by the duty"
say "ok: star $h1's epochs settled by the duty on star $last and its slots are gone too"
kill "$SAMPLER" 2>/dev/null
wait "$SAMPLER" 2>/dev/null || true
SAMPLER=
two=$(awk '$1 > 1' "$NV_TMP/duty.samples" | head -3)
[ -z "$two" ] || fail "two stars held the duty at once: $two"
say "ok: $(wc -l < "$NV_TMP/duty.samples") samples, never two holders"

fusermount3 -u "${M[last]}"
nv_await 30 "star $last exits" bash -c "! kill -0 ${P[last]} 2>/dev/null"
wait "${P[last]}" || fail "star $last exited with status $? after a clean unmount"
P[last]=
say "ok: star $last closed cleanly"
