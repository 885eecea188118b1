#!/bin/bash
# t_settle_crash: a crash at any commit step of settle and trim-check re-runs
# to the same result (DESIGN.md 4.7).  For each failpoint
#   settle.after_publish   objects published, the visibility CAS not done
#   settle.after_commit    the CAS done, the covered span refs not deleted
#   settle.before_resolve  the era's streams done, markers not resolved
#   trim.before_delete     retired slots about to be deleted
#   trim.after_delete      slots deleted, the trimmed cursor not advanced
# the daemon starts with NOVAFS_FAILPOINTS="<point>=crash@1"; a writer
# appends deterministic records to three streams (hot: 64 KiB records;
# cold: small records; an express stream) and notes each acknowledged one;
# the daemon must die with status 77 at that point (its log says so); the
# dead mount is removed, novactl fsck passes on the crashed store (a
# settle cut short is a note, not a violation), and the daemon restarts
# without failpoints.  Then:
# every acknowledged record is there, in order, with at most the one write
# in flight beyond it (user.nova.seq agrees), the bytes are the expected
# ones; everything settles (settled == seq, no span ref, no chain slot left,
# objects well formed and cut at the cap) and the store holds exactly the
# objects the layouts name; the bytes read back identical; after a clean
# unmount novactl fsck --full passes.  One more round kills the daemon with
# SIGKILL at a random moment while it settles.  The streams carry on from
# round to round, after a first round without a crash (so that every crash
# meets settled history and a standing tail object to extend).  Each point
# crashes at its first hit, settle.after_publish and settle.before_resolve
# also at their second.
# NOVAFS_SOAK=1: 20 rounds per failpoint (after the first, crashing at hit
# 1-3) and 20 kill rounds.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
# A soak runs ~100 rounds of ~7 s: give the watchdog room.
[ -z "${NOVAFS_SOAK:-}" ] || : "${NV_TIMEOUT:=3600}"
nv_init
command -v jq >/dev/null || nv_skip "jq is not installed"
unset NOVAFS_FAILPOINTS

POINTS=(settle.after_publish settle.after_commit settle.before_resolve trim.before_delete trim.after_delete)
if [ -n "${NOVAFS_SOAK:-}" ]; then
	ROUNDS=20 KILLS=20
else
	ROUNDS=1 KILLS=1
fi
CAP=$((2 * 1048576))
NV_OPTS="settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=1,age_cap_express_s=1,output_cap_mib=2,read_grace_s=1,audit_interval_ms=100"
STREAMS=(hot cold fast)

# gen.py: record n of a stream (deterministic).
cat > "$NV_TMP/gen.py" <<'PY'
import random
def rec(stream, n):
    if stream == "hot":
        r = random.Random(n)
        return r.randbytes(32768) + (b"hot %08d " % n) * 2521 + b"\n"
    if stream == "cold":
        return b"cold %06d %s\n" % (n, b"c" * (n * 37 % 400))
    return b"fast %06d %s\n" % (n, b"f" * (1000 + n * 211 % 3000))
PY
# writer.py DIR STATUS NEXT_hot NEXT_cold NEXT_fast: append 64 hot, 100 cold
# and 60 fast records (interleaved), each one write(); STATUS holds the
# last acknowledged count per stream.  Stops quietly at the first failed
# write (the daemon died).
cat > "$NV_TMP/writer.py" <<'PY'
import os, sys
sys.path.insert(0, os.path.dirname(sys.argv[0]))
from gen import rec
d, status = sys.argv[1], sys.argv[2]
names = ("hot", "cold", "fast")
nxt = dict(zip(names, map(int, sys.argv[3:6])))
todo = {"hot": 64, "cold": 100, "fast": 60}
fds = {s: os.open(os.path.join(d, s), os.O_WRONLY | os.O_APPEND) for s in names}
def save():
    with open(status + ".tmp", "w") as f:
        f.write(" ".join(str(nxt[s]) for s in names) + "\n")
    os.rename(status + ".tmp", status)
save()
for i in range(100):
    for s in names:
        if i >= todo[s]:
            continue
        b = rec(s, nxt[s])
        try:
            w = os.write(fds[s], b)
        except OSError as e:
            print("writer: %s record %d: %s (the daemon died)" % (s, nxt[s], e.strerror))
            sys.exit(0)
        if w != len(b):
            sys.exit("writer: short write to %s at record %d" % (s, nxt[s]))
        nxt[s] += 1
        save()
