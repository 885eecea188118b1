#!/bin/bash
# t_api: the star API (api/server.c) on -o listen= with
# -o cluster_secret_file=, driven with curl against a real mount.
#
# Checks: start-up refusals (listen= without a secret, a secret file
# group or others can read, a short one); appends through the API answered
# with seq and acked end, and present after a kill -9 (answered means
# durable); read back through the mount and through the API;
# the acked end equals st_size; locate answers the record holding a seq
# or a byte (400 for neither or both, 416 past the end); a subscription receives appends made
# through the mount, in order, exactly once; without or with a wrong
# credential every request is 401 and appends nothing; malformed requests
# (unknown paths, wrong methods, bad names, bad and past-the-end offsets,
# an empty, an oversize and an undeclared oversize body, huge headers,
# handoff and nudge bodies) get their 4xx (handoff to an unknown star
# 404), each logs a line; a well-formed nudge is 200 and logged, and the daemon stays up; /metrics;
# unmount ends an open subscription with a last "shutting_down" frame.
#
# Not checked here (one star): NOT_OWNER and the cluster client's redial
# from the mount (fs/remote.c): tests/etcd/t_stars.sh and
# t_stars_three.sh run them between real stars; tests/unit/test_api_client
# pins the redial rule and the stale-epoch refusal, tests/unit/test_fs_remote
# the errnos the mount maps them to (novafs(8) ERRORS).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
command -v curl >/dev/null || nv_skip "curl is not installed"

SEC=$NV_TMP/secret
head -c 32 /dev/urandom | base64 > "$SEC"
chmod 600 "$SEC"
SECRET=$(cat "$SEC")

say "start-up refusals"
nv_start_try "listen=127.0.0.1:1" && fail "listen= without cluster_secret_file= mounted"
grep -q 'listen=127.0.0.1:1 needs cluster_secret_file=' "$LOG" ||
	fail "no reason logged for listen= without a secret"
chmod 640 "$SEC"
nv_start_try "listen=127.0.0.1:1,cluster_secret_file=$SEC" &&
	fail "a group-readable secret file was accepted"
grep -q 'accessible by group or others' "$LOG" || fail "no reason logged for a 0640 secret"
chmod 600 "$SEC"
echo short > "$NV_TMP/short"
chmod 600 "$NV_TMP/short"
nv_start_try "listen=127.0.0.1:1,cluster_secret_file=$NV_TMP/short" &&
	fail "a 5-byte secret was accepted"
say "ok: refused without a secret, with a 0640 secret, with a short one"

# A free port, retried when somebody takes it between the pick and the bind.
for try in 1 2 3; do
	PORT=$(nv_free_port)
	nv_start_try "listen=127.0.0.1:$PORT,cluster_secret_file=$SEC,max_write_kib=4" && break
	[ "$try" -lt 3 ] || fail "the daemon did not start with listen=127.0.0.1:$PORT"
done
say "star API on 127.0.0.1:$PORT"
API=http://127.0.0.1:$PORT
AUTH="Authorization: Bearer $SECRET"

# api METHOD PATH [curl args...]: the status code; the body in $NV_TMP/body.
api() {
	local m=$1 p=$2
	shift 2
	curl -s -o "$NV_TMP/body" -w '%{http_code}' -X "$m" -H "$AUTH" "$@" "$API$p"
}
# expect STATUS WHAT METHOD PATH [curl args...]
expect() {
	local want=$1 what=$2 got
	shift 2
	got=$(api "$@") || true
	[ "$got" = "$want" ] || fail "$what: status $got, expected $want (body: $(cat "$NV_TMP/body" 2>/dev/null))"
	nv_alive || fail "the daemon died after: $what"
	say "ok: $what -> $want"
}
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$NV_TMP/body" "$1"; }

mkdir "$MNT/logs"
: > "$MNT/logs/app"
S=/v1/streams/logs/app

say "appends through the API"
: > "$NV_TMP/expected"
for i in 0 1 2; do
	expect 200 "append record $i" POST "$S/records" --data-binary "api record $i
"
	printf 'api record %s\n' "$i" >> "$NV_TMP/expected"
	nv_expect_eq "$(json 'd["seq"]')" "$i" "seq of record $i"
	nv_expect_eq "$(json 'd["end"]["seq"]')" "$((i + 1))" "acked end seq after record $i"
	nv_expect_eq "$(json 'd["end"]["byte"]')" "$(stat -c %s "$NV_TMP/expected")" \
		"acked end byte after record $i"
