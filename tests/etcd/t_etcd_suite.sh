#!/bin/bash
# t_etcd_suite.sh - integration tests with the metastore on real etcd:
# starts a throwaway cluster (tests/etcd/etcd.sh, 127.0.0.1, free ports)
# and runs integration tests with NOVAFS_TEST_META set, so every mount and
# fsck of tests/integration/lib.sh uses `meta=etcd://...` (one key prefix
# per data dir) on the directory store (or, with NOVAFS_TEST_STORE also
# set, on that store: make check-etcd-full runs it on RGW too).
#
# Default: t_basic t_ranges t_remount t_settle t_crash_basic on one
# member.  NOVAFS_ETCD_MEMBERS=3: a three-member cluster.
# NOVAFS_ETCD_TESTS="t_a t_b": exactly those.  NOVAFS_ETCD_RGW=1: the
# same metastore under tests/s3/t_s3_suite.sh (store on a throwaway Ceph
# RGW; t_basic t_ranges t_remount t_crash_basic, t_settle looking into
# the directory store; 77 when RGW cannot be had).
#
# Exit: 0 all passed (or skipped), 1 a test failed, 77 no etcd here.
# Env: NOVAFS, NOVACTL, TESTLIB (as under `make check`), NV_KEEP=1.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
: "${NOVAFS:=$top/src/novafs}" "${NOVACTL:=$top/src/novactl}"
: "${TESTLIB:=$top/tests/integration/lib.sh}"
export NOVAFS NOVACTL TESTLIB
idir=$(dirname "$TESTLIB")
name=t_etcd_suite
# shellcheck source=tests/lib/suite.sh
. "$top/tests/lib/suite.sh"
say() { printf '%s: %s\n' "$name" "$*"; }

[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || { say "SKIP: needs root and /dev/fuse"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/novafs-etcdsuite.XXXXXX")
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -n "$NV_SUITE_CUR" ] && kill -TERM "$NV_SUITE_CUR" 2>/dev/null && wait "$NV_SUITE_CUR" 2>/dev/null
	[ -d "$tmp/etcd" ] && "$here/etcd.sh" stop "$tmp/etcd"
	if [ -n "${NV_KEEP:-}" ]; then say "kept $tmp"; else rm -rf "$tmp"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

members=${NOVAFS_ETCD_MEMBERS:-1}
"$here/etcd.sh" start "$tmp/etcd" "$members" > "$tmp/etcd.env"
rc=$?
[ "$rc" = 0 ] || { say "SKIP: etcd cannot be installed or started (status $rc)"; exit 77; }
. "$tmp/etcd/env.sh"
export NOVAFS_TEST_META=$NOVAFS_ETCD_URL
say "etcd: $members member(s) at $NOVAFS_ETCD_ENDPOINTS"
if [ "${NOVAFS_ETCD_RGW:-0}" != 0 ]; then
	NOVAFS_S3_TESTS=${NOVAFS_ETCD_TESTS:-t_basic t_ranges t_remount t_crash_basic} \
		bash "$top/tests/s3/t_s3_suite.sh"
	exit $?
fi

if [ -n "${NOVAFS_ETCD_TESTS:-}" ]; then
	read -ra tests <<< "$NOVAFS_ETCD_TESTS"
else
	tests=(t_basic t_ranges t_remount t_settle t_crash_basic)
fi
# Keys under the cluster's prefix now (every data dir is below it).
meta_keys() {
	$NOVAFS_ETCD_CTL get --prefix "${NOVAFS_ETCD_URL##*/}/" --keys-only --limit 1 -w json 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("count", 0))'
}
# The runner's hooks (tests/lib/suite.sh): the test must have used etcd,
# i.e. left new rows under the URL's prefix.
keys_before=0
suite_before() { keys_before=$(meta_keys); }
suite_after() {
	if [ "$2" = PASS ] && [ "$(meta_keys)" -le "$keys_before" ]; then
		nv_suite_say "FAIL $1: no new keys under the etcd prefix: the test did not use meta=etcd://" >&2
		echo FAIL
	else
		echo "$2"
	fi
}
NV_SUITE_NAME=$name NV_SUITE_TMP=$tmp NV_SUITE_DIRS=("$idir" "$here")
nv_suite_run "${tests[@]}"
