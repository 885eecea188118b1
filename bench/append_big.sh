#!/bin/bash
# bench/append_big.sh - large sequential appends: novafs vs the local disk.
#
# For each source (SRCS: zero = /dev/zero, random = a pre-generated file of
# random bytes on the same file system, read from the page cache) and each
# repetition, interleaved, the order rotating per repetition (A B C, B C A,
# C A B, ...):
#   A  dd if=SRC of=MNT/big/STREAM bs=1M count=SIZE_MB oflag=append conv=notrunc
#      (a fresh stream each time; every 1 MiB write() returns when durable)
#   B  dd if=SRC of=LOCAL bs=1M count=SIZE_MB conv=fsync
#      (a fresh local file beside the novafs data dir; one fsync at the end)
#   C  (LOCAL_DSYNC=1) dd if=SRC of=LOCAL bs=1M count=SIZE_MB oflag=dsync
#      (each 1 MiB write durable on return, like novafs; a reference only,
#      the issue's target is against B)
#   P  (PASSTHROUGH=1, the default when it builds) dd of=PT/FILE bs=1M
#      oflag=dsync through libfuse's passthrough_ll example (lib.sh
#      pt_start) of a directory beside LOCAL: each 1 MiB write durable on
#      return, as novafs acks it, through FUSE (the issue's target: A >=
#      0.8x P)
#   F  (NOVA_FSYNC=1) like A into a stream set to user.nova.durable=fsync
#      first: write() returns at admission, dd's close when all is durable
#      (the bulk-load contract; timed until dd exits, i.e. until durable)
# The daemon's CPU (utime+stime) is reported per appended GiB
# (nova_cpu_s_per_gib, nova_fsync_cpu_s_per_gib) beside the throughput.
# Time is wall time around dd ($EPOCHREALTIME).  MB/s is 10^6 bytes/s.
# Between runs: wait for the absorb to catch up (frontier == seq), sync,
# SETTLE_S seconds of quiet.  novafs compresses a chunk with zstd when that
# pays: zeros compress, random bytes do not.
#
# Environment: SIZE_MB (1024), REPS (3), SRCS ("zero random"), BS_MB (1),
# LOCAL_DSYNC (1), NOVA_FSYNC (1), PASSTHROUGH (1 when passthrough_ll builds),
# SETTLE_S (1), plus the common ones of bench/lib.sh (NOVA_OPTS, PROFILE...).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

: "${SIZE_MB:=1024}"
: "${REPS:=3}"
: "${SRCS:=zero random}"
: "${BS_MB:=1}"
: "${LOCAL_DSYNC:=1}"
: "${NOVA_FSYNC:=1}"
PT_DEFAULT=0
pt_available && PT_DEFAULT=1
: "${PASSTHROUGH:=$PT_DEFAULT}"
count=$((SIZE_MB / BS_MB))
bytes=$((count * BS_MB * 1048576))

bench_init append_big
need_space $(( (REPS + 2) * SIZE_MB * $(wc -w <<< "$SRCS") + SIZE_MB + 1024 ))

src_path() {
	case $1 in
	zero) echo /dev/zero ;;
	random) echo "$B_TMP/random.src" ;;
	*) die "unknown source $1" ;;
	esac
}

if [[ " $SRCS " == *" random "* ]]; then
	say "generating $SIZE_MB MiB of random bytes"
	head -c $((SIZE_MB * 1048576)) /dev/urandom > "$B_TMP/random.src"
	cat "$B_TMP/random.src" > /dev/null # keep it in the page cache
fi

[ "$PASSTHROUGH" = 1 ] && pt_start "$B_TMP/ptsrc"
nova_start
mkdir "$MNT/big"
settle

