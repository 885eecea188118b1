#!/bin/bash
# bench/gateway_sse.sh - many SSE consumers of one live stream through
# novagw (proxy mode) while one writer appends on the mount.
#
# Setup: one mount with the star API (-o listen=, cluster secret), one
# novagw in front of it with --fetch-inflight=$FETCH_INFLIGHT and
# --footer-cache-bytes=$FOOTER_CACHE.  CONSUMERS event streams (?offset=0)
# are opened from one python process (bench/sse_consumers.py read); once
# all have their response headers, the writer (sse_consumers.py write)
# appends NREC records of REC_BYTES every INTERVAL_MS on the mount.
# Reported: latency from each append's ack (write() returned) to each
# consumer reading the event that carries the record's last byte, p50/p99/
# max over all (consumer, record) pairs; records missing or seen twice and
# events overlapping or leaving a hole (must all be 0); the Gateway's
# VmHWM (and before the consumers came) and the highest fetch pool use seen on /healthz (sampled every
# 0.5 s) against its budgets; CPU of the Gateway, the daemon and the
# consumers' process over the run; the load.
#
# The consumers are one python process: on this 2-vCPU shared machine
# its own scheduling is part of the latency measured (the writer and the
# consumers use CLOCK_MONOTONIC of the same host).
#
# Environment: CONSUMERS (100), NREC (3000), REC_BYTES (100),
# INTERVAL_MS (10), FETCH_INFLIGHT (67108864), FOOTER_CACHE (33554432),
# MOUNT_FOLLOWERS (1: after each Gateway row, the same N as followers on
# the mount's follow view, one thread each in one python process),
# plus the common ones of bench/lib.sh.  Needs curl.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gwlib.sh"

: "${CONSUMERS:=100}"   # a list: one run each, in order, on the same mount and Gateway
: "${NREC:=3000}"
: "${REC_BYTES:=100}"
: "${INTERVAL_MS:=10}"
: "${FETCH_INFLIGHT:=67108864}"
: "${FOOTER_CACHE:=33554432}"
: "${MOUNT_FOLLOWERS:=1}"
command -v curl > /dev/null || die "curl is needed"
PY=$BENCH_DIR/sse_consumers.py

bench_init gateway_sse
gw_files
star_start
mkdir "$MNT/logs"

