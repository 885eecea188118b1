#!/bin/bash
# t_express_zones: the express bucket set survives the loss of the star's
# zone.  Three s3rver instances on 127.0.0.1 (tests/s3/s3rver.sh): the
# standard bucket, zone a and zone b.  The daemon mounts with
#   store=STD,express=A&zone=a;B&zone=b,location=a
# and short store timeouts (connect 300 ms, request 2 s, 1 retry).  An
# express stream (class set on the empty stream) and a standard one get
# numbered records from one writer each (lib.sh's writer.py: one write()
# per record, the last acknowledged number logged) while a follower on
# each .follow/ file checks every record it reads, in order.  Then zone
# a's server is SIGKILLed mid-run.  Checked:
#  - before the kill the express slots land in zone a, none in b;
#  - after it appends go on for both streams (no write fails), express
#    slots now land in zone b, and the daemon logs the failover ("zone a
#    ... failed on ...: trying the other zones first"), a few times (once
#    per backoff), not once per slot;
#  - the followers keep reading: each sees every acknowledged record, in
#    order, with the right bytes; cat of both streams (lib.sh's
#    verify.py): records 1..M in order, M = the last acknowledged record
#    (or one more), M == user.nova.seq, st_size == bytes read;
#  - the daemon unmounts cleanly with zone a down;
#  - a restart with zone a still down mounts, serves the standard stream,
#    and reads the express records written after the kill (their slots
#    are in zone b; the pages holding older records are not readable
#    until zone a is back: those slots exist only there, and reading
#    them is EIO);
#  - zone a comes back (same port, same data): a restart reads every
#    record again, cold (page cache dropped), through the set; the age
#    caps (15 s in every mount: a marker's ripening time is fixed when it
#    is born) then settle everything into the standard bucket and every
#    chain slot is deleted from both zones; clean unmount.
#  - `novactl fsck --full -o ...,express=...` passes with every zone up,
#    both while express slots exist in both zones and after settlement.
#    While zone a is down, what fsck says is only noted.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "${TESTLIB:-$(dirname "$0")/../integration/lib.sh}"
. "$(dirname "$0")/s3lib.sh"
unset NOVAFS_TEST_STORE
: "${NV_TIMEOUT:=240}"
nv_init
command -v node >/dev/null && command -v npm >/dev/null || nv_skip "node and npm are needed for s3rver"