print("writer: done at %s" % " ".join("%s=%d" % (s, nxt[s]) for s in names))
PY
# verify.py DIR TMP ACKED_hot ACKED_cold ACKED_fast: each stream holds
# records 0..M-1 exactly, ACKED <= M <= ACKED+1; prints the three M.
cat > "$NV_TMP/verify.py" <<'PY'
import os, sys
sys.path.insert(0, sys.argv[2])
from gen import rec
d = sys.argv[1]
out = []
for s, acked in zip(("hot", "cold", "fast"), map(int, sys.argv[3:6])):
    fd = os.open(os.path.join(d, s), os.O_RDONLY)
    size = os.fstat(fd).st_size
    parts, off = [], 0
    while True:
        try:
            b = os.pread(fd, 1 << 16, off)
        except OSError as e:
            sys.exit("%s: read at byte %d of %d failed: %s (acknowledged bytes unreadable)"
                     % (s, off, size, e.strerror))
        if not b:
            break
        parts.append(b)
        off += len(b)
    os.close(fd)
    data = b"".join(parts)
    if len(data) != size:
        sys.exit("%s: read %d bytes but st_size is %d" % (s, len(data), size))
    seq = int(os.getxattr(os.path.join(d, s), "user.nova.seq"))
    off, n = 0, 0
    while off < len(data):
        r = rec(s, n)
        if data[off:off + len(r)] != r:
            sys.exit("%s: record %d at byte %d is wrong or torn: %r..., expected %r..."
                     % (s, n, off, data[off:off + 40], r[:40]))
        off += len(r)
        n += 1
    if n != seq:
        sys.exit("%s: %d records read but user.nova.seq is %d" % (s, n, seq))
    if n < acked:
        sys.exit("%s: %d records, but the writer saw %d acknowledged: acknowledged records lost"
                 % (s, n, acked))
    if n > acked + 1:
        sys.exit("%s: %d records, but the writer had at most %d in flight" % (s, n, acked + 1))
    out.append(str(n))
print(" ".join(out))
PY

B=$MNT/c
declare -A NEXT=([hot]=0 [cold]=0 [fast]=0)
nv_start
mkdir "$B"
for s in "${STREAMS[@]}"; do : > "$B/$s"; done
setfattr -n user.nova.class -v express "$B/fast"
nv_stop

# start_writer: the writer in the background (sets p_writer).
start_writer() {
	rm -f "$NV_TMP/wstatus"
	python3 "$NV_TMP/writer.py" "$B" "$NV_TMP/wstatus" "${NEXT[hot]}" "${NEXT[cold]}" "${NEXT[fast]}" \
		> "$NV_TMP/writer.out" 2>&1 &
	p_writer=$!
	nv_bg "$p_writer"
}

# finish_writer: wait for it (the daemon is gone or done).
finish_writer() {
	local rc=0
	nv_wait_pid_exit "$p_writer" 30 || fail "$LABEL: the writer hangs after the daemon died"
	nv_wait_bg "$p_writer" || rc=$?
	((rc == 0)) || fail "$LABEL: writer failed: $(cat "$NV_TMP/writer.out")"
	say "$LABEL: $(tail -n 1 "$NV_TMP/writer.out")"
}

listed_keys() {
	local s
	for s in "${STREAMS[@]}"; do nv_layout "$B/$s" | jq -r '.settled_objects[].key'; done | sort
}
stored_keys() {
	if [ -d "$DATA/objects/streams" ]; then
		(cd "$DATA/objects" && find streams -type f ! -name '*#*' | sort)
	fi
}
no_stray_objects() { [ -z "$(comm -13 <(listed_keys) <(stored_keys))" ]; }