done

say "an answered append is durable: kill -9, restart, the records are there"
nv_crash
nv_start "listen=127.0.0.1:$PORT,cluster_secret_file=$SEC,max_write_kib=4"
nv_same_file "$MNT/logs/app" "$NV_TMP/expected" "the API's records after kill -9"

echo "mount record 3" >> "$MNT/logs/app"
echo "mount record 3" >> "$NV_TMP/expected"

say "read back through the mount and through the API"
nv_same_file "$MNT/logs/app" "$NV_TMP/expected" "the stream through the mount"
expect 200 "read all bytes" GET "$S/bytes?offset=0"
nv_same_file "$NV_TMP/body" "$NV_TMP/expected" "the stream through the API"
expect 200 "read 6 bytes at 4" GET "$S/bytes?offset=4&length=6"
nv_expect_eq "$(cat "$NV_TMP/body")" "record" "bytes 4..10"
SIZE=$(nv_size "$MNT/logs/app")
expect 200 "read at the acked end" GET "$S/bytes?offset=$SIZE"
nv_expect_eq "$(stat -c %s "$NV_TMP/body")" 0 "bytes at the acked end"
expect 200 "the acked end" GET "$S/end"
nv_expect_eq "$(json 'd["byte"]')" "$SIZE" "end byte equals st_size"
nv_expect_eq "$(json 'd["seq"]')" 4 "end seq"
# Records are "api record N\n" (13 bytes) for N < 3, then "mount record 3\n".
expect 200 "locate record 2" GET "$S/locate?seq=2"
nv_expect_eq "$(json 'd["seq"]') $(json 'd["byte"]')" "2 26" "record 2 starts at byte 26"
expect 200 "locate byte 30" GET "$S/locate?offset=30"
nv_expect_eq "$(json 'd["seq"]') $(json 'd["byte"]')" "2 26" "byte 30 is in record 2"
expect 200 "locate the end" GET "$S/locate?seq=4"
nv_expect_eq "$(json 'd["byte"]')" "$SIZE" "locate at the end answers the end"
expect 416 "locate past the end" GET "$S/locate?seq=5"
expect 400 "locate with seq and offset" GET "$S/locate?seq=1&offset=1"
expect 400 "locate with neither" GET "$S/locate"
expect 400 "locate with a bad number" GET "$S/locate?seq=x"
nv_expect_eq "$(nv_xattr "$MNT/logs/app" user.nova.seq)" 4 "user.nova.seq"
# Below a trim point: 416 trimmed (was a 500 for the -ERANGE behind it).
printf 'r0\nr1\nr2\n' > "$MNT/logs/trimmed"
setfattr -n user.nova.trim -v 2 "$MNT/logs/trimmed"
expect 416 "locate below the trim point" GET /v1/streams/logs/trimmed/locate?seq=0
nv_expect_eq "$(json 'd["error"]')" trimmed "the error code below the trim point"
expect 200 "locate at the trim point" GET /v1/streams/logs/trimmed/locate?seq=2
nv_expect_eq "$(json 'd["seq"]') $(json 'd["byte"]')" "2 6" "record 2 starts at byte 6"

say "a subscription receives appends made through the mount"
curl -s -N -H "$AUTH" "$API$S/subscribe?offset=$SIZE" > "$NV_TMP/frames" &
SUB=$!
nv_bg "$SUB"
# Subscribed once the server parked it: nothing to send yet, so wait for
# its connection in the daemon's socket table.
nv_await 10 "the subscription's connection" \
	bash -c "ss -Htn state established '( sport = :$PORT )' | grep -q ."
for i in 4 5 6; do
	echo "followed record $i" >> "$MNT/logs/app"
	echo "followed record $i" >> "$NV_TMP/followed"
done
# frames FILE: the data bytes of a frame stream, checked contiguous from
# $SIZE; the last error frame's code on stderr-free line "END <code>".
cat > "$NV_TMP/frames.py" <<'EOF'
import json, sys
raw = open(sys.argv[1], 'rb').read()
pos, want, out, end = 0, int(sys.argv[2]), b'', ''
while pos < len(raw):
    nl = raw.find(b'\n', pos)
    if nl < 0:
        break
    f = json.loads(raw[pos:nl]); pos = nl + 1
    if 'error' in f:
        end = f['error']; break
    if 'heartbeat' in f:
        continue
    if f['offset'] != want:
        sys.exit('frame at %d, expected %d' % (f['offset'], want))
    if pos + f['length'] > len(raw):
        break  # a frame still arriving
    out += raw[pos:pos + f['length']]; pos += f['length']; want += f['length']
