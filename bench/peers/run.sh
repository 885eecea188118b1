#!/bin/bash
# bench/peers/run.sh - novafs, s3fs-fuse and rclone mount side by side on
# one throwaway Ceph RGW (tests/s3/rgw.sh through tests/s3/s3lib.sh, on
# 127.0.0.1, radosgw with tcp_nodelay=1 and its usage log on).
#
#   bench/peers/run.sh [OUT]      (root; default OUT bench/results/peers-DATE.txt)
#
# Each peer gets its own bucket and runs the same four workloads:
#   a  N_SMALL (10000) `echo >>` appends of 100 bytes to one file, one
#      bash loop; time, requests and bytes uploaded.  Just before and just
#      after it, the S3 floor: N_FLOOR (2000) sequential bare 100-byte PUTs
#      to the same RGW (bench/putfloor.py --s3: SigV4, one kept-alive
#      connection, into a bucket of their own, peers-floor-PEER), as
#      "PEER a_floor_put when=before|after"; then "PEER a_vs_floor" with
#      per_append_ms / the floor's mean (and p50) per PUT.  For novafs also
#      the floor with If-None-Match: * (create_once=1), as its slot PUTs
#      are sent.
#   b  `dd bs=1M` of BIG_MIB (256) MiB of random bytes appended to a new
#      file; time until dd returned and until the object is whole in RGW.
#      novafs writes it twice: "b_dd_append" into big with the default
#      durable=write (each write() returns durable: one PUT outstanding),
#      then "b_dd_append_fsync" into bigf with user.nova.durable=fsync set
#      on the fresh file, held open meanwhile (builds before 2026-12-07 kept the
#      setting only while the stream stayed loaded)
#      (write() returns at admission, dd's close() when
#      everything is acknowledged: durable when dd returns, so secs =
#      durable_secs).  Both lines carry the mount's slot counters (its
#      user.nova.stats: flights, slots_written, store_puts) and the PUT
#      concurrency seen by RGW (put_mean_inflight, put_max_inflight below).
#   c  cold read of b's file: unmount, remount, drop_caches, dd bs=1M;
#      novafs then also reads bigf ("c_cold_read_fsync", after another
#      drop_caches).  With the GET concurrency seen by RGW.
#   d  append-to-visible latency: N_LAT (200) appends of 100 bytes, one
#      every 50 ms (open O_APPEND, write, close, like `echo >>`), each
#      stamped with its start time; a reader notes when it first sees each.
#      novafs: a follower reading the .follow/ view of the same mount;
#      s3fs and rclone: a second mount of the same bucket, polled every
#      10 ms (stat, then read the new bytes) with its caches off.
# Requests = radosgw's "req done" log lines (debug rgw 1) during the
# workload; bytes uploaded = the usage log's bytes_received (all
# categories: put_obj, multipart parts, copies) for the RGW user, flushed
# every second.  Requests in flight (METHOD_mean_inflight) = the sum of
# radosgw's latency= of those requests over the workload's wall time
# (Little's law); METHOD_max_inflight = most of them overlapping at one
# instant, each request [start, start + latency] from its access line
# (radosgw's clock has a 4 ms grain here, so both are rough for requests
# that short).  The bucket is purged after each peer (the OSD keeps data
# in RAM).  Raw results go to OUT, one "peer workload key=value..." line
# each (workload d's samples in OUT's .lat-PEER.txt files beside it),
# then "ratio NAME ..." lines against issue 13's RGW targets (echo >>
# <= 1.5x the floor; dd durable=fsync >= 1.0x s3fs; cold read >= 1.0x
# s3fs) when the peers they need ran.  bench/peers/plot.py then draws
# bench/peers/peers.png (only when novafs, s3fs and rclone all ran every
# workload).
#
# d2 (the pseudo-peer novafs-stars): workload d across hosts: three novafs
#    stars (A, B, C: each its own data directory, star id and listen=
#    port) on the same RGW bucket and one etcd member (tests/etcd/etcd.sh),
#    with a cluster secret; the writer appends on A; a follower reads B's
#    .follow/ view (B subscribes at A, fs/rfollow.c) and, at the same
#    time, the poll reader (stat every 10 ms, then read, as for s3fs and
#    rclone) runs on C (default attr_timeout=1 s, no follower there):
#    d_visible_latency is B's follower, d_stat_latency C's poll.
# WORKLOADS="a b c d" (default) picks the workloads of the peers
# novafs, s3fs and rclone (c needs b's file).
# a2 (the pseudo-peer novafs-lifecycle): workload a on a fresh bucket
#    with a 5 s age cap, timed until every record is settled and every
#    chain slot deleted: requests and bytes of the whole lifecycle.
# Options (environment): N_SMALL, BIG_MIB, N_LAT, N_FLOOR (PUTs per floor
# run; 0 = no floor), A_BUDGET_S (stop a after that many seconds and note
# the count), B_PRELOAD (N bare 100-byte PUTs into the peer's bucket just
# before b, to tell a bucket that already holds many objects from the
# peer's own state after a; default 0), WORKLOADS, PEERS="novafs s3fs rclone novafs-lifecycle"
# (novafs-stars: add it), NOVAFS (the daemon; default src/novafs of this
# tree), NOVAFS_OPTS (extra -o options of the novafs peer's mounts, e.g.
# put_window=8; default none: novafs's defaults).
# Installs s3fs, rclone (and python3-matplotlib for the plot) with apt-get
# when missing.  Leaves nothing running: every daemon is stopped by PID.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/tests/s3/s3lib.sh"
NOVAFS=${NOVAFS:-$top/src/novafs}
N_SMALL=${N_SMALL:-10000}
BIG_MIB=${BIG_MIB:-256}
N_LAT=${N_LAT:-200}
N_FLOOR=${N_FLOOR:-2000}
NOVAFS_OPTS=${NOVAFS_OPTS:-}
A_BUDGET_S=${A_BUDGET_S:-900}
B_PRELOAD=${B_PRELOAD:-0}
PEERS=${PEERS:-novafs s3fs rclone novafs-lifecycle}
WORKLOADS=${WORKLOADS:-a b c d}
OUT=${1:-$top/bench/results/peers-$(date +%Y%m%d-%H%M).txt}
mkdir -p "$(dirname "$OUT")"

