#!/bin/bash
# t_crash_failpoints: a crash at every failpoint of the write, absorb and
# recovery paths loses no acknowledged record and shows no torn or invented
# one, and leaves a store that recovers and passes fsck.
#
# For each point (src/base/failpoint.c nv_fp_names; the settle, trim,
# store.get and auditor.before_restart points belong to other tests) a
# round:
#  - write path (chain.*, absorb.*, meta.commit, store.put): the daemon
#    starts with NOVAFS_FAILPOINTS="POINT=crash@N", N small and random; four
#    writers (one express stream, one with records up to 32 KiB) append
#    numbered records, each logging the records whose write() returned;
#    the daemon must _exit(77) at the point (while mounting, for an early
#    meta.commit); if the point never fires within a bound it is killed -9
#    and the round counts as "not fired";
#  - recovery (recover.*): the writers run on a daemon whose absorb lags
#    (absorb.before_refs=delay) so recovery has slots to walk, the daemon
#    is killed -9, and the restart runs with POINT=crash@N and
#    absorb_batch=4 (recover.after_slot is hit once per batch of slots);
#  then fsck passes on the crashed store (unsettled chains are notes), the
#  daemon restarts without failpoints and recovers, and every stream holds
#  exactly records 1..M in order with M >= the last logged record and at
#  most one more (the write whose return its writer never saw), M ==
#  user.nova.seq, st_size == bytes read; then a clean unmount and
#  `novactl fsck` passes.
# Every point must have fired in at least one of its rounds.
# One round per point; NOVAFS_SOAK=1: 10 (NV_ROUNDS=N overrides).
# NV_SEED=N replays the random choices.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
if [ "${NOVAFS_SOAK:-0}" != 0 ]; then
	ROUNDS=${NV_ROUNDS:-10}
	: "${NV_TIMEOUT:=$((ROUNDS * 12 * 12 + 300))}"
else
	ROUNDS=${NV_ROUNDS:-1}
fi
SEED=${NV_SEED:-$$}
RANDOM=$SEED
nv_init
nv_crash_tools

WRITE_POINTS=(chain.before_put chain.after_put chain.before_ack
	absorb.before_refs absorb.after_refs absorb.after_checkpoint
	meta.commit store.put)
RECOVER_POINTS=(recover.before_walk recover.after_fence recover.after_slot
	recover.before_settled)
OTHER_POINTS=" settle.after_publish settle.after_rows settle.after_commit settle.before_resolve trim.before_delete trim.after_delete store.get auditor.before_restart "
declare -A NMAX=(
	[chain.before_put]=40 [chain.after_put]=40 [chain.before_ack]=40
	[absorb.before_refs]=8 [absorb.after_refs]=8 [absorb.after_checkpoint]=8
	[meta.commit]=60 [store.put]=40
	[recover.before_walk]=2 [recover.after_fence]=2 [recover.after_slot]=60
	[recover.before_settled]=2)

# Cross-check the list against the compiled-in names.
FPSRC=$NV_LIB_DIR/../../src/base/failpoint.c
if [ -r "$FPSRC" ]; then
	names=$(sed -n '/nv_fp_names\[\] = {/,/NULL/p' "$FPSRC" | grep -o '"[a-z_.]*"' | tr -d '"')
	[ -n "$names" ] || fail "no failpoint names found in $FPSRC"
	for p in "${WRITE_POINTS[@]}" "${RECOVER_POINTS[@]}"; do
		grep -qx -- "$p" <<< "$names" || fail "failpoint $p is not in nv_fp_names ($FPSRC): renamed?"
	done
	for p in $names; do
		[[ " ${WRITE_POINTS[*]} ${RECOVER_POINTS[*]} $OTHER_POINTS" == *" $p "* ]] ||
			say "NOTE: failpoint $p (new?) is not exercised by this test"
	done
fi
say "seed $SEED (NV_SEED), $ROUNDS round(s) per point"

SPECS=(w1 w2 w3:700:express big:32771)
nv_start
nv_writers_setup "$MNT/fp" "${SPECS[@]}"
nv_stop

declare -A FIRED=()
rounds=0
fired_total=0

# fired_in_log POINT SINCE: the log has "POINT: crash" after line SINCE.
fired_in_log() {
	tail -n "+$(($2 + 1))" "$LOG" | grep "failpoint: $1: crash" > /dev/null
}

