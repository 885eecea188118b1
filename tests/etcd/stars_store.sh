#!/bin/bash
# stars_store.sh - the object store several stars of one test share, for
# tests/etcd/t_partition.sh and tests/etcd/t_soak_stars.sh (sourced).
#
#   stars_store_start DIR   sets STARS_STORE, the store= value every star
#                           of the test gets: a directory store DIR/shared,
#                           or with NOVAFS_STARS_RGW=1 a throwaway Ceph RGW
#                           under DIR/rgw (tests/s3/s3lib.sh
#                           s3_rgw_start; exit 77 when it cannot be had)
#                           with a prefix of its own
#   stars_store_stop        stops that RGW (by PID, tests/s3/rgw.sh stop)
#
# Not for: one star's store (tests/integration/lib.sh nv_store_opt).
STARS_RGW_DIR=

stars_store_start() {
	local rc=0
	if [ "${NOVAFS_STARS_RGW:-0}" = 0 ]; then
		mkdir -p "$1/shared"
		STARS_STORE="dir:$1/shared"
		return 0
	fi
	# shellcheck source=tests/s3/s3lib.sh
	. "$(dirname "${BASH_SOURCE[0]}")/../s3/s3lib.sh"
	STARS_RGW_DIR=$1/rgw
	s3_rgw_start "$STARS_RGW_DIR" > "$1/rgw.out" 2>&1 || rc=$?
	case $rc in
	0) ;;
	77) STARS_RGW_DIR=; nv_skip "Ceph RGW cannot be installed" ;;
	*) STARS_RGW_DIR=; fail "the RGW did not start (status $rc): $(tail -3 "$1/rgw.out")" ;;
	esac
	STARS_STORE="$NOVAFS_RGW_URL&prefix=novafs-stars-$$"
	say "store: RGW at $NOVAFS_RGW_ENDPOINT"
}

stars_store_stop() {
	[ -n "$STARS_RGW_DIR" ] || return 0
	s3_rgw_stop "$STARS_RGW_DIR"
	STARS_RGW_DIR=
}
