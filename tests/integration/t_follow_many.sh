#!/bin/bash
# t_follow_many: 1,000 parked followers over 100 streams cost no threads.
# One python process opens MOUNT/.follow/m/sNNN ten times per stream (1,000
# handles), reads each to the end of its one record, then parks a blocking
# os.read() per handle in 1,000 threads.  Checked:
#  - stats parked_readers reaches 1,000 (the reads really park in the
#    daemon);
#  - the daemon's thread count (/proc/PID/status Threads) does not grow
#    with them (a few threads of slack over the count taken after a warm-up
#    that already made libfuse start its worker threads), and it burns no
#    CPU while they are parked;
#  - one append per stream wakes all 1,000: every read returns exactly that
#    stream's new record (bounded wait), stats wakes grows by >= 1,000,
#    parked_readers falls back to 0;
#  - the follower process exits 0 and the daemon unmounts cleanly.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
nv_start

NSTREAMS=100
PER=10
N=$((NSTREAMS * PER))
SLACK=4

# mkstreams BUCKET N: N streams BUCKET/s000.. with one record "init sNNN".
mkstreams() {
	local s
	mkdir "$MNT/$1"
	for ((s = 0; s < $2; s++)); do
		printf 'init s%03d\n' "$s" >> "$MNT/$1/$(printf 's%03d' "$s")"
	done
}
# wakeall BUCKET N: append "wake sNNN" to each of the N streams.
wakeall() {
	local s
	for ((s = 0; s < $2; s++)); do
		printf 'wake s%03d\n' "$s" >> "$MNT/$1/$(printf 's%03d' "$s")"
	done
}
mkstreams warm 10
mkstreams m "$NSTREAMS"
say "created $NSTREAMS streams (and 10 for a warm-up) with one record each"

# followers.py MNT BUCKET NSTREAMS PER READYFILE: open PER follow handles
# per stream; in one thread per handle read the existing record, then park
# a blocking read; write "ready" to READYFILE once every thread is about to
# park; each parked read must return "wake sNNN\n".  Exits 0 when all did
# (120 s bound).
cat > "$NV_TMP/followers.py" <<'PY'
import os, resource, sys, threading, time
mnt, bucket, nstreams, per, readyfile = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
n = nstreams * per
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < n + 64:
    want = n + 64 if hard == resource.RLIM_INFINITY else min(hard, n + 64)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
threading.stack_size(256 * 1024)
handles = []
for s in range(nstreams):
    for k in range(per):
        handles.append((s, os.open("%s/.follow/%s/s%03d" % (mnt, bucket, s), os.O_RDONLY)))
got = [None] * n
errors = []
lock = threading.Lock()
ready = [0]
all_ready = threading.Event()
def run(i, s, fd):
    try:
        want = b"init s%03d\n" % s
        b = b""
        while len(b) < len(want):
            r = os.read(fd, len(want) - len(b))
            if not r:
                raise RuntimeError("end-of-file before the first record")
            b += r
        if b != want:
            raise RuntimeError("first record %r, expected %r" % (b, want))
        with lock:
            ready[0] += 1
            if ready[0] == n:
                all_ready.set()
        got[i] = os.read(fd, 65536)  # at the end: parks in the daemon
    except Exception as e:
        with lock:
            errors.append("follower %d (s%03d): %s" % (i, s, e))
        all_ready.set()
t0 = time.monotonic()
threads = [threading.Thread(target=run, args=(i, s, fd), daemon=True)
           for i, (s, fd) in enumerate(handles)]
for t in threads:
    t.start()
all_ready.wait(120)
if errors:
    sys.exit("\n".join(errors[:10]))
with open(readyfile, "w") as f:
    f.write("%d threads started in %.2f s\n" % (n, time.monotonic() - t0))
deadline = time.monotonic() + 120
for t in threads:
    t.join(max(0.0, deadline - time.monotonic()))
if errors:
    sys.exit("\n".join(errors[:10]))
late = [i for i, t in enumerate(threads) if t.is_alive()]
if late:
    sys.exit("%d of %d parked reads never returned (first: follower %d of s%03d)"
             % (len(late), n, late[0], handles[late[0]][0]))
bad = [(i, handles[i][0], g) for i, g in enumerate(got) if g != b"wake s%03d\n" % handles[i][0]]
if bad:
    i, s, g = bad[0]
    sys.exit("%d parked reads returned the wrong bytes; follower %d of s%03d got %r"
             % (len(bad), i, s, g))
for _, fd in handles:
    os.close(fd)
print("all %d parked reads returned their stream's new record" % n)
PY

parked_is() { [ "$(nv_stat parked_readers)" = "$1" ]; }
ready() { [ -s "$NV_TMP/ready" ]; }

