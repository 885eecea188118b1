#!/bin/bash
# /tmp/h1/exp.sh OUT: one RGW; novafs writes big (dd bs=1M) into a transit
# bucket (settlement held off) and, optionally, a settled bucket; s3fs writes
# its copy; then REPS rounds of interleaved cold reads over VARIANTS.
#   VARIANTS="name:kind:binary:opts ..." kind = nt (transit) | ns (settled) | s3fs
#   opts: comma-separated novafs -o options (use + for ',' inside).
set -euo pipefail
top=/work/main
. "$top/tests/s3/s3lib.sh"
OUT=${1:-/tmp/h1/exp.txt}
REPS=${REPS:-3}
BIG_MIB=${BIG_MIB:-256}
SETTLED=${SETTLED:-0}
VARIANTS=${VARIANTS:-"s3fs:s3fs:: nt:nt:/tmp/h1/bin/novafs:"}
W=$(mktemp -d /tmp/h1/exp.XXXXXX)
PIDS=() MOUNTS=()
cleanup() {
	set +e
	for m in "${MOUNTS[@]}"; do mountpoint -q "$m" && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m"; }; done
	for p in "${PIDS[@]}"; do
		kill -0 "$p" 2>/dev/null || continue
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$p" 2>/dev/null && kill -9 "$p"
	done
	s3_rgw_stop "$W/rgw"
	[ -n "${KEEP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "[$(date +%T)] $*" >&2; }
res() { echo "$* load1=$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT"; }
mkdir -p "$W/rgw"
s3_rgw_start "$W/rgw"
EP=$NOVAFS_RGW_ENDPOINT AK=$NOVAFS_RGW_ACCESS_KEY SK=$NOVAFS_RGW_SECRET_KEY
if [ "${USAGE:-0}" = 1 ]; then
	printf 'rgw enable usage log = true\nrgw usage log tick interval = 1\nrgw usage log flush threshold = 1\n' >> "$W/rgw/ceph.conf"
	kill "$(cat "$W/rgw/radosgw.pid")"; while kill -0 "$(cat "$W/rgw/radosgw.pid")" 2>/dev/null; do sleep 0.1; done
	radosgw -c "$W/rgw/ceph.conf" -n client.rgw.test -f >>"$W/rgw/log/radosgw.out" 2>&1 </dev/null &
	echo $! > "$W/rgw/radosgw.pid"; s3_wait_http 60 "$EP/"
fi
RGWPID=$(cat "$W/rgw/radosgw.pid")
OSDPID=$(cat "$W/rgw/osd.pid" 2>/dev/null || pgrep -f "ceph-osd.*$W" | head -1)
RGWLOG=$W/rgw/log/client.rgw.test.log
echo "# exp $(date -Is) VARIANTS=$VARIANTS REPS=$REPS load=$(cat /proc/loadavg)" | tee -a "$OUT"
head -c $((BIG_MIB << 20)) /dev/urandom > "$W/big.src"

wait_mount() { local m=$1 pid=$2 n=300
	until mountpoint -q "$m"; do kill -0 "$pid" 2>/dev/null || { echo "mount died" >&2; exit 1; }; ((n-- > 0)) || exit 1; sleep 0.1; done
	MOUNTS+=("$m"); }
mount_nova() { # BUCKET DATA MNT BIN OPTS
	mkdir -p "$3" "$2"
	"$4" -f -o "data_dir=$2,store=$(s3_rgw_url "$1")${5:+,$5}" "$3" >> "$W/novafs.log" 2>&1 &
	PIDS+=($!); DPID=$!; wait_mount "$3" "$!"; }
printf '%s:%s\n' "$AK" "$SK" > "$W/s3fs.passwd"; chmod 600 "$W/s3fs.passwd"
mount_s3fs() { mkdir -p "$2"
	s3fs "$1" "$2" -f -o url="$EP" -o use_path_request_style -o passwd_file="$W/s3fs.passwd" -o dbglevel=warn >> "$W/s3fs.log" 2>&1 &
	PIDS+=($!); DPID=$!; wait_mount "$2" "$!"; }
umount_all() {
	for m in "${MOUNTS[@]}"; do local n=100; until fusermount3 -u "$m" 2>/dev/null; do ((n-- > 0)) || fusermount3 -uz "$m"; sleep 0.1; done; done
	MOUNTS=()
	for p in "${PIDS[@]}"; do for _ in $(seq 600); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; wait "$p" 2>/dev/null || true; done
	PIDS=(); }
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
stats() { getfattr --absolute-names --only-values -n user.nova.stats "$1" 2>/dev/null || echo '{}'; }
LINGER=${LINGER-settle_linger_s=86400,age_cap_standard_s=2592000}

# --- write phase
s3_rgw_bucket_create nova-t; s3_rgw_bucket_create s3fs-b
mount_nova nova-t "$W/nt.data" "$W/mnt" /tmp/h1/bin/novafs "$LINGER"
mkdir "$W/mnt/b"; dd if="$W/big.src" of="$W/mnt/b/big" bs=1M oflag=append conv=notrunc status=none
umount_all
if [ "$SETTLED" = 1 ]; then
	s3_rgw_bucket_create nova-s
	mount_nova nova-s "$W/ns.data" "$W/mnt" /tmp/h1/bin/novafs "settle_linger_s=0"
	mkdir "$W/mnt/b"; dd if="$W/big.src" of="$W/mnt/b/big" bs=1M oflag=append conv=notrunc status=none
	n=0; until [ "$(getfattr --absolute-names --only-values -n user.nova.settled "$W/mnt/b/big" 2>/dev/null)" = 256 ] || ((n++ > 600)); do sleep 0.5; done
	log "ns settled=$(getfattr --absolute-names --only-values -n user.nova.settled "$W/mnt/b/big") after $((n/2)) s"
	sleep 5  # let slot deletion go
	getfattr -d -m user.nova "$W/mnt/b/big" 2>&1 | head -20 >&2
	umount_all
fi
mount_s3fs s3fs-b "$W/mnt"; dd if="$W/big.src" of="$W/mnt/big" bs=1M status=none; umount_all
sleep 2


if [ "${RAW:-0}" = 1 ]; then
	keys=$(s3_curl "$EP" "$AK" "$SK" GET "/nova-t?list-type=2&max-keys=1000&prefix=chains%2F" | grep -o '<Key>[^<]*</Key>' | sed 's/<[^>]*>//g')
	log "chain keys: $(wc -w <<< "$keys")"
	rawget() { # NAME P URL-ARGS...
		local name=$1 p=$2; shift 2
		local g0 o0 g1 o1 t0 secs n=$(( $# / 3 ))
		g0=$(cpu "$RGWPID"); o0=$(cpu "$OSDPID"); read -r _ u nn sy id io irq sirq st _ < /proc/stat; t0=$EPOCHREALTIME
		curl -sS --no-progress-meter --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AK:$SK" -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" --parallel --parallel-max "$p" "$@"
		secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
		g1=$(cpu "$RGWPID"); o1=$(cpu "$OSDPID"); read -r _ u2 n2 sy2 id2 io2 irq2 sirq2 st2 _ < /proc/stat
		res "raw=$name p=$p reqs=$n secs=$secs mib_s=$(awk -v s="$secs" -v m="$BIG_MIB" 'BEGIN { printf "%.1f", m / s }') rgw_cpu_s=$(awk -v a="$g0" -v b="$g1" 'BEGIN { printf "%.2f", (b - a) / 100 }') osd_cpu_s=$(awk -v a="$o0" -v b="$o1" 'BEGIN { printf "%.2f", (b - a) / 100 }') sys_busy_s=$(awk -v a=$((u+nn+sy+irq+sirq)) -v b=$((u2+n2+sy2+irq2+sirq2)) 'BEGIN{printf "%.2f",(b-a)/100}') sys_idle_s=$(awk -v a=$((id+io)) -v b=$((id2+io2)) 'BEGIN{printf "%.2f",(b-a)/100}')"
	}
	slots=(); for k in $keys; do slots+=(-o /dev/null "$EP/nova-t/$k"); done
	r1m=(); for ((i = 0; i < BIG_MIB; i++)); do r1m+=(-o /dev/null -r "$((i << 20))-$(( ((i + 1) << 20) - 1 ))" "$EP/s3fs-b/big"); done
	r10=(); for ((o = 0; o < (BIG_MIB << 20); o += 10485760)); do r10+=(-o /dev/null -r "$o-$((o + 10485759))" "$EP/s3fs-b/big"); done
	r8=(); for ((o = 0; o < (BIG_MIB << 20); o += 8388608)); do r8+=(-o /dev/null -r "$o-$((o + 8388607))" "$EP/s3fs-b/big"); done
	for ((r = 1; r <= REPS; r++)); do
		rawget slots1m 4 "${slots[@]}"
		rawget range1m 4 "${r1m[@]}"
		rawget range8m 4 "${r8[@]}"
		rawget range10m 2 "${r10[@]}"
		rawget slots1m 8 "${slots[@]}"
		rawget range10m 4 "${r10[@]}"
	done
	exit 0
fi
# --- read phase
for ((r = 1; r <= REPS; r++)); do
	for v in $VARIANTS; do
		IFS=: read -r name kind bin opts <<< "$v"
		opts=${opts//+/,}
		case $kind in
			s3fs) mount_s3fs s3fs-b "$W/mnt"; f=$W/mnt/big ;;
			nt) mount_nova nova-t "$W/nt.data" "$W/mnt" "$bin" "$LINGER${LINGER:+${opts:+,}}$opts"; f=$W/mnt/b/big ;;
			ns) mount_nova nova-s "$W/ns.data" "$W/mnt" "$bin" "settle_linger_s=0${opts:+,$opts}"; f=$W/mnt/b/big ;;
		esac
		[ "$kind" = s3fs ] || s0=$(stats "$W/mnt")
		sync; echo 3 > /proc/sys/vm/drop_caches
		mk=$(wc -l < "$RGWLOG")
		c0=$(cpu "$DPID"); g0=$(cpu "$RGWPID"); o0=$(cpu "$OSDPID")
		read -r _ u n sy id io irq sirq st _ < /proc/stat
		t0=$EPOCHREALTIME
		if [ -n "${STRACE:-}" ] && [ "$kind" != s3fs ]; then
			strace -c -f -p "$DPID" -o "$W/strace.$name.$r" & SP=$!; sleep 0.5
			t0=$EPOCHREALTIME
		fi
		if [ -n "${PERF:-}" ] && [ "$kind" != s3fs ]; then
			perf record -g -p "$DPID" -o "/tmp/h1/perf.$name.$r.data" 2>/dev/null & SP=$!; sleep 0.5
			t0=$EPOCHREALTIME
		fi
		dd if="$f" of="${OF:-/dev/null}" bs=1M status=none; [ -z "${OF:-}" ] || rm -f "$OF"
		secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
		read -r _ u2 n2 sy2 id2 io2 irq2 sirq2 st2 _ < /proc/stat
		sysw="sys_busy_s=$(awk -v a=$((u+n+sy+irq+sirq)) -v b=$((u2+n2+sy2+irq2+sirq2)) 'BEGIN{printf "%.2f",(b-a)/100}') sys_idle_s=$(awk -v a=$((id+io)) -v b=$((id2+io2)) 'BEGIN{printf "%.2f",(b-a)/100}') steal_s=$(awk -v a=$st -v b=$st2 'BEGIN{printf "%.2f",(b-a)/100}')"
		c1=$(cpu "$DPID"); g1=$(cpu "$RGWPID"); o1=$(cpu "$OSDPID")
		if [ -n "${STRACE:-}${PERF:-}" ] && [ "$kind" != s3fs ]; then kill -INT $SP; wait $SP || true; [ -n "${STRACE:-}" ] && cp "$W/strace.$name.$r" /tmp/h1/; fi
		sleep 0.3
		tail -n +$((mk + 1)) "$RGWLOG" | grep 'beast: ' | grep -v '"curl/' > "$W/acc" || true
		cp "$W/acc" "/tmp/h1/acc.$(basename "$OUT" .txt).$name.$r"
		g=$(python3 - "$W/acc" "$secs" <<'PY'
import re, sys, datetime
secs = float(sys.argv[2])
rx = re.compile(r"\[(\d+/\w+/\d+:\d+:\d+:\d+)(\.\d+) [^]]*\] \"(\w+) (\S+) .*latency=([0-9.]+)s")
sp = []; keys = {"chains": 0, "other": 0}
for l in open(sys.argv[1]):
    m = rx.search(l)
    if not m or m.group(3) != "GET": continue
    t = datetime.datetime.strptime(m.group(1), "%d/%b/%Y:%H:%M:%S").timestamp() + float(m.group(2))
    sp.append((t, t + float(m.group(5))))
    keys["chains" if "/chains/" in m.group(4) or "chains%2F" in m.group(4) else "other"] += 1
tot = sum(b - a for a, b in sp)
print("gets=%d get_ms=%.1f inflight=%.2f chainkeys=%d otherkeys=%d" % (len(sp), tot / max(1, len(sp)) * 1000, tot / secs, keys["chains"], keys["other"]))
PY
)
		extra=
		if [ "$kind" != s3fs ]; then
			s1=$(stats "$W/mnt")
			extra=$(python3 -c '
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ks = ["prefetches", "whole_fetches", "footer_fetches", "chunk_fetches", "read_cache_hits", "cold_reads"]
print(" ".join("%s=%s" % (k, b.get(k, 0) - a.get(k, 0)) for k in ks))' "$s0" "$s1")
		fi
		res "r=$r v=$name kind=$kind secs=$secs mib_s=$(awk -v s="$secs" -v m="$BIG_MIB" 'BEGIN { printf "%.1f", m / s }') $g daemon_cpu_s=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", (b - a) / 100 }') rgw_cpu_s=$(awk -v a="$g0" -v b="$g1" 'BEGIN { printf "%.2f", (b - a) / 100 }') osd_cpu_s=$(awk -v a="$o0" -v b="$o1" 'BEGIN { printf "%.2f", (b - a) / 100 }') $sysw $extra"
		umount_all
	done
done