[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (FUSE mounts, drop_caches, apt-get)" >&2; exit 1; }
[ -x "$NOVAFS" ] || { echo "run.sh: build novafs first (make src/novafs)" >&2; exit 1; }
need=()
command -v s3fs >/dev/null || need+=(s3fs)
command -v rclone >/dev/null || need+=(rclone)
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || need+=(python3-matplotlib)
if ((${#need[@]})); then
	echo "run.sh: apt-get install ${need[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null ||
		{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
fi

W=$(mktemp -d "${TMPDIR:-/tmp}/novafs-peers.XXXXXX")
PIDS=()          # every daemon started (mounts), stopped by PID
MOUNTS=()
cleanup() {
	local m p
	set +e
	for m in "${MOUNTS[@]}"; do
		mountpoint -q "$m" && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m"; }
	done
	for p in "${PIDS[@]}"; do
		kill -0 "$p" 2>/dev/null || continue
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$p" 2>/dev/null && kill -9 "$p"
	done
	[ -d "$W/etcd" ] && "$top/tests/etcd/etcd.sh" stop "$W/etcd" >/dev/null 2>&1
	s3_rgw_stop "$W/rgw"
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "[$(date +%T)] $*" >&2; }
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; }
result() { echo "$* load1=$(cut -d" " -f1 /proc/loadavg)" | tee -a "$OUT"; }

# ---------------------------------------------------------------- RGW
mkdir -p "$W/rgw"
s3_rgw_start "$W/rgw" || { echo "run.sh: RGW did not start" >&2; exit 1; }
# The usage log (bytes received per user) needs radosgw restarted with it.
cat >> "$W/rgw/ceph.conf" <<'CONF'
rgw enable usage log = true
rgw usage log tick interval = 1
rgw usage log flush threshold = 1
CONF
kill "$(cat "$W/rgw/radosgw.pid")"
while kill -0 "$(cat "$W/rgw/radosgw.pid")" 2>/dev/null; do sleep 0.1; done
radosgw -c "$W/rgw/ceph.conf" -n client.rgw.test -f >>"$W/rgw/log/radosgw.out" 2>&1 </dev/null &
echo $! > "$W/rgw/radosgw.pid"
s3_wait_http 60 "$NOVAFS_RGW_ENDPOINT/" || { echo "run.sh: radosgw did not restart" >&2; exit 1; }
EP=$NOVAFS_RGW_ENDPOINT AK=$NOVAFS_RGW_ACCESS_KEY SK=$NOVAFS_RGW_SECRET_KEY
log "RGW at $EP"

# usage_rx: bytes_received and ops of the user so far (usage log).
usage_rx() {
	sleep 2.5   # one flush tick and then some
	radosgw-admin -c "$W/rgw/ceph.conf" usage show --uid=test --show-log-entries=false 2>/dev/null |
		python3 -c '
import json, sys
d = json.load(sys.stdin)
rx = ops = 0
for s in d.get("summary", []):
    for c in s.get("categories", []):
        rx += c.get("bytes_received", 0); ops += c.get("ops", 0)
print(rx, ops)'
}
# log_mark: the RGW log's line count now.  reqs_since MARK: requests since
# then; methods_since MARK: the same by method ("GET=n,HEAD=n,...").  Both
# from radosgw's beast access lines (one per request), leaving out this
# script's own curl requests (the HEADs that wait for an upload).
log_mark() { wc -l < "$W/rgw/log/client.rgw.test.log"; }
access_since() {
	tail -n +"$(($1 + 1))" "$W/rgw/log/client.rgw.test.log" | grep 'beast: ' | grep -v '"curl/' || true
}
reqs_since() { access_since "$1" | wc -l; }
methods_since() {
	access_since "$1" |
		sed -n 's/.*beast: [^"]*"\([A-Z]*\) .*/\1/p' | sort | uniq -c |
		awk '{ printf "%s%s=%d", (NR > 1 ? "," : ""), $2, $1 }'
}

# inflight_since MARK METHOD SECS: how many METHOD requests (since MARK,
# as reqs_since counts them) were in flight during a workload of SECS wall
# seconds: "m_n= m_mean_ms= m_mean_inflight= m_max_inflight=" (m = the
# method, lower case).  Each request spans [start, start + latency] of its
# access line (the bracketed time is its start); mean_inflight = the sum
# of the latencies / SECS (Little's law), max_inflight = most spans
# overlapping at one instant (ends before starts at equal times).
# radosgw's clock ticks in 4 ms here: rough for short requests.
inflight_since() {
	access_since "$1" | python3 -c '
import re, sys, datetime
meth, secs = sys.argv[1], float(sys.argv[2])
rx = re.compile(r"\[(\d+/\w+/\d+:\d+:\d+:\d+)(\.\d+) [^]]*\] \"(\w+) .*latency=([0-9.]+)s")
spans = []
for l in sys.stdin:
    m = rx.search(l)
    if not m or m.group(3) != meth:
        continue
    t = datetime.datetime.strptime(m.group(1), "%d/%b/%Y:%H:%M:%S").timestamp() + float(m.group(2))
    spans.append((t, t + float(m.group(4))))
ev = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], e[1]))
cur = top = 0
for _, d in ev:
    cur += d
    top = max(top, cur)
tot = sum(b - a for a, b in spans)
k = meth.lower()
print("%s_n=%d %s_mean_ms=%.1f %s_mean_inflight=%.2f %s_max_inflight=%d" % (
    k, len(spans), k, (tot / len(spans) * 1000) if spans else 0, k,
    tot / secs if secs > 0 else 0, k, top))' "$2" "$3"
}

# nova_stats MNT KEY...: the values of those counters of novafs's
# user.nova.stats (one JSON object on the mount's root), one line.
nova_stats() {
	getfattr --absolute-names --only-values -n user.nova.stats "$1" 2>/dev/null |
		python3 -c 'import json, sys; d = json.load(sys.stdin); print(" ".join(str(d.get(k, -1)) for k in sys.argv[1:]))' "${@:2}"
}

# floor_put PEER WHEN [--create-once]: N_FLOOR sequential bare 100-byte
# PUTs (bench/putfloor.py --s3) into the bucket peers-floor-PEER (made by
# run_peer); a result line; sets FLOOR_MEAN_MS and FLOOR_P50_MS.
floor_put() {
	local out
	out=$(python3 "$top/bench/putfloor.py" --s3 "$EP" --bucket "peers-floor-$1" \
		--key-id "$AK" --secret "$SK" --iters "$N_FLOOR" --size 100 "${@:3}") ||
		{ log "floor_put: putfloor.py failed: $out"; FLOOR_MEAN_MS=nan FLOOR_P50_MS=nan; return 0; }
	FLOOR_MEAN_MS=$(sed -n 's/.* mean_us=\([0-9]*\).*/\1/p' <<< "$out" | awk '{ printf "%.3f", $1 / 1000 }')
	FLOOR_P50_MS=$(sed -n 's/.* p50_us=\([0-9]*\).*/\1/p' <<< "$out" | awk '{ printf "%.3f", $1 / 1000 }')
	result "$1 a_floor_put when=$2 ${out#case=s3put } p50_ms=$FLOOR_P50_MS mean_ms=$FLOOR_MEAN_MS"
}

# obj_size BUCKET KEY: Content-Length of a HEAD, or -1.
obj_size() {
	s3_curl "$EP" "$AK" "$SK" HEAD "/$1/$2" -I 2>/dev/null |
		awk 'tolower($1) == "content-length:" { gsub(/\r/, ""); print $2; f = 1 } END { if (!f) print -1 }'
}

# ---------------------------------------------------------------- peers
# mount_PEER BUCKET MNT [reader]: mount and wait; the PID goes to PIDS.
wait_mount() {
	local m=$1 pid=$2 n=300
	until mountpoint -q "$m"; do
		kill -0 "$pid" 2>/dev/null || { echo "run.sh: mount of $m died" >&2; exit 1; }
		((n-- > 0)) || { echo "run.sh: $m did not mount" >&2; exit 1; }
		sleep 0.1
	done
	MOUNTS+=("$m")
}

mount_novafs() {
	mkdir -p "$2" "$W/novafs.data"
	"$NOVAFS" -f -o "data_dir=$W/novafs.data,store=$(s3_rgw_url "$1")${NOVAFS_OPTS:+,$NOVAFS_OPTS}" "$2" >> "$W/novafs.log" 2>&1 &
	PIDS+=($!)
	wait_mount "$2" "$!"
}

printf '%s:%s\n' "$AK" "$SK" > "$W/s3fs.passwd"
chmod 600 "$W/s3fs.passwd"
mount_s3fs() {
	local extra=()
	mkdir -p "$2"
	# The reader: no stat or list cache, so it sees the object change.
	[ "${3:-}" = reader ] && extra=(-o max_stat_cache_size=0 -o stat_cache_expire=0)
	s3fs "$1" "$2" -f -o url="$EP" -o use_path_request_style -o passwd_file="$W/s3fs.passwd" \
		-o dbglevel=warn "${extra[@]}" >> "$W/s3fs.log" 2>&1 &
	PIDS+=($!)
	wait_mount "$2" "$!"
}

mount_rclone() {
	local extra=(--vfs-cache-mode writes) cache
	mkdir -p "$2"
	cache=$(mktemp -d "$W/rclone.cache.XXXXXX")
	# The reader: reads straight from the bucket, directory cache 1 s.
	[ "${3:-}" = reader ] && extra=(--vfs-cache-mode off --dir-cache-time 1s)
	env -u AWS_CA_BUNDLE RCLONE_CONFIG_RGW_TYPE=s3 RCLONE_CONFIG_RGW_PROVIDER=Ceph \
		RCLONE_CONFIG_RGW_ACCESS_KEY_ID="$AK" RCLONE_CONFIG_RGW_SECRET_ACCESS_KEY="$SK" \
		RCLONE_CONFIG_RGW_ENDPOINT="$EP" \
		rclone mount "rgw:$1" "$2" "${extra[@]}" --cache-dir "$cache" \
		--log-level ERROR >> "$W/rclone.log" 2>&1 &
	PIDS+=($!)
	wait_mount "$2" "$!"
}

# umount_all: unmount every mount of this peer, wait for its daemons.
umount_all() {
	local m p
	for m in "${MOUNTS[@]}"; do
		local n=100
		until fusermount3 -u "$m" 2>/dev/null; do ((n-- > 0)) || fusermount3 -uz "$m"; sleep 0.1; done
	done
	MOUNTS=()
	for p in "${PIDS[@]}"; do
		for _ in $(seq 600); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$p" 2>/dev/null && { log "daemon $p still running 60 s after unmount: kill -9"; kill -9 "$p"; }
		wait "$p" 2>/dev/null || true
	done
	PIDS=()
}

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# has W: workload W is to run.
has() { [[ " $WORKLOADS " == *" $1 "* ]]; }

# Helpers for d.
cat > "$W/lat_writer.py" <<'PY'
import os, sys, time
path, n, gap = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
for i in range(n):
    t = time.time()
    rec = ("%06d %.6f " % (i, t)).encode()
    rec += b"x" * (99 - len(rec)) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, rec)
    os.close(fd)
    time.sleep(max(0.0, t + gap - time.time()))
