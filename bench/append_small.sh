#!/bin/bash
# bench/append_small.sh - many small durable appends: novafs vs O_DSYNC.
#
# WRITERS processes each append REC_SIZE-byte records (one write() = one
# record, O_APPEND) for DURATION seconds after WARMUP seconds, every write
# timed on CLOCK_MONOTONIC (bench/appendbench.py):
#   mode streams  writer i appends to its own stream / local file
#   mode one      all writers append to one stream / local file.  The kernel
#                 serialises O_APPEND writes to one file (FUSE takes the inode
#                 lock for the whole request, i.e. until novafs replies, which
#                 is after durability), so this is one writer's latency-bound
#                 rate shared N ways.
# Side by side, interleaved per repetition (A B A B ...):
#   A  novafs with the default options (plus NOVA_OPTS)
#   B  local files on the same file system, O_WRONLY|O_APPEND|O_DSYNC (each
#      write durable on return: the closest local equivalent)
#   C  (PASSTHROUGH=1, the default when it builds) the same files through
#      libfuse's passthrough_ll example (lib.sh pt_start), without O_DSYNC:
#      FUSE's request path with nothing made durable, the issue's ceiling
# Then a sweep of -o linger_us (SWEEP_LINGER) x put_window (SWEEP_WINDOW),
# SWEEP_REPS interleaved rounds of SWEEP_DURATION seconds, novafs only.
# novafs engine counters (user.nova.stats) give records per flight (batching)
# and absorb batches per run; /proc gives the daemon's context switches per
# append (daemon_cs_per_append).
#
# DIAG=1 adds diagnostics (novafs only, mode streams, DIAG_DURATION s each,
# DIAG_REPS rounds, a fresh data dir per run): the same workload with the
# metastore and/or the object store moved to tmpfs (NOT durable: this only
# locates where the time goes), and with WRITERS in DIAG_WRITERS (does
# throughput scale with concurrency, i.e. is novafs latency-bound?).
#
# Environment: WRITERS (8), REC_SIZE (4096), DURATION (10), WARMUP (0.5),
# REPS (3), MODES ("streams one"), SWEEP_LINGER ("0 200 1000"),
# SWEEP_WINDOW ("1 4"), SWEEP_DURATION (5), SWEEP_REPS (2),
# SWEEP_MODES ("streams one"; empty skips the sweep), SETTLE_S (1),
# PASSTHROUGH (1 when passthrough_ll builds), DIAG (0), DIAG_DURATION (5), DIAG_REPS (2), DIAG_WRITERS ("8 16 32 64"),
# plus the common ones of bench/lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

: "${WRITERS:=8}"
: "${REC_SIZE:=4096}"
: "${DURATION:=10}"
: "${WARMUP:=0.5}"
: "${REPS:=3}"
: "${MODES:=streams one}"
: "${SWEEP_LINGER:=0 200 1000}"
: "${SWEEP_WINDOW:=1 4}"
: "${SWEEP_DURATION:=5}"
: "${SWEEP_REPS:=2}"
: "${SWEEP_MODES=streams one}"
HELPER=$BENCH_DIR/appendbench.py
STAT_KEYS="appends flights absorb_batches span_refs backlog_waits"
: "${DIAG:=0}"
PT_DEFAULT=0
pt_available && PT_DEFAULT=1
: "${PASSTHROUGH:=$PT_DEFAULT}"
: "${DIAG_DURATION:=5}"
: "${DIAG_REPS:=2}"
: "${DIAG_WRITERS:=8 16 32 64}"

bench_init append_small
need_space 4096

# kv KEY LINE: the value of KEY=... in a key=value line.
kv() { tr ' ' '\n' <<< "$2" | awk -F= -v k="$1" '$1 == k { print $2 }'; }

