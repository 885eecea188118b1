# shellcheck shell=bash
# bench/lib.sh - shared helpers for the novafs benchmarks (sourced, not run).
#
# What it is for: every bench/<name>.sh sources this file, calls bench_init,
# mounts a daemon with nova_start, times workloads side by side with the
# local file system and prints RESULT lines plus a summary.
# What it is not for: tests.  Nothing here asserts behaviour; see tests/.
#
# Invariants:
#  1. Everything lives under one temp dir ($B_TMP) made by mktemp -d under
#     $BENCH_TMPDIR (default /var/tmp), which must not be tmpfs: the novafs
#     data dir ($DATA) and the local comparison files share that file system.
#  2. The EXIT trap undoes what the script started: helpers (perf, strace,
#     writers) and the daemon are killed by PID, never by name; the mount is
#     unmounted (fusermount3 -u, then -uz); the temp dir is removed unless
#     BENCH_KEEP=1.
#  3. Every measurement prints one machine-readable line
#        RESULT bench=<name> key=value ...
#     to stdout and appends it to $RESULTS_FILE when that is set.
#
# Environment (common to all scripts):
#   NOVAFS        the daemon (default: src/novafs of this tree)
#   BENCH_TMPDIR  parent of the temp dir (default /var/tmp; not tmpfs)
#   NOVA_OPTS     extra -o options for every mount, comma-separated
#   RESULTS_FILE  also append RESULT lines here
#   PROFILE       1: after the timed runs, one extra novafs run under
#                 perf record -e cpu-clock -g, one under strace -c -f -w
#   PROFILE_DIR   where profiles go (default $B_TMP/profile, removed with it)
#   BENCH_KEEP    1: keep the temp dir
#   DEFER_SETTLE  1 (default): mount with settlement deferred past the run
#                 (settle_trigger_mib=1048576, age caps 1 day).  Settlement
#                 is background work off the ack path; left on, it rewrites
#                 every stream that crossed 8 MiB ~30 s later and deletes its
#                 slots, i.e. it lands inside later measurements (novafs's and
#                 the local ones).  0: novafs defaults.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT_DIR=$(cd "$BENCH_DIR/.." && pwd)
: "${NOVAFS:=$ROOT_DIR/src/novafs}"
# Daemon start/await/stop and the process and mount checks, shared with
# the integration tests: nv_pid_alive, nv_wait_pid_exit, nv_is_mounted,
# nv_daemon_*.
# shellcheck source=tests/lib/daemon.sh
. "$ROOT_DIR/tests/lib/daemon.sh"
: "${BENCH_TMPDIR:=/var/tmp}"
: "${NOVA_OPTS:=}"
: "${RESULTS_FILE:=}"
: "${PROFILE:=0}"
: "${PROFILE_DIR:=}"
: "${BENCH_KEEP:=0}"
: "${DEFER_SETTLE:=1}"
SETTLE_DEFER_OPTS="settle_trigger_mib=1048576,age_cap_standard_s=86400,age_cap_express_s=86400"

B_NAME=
B_TMP=
MNT=
DATA=
LOG=
NV_PID=       # the running daemon, empty when none (tests/lib/daemon.sh)
B_BG=()       # helper PIDs (perf, strace, writers) the EXIT trap kills
B_DAEMONS=()  # every daemon PID started
B_RMDIRS=()   # extra temp dirs (e.g. on /dev/shm) the EXIT trap removes
PT_PID=       # the running passthrough_ll, empty when none
PT_MNT=       # its mount point, set by pt_start

say() { printf '%s: %s\n' "$B_NAME" "$*" >&2; }
die() {
	printf '%s: ERROR: %s\n' "$B_NAME" "$*" >&2
	exit 1
}

# result KEY=VALUE...: one RESULT line.
result() {
	local line="RESULT bench=$B_NAME $*"
	printf '%s\n' "$line"
	if [ -n "$RESULTS_FILE" ]; then printf '%s\n' "$line" >> "$RESULTS_FILE"; fi
}

# now: monotonic-enough wall seconds with microseconds ($EPOCHREALTIME).
now() { printf '%s' "$EPOCHREALTIME"; }

# calc EXPR: floating point arithmetic.
calc() { awk "BEGIN { printf \"%.6g\", $* }"; }

# summary V...: "median [min-max] (n=N)" of numbers.
summary() {
	printf '%s\n' "$@" | sort -g | awk '
		function f(x) { return x >= 100 ? sprintf("%.0f", x) : sprintf("%.3g", x) }
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print "n/a"; exit }
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%s [%s-%s] (n=%d)", f(m), f(v[1]), f(v[NR]), NR
		}'
}

