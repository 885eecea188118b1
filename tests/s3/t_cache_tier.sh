#!/bin/bash
# t_cache_tier: cold reads through the object cache tier (DESIGN.md 8,
# engine/store/s3/cache.c).  One s3rver (the standard bucket) and three
# nginx caching proxies in front of it (tests/cache/nginx.sh, 64 KiB
# slices); the daemon mounts with
#   store=URL&cache=P0+P1+P2&cache_auth_file=TOKEN&cache_slice_kib=64
# Checked:
#  - the proxies refuse a request without the token (403) and with a wrong
#    one, and serve nothing to it;
#  - a cold read (remount, page cache dropped) of a 6 MiB stream returns
#    every byte, and its slices were fetched through all three proxies
#    (MISS lines in each proxy's log), none straight from the bucket
#    (the daemon's closing count: 0 pieces straight to the bucket);
#  - a second cold read is served from the proxies' caches: at most half
#    of the first read's fetches again (a page whose owner was at
#    capacity, ceil(1.25 * average) requests in flight, went to the next
#    proxy on the ring; with the kernel's readahead in flight that is
#    10-30% of the pages here);
#  - a proxy killed with SIGKILL in the middle of a slow cold read: the
#    read returns every byte (that proxy's pages go straight to the
#    bucket; the daemon logs it), and so does the next cold read;
#  - rm of the stream: once the auditor has deleted its objects, every
#    live proxy saw the purge (BYPASS lines answered 404) and none keeps
#    the cached bytes (no cache file left larger than 8 KiB: each slice's
#    entry is now the bucket's 404);
#  - the Gateway's signed fetches (novagw --serve-plan --cache=..., the
#    star with plan_vending=signed): a settled 2.4 MiB stream replayed
#    page by page is the stream, its slices fetched through all three
#    proxies (MISS lines); a second replay is the stream again and served
#    from the proxies (HIT lines at least the first's fetches, at most
#    half of them fetched again); proxy 2 killed with SIGKILL in the
#    middle of a slow replay: the replay is whole and novagw logs the
#    proxy's failure.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "${TESTLIB:-$(dirname "$0")/../integration/lib.sh}"
. "$(dirname "$0")/s3lib.sh"
unset NOVAFS_TEST_STORE
: "${NV_TIMEOUT:=180}"
nv_init
command -v node >/dev/null && command -v npm >/dev/null || nv_skip "node and npm are needed for s3rver"
command -v nginx >/dev/null || nv_skip "nginx is needed for the cache tier"
NGINX_SH=$(cd "$(dirname "$0")/../cache" && pwd)/nginx.sh

# ---------------------------------------------------------------- servers
rc=0
s3_s3rver_start "$NV_TMP/s3" > /dev/null || rc=$?
((rc == 0)) || { ((rc == 77)) && nv_skip "s3rver cannot be installed here"; fail "s3rver did not start ($rc)"; }
nv_bg "$(cat "$NV_TMP/s3/s3rver.pid")"
TOK=$NV_TMP/cache.token
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$TOK"
chmod 600 "$TOK"
PX=$NV_TMP/px
eval "$(sh "$NGINX_SH" start "$PX" 3 "$NOVAFS_S3RVER_ENDPOINT" "$TOK" 64)" ||
	fail "the cache proxies did not start"
for i in 0 1 2; do nv_bg "$(cat "$PX/p$i/nginx.pid")"; done
stop_proxies() { sh "$NGINX_SH" stop "$PX" 2>/dev/null || true; }
IFS=+ read -r -a PURL <<< "$NOVAFS_CACHE_URLS"
say "s3rver at $NOVAFS_S3RVER_ENDPOINT, proxies ${PURL[*]}"

# hits I WHAT: lines of proxy I's log with cache=WHAT.
hits() { grep -c "cache=$2 " "$PX/p$1/access.log" 2>/dev/null || true; }
# marks: the line count of every proxy's log, to look at what came after.
declare -a MARK
marks() { for i in 0 1 2; do MARK[i]=$(wc -l < "$PX/p$i/access.log"); done; }
# since I WHAT: lines with cache=WHAT in proxy I's log after its mark.
since() { tail -n +"$((MARK[$1] + 1))" "$PX/p$1/access.log" | grep -c "cache=$2 " || true; }