# run_nova MODE DURATION TAG: one novafs run in a fresh bucket (TAG names it);
# prints the helper's line plus engine counter deltas and records per flight.
run_nova() {
	local dir="$MNT/$3" s0 s1 out d c0 c1 x0 x1
	mkdir "$dir"
	s0=$(nova_stats)
	x0=$(daemon_cs)
	c0=$(cpu_snap)
	out=$(python3 "$HELPER" --dir "$dir" --mode "$1" --writers "${4:-$WRITERS}" \
		--size "$REC_SIZE" --duration "$2" --warmup "$WARMUP")
	c1=$(cpu_snap)
	x1=$(daemon_cs)
	s1=$(nova_stats)
	d=$(stats_delta "$s0" "$s1" $STAT_KEYS)
	echo "$out $(cpu_delta "$c0" "$c1") $d recs_per_flight=$(calc "$(kv eng_appends "$d") / $(kv eng_flights "$d")")" \
		"daemon_cs_per_append=$(calc "($x1 - $x0) / $(kv eng_appends "$d")")"
	# shellcheck disable=SC2046
	nova_wait_absorbed $(find "$dir" -type f)
}

run_local() {
	local dir="$B_TMP/local" out c0 c1
	rm -rf "$dir"
	mkdir "$dir"
	sync
	c0=$(cpu_snap)
	out=$(python3 "$HELPER" --dir "$dir" --mode "$1" --writers "$WRITERS" \
		--size "$REC_SIZE" --duration "$2" --warmup "$WARMUP" --dsync)
	c1=$(cpu_snap)
	rm -rf "$dir"
	echo "$out $(cpu_delta "$c0" "$c1" | sed 's/daemon_cores=[^ ]* //')"
}

# run_pt MODE DURATION: the same writers through passthrough_ll, not durable.
run_pt() {
	local out c0 c1
	rm -rf "$B_TMP/ptsrc/w"
	mkdir -p "$B_TMP/ptsrc/w"
	sync
	c0=$(cpu_snap)
	out=$(python3 "$HELPER" --dir "$PT_MNT/w" --mode "$1" --writers "$WRITERS" \
		--size "$REC_SIZE" --duration "$2" --warmup "$WARMUP")
	c1=$(cpu_snap)
	rm -rf "$B_TMP/ptsrc/w"
	echo "$out $(cpu_delta "$c0" "$c1" | sed 's/daemon_cores=[^ ]* //')"
}

declare -A R
add() { R[$1]+="$2 "; }

[ "$PASSTHROUGH" = 1 ] && pt_start "$B_TMP/ptsrc"
nova_start
settle
for rep in $(seq 1 "$REPS"); do
	for mode in $MODES; do
		a=$(run_nova "$mode" "$DURATION" "$mode-$rep")
		settle
		b=$(run_local "$mode" "$DURATION")
		settle
		[ "$(kv size_ok "$a")" = 1 ] && [ "$(kv size_ok "$b")" = 1 ] ||
			die "size check failed: $a / $b"
		ratio=$(calc "$(kv appends_per_s "$a") / $(kv appends_per_s "$b")")
		result "target=novafs mode=$mode rep=$rep writers=$WRITERS rec=$REC_SIZE $a"
		result "target=local_dsync mode=$mode rep=$rep writers=$WRITERS rec=$REC_SIZE $b"
		result "target=ratio mode=$mode rep=$rep appends_ratio=$ratio"
		if [ "$PASSTHROUGH" = 1 ]; then
			c=$(run_pt "$mode" "$DURATION")
			settle
			[ "$(kv size_ok "$c")" = 1 ] || die "size check failed: $c"
			pr=$(calc "$(kv appends_per_s "$a") / $(kv appends_per_s "$c")")
			result "target=passthrough mode=$mode rep=$rep writers=$WRITERS rec=$REC_SIZE $c"
			result "target=ratio_pt mode=$mode rep=$rep appends_ratio=$pr"
			for k in appends_per_s p50_us p99_us p999_us; do add "pt-$mode-$k" "$(kv $k "$c")"; done
			add "ratio_pt-$mode" "$pr"
			add "p50ratio-$mode" "$(calc "$(kv p50_us "$a") / $(kv p50_us "$b")")"
		fi
		for k in appends_per_s p50_us p99_us p999_us; do
			add "nova-$mode-$k" "$(kv $k "$a")"
			add "local-$mode-$k" "$(kv $k "$b")"
		done
		add "nova-$mode-rpf" "$(kv recs_per_flight "$a")"
		add "nova-$mode-dcores" "$(kv daemon_cores "$a")"
		add "nova-$mode-busy" "$(kv sys_busy "$a")"
		add "local-$mode-busy" "$(kv sys_busy "$b")"
		add "ratio-$mode" "$ratio"
	done
