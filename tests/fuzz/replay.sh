#!/bin/sh
# replay.sh - `make check`: replay every fuzz target's seed corpus and
# regression inputs through the target built with the normal compiler
# (tests/fuzz/driver.c supplies main(); under --enable-sanitizers with
# ASan and UBSan).  Takes seconds.  Any abort (a violated invariant or a
# sanitizer report) fails the test; the log names the input that ran
# last.  New fuzzing is `make fuzz`, not this.
#
# Environment (set by fuzz.am through AM_TESTS_ENVIRONMENT): FUZZ_TARGETS,
# the target names; srcdir (automake's).  Run from the top build dir.
set -u

: "${srcdir:=.}"
: "${FUZZ_TARGETS:?FUZZ_TARGETS is not set (run through make check)}"
corpus="$srcdir/tests/fuzz/corpus"
regress="$srcdir/tests/fuzz/regressions"
tmp=$(mktemp) || exit 99
trap 'rm -f "$tmp"' EXIT INT TERM

status=0
for t in $FUZZ_TARGETS; do
	prog=./tests/fuzz/fuzz_$t
	if [ ! -x "$prog" ]; then
		echo "FAIL $t: $prog was not built"
		status=1
		continue
	fi
	if [ ! -d "$corpus/$t" ]; then
		echo "FAIL $t: no seed corpus $corpus/$t"
		status=1
		continue
	fi
	if "$prog" "$corpus/$t" >"$tmp" 2>&1; then
		n=$(tail -n 1 "$tmp" | sed 's/.*: \([0-9]*\) inputs.*/\1/')
	else
		rc=$?
		echo "FAIL $t (exit $rc); the last input named below crashed:"
		tail -n 40 "$tmp" | sed 's/^/    /'
		status=1
		continue
	fi
	# regressions/<t>/ exists once the target has had a crasher; each
	# input runs on its own, so every one that still crashes is named.
	r=0
	for f in "$regress/$t"/*; do
		[ -f "$f" ] || continue
		r=$((r + 1))
		if ! "$prog" "$f" >"$tmp" 2>&1; then
			echo "FAIL $t: regression $f still crashes:"
			grep -v '^driver: ' "$tmp" | tail -n 20 | sed 's/^/    /'
			status=1
		fi
	done
	echo "done $t: $n corpus inputs, $r regressions"
done
exit $status
