#!/bin/bash
# bench/read_cold.sh - cold sequential reads: novafs vs the local disk.
#
# Setup: SIZE_MB of SRC bytes (random: incompressible; zero: /dev/zero) are
# appended into a stream per phase with dd bs=1M, the absorb is awaited (frontier ==
# seq), and the same bytes sit in a local file on the same file system.
# Then, for each repetition, interleaved:
#   A  remount novafs (empty tail and read caches), sync, drop_caches,
#      cat STREAM > /dev/null                       (page-cache path)
#   B  sync, drop_caches, cat LOCAL > /dev/null
#   C  remount, drop_caches, dd if=STREAM of=/dev/null bs=1M iflag=direct
#   D  drop_caches, dd if=LOCAL of=/dev/null bs=1M iflag=direct
# (C/D when DIRECT=1: 1 MiB reads that bypass the page cache, so novafs sees
# 1 MiB requests instead of the kernel's readahead pattern.)
#   E  (FUSE_RA_KB non-empty, default: the local disk's read_ahead_kb) like A
#      but with the mount's bdi read_ahead_kb set to FUSE_RA_KB, vs a local
#      cat again: a tuning diagnostic.  (The kernel gives FUSE 128 KiB; novafs
#      now raises it itself, -o kernel_readahead_kib, 8192 by default, so A
#      and E only differ when the two values do.)
#   P  (PASSTHROUGH=1, the default when it builds) like B and D, but through
#      libfuse's passthrough_ll example (lib.sh pt_start) of the local file's
#      directory, remounted and drop_caches first: the issue's target is
#      A >= 0.9x P (cat) for transit slots and for settled objects
# Two phases (PHASES):
#   transit  the stream as the appends left it: 1 MiB slots of the chain,
#            read through span refs (settlement deferred, see lib.sh)
#   settled  a second stream with the same bytes, written in a mount with
#            settle_trigger_mib=8,settle_linger_s=0,read_grace_s=0 and left
#            until user.nova.settled == seq and the retired slots are gone:
#            per-stream settled objects, the steady state of old data
# The daemon's CPU (utime+stime) during each read is also reported per
# read GiB (nova_cpu_s_per_gib).
# Only the read is timed (wall time, $EPOCHREALTIME); MB/s is 10^6 bytes/s.
# VERIFY=1 compares the stream with the local file once per phase.
#
# Environment: SIZE_MB (1024), REPS (3), SRC (random), DIRECT (1),
# FUSE_RA_KB (the disk's read_ahead_kb; empty: skip E), PHASES ("transit
# settled"), SETTLE_AGE_CAP_S (5: the settled stream's age cap; the size
# trigger alone settled only the first ~8 MiB of a burst), VERIFY (1),
# PASSTHROUGH (1 when passthrough_ll builds), SETTLE_S (1), plus the common
# ones of bench/lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

: "${SIZE_MB:=1024}"
: "${REPS:=3}"
: "${SRC:=random}"
: "${DIRECT:=1}"
: "${VERIFY:=1}"
: "${PHASES:=transit settled}"
PT_DEFAULT=0
pt_available && PT_DEFAULT=1
: "${PASSTHROUGH:=$PT_DEFAULT}"
LOCAL_RA_KB=$(cat "/sys/block/$(basename "$(df --output=source /var/tmp | tail -1)")/queue/read_ahead_kb" 2>/dev/null || echo 128)
: "${FUSE_RA_KB=$LOCAL_RA_KB}"
bytes=$((SIZE_MB * 1048576))

bench_init read_cold
need_space $((4 * SIZE_MB + 1024))

mkdir -p "$B_TMP/ptsrc"
LOCAL=$B_TMP/ptsrc/local.dat
case $SRC in
random) head -c "$bytes" /dev/urandom > "$LOCAL" ;;
zero) head -c "$bytes" /dev/zero > "$LOCAL" ;;
*) die "SRC must be random or zero" ;;
esac

SETTLE_NOW="settle_trigger_mib=8,settle_linger_s=0,read_grace_s=0,age_cap_standard_s=${SETTLE_AGE_CAP_S:-5}"

