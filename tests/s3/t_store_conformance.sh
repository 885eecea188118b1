#!/bin/sh
# t_store_conformance.sh - the store conformance suite against real S3
# servers: starts s3rver and a throwaway Ceph RGW (both on 127.0.0.1,
# under one mktemp -d), runs tests/unit/test_store_conformance against
# the directory backend, s3rver and RGW, and stops both by PID.
#
# A server that cannot be installed here (no root, no registry, no node)
# is skipped; with neither the test is skipped (77).  A server that is
# installed but does not start is a failure.
#
# Env: NOVAFS_CONFORMANCE (the test binary; default
# ./tests/unit/test_store_conformance below the current directory, the
# build tree under `make check`), NOVAFS_S3RVER_CACHE (see s3rver.sh).
set -u

here=$(cd "$(dirname "$0")" && pwd)
bin=${NOVAFS_CONFORMANCE:-$PWD/tests/unit/test_store_conformance}
if [ ! -x "$bin" ]; then
	echo "t_store_conformance: no test binary $bin (build it first)" >&2
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/novafs-s3conf.XXXXXX")

cleanup() {
	sh "$here/rgw.sh" stop "$tmp/rgw" >/dev/null 2>&1 || true
	sh "$here/s3rver.sh" stop "$tmp/s3rver" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

servers=0
start() { # start NAME SCRIPT
	out=$(sh "$here/$2" start "$tmp/$1")
	rc=$?
	case $rc in
	0) eval "$out"; servers=$((servers + 1)); echo "t_store_conformance: $1 up" ;;
	77) echo "t_store_conformance: $1 cannot be installed here: skipping it" ;;
	*) echo "t_store_conformance: $1 failed to start (exit $rc)" >&2; exit 1 ;;
	esac
}
start s3rver s3rver.sh
start rgw rgw.sh
if [ "$servers" = 0 ]; then
	echo "t_store_conformance: no S3 server available: skipped"
	exit 77
fi
"$bin"
