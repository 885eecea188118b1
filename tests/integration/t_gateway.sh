#!/bin/bash
# t_gateway: novagw (src/novagw.c, gw/) in proxy mode in front of a
# mount with -o listen= and a cluster secret, driven with curl and an SSE
# reader.  The mount settles quickly (1 MiB trigger, 1 s linger).
#
# Checks: start-up refusals (a keys file others can read, a malformed
# line, a missing option); records by seq and by byte offset with limit
# and max_bytes, each page compared with the same bytes read by dd from
# the mount, one record served whole when it is larger than max_bytes,
# an empty page at the end and 416 past it, the same pages once settled,
# and after a trim (a page asked below the trim point starts at it);
# server-sent events from seq 0 (so from the trim point) of a stream
# being appended on the mount, decoded and compared byte for byte with
# cat, a resume with Last-Event-ID that starts exactly at that
# byte, heartbeats, and the end event when the stream is removed; five
# readers of one live stream (one joining late, after a catch-up of its
# own) each get every byte once while the star serves one subscription
# for them (its subscriptions gauge), closed with the last reader; API
# keys (none or unknown 401, another bucket's 403) and hostile requests
# (bad names, numbers, methods, paths, headers: 400/404/405/414/431)
# refused with a log line and the Gateway still up; pages on a kept-alive
# connection; a second --star that is down passes every question to the
# live one; a client too slow to take its page, and an events reader too
# slow for its catch-up, are dropped and the fetch pool is back to 0; an
# events reader too slow for the live tail is let go by the shared follow
# (and dropped) while another reader of the stream gets every byte.
#
# Not checked here: NOT_OWNER between stars (the cluster client's redial
# is pinned by tests/unit/test_api_client; the star API's locate is
# exercised here on the only star), --serve-plan (t_gateway_plan.sh).
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
OTHER=other-key-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
KEYS=$NV_TMP/keys
printf '# bucket key\nlogs %s\n\nother %s\n' "$KEY" "$OTHER" > "$KEYS"
chmod 600 "$KEYS"

for try in 1 2 3; do
	PORT=$(nv_free_port)
	nv_start_try "listen=127.0.0.1:$PORT,cluster_secret_file=$SEC,settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=2,output_cap_mib=2,read_grace_s=1,audit_interval_ms=100" && break
	[ "$try" -lt 3 ] || fail "the daemon did not start with listen=127.0.0.1:$PORT"
done

say "start-up refusals"
GWLOG=$NV_TMP/gw.log
# The first --star is a port nobody listens on: every question the
# rotation sends there first passes to the live star.
DEAD=$(nv_free_port)
gw_args() { echo "--star=127.0.0.1:$DEAD --star=127.0.0.1:$PORT --cluster-secret-file=$SEC --heartbeat-s=1 --client-timeout-s=2"; }
refused() { # refused WHAT PATTERN ARGS...: novagw exits non-zero naming the reason
	local what=$1 pat=$2 out rc=0
	shift 2
	out=$("$NOVAGW" "$@" 2>&1) || rc=$?
	((rc != 0)) || fail "$what: novagw started"
	[[ $out == *$pat* ]] || fail "$what: the refusal does not say '$pat': $out"
	say "ok: $what refused ($out)"
}
# shellcheck disable=SC2046
refused "no --star" "are required" --listen=127.0.0.1:1 --cluster-secret-file="$SEC" --api-keys-file="$KEYS"
cp "$KEYS" "$NV_TMP/keys.644"; chmod 644 "$NV_TMP/keys.644"
# shellcheck disable=SC2046
refused "a keys file others can read" "chmod 600" --listen=127.0.0.1:1 $(gw_args) --api-keys-file="$NV_TMP/keys.644"
printf 'logs %s\nlogs short\n' "$KEY" > "$NV_TMP/keys.bad"; chmod 600 "$NV_TMP/keys.bad"
# shellcheck disable=SC2046
refused "a short key" "line 2" --listen=127.0.0.1:1 $(gw_args) --api-keys-file="$NV_TMP/keys.bad"
# shellcheck disable=SC2046
refused "a bad number" "--fetch-inflight=12x" --listen=127.0.0.1:1 $(gw_args) --api-keys-file="$KEYS" --fetch-inflight=12x