# write_stream PATH: append the local file into PATH with dd bs=1M, wait for
# the absorb.
write_stream() {
	local t0 t1
	t0=$(now)
	dd if="$LOCAL" of="$1" bs=1M oflag=append conv=notrunc status=none
	t1=$(now)
	[ "$(stat -c %s "$1")" = "$bytes" ] || die "$1 has the wrong size"
	nova_wait_absorbed "$1"
	say "wrote $SIZE_MB MiB into $1 in $(calc "$t1 - $t0") s; absorbed"
}

stat_key() { nova_stats | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# wait_settled PATH: until PATH's settled count reaches its seq and the
# deleted-slot count has not moved for 10 s (or nothing moved for 120 s).
wait_settled() {
	local n=0 last='' cur seq
	seq=$(xattr "$1" user.nova.seq)
	while :; do
		cur="$(xattr "$1" user.nova.settled) $(stat_key slots_deleted)"
		if [ "$cur" = "$last" ]; then
			n=$((n + 1))
		else
			n=0
			last=$cur
		fi
		if { [ "${cur% *}" = "$seq" ] && ((n >= 10)); } || ((n >= 120)); then break; fi
		sleep 1
	done
	say "$1: settled ${cur% *} of $seq records; slots deleted ${cur#* }"
	result "phase=settled settled_records=${cur% *} seq=$seq slots_deleted=${cur#* }"
	[ "${cur% *}" = "$seq" ] || say "WARNING: $1 is only partly settled"
}

declare -A STREAM
# settled: written with immediate settlement and trim, then settled.
if [[ " $PHASES " == *" settled "* ]]; then
	nova_start "$SETTLE_NOW"
	mkdir -p "$MNT/cold"
	STREAM[settled]=$MNT/cold/settled
	write_stream "${STREAM[settled]}"
	wait_settled "${STREAM[settled]}"
	nova_stop
fi
# transit: written with settlement deferred (lib.sh), so it stays in slots.
nova_start
mkdir -p "$MNT/cold"
STREAM[transit]=$MNT/cold/transit
write_stream "${STREAM[transit]}"

# timed CMD...: run CMD, print its wall seconds.
timed() {
	local t0 t1
	t0=$(now)
	"$@"
	t1=$(now)
	calc "$t1 - $t0"
}

nova_cold() {
	nova_restart
	drop_caches
	sleep 0.2
}

pt_cold() {
	pt_stop
	pt_start "$B_TMP/ptsrc"
	drop_caches
	sleep 0.2
}

local_cold() {
	drop_caches
	sleep 0.2
}

# kv KEY LINE: the value of KEY=... in a key=value line.
kv() { tr ' ' '\n' <<< "$2" | awk -F= -v k="$1" '$1 == k { print $2 }'; }

declare -A R
add() { R[$1]+="$2 "; }
KINDS="cat"
[ "$DIRECT" = 1 ] && KINDS="$KINDS direct"
[ -n "$FUSE_RA_KB" ] && KINDS="$KINDS cat_ra"

# fuse_ra KB: set the read-ahead of the novafs mount's backing device info
# (the kernel offers FUSE 128 KiB; the local disk has $LOCAL_RA_KB).
fuse_ra() {
	local bdi
	bdi=/sys/class/bdi/$(mountpoint -d "$MNT")/read_ahead_kb
	[ -w "$bdi" ] || die "cannot set $bdi"
	echo "$1" > "$bdi"
}

# read_cmd KIND PATH [nova]: one timed read.
read_cmd() {
	case $1 in
	cat) cat "$2" > /dev/null ;;
	cat_ra)
		[ "${3:-}" = nova ] && fuse_ra "$FUSE_RA_KB"
		cat "$2" > /dev/null
		;;
	direct) dd if="$2" of=/dev/null bs=1M iflag=direct status=none ;;
	esac
}