# median V...: the median alone.
median() {
	printf '%s\n' "$@" | sort -g | awk '
		{ v[NR] = $1 }
		END { if (NR == 0) exit 1; printf "%.6g", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ---------------------------------------------------------------- processes

bench_cleanup() {
	local rc=$? p
	set +e
	trap - ERR
	trap '' INT TERM
	for p in "${B_BG[@]}"; do
		nv_pid_alive "$p" && kill -INT "$p" 2>/dev/null
	done
	for p in "${B_BG[@]}"; do
		nv_wait_pid_exit "$p" 5 || kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	[ -n "$PT_PID" ] && pt_stop
	if nv_is_mounted "$MNT"; then
		timeout 60 fusermount3 -u "$MNT" 2>/dev/null ||
			timeout 10 fusermount3 -uz "$MNT" 2>/dev/null ||
			timeout 10 umount -l "$MNT" 2>/dev/null
	fi
	for p in "${B_DAEMONS[@]}"; do
		if ! nv_wait_pid_exit "$p" 60; then
			say "daemon $p still running at exit; kill -9"
			kill -9 "$p" 2>/dev/null
			nv_wait_pid_exit "$p" 10
		fi
		wait "$p" 2>/dev/null
	done
	if nv_is_mounted "$MNT"; then
		fusermount3 -uz "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	for p in "${B_RMDIRS[@]}"; do
		[ -n "$p" ] && [ -d "$p" ] && rm -rf "$p"
	done
	if [ -n "$B_TMP" ] && [ -d "$B_TMP" ]; then
		if nv_is_mounted "$MNT"; then
			say "WARNING: $MNT is still mounted; leaving $B_TMP"
		elif [ "$BENCH_KEEP" = 1 ]; then
			say "kept $B_TMP"
		else
			# A failed run keeps its logs (not its data: GiBs).
			if ((rc != 0)) && compgen -G "$B_TMP/*.log" > /dev/null; then
				p=$(mktemp -d "$BENCH_TMPDIR/novafs-bench-$B_NAME-failed.XXXXXX")
				cp "$B_TMP"/*.log "$p/" && say "the failed run's logs: $p"
			fi
			rm -rf "$B_TMP"
		fi
	fi
	((rc == 0)) || say "FAILED (exit status $rc)"
	exit "$rc"
}

# bench_init NAME: check the environment, make the temp dir, set the traps.
bench_init() {
	B_NAME=$1
	[ "$(id -u)" -eq 0 ] || die "run as root (FUSE mounts, drop_caches)"
	[ -c /dev/fuse ] || die "/dev/fuse is missing"
	[ -x "$NOVAFS" ] || die "daemon not built: NOVAFS=$NOVAFS (make src/novafs)"
	command -v fusermount3 >/dev/null || die "fusermount3 is not installed"
	command -v python3 >/dev/null || die "python3 is not installed"
	mkdir -p "$BENCH_TMPDIR"
	case $(stat -f -c %T "$BENCH_TMPDIR") in
	tmpfs | ramfs) die "BENCH_TMPDIR=$BENCH_TMPDIR is $(stat -f -c %T "$BENCH_TMPDIR"); use a disk file system" ;;
	esac
	B_TMP=$(mktemp -d "$BENCH_TMPDIR/novafs-bench-$B_NAME.XXXXXX")
	trap bench_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	MNT=$B_TMP/mnt
	DATA=$B_TMP/data
	LOG=$B_TMP/novafs.log
	mkdir "$MNT" "$DATA"
	: > "$LOG"
	: "${PROFILE_DIR:=$B_TMP/profile}"
	say "temp dir $B_TMP ($(stat -f -c %T "$B_TMP") on $(df --output=source "$B_TMP" | tail -1))"
}

# need_space MIB: fail early unless the temp dir's file system has MIB free.
need_space() {
	local avail
	avail=$(df -m --output=avail "$B_TMP" | tail -1 | tr -d ' ')
	((avail > $1)) || die "need ${1} MiB free under $B_TMP, have ${avail} MiB"
}

# ---------------------------------------------------------------- daemon

# nova_start [OPTS]: mount with data_dir=$DATA, the settlement deferral
# (DEFER_SETTLE=1), $NOVA_OPTS, OPTS (later options win).
nova_start() {
	local defer='' rc=0 opts
	[ "$DEFER_SETTLE" = 1 ] && defer=$SETTLE_DEFER_OPTS
	opts="data_dir=$DATA${defer:+,$defer}${NOVA_OPTS:+,$NOVA_OPTS}${1:+,$1}"
	[ -z "$NV_PID" ] || die "nova_start: daemon $NV_PID is already running"
	printf '==== %s start -o %s\n' "$(date +%T.%N)" "$opts" >> "$LOG"
	nv_daemon_spawn "$MNT" "$LOG" "$opts"
	B_DAEMONS+=("$NV_PID")
	nv_daemon_await_mount "$MNT" 30 || rc=$?
	case $rc in
	0) ;;
	1)
		nv_daemon_reap
		tail -20 "$LOG" >&2
		die "daemon exited with status $NV_DAEMON_RC before mounting"
		;;
	*) die "daemon did not mount within 30 s" ;;
	esac
}

# nova_stop: clean unmount, wait for the daemon to exit with status 0.
nova_stop() {
	[ -n "$NV_PID" ] || return 0
	nv_daemon_unmount "$MNT" 100 || die "fusermount3 -u $MNT keeps failing"
	nv_daemon_wait_exit 120 || die "daemon $NV_PID did not exit after unmount"
	((NV_DAEMON_RC == 0)) || die "daemon exited with status $NV_DAEMON_RC"
}

nova_restart() {
	nova_stop
	nova_start "$@"
}

xattr() { getfattr --absolute-names --only-values -n "$2" "$1" 2>/dev/null; }

# nova_stats: the root user.nova.stats JSON.
nova_stats() { xattr "$MNT" user.nova.stats; }

# stats_delta BEFORE AFTER KEY...: "eng_key=delta ..." of stats counters.
stats_delta() {
	python3 - "$@" <<'EOF'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(" ".join("eng_%s=%d" % (k, b[k] - a[k]) for k in sys.argv[3:]))
EOF
}

# nova_wait_absorbed FILE...: wait until every stream's frontier reaches its
# seq (the absorb caught up), so background work does not leak into the
# next measurement.
nova_wait_absorbed() {
	local f n=1200 seq fr
	for f in "$@"; do
		while :; do
			seq=$(xattr "$f" user.nova.seq) || die "getfattr $f"
			fr=$(xattr "$f" user.nova.frontier) || die "getfattr $f"
			[ "$seq" = "$fr" ] && break
			((n-- > 0)) || die "absorb did not catch up on $f ($fr of $seq)"
			sleep 0.05
		done
	done
}

# cpu_snap: "wall daemon_ticks busy_ticks total_ticks steal_ticks" now.
cpu_snap() {
	local d=0
	if [ -n "$NV_PID" ] && [ -r "/proc/$NV_PID/stat" ]; then
		d=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$NV_PID/stat")
	fi
	awk -v w="$EPOCHREALTIME" -v d="$d" '/^cpu / {
		t = 0; for (i = 2; i <= 9; i++) t += $i
		printf "%s %s %d %d %d", w, d, t - $5 - $6, t, $9 }' /proc/stat
}

# daemon_cs: context switches of the daemon's threads so far (voluntary +
# involuntary, summed over /proc/PID/task: a thread that exits between
# two snapshots takes its count along, so the delta is a floor).
daemon_cs() {
	[ -n "$NV_PID" ] && [ -d "/proc/$NV_PID/task" ] || { echo 0; return; }
	cat /proc/"$NV_PID"/task/*/status 2>/dev/null |
		awk '/^(non)?voluntary_ctxt_switches:/ { n += $2 } END { print n + 0 }'
}

# cpu_delta SNAP0 SNAP1: "daemon_cores=... sys_busy=... steal=... load1=..."
# between two snapshots: daemon CPU in cores (utime+stime), the machine's
# busy and steal fractions of all its CPUs (other tenants included), and the
# 1-minute load average at the end (a noise indicator).
cpu_delta() {
	awk -v a="$1" -v b="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		dt = y[1] - x[1]; tot = y[4] - x[4]
		if (dt <= 0 || tot <= 0) { print "daemon_cores=nan sys_busy=nan steal=nan"; exit }
		getline la < "/proc/loadavg"; split(la, l, " ")
		printf "daemon_cores=%.2f sys_busy=%.2f steal=%.3f load1=%s",
			(y[2] - x[2]) / hz / dt, (y[3] - x[3]) / tot, (y[5] - x[5]) / tot, l[1] }'
}

# prefix P "k=v ...": "P_k=v ...".
prefix() { sed -E "s/(^| )([a-z])/\1$1_\2/g" <<< "$2"; }

drop_caches() {
	sync
	echo 3 > /proc/sys/vm/drop_caches
}

# settle: let writeback of earlier runs finish before the next timed one.
settle() {
	sync
	sleep "${SETTLE_S:-1}"
}

# ---------------------------------------------------------------- passthrough

# The issue's reference FUSE file system: libfuse's own passthrough_ll,
# built from the example source the libfuse3-dev package installs (the
# package novafs builds against; nothing of it is copied into this tree)
# into the temp dir.  It forwards each request to a directory of the same
# file system, so FUSE's request path is paid and novafs's engine is not.
: "${PT_SRC_C:=/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c}"
: "${PT_OPTS:=}"  # extra -o options for passthrough_ll (default: its own)

# pt_available: whether passthrough_ll can be built here.
pt_available() { [ -r "$PT_SRC_C" ] && command -v cc > /dev/null; }

# pt_build: compile passthrough_ll into $B_TMP (once).
pt_build() {
	[ -x "$B_TMP/passthrough_ll" ] && return 0
	pt_available || die "no $PT_SRC_C (libfuse3-dev's examples) or no cc"
	# The example defines _GNU_SOURCE itself; pkg-config's flags are
	# meant to split.
	# shellcheck disable=SC2046
	cc -O2 -Wno-unused -I"$(dirname "$PT_SRC_C")" -o "$B_TMP/passthrough_ll" \
		"$PT_SRC_C" $(pkg-config --cflags --libs fuse3) -lpthread ||
		die "building passthrough_ll failed"
}

# pt_start SRCDIR: mount passthrough_ll of SRCDIR at $B_TMP/pt (foreground
# process in the background, so its PID is known).
pt_start() {
	local n=300
	pt_build
	PT_MNT=$B_TMP/pt
	mkdir -p "$PT_MNT" "$1"
	[ -z "$PT_PID" ] || die "pt_start: passthrough_ll $PT_PID is already running"
	"$B_TMP/passthrough_ll" -f -o "source=$1${PT_OPTS:+,$PT_OPTS}" "$PT_MNT" \
		>> "$B_TMP/passthrough.log" 2>&1 &
	PT_PID=$!
	until nv_is_mounted "$PT_MNT"; do
		nv_pid_alive "$PT_PID" || die "passthrough_ll exited: $(tail -3 "$B_TMP/passthrough.log")"
		((n-- > 0)) || die "passthrough_ll did not mount within 30 s"
		sleep 0.1
	done
}

# pt_stop: unmount and wait for passthrough_ll to exit.
pt_stop() {
	[ -n "$PT_PID" ] || return 0
	fusermount3 -u "$PT_MNT" 2>/dev/null || fusermount3 -uz "$PT_MNT" 2>/dev/null
	nv_wait_pid_exit "$PT_PID" 30 || kill -9 "$PT_PID" 2>/dev/null
	wait "$PT_PID" 2>/dev/null || true
	PT_PID=
}

# ---------------------------------------------------------------- profiling

# prof_start KIND: attach perf (KIND=perf) or strace (KIND=strace) to the
# daemon; prof_stop writes the report.  Sets PROF_PID.
PROF_PID=
PROF_KIND=
PROF_TAG=
prof_start() {
	PROF_KIND=$1
	PROF_TAG=$2
	mkdir -p "$PROFILE_DIR"
	case $PROF_KIND in
	perf)
		perf record -q -e cpu-clock -g -p "$NV_PID" \
			-o "$PROFILE_DIR/$PROF_TAG.perf.data" > /dev/null 2>&1 &
		;;
	strace)
		strace -c -f -w -p "$NV_PID" -o "$PROFILE_DIR/$PROF_TAG.strace.txt" 2>/dev/null &
		;;
	esac
	PROF_PID=$!
	B_BG+=("$PROF_PID")
	sleep 1 # let it attach to every thread
}