for try in 1 2 3; do
	GWPORT=$(nv_free_port)
	# shellcheck disable=SC2046
	"$NOVAGW" --listen="127.0.0.1:$GWPORT" $(gw_args) --api-keys-file="$KEYS" >> "$GWLOG" 2>&1 &
	GW=$!
	nv_bg "$GW"
	if nv_await 10 "novagw on $GWPORT" bash -c "curl -sf http://127.0.0.1:$GWPORT/healthz >/dev/null || ! kill -0 $GW"; then
		kill -0 "$GW" 2>/dev/null && break
	fi
	[ "$try" -lt 3 ] || fail "novagw did not start: $(cat "$GWLOG")"
done
GWURL=http://127.0.0.1:$GWPORT
gw_alive() { kill -0 "$GW" 2>/dev/null || fail "novagw died: $(tail -5 "$GWLOG")"; }
say "novagw on $GWPORT in front of the star on $PORT (and a dead one on $DEAD)"

mkdir "$MNT/logs"
S=/v1/streams/logs/app
# Records of many sizes (one write each), three of them 300 KiB; the
# index (seq offset length) in $NV_TMP/index.
cat > "$NV_TMP/gw.py" <<'EOF'
import base64, json, os, random, sys
cmd = sys.argv[1]
if cmd == 'write':  # write PATH INDEX N SEED
    path, index, n, seed = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    rnd = random.Random(seed)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    off = os.fstat(fd).st_size
    seq = sum(1 for _ in open(index)) if os.path.exists(index) else 0
    with open(index, 'a') as ix:
        for i in range(n):
            size = 300 * 1024 if i % 17 == 5 else rnd.randint(1, 3000)
            body = bytes(rnd.getrandbits(8) for _ in range(min(size, 64))) * (size // 64 + 1)
            body = body[:size]
            assert os.write(fd, body) == size
            ix.write('%d %d %d\n' % (seq, off, size))
            seq += 1; off += size
    os.close(fd)
elif cmd == 'page':  # page INDEX HEADERS BODY STREAMFILE BY POS LIMIT MAXB: check one records page
    index = [tuple(map(int, l.split())) for l in open(sys.argv[2])]
    hdr = {}
    for l in open(sys.argv[3], encoding='latin-1'):
        if ':' in l:
            k, v = l.split(':', 1); hdr[k.strip().lower()] = v.strip()
    body = open(sys.argv[4], 'rb').read()
    data = open(sys.argv[5], 'rb').read()
    by, pos, limit, maxb = sys.argv[6], int(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9])
    if by == 'seq':
        first = pos
    else:
        first = max(i for i, (s, o, n) in enumerate(index) if o <= pos)
    want, total = [], 0
    for s, o, n in index[first:first + limit]:
        if want and total + n > maxb:
            break
        want.append((s, o, n)); total += n
    b0 = index[first][1] if first < len(index) else len(data)
    exp = data[b0:b0 + total]
    got = (int(hdr['nova-seq']), int(hdr['nova-offset']), int(hdr['nova-count']),
           int(hdr['nova-next-seq']), int(hdr['nova-next-offset']))
    wantt = (first, b0, len(want), first + len(want), b0 + total)
    if got != wantt or body != exp:
        print('page %s=%d limit=%d max_bytes=%d: headers %s, want %s; body %d bytes, want %d, equal %s'
              % (by, pos, limit, maxb, got, wantt, len(body), len(exp), body == exp))
        sys.exit(1)
    print('%d records, %d bytes' % (len(want), total))
