#!/bin/bash
# bench/follow_latency.sh - issue 5 (Subscriptions): how soon a follower sees
# an append, and what idle followers cost.
#
# novafs on the embedded defaults (a data dir under the temp dir, DEFER_SETTLE=0
# here: no option but data_dir), a fresh data dir and daemon per repetition.
# Three parts, side by side in every repetition (bench/follow_latency.py
# does the timing, CLOCK_MONOTONIC throughout):
#   1. latency  One writer appends APPENDS records of REC_SIZE bytes to
#               MNT/b/s (after WARMUP_APPENDS unmeasured ones), one write()
#               per record, O_APPEND, once back to back (interval 0) and once
#               per other interval of INTERVALS_MS on a fixed schedule (stream
#               MNT/b/s-every-Nms; 1 ms: about half the back-to-back rate);
#               each record carries its send time (taken just before
#               the write()).  One follower, a python process blocked in
#               os.read() on MNT/.follow/b/s, stamps each record when its read
#               returns.  Reported: follower latency (receive - send) p50 p90
#               p99 p99.9 max, the writer's own write() latency (the
#               durability cost), and receive - the writer's ack (the
#               follower's extra delay; negative when the follower had the
#               record before write() returned).  Issue 5's target: p99 <= 5 ms.
#   2. tail     TAIL_APPENDS records at TAIL_INTERVAL_MS to MNT/b/t (which
#               starts with one header line), then TAIL_TRAIL unmeasured ones
#               back to back (they push out stdio-buffered output), read at
#               once by five consumers, each through a FIFO into a python
#               reader that stamps lines:
#                 tail_plain      tail -f MNT/b/t
#                 tail_follow     tail -f MNT/.follow/b/t
#                 tail_n1_follow  tail -n +1 -f MNT/.follow/b/t
#                 stdbuf_n1_follow stdbuf -oL tail -n +1 -f MNT/.follow/b/t
#                 cat_follow      cat MNT/.follow/b/t
#               GNU tail sees FUSE as remote: it fstat()s once a second and
#               reads what the size grew by (both views); with -n +1 it reads
#               to end-of-file first, which on the follow view parks, and its
#               stdio output to a pipe is block-buffered unless stdbuf -oL.
#   3. idle     FOLLOWERS followers over FOLLOW_STREAMS streams
#               MNT/idle/sNNN (each starts with one record): the daemon's CPU
#               (utime+stime of /proc/PID/stat, and the schedstat sum of its
#               threads) and thread count over IDLE_S seconds with no
#               followers; with FOLLOWERS `cat MNT/.follow/idle/sNNN` parked
#               (awaited: stats parked_readers == FOLLOWERS), plus the cats'
#               own CPU; then one append per stream, and every cat must print
#               it (stats wakes grows by FOLLOWERS); then the same with
#               FOLLOWERS `tail -f MNT/idle/sNNN` (their CPU and the
#               daemon's) and one more append per stream.
# The daemon runs in the foreground (-f) so its PID is known; the EXIT trap
# unmounts and kills only PIDs this script started.  Load averages
# (/proc/loadavg) are printed at the start and end of the run and of every
# repetition; every RESULT line also has the machine's busy fraction.
#
# Environment: REPS (3), PARTS ("latency tail idle"), APPENDS (10000),
# WARMUP_APPENDS (200), REC_SIZE (100), INTERVALS_MS ("0 1"), TAIL_APPENDS (300),
# TAIL_INTERVAL_MS (20), TAIL_TRAIL (64), FOLLOWERS (1000), FOLLOW_STREAMS
# (100), IDLE_S (30), QUICK (0; 1: REPS=1 APPENDS=1000 WARMUP_APPENDS=50
# TAIL_APPENDS=60 FOLLOWERS=100 FOLLOW_STREAMS=10 IDLE_S=3, under a minute),
# plus the common ones of bench/lib.sh (DEFER_SETTLE defaults to 0 here).
set -euo pipefail
: "${DEFER_SETTLE:=0}"
. "$(dirname "$0")/lib.sh"

