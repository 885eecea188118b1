#!/bin/bash
# t_stars_three.sh - three stars (mounts) on one etcd member and one
# shared store (store=dir:, a directory on this host), each with its own
# data directory, star id, listen= port and the cluster secret,
# star_lease_s=2, all appending to ONE stream:
#   1. three writers x NV_THREE_RECORDS (200) records at once, one writer
#      per star (star 0 leads the stream; the other two are redialed to
#      it): every record is acked, present exactly once, each writer's
#      in its order, stat on stars 1 and 2 shows the leader's size (they
#      loaded the stream before the appends), and all three mounts read
#      the identical bytes (cmp);
#   2. kill -9 of the leader (star 0) while all three write: the writers
#      on stars 1 and 2 go on after its lease expires (one of them takes
#      the stream, the other is redialed to it); their appends during the
#      takeover window fail with an errno (counted by name, and which
#      records failed is logged); every record acked by anyone, star 0's
#      included, is present exactly once; no record nobody wrote; stars 1
#      and 2 read identical bytes.
# Each record is "w<writer>.<round> <n> <pad>\n", unique and naming its
# writer.  Set-up and cleanup: tests/etcd/stars_lib.sh.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
# shellcheck source=tests/etcd/stars_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/stars_lib.sh"
nv_init
nv_stars_init

N=${NV_THREE_RECORDS:-200}
COMMON="$NV_STARS_COMMON,attr_timeout=0"
declare -a M P L
# star I: star sI on its own mount, data directory, log and port.
star() {
	nv_star "$1" "$COMMON"
	M[$1]=${NV_STAR_MNT[$1]}
	L[$1]=${NV_STAR_LOG[$1]}
	P[$1]=$NV_STAR_PID
}
nv_star_lead 0 "$COMMON"
M[0]=$MNT
L[0]=$LOG
star 1
star 2
say "three stars (pids $NV_PID ${P[1]} ${P[2]}) on etcd $NOVAFS_ETCD_ENDPOINTS"

# writer.py PATH NAME LOG [N]: records "NAME n pad\n" for n = 0.. (N of
# them, or until LOG.stop exists), one write() each; LOG gets "ack n" or
# "err n ERRNO" per record.  It goes on after an error, except when the
# mount is gone.
cat > "$NV_TMP/writer.py" <<'PY'
import errno, os, sys
path, name, log = sys.argv[1], sys.argv[2], sys.argv[3]
limit = int(sys.argv[4]) if len(sys.argv) > 4 else None
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
out = open(log, "w", buffering=1)
pad = b"." * (20 + len(name) * 3)
n = 0
while (limit is None or n < limit) and not os.path.exists(log + ".stop"):
    try:
        os.write(fd, b"%s %d %s\n" % (name.encode(), n, pad))
        out.write("ack %d\n" % n)
    except OSError as e:
        out.write("err %d %s\n" % (n, errno.errorcode.get(e.errno, str(e.errno))))
        if e.errno in (errno.ENOTCONN, errno.ECONNABORTED, errno.ENXIO):
            break
    n += 1
PY
# verify.py STREAM LOG... (LOG named .../NAME.log): every acked record
# once, each writer's records in order, failed ones at most once, nothing
# else.  Prints a summary.
cat > "$NV_TMP/verify.py" <<'PY'
import collections, os, sys
data = open(sys.argv[1], "rb").read()
if not data.endswith(b"\n"):
    sys.exit("the stream does not end with a whole record (%d bytes)" % len(data))
seen = collections.defaultdict(list)
for line in data.split(b"\n")[:-1]:
    f = line.split(b" ")
    if len(f) != 3 or not f[1].isdigit():
        sys.exit("a record nobody wrote: %r" % line[:80])
    seen[f[0].decode()].append(int(f[1]))
acked_all = failed_all = 0
for log in sys.argv[2:]:
    name = os.path.basename(log)[:-4]
    acked, failed = set(), set()
    for l in open(log):
        k, n = l.split()[:2]
        (acked if k == "ack" else failed).add(int(n))
    got = seen.pop(name, [])
    if len(got) != len(set(got)):
        sys.exit("%s: a record twice: %r" % (name, [n for n, c in collections.Counter(got).items() if c > 1][:5]))
    if got != sorted(got):
        i = next(i for i in range(1, len(got)) if got[i] < got[i - 1])
        sys.exit("%s: its records out of order: ... %r ... (%d of them)" %
                 (name, got[max(0, i - 3):i + 3], len(got)))
    if acked - set(got):
        sys.exit("%s: acked records missing: %r" % (name, sorted(acked - set(got))[:10]))
    if set(got) - acked - failed:
        sys.exit("%s: records it never wrote: %r" % (name, sorted(set(got) - acked - failed)[:5]))
    acked_all += len(acked)
    failed_all += len(failed)
if seen:
    sys.exit("records of unknown writers: %r" % list(seen)[:3])
print("%d records, %d acked, %d failed" % (len(data.split(b"\n")) - 1, acked_all, failed_all))
PY
# errnames LOG...: the failures by errno name.
errnames() { cat "$@" | awk '$1 == "err" { print $3 }' | sort | uniq -c | tr -s ' \n' ' '; }
acks() { local n; n=$(grep -c '^ack' "$1" 2>/dev/null) || true; echo "${n:-0}"; }
acks_at_least() { (($(acks "$1") >= $2)); }