# ---------------------------------------------------------------- servers
declare -A URL=() PORT=()
S3=$NV_TMP/s3
CACHE=${NOVAFS_S3RVER_CACHE:-$PWD/.cache/s3rver-3.7.1}   # as s3rver.sh has it
T='&connect_timeout_ms=300&request_timeout_ms=2000&retries=1'
for z in std a b; do
	rc=0
	s3_s3rver_start "$S3/$z" > /dev/null || rc=$?
	((rc == 0)) || { ((rc == 77)) && nv_skip "s3rver cannot be installed here"; fail "s3rver $z did not start ($rc)"; }
	nv_bg "$(cat "$S3/$z/s3rver.pid")"
	URL[$z]=$NOVAFS_S3RVER_URL
	PORT[$z]=${NOVAFS_S3RVER_ENDPOINT##*:}
done
say "s3rver: standard on ${PORT[std]}, zone a on ${PORT[a]}, zone b on ${PORT[b]}"
STD_URL=${URL[std]}$T
EXPRESS="${URL[a]}$T&zone=a;${URL[b]}$T&zone=b"
BASE_OPTS="store=$STD_URL,express=$EXPRESS,location=a,age_cap_express_s=15,age_cap_standard_s=15"

# zone_slots Z: express chain slots stored by zone Z's s3rver (its files).
zone_slots() {
	find "$S3/$1/data" -path '*/chains/express/*' -name '*._S3rver_object' 2>/dev/null | wc -l
}
# all_slots: chain slots of either class in any of the three servers.
all_slots() {
	find "$S3"/*/data -path '*/chains/*' -name '*._S3rver_object' 2>/dev/null | wc -l
}

# ---------------------------------------------------------------- run
nv_crash_tools
# follow.py PATH NAME PAD OUT: read PATH (a .follow/ file) forever; each
# line must be the next record of NAME (writer.py's format); the number
# of records checked is rewritten into OUT.
cat > "$NV_TMP/follow.py" <<'PY'
import os, sys
path, name, pad, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
n, buf = 0, b""
fd = os.open(path, os.O_RDONLY)
while True:
    chunk = os.read(fd, 65536)
    if not chunk:
        sys.exit("%s: end of file on the follow view after record %d" % (name, n))
    buf += chunk
    *lines, buf = buf.split(b"\n")
    for l in lines:
        n += 1
        want = ("%d %s %s" % (n, name, "x" * (n * 131 % pad))).encode()
        if l != want:
            sys.exit("%s: follower read %r... as record %d" % (name, l[:40], n))
    if lines:
        with open(out + ".tmp", "w") as f:
            f.write("%d\n" % n)
        os.rename(out + ".tmp", out)
PY

nv_start "$BASE_OPTS"
grep -q 'bucket set .*preferring zone a' "$LOG" || fail "the daemon did not log its bucket set preferring zone a"
nv_writers_setup "$MNT/z" "ex:700:express" "st:700"
nv_expect_eq "$(nv_xattr "$MNT/z/ex" user.nova.class)" express "class of ex"
nv_writers_start
F_PIDS=()
for w in ex st; do
	python3 "$NV_TMP/follow.py" "$MNT/.follow/z/$w" "$w" 700 "$NV_TMP/followed.$w" \
		2> "$NV_TMP/follow.$w.err" &
	F_PIDS+=($!)
	nv_bg "$!"
done
nv_writers_progress 10
sleep 3
a0=$(zone_slots a) b0=$(zone_slots b)
((a0 > 0)) || fail "no express slot in zone a before the kill"
((b0 == 0)) || fail "$b0 express slots in zone b while zone a is up (location=a)"
say "before the kill: ex $(nv_writers_last ex), st $(nv_writers_last st) acknowledged; express slots: zone a $a0, zone b $b0"

# ---------------------------------------------------------------- kill zone a
kill -9 "$(cat "$S3/a/s3rver.pid")"
nv_wait_pid_exit "$(cat "$S3/a/s3rver.pid")" 10 || fail "zone a's s3rver survived kill -9"
T_KILL=$EPOCHREALTIME
ex_k=$(nv_writers_last ex) st_k=$(nv_writers_last st)
say "zone a killed: ex $ex_k, st $st_k acknowledged"
# The size 1.5 s later (past the 1 s attribute cache): every byte above
# it was acknowledged after the kill, so its slot is in zone b.
sleep 1.5
size_k=$(nv_size "$MNT/z/ex")
sleep 4.5
for i in 0 1; do
	w=${NV_W_NAMES[i]}
	nv_pid_alive "${NV_W_PIDS[i]}" || fail "writer $w ended after the kill: $(cat "$NV_TMP/writer.$w.err")"
	nv_pid_alive "${F_PIDS[i]}" || fail "follower $w ended after the kill: $(cat "$NV_TMP/follow.$w.err")"
done
ex_e=$(nv_writers_last ex) st_e=$(nv_writers_last st)
secs=$(nv_elapsed "$T_KILL")
((ex_e - ex_k >= 20)) || fail "express appends stalled after the kill: $ex_k -> $ex_e in ${secs}s"
((st_e - st_k >= 20)) || fail "standard appends stalled after the kill: $st_k -> $st_e in ${secs}s"
b1=$(zone_slots b)
((b1 > 0)) || fail "no express slot in zone b after the failover"
grep -q 'zone a .* failed on .*trying the other zones first' "$LOG" ||
	fail "the daemon did not log the failover to the other zones"
nfail=$(grep -c 'zone a .* failed on ' "$LOG")
((nfail <= 12)) || fail "zone a was tried $nfail times in ${secs}s: a dead zone must cost one request per backoff, not one per slot"
say "ok: ${secs}s after the kill: ex +$((ex_e - ex_k)) records ($(awk -v n=$((ex_e - ex_k)) -v s="$secs" 'BEGIN { printf "%.0f", n / s }')/s), st +$((st_e - st_k)); $b1 express slots in zone b; zone a tried and failed $nfail times"

# Stop the writers (a write in flight may still be acknowledged: verify.py
# allows the one record beyond the last logged).
for i in 0 1; do kill -TERM "${NV_W_PIDS[i]}" 2>/dev/null || true; done
for i in 0 1; do wait "${NV_W_PIDS[i]}" 2>/dev/null || true; done
NV_W_PIDS=()
for i in 0 1; do
	w=${NV_W_NAMES[i]}
	seq=$(nv_xattr "$MNT/z/$w" user.nova.seq)
	caught_up() { [ "$(cat "$NV_TMP/followed.$1" 2>/dev/null)" = "$2" ]; }
	nv_await 20 "the $w follower to read all $seq records (it has $(cat "$NV_TMP/followed.$w" 2>/dev/null))" caught_up "$w" "$seq"
	nv_pid_alive "${F_PIDS[i]}" || fail "follower $w: $(cat "$NV_TMP/follow.$w.err")"
	kill -TERM "${F_PIDS[i]}" 2>/dev/null || true
	wait "${F_PIDS[i]}" 2>/dev/null || true
	say "ok: the $w follower read all $seq records in order, across the kill"
done
nv_writers_verify "live, zone a down"
say "ok: cat: ex $((NV_W_NEXT[ex] - 1)) records, st $((NV_W_NEXT[st] - 1)) records, every acknowledged one, in order"
nv_stop

# ---------------------------------------------------------------- fsck, zone a down
rc=0
"$NOVACTL" fsck -o "data_dir=$DATA,store=$STD_URL,express=$EXPRESS,location=a" > "$NV_TMP/fsck.down" 2>&1 || rc=$?
say "note: fsck with zone a down: status $rc, $(tail -n 1 "$NV_TMP/fsck.down")"

# ---------------------------------------------------------------- restart, zone a down
nv_start "$BASE_OPTS"
python3 "$NV_TMP/verify.py" "$MNT/z" "st=$((NV_W_NEXT[st] - 1))" > /dev/null ||
	fail "st after a restart with zone a down: $(python3 "$NV_TMP/verify.py" "$MNT/z" "st=$((NV_W_NEXT[st] - 1))" 2>&1)"
# The express bytes from the first page past the kill-time size on lie in
# slots written after the kill: zone b.
off=$(( (size_k + 4095) / 4096 * 4096 ))
python3 - "$MNT/z/ex" "$off" "$NV_TMP/ex.tail" <<'PY' || fail "express records written after the kill are not readable with zone a down (zone b holds them)"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
off, data = int(sys.argv[2]), b""
while True:
    c = os.pread(fd, 1 << 20, off + len(data))
    if not c:
        break
    data += c
open(sys.argv[3], "wb").write(data)
PY
python3 - "$NV_TMP/ex.tail" <<'PY' || fail "the express bytes read from zone b are wrong"
import sys
data = open(sys.argv[1], "rb").read()
lines = data.split(b"\n")[1:-1]          # the first line is cut by the page boundary
if len(lines) < 5:
    sys.exit("only %d records" % len(lines))
first = int(lines[0].split()[0])
for i, l in enumerate(lines, first):
    if l != ("%d ex %s" % (i, "x" * (i * 131 % 700))).encode():
        sys.exit("record %d: %r" % (i, l[:40]))
print(len(lines), first)
PY
say "ok: restart with zone a down: st whole, ex from byte $off on (records written after the kill) read from zone b"
python3 - "$MNT/z/ex" <<'PY' || fail "reading an express page whose slot is only in zone a (down) is not EIO"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    os.pread(fd, 4096, 0)
except OSError as e:
    sys.exit(0 if e.errno == errno.EIO else "errno %d (%s)" % (e.errno, os.strerror(e.errno)))
sys.exit("the read succeeded")
PY
say "ok: the first page of ex (its slot only in zone a) reads as EIO"
echo "after restart" >> "$MNT/z/st" || fail "standard append after a restart with zone a down"
nv_stop

# ---------------------------------------------------------------- zone a back
# A torn copy, as s3rver leaves one when it is killed mid-PUT (it writes
# the object file in place): half of a slot that zone b holds, planted in
# zone a while it is down.  Reads, settling and fsck must read around it
# (set.h invariant 4), not fail on the preferred zone's bad copy.
torn_src=$(find "$S3/b/data" -path '*/chains/express/*' -name '*._S3rver_object' | sort | sed -n 1p)
[ -n "$torn_src" ] || fail "no express slot in zone b to tear a copy of"
torn_rel=${torn_src#"$S3/b/data/"}
for f in "${torn_src%._S3rver_object}"._S3rver_*; do
	mkdir -p "$(dirname "$S3/a/data/${f#"$S3/b/data/"}")"
	cp "$f" "$S3/a/data/${f#"$S3/b/data/"}"
done
truncate -s $(($(stat -c %s "$torn_src") / 2)) "$S3/a/data/$torn_rel"
say "planted a torn copy of ${torn_rel%._S3rver_object} in zone a"
(
	NODE_OPTIONS=--openssl-legacy-provider exec node "$CACHE/node_modules/.bin/s3rver" \
		-d "$S3/a/data" -a 127.0.0.1 -p "${PORT[a]}" --no-vhost-buckets \
		--configure-bucket novafs-test >> "$S3/a/s3rver.log" 2>&1 < /dev/null
) &
nv_bg "$!"
s3_wait_http 30 "http://127.0.0.1:${PORT[a]}/novafs-test" || fail "zone a's s3rver did not come back"
say "zone a back on port ${PORT[a]} with its data"
rc=0
"$NOVACTL" fsck -o "data_dir=$DATA,store=$STD_URL,express=$EXPRESS,location=a" --full > "$NV_TMP/fsck.up" 2>&1 || rc=$?
((rc == 0)) || { head -n 30 "$NV_TMP/fsck.up" >&2; fail "novactl fsck --full with express slots in both zones: status $rc"; }
say "ok: fsck --full with express slots in zones a and b: $(tail -n 1 "$NV_TMP/fsck.up")"
nv_start "$BASE_OPTS,read_grace_s=1,audit_interval_ms=200"
nv_drop_caches
python3 "$NV_TMP/verify.py" "$MNT/z" "ex=$((NV_W_NEXT[ex] - 1))" > "$NV_TMP/verify.out" 2>&1 ||
	fail "ex with every zone up: $(cat "$NV_TMP/verify.out")"
say "ok: every express record reads back cold through the set ($(cat "$NV_TMP/verify.out"))"
nv_wait_settled 90 "$MNT/z/ex" "$MNT/z/st"
no_slots() { (($(all_slots) == 0)); }
nv_await 30 "every chain slot to be deleted from the three buckets ($(all_slots) left)" no_slots
nv_drop_caches
python3 "$NV_TMP/verify.py" "$MNT/z" "ex=$((NV_W_NEXT[ex] - 1))" > "$NV_TMP/verify.out" 2>&1 ||
	fail "ex after settling: $(cat "$NV_TMP/verify.out")"
say "ok: settled into the standard bucket, no slot left in any zone; ex reads back ($(cat "$NV_TMP/verify.out"))"
nv_stop
rc=0
"$NOVACTL" fsck -o "data_dir=$DATA,store=$STD_URL,express=$EXPRESS,location=a" --full > "$NV_TMP/fsck.out" 2>&1 || rc=$?
((rc == 0)) || { head -n 30 "$NV_TMP/fsck.out" >&2; fail "novactl fsck --full: status $rc"; }
say "ok: fsck --full: $(tail -n 1 "$NV_TMP/fsck.out")"
