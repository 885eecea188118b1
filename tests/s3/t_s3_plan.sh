#!/bin/bash
# t_s3_plan.sh - tests/integration/t_plan.sh on a throwaway s3rver
# (tests/s3/s3rver.sh): with NOVAFS_TEST_STORE set the star vends the
# signed form, so every vended window is fetched by curl and by the plan
# consumer through presigned GET URLs that the star's own SigV4 signer
# made (store_presign()), with no credential, and checked byte for byte
# against cat of the stream across a settle and a trim.
#
# Exit: t_plan.sh's status; 77 when s3rver cannot be had here.
# Env: NOVAFS, NOVACTL, TESTLIB, PLAN_READ (as under `make check`;
# defaults: the build tree of this source tree).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
: "${NOVAFS:=$top/src/novafs}" "${NOVACTL:=$top/src/novactl}"
: "${TESTLIB:=$top/tests/integration/lib.sh}"
: "${PLAN_READ:=$top/tests/integration/plan_read}"
export NOVAFS NOVACTL TESTLIB PLAN_READ
. "$here/s3lib.sh"

dir=$(mktemp -d /tmp/novafs-t_s3_plan.XXXXXX)
trap 's3_s3rver_stop "$dir/s3"; rm -rf "$dir"' EXIT
rc=0
s3_s3rver_start "$dir/s3" > /dev/null || rc=$?
if ((rc != 0)); then
	((rc == 77)) && { echo "t_s3_plan: SKIP: s3rver cannot be installed here"; exit 77; }
	echo "t_s3_plan: FAIL: s3rver did not start ($rc)"
	exit 1
fi
echo "t_s3_plan: s3rver at $NOVAFS_S3RVER_ENDPOINT"
NOVAFS_TEST_STORE=$NOVAFS_S3RVER_URL bash "$(dirname "$TESTLIB")/t_plan.sh"