: "${QUICK:=0}"
if [ "$QUICK" = 1 ]; then
	: "${REPS:=1}" "${APPENDS:=1000}" "${WARMUP_APPENDS:=50}" "${TAIL_APPENDS:=60}"
	: "${FOLLOWERS:=100}" "${FOLLOW_STREAMS:=10}" "${IDLE_S:=3}"
fi
: "${REPS:=3}"
: "${PARTS:=latency tail idle}"
: "${APPENDS:=10000}"
: "${WARMUP_APPENDS:=200}"
: "${REC_SIZE:=100}"
: "${INTERVALS_MS:=0 1}"
: "${TAIL_APPENDS:=300}"
: "${TAIL_INTERVAL_MS:=20}"
: "${TAIL_TRAIL:=64}"
: "${FOLLOWERS:=1000}"
: "${FOLLOW_STREAMS:=100}"
: "${IDLE_S:=30}"
HELPER=$BENCH_DIR/follow_latency.py
TAIL_KINDS="tail_plain tail_follow tail_n1_follow stdbuf_n1_follow cat_follow"
HZ=$(getconf CLK_TCK)

bench_init follow_latency
command -v getfattr > /dev/null || die "getfattr is not installed (attr)"
command -v stdbuf > /dev/null || die "stdbuf is not installed (coreutils)"
((FOLLOWERS % FOLLOW_STREAMS == 0)) || die "FOLLOWERS must be a multiple of FOLLOW_STREAMS"
need_space 1024

# A private copy of the daemon: others rebuild src/novafs while this runs.
cp "$NOVAFS" "$B_TMP/novafs"
NOVAFS=$B_TMP/novafs

