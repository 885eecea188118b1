#!/bin/bash
# t_gateway_plan: novagw --serve-plan (gw/plan.c) in front of one star
# that vends raw plans from the directory store, driven with curl and an
# SSE reader, against cat of the stream and against a proxy-mode novagw.
#
# Checked:
#  - start-up refusals: --storage-bucket naming no directory, or no URL
#    a store opens (exit 1, naming the option);
#  - a stream of about 0.8 MiB appended and settled, the star restarted
#    (nothing of it in memory), then a tail appended that is not settled yet: every records page, by seq and by byte
#    offset with limit and max_bytes (pages inside the settled part, one
#    crossing into the tail, one in the tail), has the body and the Nova-*
#    headers of the same page through a proxy-mode novagw, and walking
#    the pages from seq 0 gives cat of the stream byte for byte; an
#    events catch-up from seq 0 and its live tail (more appended while it
#    runs) decode to cat of the stream;
#  - the settled part did not come through the star: its plans counter
#    grew, its cold_read_bytes grew by less than a quarter of the settled
#    bytes (each was asked for at least twice), while the same walk
#    through the proxy then reads at least all of them cold; the
#    Gateway's /healthz shows both pools back at 0 (the footer pool: but
#    for the windows its cache keeps);
#  - kept plans and footers: the walk's pages asked the star for fewer
#    plans than there are pages (three a page without the plan cache),
#    and /healthz counts hits of both caches;
#  - after a trim: a page asked at seq 0 starts at the trim point (the
#    proxy's headers again), events from seq 0 start at the trim byte;
#  - a --serve-plan Gateway without --storage-bucket (raw plans it cannot
#    read) falls back to the proxy path: its pages (walked from seq 0, and
#    the pairs above) and its events from seq 0 are the proxy's and the
#    stream's bytes from the trim point, its /healthz counts the fallback
#    (plans.raw_proxied), and its log says once that reads are proxied,
#    naming --storage-bucket.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
command -v curl >/dev/null || nv_skip "curl is not installed"
[ -x "${NOVAGW:-}" ] || nv_hard_error "NOVAGW is not set to the novagw binary"

SEC=$NV_TMP/secret
head -c 32 /dev/urandom | base64 > "$SEC"
chmod 600 "$SEC"
KEY=logs-key-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
KEYS=$NV_TMP/keys
printf 'logs %s\n' "$KEY" > "$KEYS"
chmod 600 "$KEYS"
AUTH="Authorization: Bearer $KEY"
OPTS="cluster_secret_file=$SEC,plan_vending=raw,plan_ttl_s=60,read_grace_s=4"
OPTS+=",settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=2,output_cap_mib=1"
OPTS+=",audit_interval_ms=200"
for try in 1 2 3; do
	PORT=$(nv_free_port)
	nv_start_try "listen=127.0.0.1:$PORT,$OPTS" && break
	[ "$try" -lt 3 ] || fail "the daemon did not start with listen=127.0.0.1:$PORT"
done
COMMON=(--star="127.0.0.1:$PORT" --cluster-secret-file="$SEC" --api-keys-file="$KEYS"
	--heartbeat-s=1)

say "start-up refusals"
refused() { # WHAT PATTERN ARGS...: novagw exits 1 naming the reason
	local what=$1 pat=$2 out rc=0
	shift 2
	out=$("$NOVAGW" --listen=127.0.0.1:1 "${COMMON[@]}" "$@" 2>&1) || rc=$?
	((rc == 1)) || fail "$what: exit status $rc, expected 1 ($out)"
	[[ $out == *$pat* ]] || fail "$what: the refusal does not say '$pat': $out"
	say "ok: $what refused ($out)"
}
refused "a missing bucket directory" "--storage-bucket=dir:$NV_TMP/nothere: no such directory" \
	--serve-plan --storage-bucket="dir:$NV_TMP/nothere"
refused "a URL no store opens" "--storage-bucket=ftp://x: not a store URL" \
	--serve-plan --storage-bucket=ftp://x
[ ! -e "$NV_TMP/nothere" ] || fail "the refused bucket directory was created"

# start_gw NAME ARGS...: a novagw; its URL in GW_NAME, log in $NV_TMP/NAME.log
start_gw() {
	local name=$1 port pid try
	shift
	for try in 1 2 3; do
		port=$(nv_free_port)
		"$NOVAGW" --listen="127.0.0.1:$port" "${COMMON[@]}" "$@" >> "$NV_TMP/$name.log" 2>&1 &
		pid=$!
		nv_bg "$pid"
		if nv_await 10 "novagw $name on $port" bash -c \
			"curl -sf http://127.0.0.1:$port/healthz >/dev/null || ! kill -0 $pid"; then
			kill -0 "$pid" 2>/dev/null && break
		fi
		[ "$try" -lt 3 ] || fail "novagw $name did not start: $(cat "$NV_TMP/$name.log")"
	done
	printf -v "GW_$name" '%s' "http://127.0.0.1:$port"
}

