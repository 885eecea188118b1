#!/bin/bash
# t_stars_term.sh - SIGTERM right after a star lost its registry lease
# (man/novafs.8 EXIT STATUS): two stars on one etcd member and one shared
# store (tests/etcd/stars_lib.sh).  A leads a stream with a writer on
# A's mount appending; A is stopped (SIGSTOP) past its lease, B takes the
# stream (its take settles A's epoch) and appends; SIGCONT and, at once,
# SIGTERM of A:
#   1. A exits 0 (nothing acked is lost: its acked records are durable and
#      B's take settled them; it has no lease left to release), its log
#      says that its epoch was settled by another star, and its close does not call the
#      stream B took a failed release;
#   2. every record the writer got acked is on B exactly once, in order.
# Set-up and cleanup: tests/etcd/stars_lib.sh.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
# shellcheck source=tests/etcd/stars_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/stars_lib.sh"
nv_init
nv_stars_init
# A's auditor waits 3 s before it restarts a halted class, so the SIGTERM
# always overtakes the restart after the lease loss (the window the
# close has to handle; without the delay it is a race).
export NOVAFS_FAILPOINTS=auditor.before_restart=delay:3000
nv_star_lead a "$NV_STARS_COMMON,attr_timeout=0"
unset NOVAFS_FAILPOINTS
nv_star b "$NV_STARS_COMMON,attr_timeout=0"
MA=${NV_STAR_MNT[a]}
MB=${NV_STAR_MNT[b]}
say "stars A (pid $NV_PID) and B (pid ${NV_STAR_PIDS[b]}) on etcd $NOVAFS_ETCD_ENDPOINTS"

mkdir "$MA/b"
: > "$MA/b/t"
# The writer: tests/etcd/records.py ("w n pad" records, w.log).
wlog=$NV_TMP/w.log
acks() { local k; k=$(grep -c '^ack' "$wlog" 2>/dev/null) || true; echo "${k:-0}"; }
acks_at_least() { (($(acks) >= $1)); }
python3 "$NV_STARS_HERE/records.py" write "$MA/b/t" w "$wlog" &
W_PID=$!
nv_bg "$W_PID"
nv_await 20 "the writer on A gets going" acks_at_least 20
[[ $(getfattr --absolute-names --only-values -n user.nova.leader "$MB/b/t") == "sa "* ]] ||
	fail "A should lead b/t"
kill -STOP "$NV_PID"
t0=$EPOCHREALTIME
# b_append: one record "b N x" on B, its outcome in b.log (a refused
# one may be in doubt: each try is its own record).
: > "$NV_TMP/b.log"
bn=0
b_append() {
	local r=ack
	printf 'b %d x\n' "$bn" >> "$MB/b/t" 2>/dev/null || r=err
	echo "$r $bn x" >> "$NV_TMP/b.log"
	bn=$((bn + 1))
	[ "$r" = ack ]
}
nv_await 60 "B takes the paused star's stream" b_append
say "B appended $(nv_elapsed "$t0") s after A was stopped"
kill -CONT "$NV_PID"
kill -TERM "$NV_PID"
nv_wait_daemon_exit 60
touch "$wlog.stop"
nv_await 30 "the writer ends" bash -c "! kill -0 $W_PID 2>/dev/null"
LA=${NV_STAR_LOG[a]}
((NV_EXIT_RC == 0)) ||
	fail "A exited $NV_EXIT_RC after SIGTERM right after its lease loss (want 0): $(grep -E 'WARN|ERR' "$LA" | tail -6)"
# B's take settled A's epoch before A's close: the close says so (before
# ce2cd8c it found the CAS lost and named the halt instead).
grep -q "standard epoch [0-9]* was settled by another star" "$LA" ||
	fail "A's log does not say that B settled its epoch: $(grep -E 'WARN|ERR|settled by' "$LA" | tail -6)"
if grep -q "closing: handing off failed\|some failed: they expire" "$LA"; then
	fail "A's close called the stream B took a failed release: $(grep 'closing:' "$LA")"
fi
say "ok: A exited 0 after SIGTERM right after its lease loss (the writer: $(acks) acked): $(grep -o 'standard epoch [0-9]* was settled by another star' "$LA")"
out=$(python3 "$NV_STARS_HERE/records.py" verify "$MB/b/t" "$wlog" "$NV_TMP/b.log" 2>&1) ||
	fail "B's view of the stream after A's stop: $out"
say "ok: $out: every record A acked is on B once, in order"