# Followers (cat, tail) are tracked here, not in B_BG: the EXIT trap kills
# them first, all at once by PID, and forgets them once reaped.
FOL=()
fol_kill() {
	((${#FOL[@]})) || return 0
	kill -TERM "${FOL[@]}" 2> /dev/null || true
	local p
	for p in "${FOL[@]}"; do
		nv_wait_pid_exit "$p" 5 || kill -9 "$p" 2> /dev/null || true
		wait "$p" 2> /dev/null || true
	done
	FOL=()
}
fl_cleanup() {
	local rc=$?
	set +e
	fol_kill
	(exit "$rc")
	bench_cleanup
}
trap fl_cleanup EXIT
# bg_forget PID...: drop reaped helpers from B_BG (their PIDs may be reused).
bg_forget() {
	local p q keep=()
	for p in "${B_BG[@]}"; do
		for q in "$@"; do [ "$p" = "$q" ] && continue 2; done
		keep+=("$p")
	done
	B_BG=("${keep[@]}")
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
stat_get() { nova_stats | grep -o "\"$1\":[0-9]*" | cut -d: -f2; }
parked_is() { [ "$(stat_get parked_readers)" = "$1" ]; }
threads() { awk '/^Threads:/ { print $2 }' "/proc/$1/status"; }
# await SECS WHAT CMD...: poll CMD every 50 ms; die after SECS.
await() {
	local n=$(($1 * 20)) what=$2
	shift 2
	until "$@"; do
		((n-- > 0)) || die "timed out waiting for $what"
		sleep 0.05
	done
}
# pcpu PID...|--pidfile F: "ticks ns threads alive" summed over the PIDs.
pcpu() { python3 "$HELPER" cpu "$@"; }
# kv KEY LINE
kv() { tr ' ' '\n' <<< "$2" | awk -F= -v k="$1" '$1 == k { print $2 }'; }

declare -A R
add() { R[$1]+="$2 "; }

# ---------------------------------------------------------------- 1. latency
# lat_run REP WORKDIR INTERVAL_MS STREAM: one writer, one follower.
lat_run() {
	local rep=$1 w=$2/lat-$3 iv=$3 f=$MNT/b/$4 rp rc=0 a c0 c1 cd s0 s1 d wout k
	mkdir "$w"
	: > "$f"
	python3 "$HELPER" reader --path "$MNT/.follow/b/$4" --count "$APPENDS" \
		--warmup "$WARMUP_APPENDS" --timeout 900 --out "$w/r" > "$w/r.log" 2>&1 &
	rp=$!
	B_BG+=("$rp")
	await 30 "the follower of b/$4 to park" parked_is 1
	s0=$(nova_stats)
	c0=$(cpu_snap)
	wout=$(python3 "$HELPER" writer --path "$f" --count "$APPENDS" --warmup "$WARMUP_APPENDS" \
		--size "$REC_SIZE" --interval-ms "$iv" --out "$w/w")
	c1=$(cpu_snap)
	s1=$(nova_stats)
	nv_wait_pid_exit "$rp" 30 || say "latency: the follower is still running 30 s after the writer ended"
	kill -INT "$rp" 2> /dev/null || true
	wait "$rp" || rc=$?
	bg_forget "$rp"
	((rc == 0)) || say "latency: follower status $rc: $(cat "$w/r.log")"
	a=$(python3 "$HELPER" analyze --writer "$w/w" --reader "$w/r" --over 5)
	cd=$(cpu_delta "$c0" "$c1")
	d=$(stats_delta "$s0" "$s1" appends flights wakes)
	result "part=latency rep=$rep stream=b/$4 appends=$APPENDS rec=$REC_SIZE interval_ms=$iv $a" \
		"appends_per_s=$(kv appends_per_s "$wout") $cd $d"
	for k in p50_ms p90_ms p99_ms p999_ms max_ms write_p50_ms write_p90_ms write_p99_ms write_max_ms \
		extra_p50_ms extra_p99_ms before_ack_frac over_5ms received; do
		add "lat$iv-$k" "$(kv "$k" "$a")"
	done
	add "lat$iv-aps" "$(kv appends_per_s "$wout")"
	add "lat$iv-busy" "$(kv sys_busy "$cd")"
	add "lat$iv-dcores" "$(kv daemon_cores "$cd")"
	nova_wait_absorbed "$f"
}

part_latency() {
	local iv name
	mkdir "$MNT/b"
	for iv in $INTERVALS_MS; do
		name=s
		[ "$iv" = 0 ] || name=s-every-${iv}ms
		lat_run "$1" "$2" "$iv" "$name"
		settle
	done
}

# ---------------------------------------------------------------- 2. tail
part_tail() {
	local rep=$1 w=$2 k f rp pp a rpids=() parked
	local t=$MNT/b/t ft=$MNT/.follow/b/t
	[ -d "$MNT/b" ] || mkdir "$MNT/b"
	printf '# follow_latency header\n' >> "$t"
	for k in $TAIL_KINDS; do
		mkfifo "$w/fifo.$k"
		python3 "$HELPER" reader --path "$w/fifo.$k" --count "$TAIL_APPENDS" --ready "$w/ready.$k" \
			--timeout $((TAIL_APPENDS * TAIL_INTERVAL_MS / 1000 + 60)) --out "$w/tail.$k.r" \
			> "$w/tail.$k.log" 2>&1 &
		rp=$!
		rpids+=("$rp")
		B_BG+=("$rp")
		case $k in
		tail_plain) tail -f "$t" > "$w/fifo.$k" 2> "$w/tail.$k.err" & ;;
		tail_follow) tail -f "$ft" > "$w/fifo.$k" 2> "$w/tail.$k.err" & ;;
		tail_n1_follow) tail -n +1 -f "$ft" > "$w/fifo.$k" 2> "$w/tail.$k.err" & ;;
		stdbuf_n1_follow) stdbuf -oL tail -n +1 -f "$ft" > "$w/fifo.$k" 2> "$w/tail.$k.err" & ;;
		cat_follow) cat "$ft" > "$w/fifo.$k" 2> "$w/tail.$k.err" & ;;
		esac
		pp=$!
		FOL+=("$pp")
	done
	# Ready: every consumer that prints the header did (tail_n1_follow holds
	# it in its stdio buffer), and the ones that read to end-of-file parked.
	ready_all() {
		local k n=0
		for k in tail_plain tail_follow stdbuf_n1_follow cat_follow; do
			[ -s "$w/ready.$k" ] && n=$((n + 1))
		done
		[ "$n" = 4 ]
	}
	await 30 "the tail consumers to print the header" ready_all
	parked=$(stat_get parked_readers)
	if ! parked_is 3; then
		sleep 2
		parked=$(stat_get parked_readers)
		[ "$parked" = 3 ] || say "tail: parked_readers is $parked, expected 3 (tail -n +1, stdbuf tail -n +1, cat)"
	fi
	python3 "$HELPER" writer --path "$t" --count "$TAIL_APPENDS" --trail "$TAIL_TRAIL" \
		--size "$REC_SIZE" --interval-ms "$TAIL_INTERVAL_MS" --out "$w/tail.w" > /dev/null
	# The pollers need up to ~1 s after the last append (2 s: a loaded box).
	for rp in "${rpids[@]}"; do
		nv_wait_pid_exit "$rp" 5 || true
	done
	fol_kill # the producers: EOF to any reader still waiting
	for rp in "${rpids[@]}"; do
		nv_wait_pid_exit "$rp" 10 || kill -INT "$rp" 2> /dev/null || true
		wait "$rp" || true # a short count shows in its log line
	done
	bg_forget "${rpids[@]}"
	for k in $TAIL_KINDS; do
		a=$(python3 "$HELPER" analyze --writer "$w/tail.w" --reader "$w/tail.$k.r")
		result "part=tail rep=$rep consumer=$k appends=$TAIL_APPENDS interval_ms=$TAIL_INTERVAL_MS" \
			"parked_at_start=$parked $a reader=\"$(tr '\n' ' ' < "$w/tail.$k.log")\""
		for f in received p50_ms p90_ms p99_ms max_ms; do
			add "tail-$k-$f" "$(kv "$f" "$a")"
		done
	done
	nova_wait_absorbed "$t"
}