PY
# lat_reader.py PATH N MODE OUT TIMEOUT: MODE follow = blocking reads of a
# .follow/ file; poll = stat every 10 ms and read what is new.  Writes one
# latency (seconds) per record to OUT, "lost" for records never seen.
cat > "$W/lat_reader.py" <<'PY'
import os, signal, sys, time
path, n, mode, out, timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
seen, buf = {}, b""
def stop(*_):
    raise KeyboardInterrupt
signal.signal(signal.SIGTERM, stop)
def take(data):
    global buf
    t = time.time()
    buf += data
    *lines, buf = buf.split(b"\n")
    for l in lines:
        f = l.split()
        if len(f) >= 2 and int(f[0]) not in seen:
            seen[int(f[0])] = t - float(f[1])
def follow():
    while not os.path.exists(path):
        time.sleep(0.01)
    fd = os.open(path, os.O_RDONLY)
    while len(seen) < n:
        take(os.read(fd, 1 << 16))
def poll():
    pos, deadline = 0, None
    while len(seen) < n:
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            size = 0
        if size > pos:
            with open(path, "rb") as f:
                f.seek(pos)
                d = f.read(size - pos)
            pos += len(d)
            take(d)
        if os.path.exists(out + ".writer-done"):
            deadline = deadline or time.time() + timeout
            if time.time() > deadline:
                break
        time.sleep(0.01)
