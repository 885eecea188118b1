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
#  2. The EXIT trap (nv_cleanup) always undoes what the test started, also
#     when the test fails part-way or the watchdog or the harness ends it
#     (TERM): the test's own hooks (nv_on_exit) run first, then background
#     helpers are killed, then every star of nv_spawn_star and the daemon
#     are stopped (SIGCONT, fusermount3 -u, kill -9 after 10 s, then -uz /
#     umount -l), then services (nv_service: etcd members) are killed,
#     all by PID (never by name); the temp dir is removed.  A mount that
#     cannot be removed is reported and its temp dir is left alone.  A
#     test never installs its own EXIT trap: a trap that does
#     `(exit $rc); nv_cleanup` under set -e ends at the `(exit $rc)` when
#     rc != 0, so nothing is cleaned on exactly the runs that fail.
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
# Daemon start/await/stop and the process and mount checks, shared with
# bench/lib.sh: nv_pid_alive, nv_wait_pid_exit, nv_is_mounted, nv_daemon_*.
# shellcheck source=tests/lib/daemon.sh
. "$NV_LIB_DIR/../lib/daemon.sh"

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
NV_SERVICES=()     # PIDs killed after the daemons (etcd members)
NV_STARS=()        # "PID:MNT" of every star nv_spawn_star started
NV_ON_EXIT=()      # the test's cleanup commands (nv_on_exit), run first
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

# PIDs are reused (pid_max is 32768 here, and a crash soak starts
# thousands of processes), so a PID registered long ago may name somebody
# else's process by the time the EXIT trap runs.  Registered PIDs carry
# their start time; the trap only touches a PID whose start time still
# matches.  (A child not yet waited for keeps its PID as a zombie, so the
# current NV_PID is always safe to signal.)
declare -A NV_PSTART=()

# nv_pstart PID: PID's start time (clock ticks after boot), or nothing.
nv_pstart() { awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null; }

# nv_own PID: remember PID's start time (call right after starting it).
nv_own() { NV_PSTART[$1]=$(nv_pstart "$1"); }

# nv_is_own PID: PID is still the process nv_own saw, not a reused PID.
nv_is_own() {
	[ -n "$1" ] && [ -n "${NV_PSTART[$1]:-}" ] && [ "$(nv_pstart "$1")" = "${NV_PSTART[$1]}" ]
}

# nv_bg PID: register a background helper so the EXIT trap kills it.
nv_bg() {
	NV_BG+=("$1")
	nv_own "$1"
}

# nv_service PID: register a service the daemons need to close (an etcd
# member): the EXIT trap kills it by PID after every star and the daemon
# are stopped, so their clean unmount can still reach it.
nv_service() {
	NV_SERVICES+=("$1")
	nv_own "$1"
}

# nv_on_exit CMD: the EXIT trap evals CMD (a string) first, before it
# stops anything; a failing CMD is ignored.  Instead of a trap of one's own.
nv_on_exit() { NV_ON_EXIT+=("$1"); }

# nv_wait_bg PID: wait for a registered helper; returns its exit status.
nv_wait_bg() {
	local rc=0
	wait "$1" || rc=$?
	return "$rc"
}

# ---------------------------------------------------------------- mounts

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
		# and every star (its FUSE requests may be what hangs)
		for p in $(cat "$dir/stars.pid" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
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
	for p in "${NV_ON_EXIT[@]}"; do eval "$p"; done
	for p in "${NV_BG[@]}"; do nv_is_own "$p" && nv_kill_tree "$p"; done
	for p in "${NV_BG[@]}"; do wait "$p" 2>/dev/null; done
	nv_stop_stars
	[ -n "$NV_PID" ] && nv_is_own "$NV_PID" && kill -CONT "$NV_PID" 2>/dev/null
	if [ -n "$MNT" ] && nv_is_mounted "$MNT"; then
		timeout 10 fusermount3 -u "$MNT" 2>/dev/null ||
			timeout 10 fusermount3 -uz "$MNT" 2>/dev/null ||
			timeout 10 umount -l "$MNT" 2>/dev/null
	fi
	for p in "${NV_DAEMONS[@]}"; do
		nv_is_own "$p" || continue # reaped earlier; the PID may be another's now
		if ! nv_wait_pid_exit "$p" 10; then
			echo "$NV_TEST: daemon $p still running at exit; kill -9" >&2
			kill -9 "$p" 2>/dev/null
			nv_wait_pid_exit "$p" 10
		fi
		wait "$p" 2>/dev/null
	done
	nv_unmount_dead
	for p in "${NV_SERVICES[@]}"; do nv_is_own "$p" && nv_kill_tree "$p"; done
	for p in "${NV_SERVICES[@]}"; do wait "$p" 2>/dev/null; done
	if [ -n "$NV_TMP" ] && [ -d "$NV_TMP" ]; then
		if nv_is_mounted "$MNT" || nv_stars_mounted; then
			echo "$NV_TEST: WARNING: a mount under $NV_TMP is still mounted; leaving it" >&2
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
	local rc=0
	nv_spawn "$@"
	nv_daemon_await_mount "$MNT" "${NV_START_TIMEOUT:-30}" || rc=$?
	case $rc in
	0) ;;
	1)
		nv_daemon_reap
		: > "$NV_TMP/daemon.pid"
		fail "daemon exited with status $NV_DAEMON_RC before mounting $MNT"
		;;
	*) fail "daemon $NV_PID did not mount $MNT within ${NV_START_TIMEOUT:-30}s" ;;
	esac
	say "daemon $NV_PID mounted (incarnation $NV_INCARNATION${NV_OPTS:+, -o $NV_OPTS})"
}