# after_crash POINT N RESULT: fsck the crashed store, restart without
# failpoints, verify, unmount, fsck.
after_crash() {
	local p=$1 n=$2 result=$3
	nv_fsck
	nv_start ""
	nv_writers_verify "$p=crash@$n ($result): after recovery"
	say "ok: $p=crash@$n ($result): records intact after recovery:" \
		"$(awk '{ printf "%s=%s ", $1, $2 }' "$NV_TMP/verify.out")(recovered_slots $(nv_stat recovered_slots))"
	nv_stop
	nv_fsck
}

# round_write POINT: crash at POINT while the writers append.
round_write() {
	local p=$1 n=$((1 + RANDOM % NMAX[$1])) since result
	since=$(wc -l < "$LOG")
	if ! NOVAFS_FAILPOINTS="$p=crash@$n" nv_start_try; then
		# Died while mounting: only meta.commit and store.put can.
		((NV_EXIT_RC == 77)) && fired_in_log "$p" "$since" ||
			fail "$p=crash@$n: the daemon died while mounting with status $NV_EXIT_RC, not at the failpoint"
		result="fired while mounting"
	else
		nv_writers_start
		if nv_died_within 10; then
			((NV_EXIT_RC == 77)) && fired_in_log "$p" "$since" ||
				fail "$p=crash@$n: the daemon died with status $NV_EXIT_RC, not at the failpoint"
			result="fired while writing"
		else
			nv_kill9
			result="NOT fired in 10 s; killed -9"
		fi
		nv_writers_wait 10
	fi
	[[ $result == fired* ]] && { FIRED[$p]=$((${FIRED[$p]:-0} + 1)); fired_total=$((fired_total + 1)); }
	say "$p=crash@$n: $result; acknowledged: $(for w in "${NV_W_NAMES[@]}"; do printf '%s=%s ' "$w" "$(nv_writers_last "$w")"; done)"
	after_crash "$p" "$n" "$result"
}

# round_recover POINT: writers, kill -9, then a restart that crashes at
# POINT during the recovery.
round_recover() {
	local p=$1 n=$((1 + RANDOM % NMAX[$1])) since result
	# The absorb lags 300 ms per batch: unabsorbed slots for recovery to walk.
	NOVAFS_FAILPOINTS="absorb.before_refs=delay:300" nv_start
	nv_writers_start
	nv_writers_progress 10
	sleep "0.$((3 + RANDOM % 5))"
	nv_kill9
	nv_writers_wait 10
	say "$p: killed -9 while writing; acknowledged: $(for w in "${NV_W_NAMES[@]}"; do printf '%s=%s ' "$w" "$(nv_writers_last "$w")"; done)"
	since=$(wc -l < "$LOG")
	# Recovery absorbs absorb_batch slots per batch (one recover.after_slot
	# hit each): small batches, many hits.
	if ! NOVAFS_FAILPOINTS="$p=crash@$n" nv_start_try absorb_batch=4; then
		((NV_EXIT_RC == 77)) && fired_in_log "$p" "$since" ||
			fail "$p=crash@$n: the recovering daemon died with status $NV_EXIT_RC, not at the failpoint"
		result="fired in the recovery, before the mount"
	elif nv_died_within 10; then
		((NV_EXIT_RC == 77)) && fired_in_log "$p" "$since" ||
			fail "$p=crash@$n: the recovering daemon died with status $NV_EXIT_RC, not at the failpoint"
		result="fired in the recovery, after the mount"
	else
		nv_kill9
		result="NOT fired in 10 s; killed -9"
	fi
	[[ $result == fired* ]] && { FIRED[$p]=$((${FIRED[$p]:-0} + 1)); fired_total=$((fired_total + 1)); }
	say "$p=crash@$n: $result"
	after_crash "$p" "$n" "$result"
}

for ((r = 1; r <= ROUNDS; r++)); do
	for p in "${WRITE_POINTS[@]}"; do
		round_write "$p"
		rounds=$((rounds + 1))
	done
	for p in "${RECOVER_POINTS[@]}"; do
		round_recover "$p"
		rounds=$((rounds + 1))
	done
	say "pass $r of $ROUNDS done ($rounds rounds, $NV_W_CHECKED records checked)"
done

missing=
for p in "${WRITE_POINTS[@]}" "${RECOVER_POINTS[@]}"; do
	((${FIRED[$p]:-0} > 0)) || missing+=" $p"
done
[ -z "$missing" ] || fail "these failpoints never fired in $ROUNDS round(s) each, so their crash was not tested:$missing"
say "ok: $rounds rounds, $fired_total failpoint crashes, every point fired;" \
	"$NV_W_ACKED records acknowledged, $NV_W_CHECKED record checks"
