#!/bin/bash
# bench/stars.sh - many stars on one host: three novafs mounts (A, B, C),
# each its own data directory, star id and listen= port, sharing one etcd
# member (tests/etcd/etcd.sh) and one directory store (store=dir:), with a
# cluster secret.
#
#   bench/stars.sh [OUT]    (root; default OUT bench/results/stars-DATE.txt)
#
#   a  cross-host append -> follower: N_LAT (200) records of 100 bytes, one
#      every 20 ms, appended on A (bench/follow_latency.py writer); a
#      follower reads B's .follow/ view (fs/rfollow.c: B subscribes at A);
#      latency from just before A's write() to the follower's read().
#   b  stat freshness on B: N_STAT (50) appends on A, one every 20 ms;
#      after each write() returned, B's st_size is polled (every 0.2 ms)
#      until it shows the append: on a mount with attr_timeout=0 and on one
#      with the default (1 s), no follower open on either.
#   c  appends/s with 1, 2 and 3 stars at once, each star's 8 writers
#      appending 4 KiB records to streams of its own bucket (each star
#      leads its own streams; bench/appendbench.py --mode streams),
#      DURATION (5) s, REPS (3) repetitions; the sum over the stars.
#
# What it is not: a test (nothing asserts), or a comparison with s3fs and
# rclone (bench/peers/run.sh does that on RGW, for one mount).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/.." && pwd)
NOVAFS=${NOVAFS:-$top/src/novafs}
OUT=${1:-$top/bench/results/stars-$(date -u +%Y%m%dT%H%M%S).txt}
N_LAT=${N_LAT:-200}
N_STAT=${N_STAT:-50}
DURATION=${DURATION:-5}
REPS=${REPS:-3}
CASES=${CASES:-a b c} # which of a, b, c to run
W=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/novafs-stars.XXXXXX")
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
PIDS=()
ETCD_PID=
cleanup() {
	local p m
	for p in "${PIDS[@]}"; do
		m=${p#*:}
		p=${p%%:*}
		timeout 20 fusermount3 -u "$m" 2>/dev/null || kill -9 "$p" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
		timeout 10 fusermount3 -uz "$m" 2>/dev/null || true
	done
	[ -n "$ETCD_PID" ] && kill "$ETCD_PID" 2>/dev/null || true
	[ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$W"
}
trap cleanup EXIT
result() { echo "RESULT bench=stars $*" | tee -a "$OUT"; }

"$top/tests/etcd/etcd.sh" start "$W/etcd" 1 > "$W/etcd.env"
ETCD_PID=$(cat "$W/etcd/m1.pid")
. "$W/etcd/env.sh"
head -c 32 /dev/urandom | base64 > "$W/secret"
chmod 600 "$W/secret"
mkdir -p "$W/shared"
COMMON="store=dir:$W/shared,meta=$NOVAFS_ETCD_URL,cluster_secret_file=$W/secret"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# star NAME EXTRA_OPTS: mount star NAME at $W/mnt-NAME.
star() {
	mkdir -p "$W/mnt-$1" "$W/data-$1"
	"$NOVAFS" -f -o "data_dir=$W/data-$1,star=s$1,$COMMON,listen=127.0.0.1:$(port)${2:+,$2}" \
		"$W/mnt-$1" > "$W/novafs-$1.log" 2>&1 &
	PIDS+=("$!:$W/mnt-$1")
	for _ in $(seq 600); do mountpoint -q "$W/mnt-$1" && return 0; sleep 0.05; done
	echo "star $1 did not mount: $(tail -3 "$W/novafs-$1.log")" >&2
	exit 1
}
star a
star b attr_timeout=0
star c
star d # B's twin with the default attr_timeout (1 s), for b
A=$W/mnt-a B=$W/mnt-b C=$W/mnt-c D=$W/mnt-d
{
	echo "# bench/stars.sh $(date -u +%FT%TZ) commit $(git -C "$top" rev-parse --short HEAD)$(git -C "$top" diff --quiet || echo +dirty)"
	echo "# machine: $(nproc) cpus, $(awk '/MemTotal/ {print $2/1024/1024 " GiB"}' /proc/meminfo), $(uname -r); load: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$OUT"

mkdir "$A/lat"
case " $CASES " in *" a "*) ;; *) N_LAT=0 ;; esac
case " $CASES " in *" b "*) ;; *) N_STAT=0 ;; esac
case " $CASES " in *" c "*) ;; *) REPS=0 ;; esac

