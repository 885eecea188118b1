# shellcheck shell=bash
# tests/lib/suite.sh - the runner loop of the suites that run integration
# tests under another backend (tests/s3/t_s3_suite.sh: the store on RGW;
# tests/etcd/t_etcd_suite.sh: the metastore on etcd).  Sourced, not run.
#
# What it is for: running a list of tests one after the other, each in the
# background of the calling shell (so the suite's EXIT trap can stop the
# one running: its PID is in NV_SUITE_CUR), with its log in
# $NV_SUITE_TMP/T.log, timing it, turning its exit status into a verdict,
# and printing the tail of a failing test's log and the totals.
# What it is not for: starting the backend, choosing the tests, or what a
# suite checks around each test; those are the suite's hooks:
#
#   suite_before T       (optional) before T runs; non-zero: stop the suite
#                        with exit 99 (the backend broke)
#   suite_verdict T RC LOG  (optional) print the verdict of a test that
#                        exited RC (not 0 or 77): FAIL, or a suite's own
#                        word for a failure that does not count
#   suite_after T VERDICT LOG  (optional) after T; prints one word: the
#                        verdict to keep (e.g. FAIL when a PASS did not
#                        use the backend) and may print notes to stderr
#
# Invariants:
#  1. One test at a time; NV_SUITE_CUR is the PID of the running one, or
#     empty between tests.
#  2. Only PASS and SKIP and FAIL are counted; any other verdict is listed
#     in NV_SUITE_RESULTS and counted in NV_SUITE_OTHER only.
#  3. A test file is looked up in NV_SUITE_DIRS, in order.
#
# Variables: NV_SUITE_NAME (for the output), NV_SUITE_TMP (logs),
# NV_SUITE_DIRS (an array of directories), set by the suite; results in
# NV_SUITE_PASS, NV_SUITE_FAIL, NV_SUITE_SKIP, NV_SUITE_OTHER and
# NV_SUITE_RESULTS ("VERDICT t_x 1.2s" each).

NV_SUITE_CUR=
NV_SUITE_PASS=0
NV_SUITE_FAIL=0
NV_SUITE_SKIP=0
NV_SUITE_OTHER=0
NV_SUITE_RESULTS=()

nv_suite_say() { printf '%s: %s\n' "$NV_SUITE_NAME" "$*"; }

# nv_suite_secs START: seconds since START (an $EPOCHREALTIME), one decimal.
nv_suite_secs() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# nv_suite_run T...: run every test; true when none failed.
nv_suite_run() {
	local t tf d log ts trc secs verdict
	for t in "$@"; do
		tf=
		for d in "${NV_SUITE_DIRS[@]}"; do
			[ -f "$d/$t.sh" ] && { tf=$d/$t.sh; break; }
		done
		if [ -z "$tf" ]; then
			nv_suite_say "no test $t.sh in ${NV_SUITE_DIRS[*]}"
			NV_SUITE_FAIL=$((NV_SUITE_FAIL + 1))
			continue
		fi
		if declare -F suite_before >/dev/null && ! suite_before "$t"; then
			nv_suite_say "ERROR: the backend failed before $t"
			exit 99
		fi
		log=$NV_SUITE_TMP/$t.log
		ts=$EPOCHREALTIME
		bash "$tf" > "$log" 2>&1 &
		NV_SUITE_CUR=$!
		wait "$NV_SUITE_CUR"
		trc=$?
		NV_SUITE_CUR=
		secs=$(nv_suite_secs "$ts")
		case $trc in
		0) verdict=PASS ;;
		77) verdict=SKIP ;;
		*)
			verdict=FAIL
			declare -F suite_verdict >/dev/null && verdict=$(suite_verdict "$t" "$trc" "$log")
			;;
		esac
		declare -F suite_after >/dev/null && verdict=$(suite_after "$t" "$verdict" "$log")
		case $verdict in
		PASS) NV_SUITE_PASS=$((NV_SUITE_PASS + 1)) ;;
		SKIP) NV_SUITE_SKIP=$((NV_SUITE_SKIP + 1)) ;;
		FAIL) NV_SUITE_FAIL=$((NV_SUITE_FAIL + 1)) ;;
		*) NV_SUITE_OTHER=$((NV_SUITE_OTHER + 1)) ;;
		esac
		nv_suite_say "$verdict $t (${secs} s)"
		NV_SUITE_RESULTS+=("$verdict $t ${secs}s")
		if [ "$verdict" != PASS ] && [ "$verdict" != SKIP ]; then
			grep -m 5 'FAIL' "$log" | sed "s/^/    /"
			[ "$verdict" = FAIL ] && { echo "---- $t log tail ----"; tail -n 30 "$log"; echo "----"; }
		fi
	done
	echo "$NV_SUITE_PASS passed, $NV_SUITE_FAIL failed, $NV_SUITE_SKIP skipped"
	((NV_SUITE_FAIL == 0))
}