# nv_stop [SECONDS]: clean close: fusermount3 -u, then wait for the daemon to
# exit (60 s by default) with status 0.  kill -9 is the last resort, and a
# failure: a clean close must end the daemon.
nv_stop() {
	local t=${1:-60}
	[ -n "$NV_PID" ] || fail "nv_stop: no daemon running"
	nv_daemon_unmount "$MNT" 100 || fail "$NV_DAEMON_ERR"
	if ! nv_daemon_wait_exit "$t"; then
		kill -9 "$NV_PID" 2>/dev/null || true
		fail "$NV_DAEMON_ERR (killed)"
	fi
	: > "$NV_TMP/daemon.pid"
	((NV_DAEMON_RC == 0)) || fail "daemon exited with status $NV_DAEMON_RC after a clean unmount"
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

# nv_free_port: a TCP port on 127.0.0.1 nobody listens on (random in
# 20000-59999; ss tells what is taken), not handed out before by this
# test, the way tests/etcd/etcd.sh and tests/s3/*.sh pick theirs.  A
# server may still take it before ours binds: callers retry.
nv_free_port() {
	local p
	while :; do
		p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 12000 )) # below the ephemeral ports (32768-): no client socket holds it
		grep -qx "$p" "$NV_TMP/ports" 2>/dev/null && continue
		ss -Htln "sport = :$p" 2>/dev/null | grep -q . && continue
		echo "$p" >> "$NV_TMP/ports"
		echo "$p"
		return 0
	done
}

# nv_spawn_star MNT LOG OPTS: another star (not $NV_PID) on MNT with -o
# OPTS plus listen=127.0.0.1:PORT on a free port, retried on a new port
# when it exits before mounting (somebody took the port between the pick
# and the bind); waits for the mount.  NV_STAR_PID gets its PID.  The
# EXIT trap stops it (nv_stop_stars) unless the test reaped it (wait).
nv_spawn_star() {
	local try n
	for try in 1 2 3; do
		"$NOVAFS" -f -o "$3,listen=127.0.0.1:$(nv_free_port)" "$1" >> "$2" 2>&1 &
		NV_STAR_PID=$!
		nv_star_own "$NV_STAR_PID" "$1"
		n=600
		until mountpoint -q "$1" 2>/dev/null; do
			if ! nv_pid_alive "$NV_STAR_PID"; then
				wait "$NV_STAR_PID" 2>/dev/null || true
				continue 2
			fi
			((n-- > 0)) || fail "star $NV_STAR_PID did not mount $1 within 30 s"
			sleep 0.05
		done
		return 0
	done
	fail "a star on $1 exited before mounting, $try times: $(tail -2 "$2")"
}

# nv_star_own PID MNT: a star (a daemon the test started itself on MNT)
# for the EXIT trap to stop as it stops nv_spawn_star's (nv_stop_stars).
nv_star_own() {
	nv_own "$1"
	NV_STARS+=("$1:$2")
	echo "$1" >> "$NV_TMP/stars.pid"
}

