#!/bin/bash
# t_stars_cleanup.sh - the multi-star set-up (tests/etcd/stars_lib.sh)
# leaves nothing behind when a test fails part-way or is ended by the
# harness: a child test starts one etcd member and three stars (the lib's
# daemon, a star of nv_spawn_star with a follower parked on its follow
# view, and one SIGSTOPped), then
#   1. fails (fail: exit 1), or
#   2. is sent SIGTERM while it waits (as the harness's timeout does);
# after each, no process it started is alive (by PID), no mount of it is
# left, and its temp dir is gone.  (Before lib.sh's nv_cleanup stopped
# stars, each test's own EXIT trap did `(exit $rc); nv_cleanup` under
# set -e: on a failing run the trap ended there, leaving the stars'
# mounts and the etcd member running.)
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

cat > "$NV_TMP/child.sh" <<'EOF'
set -euo pipefail
. "$TESTLIB"
. "$STARS_LIB"
nv_init
nv_stars_init
nv_star_lead a "$NV_STARS_COMMON"
nv_star b "$NV_STARS_COMMON"
nv_star c "$NV_STARS_COMMON"
mkdir "$MNT/b"
echo x > "$MNT/b/s"
nv_await 20 "b sees the stream" test -e "${NV_STAR_MNT[b]}/.follow/b/s"
cat "${NV_STAR_MNT[b]}/.follow/b/s" > /dev/null &
nv_bg $!
kill -STOP "${NV_STAR_PIDS[c]}"
{
	echo "tmp $NV_TMP"
	for f in "$ED"/m*.pid; do echo "pid $(cat "$f")"; done
	for n in a b c; do echo "pid ${NV_STAR_PIDS[$n]}"; done
} > "$CHILD_OUT"
case $CHILD_MODE in
fail) fail "on purpose, part-way" ;;
term) nv_await 600 "the TERM" false ;; # where tests spend their time
esac
EOF

# child MODE: run the child test; its report in $NV_TMP/child.MODE.
child() {
	local out=$NV_TMP/child.$1 rc=0
	: > "$out"
	CHILD_MODE=$1 CHILD_OUT=$out STARS_LIB=$here/stars_lib.sh NV_TEST=t_stars_cleanup_child \
		bash "$NV_TMP/child.sh" > "$NV_TMP/child.$1.log" 2>&1 &
	CHILD_PID=$!
	nv_bg "$CHILD_PID"
	nv_await 60 "the $1 child started its stars" grep -q '^pid' "$out"
	nv_await 60 "the $1 child wrote its report" test "$(grep -c '^pid' "$out")" = 4
	if [ "$1" = term ]; then
		kill -TERM "$CHILD_PID"
	fi
	wait "$CHILD_PID" || rc=$?
	[ "$rc" != 0 ] || fail "the $1 child passed"
}

# gone MODE: nothing of the child's is left.
gone() {
	local out=$NV_TMP/child.$1 tmp p
	tmp=$(awk '$1 == "tmp" { print $2 }' "$out")
	[ -n "$tmp" ] || fail "the $1 child named no temp dir"
	for p in $(awk '$1 == "pid" { print $2 }' "$out"); do
		if nv_pid_alive "$p"; then
			kill -CONT "$p" 2>/dev/null || true
			fail "the $1 child left process $p running: $(tr '\0' ' ' < "/proc/$p/cmdline" | head -c 200)"
		fi
	done
	if grep -qF " $tmp/" /proc/self/mountinfo; then
		fail "the $1 child left mounts: $(grep -F " $tmp/" /proc/self/mountinfo | awk '{ print $5 }')"
	fi
	[ ! -e "$tmp" ] || fail "the $1 child left its temp dir $tmp"
}

child fail
gone fail
say "ok: a test failing part-way stops its stars, its follower and its etcd member, unmounts, removes its temp dir"
child term
gone term
say "ok: so does a test ended by SIGTERM"