# ---------------------------------------------------------------- 3. idle
# idle_window CASE PIDFILE: IDLE_S seconds of nothing; the daemon's CPU and
# threads, and the followers' CPU (PIDFILE, or none).
idle_window() {
	local case=$1 pf=$2 d0 d1 f0='0 0 0 0' f1='0 0 0 0' c0 c1 l0 cd
	l0=$(loadavg)
	c0=$(cpu_snap)
	d0=$(pcpu "$NV_PID")
	[ -z "$pf" ] || f0=$(pcpu --pidfile "$pf")
	sleep "$IDLE_S"
	d1=$(pcpu "$NV_PID")
	[ -z "$pf" ] || f1=$(pcpu --pidfile "$pf")
	c1=$(cpu_snap)
	cd=$(cpu_delta "$c0" "$c1")
	# shellcheck disable=SC2086
	set -- $d0 $d1 $f0 $f1
	# $1..$4 daemon before (ticks ns threads alive), $5..$8 after,
	# $9..$12 followers before, $13..$16 after
	IW="daemon_cpu_ms=$((($5 - $1) * 1000 / HZ)) daemon_cpu_sched_ms=$(calc "($6 - $2) / 1e6")"
	IW+=" daemon_threads=$7 followers_cpu_ms=$(((${13} - $9) * 1000 / HZ))"
	IW+=" followers_cpu_sched_ms=$(calc "(${14} - ${10}) / 1e6") followers_alive=${16}"
	IW+=" idle_s=$IDLE_S $(kv sys_busy "$cd" | sed 's/^/sys_busy=/') load_start=${l0%% *} load_end=$(kv load1 "$cd")"
	add "idle-$case-dcpu" "$(kv daemon_cpu_ms "$IW")"
	add "idle-$case-dsched" "$(kv daemon_cpu_sched_ms "$IW")"
	add "idle-$case-thr" "$(kv daemon_threads "$IW")"
	add "idle-$case-fcpu" "$(kv followers_cpu_ms "$IW")"
	add "idle-$case-fsched" "$(kv followers_cpu_sched_ms "$IW")"
	add "idle-$case-busy" "$(kv sys_busy "$IW")"
}

