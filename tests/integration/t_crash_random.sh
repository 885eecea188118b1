#!/bin/bash
# t_crash_random: SIGKILL at random moments loses no acknowledged record.
# Four writers (four streams of one bucket, one of them express, one with
# records up to 8 KiB) append numbered records, each logging the records
# whose write() returned.  Each round:
#  - the daemon starts (clean) and the writers run; after a random
#    0.5-1.5 s (sometimes 0-0.1 s, before the first flights settle in) the
#    daemon is SIGKILLed;
#  - one round in four, the restart that follows is SIGKILLed too, at a
#    random 0-150 ms, while it mounts and settles the crashed epoch;
#  - fsck passes on the crashed store (unsettled chains are notes);
#  - the daemon restarts and recovers; every stream holds exactly records
#    1..M in order, M >= the last logged record and at most one more (the
#    write whose return its writer never saw), M == user.nova.seq, st_size
#    == bytes read (new bytes every round, everything every 5th round and
#    at the end of a data dir);
#  - clean unmount; `novactl fsck` passes.
# Every 10 rounds the test moves to a fresh data dir and another daemon
# configuration (default; small flights with a wide PUT window, so slots
# land out of order; tiny absorb batches), which bounds the history each
# round re-reads.
# Default: 30 rounds or 75 s, whichever comes first (at least 10);
# NOVAFS_SOAK=1: 300 rounds.  NV_ROUNDS=N sets the count (no time limit),
# NV_SEED=N replays the random choices.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
BUDGET=
if [ -n "${NV_ROUNDS:-}" ]; then
	ROUNDS=$NV_ROUNDS
elif [ "${NOVAFS_SOAK:-0}" != 0 ]; then
	ROUNDS=300
else
	ROUNDS=30
	BUDGET=75
fi
: "${NV_TIMEOUT:=$((ROUNDS * 6 + 300))}"
SEED=${NV_SEED:-$$}
RANDOM=$SEED
nv_init
nv_crash_tools

GEN_ROUNDS=10
CONFIGS=("" "flight_kib=64,put_window=8" "absorb_batch=2,linger_us=200")
SPECS=(w1 w2 w3:700:express big:8209)
say "seed $SEED (NV_SEED); $ROUNDS rounds${BUDGET:+ (or ${BUDGET} s)}"

# new_generation G: a fresh data dir, configuration G mod 3, new streams.
new_generation() {
	local g=$1
	# The previous data dir was checked (fsck) and is unmounted: drop it.
	[ -z "$DATA" ] || [ "$DATA" = "$NV_TMP/data" ] || rm -rf "$DATA"
	DATA=$NV_TMP/data.$g
	mkdir "$DATA"
	nv_start "${CONFIGS[g % ${#CONFIGS[@]}]}"
	nv_writers_setup "$MNT/r" "${SPECS[@]}"
	say "data dir $g: $DATA, options '${NV_OPTS}'"
}

# rand_sleep LO_MS HI_MS: sleep a random time; MS gets it (no subshell, so
# NV_SEED replays the same choices).
rand_sleep() {
	ms=$(($1 + RANDOM % ($2 - $1 + 1)))
	sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
}

acked() {
	local w
	for w in "${NV_W_NAMES[@]}"; do printf '%s=%s ' "$w" "$(nv_writers_last "$w")"; done
}

t_start=$EPOCHREALTIME
rounds=0
early=0
restart_kills=0
gen=0
new_generation "$gen"
for ((r = 1; r <= ROUNDS; r++)); do
	# The daemon runs (started by the previous round or new_generation).
	nv_writers_start
	if ((RANDOM % 8 == 0)); then
		rand_sleep 0 100
		early=$((early + 1))
	else
		nv_writers_progress 10
		rand_sleep 500 1500
	fi
	nv_kill9
	nv_writers_wait 10
	what="killed -9 after ${ms} ms of writing"
	if ((RANDOM % 4 == 0)); then
		nv_spawn
		rand_sleep 0 150
		nv_kill9
		restart_kills=$((restart_kills + 1))
		what+="; the restart killed -9 after ${ms} ms"
	fi
	nv_fsck > /dev/null
	nv_start
	if ((r % 5 == 0 || r % GEN_ROUNDS == 0 || r == ROUNDS)); then
		mode=full
	else
		mode=incremental
	fi
	nv_writers_verify "round $r ($what): after recovery" "$mode"
	rounds=$r
	say "round $r: $what; acknowledged $(acked); after recovery ($mode check):" \
		"$(awk '{ printf "%s=%s ", $1, $2 }' "$NV_TMP/verify.out")"
	nv_stop > /dev/null
	nv_fsck > /dev/null
	if [ -n "$BUDGET" ] && ((r >= 10 && r < ROUNDS)) &&
		awk -v a="$t_start" -v b="$EPOCHREALTIME" -v s="$BUDGET" 'BEGIN { exit !(b - a > s) }'; then
		say "time budget of ${BUDGET} s reached after $r rounds"
		break
	fi
	if ((r < ROUNDS)); then
		if ((r % GEN_ROUNDS == 0)); then
			gen=$((gen + 1))
			new_generation "$gen"
		else
			nv_start > /dev/null
		fi
	fi
done
say "ok: $rounds rounds ($early killed within 100 ms of the writers starting," \
	"$restart_kills restarts killed while recovering) over $((gen + 1)) data dir(s):" \
	"$NV_W_ACKED records acknowledged, $NV_W_CHECKED records checked, fsck clean after every round"
