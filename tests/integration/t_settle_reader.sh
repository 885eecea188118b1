#!/bin/bash
# t_settle_reader: readers never see a wrong or missing byte while the
# stream under them settles again and again.  With settlement knobs of about
# a second (trigger 1 MiB, linger 1 s, age cap 2 s, output cap 2 MiB, read
# grace 1 s, audit every 100 ms), a writer appends deterministic records
# (random and text bodies, 100 B - 60 KiB) to a standard stream (~2 MiB/s)
# and an express stream (~200 KiB/s) for ~15 s.  Meanwhile a reader process,
# every ~300 ms and for both streams:
#  - reads the whole stream through a fresh descriptor (its page cache
#    dropped with posix_fadvise, or O_DIRECT, in turn) and checks it is at
#    least as long as st_size before the read and equal to the expected
#    prefix of its length;
#  - reads 5 random ranges with pread and one with dd, each checked against
#    the expected bytes, and only ever short at the end of the stream;
#  - continues a long-lived descriptor from where it stopped (a tail
#    reader holding its descriptor across every settle and slot deletion).
# It also samples user.nova.settled: settling must have advanced at least
# three times during the reads, and stats settle_jobs, slots_deleted and
# settled_objects grow.  At the end: every stream settles, reads back
# identical after a remount, and fsck --full passes.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
command -v jq >/dev/null || nv_skip "jq is not installed"

DURATION=${NV_READER_SECONDS:-15}
nv_start "settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=2,age_cap_express_s=2,output_cap_mib=2,read_grace_s=1,audit_interval_ms=100,fetch_cache_mib=16"
B=$MNT/rd
mkdir "$B"
: > "$B/r"
: > "$B/x"
setfattr -n user.nova.class -v express "$B/x"