# recover_and_check: restart without failpoints; check the acknowledged
# records, wait for everything to settle, check objects and bytes; clean
# unmount and fsck --full.
recover_and_check() {
	local acked m s missing state
	nv_start
	read -r -a acked < "$NV_TMP/wstatus"
	m=$(python3 "$NV_TMP/verify.py" "$B" "$NV_TMP" "${acked[@]}") ||
		fail "$LABEL: after recovery the streams are wrong (see above)"
	read -r NEXT[hot] NEXT[cold] NEXT[fast] <<< "$m"
	say "ok: $LABEL: after recovery hot/cold/fast hold records 0..$m (acknowledged: ${acked[*]})"
	# Wait until every stream is settled and every slot retired.  Slots
	# retired while a stream is not settled mean span refs naming deleted
	# slots: read everything back at once to see what is lost.
	all_settled() { nv_is_settled "$B/hot" && nv_is_settled "$B/cold" && nv_is_settled "$B/fast"; }
	state() {
		for s in "${STREAMS[@]}"; do
			printf '%s: seq %s settled %s span refs %s; ' "$s" "$(nv_xattr "$B/$s" user.nova.seq)" \
				"$(nv_xattr "$B/$s" user.nova.settled)" "$(nv_layout "$B/$s" | jq .span_refs)"
		done
		printf '%s chain slots left; last settle errors: %s' "$(nv_slot_files | wc -l)" \
			"$(awk -v n="start #$NV_INCARNATION:" 'index($0, n) { f = 1 } f' "$LOG" |
				grep -E 'ERROR settle|WARN settle' | tail -n 2 | cut -d' ' -f3- | tr '\n' ' ')"
	}
	t0=$EPOCHREALTIME
	until all_settled && nv_no_slots; do
		if nv_no_slots && ! all_settled; then
			sleep 0.5 # let a late settle show itself
			if ! all_settled; then
				state=$(state)
				nv_remount
				nv_drop_caches
				python3 "$NV_TMP/verify.py" "$B" "$NV_TMP" "${NEXT[hot]}" "${NEXT[cold]}" "${NEXT[fast]}" > /dev/null ||
					fail "$LABEL: every chain slot was deleted while streams were not settled, and after a remount acknowledged records are lost (see above): $state"
				fail "$LABEL: every chain slot was deleted while streams were not settled: $state"
			fi
		fi
		if awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { exit !(b - a > 60) }'; then
			state=$(state)
			# Read everything back through a fresh daemon (its caches
			# could still hold bytes whose slots are gone).
			nv_remount
			nv_drop_caches
			python3 "$NV_TMP/verify.py" "$B" "$NV_TMP" "${NEXT[hot]}" "${NEXT[cold]}" "${NEXT[fast]}" > /dev/null ||
				fail "$LABEL: not everything settled within 60 s of the restart, and after a remount acknowledged records are lost (see above): $state"
			fail "$LABEL: not everything settled within 60 s of the restart (the bytes still read back): $state"
		fi
		sleep 0.1
	done
	nv_await 30 "$LABEL: replaced settled objects to be reclaimed" no_stray_objects
	missing=$(comm -23 <(listed_keys) <(stored_keys))
	[ -z "$missing" ] || fail "$LABEL: settled objects named by a layout are missing: $missing"
	for s in "${STREAMS[@]}"; do
		nv_expect_eq "$(nv_layout "$B/$s" | jq -r .span_refs)" 0 "$LABEL: $s span refs"
		nv_check_objects "$B/$s" "$CAP" > /dev/null
	done
	say "ok: $LABEL: all settled, no slot left, the store holds exactly the $(listed_keys | wc -l) listed objects"
	nv_drop_caches
	python3 "$NV_TMP/verify.py" "$B" "$NV_TMP" "${NEXT[hot]}" "${NEXT[cold]}" "${NEXT[fast]}" > /dev/null ||
		fail "$LABEL: after settling the streams are wrong (see above)"
	nv_stop
	nv_fsck --full
}

T_ALL=$EPOCHREALTIME
# A first round without a crash, so that every crash round meets streams
# with settled history and a standing tail object to extend.
LABEL="warm-up"
nv_start
start_writer
nv_wait_pid_exit "$p_writer" 60 || fail "warm-up: the writer hangs"
finish_writer
nv_stop
recover_and_check
# The rounds: "point@hit".  Each point crashes at its first hit;
# settle.after_publish and settle.before_resolve also at their second (an
# era after the first one: the re-run then meets a window that grew
# meanwhile).  Soak: 20 rounds per point,
# the first at hit 1, the others at hit 1-3.
SPECS=()
for point in "${POINTS[@]}"; do
	SPECS+=("$point@1")
	for ((round = 2; round <= ROUNDS; round++)); do SPECS+=("$point@$((1 + RANDOM % 3))"); done
done
[ -n "${NOVAFS_SOAK:-}" ] || SPECS+=("settle.after_publish@2" "settle.before_resolve@2")
round=0
for spec in "${SPECS[@]}"; do
	point=${spec%@*} hit=${spec##*@}
	round=$((round + 1))
	{
		LABEL="$spec (round $round of ${#SPECS[@]})"
		T0=$EPOCHREALTIME
		NOVAFS_FAILPOINTS="$point=crash@$hit" nv_start
		start_writer
		nv_wait_daemon_exit 60
		finish_writer
		((NV_EXIT_RC == 77)) ||
			fail "$LABEL: the daemon exited with status $NV_EXIT_RC, expected 77 (the failpoint crash)"
		# The crash must be this incarnation's, at this point.
		awk -v n="start #$NV_INCARNATION:" 'index($0, n) { f = 1 } f' "$LOG" |
			grep -q "failpoint: $point: crash" ||
			fail "$LABEL: the daemon log does not show the crash at $point"
		say "ok: $LABEL: the daemon died at $point (status 77) after $(nv_elapsed "$T0") s"
		nv_fsck
		recover_and_check
		say "$LABEL: round done in $(nv_elapsed "$T0") s"
	}
done

for ((round = 1; round <= KILLS; round++)); do
	LABEL="kill -9 #$round"
	T0=$EPOCHREALTIME
	nv_start
	jobs0=$(nv_stat settle_jobs)
	start_writer
	settling() { (($(nv_stat settle_jobs) > jobs0)); }
	nv_await 30 "$LABEL: a settle job to start" settling
	sleep "0.$(printf '%03d' $((RANDOM % 1000)))"
	nv_crash
	finish_writer
	nv_fsck
	recover_and_check
	say "$LABEL: round done in $(nv_elapsed "$T0") s"
done
say "all rounds in $(nv_elapsed "$T_ALL") s"
