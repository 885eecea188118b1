#!/bin/bash
# bench/read_unsettled.sh - cold `cat` of a stream of many small unsettled
# span refs, on SQLite (embedded defaults) and on one etcd member side by
# side (issue 15 / 13: the soak's 7,700-record stream took 13.8 s to read).
#
# Setup per metastore: one star (etcd: store=dir:, meta=etcd+http://..,
# star=s1, a cluster secret, as tests/etcd/stars_lib.sh mounts; SQLite:
# the embedded defaults), settlement held off (bench/lib.sh DEFER_SETTLE),
# N records of 6-9 bytes ("rec I") appended one `echo >>` each (one flight, one slot
# and one span ref each), absorb awaited.  Then REPS times: remount,
# drop_caches, time `cat`, compare the bytes.  Reported per run: seconds,
# and the read's counters from user.nova.stats (ref_lookups: metastore
# requests of the read path; footer/chunk fetches: store GETs).
#
# Environment: NS ("2000 8000"), REPS (3), METAS ("sqlite etcd"), plus the
# common ones of bench/lib.sh.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

: "${NS:=2000 8000}"
: "${REPS:=3}"
: "${METAS:=sqlite etcd}"

bench_init read_unsettled
ED=$B_TMP/etcd
# The etcd member of one size; its PID is in B_BG while it runs, so the
# EXIT trap (bench_cleanup) ends it if the script stops early.
stop_etcd() {
	if [ -d "$ED" ]; then
		"$ROOT_DIR/tests/etcd/etcd.sh" stop "$ED" >/dev/null 2>&1 || true
	fi
	B_BG=()
}
KEYS="cold_reads footer_fetches chunk_fetches prefetches read_cache_hits ref_lookups"

say "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git -C "$ROOT_DIR" rev-parse --short HEAD)"
for meta in $METAS; do
	for n in $NS; do
		opts=
		if [ "$meta" = etcd ]; then
			stop_etcd
			"$ROOT_DIR/tests/etcd/etcd.sh" start "$ED" 1 > "$B_TMP/etcd.env"
			B_BG+=("$(cat "$ED/m1.pid")")
			# shellcheck source=/dev/null
			. "$ED/env.sh"
			mkdir -p "$B_TMP/store-$n"
			head -c 32 /dev/urandom | base64 > "$B_TMP/secret"
			chmod 600 "$B_TMP/secret"
			opts="store=dir:$B_TMP/store-$n,meta=$NOVAFS_ETCD_URL,star=s1,cluster_secret_file=$B_TMP/secret"
		fi
		rm -rf "$DATA" && mkdir "$DATA"
		nova_start "$opts"
		mkdir "$MNT/b"
		for i in $(seq 1 "$n"); do echo "rec $i" >> "$MNT/b/s"; done
		for i in $(seq 1 "$n"); do echo "rec $i"; done > "$B_TMP/expect"
		nova_wait_absorbed "$MNT/b/s"
		for rep in $(seq 1 "$REPS"); do
			nova_restart "$opts"
			drop_caches
			s0=$(nova_stats)
			t0=$(now)
			cat "$MNT/b/s" > "$B_TMP/got"
			t=$(calc "$(now) - $t0")
			s1=$(nova_stats)
			cmp -s "$B_TMP/got" "$B_TMP/expect" || die "$meta n=$n: the bytes read differ"
			# shellcheck disable=SC2086 # KEYS is a list of words
			result meta="$meta" n="$n" bytes="$(stat -c %s "$B_TMP/got")" rep="$rep" seconds="$t" \
				ms_per_record="$(calc "$t * 1000 / $n")" \
				"$(stats_delta "$s0" "$s1" $KEYS)" load1="$(cut -d' ' -f1 /proc/loadavg)"
		done
		nova_stop
		stop_etcd
	done
done