# gen.py: record n of a stream, the same in the writer and the reader.
cat > "$NV_TMP/gen.py" <<'PY'
import random
def rec(stream, n):
    r = random.Random("%s/%d" % (stream, n))
    size = 100 + (n * 7919) % (60000 if stream == "r" else 6000)
    head = b"%s %08d|" % (stream.encode(), n)
    if n % 3 == 0:
        body = r.randbytes(size)
    else:
        body = (b"%08d text %s " % (n, stream.encode())) * (size // 24 + 1)
    return head + body[:size] + b"\n"
class Expected:
    """The expected bytes of a stream, generated as far as asked."""
    def __init__(self, stream):
        self.stream, self.n, self.buf = stream, 0, bytearray()
    def upto(self, size):
        while len(self.buf) < size:
            self.buf += rec(self.stream, self.n)
            self.n += 1
        return self.buf
PY

# writer.py DIR SECONDS STATUS: append to DIR/r (~2 MiB/s) and DIR/x
# (~200 KiB/s) for SECONDS; STATUS gets "records_r records_x" after each.
cat > "$NV_TMP/writer.py" <<'PY'
import os, sys, time
sys.path.insert(0, os.path.dirname(sys.argv[0]))
from gen import rec
d, secs, status = sys.argv[1], float(sys.argv[2]), sys.argv[3]
fds = {s: os.open(os.path.join(d, s), os.O_WRONLY | os.O_APPEND) for s in ("r", "x")}
rate = {"r": 2 << 20, "x": 200 << 10}
n = {"r": 0, "x": 0}
sent = {"r": 0, "x": 0}
t0 = time.monotonic()
while time.monotonic() - t0 < secs:
    el = time.monotonic() - t0
    did = False
    for s in ("r", "x"):
        if sent[s] <= rate[s] * el:
            b = rec(s, n[s])
            w = os.write(fds[s], b)
            if w != len(b):
                sys.exit("short write to %s at record %d: %d of %d" % (s, n[s], w, len(b)))
            n[s] += 1
            sent[s] += len(b)
            did = True
    with open(status + ".tmp", "w") as f:
        f.write("%d %d\n" % (n["r"], n["x"]))
    os.rename(status + ".tmp", status)
    if not did:
        time.sleep(0.005)
print("writer: %d records (%d bytes) to r, %d (%d bytes) to x" % (n["r"], sent["r"], n["x"], sent["x"]))
PY

# reader.py DIR STOP: the read loop described above, until STOP exists.
cat > "$NV_TMP/reader.py" <<'PY'
import os, random, subprocess, sys, time
sys.path.insert(0, os.path.dirname(sys.argv[0]))
from gen import Expected
d, stop = sys.argv[1], sys.argv[2]
exp = {s: Expected(s) for s in ("r", "x")}
tail_fd = {s: os.open(os.path.join(d, s), os.O_RDONLY) for s in ("r", "x")}
tail_pos = {"r": 0, "x": 0}
rnd = random.Random(42)
stats = dict(loops=0, full=0, ranges=0, dd=0, tail_bytes=0, direct=0, bytes=0)
settled_seen = {"r": [], "x": []}

def bad(msg):
    print("reader: WRONG BYTES: " + msg, flush=True)
    sys.exit(1)

def check(s, off, got, what, size_before):
    want = exp[s].upto(off + len(got))[off:off + len(got)]
    if got != want:
        i = next(k for k in range(len(got)) if got[k] != want[k])
        bad("%s of %s: byte %d is %r, expected %r (read [%d, %d), st_size before %d)"
            % (what, s, off + i, got[i:i + 16], bytes(want[i:i + 16]), off, off + len(got),
               size_before))

def full_read(s, direct):
    path = os.path.join(d, s)
    size0 = os.stat(path).st_size
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        fd = os.open(path, os.O_RDONLY)
        direct = False
    if not direct:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    chunks = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    got = b"".join(chunks)
    if len(got) < size0:
        bad("full read of %s: %d bytes, but st_size was %d before the read (missing bytes)"
            % (s, len(got), size0))
    check(s, 0, got, "full read" + (" (O_DIRECT)" if direct else ""), size0)
    stats["full"] += 1
    stats["direct"] += direct
    stats["bytes"] += len(got)
    return len(got)

def ranges(s, size):
    path = os.path.join(d, s)
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    for _ in range(5):
        off = rnd.randrange(size)
        ln = rnd.choice([1, 17, 4096, 65536, 300000, 2 << 20])
        got = os.pread(fd, ln, off)
        if len(got) < min(ln, size - off):
            bad("pread of %s [%d, +%d): %d bytes, st_size %d (short inside the stream)"
                % (s, off, ln, len(got), size))
        check(s, off, got, "pread", size)
        stats["ranges"] += 1
    os.close(fd)
    off = rnd.randrange(size)
    ln = rnd.randrange(1, 1 << 20)
    got = subprocess.run(["dd", "if=" + path, "bs=64k", "iflag=skip_bytes,count_bytes",
                          "skip=%d" % off, "count=%d" % ln, "status=none"],
                         check=True, stdout=subprocess.PIPE).stdout
    if len(got) < min(ln, size - off):
        bad("dd of %s skip=%d count=%d: %d bytes, st_size %d" % (s, off, ln, len(got), size))
    check(s, off, got, "dd", size)
    stats["dd"] += 1

def tail(s):
    fd = tail_fd[s]
    while True:
        b = os.pread(fd, 1 << 20, tail_pos[s])
        if not b:
            break
        check(s, tail_pos[s], b, "long-lived descriptor", -1)
        tail_pos[s] += len(b)
        stats["tail_bytes"] += len(b)

while not os.path.exists(stop):
    t = time.monotonic()
    for s in ("r", "x"):
        settled = int(os.getxattr(os.path.join(d, s), "user.nova.settled"))
        if not settled_seen[s] or settled_seen[s][-1] != settled:
            settled_seen[s].append(settled)
        size = full_read(s, stats["loops"] % 2 == 1)
        if size:
            ranges(s, size)
        tail(s)
    stats["loops"] += 1
    time.sleep(max(0.0, 0.3 - (time.monotonic() - t)))
print("reader: %(loops)d loops, %(full)d whole reads (%(direct)d O_DIRECT, %(bytes)d bytes), "
      "%(ranges)d pread ranges, %(dd)d dd ranges, %(tail_bytes)d bytes by the long-lived "
      "descriptors" % stats)
for s in ("r", "x"):
    print("reader: settled of %s moved %d times: %s" % (s, len(settled_seen[s]) - 1,
          " ".join(map(str, settled_seen[s][:40]))))
PY

jobs0=$(nv_stat settle_jobs)
say "writer and reader run for ${DURATION}s"
rm -f "$NV_TMP/stop"
python3 "$NV_TMP/writer.py" "$B" "$DURATION" "$NV_TMP/wstatus" > "$NV_TMP/writer.out" 2>&1 &
p_writer=$!
nv_bg "$p_writer"
python3 "$NV_TMP/reader.py" "$B" "$NV_TMP/stop" > "$NV_TMP/reader.out" 2>&1 &
p_reader=$!
nv_bg "$p_reader"
rc=0
nv_wait_bg "$p_writer" || rc=$?
((rc == 0)) || fail "writer failed: $(cat "$NV_TMP/writer.out")"
say "$(cat "$NV_TMP/writer.out")"
# One more read loop over the final streams, then stop the reader.
sleep 0.7
: > "$NV_TMP/stop"
nv_wait_pid_exit "$p_reader" 60 || fail "reader did not stop within 60 s"
rc=0
nv_wait_bg "$p_reader" || rc=$?
sed "s/^/$NV_TEST: /" "$NV_TMP/reader.out"
((rc == 0)) || fail "reader found wrong or missing bytes (status $rc): $(tail -n 3 "$NV_TMP/reader.out")"
loops=$(sed -n 's/^reader: \([0-9]*\) loops.*/\1/p' "$NV_TMP/reader.out")
((loops >= DURATION)) || fail "the reader did only $loops loops in ${DURATION}s"
moves=$(sed -n 's/^reader: settled of r moved \([0-9]*\) times.*/\1/p' "$NV_TMP/reader.out")
((moves >= 3)) || fail "settled of r moved only $moves times while the reader ran; settling did not run repeatedly"
say "ok: $loops read loops saw only right bytes while r's settled point moved $moves times"

jobs=$(($(nv_stat settle_jobs) - jobs0))
((jobs >= 3)) || fail "only $jobs settle jobs ran during the test"
say "ok: $jobs settle jobs, $(nv_stat settled_objects) settled objects, $(nv_stat slots_deleted) of $(nv_stat slots_written) slots deleted"
(($(nv_stat slots_deleted) > 0)) || fail "no chain slot was deleted while the reader ran"

read -r nr nx < "$NV_TMP/wstatus"
nv_expect_eq "$(nv_xattr "$B/r" user.nova.seq)" "$nr" "seq of r"
nv_expect_eq "$(nv_xattr "$B/x" user.nova.seq)" "$nx" "seq of x"
python3 - "$NV_TMP" "$nr" "$nx" <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1])
from gen import rec
for s, n in (("r", int(sys.argv[2])), ("x", int(sys.argv[3]))):
    with open(os.path.join(sys.argv[1], s + ".ref"), "wb") as f:
        for i in range(n):
            f.write(rec(s, i))
PY
nv_wait_settled 60 "$B/r" "$B/x"
for s in r x; do
	say "$(nv_check_objects "$B/$s" $((2 * 1048576)))"
	nv_expect_eq "$(nv_layout "$B/$s" | jq -r .span_refs)" 0 "$s: span refs after settling"
done
nv_drop_caches
for s in r x; do nv_same_file "$B/$s" "$NV_TMP/$s.ref" "$s reads back identical after settling"; done
nv_remount
nv_drop_caches
for s in r x; do nv_same_file "$B/$s" "$NV_TMP/$s.ref" "$s reads back identical after a remount"; done
nv_stop
nv_fsck --full