# -------------------------------------------------------- the tier's door
code=$(curl -s -o /dev/null -w '%{http_code}' "${PURL[0]}/novafs-test/")
[ "$code" = 403 ] || fail "a request without the token answered $code, not 403"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Nova-Cache-Auth: wrong-token-0123456789" \
	"${PURL[1]}/novafs-test/")
[ "$code" = 403 ] || fail "a request with a wrong token answered $code, not 403"

# ------------------------------------------------------------- the mount
OPTS="store=$NOVAFS_S3RVER_URL&cache=$NOVAFS_CACHE_URLS&cache_auth_file=$TOK&cache_slice_kib=64"
OPTS="$OPTS,read_grace_s=1,audit_interval_ms=200,kernel_readahead_kib=128,prefetch_threads=0"
nv_start "$OPTS"
mkdir "$MNT/b"
head -c $((6 << 20)) /dev/urandom > "$NV_TMP/src"
dd if="$NV_TMP/src" of="$MNT/b/s" bs=1M status=none
nv_expect_eq "$(nv_size "$MNT/b/s")" $((6 << 20)) "size after the append"

# cold_read: remount, drop caches, read the stream, compare with src.
cold_read() {
	nv_stop
	marks
	nv_start
	nv_drop_caches
	cmp "$MNT/b/s" "$NV_TMP/src" || fail "a cold read through the tier differs from what was written ($1)"
}

cold_read "first"
first=0
for i in 0 1 2; do
	m=$(since "$i" MISS)
	((m > 0)) || fail "proxy $i fetched nothing on the first cold read (ring spread)"
	first=$((first + m))
	say "first cold read: proxy $i fetched $m slices"
done
cold_read "second"
again=0 hit=0
for i in 0 1 2; do
	m=$(since "$i" MISS); h=$(since "$i" HIT)
	again=$((again + m)); hit=$((hit + h))
	say "second cold read: proxy $i served $h hits, fetched $m slices"
done
# A page whose owner was at capacity went to the next proxy on the ring
# (bounded loads): such a page may be fetched once more on another proxy.
((again * 2 <= first)) || fail "the second cold read fetched $again slices from the bucket again (first: $first)"
((hit > 0)) || fail "the second cold read was served no hit"
grep -q "cache tier: [0-9]* pieces through 3 proxies, 0 straight to the bucket" "$LOG" ||
	fail "the daemon's closing count says some pieces went straight to the bucket"

# ------------------------------------------------------ a proxy goes away
# Mid-read (the mount has 128 KiB of kernel readahead and no prefetch,
# so the read is not all fetched ahead): a slow reader (64 KiB every
# 10 ms) of a cold mount; once it
# has a third of the stream, proxy 1 is killed; the rest must come whole.
nv_stop
nv_start
nv_drop_caches
cat > "$NV_TMP/slowcat.py" <<'PY'
import os, sys, time
src, dst, mark = sys.argv[1], sys.argv[2], sys.argv[3]
fd, n, marked = os.open(src, os.O_RDONLY), 0, False
with open(dst, "wb") as out:
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        out.write(b)
        n += len(b)
        if not marked and n >= (2 << 20):
            open(mark, "w").close()
            marked = True
        time.sleep(0.01)
PY
python3 "$NV_TMP/slowcat.py" "$MNT/b/s" "$NV_TMP/got" "$NV_TMP/mark" &
reader=$!
nv_bg "$reader"
nv_await 30 "the slow reader to read 2 MiB" test -e "$NV_TMP/mark"
pid1=$(cat "$PX/p1/nginx.pid")
# The master first, or it forks a new worker that keeps the socket: the
# whole session (nginx's master is a session leader once daemonized).
pkill -9 -s "$pid1"
nv_await 10 "proxy 1 to stop listening" sh -c "! ss -Htln 'sport = :${PURL[1]##*:}' | grep -q ."
wait "$reader" || fail "the slow reader failed after proxy 1 was killed"
cmp "$NV_TMP/got" "$NV_TMP/src" || fail "a read across the death of proxy 1 differs from what was written"
grep -q "cache proxy ${PURL[1]}: .*reads go straight to the bucket" "$LOG" ||
	fail "no log line says proxy 1 failed and reads went direct"
