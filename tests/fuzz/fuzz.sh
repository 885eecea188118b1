#!/bin/sh
# fuzz.sh - `make fuzz`: build every fuzz target with clang and libFuzzer
# (plus ASan and UBSan) and run each for FUZZ_SECONDS.
#
# The library sources are compiled here with coverage instrumentation
# into tests/fuzz/bin/libnovafuzz.a (not the gcc-built libnova*.a, which
# carry no coverage), then each target links against it.  Each run reads
# the seed corpus and the regressions, writes what it finds new into
# tests/fuzz/bin/work/<t>/corpus (scratch: copy an entry worth keeping
# into tests/fuzz/corpus/<t>/ by hand), and writes crashers into
# tests/fuzz/bin/work/<t>/artifacts/.  A summary table goes to stdout and
# to tests/fuzz/bin/summary.txt.  Exit 1 when any target crashed, leaked,
# timed out or ran out of memory (all targets still run).
#
# Environment (fuzz.am passes all of it): CLANG, AR, RANLIB, srcdir,
# FUZZ_CPPFLAGS, FUZZ_LIBS, FUZZ_SOURCES (library .c/.h files, relative
# to srcdir), FUZZ_TARGETS, FUZZ_SECONDS, FUZZ_JOBS (parallel compiles),
# FUZZ_FLAGS (extra libFuzzer flags, e.g. "-fork=2 -ignore_crashes=1").
# Run from the top build dir.
set -eu

bin=tests/fuzz/bin
cflags="-std=gnu11 -g -O1 -pthread -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
cov="-fsanitize=fuzzer-no-link,address,undefined"
link="-fsanitize=fuzzer,address,undefined -pthread"
: "${FUZZ_SECONDS:=60}" "${FUZZ_JOBS:=2}" "${FUZZ_FLAGS:=}"

# One library source, for the parallel compile below.
if [ "${1:-}" = --compile ]; then
	# shellcheck disable=SC2086 # flag lists
	exec $CLANG $cflags $cov $FUZZ_CPPFLAGS -c "$srcdir/$2" \
		-o "$bin/obj/$(echo "$2" | tr / _ | sed 's/\.c$/.o/')"
fi

mkdir -p "$bin/obj" "$bin/work"
rm -f "$bin"/obj/*.o

# 1. The library, instrumented.
echo "fuzz: compiling the library with $CLANG"
for src in $FUZZ_SOURCES; do
	case $src in *.c) echo "$src" ;; esac
done | xargs -P "$FUZZ_JOBS" -n 1 sh "$0" --compile
rm -f "$bin/libnovafuzz.a"
$AR cr "$bin/libnovafuzz.a" "$bin"/obj/*.o
$RANLIB "$bin/libnovafuzz.a"

# 2. The targets.
$CLANG $cflags $cov $FUZZ_CPPFLAGS -c "$srcdir/tests/fuzz/fuzz_common.c" -o "$bin/fuzz_common.o"
for t in $FUZZ_TARGETS; do
	echo "fuzz: building fuzz_$t"
	$CLANG $cflags $cov $FUZZ_CPPFLAGS -c "$srcdir/tests/fuzz/fuzz_$t.c" -o "$bin/fuzz_$t.o"
	$CLANG $link -o "$bin/fuzz_$t" "$bin/fuzz_$t.o" "$bin/fuzz_common.o" \
		"$bin/libnovafuzz.a" $FUZZ_LIBS
done

# 3. The runs.
summary="$bin/summary.txt"
printf '%-16s %12s %10s %8s %8s  %s\n' target execs exec/s new crashes status >"$summary"
failed=""
for t in $FUZZ_TARGETS; do
	work="$bin/work/$t"
	# Artifacts of an earlier run are dropped: keep a crasher by copying
	# it into tests/fuzz/regressions/<t>/.
	rm -rf "$work/artifacts"
	mkdir -p "$work/corpus" "$work/artifacts"
	set -- "$work/corpus" "$srcdir/tests/fuzz/corpus/$t"
	[ -d "$srcdir/tests/fuzz/regressions/$t" ] && set -- "$@" "$srcdir/tests/fuzz/regressions/$t"
	dict=""
	[ -f "$srcdir/tests/fuzz/dict/$t.dict" ] && dict="-dict=$srcdir/tests/fuzz/dict/$t.dict"
	before=$(ls "$work/corpus" | wc -l)
	echo "fuzz: running fuzz_$t for ${FUZZ_SECONDS}s (log: $work/log)"
	rc=0
	# shellcheck disable=SC2086 # $dict and $FUZZ_FLAGS are word lists
	"$bin/fuzz_$t" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$work/artifacts/" $dict $FUZZ_FLAGS \
		"$@" >"$work/log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
	speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -n 1)
	new=$(( $(ls "$work/corpus" | wc -l) - before ))
	crashes=$(ls "$work/artifacts" | wc -l)
	status=ok
	if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
		status="FAILED (exit $rc)"
		failed="$failed $t"
	fi
	printf '%-16s %12s %10s %8s %8s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "$new" \
		"$crashes" "$status" >>"$summary"
	if [ "$status" != ok ]; then
		grep -E '^(==[0-9]+==ERROR|SUMMARY|.*fuzz invariant violated|.*runtime error)' \
			"$work/log" | head -n 5 | sed 's/^/    /'
		ls "$work/artifacts" | sed "s|^|    artifact: $work/artifacts/|"
	fi
done
cat "$summary"
if [ -n "$failed" ]; then
	echo "fuzz: crashes in:$failed (reproduce: $bin/fuzz_<target> <artifact>)"
	exit 1
fi