# run ROW N: N consumers of a new stream logs/live-ROW-N, one writer;
# prints the RESULT line.  ROW gw: through one Gateway (fresh, so its
# VmHWM is this run's); ROW mount: N followers on the mount's follow view
# (MNT/.follow/logs/...), the baseline.
run() {
	local row=$1 n=$2 st=logs/live-$1-$2 ready=$B_TMP/ready-$1-$2 out=$B_TMP/recv-$1-$2.txt
	local acks=$B_TMP/acks-$1-$2.txt pools=$B_TMP/pools-$1-$2.txt rd poll
	local hwm_idle c0 c1 g0 g1 t0 tw t1 hz hwm rss poolmax rep timeout_s
	: > "$MNT/$st"
	timeout_s=$(calc "$NREC * $INTERVAL_MS / 1000 + 120")
	say "row $row: $n consumers, $NREC x $REC_BYTES B every $INTERVAL_MS ms"
	if [ "$row" = mount ]; then
		python3 "$PY" follow "$MNT/.follow/$st" "$n" "$NREC" "$REC_BYTES" "$out" "$ready" \
			"$timeout_s" &
		run_mount
		return
	fi
	gw_start --fetch-inflight="$FETCH_INFLIGHT" --footer-cache-bytes="$FOOTER_CACHE"
	hwm_idle=$(proc_kib "$GW_PID" VmHWM)
	say "novagw $GW_URL, star 127.0.0.1:$STAR_PORT"
	python3 "$PY" read "$GW_URL/v1/streams/$st/events" "$GW_KEY" "$n" \
		"$NREC" "$REC_BYTES" "$out" "$ready" "$timeout_s" &
	rd=$!
	B_BG+=("$rd")
	for _ in $(seq 600); do
		[ -e "$ready" ] && break
		nv_pid_alive "$rd" || die "the consumers exited before all were answered"
		sleep 0.1
	done
	[ -e "$ready" ] || { gw_gone_check; die "the consumers were not all answered within 60 s"; }
	say "all $n consumers answered: $(curl -s "$GW_URL/healthz")"
	# Pool use while the run goes: the highest fetch_inflight.used seen.
	(while :; do curl -s "$GW_URL/healthz"; echo; sleep 0.5; done) > "$pools" 2>/dev/null &
	poll=$!
	B_BG+=("$poll")
	c0=$(cpu_snap)
	g0=$(proc_ticks "$GW_PID")
	t0=$(now)
	python3 "$PY" write "$MNT/$st" "$NREC" "$REC_BYTES" "$INTERVAL_MS" "$acks"
	tw=$(now)
	wait "$rd" || { gw_gone_check; die "the consumers failed"; }
	t1=$(now)
	g1=$(proc_ticks "$GW_PID")
	c1=$(cpu_snap)
	kill "$poll" 2>/dev/null || true
	wait "$poll" 2>/dev/null || true
	hz=$(getconf CLK_TCK)
	hwm=$(proc_kib "$GW_PID" VmHWM)
	rss=$(proc_kib "$GW_PID" VmRSS)
	poolmax=$(python3 -c '
import json, sys
m = 0
for l in open(sys.argv[1]):
    try: m = max(m, json.loads(l)["fetch_inflight"]["used"])
    except Exception: pass
print(m)' "$pools")
	rep=$(python3 "$PY" report "$acks" "$out" "$n" "$NREC")
	say "report: $rep"
	case $rep in
	*refused=0*) ;;
	*) say "the Gateway's log on the refusals:"; grep -v "^$" "$B_TMP/novagw.log" | tail -8 >&2; say "the star's log:"; tail -5 "$LOG" >&2 ;;
	esac
	result "row=gw consumers=$n records=$NREC rec_bytes=$REC_BYTES interval_ms=$INTERVAL_MS" \
		"write_s=$(calc "$tw - $t0") drain_s=$(calc "$t1 - $tw")" \
		"$(sed 's/consumers=[0-9]* //' <<< "$rep")" \
		"gw_idle_vmhwm_kib=$hwm_idle gw_vmhwm_kib=$hwm gw_vmrss_kib=$rss gw_pool_max_bytes=$poolmax" \
		"fetch_inflight=$FETCH_INFLIGHT footer_cache_bytes=$FOOTER_CACHE" \
		"gw_cores=$(calc "($g1 - $g0) / $hz / ($t1 - $t0)")" \
		"$(cpu_delta "$c0" "$c1")"
	gw_stop
}

# run_mount: the rest of run for ROW mount (its locals are visible here).
run_mount() {
	rd=$!
	B_BG+=("$rd")
	for _ in $(seq 600); do
		[ -e "$ready" ] && break
		nv_pid_alive "$rd" || die "the followers exited before all were open"
		sleep 0.1
	done
	c0=$(cpu_snap)
	t0=$(now)
	python3 "$PY" write "$MNT/$st" "$NREC" "$REC_BYTES" "$INTERVAL_MS" "$acks"
	tw=$(now)
	wait "$rd" || die "the followers failed"
	t1=$(now)
	c1=$(cpu_snap)
	rep=$(python3 "$PY" report "$acks" "$out" "$n" "$NREC")
	say "report: $rep"
	result "row=mount consumers=$n records=$NREC rec_bytes=$REC_BYTES interval_ms=$INTERVAL_MS" \
		"write_s=$(calc "$tw - $t0") drain_s=$(calc "$t1 - $tw")" \
		"$(sed 's/consumers=[0-9]* //' <<< "$rep")" "$(cpu_delta "$c0" "$c1")"
}

for n in $CONSUMERS; do
	run gw "$n"
	[ "$MOUNT_FOLLOWERS" = 1 ] && run mount "$n"
done
nova_stop