say "proxy 1 killed mid-read: the read was whole; $(grep -c "cache proxy ${PURL[1]}" "$LOG") log line(s)"
cold_read "after proxy 1 died"

# ------------------------------------------------------------- the purge
du0=$(du -sk "$PX/p0/cache" | cut -f1)
((du0 > 512)) || fail "proxy 0 caches only ${du0} KiB before the purge"
marks
rm "$MNT/b/s"
purged() {
	local i
	for i in 0 2; do
		[ "$(tail -n +"$((MARK[i] + 1))" "$PX/p$i/access.log" | grep -c "cache=BYPASS status=404")" -gt 0 ] || return 1
		# what stays is a 404 entry per slice (a few hundred bytes each)
		[ -z "$(find "$PX/p$i/cache" -type f -size +8k)" ] || return 1
	done
}
nv_await 60 "the proxies to purge the deleted stream's slices" purged
say "purged: proxy 0 cache ${du0} KiB -> $(du -sk "$PX/p0/cache" | cut -f1) KiB (in 4 KiB blocks)"

# ------------------------------------------ the Gateway's signed fetches
# The star vends signed plans; novagw --serve-plan --cache=... fetches the
# presigned URLs through the same proxies (api/vend.c over
# engine/store/tier.c).  Proxy 1 comes back first (same port and cache).
nginx -q -c "$PX/p1/nginx.conf" -p "$PX/p1" || fail "proxy 1 did not start again"
nv_await 10 "proxy 1 to answer again" sh -c \
	"[ \"\$(curl -s -o /dev/null -w '%{http_code}' ${PURL[1]}/)\" = 403 ]"
nv_bg "$(cat "$PX/p1/nginx.pid")"
nv_stop
SEC=$NV_TMP/secret
head -c 32 /dev/urandom | base64 > "$SEC"
chmod 600 "$SEC"
KEY=b-key-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf 'b %s\n' "$KEY" > "$NV_TMP/keys"
chmod 600 "$NV_TMP/keys"
# A plan lives at most read_grace_s (engine/plan.c): 30 s, not the 1 s above.
GOPTS="cluster_secret_file=$SEC,plan_vending=signed,plan_ttl_s=60,settle_trigger_mib=1"
GOPTS+=",settle_linger_s=1,age_cap_standard_s=2,output_cap_mib=1"
for try in 1 2 3; do
	SPORT=$(nv_free_port)
	nv_start_try "${OPTS/read_grace_s=1,/read_grace_s=30,},listen=127.0.0.1:$SPORT,$GOPTS" && break
	[ "$try" -lt 3 ] || fail "the daemon did not start with listen=127.0.0.1:$SPORT"
done
# 2.4 MiB of 4 KiB records (incompressible): a few settled objects of at
# most 1 MiB, about 40 slices of 64 KiB.
head -c $((2400 << 10)) /dev/urandom > "$NV_TMP/gsrc"
dd if="$NV_TMP/gsrc" of="$MNT/b/g" bs=4k status=none
nv_wait_settled 60 "$MNT/b/g"
GW_ARGS=(--star="127.0.0.1:$SPORT" --cluster-secret-file="$SEC" --api-keys-file="$NV_TMP/keys"
	--serve-plan --cache="$NOVAFS_CACHE_URLS" --cache-auth-file="$TOK" --cache-slice-kib=64)
for try in 1 2 3; do
	GPORT=$(nv_free_port)
	"$NOVAGW" --listen="127.0.0.1:$GPORT" "${GW_ARGS[@]}" >> "$NV_TMP/gw.log" 2>&1 &
	gw=$!
	nv_bg "$gw"
	nv_await 10 "novagw on $GPORT" bash -c \
		"curl -sf http://127.0.0.1:$GPORT/healthz >/dev/null || ! kill -0 $gw" &&
		kill -0 "$gw" 2>/dev/null && break
	[ "$try" -lt 3 ] || fail "novagw did not start: $(cat "$NV_TMP/gw.log")"