elif cmd == 'sse':  # sse FILE START: decode the events; print the bytes' length, write them to FILE.bin
    raw = open(sys.argv[2], 'rb').read().decode()
    cursor, out, ids, kinds = int(sys.argv[3]), b'', [], []
    for ev in raw.split('\n\n'):
        if not ev.strip():
            continue
        f = dict(l.split(': ', 1) for l in ev.split('\n') if ': ' in l)
        kinds.append(f.get('event', 'retry' if 'retry' in f else '?'))
        if f.get('event') != 'data':
            continue
        if not ev.endswith('}'):
            break  # the last event, cut mid-way by the reader
        d = json.loads(f['data'])
        if d['offset'] != cursor or int(f['id']) != cursor + d['length']:
            print('gap or repeat at %d: event %s' % (cursor, f)); sys.exit(1)
        b = base64.b64decode(d['base64'])
        assert len(b) == d['length']
        out += b; cursor += len(b); ids.append(cursor)
    open(sys.argv[2] + '.bin', 'wb').write(out)
    open(sys.argv[2] + '.ids', 'w').write('\n'.join(map(str, ids)) + '\n')
    open(sys.argv[2] + '.kinds', 'w').write('\n'.join(kinds) + '\n')
    print(len(out))
elif cmd == 'slow':  # slow PORT KEY PATH STOP: a 4 KiB receive window, nothing read until STOP exists (10 s at most)
    import socket, time
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(('127.0.0.1', int(sys.argv[2])))
    s.sendall(('GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n'
               % (sys.argv[4], sys.argv[3])).encode())
    t0 = time.time()
    while not os.path.exists(sys.argv[5]) and time.time() - t0 < 10:
        time.sleep(0.05)
    s.setblocking(False)
    n = 0
    try:
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            n += len(b)
    except (BlockingIOError, ConnectionResetError):
        pass
    print(n)
elif cmd == 'used':  # used: the fetch pool's bytes in use, from /healthz on stdin
    print(json.load(sys.stdin)['fetch_inflight']['used'])
elif cmd == 'events':  # events: the events responses alive, from /healthz on stdin
    print(json.load(sys.stdin)['events'])
elif cmd == 'follows':  # follows: the Gateway's shared follows running, from /healthz on stdin
    print(json.load(sys.stdin)['follows'])
EOF
python3 "$NV_TMP/gw.py" write "$MNT/logs/app" "$NV_TMP/index" 60 1
N=$(wc -l < "$NV_TMP/index")
nv_expect_eq "$(nv_xattr "$MNT/logs/app" user.nova.seq)" "$N" "records written"
cp "$MNT/logs/app" "$NV_TMP/stream"
AUTH="Authorization: Bearer $KEY"

# page BY POS LIMIT MAXB: one records page, checked against the mount.
page() {
	local q="$1=$2"
	[ "$3" = - ] || q="$q&limit=$3"
	[ "$4" = - ] || q="$q&max_bytes=$4"
	local code
	code=$(curl -s -D "$NV_TMP/h" -o "$NV_TMP/b" -w '%{http_code}' -H "$AUTH" "$GWURL$S/records?$q")
	[ "$code" = 200 ] || fail "records?$q: status $code ($(cat "$NV_TMP/b"))"
	local l=$3 m=$4
	[ "$l" = - ] && l=1000
	[ "$m" = - ] && m=1048576
	out=$(python3 "$NV_TMP/gw.py" page "$NV_TMP/index" "$NV_TMP/h" "$NV_TMP/b" "$NV_TMP/stream" "$1" "$2" "$l" "$m") ||
		fail "records?$q: $out"
	say "ok: records?$q: $out"
}
say "records by seq and by offset, with the two caps"
page seq 0 - -
page seq 3 5 -
page seq 0 1000 4000
page seq 5 - 100          # record 5 is 300 KiB: served whole
page seq 4 - 100
page seq 21 2 1048576
OFF=$(awk '$1 == 9 { print $2 + 1 }' "$NV_TMP/index")
page offset "$OFF" 3 -    # mid-record: from the record holding it
page offset 0 - 600000
SIZE=$(stat -c %s "$NV_TMP/stream")
code=$(curl -s -D "$NV_TMP/h" -o "$NV_TMP/b" -w '%{http_code}' -H "$AUTH" "$GWURL$S/records?seq=$N")
nv_expect_eq "$code/$(stat -c %s "$NV_TMP/b")" "200/0" "a page at the end is empty"
grep -qi "^Nova-Next-Offset: $SIZE" "$NV_TMP/h" || fail "the empty page does not name the end"
nv_expect_eq "$(curl -s -o /dev/null -o /dev/null -w '%{num_connects} ' -H "$AUTH" \
	"$GWURL$S/records?seq=0&limit=1" "$GWURL$S/records?seq=1&limit=1")" "1 0 " \
	"connections for two pages (kept alive)"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" "$GWURL$S/records?seq=$((N + 1))")