# Warm-up: a first, small crowd (100 followers over 10 streams) parks and
# is woken, so libfuse has started the worker threads a burst of requests
# makes it start; what is measured next is what parking adds.
threads_cold=$(nv_threads "$NV_PID")
python3 "$NV_TMP/followers.py" "$MNT" warm 10 10 "$NV_TMP/ready" > "$NV_TMP/warm.out" 2>&1 &
W=$!
nv_bg "$W"
nv_await 30 "the warm-up followers to start" ready
nv_await 30 "100 warm-up followers to park" parked_is 100
threads_warm=$(nv_threads "$NV_PID")
wakeall warm 10
nv_wait_pid_exit "$W" 30 || fail "warm-up followers still running 30 s after the wake appends"
wait "$W" || fail "warm-up followers failed: $(cat "$NV_TMP/warm.out")"
say "warm-up: $(cat "$NV_TMP/warm.out")"
nv_await 10 "parked_readers to fall to 0 after the warm-up" parked_is 0
threads_before=$(nv_threads "$NV_PID")
say "daemon threads: $threads_cold at start, $threads_warm with 100 parked, $threads_before after the warm-up"

# ---------------------------------------------------------------- 1,000
rm -f "$NV_TMP/ready"
w0=$(nv_stat wakes)
t0=$EPOCHREALTIME
python3 "$NV_TMP/followers.py" "$MNT" m "$NSTREAMS" "$PER" "$NV_TMP/ready" > "$NV_TMP/many.out" 2>&1 &
F=$!
nv_bg "$F"
nv_await 60 "the $N follower threads to start ($(cat "$NV_TMP/many.out" 2>/dev/null))" ready
say "$(cat "$NV_TMP/ready")"
max=0
# Sample the thread count while the reads arrive and park.
parked_all() {
	local t p
	t=$(nv_threads "$NV_PID")
	((t > max)) && max=$t
	p=$(nv_stat parked_readers)
	[ "$p" = "$N" ]
}
nv_await 60 "$N followers to park (parked_readers $(nv_stat parked_readers))" parked_all
say "ok: parked_readers = $N after $(nv_elapsed "$t0") s"
nv_pid_alive "$F" || fail "the follower process exited early: $(cat "$NV_TMP/many.out")"
threads_parked=$(nv_threads "$NV_PID")
((threads_parked > max)) && max=$threads_parked
say "daemon threads: $threads_before before, $threads_parked with $N reads parked (at most $max while they arrived)"
((max <= threads_before + SLACK)) ||
	fail "the daemon grew from $threads_before to $max threads with $N parked reads (slack $SLACK): a thread per parked reader?"
say "ok: the thread count did not grow with the parked reads (<= $threads_before + $SLACK)"

# No CPU while 1,000 reads are parked.
c0=$(nv_cpu_ns "$NV_PID"); k0=$(nv_cpu_ticks "$NV_PID"); f0=$(nv_cpu_ns "$F")
t1=$EPOCHREALTIME
sleep 1
c=$(( $(nv_cpu_ns "$NV_PID") - c0 )); k=$(( $(nv_cpu_ticks "$NV_PID") - k0 )); f=$(( $(nv_cpu_ns "$F") - f0 ))
say "over $(nv_elapsed "$t1") s with $N parked: daemon $((c / 1000)) us ($k ticks), followers $((f / 1000)) us"
# As t_follow: the auditor's pass and the registry keepalive are a few
# ms (5.7 ms seen in a full run): 20 ms.  Ticks (which count exited
# threads too) are sampled and rounded per field: 2 ticks for 20 ms plus
# one in each of user and system, as in t_follow.
((c < 20000000 && k <= 4)) || fail "the daemon used $((c / 1000)) us ($k ticks) of CPU in 1 s with $N parked reads"
((f < 5000000)) || fail "the follower process used $((f / 1000)) us of CPU in 1 s while its reads were parked"
parked_is "$N" || fail "parked_readers changed while idle: $(nv_stat parked_readers)"

# ---------------------------------------------------------------- wake them
t0=$EPOCHREALTIME
wakeall m "$NSTREAMS"
say "appended one record to each of the $NSTREAMS streams in $(nv_elapsed "$t0") s"
nv_wait_pid_exit "$F" 60 || fail "the followers still running 60 s after the wake appends (parked_readers $(nv_stat parked_readers))"
rc=0
wait "$F" || rc=$?
((rc == 0)) || fail "the followers failed (status $rc): $(cat "$NV_TMP/many.out")"
say "ok: $(cat "$NV_TMP/many.out") $(nv_elapsed "$t0") s after the first wake append"
wakes=$(( $(nv_stat wakes) - w0 ))
((wakes >= N)) || fail "stats wakes grew by $wakes; $N parked reads were woken"
say "ok: wakes grew by $wakes (>= $N)"
nv_await 10 "parked_readers to fall to 0" parked_is 0
say "ok: parked_readers = 0"
threads_after=$(nv_threads "$NV_PID")
say "daemon threads after: $threads_after"
((threads_after <= threads_before + SLACK)) ||
	fail "the daemon has $threads_after threads after the followers left ($threads_before before)"
for ((s = 0; s < NSTREAMS; s += 33)); do
	f=$MNT/m/$(printf 's%03d' "$s")
	nv_expect_eq "$(tr '\n' '|' < "$f")" "$(printf 'init s%03d|wake s%03d|' "$s" "$s")" "content of $(basename "$f")"
done
nv_stop