cat > "$NV_TMP/gwp.py" <<'EOF'
import base64, json, os, random, sys, urllib.request
cmd = sys.argv[1]
def get(url, key):
    rq = urllib.request.Request(url, headers={'Authorization': 'Bearer ' + key})
    try:
        with urllib.request.urlopen(rq, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.getheaders() if k.lower().startswith('nova-')}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {}, e.read()
if cmd == 'write':  # write PATH MIRROR N SEED: N records of varied sizes, incompressible,
    # appended to PATH (one write each) and to MIRROR (what the stream must hold)
    path, mirror, n, seed = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    rnd = random.Random(seed)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    with open(mirror, 'ab') as m:
        for i in range(n):
            b = rnd.randbytes(rnd.choice([1, 17, 700, 4096, 9000]))
            assert os.write(fd, b) == len(b)
            m.write(b)
    os.close(fd)
elif cmd == 'pair':  # pair PLAN PROXY KEY PATH QUERY...: each page equal through both
    plan, proxy, key, path = sys.argv[2:6]
    for q in sys.argv[6:]:
        a, b = get(plan + path + '/records?' + q, key), get(proxy + path + '/records?' + q, key)
        if a[0] != 200 or a != b:
            print('%s: plan %s %s %d bytes; proxy %s %s %d bytes; bodies equal %s'
                  % (q, a[0], a[1], len(a[2]), b[0], b[1], len(b[2]), a[2] == b[2]))
            sys.exit(1)
    print(len(sys.argv) - 6)
elif cmd == 'walk':  # walk GW KEY PATH OUT: pages from seq 0 to the end, bodies into OUT
    gw, key, path, out = sys.argv[2:6]
    seq, data, pages = 0, b'', 0
    while True:
        st, h, body = get('%s%s/records?seq=%d&limit=37&max_bytes=100000' % (gw, path, seq), key)
        if st != 200:
            print('seq %d: HTTP %d %s' % (seq, st, body[:200])); sys.exit(1)
        if int(h['nova-count']) == 0:
            break
        data += body; pages += 1
        seq = int(h['nova-next-seq'])
    open(out, 'wb').write(data)
    print(pages)
elif cmd == 'sse':  # sse FILE START: decode the events into FILE.bin; print the bytes' length
    raw = open(sys.argv[2], 'rb').read().decode()
    cursor, out = int(sys.argv[3]), b''
    for ev in raw.split('\n\n'):
        f = dict(l.split(': ', 1) for l in ev.split('\n') if ': ' in l)
        if f.get('event') != 'data' or not ev.endswith('}'):
            continue
        d = json.loads(f['data'])
        if d['offset'] != cursor or int(f['id']) != cursor + d['length']:
            print('gap or repeat at %d' % cursor); sys.exit(1)
        out += base64.b64decode(d['base64']); cursor += d['length']
    open(sys.argv[2] + '.bin', 'wb').write(out)
    print(len(out))
elif cmd == 'pools':  # pools: "used used" of /healthz on stdin (the footer pool's
    # bytes beyond what its cache keeps)
    d = json.load(sys.stdin)
    print(d['fetch_inflight']['used'], d['footer_cache']['used'] - d['footer_cache']['cached'])
elif cmd == 'caches':  # caches: "footer_hits plan_hits" of /healthz on stdin
    d = json.load(sys.stdin)
    print(d['footer_cache']['hits'], d['plans']['hits'])
elif cmd == 'raw':  # raw: plans.raw_proxied of /healthz on stdin
    print(json.load(sys.stdin)['plans']['raw_proxied'])
EOF

mkdir "$MNT/logs"
F=$MNT/logs/app
S=/v1/streams/logs/app
say "append about 0.8 MiB, wait until settled, restart the star, append an unsettled tail"
# The restart leaves the star nothing of the settled part in memory: a
# read of it at the star is a cold read (cold_read_bytes).  The stream's
# bytes are mirrored in $NV_TMP/stream; cat is compared with it at the end,
# after the counters.
W() { python3 "$NV_TMP/gwp.py" write "$F" "$NV_TMP/stream" "$@"; }
W 300 16
nv_wait_settled 60 "$F"
SSEQ=$(nv_xattr "$F" user.nova.seq)
SBYTES=$(nv_size "$F")
nv_remount
start_gw plan --serve-plan --storage-bucket="dir:$DATA/objects"
start_gw proxy
start_gw nobucket --serve-plan
grep -q "serving plans" "$NV_TMP/plan.log" || fail "the plan Gateway does not say it serves plans"
W 20 17
SEQ=$(nv_xattr "$F" user.nova.seq)
SIZE=$(nv_size "$F")
[ "$SIZE" = "$(nv_size "$NV_TMP/stream")" ] || fail "the stream is $SIZE bytes, the mirror not"
say "settled $SSEQ records ($SBYTES bytes), $SEQ records ($SIZE bytes) in all"