# a. append on A -> follower on B.
if [ "$N_LAT" -gt 0 ]; then
: > "$A/lat/s"
for _ in $(seq 200); do [ -e "$B/.follow/lat/s" ] && break; sleep 0.05; done
python3 "$here/follow_latency.py" reader --path "$B/.follow/lat/s" --count "$N_LAT" --warmup 5 \
	--timeout 120 --out "$W/lat.reader" > "$W/lat.reader.log" &
RP=$!
sleep 0.5 # the reader parks (its open is what subscribes)
python3 "$here/follow_latency.py" writer --path "$A/lat/s" --count "$N_LAT" --warmup 5 \
	--size 100 --interval-ms 20 --out "$W/lat.writer" > /dev/null
wait "$RP" || true
result "case=a_follow $(python3 "$here/follow_latency.py" analyze --writer "$W/lat.writer" --reader "$W/lat.reader" | tail -1)"
fi

# b. stat freshness on B (attr_timeout=0) and D (default 1 s): D is
#    polled after B saw the append (t0 is the write's return for both).
if [ "$N_STAT" -gt 0 ]; then
: > "$A/lat/st"
for _ in $(seq 200); do [ -e "$B/lat/st" ] && [ -e "$D/lat/st" ] && break; sleep 0.05; done
python3 - "$A/lat/st" "$B/lat/st" "$D/lat/st" "$N_STAT" <<'PY' | while read -r l; do result "$l"; done
import os, sys, time
a, views, n = sys.argv[1], sys.argv[2:4], int(sys.argv[4])
names = ("b_stat_attr0", "b_stat_attr1s")
lat = {v: [] for v in views}
size = os.stat(a).st_size
for i in range(n):
    fd = os.open(a, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"r%07d\n" % i)
    os.close(fd)
    size += 9
    t0 = time.monotonic()
    for v in views:
        while os.stat(v).st_size < size:
            if time.monotonic() - t0 > 10:
                break
            time.sleep(0.0002)
        lat[v].append((time.monotonic() - t0) * 1000)
    time.sleep(0.02)
for name, v in zip(names, views):
    l = sorted(lat[v])
    print("case=%s n=%d p50_ms=%.3f p99_ms=%.3f max_ms=%.3f" % (name, n, l[n // 2], l[min(n - 1, int(n * 0.99))], l[-1]))
PY
fi

# c. appends/s with 1, 2, 3 stars, each on its own streams.
for rep in $(seq "$REPS"); do
	for k in 1 2 3; do
		mounts=("$A" "$B" "$C")
		ps=()
		for j in $(seq 0 $((k - 1))); do
			d=${mounts[$j]}/c$k-r$rep-s$j # a bucket made on star j: j leads its streams
			mkdir "$d"
			python3 "$here/appendbench.py" --dir "$d" --mode streams --writers 8 --size 4096 \
				--duration "$DURATION" --warmup 0.5 > "$W/c.$k.$j.out" &
			ps+=($!)
		done
		for p in "${ps[@]}"; do wait "$p"; done
		sum=$(cat "$W"/c.$k.*.out | grep -o 'appends_per_s=[0-9.]*' | cut -d= -f2 | paste -sd+ | bc)
		per=$(cat "$W"/c.$k.*.out | grep -o 'appends_per_s=[0-9.]*' | cut -d= -f2 | paste -sd' ')
		result "case=c_appends stars=$k rep=$rep appends_per_s=$sum per_star=\"$per\""
		rm -f "$W"/c.$k.*.out
	done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT"
