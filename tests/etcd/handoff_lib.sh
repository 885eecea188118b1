# handoff_lib.sh - sourced by tests/etcd/t_handoff.sh and t_drain.sh
# (after tests/integration/lib.sh): the set-up of tests/etcd/stars_lib.sh
# (one etcd member, a shared directory store, the cluster secret,
# star_lease_s=2) with attr_timeout=0 and three stars s0 (the lib's
# daemon: $MNT, $NV_PID) s1 and s2, each with its own data directory,
# mount, log, star id and listen= port.
#   STAR_OPTS   extra -o options for every star (may be empty)
#   STAR2_OPTS  extra -o options for star s2 alone (may be empty)
# Gives M[i] (mounts), L[i] (logs), P[i] (pids; P[0] is $NV_PID), RECORDS
# (tests/etcd/records.py), and helpers (cleanup is lib.sh's nv_cleanup):
#   leader_of FILE        getfattr user.nova.leader: "STAR EPOCH" or "-"
#   acks LOG / acks_at_least LOG N / errnames LOG...
#   writers_start TAG FILE  one records.py writer per live mount on FILE
#                         (W[i], logs $NV_TMP/w<i>.TAG.log), WRITER_PAUSE_MS
#                         (default 5) between two records: enough load to
#                         keep every move busy, few enough records that a
#                         check reads them quickly
#   writers_stop TAG      stop them and wait
# shellcheck source=tests/etcd/stars_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/stars_lib.sh"
RECORDS=$NV_STARS_HERE/records.py
nv_init
nv_stars_init
SHARED=$NV_SHARED
COMMON="$NV_STARS_COMMON,attr_timeout=0${STAR_OPTS:+,$STAR_OPTS}"
declare -a W
# No trap of our own: stars_lib.sh's cleanup (lib.sh's nv_cleanup).
nv_stars_012 "$COMMON" "${STAR2_OPTS:-}"
say "three stars (pids ${P[*]}) on etcd $NOVAFS_ETCD_ENDPOINTS"

leader_of() { getfattr --absolute-names --only-values -n user.nova.leader "$1" 2>/dev/null; }
acks() { local n; n=$(grep -c '^ack' "$1" 2>/dev/null) || true; echo "${n:-0}"; }
acks_at_least() { (($(acks "$1") >= $2)); }
errnames() { cat "$@" | awk '$1 == "err" { print $3 }' | sort | uniq -c | tr -s ' \n' ' '; }

writers_start() {
	local tag=$1 file=$2 i
	for i in "${!M[@]}"; do
		[ -n "${P[i]:-}" ] || continue
		python3 "$RECORDS" write "${M[i]}/$file" "w$i.$tag" "$NV_TMP/w$i.$tag.log" 0 \
			"${WRITER_PAUSE_MS:-5}" &
		W[i]=$!
		nv_bg "${W[i]}"
	done
}
writers_stop() {
	local tag=$1 i
	for i in "${!W[@]}"; do touch "$NV_TMP/w$i.$tag.log.stop"; done
	for i in "${!W[@]}"; do
		nv_await 30 "writer $i.$tag ends" bash -c "! kill -0 ${W[i]} 2>/dev/null"
	done
	W=()
}