# wake_round TAG PATTERN OUTDIR: append "PATTERN sNNN" to every idle stream,
# wait until all FOLLOWERS outputs show it.  Sets WK.
wake_round() {
	local s t0 t1 w0 w1 out rc=0
	w0=$(stat_get wakes)
	t0=$EPOCHREALTIME
	for ((s = 0; s < FOLLOW_STREAMS; s++)); do
		printf '%s s%03d\n' "$2" "$s" >> "$MNT/idle/$(printf 's%03d' "$s")"
	done
	t1=$EPOCHREALTIME
	out=$(python3 "$HELPER" wakecheck --dir "$3" --pattern "$2 s" --count "$FOLLOWERS" --timeout 60) || rc=$?
	# all_s: from the first append until every follower printed its record
	WK="appends_s=$(calc "$t1 - $t0") $out all_s=$(calc "$EPOCHREALTIME - $t0")"
	w1=$(stat_get wakes)
	WK+=" wakes_delta=$((w1 - w0))"
	((rc == 0)) || say "$1: not every follower printed the new record: $out"
}

part_idle() {
	local rep=$1 w=$2 s i t0 thr0 thrmax=0 thrp pf
	mkdir "$MNT/idle" "$w/cat" "$w/tail"
	for ((s = 0; s < FOLLOW_STREAMS; s++)); do
		printf 'init s%03d\n' "$s" >> "$MNT/idle/$(printf 's%03d' "$s")"
	done
	nova_wait_absorbed "$MNT"/idle/s*
	settle

	idle_window none ""
	thr0=$(kv daemon_threads "$IW")
	result "part=idle rep=$rep case=none $IW"

	# FOLLOWERS cats on the follow view.
	t0=$EPOCHREALTIME
	for ((i = 0; i < FOLLOWERS; i++)); do
		s=$(printf 's%03d' $((i % FOLLOW_STREAMS)))
		cat "$MNT/.follow/idle/$s" > "$w/cat/$i" 2> /dev/null &
		FOL+=("$!")
	done
	pf=$w/cat.pids
	printf '%s\n' "${FOL[@]}" > "$pf"
	all_parked() {
		local t
		t=$(threads "$NV_PID")
		((t > thrmax)) && thrmax=$t
		parked_is "$FOLLOWERS"
	}
	await 180 "$FOLLOWERS cats to park (parked_readers $(stat_get parked_readers))" all_parked
	local park_s
	park_s=$(calc "$EPOCHREALTIME - $t0")
	settle
	thrp=$(threads "$NV_PID")
	idle_window follow "$pf"
	result "part=idle rep=$rep case=follow followers=$FOLLOWERS streams=$FOLLOW_STREAMS $IW" \
		"park_s=$park_s threads_before=$thr0 threads_max_while_parking=$thrmax threads_parked=$thrp" \
		"parked_after=$(stat_get parked_readers)"
	add idle-follow-thrmax "$thrmax"
	add idle-follow-park "$park_s"
	wake_round follow wake "$w/cat"
	await 30 "the cats to park again" parked_is "$FOLLOWERS"
	result "part=idle rep=$rep case=follow_wake followers=$FOLLOWERS $WK parked_after=$(stat_get parked_readers)"
	add idle-follow-woke "$(kv woke "$WK")"
	add idle-follow-wake_s "$(kv all_s "$WK")"
	add idle-follow-wakes "$(kv wakes_delta "$WK")"
	fol_kill
	await 30 "parked_readers to fall to 0" parked_is 0
	settle

	# FOLLOWERS tail -f on the plain files.
	t0=$EPOCHREALTIME
	for ((i = 0; i < FOLLOWERS; i++)); do
		s=$(printf 's%03d' $((i % FOLLOW_STREAMS)))
		tail -f "$MNT/idle/$s" > "$w/tail/$i" 2> /dev/null &
		FOL+=("$!")
	done
	pf=$w/tail.pids
	printf '%s\n' "${FOL[@]}" > "$pf"
	python3 "$HELPER" wakecheck --dir "$w/tail" --pattern "init s" --count "$FOLLOWERS" --timeout 120 > /dev/null ||
		die "not all $FOLLOWERS tail -f printed their stream"
	local start_s
	start_s=$(calc "$EPOCHREALTIME - $t0")
	settle
	idle_window tail "$pf"
	result "part=idle rep=$rep case=tail followers=$FOLLOWERS streams=$FOLLOW_STREAMS $IW start_s=$start_s"
	wake_round tail tailwake "$w/tail"
	result "part=idle rep=$rep case=tail_wake followers=$FOLLOWERS $WK"
	add idle-tail-woke "$(kv woke "$WK")"
	add idle-tail-wake_s "$(kv all_s "$WK")"
	fol_kill
}

