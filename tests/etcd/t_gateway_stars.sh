#!/bin/bash
# t_gateway_stars.sh - novagw in front of a star that does not lead the
# stream: two stars (A leads, B does not) on one etcd member and one
# shared store, the Gateway told of B alone (--star=B).
#   1. Pages by seq (the tail window is A's: B answers NOT_OWNER and the
#      Gateway's cluster client redials A) equal A's bytes; so do events
#      from seq 0 while A appends, byte for byte.
#   1b. A settles the stream and trims it to record 100 with the events
#      open: a page through B asked below the trim point starts at it
#      (Nova-Seq 100) and equals A's bytes there, although the settled
#      object holding the trim point still has the bytes below it; events
#      opened now from seq 0 start at the trim point; the four readers go
#      on with A's appends after the trim, byte for byte (what they read
#      before the trim stays what it was);
#   2. kill -9 of A with the events open: the subscription breaks; the
#      Gateway resumes it at its cursor at B, which takes the vacant
#      stream once A's lease is gone; B's appends then arrive in the same
#      events, none lost or repeated, and a page read after it equals B's
#      bytes.
#   Four events readers of the stream throughout: each gets every byte
#   once, and the leading star (A, then B) serves ONE subscription for
#   them (its subscriptions gauge): the Gateway's shared follow, resumed
#   as one at B.
# And a second novagw, --serve-plan (raw plans, as the stars vend them,
# read from the shared directory store: --storage-bucket=dir:SHARED),
# also told of B alone, so its plans are B's for a stream A leads:
#   - in 1, its pages equal A's bytes, and a fifth events reader through
#     it (opened from seq 0 before the settle) gets every byte once,
#     through the settle and the trim (1b) and A's crash (2), its follow
#     one more subscription at the leading star (one per Gateway);
#   - in 1b, after the settle and the trim: a page asked below the trim
#     point starts at it (Nova-Seq 100) with A's bytes; a walk of pages
#     from seq 0 (the settled part by B's plans, read from the objects,
#     then the residual at A) is A's stream from the trim byte, and so are
#     events opened from seq 0 (the catch-up by plan, then the
#     subscription at A, live appends included); B answered plans (its
#     plans counter), the Gateway fetched footers from the objects and
#     proxied no read (/healthz).
# Members come from tests/etcd/etcd.sh (stopped by PID in the trap).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nv_init
command -v curl >/dev/null || nv_skip "curl is not installed"
[ -x "${NOVAGW:-}" ] || nv_hard_error "NOVAGW is not set to the novagw binary"
ED=$NV_TMP/etcd
"$here/etcd.sh" start "$ED" 1 > "$NV_TMP/etcd.env" || exit $?
nv_bg "$(cat "$ED/m1.pid")"
. "$ED/env.sh"

SHARED=$NV_TMP/shared
MB=$NV_TMP/mnt-b
DB=$NV_TMP/data-b
LOGB=$NV_TMP/novafs-b.log
mkdir -p "$SHARED" "$MB" "$DB"
: > "$LOGB"
SEC=$NV_TMP/secret
head -c 32 /dev/urandom | base64 > "$SEC"
chmod 600 "$SEC"
KEY=gw-key-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf 'b %s\n' "$KEY" > "$NV_TMP/keys"
chmod 600 "$NV_TMP/keys"
COMMON="store=dir:$SHARED,meta=$NOVAFS_ETCD_URL,star_lease_s=2,put_timeout_s=2,attr_timeout=0,cluster_secret_file=$SEC"
# read_grace_s bounds a plan's life (novafs(8) plan_ttl_s), sent in whole
# seconds and used by a consumer only while more than a second from its
# end (api/vend.c EXPIRY_MARGIN_NS): at 1 every plan B vends is stale on
# arrival and the --serve-plan Gateway's reads end in 503 after its
# re-plans; 4, as t_gateway_plan.sh.
COMMON="$COMMON,age_cap_standard_s=2,settle_linger_s=1,read_grace_s=4,audit_interval_ms=200"
B_PID=
stars_cleanup() {
	local rc=$?
	if [ -n "$B_PID" ]; then
		timeout 10 fusermount3 -u "$MB" 2>/dev/null || kill -9 "$B_PID" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$B_PID" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$B_PID" 2>/dev/null || true
		timeout 10 fusermount3 -uz "$MB" 2>/dev/null || true
	fi
	(exit $rc)
	nv_cleanup
}
trap stars_cleanup EXIT