# 1. Star 0 takes the vacant stream with one record of its own; then
#    three writers at once.
mkdir "${M[0]}/b"
python3 - "${M[0]}/b/s" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, b"lead 0 x\n")
PY
printf 'ack 0\n' > "$NV_TMP/lead.log"
for i in 1 2; do nv_await 10 "star $i sees the stream" test -e "${M[i]}/b/s"; done
# A reader on stars 1 and 2 keeps the stream loaded there (its view as of
# now) through phase 1.
exec {R1}< "${M[1]}/b/s" {R2}< "${M[2]}/b/s"
t0=$EPOCHREALTIME
declare -a W
for i in 0 1 2; do
	python3 "$NV_TMP/writer.py" "${M[i]}/b/s" "w$i.1" "$NV_TMP/w$i.1.log" "$N" &
	W[i]=$!
	nv_bg "${W[i]}"
done
for i in 0 1 2; do
	nv_await 120 "writer $i ends" bash -c "! kill -0 ${W[i]} 2>/dev/null"
	wait "${W[i]}" || fail "writer $i exited with $?"
done
logs1=("$NV_TMP/lead.log" "$NV_TMP/w0.1.log" "$NV_TMP/w1.1.log" "$NV_TMP/w2.1.log")
[ -z "$(errnames "${logs1[@]}")" ] || fail "appends failed with no fault: $(errnames "${logs1[@]}")"
say "ok: 3 writers x $N records acked in $(nv_elapsed "$t0") s"
out=$(python3 "$NV_TMP/verify.py" "${M[0]}/b/s" "${logs1[@]}" 2>&1) || {
	cp "${M[0]}/b/s" "$NV_TMP/stream.0" || true
	fail "star 0's view: $out (a copy in $NV_TMP/stream.0)"
}
# stat on the stars that do not lead the stream (they hold it loaded
# from before the appends): the holder's acked end within attr_timeout
# (0 here), and the bytes past their own view read from the holder.
sz=$(stat -c %s "${M[0]}/b/s")
for i in 1 2; do
	t0=$EPOCHREALTIME
	nv_await 5 "stat on star $i shows star 0's size $sz" \
		bash -c "[ \"\$(stat -c %s '${M[i]}/b/s')\" = $sz ]"
	say "ok: stat on star $i shows the leader's $sz bytes after $(nv_elapsed "$t0") s"
done
for i in 1 2; do
	nv_await 20 "star $i reads what star 0 reads" cmp -s "${M[0]}/b/s" "${M[i]}/b/s"
done
exec {R1}<&- {R2}<&-
say "ok: $out: every record once, each writer's in order; the three mounts read identical bytes"

# 2. kill -9 of the leader while all three write.
for i in 0 1 2; do
	python3 "$NV_TMP/writer.py" "${M[i]}/b/s" "w$i.2" "$NV_TMP/w$i.2.log" &
	W[i]=$!
	nv_bg "${W[i]}"
done
for i in 0 1 2; do nv_await 30 "writer $i.2 gets going" acks_at_least "$NV_TMP/w$i.2.log" 30; done
nv_crash
t0=$EPOCHREALTIME
nv_await 10 "the writer on star 0 ends" bash -c "! kill -0 ${W[0]} 2>/dev/null"
before1=$(acks "$NV_TMP/w1.2.log")
before2=$(acks "$NV_TMP/w2.2.log")
nv_await 60 "writer 1 goes on after the takeover" acks_at_least "$NV_TMP/w1.2.log" $((before1 + 30))
nv_await 60 "writer 2 goes on after the takeover" acks_at_least "$NV_TMP/w2.2.log" $((before2 + 30))
say "ok: the writers on stars 1 and 2 were acked again $(nv_elapsed "$t0") s after the leader died"
touch "$NV_TMP/w1.2.log.stop" "$NV_TMP/w2.2.log.stop"
for i in 1 2; do
	nv_await 30 "writer $i.2 ends" bash -c "! kill -0 ${W[i]} 2>/dev/null"
done
logs=("${logs1[@]}" "$NV_TMP/w0.2.log" "$NV_TMP/w1.2.log" "$NV_TMP/w2.2.log")
say "failed appends during the takeover: stars 1 and 2: $(errnames "$NV_TMP/w1.2.log" "$NV_TMP/w2.2.log")star 0 (killed): $(errnames "$NV_TMP/w0.2.log")"
for i in 1 2; do
	grep '^err' "$NV_TMP/w$i.2.log" | awk '{ print $3 }' | sort -u | while read -r e; do
		case $e in
		EHOSTUNREACH|EAGAIN|ETIMEDOUT|EIO) ;;
		*) fail "writer $i failed with $e during the takeover (want EHOSTUNREACH, EAGAIN, ETIMEDOUT or EIO)" ;;
		esac
	done
done
out=$(python3 "$NV_TMP/verify.py" "${M[1]}/b/s" "${logs[@]}" 2>&1) || {
	cp "${M[1]}/b/s" "$NV_TMP/stream.1" || true
	fail "star 1's view: $out (a copy in $NV_TMP/stream.1)"
}
nv_await 20 "star 2 reads what star 1 reads" cmp -s "${M[1]}/b/s" "${M[2]}/b/s"
say "ok: $out: every acked record (the dead leader's too) once, in each writer's order; stars 1 and 2 read identical bytes"

for i in 1 2; do
	fusermount3 -u "${M[i]}"
	nv_await 30 "star $i exits" bash -c "! kill -0 ${P[i]} 2>/dev/null"
	wait "${P[i]}" || fail "star $i exited with status $? after a clean unmount"
	P[i]=
done
say "ok: stars 1 and 2 closed cleanly"