nv_expect_eq "$code" 416 "a page past the end"
code=$(curl -s -o "$NV_TMP/b" -w '%{http_code}' -H "$AUTH" "$GWURL$S/end")
nv_expect_eq "$code $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["seq"], d["byte"])' "$NV_TMP/b")" \
	"200 $N $SIZE" "the end"

say "the same pages once settled, and after a trim"
nv_wait_settled 30 "$MNT/logs/app"
page seq 0 - -
page seq 5 - 100
page offset "$OFF" 3 -
setfattr -n user.nova.trim -v 10 "$MNT/logs/app"
cp "$MNT/logs/app" "$NV_TMP/stream"
page seq 10 4 -
page seq 12 - 5000
# Below the trim point a page starts at it: those records are gone.
code=$(curl -s -D "$NV_TMP/h" -o "$NV_TMP/b3" -w '%{http_code}' -H "$AUTH" "$GWURL$S/records?seq=3&limit=2")
nv_expect_eq "$code $(grep -i '^Nova-Seq:' "$NV_TMP/h" | tr -d '\r')" "200 Nova-Seq: 10" "a page asked below the trim point"
grep -qi '^Nova-Trim-Seq: 10' "$NV_TMP/h" || fail "the page does not name the trim point"
page seq 10 2 -
cmp "$NV_TMP/b3" "$NV_TMP/b" || fail "the page asked at seq 3 is not the page at the trim point"
TRIMB=$(awk '$1 == 10 { print $2 }' "$NV_TMP/index")

say "server-sent events: catch-up, live tail, resume, end"
curl -s -N -H "$AUTH" "$GWURL$S/events?seq=0" > "$NV_TMP/ev" &
EV=$!
nv_bg "$EV"
python3 "$NV_TMP/gw.py" write "$MNT/logs/app" "$NV_TMP/index" 40 2
cp "$MNT/logs/app" "$NV_TMP/stream"
SIZE=$(stat -c %s "$NV_TMP/stream")
decoded() { [ "$(python3 "$NV_TMP/gw.py" sse "$1" "$2")" = "$3" ]; }
# From seq 0 the events start at the trim point, record 10 (byte $TRIMB).
nv_await 20 "the events to reach byte $SIZE" decoded "$NV_TMP/ev" "$TRIMB" "$((SIZE - TRIMB))"
tail -c "+$((TRIMB + 1))" "$NV_TMP/stream" | cmp - "$NV_TMP/ev.bin" ||
	fail "the events' bytes differ from the stream's after the trim point"
say "ok: $((SIZE - TRIMB)) bytes from the trim point in $(wc -l < "$NV_TMP/ev.ids") data events, equal to cat"
nv_await 5 "a heartbeat event" grep -q '^event: heartbeat' "$NV_TMP/ev"
MID=$(sed -n "$(( $(wc -l < "$NV_TMP/ev.ids") / 2 ))p" "$NV_TMP/ev.ids")
curl -s -N -H "$AUTH" -H "Last-Event-ID: $MID" "$GWURL$S/events" > "$NV_TMP/ev2" &
EV2=$!
nv_bg "$EV2"
nv_await 20 "the resumed events to reach the end" decoded "$NV_TMP/ev2" "$MID" "$((SIZE - MID))"
tail -c "+$((MID + 1))" "$NV_TMP/stream" | cmp - "$NV_TMP/ev2.bin" ||
	fail "the resumed events differ from the stream after byte $MID"
