#!/bin/bash
# bench/metastore.sh - the metastore side by side: SQLite, one etcd member,
# three etcd members (bench/kvbench.c on each; etcd from tests/etcd/etcd.sh,
# on 127.0.0.1, --unsafe-no-fsync as in the tests).
#
# Environment: REFS (100000).  Writes bench/results/metastore-DATE.txt with
# the machine, the commit and one block per backend.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
: "${REFS:=100000}"
out=$top/bench/results/metastore-$(date -u +%Y%m%d-%H%M).txt
work=$(mktemp -d "${TMPDIR:-/tmp}/novafs-bench-meta-XXXXXX")
trap 'for c in one three; do [ -d "$work/$c" ] && "$top/tests/etcd/etcd.sh" stop "$work/$c"; done; rm -rf "$work"' EXIT
{
	echo "# bench/metastore.sh  $(date -u +%FT%TZ)  commit $(git -C "$top" rev-parse --short HEAD)"
	echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {print int($2/1024) " MiB"}' /proc/meminfo), $(uname -r); shared with other jobs (noisy)"
	echo "# etcd $(etcd --version 2>/dev/null | head -1 | awk '{print $3}') on 127.0.0.1, --unsafe-no-fsync; SQLite WAL synchronous=FULL on $(df -T "${TMPDIR:-/tmp}" | awk 'NR==2 {print $2}')"
	echo "== sqlite"
	"$top/bench/kvbench" "$work/meta.db" "$REFS" 2>/dev/null
	for n in 1 3; do
		c=$([ "$n" = 1 ] && echo one || echo three)
		"$top/tests/etcd/etcd.sh" start "$work/$c" "$n" >/dev/null
		. "$work/$c/env.sh"
		echo "== etcd $n member(s)"
		"$top/bench/kvbench" "$NOVAFS_ETCD_URL" "$REFS" 2>/dev/null
		"$top/tests/etcd/etcd.sh" stop "$work/$c"
	done
} | tee "$out"
echo "wrote $out" >&2