sys.stdout.buffer.write(out)
if end:
    sys.stderr.write('END ' + end + '\n')
EOF
got_followed() { python3 "$NV_TMP/frames.py" "$NV_TMP/frames" "$SIZE" 2>/dev/null | cmp -s - "$NV_TMP/followed"; }
nv_await 10 "the subscription to deliver the 3 appends" got_followed
say "ok: the subscription delivered the mount's 3 appends in order, once"

say "401: no credential, a wrong one, another scheme; nothing appended"
SEQ=$(nv_xattr "$MNT/logs/app" user.nova.seq)
for hdr in "X-None: 1" "Authorization: Bearer wrong-secret-wrong-secret" \
	"Authorization: Basic $SECRET" "Authorization: Bearer ${SECRET}x"; do
	got=$(curl -s -o "$NV_TMP/body" -w '%{http_code}' -H "$hdr" --data-binary 'evil' \
		"$API$S/records") || true
	nv_expect_eq "$got" 401 "append with '${hdr%% *} ...'"
done
got=$(curl -s -o /dev/null -w '%{http_code}' "$API/metrics") || true
nv_expect_eq "$got" 401 "/metrics without a credential"
got=$(curl -s -o /dev/null -w '%{http_code}' "$API/no/such/path") || true
nv_expect_eq "$got" 401 "an unknown path without a credential (401 before anything)"
nv_expect_eq "$(nv_xattr "$MNT/logs/app" user.nova.seq)" "$SEQ" "user.nova.seq after the 401s"
grep -q 'api: star API: 401 for POST /v1/streams/logs/app/records from 127.0.0.1' "$LOG" ||
	fail "no log line for a 401"

say "malformed requests: 4xx, a log line, the daemon stays up"
# Refusals naming a stream share one log budget (NV_RATELIMIT_BURST = 10
# lines a minute): the two whose lines are checked go first.
head -c 5000 /dev/zero > "$NV_TMP/big"
expect 413 "5000-byte record over max_write_kib=4" POST "$S/records" --data-binary "@$NV_TMP/big"
expect 400 "offset not a number" GET "$S/bytes?offset=abc"
grep -q 'api: star API: 413 for POST /v1/streams/logs/app/records from 127.0.0.1: .*(stream logs/app)' "$LOG" ||
	fail "the log does not name the stream of a refused oversize record"
grep -q 'api: star API: 400 for GET /v1/streams/logs/app/bytes from 127.0.0.1: offset and length must be decimal numbers (stream logs/app)' "$LOG" ||
	fail "the log does not name the stream of a bad offset"
expect 413 "chunked 5000-byte record (no Content-Length)" POST "$S/records" \
	-H 'Transfer-Encoding: chunked' --data-binary "@$NV_TMP/big"
expect 404 "no such stream" GET "/v1/streams/logs/missing/end"
expect 404 "no such bucket" POST "/v1/streams/nobucket/app/records" --data-binary x
expect 400 "negative offset" GET "$S/bytes?offset=-1"
expect 400 "length overflowing u64" GET "$S/bytes?offset=0&length=99999999999999999999"
expect 416 "offset past the acked end" GET "$S/bytes?offset=999999"
expect 416 "subscription past the acked end" GET "$S/subscribe?offset=999999"
expect 400 "subscription offset not a number" GET "$S/subscribe?offset=1x"
expect 400 "empty record" POST "$S/records" --data-binary ''
expect 400 "handoff without a JSON body" POST "$S/handoff" --data-binary 'to=b'
expect 400 "handoff naming no star" POST "$S/handoff" --data-binary '{"to":"Not A Star"}'
expect 404 "handoff to a star nobody registered" POST "$S/handoff" --data-binary '{"to":"star-b"}'
nv_expect_eq "$(json 'd["error"]')" no_such_star "handoff's error"
expect 400 "nudge with a bad body" POST "/v1/nudge" --data-binary '[]'
expect 200 "nudge" POST "/v1/nudge" --data-binary '{"star":"star-b"}'
nv_expect_eq "$(json 'd["nudged"]')" True "nudge's answer"
nv_await 5 "the nudge is logged" grep -q "nudged by star star-b" "$LOG"
# Requests that name no stream (a budget of their own).
expect 404 "unknown path" GET "/v1/elsewhere"
expect 404 "unknown stream operation" GET "$S/nope"
expect 405 "GET of records" GET "$S/records"
expect 405 "POST of end" POST "$S/end" --data-binary x
expect 400 "bucket '..' (escaped)" GET "/v1/streams/%2E%2E/app/end"
expect 400 "stream '.' (escaped)" GET "/v1/streams/logs/%2E/end"
python3 -c 'print("X-Big: " + "a" * 40000)' > "$NV_TMP/hdr"
got=$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" -H "@$NV_TMP/hdr" "$API$S/end") || true
case $got in 4[0-9][0-9]) ;; *) fail "a 40 kB header: status $got, expected a 4xx" ;; esac
nv_alive || fail "the daemon died after a 40 kB header"
say "ok: a 40 kB header -> $got"
nv_expect_eq "$(nv_xattr "$MNT/logs/app" user.nova.seq)" "$SEQ" "user.nova.seq after the refusals"
# 14 refusals naming a stream and 6 that name none were made: rate
# limited, at most 10 + 10 lines (one budget each) reach the log.
n=$(grep -c 'api: star API: 4[0-9][0-9] for' "$LOG" | tr -d ' ') || true
n401=$(grep -c 'api: star API: 401 for' "$LOG" | tr -d ' ') || true
[ $((n - n401)) -le 16 ] && [ $((n - n401)) -ge 10 ] ||
	fail "$((n - n401)) refusal lines logged for 20 refusals; expected 10..16 (rate limited)"