try:
    follow() if mode == "follow" else poll()
except KeyboardInterrupt:
    pass
with open(out, "w") as f:
    for i in range(n):
        f.write("%s\n" % (("%.6f" % seen[i]) if i in seen else "lost"))
PY

# lat_summary FILE: n, seen, lost and quantiles (ms) of lat_reader's FILE.
lat_summary() {
	python3 - "$1" <<'PY'
import sys
v = open(sys.argv[1]).read().split()
lat = sorted(float(x) for x in v if x != "lost")
lost = sum(1 for x in v if x == "lost")
def q(p):
    return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")
print("n=%d seen=%d lost=%d p50_ms=%.1f p90_ms=%.1f p99_ms=%.1f max_ms=%.1f"
      % (len(v), len(lat), lost, q(0.5), q(0.9), q(0.99), (lat[-1] * 1000 if lat else float("nan"))))
PY
}

# b_stats "APPENDS FLIGHTS SLOTS PUTS" (novafs's counters before b, as
# nova_stats prints them): their growth since, as key=value pairs, with
# the mean flight (records and MiB per slot PUT).  Reads $m.
b_stats() {
	local a0 f0 s0 p0 a1 f1 s1 p1
	read -r a0 f0 s0 p0 <<< "$1"
	read -r a1 f1 s1 p1 <<< "$(nova_stats "$m" appends flights slots_written store_puts)"
	echo "nova_appends=$((a1 - a0)) nova_flights=$((f1 - f0)) nova_slots_written=$((s1 - s0)) nova_store_puts=$((p1 - p0)) records_per_flight=$(awk -v a=$((a1 - a0)) -v f=$((f1 - f0)) 'BEGIN { printf "%.2f", f ? a / f : 0 }') mib_per_slot=$(awk -v s=$((s1 - s0)) -v m="$BIG_MIB" 'BEGIN { printf "%.2f", s ? m / s : 0 }')"
}

