#!/bin/bash
# t_soak_stars.sh - the opt-in soak of many stars (make check-stars-soak;
# not in make check): three stars on one etcd cluster and one shared
# store (a directory store, or with NOVAFS_STARS_RGW=1 a throwaway Ceph
# RGW: make check-stars-rgw), star_lease_s=2, put_timeout_s=2; one writer
# per star appends to ONE stream through its own mount (records "TAG N",
# 50 ms apart, every outcome logged: tests/etcd/stars_check.py) while
# NV_ROUNDS rounds (default 200) each do one of, to a random star:
#   kill   kill -9, the dead mount removed, the others' writers awaited
#          past the takeover, then the star started again (same data
#          directory and id);
#   pause  SIGSTOP for star_lease_s + 1 s (past its lease), then SIGCONT;
#   bounce a graceful close (SIGTERM, as systemd stops it: the writer
#          holds the stream open, so fusermount3 -u would be EBUSY; exit
#          status 0, or 1 with "not closed cleanly" in its log, counted),
#          then a start.
# After every round every writer must be acked again (within 60 s: a
# writer stuck for good fails the soak).  Every NV_SOAK_CHECK_EVERY
# rounds (default 50) and at the end the writers stop and the check
# runs: the three mounts read identical bytes, every acked record of
# every writer so far is there exactly once and in its writer's order,
# and no record nobody wrote; then new writers start (new tags).
# NV_SOAK_SEED (default random, printed) replays a run's choices;
# NV_SOAK_CYCLE=1 takes kill, pause and bounce in turn (the stars stay
# random), so a short run has each (t_stars_rgw.sh);
# NV_SOAK_AGE_CAP (default 15 s) is the standard class's age cap;
# NOVAFS_ETCD_MEMBERS (default 1) sets the cluster's size.  The EXIT
# trap kills every process started here by PID.
set -euo pipefail
ROUNDS=${NV_ROUNDS:-200}
# The watchdog: a round takes ~5 s, a slow one up to a minute.
: "${NV_TIMEOUT:=$((ROUNDS * 60 + 600))}"
export NV_TIMEOUT
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/etcd/stars_store.sh
. "$here/stars_store.sh"
CHECK=$here/stars_check.py
TTL=2
EVERY=${NV_SOAK_CHECK_EVERY:-50}
SEED=${NV_SOAK_SEED:-$((RANDOM * 32768 + RANDOM))}
nv_init

declare -a M P L
W=()  # writer PIDs of the current writer generation
LOGS=()
soak_cleanup() {
	local rc=$? i p
	set +e
	for p in "${W[@]}"; do nv_is_own "$p" && kill -9 "$p" 2>/dev/null; done
	for i in 0 1 2; do
		p=${P[i]:-}
		[ -n "$p" ] && nv_is_own "$p" || continue
		kill -CONT "$p" 2>/dev/null
		timeout 10 fusermount3 -u "${M[i]}" 2>/dev/null || kill -9 "$p" 2>/dev/null
		nv_wait_pid_exit "$p" 10 || kill -9 "$p" 2>/dev/null
	done
	for i in 0 1 2; do
		[ -n "${M[i]:-}" ] && grep -q " ${M[i]} " /proc/mounts &&
			timeout 10 fusermount3 -uz "${M[i]}" 2>/dev/null
	done
	stars_store_stop
	(exit $rc)
	nv_cleanup
}
trap soak_cleanup EXIT

ED=$NV_TMP/etcd
"$here/etcd.sh" start "$ED" "${NOVAFS_ETCD_MEMBERS:-1}" > "$NV_TMP/etcd.env" || exit $?
for f in "$ED"/m*.pid; do nv_bg "$(cat "$f")"; done
. "$ED/env.sh"
stars_store_start "$NV_TMP"
SEC=$NV_TMP/secret
head -c 32 /dev/urandom | base64 > "$SEC"
chmod 600 "$SEC"
COMMON="store=$STARS_STORE,meta=$NOVAFS_ETCD_URL,star_lease_s=$TTL,put_timeout_s=2"
COMMON="$COMMON,attr_timeout=0,cluster_secret_file=$SEC"
# Records settle within NV_SOAK_AGE_CAP s (default 15, not 30 min), so
# the soak settles across its kills and pauses too, and the check reads
# settled objects: each unsettled record is a span ref of its own, and a
# read locates each by a floor lookup that etcd answers in time linear in
# the refs below it (the check of ~70,000 unsettled records took minutes).
COMMON="$COMMON,age_cap_standard_s=${NV_SOAK_AGE_CAP:-15}"

