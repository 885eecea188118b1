# tests/integration/lib.sh - shared helpers for the novafs integration tests.
#
# What it is for: every tests/integration/t_<scenario>.sh sources this file
# (through $TESTLIB, set by `make check`), calls nv_init, mounts a daemon with
# nv_start and asserts on observable behaviour of the mount.
# What it is not for: assertions about one scenario; those live in the tests.
#
# Invariants:
#  1. Everything lives under one temp dir made by mktemp -d ($NV_TMP): the
#     mount point ($MNT), the data dir ($DATA), the daemon log ($LOG).
#  2. The EXIT trap always undoes what the test started: background helpers
#     and daemons are killed by PID (never by name), the mount is unmounted
#     (fusermount3 -u, then -uz), the temp dir is removed.  A mount that
#     cannot be removed is reported and its temp dir is left alone.
#  3. Nothing sleeps where a condition can be awaited: waits are bounded
#     polling loops that fail with a clear message when the bound is hit.
#  4. A watchdog (NV_TIMEOUT seconds, default 300) kills the daemon and the
#     test if the test hangs, so `make check` never blocks forever.
#  5. Exit status follows automake: 0 pass, 77 skip, 1 fail, 99 hard error.
#
# Environment: NOVAFS (daemon), NOVACTL (admin CLI), TESTLIB (this file).
# Run by hand: NOVAFS=src/novafs TESTLIB=tests/integration/lib.sh \
#              bash tests/integration/t_basic.sh
# NV_KEEP=1 keeps the temp dir for inspection; NV_TIMEOUT=N sets the watchdog.

NV_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${NOVAFS:=$NV_LIB_DIR/../../src/novafs}"
: "${NOVACTL:=$NV_LIB_DIR/../../src/novactl}"
export NOVAFS NOVACTL

NV_TEST=$(basename "$0" .sh)
NV_T0=${EPOCHREALTIME:-0}
NV_TMP=
MNT=
DATA=
LOG=
NV_PID=            # PID of the running daemon, empty when none
NV_OPTS=           # extra -o options, remembered across restarts
NV_DAEMONS=()      # every daemon PID this test started
NV_BG=()           # background helper PIDs (writers, samplers)
NV_WATCHDOG=
NV_ERR=
NV_INCARNATION=0

set -E

# ---------------------------------------------------------------- output

say() { printf '%s: %s\n' "$NV_TEST" "$*"; }

# nv_elapsed T0: seconds since T0 (an $EPOCHREALTIME value), 2 decimals.
nv_elapsed() {
	awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'
}

# nv_log_tail [N]: print the last N (40) lines of the daemon log.
nv_log_tail() {
	if [ -n "$LOG" ] && [ -f "$LOG" ]; then
		echo "---- daemon log tail ($LOG) ----" >&2
		tail -n "${1:-40}" "$LOG" >&2
		echo "---- end of daemon log ----" >&2
	fi
}

# fail MESSAGE: report a failure with the daemon log tail and exit 1.
# Works in subshells too: the marker file tells the parent's EXIT trap that
# the failure was already reported.
fail() {
	printf '%s: FAIL: %s\n' "$NV_TEST" "$*" >&2
	if [ -n "$NV_TMP" ] && [ -d "$NV_TMP" ] && [ ! -e "$NV_TMP/.failed" ]; then
		: > "$NV_TMP/.failed"
		nv_log_tail 40
	fi
	exit 1
}

# nv_skip REASON: exit 77 (automake SKIP).
nv_skip() {
	say "SKIP: $*"
	exit 77
}

# nv_hard_error MESSAGE: exit 99 (automake ERROR: the test could not run).
nv_hard_error() {
	printf '%s: ERROR: %s\n' "$NV_TEST" "$*" >&2
	exit 99
}

# ---------------------------------------------------------------- processes