# run_novafs_b_fsync MNT DIR: workload b again into DIR/bigf, a fresh file
# with user.nova.durable=fsync: write() returns at admission, dd's close()
# when every record is acknowledged, so the time until dd returns is the
# time until durable.  Checks that st_size (which moves at acknowledgement)
# is whole when dd returned.  The attribute lives only while novafs keeps
# the stream loaded (novafs(8)): a drop_caches anywhere on the machine
# (other benchmarks do it) makes the kernel forget the inode and the
# stream reverts to durable=write.  So a descriptor is held open from
# before setfattr until dd is done, the attribute is read back just before
# dd (durable_attr=), and a run whose flights are not batched is flagged.
# cold_read WORKLOAD FILE [KEY=VALUE]: drop_caches, read FILE whole with
# dd bs=1M, compare it with the source, one result line for peer $p.
cold_read() {
	local mk t0 secs ok
	drop_caches
	mk=$(log_mark)
	t0=$(now)
	dd if="$2" of="$W/big.read" bs=1M status=none
	secs=$(since "$t0")
	cmp -s "$W/big.read" "$W/big.src" && ok=identical || ok=DIFFERENT
	rm -f "$W/big.read"
	result "$p $1 ${3:+$3 }mib=$BIG_MIB secs=$secs mib_s=$(awk -v s="$secs" -v m="$BIG_MIB" 'BEGIN { printf "%.1f", m / s }') requests=$(reqs_since "$mk") methods=$(methods_since "$mk") $(inflight_since "$mk" GET "$secs") content=$ok"
}

run_novafs_b_fsync() {
	local m=$1 dir=$2 stats0 u0 u1 mk t0 secs want=$((BIG_MIB * 1048576)) size hold attr line
	: > "$dir/bigf"
	exec {hold}>>"$dir/bigf"
	setfattr -n user.nova.durable -v fsync "$dir/bigf"
	stats0=$(nova_stats "$m" appends flights slots_written store_puts)
	read -r u0 _ < <(usage_rx); mk=$(log_mark)
	attr=$(getfattr --absolute-names --only-values -n user.nova.durable "$dir/bigf" 2>/dev/null || echo "?")
	t0=$(now)
	dd if="$W/big.src" of="$dir/bigf" bs=1M oflag=append conv=notrunc status=none
	secs=$(since "$t0")
	exec {hold}>&-
	size=$(stat -c %s "$dir/bigf")
	[ "$size" = "$want" ] || log "WARNING: novafs bigf is $size bytes when dd returned, expected $want"
	read -r u1 _ < <(usage_rx)
	line=$(b_stats "$stats0")
	[[ " $line " == *" records_per_flight=1.00 "* ]] && log "WARNING: novafs b_dd_append_fsync: one record per flight, durable=fsync did not batch (durable_attr=$attr)"
	result "novafs b_dd_append_fsync mib=$BIG_MIB durable=fsync durable_attr=$attr secs=$secs durable_secs=$secs size_at_return=$size mib_s=$(awk -v s="$secs" -v m="$BIG_MIB" 'BEGIN { printf "%.1f", m / s }') requests=$(reqs_since "$mk") methods=$(methods_since "$mk") $(inflight_since "$mk" PUT "$secs") uploaded_bytes=$((u1 - u0)) $line"
}