done
grep -q "signed fetches go through 3 cache proxies (64 KiB slices" "$NV_TMP/gw.log" ||
	fail "novagw does not say its signed fetches go through the tier"
cat > "$NV_TMP/gwalk.py" <<'PY'
# gwalk.py GW KEY OUT [PAUSE_S MARK]: the records of b/g from seq 0 page by
# page into OUT; with PAUSE_S, a pause after each page and the file MARK
# made once a third is read.
import sys, time, urllib.request
gw, key, out = sys.argv[1:4]
pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0
seq, data, marked = 0, b'', False
while True:
    rq = urllib.request.Request('%s/v1/streams/b/g/records?seq=%d&limit=64&max_bytes=131072'
                                % (gw, seq), headers={'Authorization': 'Bearer ' + key})
    try:
        r = urllib.request.urlopen(rq, timeout=60)
    except urllib.error.HTTPError as e:
        sys.exit('seq %d: HTTP %d %s' % (seq, e.code, e.read()[:300]))
    with r:
        if int(r.headers['Nova-Count']) == 0:
            break
        data += r.read()
        seq = int(r.headers['Nova-Next-Seq'])
    if pause:
        time.sleep(pause)
        if not marked and len(data) >= (800 << 10):
            open(sys.argv[5], 'w').close()
            marked = True
open(out, 'wb').write(data)
PY
gwalk() { python3 "$NV_TMP/gwalk.py" "http://127.0.0.1:$GPORT" "$KEY" "$@"; }
gwfail() { fail "$1; novagw's log ends: $(tail -n 5 "$NV_TMP/gw.log")"; }
marks
gwalk "$NV_TMP/g1" || gwfail "the first replay through the Gateway failed"
cmp "$NV_TMP/g1" "$NV_TMP/gsrc" || fail "the first replay through the Gateway differs from the stream"
first=0
for i in 0 1 2; do
	m=$(since "$i" MISS)
	((m > 0)) || fail "proxy $i fetched nothing of the Gateway's first replay (ring spread)"
	first=$((first + m))
done
say "the Gateway's first replay: $first slices fetched through the proxies"
marks
gwalk "$NV_TMP/g2" || gwfail "the second replay through the Gateway failed"
cmp "$NV_TMP/g2" "$NV_TMP/gsrc" || fail "the second replay through the Gateway differs from the stream"
again=0 hit=0
for i in 0 1 2; do
	again=$((again + $(since "$i" MISS))); hit=$((hit + $(since "$i" HIT)))
done
((again * 2 <= first)) || fail "the Gateway's second replay fetched $again slices again (first: $first)"
((hit >= first)) || fail "the Gateway's second replay was served $hit hits for $first slices"
say "the Gateway's second replay: $hit hits, $again slices fetched again"
# A proxy killed in the middle of a slow replay: the replay is whole.
rm -f "$NV_TMP/gmark"
gwalk "$NV_TMP/g3" 0.05 "$NV_TMP/gmark" &
walker=$!
nv_bg "$walker"
nv_await 30 "the slow replay to read a third" test -e "$NV_TMP/gmark"
pid2=$(cat "$PX/p2/nginx.pid")
pkill -9 -s "$pid2"
nv_await 10 "proxy 2 to stop listening" sh -c "! ss -Htln 'sport = :${PURL[2]##*:}' | grep -q ."
wait "$walker" || gwfail "the slow replay failed after proxy 2 was killed"
cmp "$NV_TMP/g3" "$NV_TMP/gsrc" || fail "a replay across the death of proxy 2 differs from the stream"
grep -q "cache proxy ${PURL[2]}: .*reads go straight to the bucket" "$NV_TMP/gw.log" ||
	fail "novagw logged no failure of proxy 2"
kill "$gw"
wait "$gw" 2>/dev/null || true
line=$(grep "novagw: cache tier: " "$NV_TMP/gw.log") || fail "novagw logged no tier count at exit"
say "proxy 2 killed mid-replay: the replay was whole; ${line#*novagw: }"
nv_stop
stop_proxies