done

SWEEP_CFGS=()
if [ -n "$SWEEP_MODES" ]; then
	for l in $SWEEP_LINGER; do
		for w in $SWEEP_WINDOW; do SWEEP_CFGS+=("$l:$w"); done
	done
	for rep in $(seq 1 "$SWEEP_REPS"); do
		for cfg in "${SWEEP_CFGS[@]}"; do
			l=${cfg%:*} w=${cfg#*:}
			nova_restart "linger_us=$l,put_window=$w"
			for mode in $SWEEP_MODES; do
				a=$(run_nova "$mode" "$SWEEP_DURATION" "sw-$l-$w-$mode-$rep")
				result "target=sweep linger_us=$l put_window=$w mode=$mode rep=$rep writers=$WRITERS rec=$REC_SIZE $a"
				for k in appends_per_s p50_us p99_us p999_us recs_per_flight; do
					add "sw-$l-$w-$mode-$k" "$(kv $k "$a")"
				done
				settle
			done
		done
	done
	nova_restart
fi

DIAG_CFGS=()
if [ "$DIAG" = 1 ]; then
	SHM=$(mktemp -d /dev/shm/novafs-bench-diag.XXXXXX)
	B_RMDIRS+=("$SHM")
	DIAG_CFGS=(disk meta_tmpfs store_tmpfs both_tmpfs)
	for w in $DIAG_WRITERS; do DIAG_CFGS+=("w$w"); done
	nova_stop
	main_data=$DATA
	n=0
	for rep in $(seq 1 "$DIAG_REPS"); do
		for cfg in "${DIAG_CFGS[@]}"; do
			n=$((n + 1))
			DATA=$B_TMP/data-diag-$n
			mkdir "$DATA"
			w=$WRITERS opts=
			case $cfg in
			meta_tmpfs) opts="meta=sqlite:$SHM/meta-$n.db" ;;
			store_tmpfs) opts="store=dir:$SHM/objects-$n" ;;
			both_tmpfs) opts="meta=sqlite:$SHM/meta-$n.db,store=dir:$SHM/objects-$n" ;;
			w*) w=${cfg#w} ;;
			esac
			nova_start "$opts"
			a=$(run_nova streams "$DIAG_DURATION" "diag-$n" "$w")
			result "target=diag cfg=$cfg mode=streams rep=$rep writers=$w rec=$REC_SIZE $a"
			for k in appends_per_s p50_us p99_us recs_per_flight daemon_cores sys_busy; do
				add "dg-$cfg-$k" "$(kv $k "$a")"
			done
			nova_stop
			# Keep $DATA until exit: mass deletion on a journal-less ext4
			# makes later inode allocation slow (see bench/RESULTS.md).
			rm -rf "${SHM:?}"/*
			settle
		done
	done
	DATA=$main_data
	nova_start
fi

if [ "$PROFILE" = 1 ]; then
	for mode in $MODES; do
		for kind in perf strace; do
			prof_start "$kind" "append_small-$mode"
			a=$(run_nova "$mode" "$DURATION" "prof-$kind-$mode")
			prof_stop
			result "target=profiled-$kind mode=$mode $a"
			settle
		done
	done
fi

# shellcheck disable=SC2086
{
	printf '\n== append_small: %d writers x %d B records, %s s per run, %d reps interleaved; median [min-max]\n' \
		"$WRITERS" "$REC_SIZE" "$DURATION" "$REPS"
	printf '%-8s %-12s %-26s %-20s %-20s %-22s %s\n' mode target appends/s p50_us p99_us p99.9_us recs/flight
	for mode in $MODES; do
		printf '%-8s %-12s %-26s %-20s %-20s %-22s %s\n' "$mode" novafs \
			"$(summary ${R[nova-$mode-appends_per_s]})" "$(summary ${R[nova-$mode-p50_us]})" \
			"$(summary ${R[nova-$mode-p99_us]})" "$(summary ${R[nova-$mode-p999_us]})" \
			"$(summary ${R[nova-$mode-rpf]})"
		printf '%-8s %-12s %-26s %-20s %-20s %-22s %s\n' "$mode" local_dsync \
			"$(summary ${R[local-$mode-appends_per_s]})" "$(summary ${R[local-$mode-p50_us]})" \
			"$(summary ${R[local-$mode-p99_us]})" "$(summary ${R[local-$mode-p999_us]})" -
		printf '%-8s %-12s %s\n' "$mode" ratio "$(summary ${R[ratio-$mode]})"
		if [ "$PASSTHROUGH" = 1 ]; then
			printf '%-8s %-12s %-26s %-20s %-20s %-22s %s\n' "$mode" passthrough \
				"$(summary ${R[pt-$mode-appends_per_s]})" "$(summary ${R[pt-$mode-p50_us]})" \
				"$(summary ${R[pt-$mode-p99_us]})" "$(summary ${R[pt-$mode-p999_us]})" -
			printf '%-8s %-12s %s\n' "$mode" ratio_pt "$(summary ${R[ratio_pt-$mode]})"
			printf '%-8s %-12s %s\n' "$mode" p50_ratio "$(summary ${R[p50ratio-$mode]}) (novafs p50 / local_dsync p50, paired)"
		fi
	done
	printf 'CPU during the runs (2 cores = 1.0 sys_busy): novafs daemon cores, machine busy fraction\n'
	for mode in $MODES; do
		printf '%-8s novafs daemon_cores %s, sys_busy %s; local_dsync sys_busy %s\n' "$mode" \
			"$(summary ${R[nova-$mode-dcores]})" "$(summary ${R[nova-$mode-busy]})" \
			"$(summary ${R[local-$mode-busy]})"
	done
	if ((${#SWEEP_CFGS[@]})); then
		printf '\n== sweep: novafs, %s s per run, %d rounds; median [min-max]\n' \
			"$SWEEP_DURATION" "$SWEEP_REPS"
		printf '%-8s %-10s %-10s %-24s %-18s %-18s %-18s %s\n' mode linger_us put_window \
			appends/s p50_us p99_us p99.9_us recs/flight
		for mode in $SWEEP_MODES; do
			for cfg in "${SWEEP_CFGS[@]}"; do
				l=${cfg%:*} w=${cfg#*:} p="sw-$l-$w-$mode"
				printf '%-8s %-10s %-10s %-24s %-18s %-18s %-18s %s\n' "$mode" "$l" "$w" \
					"$(summary ${R[$p-appends_per_s]})" "$(summary ${R[$p-p50_us]})" \
					"$(summary ${R[$p-p99_us]})" "$(summary ${R[$p-p999_us]})" \
					"$(summary ${R[$p-recs_per_flight]})"
			done
		done
	fi
	if ((${#DIAG_CFGS[@]})); then
		printf '\n== diagnostics: novafs, mode streams, %s s per run, %d rounds; median [min-max]\n' \
			"$DIAG_DURATION" "$DIAG_REPS"
		printf '(meta_tmpfs/store_tmpfs/both_tmpfs: that part on /dev/shm, NOT durable; wN: N writers)\n'
		printf '%-12s %-24s %-18s %-18s %-16s %-16s %s\n' config appends/s p50_us p99_us \
			recs/flight daemon_cores sys_busy
		for cfg in "${DIAG_CFGS[@]}"; do
			p="dg-$cfg"
			printf '%-12s %-24s %-18s %-18s %-16s %-16s %s\n' "$cfg" \
				"$(summary ${R[$p-appends_per_s]})" "$(summary ${R[$p-p50_us]})" \
				"$(summary ${R[$p-p99_us]})" "$(summary ${R[$p-recs_per_flight]})" \
				"$(summary ${R[$p-daemon_cores]})" "$(summary ${R[$p-sys_busy]})"
		done
	fi
}
nova_stop
pt_stop