PLANS0=$(nv_stat plans)
COLD0=$(nv_stat cold_read_bytes)
python3 "$NV_TMP/gwp.py" walk "$GW_plan" "$KEY" "$S" "$NV_TMP/walk" > "$NV_TMP/walk.n" ||
	fail "walking the pages: $(cat "$NV_TMP/walk.n")"
cmp "$NV_TMP/walk" "$NV_TMP/stream" || fail "the pages through --serve-plan differ from the stream"
PAGES=$(cat "$NV_TMP/walk.n")
say "ok: $PAGES pages from seq 0 are the stream"
# Every page asks for its start, its end and its bytes: without kept plans
# each is a plan at the star (three a page); with them the walk over the
# settled part lives on the first plan, and only the tail's pages ask.
PLANSW=$(nv_stat plans)
((PLANSW - PLANS0 < PAGES)) ||
	fail "the walk of $PAGES pages asked the star for $((PLANSW - PLANS0)) plans (kept plans would ask for fewer than a page each)"
read -r FHITS PHITS < <(curl -s "$GW_plan/healthz" | python3 "$NV_TMP/gwp.py" caches)
((FHITS > 0 && PHITS > 0)) ||
	fail "the plan Gateway's caches were never hit (footers $FHITS, plans $PHITS)"
say "ok: $PAGES pages, $((PLANSW - PLANS0)) plans asked of the star ($PHITS answered from kept plans, $FHITS footers from the cache)"

say "events from seq 0: the catch-up by plan, then the live tail"
curl -s -N -H "$AUTH" "$GW_plan$S/events?seq=0" > "$NV_TMP/ev" &
EV=$!
nv_bg "$EV"
W 10 18
decoded() { [ "$(python3 "$NV_TMP/gwp.py" sse "$1" "$2")" = "$3" ]; }
SIZE2=$(nv_size "$F")
nv_await 20 "the events to reach byte $SIZE2" decoded "$NV_TMP/ev" 0 "$SIZE2"
kill "$EV" 2>/dev/null || true

PLANS1=$(nv_stat plans)
COLD1=$(nv_stat cold_read_bytes)
((PLANS1 > PLANS0)) || fail "the star answered no plan ($PLANS0 -> $PLANS1)"
((COLD1 - COLD0 < SBYTES / 4)) ||
	fail "the star read $((COLD1 - COLD0)) bytes cold for $SBYTES settled bytes read twice"
say "ok: $((PLANS1 - PLANS0)) plans, $((COLD1 - COLD0)) bytes read cold at the star"
# The counter does count the settled bytes when they do come through the
# star: the same walk through the proxy.
python3 "$NV_TMP/gwp.py" walk "$GW_proxy" "$KEY" "$S" "$NV_TMP/walkp" > "$NV_TMP/walk.n" ||
	fail "walking the pages through the proxy: $(cat "$NV_TMP/walk.n")"
COLD2=$(nv_stat cold_read_bytes)
((COLD2 - COLD1 >= SBYTES)) ||
	fail "the proxy's walk read only $((COLD2 - COLD1)) bytes cold at the star (settled: $SBYTES)"
say "ok: the same walk through the proxy read $((COLD2 - COLD1)) bytes cold at the star"
cmp "$NV_TMP/ev.bin" "$NV_TMP/stream" || fail "the events' bytes differ from the stream"
cmp "$F" "$NV_TMP/stream" || fail "cat of the stream differs from what was appended"
cp "$NV_TMP/stream" "$NV_TMP/stream2"
say "ok: the events are the stream ($SIZE2 bytes), and cat of it too"
pools() { [ "$(curl -s "$GW_plan/healthz" | python3 "$NV_TMP/gwp.py" pools)" = "0 0" ]; }
nv_await 10 "the plan Gateway's pools to be back at 0" pools

say "the same pages through --serve-plan and through the proxy"
MID=$((SBYTES / 2 + 3))
QUERIES=(seq=0 seq=0\&limit=5 "seq=7&max_bytes=3000" "seq=$((SSEQ - 3))&limit=10"
	"seq=$((SSEQ + 2))&limit=4" "offset=$MID&limit=3" "offset=$((SBYTES - 5))&limit=4"
	"offset=0&max_bytes=1" "seq=$((SSEQ / 3))&max_bytes=50000" "seq=$SEQ")
