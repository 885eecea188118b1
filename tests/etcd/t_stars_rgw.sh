#!/bin/bash
# t_stars_rgw.sh - many stars on one etcd member and one Ceph RGW in
# `make check` (issue 15: "several mounts ... sharing one etcd cluster
# and one RGW"): the short form of the soak (tests/etcd/t_soak_stars.sh)
# with NOVAFS_STARS_RGW=1, six rounds taking kill -9, SIGSTOP past the
# lease and a graceful restart in turn, each twice, to random stars,
# while one writer per star appends to one stream; then the check: the
# three mounts read identical bytes and every acked record is there
# exactly once, in its writer's order.  77 (skipped) without Ceph or
# etcd.  The long forms: make check-stars-rgw, make check-stars-soak.
set -euo pipefail
export NOVAFS_STARS_RGW=1 NV_SOAK_CYCLE=1
export NV_ROUNDS=${NV_ROUNDS:-6}
exec "$(dirname "${BASH_SOURCE[0]}")/t_soak_stars.sh" "$@"
