#!/bin/bash
# t_s3_suite.sh - the integration tests against real object storage: starts
# a throwaway Ceph RGW (tests/s3/rgw.sh via s3lib.sh, on 127.0.0.1) and runs
# integration tests with NOVAFS_TEST_STORE set, so every mount and fsck of
# tests/integration/lib.sh uses `store=s3://...` (one key prefix per data
# dir) while the metastore stays in the test's data dir.  Each test gets
# its own bucket, purged after it, so the RGW's RAM-backed OSD stays small.
#
# Default: a representative subset: plain appends and reads, ranges,
# concurrency, remounts, follow, crashes with recovery and fsck, then
# tests/s3/t_s3_settle.sh (settlement and reclamation checked through S3,
# and a plan's presigned URL refused by RGW with its signature altered or
# once expired).
# NOVAFS_S3_FULL=1: every tests/integration/t_*.sh, in the Makefile's
# order, then t_s3_settle.  NOVAFS_S3_TESTS="t_a t_b": exactly those.
#
# Tests that look into the directory store itself ($DATA/objects:
# t_settle, t_settle_reader, t_settle_crash, t_trim) or fill the data
# directory to make the store fail (t_local_faults) cannot do that with an
# S3 store; under NOVAFS_S3_FULL=1 they are run anyway and reported as
# DIRSTORE when their log shows such a check failing, which does not fail
# the suite (they run every engine-level check before that one: settled
# == seq, no span ref left).  Every other failure does.
#
# Exit: 0 all passed (or skipped), 1 a test failed, 77 no RGW here (ceph
# cannot be installed, or the throwaway cluster does not start).
# Env: NOVAFS, NOVACTL, TESTLIB (as under `make check`; defaults: the build
# tree of this source tree), NV_KEEP=1 keeps the logs.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
: "${NOVAFS:=$top/src/novafs}" "${NOVACTL:=$top/src/novactl}"
: "${TESTLIB:=$top/tests/integration/lib.sh}"
export NOVAFS NOVACTL TESTLIB
idir=$(dirname "$TESTLIB")
. "$here/s3lib.sh"
# shellcheck source=tests/lib/suite.sh
. "$top/tests/lib/suite.sh"

name=t_s3_suite
say() { printf '%s: %s\n' "$name" "$*"; }

[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || { say "SKIP: needs root and /dev/fuse"; exit 77; }
[ -x "$NOVAFS" ] || { say "ERROR: no daemon $NOVAFS"; exit 99; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/novafs-s3suite.XXXXXX")
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -n "$NV_SUITE_CUR" ] && kill -TERM "$NV_SUITE_CUR" 2>/dev/null && wait "$NV_SUITE_CUR" 2>/dev/null
	s3_rgw_stop "$tmp/rgw"
	if [ -n "${NV_KEEP:-}" ]; then say "kept $tmp"; else rm -rf "$tmp"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t0=$EPOCHREALTIME
s3_rgw_start "$tmp/rgw"
rc=$?
case $rc in
0) say "RGW up at $NOVAFS_RGW_ENDPOINT in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s" ;;
77) say "SKIP: Ceph RGW cannot be installed here"; exit 77 ;;
*) say "SKIP: RGW is installed but did not start (status $rc; see tests/s3/rgw.sh)"; exit 77 ;;
esac

if [ -n "${NOVAFS_S3_TESTS:-}" ]; then
	read -ra tests <<< "$NOVAFS_S3_TESTS"
elif [ "${NOVAFS_S3_FULL:-0}" != 0 ]; then
	# The Makefile's order; anything else in the directory after it.
	mapfile -t tests < <( {
		sed -n 's|^[[:space:]]*tests/integration/\(t_[a-z0-9_]*\)\.sh.*|\1|p' "$top/Makefile.am" 2>/dev/null
		for f in "$idir"/t_*.sh; do basename "$f" .sh; done
	} | awk '!seen[$0]++')
else
	tests=(t_basic t_ranges t_concurrent t_remount t_follow t_crash_basic)
fi
# Settlement on S3 itself (t_settle's store checks done through S3).
[ -n "${NOVAFS_S3_TESTS:-}" ] || tests+=(t_s3_settle)

# Tests that look into the directory store, and what their log says when
# that look is what failed.
DIRSTORE_RE='listed in the layout but missing from the store|named by a layout are missing|is not in the store|appends never failed on a full data directory'
declare -A DIRSTORE_OK=([t_settle]=1 [t_settle_reader]=1 [t_settle_crash]=1 [t_trim]=1 [t_local_faults]=1)
# The runner's hooks (tests/lib/suite.sh): a bucket per test, purged
# after it; a failure only at a look into the directory store is DIRSTORE.
n=0
suite_before() {
	local bucket
	n=$((n + 1))
	bucket=nvs-$n-$(printf '%s' "$1" | tr '_' '-')
	s3_rgw_bucket_create "$bucket" || return 1
	export NOVAFS_TEST_STORE
	NOVAFS_TEST_STORE=$(s3_rgw_url "$bucket")
	cur_bucket=$bucket
}
suite_verdict() {
	if [ -n "${DIRSTORE_OK[$1]:-}" ] && grep -Eq "$DIRSTORE_RE" "$3"; then echo DIRSTORE; else echo FAIL; fi
}
suite_after() {
	say "$1: rgw requests so far $(s3_rgw_requests "$tmp/rgw")" >&2
	s3_rgw_bucket_purge "$tmp/rgw" "$cur_bucket" >&2 || say "warning: could not purge bucket $cur_bucket" >&2
	echo "$2"
}
NV_SUITE_NAME=$name NV_SUITE_TMP=$tmp NV_SUITE_DIRS=("$idir" "$here")
nv_suite_run "${tests[@]}"
rc=$?
say "summary:"
printf '    %s\n' "${NV_SUITE_RESULTS[@]}"
say "total $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
((NV_SUITE_OTHER == 0)) || say "$NV_SUITE_OTHER test(s) failed only at a look into the directory store (DIRSTORE, not counted)"
exit "$rc"