say "ok: resumed at Last-Event-ID $MID, $((SIZE - MID)) bytes, none twice"
live() { [ "$(curl -s "$GWURL/healthz" | python3 "$NV_TMP/gw.py" events)" = "$1" ]; }
live 2 || fail "two events responses should be alive"
kill "$EV2" 2>/dev/null || true
wait "$EV2" 2>/dev/null || true
rm "$MNT/logs/app"
nv_await 20 "the end event" grep -q '^event: end' "$NV_TMP/ev"
nv_await 10 "the events response to close" bash -c "! kill -0 $EV 2>/dev/null"
grep -A1 '^event: end' "$NV_TMP/ev" | grep -q '"reason":"deleted"' || fail "the end event does not say deleted"
say "ok: rm ends the events with event: end"


say "API keys and hostile requests"
python3 "$NV_TMP/gw.py" write "$MNT/logs/app" "$NV_TMP/index2" 5 3
mkdir "$MNT/other"
echo other > "$MNT/other/s"
expect() { # expect STATUS WHAT CURL-ARGS... (the URL last)
	local want=$1 what=$2 got
	shift 2
	got=$(curl -s -o "$NV_TMP/b" -w '%{http_code}' "$@") || true
	[ "$got" = "$want" ] || fail "$what: status $got, expected $want ($(cat "$NV_TMP/b"))"
	gw_alive
	say "ok: $what -> $want"
}
expect 401 "no key" "$GWURL$S/records"
expect 401 "an unknown key" -H "Authorization: Bearer not-a-key-of-this-file" "$GWURL$S/records"
expect 401 "a key without Bearer" -H "Authorization: $KEY" "$GWURL$S/records"
expect 403 "another bucket's key" -H "Authorization: Bearer $OTHER" "$GWURL$S/records"
expect 200 "the other bucket with its key" -H "Authorization: Bearer $OTHER" "$GWURL/v1/streams/other/s/records"
expect 403 "the other bucket with this key" -H "$AUTH" "$GWURL/v1/streams/other/s/records"
expect 404 "no such stream" -H "$AUTH" "$GWURL/v1/streams/logs/nope/records"
expect 400 "a bad stream name (..)" --path-as-is -H "$AUTH" "$GWURL/v1/streams/logs/../records"
expect 400 "a bad bucket name" -H "$AUTH" "$GWURL/v1/streams/Bad*Bucket/x/records"
expect 404 "an unknown operation" -H "$AUTH" "$GWURL$S/append"
expect 404 "an unknown path" -H "$AUTH" "$GWURL/v2/x"
expect 405 "a POST" -H "$AUTH" -X POST --data-binary x "$GWURL$S/records"
expect 405 "a DELETE" -H "$AUTH" -X DELETE "$GWURL$S/records"
expect 400 "seq not a number" -H "$AUTH" "$GWURL$S/records?seq=abc"
expect 400 "a negative seq" -H "$AUTH" "$GWURL$S/records?seq=-1"
expect 400 "seq overflowing" -H "$AUTH" "$GWURL$S/records?seq=99999999999999999999999"
expect 400 "seq and offset" -H "$AUTH" "$GWURL$S/records?seq=0&offset=0"
expect 400 "limit=0" -H "$AUTH" "$GWURL$S/records?limit=0"
expect 400 "max_bytes empty" -H "$AUTH" "$GWURL$S/records?max_bytes="
expect 200 "limit over the cap (clamped)" -H "$AUTH" "$GWURL$S/records?limit=100000000"
expect 400 "a bad Last-Event-ID" -H "$AUTH" -H "Last-Event-ID: 12abc" "$GWURL$S/events"
expect 416 "a Last-Event-ID past the end" -H "$AUTH" -H "Last-Event-ID: 999999999" "$GWURL$S/events"
expect 414 "a path too long" -H "$AUTH" "$GWURL/v1/streams/logs/$(head -c 1100 /dev/zero | tr '\0' a)/records"
expect 431 "huge headers" -H "$AUTH" -H "X-Big: $(head -c 20000 /dev/zero | tr '\0' a)" "$GWURL$S/records"
expect 200 "/healthz needs no key" "$GWURL/healthz"
# The vanished reader's producer ends at its next write or star heartbeat
# (every 5 s), the deleted stream's at its end event.
nv_await 15 "the vanished reader's events to end" live 0
say "ok: a vanished events reader is dropped"
grep -q "gateway: 401 for GET" "$GWLOG" || fail "no log line for a 401"
grep -q "gateway: 400 for GET .*seq= and offset= must be decimal" "$GWLOG" || fail "no log line for a 400"

