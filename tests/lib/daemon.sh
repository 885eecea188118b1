# shellcheck shell=bash
# tests/lib/daemon.sh - start, await and stop the novafs daemon; process
# and mount checks.  Sourced, not run: the one copy both
# tests/integration/lib.sh and bench/lib.sh use.
#
# What it is for: starting the daemon in the background of the calling
# shell (nv_daemon_spawn), awaiting its mount (nv_daemon_await_mount),
# collecting its exit status (nv_daemon_reap), a clean close
# (nv_daemon_unmount, nv_daemon_wait_exit), and the checks they are built
# on (nv_pid_alive, nv_wait_pid_exit, nv_is_mounted).
# What it is not for: policy.  Which options, what goes to the log, and how
# a failure ends the script (the tests' fail with the daemon log tail, the
# benchmarks' die) stay in the library that sources this file.
#
# Invariants:
#  1. Nothing here exits the shell: every function returns a status, and
#     the text of a failure is left in NV_DAEMON_ERR for the caller.
#  2. Processes are named by PID, never by name.
#  3. Every wait is a bounded polling loop.
#  4. The daemon runs in the background of the sourcing shell (call the
#     functions from it, not from a subshell), so `wait` can reap it.
#
# Variables: NOVAFS (the daemon binary, set by the sourcing library);
# NV_PID (the daemon these functions act on; empty when none);
# NV_DAEMON_RC (the exit status nv_daemon_reap collected); NV_DAEMON_ERR.

NV_PID=${NV_PID:-}
NV_DAEMON_RC=
NV_DAEMON_ERR=

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

# nv_is_mounted DIR: DIR is a mount point in /proc/self/mountinfo (also
# true for a dead FUSE mount, unlike `mountpoint -q`).  False for "".
nv_is_mounted() {
	[ -n "$1" ] && awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# nv_daemon_spawn MNT LOG OPTS: start "$NOVAFS" -f -o OPTS MNT in the
# background, stdout and stderr appended to LOG; NV_PID gets its PID.
# Does not wait for the mount.
nv_daemon_spawn() {
	"$NOVAFS" -f -o "$3" "$1" >> "$2" 2>&1 &
	NV_PID=$!
}

# nv_daemon_await_mount MNT SECONDS: poll (every 0.05 s) until MNT answers
# as a mount point.  0 mounted; 1 the daemon NV_PID exited first (not
# reaped: call nv_daemon_reap); 2 neither within SECONDS.
nv_daemon_await_mount() {
	local n=$(( ${2:-30} * 20 ))
	until mountpoint -q "$1" 2>/dev/null; do
		nv_pid_alive "$NV_PID" || return 1
		if ((n-- <= 0)); then
			NV_DAEMON_ERR="daemon $NV_PID did not mount $1 within ${2:-30}s"
			return 2
		fi
		sleep 0.05
	done
	return 0
}

# nv_daemon_reap: collect the exit status of the daemon NV_PID (which has
# ended or is about to) in NV_DAEMON_RC and forget it (NV_PID empty).
nv_daemon_reap() {
	NV_DAEMON_RC=0
	# stderr off: bash would print a job notice for a killed daemon.
	{ wait "$NV_PID" || NV_DAEMON_RC=$?; } 2>/dev/null
	NV_PID=
}

# nv_daemon_unmount MNT [TRIES]: fusermount3 -u MNT, retried every 0.1 s
# (EBUSY while a helper still has a file open) up to TRIES (100) more
# times.  0, or 1 with fusermount3's last message in NV_DAEMON_ERR.
nv_daemon_unmount() {
	local n=${2:-100} err
	until err=$(fusermount3 -u "$1" 2>&1); do
		if ((n-- <= 0)); then
			NV_DAEMON_ERR="fusermount3 -u $1 failed: $err"
			return 1
		fi
		sleep 0.1
	done
	return 0
}

# nv_daemon_wait_exit SECONDS: after an unmount, wait for the daemon
# NV_PID to exit and reap it (NV_DAEMON_RC).  1 when it still runs after
# SECONDS (then NV_PID is kept: the caller decides whether to kill it).
nv_daemon_wait_exit() {
	if ! nv_wait_pid_exit "$NV_PID" "$1"; then
		NV_DAEMON_ERR="daemon $NV_PID did not exit within ${1}s of a clean unmount"
		return 1
	fi
	nv_daemon_reap
}