# ---------------------------------------------------------------- run
say "load average at start: $(loadavg)"
LOAD_START=$(loadavg)
printf '== follow_latency: %s, commit %s, daemon sha256 %s\n' "$(date -u +%FT%TZ)" \
	"$(git -C "$ROOT_DIR" rev-parse --short HEAD 2> /dev/null || echo '?')" \
	"$(sha256sum "$NOVAFS" | cut -c1-16)"
printf 'machine: nproc %s, %s MiB RAM, kernel %s, temp dir on %s (%s)\n' "$(nproc)" \
	"$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)" "$(uname -r)" \
	"$(df --output=source "$B_TMP" | tail -1)" "$(stat -f -c %T "$B_TMP")"
printf 'settings: REPS=%s PARTS="%s" APPENDS=%s WARMUP_APPENDS=%s REC_SIZE=%s INTERVALS_MS="%s" TAIL_APPENDS=%s TAIL_INTERVAL_MS=%s FOLLOWERS=%s FOLLOW_STREAMS=%s IDLE_S=%s DEFER_SETTLE=%s NOVA_OPTS=%s\n' \
	"$REPS" "$PARTS" "$APPENDS" "$WARMUP_APPENDS" "$REC_SIZE" "$INTERVALS_MS" "$TAIL_APPENDS" \
	"$TAIL_INTERVAL_MS" "$FOLLOWERS" "$FOLLOW_STREAMS" "$IDLE_S" "$DEFER_SETTLE" "$NOVA_OPTS"
printf 'load average at start: %s\n' "$LOAD_START"

for rep in $(seq 1 "$REPS"); do
	W=$B_TMP/w$rep
	DATA=$B_TMP/data-$rep
	mkdir "$W" "$DATA"
	printf -- '-- rep %d: load average at start %s\n' "$rep" "$(loadavg)"
	add load-start "$(loadavg | cut -d' ' -f1)"
	nova_start
	for part in $PARTS; do
		"part_$part" "$rep" "$W"
	done
	nova_stop
	printf -- '-- rep %d: load average at end %s\n' "$rep" "$(loadavg)"
	add load-end "$(loadavg | cut -d' ' -f1)"
done
LOAD_END=$(loadavg)