# run_nova SRC TAG [DURABLE]: one novafs dd into a fresh stream (its
# user.nova.durable set to DURABLE first, if given); prints seconds and CPU
# use, with the daemon's CPU seconds per GiB appended.
run_nova() {
	local f="$MNT/big/$2" t0 t1 c0 c1 cpu
	if [ -n "${3:-}" ]; then
		: > "$f"
		setfattr -n user.nova.durable -v "$3" "$f"
	fi
	c0=$(cpu_snap)
	t0=$(now)
	dd if="$(src_path "$1")" of="$f" bs=${BS_MB}M count=$count oflag=append conv=notrunc \
		status=none
	t1=$(now)
	c1=$(cpu_snap)
	[ "$(stat -c %s "$f")" = "$bytes" ] || die "$f: size $(stat -c %s "$f"), expected $bytes"
	cpu=$(cpu_delta "$c0" "$c1")
	echo "$(calc "$t1 - $t0") $cpu cpu_s_per_gib=$(calc "$(kv daemon_cores "$cpu") * ($t1 - $t0) * 1073741824 / $bytes")"
	nova_wait_absorbed "$f"
}

# run_local SRC [FLAG]: one local dd with conv=fsync (or FLAG, e.g.
# oflag=dsync); prints seconds and CPU use.
run_local() {
	local f="$B_TMP/local.dat" t0 t1 c0 c1
	rm -f "$f"
	sync
	c0=$(cpu_snap)
	t0=$(now)
	dd if="$(src_path "$1")" of="$f" bs=${BS_MB}M count=$count ${2:-conv=fsync} status=none
	t1=$(now)
	c1=$(cpu_snap)
	[ "$(stat -c %s "$f")" = "$bytes" ] || die "$f: wrong size"
	echo "$(calc "$t1 - $t0") $(cpu_delta "$c0" "$c1" | sed 's/daemon_cores=[^ ]* //')"
	rm -f "$f"
}

# run_pt SRC: one dd oflag=dsync through passthrough_ll; prints seconds.
run_pt() {
	local f="$PT_MNT/pt.dat" t0 t1
	rm -f "$f"
	sync
	t0=$(now)
	dd if="$(src_path "$1")" of="$f" bs=${BS_MB}M count=$count oflag=dsync status=none
	t1=$(now)
	[ "$(stat -c %s "$f")" = "$bytes" ] || die "$f: wrong size"
	echo "$(calc "$t1 - $t0")"
	rm -f "$f"
}

# kv KEY LINE: the value of KEY=... in a key=value line.
kv() { tr ' ' '\n' <<< "$2" | awk -F= -v k="$1" '$1 == k { print $2 }'; }