# ---------------------------------------------------------------- one peer
run_peer() {
	local p=$1 b="peers-$1" m=$W/$1/mnt m2=$W/$1/mnt2 dir t0 u0 u1 secs mk
	log "=== $p"
	s3_rgw_bucket_create "$b"
	mount_"$p" "$b" "$m"
	if [ "$p" = novafs ]; then mkdir "$m/b"; dir=$m/b; else dir=$m; fi

	local line want td n_done fb_mean fb_p50 fa_mean fa_p50 per
	if has a; then
		# a: N_SMALL echo >> appends of 100 bytes, between two runs of
		# the S3 floor (bare 100-byte PUTs on their own bucket).
		line=$(printf 'x%.0s' $(seq 99))
		if ((N_FLOOR > 0)); then
			s3_rgw_bucket_create "peers-floor-$p"
			floor_put "$p" before
			fb_mean=$FLOOR_MEAN_MS fb_p50=$FLOOR_P50_MS
		fi
		read -r u0 _ < <(usage_rx); mk=$(log_mark)
		t0=$(now)
		n_done=$N_SMALL
		for ((i = 0; i < N_SMALL; i++)); do
			echo "$line" >> "$dir/small"
			if ((i % 100 == 99)) && awk -v a="$t0" -v b="$EPOCHREALTIME" -v m="$A_BUDGET_S" 'BEGIN { exit !(b - a > m) }'; then
				n_done=$((i + 1))
				log "$p: a stopped after $n_done appends (budget ${A_BUDGET_S} s)"
				break
			fi
		done
		secs=$(since "$t0")
		# durable: rclone uploads later; wait until the object is whole.
		want=$((n_done * 100))
		if [ "$p" != novafs ]; then
			until [ "$(obj_size "$b" small)" = "$want" ]; do sleep 0.2; done
		fi
		td=$(since "$t0")
		read -r u1 _ < <(usage_rx)
		[ "$(stat -c %s "$dir/small")" = "$want" ] || log "WARNING: $p small is $(stat -c %s "$dir/small") bytes, expected $want"
		per=$(awk -v s="$secs" -v n="$n_done" 'BEGIN { printf "%.3f", s * 1000 / n }')
		result "$p a_small_appends n=$n_done bytes=$want secs=$secs durable_secs=$td per_append_ms=$per requests=$(reqs_since "$mk") methods=$(methods_since "$mk") $(inflight_since "$mk" PUT "$secs") uploaded_bytes=$((u1 - u0)) upload_amplification=$(awk -v u=$((u1 - u0)) -v w="$want" 'BEGIN { printf "%.1f", u / w }')"
		if ((N_FLOOR > 0)); then
			floor_put "$p" after
			fa_mean=$FLOOR_MEAN_MS fa_p50=$FLOOR_P50_MS
			# The floor of the ratio: the mean of before and after
			# (bare PUTs only; per_append_ms is a mean too).
			result "$p a_vs_floor per_append_ms=$per floor_mean_ms=$(awk -v a="$fb_mean" -v b="$fa_mean" 'BEGIN { printf "%.3f", (a + b) / 2 }') floor_p50_ms=$(awk -v a="$fb_p50" -v b="$fa_p50" 'BEGIN { printf "%.3f", (a + b) / 2 }') ratio_mean=$(awk -v p="$per" -v a="$fb_mean" -v b="$fa_mean" 'BEGIN { printf "%.2f", p / ((a + b) / 2) }') ratio_p50=$(awk -v p="$per" -v a="$fb_p50" -v b="$fa_p50" 'BEGIN { printf "%.2f", p / ((a + b) / 2) }')"
			# novafs's slot PUTs carry If-None-Match: *; how much of
			# the gap is that condition?  (Not part of the ratio.)
			if [ "$p" = novafs ]; then floor_put "$p" after --create-once; fi
			s3_rgw_bucket_purge "$W/rgw" "peers-floor-$p" || log "could not purge peers-floor-$p"
		fi
	fi

	if has b; then
		# b: BIG_MIB MiB with dd bs=1M, appended to a new file.
		local stats0=
		if ((B_PRELOAD > 0)); then
			python3 "$top/bench/putfloor.py" --s3 "$EP" --bucket "$b" --key-id "$AK" \
				--secret "$SK" --iters "$B_PRELOAD" --warmup 0 --size 100 \
				--prefix preload- > /dev/null || log "B_PRELOAD: putfloor.py failed"
		fi
		if [ "$p" = novafs ]; then stats0=$(nova_stats "$m" appends flights slots_written store_puts); fi
		read -r u0 _ < <(usage_rx); mk=$(log_mark)
		t0=$(now)
		dd if="$W/big.src" of="$dir/big" bs=1M oflag=append conv=notrunc status=none
		secs=$(since "$t0")
		want=$((BIG_MIB * 1048576))
		if [ "$p" != novafs ]; then
			until [ "$(obj_size "$b" big)" = "$want" ]; do sleep 0.2; done
		fi
		td=$(since "$t0")
		read -r u1 _ < <(usage_rx)
		result "$p b_dd_append mib=$BIG_MIB secs=$secs durable_secs=$td mib_s=$(awk -v s="$td" -v m="$BIG_MIB" 'BEGIN { printf "%.1f", m / s }') dd_mib_s=$(awk -v s="$secs" -v m="$BIG_MIB" 'BEGIN { printf "%.1f", m / s }') requests=$(reqs_since "$mk") methods=$(methods_since "$mk") $(inflight_since "$mk" PUT "$td") uploaded_bytes=$((u1 - u0))${stats0:+ $(b_stats "$stats0")}"
		if [ "$p" = novafs ]; then run_novafs_b_fsync "$m" "$dir"; fi
	fi

	if has c; then
		# c: cold read after remount + drop_caches.
		umount_all
		mount_"$p" "$b" "$m"
		cold_read c_cold_read "$dir/big"
		if [ "$p" = novafs ] && [ -e "$dir/bigf" ]; then
			# The durable=fsync file: its slots are whole flights.
			cold_read c_cold_read_fsync "$dir/bigf" file=bigf
		fi
	fi

	# d: append-to-visible latency.
	if ! has d; then
		umount_all
		s3_rgw_bucket_purge "$W/rgw" "$b" || log "could not purge $b"
		return 0
	fi
	local rpath
	if [ "$p" = novafs ]; then
		rpath=$m/.follow/b/lat
		mode=follow
	else
		mount_"$p" "$b" "$m2" reader
		rpath=$m2/lat
		mode=poll
	fi
	rm -f "$W/lat.$p" "$W/lat.$p.writer-done"
	python3 "$W/lat_reader.py" "$rpath" "$N_LAT" "$mode" "$W/lat.$p" 30 &
	local rd=$!
	sleep 0.5
	python3 "$W/lat_writer.py" "$dir/lat" "$N_LAT" 0.05
	: > "$W/lat.$p.writer-done"
	# The follower needs no timeout: every record arrives, or the wait hangs
	# (bounded below).
	local n=900
	while kill -0 "$rd" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
	kill -0 "$rd" 2>/dev/null && { log "$p: latency reader still waiting 90 s after the writer: killed"; kill "$rd"; }
	wait "$rd" 2>/dev/null || true
	cp "$W/lat.$p" "$(dirname "$OUT")/$(basename "$OUT" .txt).lat-$p.txt" 2>/dev/null || true
	result "$p d_visible_latency $(lat_summary "$W/lat.$p")"
	umount_all
	s3_rgw_bucket_purge "$W/rgw" "$b" || log "could not purge $b"
}

