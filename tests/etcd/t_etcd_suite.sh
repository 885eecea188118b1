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
say() { printf '%s: %s\n' "$name" "$*"; }

[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || { say "SKIP: needs root and /dev/fuse"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/novafs-etcdsuite.XXXXXX")
cur=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -n "$cur" ] && kill -TERM "$cur" 2>/dev/null && wait "$cur" 2>/dev/null
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
pass=0 failn=0 skip=0
for t in "${tests[@]}"; do
	tf=$idir/$t.sh
	[ -f "$tf" ] || tf=$here/$t.sh
	[ -f "$tf" ] || { say "no test $t.sh"; failn=$((failn + 1)); continue; }
	log=$tmp/$t.log
	before=$(meta_keys)
	ts=$EPOCHREALTIME
	bash "$tf" > "$log" 2>&1 &
	cur=$!
	wait "$cur"
	trc=$?
	cur=
	secs=$(awk -v a="$ts" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
	case $trc in
	0) verdict=PASS; pass=$((pass + 1)) ;;
	77) verdict=SKIP; skip=$((skip + 1)) ;;
	*) verdict=FAIL; failn=$((failn + 1)) ;;
	esac
	say "$verdict $t (${secs} s)"
	# The test must have used etcd: its rows are under the URL's prefix.
	if [ "$verdict" = PASS ] && [ "$(meta_keys)" -le "$before" ]; then
		say "FAIL $t: no new keys under the etcd prefix: the test did not use meta=etcd://"
		failn=$((failn + 1))
	fi
	[ "$verdict" = FAIL ] && { echo "---- $t log tail ----"; tail -n 30 "$log"; echo "----"; }
done
echo "$pass passed, $failn failed, $skip skipped"
((failn == 0))