# shellcheck disable=SC2086
{
	printf '\n== follow_latency results: %d rep(s); each cell median [min-max] over reps (n=reps)\n' "$REPS"
	printf 'load average (1/5/15) at start %s, at end %s; per rep 1-min load: start %s, end %s\n' \
		"$LOAD_START" "$LOAD_END" "$(summary ${R[load-start]})" "$(summary ${R[load-end]})"
	if [[ " $PARTS " == *" latency "* ]]; then
		printf '\n1. follow view latency: %d appends of %d B (after %d warm-up) per interval, 1 writer\n' \
			"$APPENDS" "$REC_SIZE" "$WARMUP_APPENDS"
		printf '   (O_APPEND, write() returns when durable), 1 follower (os.read on MNT/.follow/b/...); ms\n'
		printf '   %-34s' "interval between appends (ms)"
		for iv in $INTERVALS_MS; do printf ' %-30s' "$([ "$iv" = 0 ] && echo "0 (back to back)" || echo "$iv")"; done
		printf '\n'
		for row in "p50_ms:follower latency p50" "p90_ms:follower latency p90" "p99_ms:follower latency p99" \
			"p999_ms:follower latency p99.9" "max_ms:follower latency max" "over_5ms:records later than 5 ms" \
			"write_p50_ms:writer write() p50" "write_p90_ms:writer write() p90" \
			"write_p99_ms:writer write() p99" "write_max_ms:writer write() max" \
			"extra_p50_ms:follower - writer's ack p50" "extra_p99_ms:follower - writer's ack p99" \
			"before_ack_frac:fraction seen before the ack" "aps:appends/s" \
			"dcores:daemon cores" "busy:machine busy (2 CPUs = 1)"; do
			printf '   %-34s' "${row#*:}"
			for iv in $INTERVALS_MS; do printf ' %-30s' "$(summary ${R[lat$iv-${row%%:*}]})"; done
			printf '\n'
		done
		for iv in $INTERVALS_MS; do
			met=0
			for v in ${R[lat$iv-p99_ms]}; do awk -v v="$v" 'BEGIN { exit !(v <= 5) }' && met=$((met + 1)); done
			printf '   target p99 <= 5 ms at interval %s ms: met in %d of %d rep(s)\n' "$iv" "$met" "$REPS"
		done
	fi
	if [[ " $PARTS " == *" tail "* ]]; then
		printf '\n2. tail -f and cat: %d appends of %d B at %s ms, all consumers at once on MNT/b/t; ms\n' \
			"$TAIL_APPENDS" "$REC_SIZE" "$TAIL_INTERVAL_MS"
		printf '   %-18s %-22s %-22s %-22s %-22s %s\n' consumer p50 p90 p99 max received
		for k in $TAIL_KINDS; do
			printf '   %-18s %-22s %-22s %-22s %-22s %s\n' "$k" "$(summary ${R[tail-$k-p50_ms]})" \
				"$(summary ${R[tail-$k-p90_ms]})" "$(summary ${R[tail-$k-p99_ms]})" \
				"$(summary ${R[tail-$k-max_ms]})" "$(summary ${R[tail-$k-received]})"
		done
	fi
	if [[ " $PARTS " == *" idle "* ]]; then
		printf '\n3. idle cost over %s s: %d followers over %d streams; CPU ms in the window (ticks of %s Hz; schedstat)\n' \
			"$IDLE_S" "$FOLLOWERS" "$FOLLOW_STREAMS" "$HZ"
		printf '   %-26s %-20s %-22s %-18s %-20s %-20s %s\n' case daemon_cpu_ms daemon_sched_ms \
			daemon_threads followers_cpu_ms followers_sched_ms machine_busy
		for c in none follow tail; do
			printf '   %-26s %-20s %-22s %-18s %-20s %-20s %s\n' \
				"$(case $c in none) echo 'no followers' ;; follow) echo "$FOLLOWERS cat .follow" ;; tail) echo "$FOLLOWERS tail -f plain" ;; esac)" \
				"$(summary ${R[idle-$c-dcpu]})" "$(summary ${R[idle-$c-dsched]})" "$(summary ${R[idle-$c-thr]})" \
				"$(summary ${R[idle-$c-fcpu]})" "$(summary ${R[idle-$c-fsched]})" "$(summary ${R[idle-$c-busy]})"
		done
		printf '   daemon threads at most while %d cats parked: %s; time for all to park: %s s\n' "$FOLLOWERS" \
			"$(summary ${R[idle-follow-thrmax]})" "$(summary ${R[idle-follow-park]})"
		printf '   wake (1 append per stream): cats woken %s, stats wakes %s, all printed after %s s;\n' \
			"$(summary ${R[idle-follow-woke]})" "$(summary ${R[idle-follow-wakes]})" "$(summary ${R[idle-follow-wake_s]})"
		printf '   tail -f: shown by %s, all after %s s\n' "$(summary ${R[idle-tail-woke]})" \
			"$(summary ${R[idle-tail-wake_s]})"
	fi
	printf '\ndaemon log: %s lines\n' "$(wc -l < "$LOG")"
	grep -i -E 'error|warn|abort' "$LOG" | head -10 || true
}