# a2 (novafs only): workload a again on a fresh bucket with settlement on
# a short age cap, until every record is settled into one stream object
# and every chain slot is deleted: the whole lifecycle's requests and
# bytes (appends, settlement reads and writes, deletes).
run_novafs_lifecycle() {
	local b=peers-novafs-life m=$W/novafs-life/mnt mk u0 u1 t0 secs line n
	log "=== novafs lifecycle (a2)"
	s3_rgw_bucket_create "$b"
	mkdir -p "$m"
	"$NOVAFS" -f -o "data_dir=$W/novafs-life.data,store=$(s3_rgw_url "$b"),age_cap_standard_s=5,read_grace_s=2,audit_interval_ms=200" "$m" >> "$W/novafs.log" 2>&1 &
	PIDS+=($!)
	wait_mount "$m" "$!"
	mkdir "$m/b"
	line=$(printf 'x%.0s' $(seq 99))
	read -r u0 _ < <(usage_rx); mk=$(log_mark)
	t0=$(now)
	for ((i = 0; i < N_SMALL; i++)); do echo "$line" >> "$m/b/small"; done
	secs=$(since "$t0")
	n=600
	until [ "$(getfattr --absolute-names --only-values -n user.nova.settled "$m/b/small")" = "$N_SMALL" ] &&
		! s3_curl "$EP" "$AK" "$SK" GET "/$b?list-type=2&max-keys=1&prefix=chains%2F" | grep -q '<Key>'; do
		((n-- > 0)) || { log "a2: not settled and trimmed within 120 s"; break; }
		sleep 0.2
	done
	local td objs
	td=$(since "$t0")
	read -r u1 _ < <(usage_rx)
	objs=$(s3_curl "$EP" "$AK" "$SK" GET "/$b?list-type=2&max-keys=1000" | grep -o '<Key>' | wc -l)
	result "novafs a2_small_appends_settled n=$N_SMALL append_secs=$secs settled_and_trimmed_secs=$td requests=$(reqs_since "$mk") methods=$(methods_since "$mk") uploaded_bytes=$((u1 - u0)) objects_left=$objs"
	umount_all
	s3_rgw_bucket_purge "$W/rgw" "$b" || log "could not purge $b"
}

# free_port: a TCP port on 127.0.0.1 nobody listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# d2 (novafs-stars): workload d across three stars on one bucket.
run_novafs_stars() {
	local b=peers-novafs-stars n rd rc i common
	log "=== novafs stars (d2)"
	s3_rgw_bucket_create "$b"
	[ -d "$W/etcd" ] || "$top/tests/etcd/etcd.sh" start "$W/etcd" 1 > "$W/etcd.env"
	. "$W/etcd/env.sh"
	head -c 32 /dev/urandom | base64 > "$W/secret"
	chmod 600 "$W/secret"
	common="store=$(s3_rgw_url "$b"),meta=$NOVAFS_ETCD_URL,cluster_secret_file=$W/secret"
	for i in a b c; do
		mkdir -p "$W/stars/$i.mnt" "$W/stars/$i.data"
		"$NOVAFS" -f -o "data_dir=$W/stars/$i.data,star=s$i,listen=127.0.0.1:$(free_port),$common" \
			"$W/stars/$i.mnt" >> "$W/novafs-stars-$i.log" 2>&1 &
		PIDS+=($!)
		wait_mount "$W/stars/$i.mnt" "$!"
	done
	mkdir "$W/stars/a.mnt/b"
	: > "$W/stars/a.mnt/b/lat" # A leads it; B and C find it
	n=100
	until [ -e "$W/stars/b.mnt/.follow/b/lat" ] && [ -e "$W/stars/c.mnt/b/lat" ]; do
		((n-- > 0)) || { log "d2: the stream did not show on B and C"; break; }
		sleep 0.1
	done
	rm -f "$W"/lat.novafs-stars*
	python3 "$W/lat_reader.py" "$W/stars/b.mnt/.follow/b/lat" "$N_LAT" follow "$W/lat.novafs-stars" 30 &
	rd=$!
	python3 "$W/lat_reader.py" "$W/stars/c.mnt/b/lat" "$N_LAT" poll "$W/lat.novafs-stars-stat" 30 &
	rc=$!
	sleep 0.5
	python3 "$W/lat_writer.py" "$W/stars/a.mnt/b/lat" "$N_LAT" 0.05
	: > "$W/lat.novafs-stars.writer-done"
	: > "$W/lat.novafs-stars-stat.writer-done"
	for p in $rd $rc; do
		n=900
		while kill -0 "$p" 2>/dev/null && ((n-- > 0)); do sleep 0.1; done
		kill -0 "$p" 2>/dev/null && { log "d2: reader $p still waiting 90 s after the writer: killed"; kill "$p"; }
		wait "$p" 2>/dev/null || true
	done
	for f in novafs-stars novafs-stars-stat; do
		cp "$W/lat.$f" "$(dirname "$OUT")/$(basename "$OUT" .txt).lat-$f.txt" 2>/dev/null || true
	done
	result "novafs-stars d_visible_latency $(lat_summary "$W/lat.novafs-stars") (writer on A, follower on B's .follow/)"
	result "novafs-stars d_stat_latency $(lat_summary "$W/lat.novafs-stars-stat") (writer on A, stat+read poll on C, attr_timeout=1)"
	umount_all
	s3_rgw_bucket_purge "$W/rgw" "$b" || log "could not purge $b"
}