say "ok: $((n - n401)) refusal lines logged for 20 refusals (rate limited)"

say "/metrics"
expect 200 "/metrics" GET /metrics
STAR=$(cat "$DATA/star-id")
grep -q "^# TYPE novafs_appends_total counter$" "$NV_TMP/body" || fail "no TYPE line for appends"
n=$(awk -v s="novafs_appends_total{star=\"$STAR\"}" '$1 == s { print $2 }' "$NV_TMP/body")
[ -n "$n" ] && [ "$n" -ge 4 ] || fail "novafs_appends_total is '$n', expected >= 4 (since the restart)"
grep -q "^novafs_backlog_budget_bytes{star=\"$STAR\"} [0-9]" "$NV_TMP/body" ||
	fail "no backlog budget gauge"
say "ok: /metrics counts $n appends"

say "deleting the stream ends its subscription with not_found"
: > "$MNT/logs/gone"
curl -s -N -H "$AUTH" "$API/v1/streams/logs/gone/subscribe" > "$NV_TMP/gone.frames" &
GONE=$!
nv_bg "$GONE"
nv_await 10 "the second subscription's connection" \
	bash -c "[ \$(ss -Htn state established '( sport = :$PORT )' | wc -l) -ge 2 ]"
rm "$MNT/logs/gone"
nv_await 10 "the subscriber of the deleted stream to exit" bash -c "! kill -0 $GONE 2>/dev/null"
end=$(python3 "$NV_TMP/frames.py" "$NV_TMP/gone.frames" 0 2>&1 >/dev/null)
nv_expect_eq "$end" "END not_found" "the deleted stream's subscription's last frame"

say "unmount ends the open subscription with shutting_down"
nv_stop
nv_await 10 "the subscriber to exit" bash -c "! kill -0 $SUB 2>/dev/null"
end=$(python3 "$NV_TMP/frames.py" "$NV_TMP/frames" "$SIZE" 2>&1 >/dev/null)
nv_expect_eq "$end" "END shutting_down" "the subscription's last frame"

say "api_max_conns=4: four parked subscriptions hold the star API; a fifth connection waits"
nv_start "listen=127.0.0.1:$PORT,cluster_secret_file=$SEC,api_max_conns=4"
declare -a HOLD
for i in 1 2 3 4; do
	curl -s -N -H "$AUTH" "$API$S/subscribe?offset=0" > /dev/null &
	HOLD[i]=$!
	nv_bg "${HOLD[i]}"
done
nv_await 10 "four subscriptions' connections" \
	bash -c "[ \$(ss -Htn state established '( sport = :$PORT )' | wc -l) -ge 4 ]"
code=$(api GET "$S/end" --max-time 2) || true
[ "$code" != 200 ] || fail "a fifth connection was answered with four subscriptions parked (api_max_conns=4)"
kill "${HOLD[1]}"
nv_await 10 "the star API to answer again once one subscription left" \
	bash -c "[ \"\$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' -H '$AUTH' '$API$S/end')\" = 200 ]"
say "ok: the fifth got '$code' in 2 s while four were parked; answered again after one left"
nv_stop
say "ok"