# up I: start star I (its mount, data directory, log and id; a new port).
up() {
	local i=$1
	nv_spawn_star "${M[i]}" "${L[i]}" "data_dir=$NV_TMP/data-$i,star=s$i,$COMMON"
	P[i]=$NV_STAR_PID
}
for i in 0 1 2; do
	M[i]=$NV_TMP/mnt-$i
	L[i]=$NV_TMP/novafs-$i.log
	mkdir -p "${M[i]}" "$NV_TMP/data-$i"
	up "$i"
done
say "seed $SEED; $ROUNDS rounds; stars ${P[*]} on etcd $NOVAFS_ETCD_ENDPOINTS"
RANDOM=$SEED

now() { python3 -c 'import time; print("%.6f" % time.time())'; }
acks_after() { awk -v t="$2" '$1 == "ack" && $3 > t { n++ } END { print n + 0 }' "$1"; }
# all_acked_since T N: every current writer has N acks after time T.
all_acked_since() {
	local i
	for i in 0 1 2; do (($(acks_after "$NV_TMP/w$i-$GEN.log" "$1") >= $2)) || return 1; done
}
# others_acked_since I T N: the writers of the stars other than I.
others_acked_since() {
	local i
	for i in 0 1 2; do
		[ "$i" = "$1" ] && continue
		(($(acks_after "$NV_TMP/w$i-$GEN.log" "$2") >= $3)) || return 1
	done
}
# nv_await_quiet SECS CMD...: CMD succeeds within SECS (polled), else 1.
nv_await_quiet() {
	local end=$((SECONDS + $1))
	shift
	until "$@" 2>/dev/null; do
		((SECONDS < end)) || return 1
		sleep 0.2
	done
}
GEN=0
writers_start() {
	local i log
	GEN=$((GEN + 1))
	W=()
	for i in 0 1 2; do
		log=$NV_TMP/w$i-$GEN.log
		: > "$log"
		LOGS+=("$log")
		python3 "$CHECK" write "${M[i]}/b/s" "$log" "w$i-$GEN" 0.05 &
		W+=($!)
		nv_own "$!"
	done
}
# same_bytes: the three mounts read the same bytes (each try's sizes and
# time go to $NV_TMP/check.trace).
same_bytes() {
	local i
	{
		printf '%s' "$(date +%T.%N)"
		for i in 0 1 2; do printf ' %s/%s' "$(stat -c %s "${M[i]}/b/s")" "$(wc -c < "${M[i]}/b/s")"; done
		echo
	} >> "$NV_TMP/check.trace" 2>&1
	cmp -s "${M[0]}/b/s" "${M[1]}/b/s" && cmp -s "${M[0]}/b/s" "${M[2]}/b/s"
}
check_all() {
	local i p t0=$EPOCHREALTIME
	for i in 0 1 2; do touch "$NV_TMP/w$i-$GEN.log.stop"; done
	for p in "${W[@]}"; do wait "$p" || fail "a writer exited with status $?"; done
	W=()
	say "writers stopped in $(nv_elapsed "$t0") s"
	if ! nv_await_quiet 120 same_bytes; then
		for i in 0 1 2; do
			say "star $i: st_size $(stat -c %s "${M[i]}/b/s"), read $(wc -c < "${M[i]}/b/s")," \
				"leader $(nv_xattr "${M[i]}/b/s" user.nova.leader)," \
				"md5 $(md5sum < "${M[i]}/b/s" | cut -c1-12)"
			cp "${M[i]}/b/s" "$NV_TMP/stream-$i" || true
		done
		say "star 0 against 1: $(cmp "$NV_TMP/stream-0" "$NV_TMP/stream-1" 2>&1 | head -2)"
		say "star 0 against 2: $(cmp "$NV_TMP/stream-0" "$NV_TMP/stream-2" 2>&1 | head -2)"
		fail "after round $1 (seed $SEED): the three mounts do not read the same bytes"
	fi
	python3 "$CHECK" verify "${M[0]}/b/s" "${M[1]}/b/s" "${M[2]}/b/s" -- "${LOGS[@]}" \
		> "$NV_TMP/verify.out" || fail "after round $1 (seed $SEED): $(cat "$NV_TMP/verify.out")"
	say "check after round $1 ($(nv_elapsed "$t0") s): $(cat "$NV_TMP/verify.out")"
}