python3 "$NV_TMP/gwp.py" pair "$GW_plan" "$GW_proxy" "$KEY" "$S" "${QUERIES[@]}" > "$NV_TMP/pair" ||
	fail "a page differs: $(cat "$NV_TMP/pair")"
say "ok: $(cat "$NV_TMP/pair") pages equal in body and Nova-* headers"

say "across a trim"
TRIM=$((SSEQ / 2))
setfattr -n user.nova.trim -v "$TRIM" "$F"
code=$(curl -s -o "$NV_TMP/b" -D "$NV_TMP/h" -w '%{http_code}' -H "$AUTH" "$GW_plan$S/records?seq=0&limit=3")
[ "$code" = 200 ] || fail "a page at seq 0 after the trim: HTTP $code"
grep -qi "^Nova-Seq: $TRIM" "$NV_TMP/h" || fail "the page after the trim starts at $(grep -i '^Nova-Seq' "$NV_TMP/h")"
TB=$(grep -i '^Nova-Offset:' "$NV_TMP/h" | tr -dc 0-9)
python3 "$NV_TMP/gwp.py" pair "$GW_plan" "$GW_proxy" "$KEY" "$S" seq=0 "seq=$((TRIM + 5))&limit=9" \
	"offset=$((TB + 1))" > "$NV_TMP/pair" || fail "after the trim, a page differs: $(cat "$NV_TMP/pair")"
curl -s -N -H "$AUTH" "$GW_plan$S/events?seq=0" > "$NV_TMP/evt" &
EV=$!
nv_bg "$EV"
nv_await 20 "the events after the trim to reach byte $SIZE2" decoded "$NV_TMP/evt" "$TB" "$((SIZE2 - TB))"
kill "$EV" 2>/dev/null || true
tail -c +$((TB + 1)) "$NV_TMP/stream2" | cmp - "$NV_TMP/evt.bin" ||
	fail "the events after the trim differ from the stream from the trim byte $TB"
say "ok: pages and events start at the trim point ($TRIM, byte $TB), equal to the proxy and cat"

say "a raw plan without --storage-bucket: proxied through the star"
raw_proxied() { curl -s "$GW_nobucket/healthz" | python3 "$NV_TMP/gwp.py" raw; }
nv_expect_eq "$(raw_proxied)" 0 "raw_proxied of the Gateway without --storage-bucket before its first read"
python3 "$NV_TMP/gwp.py" pair "$GW_nobucket" "$GW_proxy" "$KEY" "$S" "${QUERIES[@]}" seq=0 \
	"seq=$((TRIM + 5))&limit=9" "offset=$((TB + 1))" > "$NV_TMP/pair" ||
	fail "without --storage-bucket, a page differs from the proxy's: $(cat "$NV_TMP/pair")"
python3 "$NV_TMP/gwp.py" walk "$GW_nobucket" "$KEY" "$S" "$NV_TMP/walkn" > "$NV_TMP/walk.n" ||
	fail "walking the pages without --storage-bucket: $(cat "$NV_TMP/walk.n")"
tail -c +$((TB + 1)) "$NV_TMP/stream2" | cmp - "$NV_TMP/walkn" ||
	fail "the pages without --storage-bucket differ from the stream from the trim byte $TB"
curl -s -N -H "$AUTH" "$GW_nobucket$S/events?seq=0" > "$NV_TMP/evn" &
EV=$!
nv_bg "$EV"
nv_await 20 "the events without --storage-bucket to reach byte $SIZE2" decoded "$NV_TMP/evn" "$TB" \
	"$((SIZE2 - TB))"
kill "$EV" 2>/dev/null || true
tail -c +$((TB + 1)) "$NV_TMP/stream2" | cmp - "$NV_TMP/evn.bin" ||
	fail "the events without --storage-bucket differ from the stream from the trim byte $TB"
RAWP=$(raw_proxied)
((RAWP > 0)) || fail "the Gateway without --storage-bucket counts no fallback (raw_proxied $RAWP)"
nv_expect_eq "$(grep -c "reads are proxied through a star (start novagw with --storage-bucket" \
	"$NV_TMP/nobucket.log")" 1 "log lines saying raw plans are proxied"
if grep -q "bad_gateway\|plan read:" "$NV_TMP/nobucket.log"; then
	fail "the Gateway without --storage-bucket logged an error: $(cat "$NV_TMP/nobucket.log")"
fi
say "ok: pages, a walk of $(cat "$NV_TMP/walk.n") pages and events through the star, as the proxy's" \
	"($RAWP ops proxied), said once in the log"
say "PASS"