nv_start_star "star=sa,$COMMON"
MA=$MNT
nv_spawn_star "$MB" "$LOGB" "data_dir=$DB,star=sb,$COMMON"
B_PID=$NV_STAR_PID
BPORT=$(sed -n 's/.*star API listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$LOGB" | tail -n 1)
[ -n "$BPORT" ] || fail "no listening port in B's log"
# start_gw LOG ARGS...: a novagw told of B alone; its pid in GW, port in GWPORT.
start_gw() {
	local log=$1 try
	shift
	for try in 1 2 3; do
		GWPORT=$(nv_free_port)
		"$NOVAGW" --listen="127.0.0.1:$GWPORT" --star="127.0.0.1:$BPORT" --cluster-secret-file="$SEC" \
			--api-keys-file="$NV_TMP/keys" --heartbeat-s=1 "$@" >> "$log" 2>&1 &
		GW=$!
		nv_bg "$GW"
		nv_await 10 "novagw on $GWPORT" bash -c "curl -sf http://127.0.0.1:$GWPORT/healthz >/dev/null || ! kill -0 $GW"
		kill -0 "$GW" 2>/dev/null && break
		[ "$try" -lt 3 ] || fail "novagw did not start: $(cat "$log")"
	done
}
PGWLOG=$NV_TMP/gw-plan.log
start_gw "$PGWLOG" --serve-plan --storage-bucket="dir:$SHARED"
PGW=$GW
PGWPORT=$GWPORT
PGWURL=http://127.0.0.1:$PGWPORT/v1/streams/b/s
grep -q "serving plans" "$PGWLOG" || fail "the --serve-plan Gateway does not say it serves plans"
GWLOG=$NV_TMP/gw.log
start_gw "$GWLOG"
GWURL=http://127.0.0.1:$GWPORT/v1/streams/b/s
AUTH="Authorization: Bearer $KEY"
say "stars A (pid $NV_PID) and B (pid $B_PID, port $BPORT), novagw on $GWPORT and novagw --serve-plan on $PGWPORT told of B alone"

# write FILE FIRST N: records "r FIRST".."r FIRST+N-1", one write() each.
write() {
	python3 - "$1" "$2" "$3" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
for i in range(int(sys.argv[2]), int(sys.argv[2]) + int(sys.argv[3])):
    os.write(fd, (("r %d " % i) + "x" * (i % 200) + "\n").encode())
os.close(fd)
PY
}
mkdir "$MA/b"
write "$MA/b/s" 0 200

say "1. pages and events through B, the stream led by A"
code=$(curl -s -o "$NV_TMP/page" -w '%{http_code}' -H "$AUTH" "$GWURL/records?seq=0")
nv_expect_eq "$code" 200 "a page from seq 0"
cmp "$NV_TMP/page" "$MA/b/s" || fail "the page differs from A's stream"
code=$(curl -s -D "$NV_TMP/h" -o "$NV_TMP/page" -w '%{http_code}' -H "$AUTH" "$GWURL/records?seq=150&limit=10")
grep -qi '^Nova-Count: 10' "$NV_TMP/h" || fail "records 150..159: $(cat "$NV_TMP/h")"
OFF=$(grep -i '^Nova-Offset:' "$NV_TMP/h" | tr -dc 0-9)
dd if="$MA/b/s" bs=1 skip="$OFF" count="$(stat -c %s "$NV_TMP/page")" 2>/dev/null | cmp - "$NV_TMP/page" ||
	fail "records 150..159 differ from A's bytes"
code=$(curl -s -o "$NV_TMP/ppage" -w '%{http_code}' -H "$AUTH" "$PGWURL/records?seq=0")
nv_expect_eq "$code" 200 "a page from seq 0 through the --serve-plan Gateway"
cmp "$NV_TMP/ppage" "$MA/b/s" || fail "the --serve-plan Gateway's page differs from A's stream"
say "ok: pages through B equal A's bytes"
curl -s -N -H "$AUTH" "$GWURL/events?seq=0" > "$NV_TMP/ev" &
EV=$!
nv_bg "$EV"
EVS=()
for i in 2 3 4; do
	curl -s -N -H "$AUTH" "$GWURL/events?seq=0" > "$NV_TMP/ev$i" &
	EVS+=($!)
	nv_bg "$!"
done
curl -s -N -H "$AUTH" "$PGWURL/events?seq=0" > "$NV_TMP/evp" &
EVP=$!
nv_bg "$EVP"
write "$MA/b/s" 200 100
cat > "$NV_TMP/sse.py" <<'PY'
import base64, json, sys  # sse.py EVENTS [START]: decode, write EVENTS.bin, print its length
raw = open(sys.argv[1], 'rb').read().decode()
cursor, out = int(sys.argv[2]) if len(sys.argv) > 2 else 0, b''
for ev in raw.split('\n\n'):
    f = dict(l.split(': ', 1) for l in ev.split('\n') if ': ' in l)
    if f.get('event') != 'data' or not ev.endswith('}'):
        continue
    d = json.loads(f['data'])
    if d['offset'] != cursor:
        print('gap or repeat at %d' % cursor); sys.exit(1)
    out += base64.b64decode(d['base64']); cursor += d['length']
open(sys.argv[1] + '.bin', 'wb').write(out)
print(len(out))
PY
# caught_up FILE [EVENTS]: the events decoded (from byte $START, default
# 0) are FILE's length.
caught_up() { [ "$(python3 "$NV_TMP/sse.py" "${2:-$NV_TMP/ev}" "${START:-0}")" = "$(stat -c %s "$1")" ]; }
# all_equal FILE WHAT [EVENTS...]: every reader (the four, the fifth
# through the --serve-plan Gateway, or EVENTS) caught up with FILE, byte
# for byte.
all_equal() {
	local e f=$1 w=$2
	shift 2
	(($#)) || set -- "$NV_TMP/ev" "$NV_TMP/ev2" "$NV_TMP/ev3" "$NV_TMP/ev4" "$NV_TMP/evp"
	for e; do
		nv_await 30 "$(basename "$e") to catch up with $w" caught_up "$f" "$e"
		cmp "$e.bin" "$f" || fail "$(basename "$e") differs from $w's stream"
	done
}
# subs PORT: the subscriptions gauge of the star whose API is on PORT.
subs() {
	curl -s -H "Authorization: Bearer $(cat "$SEC")" "http://127.0.0.1:$1/metrics" |
		awk 'index($1, "novafs_subscriptions{") == 1 { print $2 }'
}
APORT=$(sed -n 's/.*star API listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$LOG" | tail -n 1)
[ -n "$APORT" ] || fail "no listening port in A's log"
all_equal "$MA/b/s" A
nv_expect_eq "$(subs "$APORT") $(subs "$BPORT")" "2 0" "subscriptions at A and B for 4 readers and 1 through the --serve-plan Gateway"
say "ok: events through B equal A's stream, live appends included, for 4 readers on one subscription at A (and one of the --serve-plan Gateway)"

say "1b. a settle and a trim at A, the events open"
nv_wait_settled 30 "$MA/b/s"
cp "$MA/b/s" "$NV_TMP/pretrim"
PRELEN=$(stat -c %s "$NV_TMP/pretrim")
setfattr -n user.nova.trim -v 100 "$MA/b/s" || fail "setfattr user.nova.trim 100 on A"
TRIMB=$(python3 -c 'print(sum(len("r %d " % i) + i % 200 + 1 for i in range(100)))')
code=$(curl -s -D "$NV_TMP/h" -o "$NV_TMP/page" -w '%{http_code}' -H "$AUTH" "$GWURL/records?seq=3&limit=20")
nv_expect_eq "$code $(grep -i '^Nova-Seq:' "$NV_TMP/h" | tr -d '\r')" "200 Nova-Seq: 100" "a page through B asked below A's trim point"
OFF=$(grep -i '^Nova-Offset:' "$NV_TMP/h" | tr -dc 0-9)
nv_expect_eq "$OFF" "$TRIMB" "the page's offset (record 100's byte)"
dd if="$NV_TMP/pretrim" bs=1 skip="$OFF" count="$(stat -c %s "$NV_TMP/page")" 2>/dev/null | cmp - "$NV_TMP/page" ||
	fail "the page from the trim point differs from A's bytes"
curl -s -N -H "$AUTH" "$GWURL/events?seq=0" > "$NV_TMP/ev5" &
EV5=$!
nv_bg "$EV5"
write "$MA/b/s" 1000 30
# Every reader: what it read before the trim, then A's bytes after.
{ cat "$NV_TMP/pretrim"; tail -c "+$((PRELEN + 1))" "$MA/b/s"; } > "$NV_TMP/want"
all_equal "$NV_TMP/want" "A (trimmed)"
tail -c "+$((TRIMB + 1))" "$NV_TMP/want" > "$NV_TMP/want5"
START=$TRIMB all_equal "$NV_TMP/want5" "A from its trim point" "$NV_TMP/ev5"
say "ok: through B, a page below A's trim point starts at it, events from seq 0 start there, and the readers go on after the trim"

say "1c. the --serve-plan Gateway after the settle and the trim: B's plans, then A"
# health: "plans_asked footer_misses raw_proxied" of the plan Gateway's /healthz
health() {
	curl -s "http://127.0.0.1:$PGWPORT/healthz" | python3 -c 'import json, sys
d = json.load(sys.stdin)
print(d["plans"]["asked"], d["footer_cache"]["misses"], d["plans"]["raw_proxied"])'
}
bplans() { nv_xattr "$MB" user.nova.stats | nv_json_get plans; }
BPLANS0=$(bplans)
read -r ASKED0 FMISS0 _ < <(health)
code=$(curl -s -D "$NV_TMP/ph" -o "$NV_TMP/ppage" -w '%{http_code}' -H "$AUTH" "$PGWURL/records?seq=3&limit=20")
nv_expect_eq "$code $(grep -i '^Nova-Seq:' "$NV_TMP/ph" | tr -d '\r')" "200 Nova-Seq: 100" "a page by plan asked below A's trim point"
nv_expect_eq "$(grep -i '^Nova-Offset:' "$NV_TMP/ph" | tr -dc 0-9)" "$TRIMB" "the page by plan's offset"
dd if="$NV_TMP/pretrim" bs=1 skip="$TRIMB" count="$(stat -c %s "$NV_TMP/ppage")" 2>/dev/null | cmp - "$NV_TMP/ppage" ||
	fail "the page by plan from the trim point differs from A's bytes"
curl -s -N -H "$AUTH" "$PGWURL/events?seq=0" > "$NV_TMP/evp6" &
EVP6=$!
nv_bg "$EVP6"
# walk OUT: the plan Gateway's pages from seq 0 (37 records or 3000
# bytes each) into OUT; prints the pages' count.
walk() {
	python3 - "$PGWURL" "$KEY" "$1" <<'PY'
import sys, urllib.request
url, key, out = sys.argv[1:4]
seq, data, pages = 0, b'', 0
while True:
    rq = urllib.request.Request('%s/records?seq=%d&limit=37&max_bytes=3000' % (url, seq),
                                headers={'Authorization': 'Bearer ' + key})
    with urllib.request.urlopen(rq, timeout=30) as r:
        h = {k.lower(): v for k, v in r.getheaders()}
        body = r.read()
    if int(h['nova-count']) == 0:
        break
    data += body; pages += 1
    seq = int(h['nova-next-seq'])
open(out, 'wb').write(data)
print(pages)
PY
}
write "$MA/b/s" 1030 20
{ cat "$NV_TMP/pretrim"; tail -c "+$((PRELEN + 1))" "$MA/b/s"; } > "$NV_TMP/want"
tail -c "+$((TRIMB + 1))" "$NV_TMP/want" > "$NV_TMP/want5"
PAGES=$(walk "$NV_TMP/pwalk") || fail "walking the --serve-plan Gateway's pages"
cmp "$NV_TMP/pwalk" "$NV_TMP/want5" || fail "the --serve-plan Gateway's pages from seq 0 differ from A's stream from its trim point"
START=$TRIMB all_equal "$NV_TMP/want5" "A from its trim point" "$NV_TMP/evp6"
all_equal "$NV_TMP/want" "A (trimmed)" "$NV_TMP/evp"
read -r ASKED1 FMISS1 RAWP < <(health)
BPLANS1=$(bplans)
((BPLANS1 > BPLANS0 && ASKED1 > ASKED0 && FMISS1 > FMISS0)) ||
	fail "no read by plan: B answered $((BPLANS1 - BPLANS0)) plans, the Gateway asked $((ASKED1 - ASKED0)) and fetched $((FMISS1 - FMISS0)) footers"
nv_expect_eq "$RAWP" 0 "reads the --serve-plan Gateway proxied for want of a bucket"
say "ok: by B's plans ($((BPLANS1 - BPLANS0)), $((FMISS1 - FMISS0)) footers fetched), then A: a page from the trim point, $PAGES pages from seq 0 and events from seq 0 are A's bytes"

say "2. kill -9 of A: the events go on at B"
cp "$MA/b/s" "$NV_TMP/acked"
nv_crash
nv_await 30 "B to take the stream and append" bash -c "python3 - '$MB/b/s' <<'PY'
import os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
    os.write(fd, b'after A\n')
    os.close(fd)
except OSError:
    sys.exit(1)
PY"
write "$MB/b/s" 300 50
{ cat "$NV_TMP/pretrim"; tail -c "+$((PRELEN + 1))" "$MB/b/s"; } > "$NV_TMP/want"
all_equal "$NV_TMP/want" B
nv_expect_eq "$(subs "$BPORT")" 2 "subscriptions at B for the 4 readers and the --serve-plan Gateway's after A's crash"
head -c "$(stat -c %s "$NV_TMP/acked")" "$MB/b/s" | cmp - "$NV_TMP/acked" || fail "B lost what A acked"
code=$(curl -s -o "$NV_TMP/page" -w '%{http_code}' -H "$AUTH" "$GWURL/records?seq=300")
nv_expect_eq "$code" 200 "a page from seq 300 at B"
code=$(curl -s -o "$NV_TMP/ppage" -w '%{http_code}' -H "$AUTH" "$PGWURL/records?seq=300")
nv_expect_eq "$code" 200 "a page from seq 300 at B through the --serve-plan Gateway"
cmp "$NV_TMP/ppage" "$NV_TMP/page" || fail "the --serve-plan Gateway's page from seq 300 differs from the proxy's"
say "ok: the events resumed at B's cursor, $(stat -c %s "$MB/b/s") bytes, none lost or twice"
kill "$EV" "${EVS[@]}" "$EV5" "$EVP" "$EVP6" 2>/dev/null || true
for g in "$GW" "$PGW"; do
	kill -TERM "$g"
	nv_await 15 "novagw $g to stop" bash -c "! kill -0 $g 2>/dev/null"
	wait "$g" && rc=0 || rc=$?
	nv_expect_eq "$rc" 0 "novagw $g's exit status after SIGTERM"
done
say "PASS"