declare -A NOVA LOCAL RATIO LDS RDS NCORES NGIB FS FSR FSGIB PTS PTR
TARGETS="nova local"
[ "$LOCAL_DSYNC" = 1 ] && TARGETS="$TARGETS dsync"
[ "$NOVA_FSYNC" = 1 ] && TARGETS="$TARGETS fsync"
[ "$PASSTHROUGH" = 1 ] && TARGETS="$TARGETS pt"
# rotate WORDS N: the words rotated left by N.
rotate() {
	local -a w
	read -ra w <<< "$1"
	local n=${#w[@]} i
	for ((i = 0; i < n; i++)); do printf '%s ' "${w[(i + $2) % n]}"; done
}
for rep in $(seq 1 "$REPS"); do
	for src in $SRCS; do
		# The order rotates per repetition (A B C, B C A, C A B, ...): on this
		# VM a run pays for the host flushing the previous run's writes, so
		# a fixed order would bias whichever target always comes second.
		order=$(rotate "$TARGETS" $((rep - 1)))
		order=${order% }
		for t in $order; do
			case $t in
			nova)
				read -r a acpu <<< "$(run_nova "$src" "$src-$rep")"
				acpu=$(prefix nova "$acpu")
				;;
			local)
				read -r b bcpu <<< "$(run_local "$src")"
				bcpu=$(prefix local "$bcpu")
				;;
			dsync)
				read -r c ccpu <<< "$(run_local "$src" oflag=dsync)"
				ccpu=$(prefix local_dsync "$ccpu")
				;;
			fsync)
				read -r e ecpu <<< "$(run_nova "$src" "$src-$rep-fsync" fsync)"
				ecpu=$(prefix nova_fsync "$ecpu")
				;;
			pt) p=$(run_pt "$src") ;;
			esac
			settle
		done
		am=$(calc "$bytes / $a / 1e6")
		bm=$(calc "$bytes / $b / 1e6")
		r=$(calc "$am / $bm")
		result "src=$src rep=$rep order=${order// /,} size_mib=$SIZE_MB bs_mib=$BS_MB nova_s=$a nova_mbps=$am local_s=$b local_mbps=$bm ratio=$r $acpu $bcpu"
		NOVA[$src]+="$am "
		LOCAL[$src]+="$bm "
		RATIO[$src]+="$r "
		NCORES[$src]+="$(kv nova_daemon_cores "$acpu") "
		NGIB[$src]+="$(kv nova_cpu_s_per_gib "$acpu") "
		if [ "$NOVA_FSYNC" = 1 ]; then
			em=$(calc "$bytes / $e / 1e6")
			result "src=$src rep=$rep size_mib=$SIZE_MB bs_mib=$BS_MB nova_fsync_s=$e nova_fsync_mbps=$em fsync_ratio_vs_local=$(calc "$em / $bm") $ecpu"
			FS[$src]+="$em "
			FSR[$src]+="$(calc "$em / $bm") "
			FSGIB[$src]+="$(kv nova_fsync_cpu_s_per_gib "$ecpu") "
		fi
		if [ "$PASSTHROUGH" = 1 ]; then
			pm=$(calc "$bytes / $p / 1e6")
			result "src=$src rep=$rep size_mib=$SIZE_MB bs_mib=$BS_MB pt_dsync_s=$p pt_dsync_mbps=$pm ratio_vs_pt_dsync=$(calc "$am / $pm")"
			PTS[$src]+="$pm "
			PTR[$src]+="$(calc "$am / $pm") "
		fi
		if [ "$LOCAL_DSYNC" = 1 ]; then
			cm=$(calc "$bytes / $c / 1e6")
			rc=$(calc "$am / $cm")
			result "src=$src rep=$rep size_mib=$SIZE_MB bs_mib=$BS_MB local_dsync_s=$c local_dsync_mbps=$cm ratio_vs_dsync=$rc $ccpu"
			LDS[$src]+="$cm "
			RDS[$src]+="$rc "
		fi
	done
done

if [ "$PROFILE" = 1 ]; then
	for src in $SRCS; do
		for kind in perf strace; do
			prof_start "$kind" "append_big-$src"
			run_nova "$src" "$src-prof-$kind" > /dev/null
			prof_stop
		done
	done
fi

printf '\n== append_big: %d MiB, bs=%d MiB, %d reps interleaved; MB/s median [min-max]\n' \
	"$SIZE_MB" "$BS_MB" "$REPS"
# ratio_table BASELINE RATIO BASE_ARRAY RATIO_ARRAY: novafs against one
# baseline, per source.
ratio_table() {
	local -n base=$3 rat=$4
	printf '%-8s %-26s %-26s %s\n' source novafs "$1" "$2"
	for src in $SRCS; do
		# shellcheck disable=SC2086
		printf '%-8s %-26s %-26s %s\n' "$src" "$(summary ${NOVA[$src]})" \
			"$(summary ${base[$src]})" "$(summary ${rat[$src]})"
	done
}
ratio_table local_fsync ratio LOCAL RATIO
if [ "$LOCAL_DSYNC" = 1 ]; then ratio_table local_dsync ratio_vs_dsync LDS RDS; fi
if [ "$PASSTHROUGH" = 1 ]; then ratio_table passthrough_dsync ratio_vs_pt PTS PTR; fi
for src in $SRCS; do
	# shellcheck disable=SC2086
	printf '%-8s novafs daemon CPU during dd: %s cores, %s s per GiB\n' "$src" \
		"$(summary ${NCORES[$src]})" "$(summary ${NGIB[$src]})"
	if [ "$NOVA_FSYNC" = 1 ]; then
		# shellcheck disable=SC2086
		printf '%-8s durable=fsync: %s MB/s, %s x local_fsync, %s CPU s per GiB\n' "$src" \
			"$(summary ${FS[$src]})" "$(summary ${FSR[$src]})" "$(summary ${FSGIB[$src]})"
	fi
done
nova_stop
pt_stop
