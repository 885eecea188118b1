# tests/etcd/stars_lib.sh - several stars (novafs mounts) on one etcd
# cluster and one shared store, for the multi-star tests (t_stars,
# t_stars_three, t_follow_stars, t_stars_kill, t_stars_delete, t_stars_trim_view,
# t_stars_term, and tests/etcd/handoff_lib.sh for t_handoff and t_drain;
# t_partition and the soak may use it too).
#
# What it is for: the set-up every multi-star test repeats: an etcd
# cluster of N members (tests/etcd/etcd.sh), a shared directory store
# (store=dir:, one directory on this host standing for the bucket), a
# 0600 cluster secret, and stars each with its own data directory, star
# id, mount, log and listen= port.  What it is not for: assertions, or
# the writers and checkers of one scenario (those live in the tests).
#
# Use (after tests/integration/lib.sh):
#     . "$TESTLIB"
#     . "$(dirname "${BASH_SOURCE[0]}")/stars_lib.sh"
#     nv_init
#     nv_stars_init [MEMBERS]      # 1 (default) or 3 etcd members
#     nv_star_lead a "$NV_STARS_COMMON,attr_timeout=0"  # star sa: $MNT, $NV_PID
#     nv_star b "$NV_STARS_COMMON"                      # star sb
#     nv_star c "$NV_STARS_BASE"    # no secret: cannot reach the others
#     nv_stars_012 OPTS [OPTS2]     # or: s0 (the lead) s1 s2, in M L P
#     ... "${NV_STAR_MNT[b]}/bucket/stream" ...
#     r=$(nv_stars_append FILE TEXT)  # OK or the errno name of one write()
# nv_stars_init sets NOVAFS_ETCD_* (tests/etcd/etcd.sh env), ED (the
# cluster's directory), NV_SHARED (the store's directory), NV_SECRET
# (the secret file), NV_STARS_BASE (store=, meta=, star_lease_s=2,
# put_timeout_s=2) and NV_STARS_COMMON (NV_STARS_BASE plus
# cluster_secret_file=).  nv_star NAME OPTS mounts star "sNAME" at
# $NV_TMP/mnt-NAME with data_dir=$NV_TMP/data-NAME, log
# $NV_TMP/novafs-NAME.log (nv_spawn_star: a free listen= port, retried)
# and records NV_STAR_MNT[NAME], NV_STAR_LOG[NAME], NV_STAR_PIDS[NAME].
# nv_star_lead NAME OPTS starts the lib's own daemon as star sNAME
# (nv_start_star: $MNT, $DATA, $LOG, $NV_PID, so nv_crash and nv_stop
# work on it) and records it the same way.
#
# Cleanup (tests/integration/lib.sh invariant 2): the test installs no
# EXIT trap of its own.  nv_cleanup, on every exit (pass, fail part-way,
# the watchdog, TERM from the harness), stops every star nv_spawn_star
# started and the daemon (SIGCONT, fusermount3 -u, kill -9 after 10 s,
# then a lazy unmount), then kills the etcd members (nv_service), all by
# PID.  A member restarted with `etcd.sh restart` gets a new PID: pass it
# to nv_service.  Extra cleanup (a namespace, a veth) goes through
# nv_on_exit CMD.
#
# Invariants:
#  1. Every star and member this file starts is stopped by PID by the
#     EXIT trap, stars before members (a star's clean close still
#     reaches etcd).
#  2. Each star has its own data directory, star id and port; all share
#     the store directory, the etcd prefix and the secret.

declare -gA NV_STAR_MNT=() NV_STAR_LOG=() NV_STAR_PIDS=()
NV_STARS_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# nv_stars_init [MEMBERS]: start etcd (MEMBERS members, 1 by default),
# make the shared store directory and the cluster secret.
nv_stars_init() {
	local f
	ED=$NV_TMP/etcd
	"$NV_STARS_HERE/etcd.sh" start "$ED" "${1:-1}" > "$NV_TMP/etcd.env" || exit $?
	for f in "$ED"/m*.pid; do nv_service "$(cat "$f")"; done
	. "$ED/env.sh"
	NV_SHARED=$NV_TMP/shared
	NV_SECRET=$NV_TMP/secret
	mkdir -p "$NV_SHARED"
	head -c 32 /dev/urandom | base64 > "$NV_SECRET"
	chmod 600 "$NV_SECRET"
	NV_STARS_BASE="store=dir:$NV_SHARED,meta=$NOVAFS_ETCD_URL,star_lease_s=2,put_timeout_s=2"
	NV_STARS_COMMON="$NV_STARS_BASE,cluster_secret_file=$NV_SECRET"
}

# nv_star NAME OPTS: star sNAME on its own mount, data directory and log.
nv_star() {
	local name=$1
	NV_STAR_MNT[$name]=$NV_TMP/mnt-$name
	NV_STAR_LOG[$name]=$NV_TMP/novafs-$name.log
	mkdir -p "${NV_STAR_MNT[$name]}" "$NV_TMP/data-$name"
	nv_spawn_star "${NV_STAR_MNT[$name]}" "${NV_STAR_LOG[$name]}" \
		"data_dir=$NV_TMP/data-$name,star=s$name${2:+,$2}"
	NV_STAR_PIDS[$name]=$NV_STAR_PID
}

# nv_star_lead NAME OPTS: the lib's daemon ($MNT, $NV_PID) as star sNAME.
nv_star_lead() {
	nv_start_star "star=s$1${2:+,$2}"
	NV_STAR_MNT[$1]=$MNT
	NV_STAR_LOG[$1]=$LOG
	NV_STAR_PIDS[$1]=$NV_PID
}

# nv_stars_012 OPTS [OPTS2]: stars s0 (nv_star_lead: $MNT, $NV_PID), s1
# and s2 (nv_star) with OPTS, s2 with OPTS2 too; their mounts, logs and
# pids by number in the arrays M, L and P.
nv_stars_012() {
	local i
	nv_star_lead 0 "$1"
	nv_star 1 "$1"
	nv_star 2 "$1${2:+,$2}"
	declare -ga M=() L=() P=()
	for i in 0 1 2; do
		M[i]=${NV_STAR_MNT[$i]}
		L[i]=${NV_STAR_LOG[$i]}
		P[i]=${NV_STAR_PIDS[$i]}
	done
}

# nv_stars_append FILE TEXT: one write() of TEXT to FILE (O_APPEND,
# created if missing); prints OK or the errno name.
nv_stars_append() {
	python3 - "$1" "$2" <<'PY'
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, sys.argv[2].encode())
    os.close(fd)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}