prof_stop() {
	kill -INT "$PROF_PID" 2>/dev/null || true
	nv_wait_pid_exit "$PROF_PID" 60 || kill -9 "$PROF_PID" 2>/dev/null || true
	wait "$PROF_PID" 2>/dev/null || true
	PROF_PID=
	case $PROF_KIND in
	perf)
		perf report -i "$PROFILE_DIR/$PROF_TAG.perf.data" --no-children --stdio \
			--sort comm,dso,symbol -g none --percent-limit 0.7 \
			> "$PROFILE_DIR/$PROF_TAG.perf.txt" 2>/dev/null || true
		perf report -i "$PROFILE_DIR/$PROF_TAG.perf.data" --no-children --stdio \
			--sort symbol -g caller,0.5,callee --percent-limit 3 \
			> "$PROFILE_DIR/$PROF_TAG.perf-callers.txt" 2>/dev/null || true
		rm -f "$PROFILE_DIR/$PROF_TAG.perf.data.old"
		[ "${KEEP_PERF_DATA:-0}" = 1 ] || rm -f "$PROFILE_DIR/$PROF_TAG.perf.data"
		say "profile: $PROFILE_DIR/$PROF_TAG.perf.txt"
		echo "---- perf top (self, cpu-clock) $PROF_TAG ----"
		grep -v '^#' "$PROFILE_DIR/$PROF_TAG.perf.txt" | grep -v '^$' | head -25
		;;
	strace)
		say "syscalls: $PROFILE_DIR/$PROF_TAG.strace.txt"
		echo "---- strace -c -f -w $PROF_TAG ----"
		head -20 "$PROFILE_DIR/$PROF_TAG.strace.txt"
		;;
	esac
}