# nv_pid_alive PID: true while PID exists and is not a zombie.
nv_pid_alive() {
	local st
	[ -n "$1" ] && [ -r "/proc/$1/status" ] || return 1
	st=$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# nv_wait_pid_exit PID SECONDS: poll until PID is gone; false on timeout.
nv_wait_pid_exit() {
	local pid=$1 n=$(( ${2:-10} * 20 ))
	while nv_pid_alive "$pid"; do
		((n-- > 0)) || return 1
		sleep 0.05
	done
	return 0
}

# nv_kill_tree PID: SIGKILL PID and its descendants (children first found,
# by PID; never by name).
nv_kill_tree() {
	local pid=$1 kids k
	nv_pid_alive "$pid" || return 0
	kill -STOP "$pid" 2>/dev/null || true
	kids=$(pgrep -P "$pid" 2>/dev/null || true)
	for k in $kids; do nv_kill_tree "$k"; done
	kill -9 "$pid" 2>/dev/null || true
}

# nv_bg PID: register a background helper so the EXIT trap kills it.
nv_bg() { NV_BG+=("$1"); }

# nv_wait_bg PID: wait for a registered helper; returns its exit status.
nv_wait_bg() {
	local rc=0
	wait "$1" || rc=$?
	return "$rc"
}

# ---------------------------------------------------------------- mounts

# nv_is_mounted DIR: DIR is a mount point in /proc/self/mountinfo (also
# true for a dead FUSE mount, unlike `mountpoint -q`).
nv_is_mounted() {
	awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# nv_unmount_dead: remove a mount whose daemon is gone.
nv_unmount_dead() {
	nv_is_mounted "$MNT" || return 0
	timeout 10 fusermount3 -uz "$MNT" 2>/dev/null ||
		timeout 10 umount -l "$MNT" 2>/dev/null || true
	! nv_is_mounted "$MNT"
}

# ---------------------------------------------------------------- watchdog

nv_watchdog_start() {
	local secs=${NV_TIMEOUT:-300} me=$$ dir=$NV_TMP name=$NV_TEST
	(
		trap - ERR EXIT
		set +e
		trap 'kill "$sp" 2>/dev/null; exit 0' TERM
		sleep "$secs" &
		sp=$!
		wait "$sp"
		echo "$name: FAIL: watchdog: test still running after ${secs}s;" \
			"killing the daemon and the test" >&2
		if p=$(cat "$dir/daemon.pid" 2>/dev/null) && [ -n "$p" ]; then
			kill -9 "$p" 2>/dev/null
		fi
		# The test shell runs its TERM trap only after its foreground
		# command returns: end that command (and any helper) too.
		for p in $(pgrep -P "$me"); do
			[ "$p" = "$BASHPID" ] || kill -TERM "$p" 2>/dev/null
		done
		kill -TERM "$me"
	) &
	NV_WATCHDOG=$!
}

nv_watchdog_stop() {
	if [ -n "$NV_WATCHDOG" ]; then
		kill -TERM "$NV_WATCHDOG" 2>/dev/null || true
		wait "$NV_WATCHDOG" 2>/dev/null || true
		NV_WATCHDOG=
	fi
}

# ---------------------------------------------------------------- setup

# nv_require_env: skip unless the test can mount FUSE file systems.
nv_require_env() {
	[ "$(id -u)" -eq 0 ] || nv_skip "not root"
	[ -c /dev/fuse ] || nv_skip "/dev/fuse is missing"
	command -v fusermount3 >/dev/null || nv_skip "fusermount3 is not installed"
	command -v mountpoint >/dev/null || nv_skip "mountpoint is not installed"
	command -v getfattr >/dev/null && command -v setfattr >/dev/null ||
		nv_skip "getfattr/setfattr (package attr) are not installed"
	command -v python3 >/dev/null || nv_skip "python3 is not installed"
	[ -x "$NOVAFS" ] || nv_hard_error "daemon not built: NOVAFS=$NOVAFS"
}

nv_cleanup() {
	local rc=$? p failed=0
	set +e
	# Ignore INT/TERM so a late watchdog or ^C cannot cut the cleanup short.
	trap - ERR
	trap "" INT TERM
	[ -n "$NV_TMP" ] && [ -e "$NV_TMP/.failed" ] && failed=1
	if ((rc != 0 && rc != 77 && !failed)); then
		printf '%s: FAIL: exit status %s%s\n' "$NV_TEST" "$rc" \
			"${NV_ERR:+ after: $NV_ERR}" >&2
		nv_log_tail 40
	fi
	((failed && rc == 0)) && rc=1
	nv_watchdog_stop
	for p in "${NV_BG[@]}"; do nv_kill_tree "$p"; done
	for p in "${NV_BG[@]}"; do wait "$p" 2>/dev/null; done
	if [ -n "$MNT" ] && nv_is_mounted "$MNT"; then
		timeout 10 fusermount3 -u "$MNT" 2>/dev/null ||
			timeout 10 fusermount3 -uz "$MNT" 2>/dev/null ||
			timeout 10 umount -l "$MNT" 2>/dev/null
	fi
	for p in "${NV_DAEMONS[@]}"; do
		if ! nv_wait_pid_exit "$p" 10; then
			echo "$NV_TEST: daemon $p still running at exit; kill -9" >&2
			kill -9 "$p" 2>/dev/null
			nv_wait_pid_exit "$p" 10
		fi
		wait "$p" 2>/dev/null
	done
	nv_unmount_dead
	if [ -n "$NV_TMP" ] && [ -d "$NV_TMP" ]; then
		if nv_is_mounted "$MNT"; then
			echo "$NV_TEST: WARNING: $MNT is still mounted; leaving $NV_TMP" >&2
		elif [ -n "${NV_KEEP:-}" ]; then
			say "kept $NV_TMP"
		else
			rm -rf "$NV_TMP"
		fi
	fi
	case $rc in
	0) say "PASS ($(nv_elapsed "$NV_T0") s)" ;;
	77) ;;
	*) say "FAIL ($(nv_elapsed "$NV_T0") s)" ;;
	esac
	exit "$rc"
}