mkdir "${M[0]}/b"
: > "${M[0]}/b/s"
nv_await 20 "every star sees the stream" bash -c "test -e '${M[1]}/b/s' && test -e '${M[2]}/b/s'"
writers_start
nv_await 30 "every writer is acked" all_acked_since 0 10

declare -A did=([kill]=0 [pause]=0 [bounce]=0)
unclean=0
# since_round LOG: LOG from this round's marker on.
since_round() { awk -v m="round $round: " 'index($0, "==== ") == 1 && index($0, m) { f = 1 } f' "$1"; }
for round in $(seq 1 "$ROUNDS"); do
	i=$((RANDOM % 3))
	k=$((RANDOM % 3))
	[ "${NV_SOAK_CYCLE:-0}" = 0 ] || k=$(((round - 1) % 3))
	case $k in
	0) what=kill ;;
	1) what=pause ;;
	*) what=bounce ;;
	esac
	echo "==== $(date +%T.%N) round $round: $what star $i" | tee -a "${L[@]}" > /dev/null
	t=$(now)
	case $what in
	kill)
		kill -9 "${P[i]}"
		nv_wait_pid_exit "${P[i]}" 10 || fail "star ${P[i]} survived kill -9"
		wait "${P[i]}" 2>/dev/null || true
		timeout 10 fusermount3 -uz "${M[i]}" || fail "could not remove star $i's dead mount"
		nv_await 60 "round $round: the other writers go on after kill -9 of star $i" \
			others_acked_since "$i" "$t" 3
		up "$i"
		;;
	pause)
		kill -STOP "${P[i]}"
		# The pause itself is under test (a stopped daemon cannot be
		# awaited): past the lease, by a second.
		sleep $((TTL + 1))
		kill -CONT "${P[i]}"
		;;
	bounce)
		kill -TERM "${P[i]}"
		nv_wait_pid_exit "${P[i]}" 60 || fail "round $round: star $i did not exit on SIGTERM"
		rc=0
		wait "${P[i]}" || rc=$?
		# Status 1 only with the reason in its log (an epoch it could
		# not close, e.g. right after it lost its registry lease: the
		# next start settles it); counted.
		if ((rc == 1)) && since_round "${L[i]}" | grep "not closed cleanly" > /dev/null; then
			unclean=$((unclean + 1))
		elif ((rc != 0)); then
			fail "round $round: star $i exited with status $rc on SIGTERM"
		fi
		if grep -q " ${M[i]} " /proc/mounts; then
			timeout 10 fusermount3 -uz "${M[i]}" || fail "could not remove star $i's mount"
		fi
		up "$i"
		;;
	esac
	did[$what]=$((did[$what] + 1))
	nv_await 60 "round $round ($what star $i): every writer is acked again" \
		all_acked_since "$(now)" 3
	if ((round % EVERY == 0 || round == ROUNDS)); then
		check_all "$round"
		if ((round < ROUNDS)); then
			writers_start
			nv_await 60 "the new writers are acked" all_acked_since 0 3
		fi
	fi
done
say "ok: $ROUNDS rounds (kill ${did[kill]}, pause ${did[pause]}, bounce ${did[bounce]}," \
	"$unclean of them not closed cleanly), seed $SEED"
for i in 0 1 2; do
	fusermount3 -u "${M[i]}"
	nv_wait_pid_exit "${P[i]}" 60 || fail "star $i did not exit after the last unmount"
	rc=0
	wait "${P[i]}" || rc=$?
	if ((rc != 0)); then
		# Say why: the star's own log (the EXIT trap prints only the
		# first daemon's).
		tail -n 40 "${L[i]}" >&2
		fail "star $i exited with status $rc after a clean unmount (its log's tail above)"
	fi
	P[i]=
done
say "ok: the three stars closed cleanly"