for rep in $(seq 1 "$REPS"); do
	for phase in $PHASES; do
		for kind in $KINDS; do
			nova_cold
			s0=$(nova_stats)
			c0=$(cpu_snap)
			a=$(timed read_cmd "$kind" "${STREAM[$phase]}" nova)
			c1=$(cpu_snap)
			s1=$(nova_stats)
			acpu=$(prefix nova "$(cpu_delta "$c0" "$c1")")
			d=$(stats_delta "$s0" "$s1" cold_reads cold_read_bytes chunk_fetches footer_fetches prefetches read_cache_hits)
			local_cold
			c0=$(cpu_snap)
			b=$(timed read_cmd "$kind" "$LOCAL")
			c1=$(cpu_snap)
			bcpu=$(prefix local "$(cpu_delta "$c0" "$c1" | sed 's/daemon_cores=[^ ]* //')")
			am=$(calc "$bytes / $a / 1e6")
			bm=$(calc "$bytes / $b / 1e6")
			r=$(calc "$am / $bm")
			result "phase=$phase kind=$kind src=$SRC rep=$rep size_mib=$SIZE_MB nova_s=$a nova_mbps=$am local_s=$b local_mbps=$bm ratio=$r $acpu $bcpu $d"
			if [ "$PASSTHROUGH" = 1 ] && [ "$kind" != cat_ra ]; then
				pt_cold
				p=$(timed read_cmd "$kind" "$PT_MNT/local.dat")
				pm=$(calc "$bytes / $p / 1e6")
				result "phase=$phase kind=$kind src=$SRC rep=$rep size_mib=$SIZE_MB pt_s=$p pt_mbps=$pm ratio_vs_pt=$(calc "$am / $pm")"
				add "pt-$phase-$kind" "$pm"
				add "ratio_pt-$phase-$kind" "$(calc "$am / $pm")"
			fi
			add "nova-$phase-$kind" "$am"
			add "local-$phase-$kind" "$bm"
			add "ratio-$phase-$kind" "$r"
			add "dcores-$phase-$kind" "$(kv nova_daemon_cores "$acpu")"
			gib=$(calc "$(kv nova_daemon_cores "$acpu") * $a * 1073741824 / $bytes")
			result "phase=$phase kind=$kind rep=$rep nova_cpu_s_per_gib=$gib"
			add "dgib-$phase-$kind" "$gib"
			settle
		done
	done
done

for phase in $PHASES; do
	if [ "$VERIFY" = 1 ]; then
		nova_cold
		cmp "${STREAM[$phase]}" "$LOCAL" || die "$phase: the stream differs from the local file"
		say "$phase: verified, stream == local file"
	fi
	if [ "$PROFILE" = 1 ]; then
		for kind in $KINDS; do
			for prof in perf strace; do
				nova_cold
				prof_start "$prof" "read_cold-$phase-$kind"
				a=$(timed read_cmd "$kind" "${STREAM[$phase]}" nova)
				prof_stop
				result "phase=$phase kind=$kind profiled=$prof nova_s=$a"
			done
		done
	fi
done

# shellcheck disable=SC2086
{
	printf '\n== read_cold: %d MiB of %s bytes, %d reps interleaved; MB/s median [min-max]\n' \
		"$SIZE_MB" "$SRC" "$REPS"
	printf '%-8s %-8s %-26s %-26s %s\n' phase read novafs local ratio
	for phase in $PHASES; do
		for kind in $KINDS; do
			p=$phase-$kind
			printf '%-8s %-8s %-26s %-26s %s\n' "$phase" "$kind" "$(summary ${R[nova-$p]})" \
				"$(summary ${R[local-$p]})" "$(summary ${R[ratio-$p]})"
		done
	done
	if [ "$PASSTHROUGH" = 1 ]; then
		printf '%-8s %-8s %-26s %-26s %s\n' phase read novafs passthrough ratio_vs_pt
		for phase in $PHASES; do
			for kind in $KINDS; do
				[ "$kind" = cat_ra ] && continue
				p=$phase-$kind
				printf '%-8s %-8s %-26s %-26s %s\n' "$phase" "$kind" "$(summary ${R[nova-$p]})" \
					"$(summary ${R[pt-$p]})" "$(summary ${R[ratio_pt-$p]})"
			done
		done
	fi
	for phase in $PHASES; do
		for kind in $KINDS; do
			printf '%-8s %-8s novafs daemon CPU during the read: %s cores, %s s per GiB\n' \
				"$phase" "$kind" "$(summary ${R[dcores-$phase-$kind]})" \
				"$(summary ${R[dgib-$phase-$kind]})"
		done
	done
}
nova_stop
pt_stop