say "events readers of one live stream share one star subscription"
# 4 readers from the start of an empty stream, a 5th once it has
# history (its catch-up is its own, then it joins): every reader gets
# every byte once, and the star serves ONE subscription for the five
# (the Gateway's hub, gw/hub.h), closed when the last reader leaves.
# After the log checks above: the library's lines on the readers killed
# here share their rate limit with the refusals'.
F=/v1/streams/logs/fan
: > "$MNT/logs/fan"
star_gauge() { # star_gauge NAME: novafs_NAME on the star's /metrics
	curl -s -H "Authorization: Bearer $(cat "$SEC")" "http://127.0.0.1:$PORT/metrics" |
		awk -v m="novafs_$1" 'index($1, m "{") == 1 { print $2 }'
}
follows() { [ "$(curl -s "$GWURL/healthz" | python3 "$NV_TMP/gw.py" follows)" = "$1" ]; }
subs_are() { [ "$(star_gauge subscriptions)" = "$1" ]; }
nv_expect_eq "$(star_gauge subscriptions)" 0 "star subscriptions before the readers"
FANS=()
for i in 1 2 3 4; do
	curl -s -N -H "$AUTH" "$GWURL$F/events?offset=0" > "$NV_TMP/fan$i" &
	FANS+=($!)
	nv_bg "$!"
done
nv_await 10 "4 events responses" live 4
python3 "$NV_TMP/gw.py" write "$MNT/logs/fan" "$NV_TMP/fanindex" 20 4
curl -s -N -H "$AUTH" "$GWURL$F/events?offset=0" > "$NV_TMP/fan5" &
FANS+=($!)
nv_bg "$!"
nv_await 10 "5 events responses" live 5
python3 "$NV_TMP/gw.py" write "$MNT/logs/fan" "$NV_TMP/fanindex" 20 5
FSIZE=$(stat -c %s "$MNT/logs/fan")
for i in 1 2 3 4 5; do
	nv_await 20 "reader $i to reach byte $FSIZE" decoded "$NV_TMP/fan$i" 0 "$FSIZE"
	cmp "$MNT/logs/fan" "$NV_TMP/fan$i.bin" || fail "reader $i's bytes differ from the stream's"
done
nv_expect_eq "$(star_gauge subscriptions)" 1 "star subscriptions for 5 readers of one stream"
follows 1 || fail "the Gateway should run one shared follow"
say "ok: 5 readers, $FSIZE bytes each, none twice; the star serves 1 subscription ($(star_gauge subscribes_total) opened so far)"
for p in "${FANS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
nv_await 15 "the events responses to close" live 0
nv_await 15 "the shared follow to close" follows 0
nv_await 15 "the star's subscription to close" subs_are 0
say "ok: the last reader's leave closed the shared follow and the star's subscription"

say "a client too slow to take its page is dropped, its budget given back"
python3 "$NV_TMP/gw.py" write "$MNT/logs/app" "$NV_TMP/index2" 60 4
used() { curl -s "$GWURL/healthz" | python3 "$NV_TMP/gw.py" used; }
nv_expect_eq "$(used)" 0 "the fetch pool at rest"
# A reader with a 4 KiB receive window that reads nothing until told: the
# page cannot all leave, so it holds budget until the Gateway drops it
# (--client-timeout-s=2).
python3 "$NV_TMP/gw.py" slow "$GWPORT" "$KEY" "$S/records?seq=0" "$NV_TMP/stop1" > "$NV_TMP/slow.out" &
SLOW=$!
nv_bg "$SLOW"
holding() { [ "$(used)" -gt 0 ]; }
at_rest() { [ "$(used)" = 0 ]; }
nv_await 10 "the slow page to hold budget" holding
nv_await 15 "the fetch pool back at 0" at_rest
touch "$NV_TMP/stop1"
wait "$SLOW" || true
grep -q "client 127.0.0.1 dropped: it took nothing for 2 s" "$GWLOG" || fail "no log line for the dropped page reader"
PAGE=$(awk 'NR <= 1000 && !stop { if (n && n + $3 > 1048576) stop = 1; else n += $3 } END { print n }' "$NV_TMP/index2")
[ "$(cat "$NV_TMP/slow.out")" -lt "$PAGE" ] || fail "the slow reader got its whole page of $PAGE bytes"
say "ok: cut off after --client-timeout-s ($(cat "$NV_TMP/slow.out") of $PAGE bytes), the pool at 0 again"