# nv_init: check the environment, make the temp dir, install the traps,
# start the watchdog.  Sets NV_TMP, MNT, DATA, LOG.
nv_init() {
	nv_require_env
	NV_TMP=$(mktemp -d "${TMPDIR:-/tmp}/novafs-$NV_TEST.XXXXXX")
	trap nv_cleanup EXIT
	trap 'NV_ERR="line $LINENO: $BASH_COMMAND"' ERR
	trap 'exit 130' INT
	trap 'exit 143' TERM
	MNT=$NV_TMP/mnt
	DATA=$NV_TMP/data
	LOG=$NV_TMP/novafs.log
	mkdir "$MNT" "$DATA"
	: > "$LOG"
	nv_watchdog_start
	say "temp dir $NV_TMP"
}

# ---------------------------------------------------------------- daemon

# nv_start [OPTS]: start the daemon in the foreground (in the background of
# this shell) on $MNT with data_dir=$DATA plus OPTS (a comma list, remembered
# for later restarts); wait until the mount answers.
nv_start() {
	local rc n
	[ $# -gt 0 ] && NV_OPTS=$1
	[ -z "$NV_PID" ] || fail "nv_start: daemon $NV_PID is already running"
	nv_is_mounted "$MNT" && fail "nv_start: $MNT is already mounted"
	NV_INCARNATION=$((NV_INCARNATION + 1))
	printf '==== %s: start #%d: -o data_dir=%s%s\n' "$(date +%T.%N)" \
		"$NV_INCARNATION" "$DATA" "${NV_OPTS:+,$NV_OPTS}" >> "$LOG"
	"$NOVAFS" -f -o "data_dir=$DATA${NV_OPTS:+,$NV_OPTS}" "$MNT" >> "$LOG" 2>&1 &
	NV_PID=$!
	NV_DAEMONS+=("$NV_PID")
	echo "$NV_PID" > "$NV_TMP/daemon.pid"
	n=$(( ${NV_START_TIMEOUT:-30} * 20 ))
	until mountpoint -q "$MNT"; do
		if ! nv_pid_alive "$NV_PID"; then
			rc=0
			wait "$NV_PID" || rc=$?
			NV_PID=
			fail "daemon exited with status $rc before mounting $MNT"
		fi
		((n-- > 0)) || fail "daemon $NV_PID did not mount $MNT within ${NV_START_TIMEOUT:-30}s"
		sleep 0.05
	done
	say "daemon $NV_PID mounted (incarnation $NV_INCARNATION${NV_OPTS:+, -o $NV_OPTS})"
}

# nv_stop [SECONDS]: clean close: fusermount3 -u, then wait for the daemon to
# exit (60 s by default) with status 0.  kill -9 is the last resort, and a
# failure: a clean close must end the daemon.
nv_stop() {
	local t=${1:-60} n=100 rc=0
	[ -n "$NV_PID" ] || fail "nv_stop: no daemon running"
	until fusermount3 -u "$MNT" 2> "$NV_TMP/fusermount.err"; do
		# EBUSY while a helper still has a file open: retry briefly.
		((n-- > 0)) || fail "fusermount3 -u $MNT failed: $(cat "$NV_TMP/fusermount.err")"
		sleep 0.1
	done
	if ! nv_wait_pid_exit "$NV_PID" "$t"; then
		kill -9 "$NV_PID" 2>/dev/null || true
		fail "daemon $NV_PID did not exit within ${t}s of a clean unmount (killed)"
	fi
	wait "$NV_PID" || rc=$?
	NV_PID=
	: > "$NV_TMP/daemon.pid"
	((rc == 0)) || fail "daemon exited with status $rc after a clean unmount"
	nv_is_mounted "$MNT" && fail "$MNT still mounted after the daemon exited"
	say "daemon unmounted cleanly"
}

# nv_crash: kill -9 the daemon, wait for it, clean the dead mount.
nv_crash() {
	local gone=1
	[ -n "$NV_PID" ] || fail "nv_crash: no daemon running"
	# stderr off: bash would print a "Killed" job notice.
	{
		kill -9 "$NV_PID"
		if nv_wait_pid_exit "$NV_PID" 10; then
			wait "$NV_PID" || true
		else
			gone=0
		fi
	} 2>/dev/null
	((gone)) || fail "daemon $NV_PID survived kill -9"
	NV_PID=
	: > "$NV_TMP/daemon.pid"
	echo "==== $(date +%T.%N): kill -9" >> "$LOG"
	nv_unmount_dead || fail "could not remove the dead mount $MNT"
	say "daemon killed (-9), dead mount removed"
}

# nv_remount: clean close, then start again with the same options.
nv_remount() {
	nv_stop
	nv_start
}

# nv_alive: the daemon PID exists and the mount answers.
nv_alive() {
	nv_pid_alive "$NV_PID" && mountpoint -q "$MNT" && stat "$MNT" >/dev/null
}

# nv_drop_caches: flush the kernel page cache so reads reach the daemon.
nv_drop_caches() {
	sync
	echo 3 > /proc/sys/vm/drop_caches 2>/dev/null ||
		say "warning: cannot drop caches (/proc/sys/vm/drop_caches)"
}

# ---------------------------------------------------------------- queries

# nv_size FILE: st_size.
nv_size() { stat -c %s "$1"; }

# nv_xattr FILE NAME: the value of one xattr (no trailing newline added).
nv_xattr() { getfattr --absolute-names --only-values -n "$2" "$1"; }

# nv_json_get KEY < JSON: one top-level value of a JSON object (jq if
# present, else python3).  Fails if the input is not a JSON object or the
# key is missing.
nv_json_get() {
	if command -v jq >/dev/null; then
		jq -er --arg k "$1" 'if type == "object" and has($k) then .[$k] else error("no key \($k)") end'
	else
		python3 -c '
import json, sys
d = json.load(sys.stdin)
if not isinstance(d, dict) or sys.argv[1] not in d:
    sys.exit("no key %s" % sys.argv[1])
print(d[sys.argv[1]])' "$1"
	fi
}

# nv_stat KEY: one counter of the root user.nova.stats document.
nv_stat() {
	local doc
	doc=$(nv_xattr "$MNT" user.nova.stats) || fail "getfattr -n user.nova.stats $MNT failed"
	printf '%s' "$doc" | nv_json_get "$1" || fail "stats has no valid '$1': $doc"
}

# ---------------------------------------------------------------- checks

# nv_expect_eq ACTUAL EXPECTED WHAT
nv_expect_eq() {
	[ "$1" = "$2" ] || fail "$3: got '$1', expected '$2'"
	say "ok: $3 = $2"
}

# nv_same_file ACTUAL EXPECTED WHAT: byte-for-byte comparison.
nv_same_file() {
	cmp "$1" "$2" > "$NV_TMP/cmp.out" 2>&1 ||
		fail "$3: $1 differs from $2: $(cat "$NV_TMP/cmp.out")"
	say "ok: $3"
}

# nv_refuse TEXT WHAT CMD...: CMD must fail and its output must contain TEXT.
nv_refuse() {
	local want=$1 what=$2 out rc=0
	shift 2
	out=$("$@" 2>&1) || rc=$?
	((rc != 0)) || fail "$what: '$*' succeeded; expected failure with '$want'"
	[[ $out == *"$want"* ]] ||
		fail "$what: '$*' failed (status $rc) with '$out'; expected '$want'"
	say "ok: $what -> $want"
}