# nv_stop_stars: stop every star nv_spawn_star started that still runs
# (the EXIT trap's; a test may call it to stop them all): SIGCONT (a
# paused star cannot unmount), fusermount3 -u, kill -9 when it has not
# exited within 10 s, then the mount is removed lazily (-uz, umount -l).
# By PID only; a PID the test reaped (or one now another's) is skipped.
nv_stop_stars() {
	local e p m
	for e in "${NV_STARS[@]}"; do
		p=${e%%:*}
		m=${e#*:}
		if nv_is_own "$p"; then
			kill -CONT "$p" 2>/dev/null || true
			timeout 10 fusermount3 -u "$m" 2>/dev/null || true
			if ! nv_wait_pid_exit "$p" 10; then
				echo "$NV_TEST: star $p still running at exit; kill -9" >&2
				kill -9 "$p" 2>/dev/null || true
				nv_wait_pid_exit "$p" 10 || true
			fi
			wait "$p" 2>/dev/null || true
		fi
		if nv_is_mounted "$m"; then
			timeout 10 fusermount3 -uz "$m" 2>/dev/null ||
				timeout 10 umount -l "$m" 2>/dev/null || true
		fi
	done
	return 0
}

# nv_stars_mounted: some star's mount point is still mounted.
nv_stars_mounted() {
	local e
	for e in "${NV_STARS[@]}"; do nv_is_mounted "${e#*:}" && return 0; done
	return 1
}

# nv_start_star OPTS: nv_start with OPTS plus listen=127.0.0.1:PORT on a
# free port, retried as nv_spawn_star does.
nv_start_star() {
	local try
	for try in 1 2 3; do
		nv_start_try "$1,listen=127.0.0.1:$(nv_free_port)" && return 0
	done
	fail "the daemon exited before mounting, $try times (status $NV_EXIT_RC)"
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

# ---------------------------------------------------------------- settlement
# Helpers for the settlement and trim tests (t_settle*.sh, t_trim.sh).

# nv_await SECONDS WHAT CMD...: poll CMD (every 0.1 s) until it succeeds;
# fail with "timed out after SECONDS s waiting for WHAT" when it never does.
nv_await() {
	local secs=$1 what=$2 t0=$EPOCHREALTIME
	shift 2
	until "$@"; do
		awk -v a="$t0" -v b="$EPOCHREALTIME" -v s="$secs" 'BEGIN { exit !(b - a > s) }' &&
			fail "timed out after ${secs}s waiting for $what"
		sleep 0.1
	done
}

# nv_layout FILE: the user.nova.layout JSON document of a stream.
nv_layout() {
	nv_xattr "$1" user.nova.layout || fail "getfattr -n user.nova.layout $1 failed"
}

# nv_is_settled FILE: user.nova.settled equals user.nova.seq.
nv_is_settled() {
	local seq settled
	seq=$(nv_xattr "$1" user.nova.seq) || return 1
	settled=$(nv_xattr "$1" user.nova.settled) || return 1
	[ -n "$seq" ] && [ "$seq" = "$settled" ]
}

# nv_wait_settled SECONDS FILE...: wait until every FILE is settled up to
# its seq (user.nova.settled == user.nova.seq).
nv_wait_settled() {
	local secs=$1 f
	shift
	for f in "$@"; do
		nv_await "$secs" "$(basename "$f") to settle (seq $(nv_xattr "$f" user.nova.seq), settled $(nv_xattr "$f" user.nova.settled) at the start of the wait)" \
			nv_is_settled "$f"
	done
}

# nv_slot_files: the chain slot objects in the directory store, one a line:
# the slot files, and (-o slot_segments) the live records of the segment
# files in $DATA/objects/#seg, named as the file of the same key would be
# (tests/integration/slots.py reads them).
NV_SLOTS_PY=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/slots.py
nv_slot_files() { python3 "$NV_SLOTS_PY" "$DATA/objects" | sort; }

# nv_slot_exists PATH: PATH (as nv_slot_files names it) is a live slot,
# as a file or as a segment record.  grep reads all of its input (no -q):
# a grep -q that exits at the first match leaves sort a SIGPIPE, which
# pipefail reports as a miss (t_settle's grace check saw live slots as
# deleted on a loaded host).
nv_slot_exists() { [ -e "$1" ] || nv_slot_files | grep -xF -- "$1" > /dev/null; }

# nv_no_slots: no chain slot object is left in the directory store.
nv_no_slots() { [ -z "$(nv_slot_files)" ]; }

# nv_wait_daemon_exit SECONDS: wait for the daemon to end on its own (a
# failpoint crash); NV_EXIT_RC gets its status.  Cleans the dead mount.
nv_wait_daemon_exit() {
	local secs=${1:-30}
	[ -n "$NV_PID" ] || fail "nv_wait_daemon_exit: no daemon running"
	nv_wait_pid_exit "$NV_PID" "$secs" ||
		fail "daemon $NV_PID still running ${secs}s after it should have died"
	NV_EXIT_RC=0
	wait "$NV_PID" 2>/dev/null || NV_EXIT_RC=$?
	NV_PID=
	: > "$NV_TMP/daemon.pid"
	echo "==== $(date +%T.%N): daemon exited with status $NV_EXIT_RC" >> "$LOG"
	nv_unmount_dead || fail "could not remove the dead mount $MNT"
}

# nv_fsck [--full]: novactl fsck on the (unmounted) data dir; fails on a
# violation, printing the report.
nv_fsck() {
	local rc=0
	nv_is_mounted "$MNT" && fail "nv_fsck: $MNT is still mounted"
	"$NOVACTL" fsck -o "data_dir=$DATA$(nv_store_opt)" "$@" > "$NV_TMP/fsck.out" 2>&1 || rc=$?
	if ((rc != 0)); then
		# The violations first: a crashed store's notes (one per
		# unabsorbed slot) can fill any fixed number of lines.
		{ grep -v '^note ' "$NV_TMP/fsck.out" | head -n 40; } >&2 || true
		echo "($(grep -c '^note ' "$NV_TMP/fsck.out" || true) note lines not shown)" >&2
		fail "novactl fsck $* exited with status $rc (violations above)"
	fi
	say "ok: fsck $*: $(tail -n 1 "$NV_TMP/fsck.out")"
}

# nv_check_objects FILE CAP_BYTES: check the settled objects a stream's
# layout lists against the directory store ($DATA/objects): each exists and
# is a well-formed bundle (trailer, footer) whose footer entries all belong
# to the stream and cover exactly [first_seq, end_seq) and
# [first_byte, first_byte + bytes) with contiguous chunks ending at
# stored_bytes; the objects are contiguous; and every object but the last
# was cut at the output cap: its stored bytes plus the first chunk of the
# next object exceed CAP_BYTES (so at most one object, the last, is below
# the cap by more than a chunk).  Prints one summary line.
nv_check_objects() {
	nv_layout "$1" > "$NV_TMP/layout.json"
	python3 - "$NV_TMP/layout.json" "$DATA/objects" "$2" "$(basename "$1")" <<'PY' ||
import json, os, struct, sys
doc = json.load(open(sys.argv[1]))
root, cap, name = sys.argv[2], int(sys.argv[3]), sys.argv[4]
objs = doc["settled_objects"]
def bad(msg):
    sys.exit("%s: %s" % (name, msg))
if doc.get("truncated"):
    bad("the layout lists only part of the settled objects (truncated); this check needs them all")
def entries(o):
    path = os.path.join(root, o["key"])
    if not os.path.isfile(path):
        bad("settled object %s is listed in the layout but missing from the store" % o["key"])
    data = open(path, "rb").read()
    if len(data) < 32:
        bad("%s: %d bytes, shorter than a trailer" % (o["key"], len(data)))
    magic, ver, esz, n, foff = struct.unpack_from("<8sHHIQ", data, len(data) - 32)
    if magic != b"NOVABNDL" or ver != 1 or esz != 64:
        bad("%s: bad trailer (%r v%d entry size %d)" % (o["key"], magic, ver, esz))
    if foff + n * 64 + 32 != len(data):
        bad("%s: footer at %d with %d entries does not end the %d-byte object"
            % (o["key"], foff, n, len(data)))
    if foff != o["stored_bytes"]:
        bad("%s: chunks end at %d but the layout says stored_bytes %d"
            % (o["key"], foff, o["stored_bytes"]))
    out = []
    for i in range(n):
        sid, fs, fb, coff, mts, nrec, comp, raw = struct.unpack_from(
            "<QQQQQIII", data, foff + 64 * i)
        out.append(dict(stream=sid, first_seq=fs, first_byte=fb, chunk_off=coff,
                        nrec=nrec, comp=comp, body=raw - 12 * nrec))
    return out
prev_end = None
for i, o in enumerate(objs):
    es = entries(o)
    if not es:
        bad("%s: no footer entries" % o["key"])
    seq, byte, off = o["first_seq"], o["first_byte"], 0
    for e in es:
        if e["stream"] != doc["stream"]:
            bad("%s: holds a chunk of stream %d" % (o["key"], e["stream"]))
        if (e["first_seq"], e["first_byte"], e["chunk_off"]) != (seq, byte, off):
            bad("%s: chunk at seq %d byte %d offset %d, expected seq %d byte %d offset %d"
                % (o["key"], e["first_seq"], e["first_byte"], e["chunk_off"], seq, byte, off))
        seq += e["nrec"]; byte += e["body"]; off += e["comp"]
    if seq != o["end_seq"] or byte != o["first_byte"] + o["bytes"] or off != o["stored_bytes"]:
        bad("%s: chunks cover seq [%d, %d) bytes %d stored %d; the layout says [%d, %d) %d %d"
            % (o["key"], o["first_seq"], seq, byte - o["first_byte"], off, o["first_seq"],
               o["end_seq"], o["bytes"], o["stored_bytes"]))
    if prev_end is not None and prev_end != o["first_seq"]:
        bad("object %s starts at seq %d, the previous one ends at %d: settled history %s"
            % (o["key"], o["first_seq"], prev_end,
               "overlaps (records settled twice)" if prev_end > o["first_seq"] else "has a gap"))
    prev_end = o["end_seq"]
    o["first_chunk"] = es[0]["comp"]
    o["nchunks"] = len(es)
for i in range(len(objs) - 1):
    o, nxt = objs[i], objs[i + 1]
    if o["stored_bytes"] + nxt["first_chunk"] <= cap:
        bad("object %d of %d (%s, %d stored bytes) is below the output cap %d although the "
            "next object's first chunk (%d bytes) would have fit: a sub-cap object that is "
            "not the last" % (i + 1, len(objs), o["key"], o["stored_bytes"], cap,
                              nxt["first_chunk"]))
    if o["stored_bytes"] > cap and o["nchunks"] > 1:
        bad("object %s: %d stored bytes exceed the output cap %d" % (o["key"], o["stored_bytes"], cap))
if objs and objs[-1]["end_seq"] != doc["settled"]:
    bad("the last settled object ends at seq %d but user.nova.settled is %d"
        % (objs[-1]["end_seq"], doc["settled"]))
if objs and objs[0]["first_seq"] > doc["trim_seq"]:
    bad("the first settled object starts at seq %d, above the trim point %d"
        % (objs[0]["first_seq"], doc["trim_seq"]))
print("%s: %d settled object(s) well formed, contiguous over seq [%s, %s), cut at the cap; "
      "stored sizes %s" % (name, len(objs), objs[0]["first_seq"] if objs else "-",
                           objs[-1]["end_seq"] if objs else "-",
                           ",".join(str(o["stored_bytes"]) for o in objs)))
PY
	fail "settled objects of $1 are wrong (see above); layout in $NV_TMP/layout.json"
}

# ---------------------------------------------------------------- follow and crash
# Helpers for the follow-view and crash tests (t_follow*.sh, t_crash_*.sh).

# nv_cpu_ticks PID: user + system CPU time of PID (all its threads, exited
# ones included) in clock ticks, from /proc/PID/stat.
nv_cpu_ticks() {
	awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# nv_cpu_ns PID: CPU time of PID's live threads in nanoseconds: the sum of
# /proc/PID/task/*/schedstat (exact, where /proc/PID/stat counts whole
# ticks); nv_cpu_ticks converted when the kernel has no schedstat.
nv_cpu_ns() {
	local f t=0 a rest
	for f in /proc/"$1"/task/*/schedstat; do
		if [ ! -r "$f" ]; then
			echo $(( $(nv_cpu_ticks "$1") * 1000000000 / $(getconf CLK_TCK) ))
			return 0
		fi
		read -r a rest < "$f" 2>/dev/null || continue
		t=$((t + a))
	done
	echo "$t"
}

# nv_threads PID: the number of threads of PID (/proc/PID/status).
nv_threads() {
	awk '/^Threads:/ { print $2 }' "/proc/$1/status"
}

# nv_segments_opt: how chain slots are kept on the directory store, from
# NOVAFS_TEST_SEGMENTS: 1 ",slot_segments=1", 0 ",slot_segments=0" (slot
# files: make check-slot-files runs the crash and failpoint suites so),
# unset the default (segments on the data directory's own store).
nv_segments_opt() {
	case ${NOVAFS_TEST_SEGMENTS:-} in
	0 | 1) printf ',slot_segments=%s' "$NOVAFS_TEST_SEGMENTS" ;;
	esac
}

# nv_spawn [OPTS]: start the daemon like nv_start but do not wait for the
# mount (the daemon may die first: a failpoint).  Sets NV_PID.
nv_spawn() {
	[ $# -gt 0 ] && NV_OPTS=$1
	[ -z "$NV_PID" ] || fail "nv_spawn: daemon $NV_PID is already running"
	nv_is_mounted "$MNT" && fail "nv_spawn: $MNT is already mounted"
	NV_INCARNATION=$((NV_INCARNATION + 1))
	printf '==== %s: start #%d: -o data_dir=%s%s%s\n' "$(date +%T.%N)" \
		"$NV_INCARNATION" "$DATA" "${NV_OPTS:+,$NV_OPTS}$(nv_store_opt)$(nv_segments_opt)" \
		"${NOVAFS_FAILPOINTS:+ NOVAFS_FAILPOINTS=$NOVAFS_FAILPOINTS}" >> "$LOG"
	nv_daemon_spawn "$MNT" "$LOG" "data_dir=$DATA${NV_OPTS:+,$NV_OPTS}$(nv_store_opt)$(nv_segments_opt)"
	NV_DAEMONS+=("$NV_PID")
	nv_own "$NV_PID"
	echo "$NV_PID" > "$NV_TMP/daemon.pid"
}

# nv_reap_daemon: the daemon ended (or was killed): collect its status in
# NV_EXIT_RC, forget it, remove the dead mount.
nv_reap_daemon() {
	nv_daemon_reap
	NV_EXIT_RC=$NV_DAEMON_RC
	: > "$NV_TMP/daemon.pid"
	echo "==== $(date +%T.%N): daemon exited with status $NV_EXIT_RC" >> "$LOG"
	nv_unmount_dead || fail "could not remove the dead mount $MNT"
}

# nv_await_mount_or_exit [SECONDS]: after nv_spawn, wait until the mount
# answers (status 0) or the daemon dies (status 1, reaped: NV_EXIT_RC has
# its status, the dead mount is removed).  Fails on timeout (30 s).
nv_await_mount_or_exit() {
	local rc=0
	nv_daemon_await_mount "$MNT" "${1:-30}" || rc=$?
	case $rc in
	0) return 0 ;;
	1)
		nv_reap_daemon
		return 1
		;;
	*) fail "daemon $NV_PID neither mounted $MNT nor exited within ${1:-30}s" ;;
	esac
}

# nv_start_try [OPTS]: nv_spawn + nv_await_mount_or_exit: 0 mounted, 1 the
# daemon died before mounting (NV_EXIT_RC).
nv_start_try() {
	nv_spawn "$@"
	nv_await_mount_or_exit "${NV_START_TIMEOUT:-30}"
}

# nv_died_within SECONDS: wait up to SECONDS for the daemon to end on its
# own; 0 and reaped (NV_EXIT_RC) when it did, 1 when it still runs.
nv_died_within() {
	nv_wait_pid_exit "$NV_PID" "$1" || return 1
	nv_reap_daemon
}

# nv_kill9: SIGKILL the daemon whether or not it is still alive (it may be
# mounting, recovering or already dead), reap it, remove the dead mount.
nv_kill9() {
	local gone=1
	[ -n "$NV_PID" ] || fail "nv_kill9: no daemon running"
	# stderr off: bash would print a "Killed" job notice.
	{
		kill -9 "$NV_PID" || true
		if nv_wait_pid_exit "$NV_PID" 10; then
			NV_EXIT_RC=0
			wait "$NV_PID" || NV_EXIT_RC=$?
		else
			gone=0
		fi
	} 2>/dev/null
	((gone)) || fail "daemon $NV_PID survived kill -9"
	NV_PID=
	: > "$NV_TMP/daemon.pid"
	echo "==== $(date +%T.%N): kill -9 (exit status $NV_EXIT_RC)" >> "$LOG"
	nv_unmount_dead || fail "could not remove the dead mount $MNT"
}

# nv_crash_tools: write $NV_TMP/writer.py and $NV_TMP/verify.py.
#
# Record n of stream NAME (n = 1, 2, ...) is the line
#   "<n> <NAME> <padding>\n", padding = "x" * ((n * 131) % PAD)
# (PAD 700 unless given), so a lost, duplicated, reordered or torn record
# cannot look well formed.
#
# writer.py PATH FIRST LASTFILE [PAD]: open PATH (O_APPEND), then create
# LASTFILE holding FIRST-1; append records FIRST, FIRST+1, ... one write()
# each; after each write returns, store its number in LASTFILE (fixed
# width, rewritten in place).  Exits 0 at the first failed open or write
# when the daemon died (ENOTCONN or ECONNABORTED; or EIO when the daemon
# is found dead right after: the kernel's answer to a request the dying
# daemon was taking in), printing the errno name on stderr; exits 1 on a
# short write or another errno.
#
# verify.py DIR NAME=LAST[:PAD[:REC:OFF]] ...: for each stream DIR/NAME:
# its records are exactly 1..M in order (no torn, lost, duplicated or
# invented one), M >= LAST (every acknowledged record is there) and
# M <= LAST + 1 (only the one write whose return the writer never saw may
# be beyond), M equals user.nova.seq and the bytes read equal st_size.
# With REC:OFF only the bytes from offset OFF on are read, and must start
# with record REC (an earlier call verified what is below).  Prints
# "NAME M SIZE CHECKED" lines; exits 1 with a message at the first problem.
nv_crash_tools() {
	cat > "$NV_TMP/writer.py" <<'PY'
import errno, os, sys
path, n, lastfile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
pad = int(sys.argv[4]) if len(sys.argv) > 4 else 700
name = os.path.basename(path)
DEAD = (errno.ENOTCONN, errno.ECONNABORTED)
def died(what, e, fd=None):
    ok = e.errno in DEAD
    note = ""
    if e.errno == errno.EIO and fd is not None:
        # The kernel fails a request with EIO when the daemon dies while
        # taking it off /dev/fuse.  Ask the daemon (xattrs are never
        # cached): if it is gone too, that is what happened.
        try:
            os.getxattr(fd, "user.nova.seq")
            note = " from a live daemon"
        except OSError as e2:
            ok = e2.errno in DEAD
            note = " (the daemon died with the request in transit: %s)" % \
                errno.errorcode.get(e2.errno, e2.errno)
    print("%s: %s of record %d failed: %s (%s)%s%s" % (name, what, n, e.strerror,
          errno.errorcode.get(e.errno, e.errno), note, "" if ok else ": UNEXPECTED"),
          file=sys.stderr)
    sys.exit(0 if ok else 1)
try:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
except OSError as e:
    died("open", e)
# LASTFILE appears once the stream is open (nv_writers_start waits for it).
lf = os.open(lastfile + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.pwrite(lf, b"%12d\n" % (n - 1), 0)
os.rename(lastfile + ".tmp", lastfile)
while True:
    rec = ("%d %s %s\n" % (n, name, "x" * (n * 131 % pad))).encode()
    try:
        w = os.write(fd, rec)
    except OSError as e:
        died("write", e, fd)
    if w != len(rec):
        sys.exit("%s: short write %d of %d at record %d" % (name, w, len(rec), n))
    os.pwrite(lf, b"%12d\n" % n, 0)
    n += 1
PY
	cat > "$NV_TMP/verify.py" <<'PY'
import os, sys
d = sys.argv[1]
for arg in sys.argv[2:]:
    name, rest = arg.split("=", 1)
    f = rest.split(":")
    last, pad = int(f[0]), int(f[1]) if len(f) > 1 and f[1] else 700
    rec0, off = (int(f[2]), int(f[3])) if len(f) > 3 else (1, 0)
    path = os.path.join(d, name)
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if off > size:
            sys.exit("%s: st_size %d is below the %d bytes verified before: acknowledged "
                     "bytes lost" % (name, size, off))
        fh.seek(off)
        data = fh.read()
    seq = int(os.getxattr(path, "user.nova.seq"))
    if data and not data.endswith(b"\n"):
        sys.exit("%s: the stream ends inside a record (torn): ...%r" % (name, data[-60:]))
    lines = data.split(b"\n")[:-1] if data else []
    for i, l in enumerate(lines, rec0):
        want = ("%d %s %s" % (i, name, "x" * (i * 131 % pad))).encode()
        if l != want:
            sys.exit("%s: line %d is %r..., expected record %d (lost, duplicated, torn or "
                     "reordered record; the writer saw %d acknowledged)" % (name, i, l[:50], i, last))
    m = rec0 - 1 + len(lines)
    if m < last:
        sys.exit("%s: the stream ends at record %d but the writer saw record %d acknowledged: "
                 "acknowledged records lost" % (name, m, last))
    if m > last + 1:
        sys.exit("%s: the stream has records up to %d; the writer saw %d acknowledged and had "
                 "only one more in flight" % (name, m, last))
    if seq != m:
        sys.exit("%s: %d records but user.nova.seq is %d" % (name, m, seq))
    if size != off + len(data):
        sys.exit("%s: st_size %d but %d bytes read" % (name, size, off + len(data)))
    print(name, m, size, len(lines))
PY
}

# A set of crash-test writers (nv_crash_tools first): one writer.py per
# stream of NV_W_DIR.  NV_W_NAMES lists the streams; NV_W_PAD[name] is the
# padding modulus, NV_W_NEXT[name] the next record number (1 + the records
# verified so far); NV_W_PIDS the running writers.
declare -ga NV_W_NAMES=() NV_W_PIDS=()
declare -gA NV_W_PAD=() NV_W_NEXT=() NV_W_BYTES=()
NV_W_DIR=
NV_W_CHECKED=0     # records verified by nv_writers_verify, all calls
NV_W_ACKED=0       # records the writers saw acknowledged, all rounds

# nv_writers_setup DIR NAME[:PAD[:CLASS]]...: create DIR (a bucket) and the
# streams (CLASS set while empty), reset the record numbers.
nv_writers_setup() {
	local spec name pad cls
	NV_W_DIR=$1
	shift
	NV_W_NAMES=()
	NV_W_PAD=()
	NV_W_NEXT=()
	NV_W_BYTES=()
	mkdir -p "$NV_W_DIR"
	for spec in "$@"; do
		IFS=: read -r name pad cls <<< "$spec"
		NV_W_NAMES+=("$name")
		NV_W_PAD[$name]=${pad:-700}
		NV_W_NEXT[$name]=1
		NV_W_BYTES[$name]=0
		: > "$NV_W_DIR/$name"
		[ -z "$cls" ] || setfattr -n user.nova.class -v "$cls" "$NV_W_DIR/$name" ||
			fail "setfattr user.nova.class=$cls on $NV_W_DIR/$name failed"
	done
}

# nv_writers_last NAME: the last record the writer saw acknowledged.
nv_writers_last() {
	local v
	v=$(tr -d ' \n' 2>/dev/null < "$NV_TMP/last.$1") || v=
	echo "${v:-$((NV_W_NEXT[$1] - 1))}"
}

# nv_writers_start: one writer per stream, from its next record on;
# returns once each writer has its stream open (or has ended: the daemon
# died first), so a dead mount is never removed under a pending open.
nv_writers_start() {
	local w i n=500
	NV_W_PIDS=()
	for w in "${NV_W_NAMES[@]}"; do
		rm -f "$NV_TMP/last.$w"
		python3 "$NV_TMP/writer.py" "$NV_W_DIR/$w" "${NV_W_NEXT[$w]}" "$NV_TMP/last.$w" \
			"${NV_W_PAD[$w]}" 2> "$NV_TMP/writer.$w.err" &
		NV_W_PIDS+=($!)
		nv_bg "$!"
	done
	for i in "${!NV_W_PIDS[@]}"; do
		until [ -e "$NV_TMP/last.${NV_W_NAMES[i]}" ] || ! nv_pid_alive "${NV_W_PIDS[i]}"; do
			((n-- > 0)) || fail "writer ${NV_W_NAMES[i]} did not open its stream within 10 s"
			sleep 0.02
		done
	done
}

# nv_writers_progress SECONDS: wait until every writer has had a record
# acknowledged.
nv_writers_progress() {
	local w n=$(( ${1:-10} * 50 ))
	for w in "${NV_W_NAMES[@]}"; do
		until (($(nv_writers_last "$w") >= NV_W_NEXT[$w])); do
			((n-- > 0)) || fail "writer $w made no progress in ${1:-10}s: $(cat "$NV_TMP/writer.$w.err")"
			sleep 0.02
		done
	done
}

# nv_writers_wait [SECONDS]: the daemon is gone: every writer must end
# within SECONDS (10) with status 0 (its write failed with ENOTCONN or
# ECONNABORTED).  Adds the acknowledged records to NV_W_ACKED.
nv_writers_wait() {
	local i w rc
	for i in "${!NV_W_PIDS[@]}"; do
		w=${NV_W_NAMES[i]}
		nv_wait_pid_exit "${NV_W_PIDS[i]}" "${1:-10}" ||
			fail "writer $w still running ${1:-10}s after the daemon died"
		rc=0
		wait "${NV_W_PIDS[i]}" || rc=$?
		((rc == 0)) || fail "writer $w failed (status $rc): $(cat "$NV_TMP/writer.$w.err")"
		NV_W_ACKED=$((NV_W_ACKED + $(nv_writers_last "$w") - NV_W_NEXT[$w] + 1))
	done
	NV_W_PIDS=()
}

# nv_writers_verify LABEL [incremental]: verify.py over every stream
# against what its writer saw acknowledged; the next round continues after
# the last record found.  "incremental" reads only what lies above the
# bytes an earlier call verified (they never change once visible).  Adds
# the records checked to NV_W_CHECKED.
nv_writers_verify() {
	local label=$1 w args=() name m size n from
	for w in "${NV_W_NAMES[@]}"; do
		from=
		[ "${2:-}" = incremental ] && from=":${NV_W_NEXT[$w]}:${NV_W_BYTES[$w]}"
		args+=("$w=$(nv_writers_last "$w"):${NV_W_PAD[$w]}$from")
	done
	python3 "$NV_TMP/verify.py" "$NV_W_DIR" "${args[@]}" > "$NV_TMP/verify.out" 2>&1 ||
		fail "$label: $(cat "$NV_TMP/verify.out")"
	while read -r name m size n; do
		NV_W_NEXT[$name]=$((m + 1))
		NV_W_BYTES[$name]=$size
		NV_W_CHECKED=$((NV_W_CHECKED + n))
		rm -f "$NV_TMP/last.$name"
	done < "$NV_TMP/verify.out"
}

# ---------------------------------------------------------------- another store
# NOVAFS_TEST_STORE=URL runs the integration tests against another object
# store (tests/s3/t_s3_suite.sh sets it to a throwaway RGW): nv_start,
# nv_spawn and nv_fsck add `store=URL&prefix=P` to their -o options, P
# unique per data dir (the metastore that owns those keys), so tests,
# restarts with a fresh data dir and reruns never share keys while every
# restart on one data dir finds its objects again.  The URL holds no ','
# and no prefix= of its own.  Unset (the default), nothing changes.
# Tests that look into the directory store itself ($DATA/objects,
# nv_slot_files, nv_check_objects) cannot see an S3 store.

# nv_store_prefix: the store key prefix of the current data dir.
nv_store_prefix() {
	local d=${DATA#"$NV_TMP"/}
	d=${d//[^A-Za-z0-9._-]/-}
	printf 'novafs-it/%s/%s' "${NV_TMP##*/}" "$d"
}

# NOVAFS_TEST_META=URL (tests/etcd/t_etcd_suite.sh sets it to a throwaway
# etcd, etcd://H:P;.../PREFIX[?opts]) does the same for the metastore:
# meta=URL with the data dir's own sub-prefix, so a remount finds its rows
# and no two data dirs share any.

# nv_meta_opt: ",meta=URL" (PREFIX/<data dir>) when NOVAFS_TEST_META is set.
nv_meta_opt() {
	[ -n "${NOVAFS_TEST_META:-}" ] || return 0
	case $NOVAFS_TEST_META in
	*,*) fail "NOVAFS_TEST_META must not contain ',' (it is one -o option)" ;;
	esac
	local base=${NOVAFS_TEST_META%%\?*} q=
	[[ $NOVAFS_TEST_META == *\?* ]] && q="?${NOVAFS_TEST_META#*\?}"
	printf ',meta=%s/%s%s' "$base" "$(nv_store_prefix | tr '/' '-')" "$q"
}

# nv_store_opt: ",store=URL&prefix=P" when NOVAFS_TEST_STORE is set, and
# nv_meta_opt's ",meta=URL" when NOVAFS_TEST_META is; else nothing.
nv_store_opt() {
	nv_meta_opt
	[ -n "${NOVAFS_TEST_STORE:-}" ] || return 0
	case $NOVAFS_TEST_STORE in
	*,*) fail "NOVAFS_TEST_STORE must not contain ',' (it is one -o option)" ;;
	*prefix=*) fail "NOVAFS_TEST_STORE must not set prefix= (each data dir gets its own)" ;;
	esac
	local sep='?'
	[[ $NOVAFS_TEST_STORE == *\?* ]] && sep='&'
	printf ',store=%s%sprefix=%s' "$NOVAFS_TEST_STORE" "$sep" "$(nv_store_prefix)"
}