say "an events reader too slow for the catch-up is dropped, its budget given back"
python3 "$NV_TMP/gw.py" write "$MNT/logs/app" "$NV_TMP/index2" 60 5
python3 "$NV_TMP/gw.py" slow "$GWPORT" "$KEY" "$S/events?seq=0" "$NV_TMP/stop2" > "$NV_TMP/slow.out" &
SLOW=$!
nv_bg "$SLOW"
nv_await 10 "the slow events to hold budget" holding
nv_await 15 "the slow events to be dropped" live 0
nv_await 5 "the fetch pool back at 0" at_rest
touch "$NV_TMP/stop2"
wait "$SLOW" || true
grep -Eq "(events client|client 127.0.0.1) dropped: it took nothing for 2 s" "$GWLOG" ||
	fail "no log line for the dropped events reader"
WANT=$(( $(stat -c %s "$MNT/logs/app") * 4 / 3 ))
[ "$(cat "$NV_TMP/slow.out")" -lt "$WANT" ] || fail "the slow events reader got everything"
say "ok: dropped after --client-timeout-s ($(cat "$NV_TMP/slow.out") of about $WANT bytes of events), the pool at 0 again"

say "a reader too slow for the live tail is let go by the shared follow; the other goes on"
T=/v1/streams/logs/tail
: > "$MNT/logs/tail"
curl -s -N -H "$AUTH" "$GWURL$T/events?offset=0" > "$NV_TMP/fast" &
FAST=$!
nv_bg "$FAST"
python3 "$NV_TMP/gw.py" slow "$GWPORT" "$KEY" "$T/events?offset=0" "$NV_TMP/stop3" > "$NV_TMP/slow3.out" &
SLOW=$!
nv_bg "$SLOW"
nv_await 10 "both readers joined" bash -c "curl -s '$GWURL/healthz' | grep -q '\"events\":2,\"follows\":1'"
# ~2.6 MB of records: more than the slow reader's 2 MiB queue of events.
python3 "$NV_TMP/gw.py" write "$MNT/logs/tail" "$NV_TMP/tailindex" 150 6
TSIZE=$(stat -c %s "$MNT/logs/tail")
nv_await 20 "the fast reader to reach byte $TSIZE" decoded "$NV_TMP/fast" 0 "$TSIZE"
cmp "$MNT/logs/tail" "$NV_TMP/fast.bin" || fail "the fast reader's bytes differ from the stream's"
nv_await 10 "the slow reader to be let go" grep -q "logs/tail: events reader let go by the shared follow" "$GWLOG"
nv_await 15 "the slow reader to be dropped" live 1
follows 1 || fail "the fast reader's shared follow should still run"
touch "$NV_TMP/stop3"
wait "$SLOW" || true
kill "$FAST" 2>/dev/null || true
wait "$FAST" 2>/dev/null || true
nv_await 15 "the fast reader's response to close" live 0
nv_await 5 "the fetch pool back at 0" at_rest
say "ok: the slow reader let go and dropped, the fast one got all $TSIZE bytes once, the pool at 0 again"

gw_alive
kill -TERM "$GW"
nv_await 15 "novagw to stop on SIGTERM" bash -c "! kill -0 $GW 2>/dev/null"
wait "$GW" && rc=0 || rc=$?
nv_expect_eq "$rc" 0 "novagw's exit status after SIGTERM"
say "PASS"