# ---------------------------------------------------------------- run
has b && head -c $((BIG_MIB * 1048576)) /dev/urandom > "$W/big.src"
{
	echo "# novafs peers benchmark $(date -Is)"
	echo "# machine: $(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB, $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), kernel $(uname -r)"
	echo "# rgw: Ceph $(radosgw --version 2>/dev/null | awk '{ print $3 }'), memstore OSD, beast tcp_nodelay=1, 127.0.0.1"
	echo "# novafs $(git -C "$top" rev-parse --short HEAD 2>/dev/null), s3fs $(s3fs --version 2>/dev/null | sed -n '1s/.*V\([0-9.]*\).*/\1/p'), rclone $(rclone version 2>/dev/null | awk 'NR == 1 { print $2 }')"
	echo "# novafs daemon $NOVAFS, options: defaults${NOVAFS_OPTS:+ + $NOVAFS_OPTS}"
	echo "# N_SMALL=$N_SMALL BIG_MIB=$BIG_MIB N_LAT=$N_LAT N_FLOOR=$N_FLOOR PEERS=\"$PEERS\" WORKLOADS=\"$WORKLOADS\"; load average at start: $(cut -d" " -f1-3 /proc/loadavg) (a shared machine: other jobs may run)"
} | tee "$OUT"
for p in $PEERS; do
	case $p in
	novafs-lifecycle) run_novafs_lifecycle ;;
	novafs-stars) run_novafs_stars ;;
	*) run_peer "$p" ;;
	esac
done
# The ratios of issue 13's RGW rows, from this run's lines only.
python3 - "$OUT" <<'PY' | tee -a "$OUT"
import sys
r = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 2 or line.startswith("#"):
        continue
    r.setdefault(f[0], {})[f[1]] = dict(x.split("=", 1) for x in f[2:] if "=" in x)
def get(p, w, k):
    try:
        return float(r[p][w][k])
    except (KeyError, ValueError):
        return None
def line(name, num, den, target, cmp, how):
    if num is None or den is None or den == 0:
        return
    v = num / den
    met = v <= target if cmp == "<=" else v >= target
    print("ratio %s value=%.2f target=%s%.1f met=%s (%s)" % (name, v, cmp, target, "yes" if met else "no", how))
for p in sorted(r):
    a = r[p].get("a_vs_floor")
    if a:
        line("a_echo_vs_floor_%s" % p, float(a["per_append_ms"]), float(a["floor_mean_ms"]), 1.5, "<=",
             "%s per_append_ms %s / bare PUT mean %s ms; against the p50 %s ms: %s" % (
                 p, a["per_append_ms"], a["floor_mean_ms"], a["floor_p50_ms"], a["ratio_p50"]))
line("b_novafs_fsync_vs_s3fs", get("novafs", "b_dd_append_fsync", "mib_s"), get("s3fs", "b_dd_append", "mib_s"),
     1.0, ">=", "MiB/s until durable, novafs durable=fsync / s3fs")
line("b_novafs_write_vs_s3fs", get("novafs", "b_dd_append", "mib_s"), get("s3fs", "b_dd_append", "mib_s"),
     1.0, ">=", "MiB/s until durable, novafs durable=write (each write durable) / s3fs")
line("c_novafs_vs_s3fs", get("novafs", "c_cold_read", "mib_s"), get("s3fs", "c_cold_read", "mib_s"),
     1.0, ">=", "cold read MiB/s of the durable=write file")
line("c_novafs_fsync_file_vs_s3fs", get("novafs", "c_cold_read_fsync", "mib_s"), get("s3fs", "c_cold_read", "mib_s"),
     1.0, ">=", "cold read MiB/s of the durable=fsync file")
PY
log "raw results in $OUT"
# The plot needs every workload of novafs, s3fs and rclone.
if [ "$WORKLOADS" = "a b c d" ] && [[ " $PEERS " == *" novafs "* && " $PEERS " == *" s3fs "* && " $PEERS " == *" rclone "* ]]; then
	/usr/bin/python3 "$here/plot.py" "$OUT" "$here/peers.png" >&2 || log "plot failed (python3-matplotlib?)"
fi
