#!/bin/bash
# t_plan: ReadPlan on the star API (GET .../plan) and its consumer
# (api/vend.h, through tests/integration/plan_read), on a real mount.
#
# Checked:
#  - a stream with nothing settled plans as one residual (no entries,
#    residual 0, no cursor); a settled stream of several objects plans as
#    contiguous entries from seq 0 whose keys are objects in the bucket,
#    each footer window ending in the bundle trailer (fetched with curl
#    for the signed form, read from the directory store for the raw one),
#    the residual at the acked end, no cursor; max=1 gives a cursor at the
#    first entry's end; the TTL is bounded by the read grace (plan_ttl_s
#    60 > read_grace_s);
#  - the consumer fetches the vended windows itself and its records are
#    byte for byte `cat` of the stream up to its residual; from a byte
#    offset it starts at the record holding it;
#  - across a settle (a tail extension: the last object is replaced by its
#    next revision): the old plan's object is still in the bucket (the
#    grace), the new plan names the same records under the new revision,
#    and the consumer's read is again byte for byte the stream; the old
#    revision is reclaimed after the grace;
#  - across a trim: the plan's trim is the trim point, its first entry
#    holds it, and the consumer's records are the stream's bytes from the
#    trim point on;
#  - hostile queries (seq and offset together, a bad number, max 0 or 257,
#    no credential, an unknown stream) are 4xx and the daemon stays up.
#
# With NOVAFS_TEST_STORE (an S3 store: tests/s3/t_s3_plan.sh on s3rver,
# tests/s3/t_s3_suite.sh on RGW) the star vends the signed form: every
# entry carries a presigned GET URL that curl fetches with no credential,
# and the consumer reads only through those; on a server that checks
# signatures (RGW; s3rver checks none) an unsigned GET and a tampered
# signature are 403.  On the directory store it vends the raw form, the
# consumer reads the bucket through its own dir: store handle, and
# plan_vending=signed (the directory store cannot presign) or a bad
# plan_vending value refuses to start.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init
command -v curl >/dev/null || nv_skip "curl is not installed"
command -v jq >/dev/null || nv_skip "jq is not installed"
[ -x "${PLAN_READ:-}" ] || nv_skip "PLAN_READ (tests/integration/plan_read) is not built"

SEC=$NV_TMP/secret
head -c 32 /dev/urandom | base64 > "$SEC"
chmod 600 "$SEC"
AUTH="Authorization: Bearer $(cat "$SEC")"
GRACE=4
if [ -n "${NOVAFS_TEST_STORE:-}" ]; then
	FORM=signed
	BUCKET_URL=-
	GRACE=30 # the URLs live as long: the checks below must fit in it
else
	FORM=raw
	BUCKET_URL=dir:$DATA/objects
fi
if [ "$FORM" = raw ]; then
	say "start-up refusals"
	nv_start_try "listen=127.0.0.1:1,cluster_secret_file=$SEC,plan_vending=sometimes" &&
		fail "plan_vending=sometimes mounted"
	grep -q 'plan_vending=sometimes: expected raw or signed' "$LOG" ||
		fail "no reason logged for plan_vending=sometimes"
	nv_start_try "listen=127.0.0.1:$(nv_free_port),cluster_secret_file=$SEC,plan_vending=signed" &&
		fail "plan_vending=signed mounted on the directory store"
	grep -q 'plan_vending=signed: the standard store .* cannot presign' "$LOG" ||
		fail "no reason logged for plan_vending=signed on the directory store"
	say "ok: a bad plan_vending and signed vending on the directory store are refused"
fi
OPTS="cluster_secret_file=$SEC,plan_vending=$FORM,plan_ttl_s=60,read_grace_s=$GRACE"
OPTS+=",settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=2,output_cap_mib=1"
OPTS+=",audit_interval_ms=200"
for try in 1 2 3; do
	PORT=$(nv_free_port)
	nv_start_try "listen=127.0.0.1:$PORT,$OPTS" && break
	[ "$try" -lt 3 ] || fail "the daemon did not start with listen=127.0.0.1:$PORT"
done
API=http://127.0.0.1:$PORT
say "star API on $API, $FORM vending"

# plan STREAM QUERY: the plan document into $NV_TMP/plan.json; fails the
# test unless 200.
plan() {
	local code
	code=$(curl -s -o "$NV_TMP/plan.json" -w '%{http_code}' -H "$AUTH" \
		"$API/v1/streams/t/$1/plan?$2") || true
	[ "$code" = 200 ] || fail "plan $1?$2: HTTP $code: $(cat "$NV_TMP/plan.json")"
}
pj() { jq -r "$1" "$NV_TMP/plan.json"; }

# read_plan STREAM seq|offset POS: the consumer's records into
# $NV_TMP/read.out, its summary into the variables next_seq, next_byte,
# records, first_seq, first_byte.
read_plan() {
	"$PLAN_READ" "127.0.0.1:$PORT" "$SEC" "$BUCKET_URL" t "$1" "$2" "$3" \
		> "$NV_TMP/read.out" 2> "$NV_TMP/read.err" ||
		fail "plan_read $1 $2 $3: $(cat "$NV_TMP/read.err")"
	eval "$(tail -n 1 "$NV_TMP/read.err")"
}

# expect_stream_bytes STREAM FROM: $NV_TMP/read.out is the stream's bytes
# [FROM, FROM + its size).
expect_stream_bytes() {
	local n
	n=$(stat -c %s "$NV_TMP/read.out")
	tail -c +$(($2 + 1)) "$MNT/t/$1" | head -c "$n" > "$NV_TMP/cat.out"
	cmp "$NV_TMP/read.out" "$NV_TMP/cat.out" ||
		fail "$1: the records read by plan differ from cat of [$2, $(($2 + n)))"
}

# object_ok KEY OFF LEN [URL]: the window ends with the bundle trailer.
object_ok() {
	local key=$1 off=$2 len=$3 url=${4:-}
	if [ -n "$url" ]; then
		local code
		code=$(curl -s -r "$off-$((off + len - 1))" -o "$NV_TMP/win" -w '%{http_code}' "$url") ||
			true
		[ "$code" = 206 ] || [ "$code" = 200 ] ||
			fail "curl of the presigned URL of $key: HTTP $code: $(head -c 600 "$NV_TMP/win")"
	else
		[ -f "$DATA/objects/$key" ] || fail "$key is not in the bucket"
		tail -c +$((off + 1)) "$DATA/objects/$key" | head -c "$len" > "$NV_TMP/win"
	fi
	[ "$(stat -c %s "$NV_TMP/win")" = "$len" ] || fail "$key: short footer window"
	[ "$(tail -c 32 "$NV_TMP/win" | head -c 8)" = NOVABNDL ] ||
		fail "$key: the footer window does not end in the bundle trailer"
}

# gone KEY: the object is no longer in the bucket (directory store only).
gone() { [ ! -e "$DATA/objects/$1" ]; }

mkdir "$MNT/t"
: > "$MNT/t/empty"
say "nothing settled: one residual"
plan empty "seq=0"
[ "$(pj '.entries | length')" = 0 ] || fail "an empty stream vended entries"
[ "$(pj .residual_seq)" = 0 ] || fail "an empty stream's residual is $(pj .residual_seq)"
[ "$(pj .cursor)" = null ] || fail "an empty stream's plan has a cursor"
[ "$(pj .vending)" = "$FORM" ] || fail "vending $(pj .vending), expected $FORM"
say "ok: entries [], residual 0, no cursor"

say "append about 1.2 MiB in records of varied sizes, wait until settled"
python3 - "$MNT/t/s" <<'PY'
import os, random, sys
rnd = random.Random(16)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(450):
    n = rnd.choice([1, 17, 700, 4096, 9000])
    os.write(fd, rnd.randbytes(n))  # incompressible: the output cap cuts objects
os.close(fd)
PY
nv_wait_settled 60 "$MNT/t/s"
SEQ=$(nv_xattr "$MNT/t/s" user.nova.seq)
SIZE=$(nv_size "$MNT/t/s")

plan s "seq=0"
N=$(pj '.entries | length')
((N >= 2)) || fail "a settled stream of $SIZE bytes (output cap 1 MiB) planned $N entries"
[ "$(pj .residual_seq)" = "$SEQ" ] || fail "residual $(pj .residual_seq), seq $SEQ"
[ "$(pj .residual_byte)" = "$SIZE" ] || fail "residual byte $(pj .residual_byte), size $SIZE"
[ "$(pj .cursor)" = null ] || fail "a plan under the cap has a cursor"
[ "$(pj .ttl_s)" = "$GRACE" ] || fail "ttl_s $(pj .ttl_s): not bounded by read_grace_s=$GRACE"
[ "$(pj '.entries[0].first_seq')" = 0 ] || fail "the first entry does not start at 0"
[ "$(pj '([.entries[].first_seq] | .[1:]) == ([.entries[].end_seq] | .[:-1])')" = true ] ||
	fail "the entries are not contiguous"
[ "$(pj '[.entries[] | .data[1] == .footer[0]] | all')" = true ] ||
	fail "an entry's data does not end at its footer"
while read -r key off len url; do
	object_ok "$key" "$off" "$len" "$url"
done < <(pj '.entries[] | "\(.key) \(.footer[0]) \(.footer[1]) \(.url // "")"')
if [ "$FORM" = raw ]; then
	[ "$(pj '[.entries[] | has("url")] | any')" = false ] || fail "a raw plan carries URLs"
else
	[ "$(pj '[.entries[] | has("url")] | all')" = true ] || fail "a signed plan lacks URLs"
	# On a server that checks credentials (an unsigned GET is 403; s3rver
	# checks none), the signature is what grants the read: a tampered one
	# is refused.
	code=$(curl -s -o /dev/null -w '%{http_code}' -r 0-0 "$(pj '.entries[0].url | sub("\\?.*"; "")')") ||
		true
	if [ "$code" = 403 ]; then
		BAD=$(pj '.entries[0].url | sub("X-Amz-Signature=[0-9a-f]*"; "X-Amz-Signature=" + ("0" * 64))')
		code=$(curl -s -o /dev/null -w '%{http_code}' -r 0-0 "$BAD") || true
		[ "$code" = 403 ] || fail "a presigned URL with a tampered signature answered $code"
		say "ok: an unsigned GET and a tampered signature are 403"
	else
		say "the server answers an unsigned GET $code: it checks no signature"
	fi
fi
cp "$NV_TMP/plan.json" "$NV_TMP/plan.old"
say "ok: $N contiguous entries to the residual $SEQ, each footer a bundle trailer"

plan s "seq=0&max=1"
[ "$(pj '.entries | length')" = 1 ] || fail "max=1 vended $(pj '.entries | length')"
[ "$(pj .cursor)" = "$(pj '.entries[0].end_seq')" ] || fail "max=1: cursor $(pj .cursor)"
say "ok: max=1 gives a cursor at the first entry's end"

read_plan s seq 0
[ "$next_seq" = "$SEQ" ] && [ "$next_byte" = "$SIZE" ] && [ "$records" = "$SEQ" ] ||
	fail "plan_read: next $next_seq/$next_byte, $records records; stream $SEQ/$SIZE"
expect_stream_bytes s 0
HALF=$((SIZE / 2))
read_plan s offset "$HALF"
((first_byte <= HALF && next_byte == SIZE)) ||
	fail "plan_read from byte $HALF: first byte $first_byte, next $next_byte"
expect_stream_bytes s "$first_byte"
say "ok: the consumer's records are cat of the stream (from 0 and from byte $HALF)"

say "across a settle: a tail extension replaces the last object"
OLDKEY=$(jq -r '.entries[-1].key' "$NV_TMP/plan.old")
for i in 1 2 3 4 5; do printf 'tail record %s\n' "$i" >> "$MNT/t/s"; done
nv_wait_settled 60 "$MNT/t/s"
SEQ=$(nv_xattr "$MNT/t/s" user.nova.seq)
SIZE=$(nv_size "$MNT/t/s")
plan s "seq=0"
NEWKEY=$(pj '.entries[-1].key')
[ "$NEWKEY" != "$OLDKEY" ] || fail "the tail extension kept the key $OLDKEY"
[ "$(pj '.entries[-1].first_seq')" = "$(jq -r '.entries[-1].first_seq' "$NV_TMP/plan.old")" ] ||
	fail "the new revision does not start where the old one did"
[ "$(pj '.entries[-1].revision')" -gt "$(jq -r '.entries[-1].revision' "$NV_TMP/plan.old")" ] ||
	fail "the new last object is not a later revision"
[ "$(pj .residual_seq)" = "$SEQ" ] || fail "residual $(pj .residual_seq) after the settle, seq $SEQ"
if [ "$FORM" = raw ]; then
	object_ok "$OLDKEY" "$(jq -r '.entries[-1].footer[0]' "$NV_TMP/plan.old")" \
		"$(jq -r '.entries[-1].footer[1]' "$NV_TMP/plan.old")"
fi
read_plan s seq 0
[ "$next_byte" = "$SIZE" ] || fail "plan_read after the settle: next byte $next_byte, size $SIZE"
expect_stream_bytes s 0
say "ok: same records under revision $(pj '.entries[-1].revision'); the old object still there"
if [ "$FORM" = raw ]; then
	nv_await 30 "the replaced revision to be reclaimed after the grace" gone "$OLDKEY"
	say "ok: the replaced revision reclaimed after the grace"
fi

say "across a trim"
T=$((SEQ / 2))
setfattr -n user.nova.trim -v "$T" "$MNT/t/s"
plan s "seq=0"
[ "$(pj .trim.seq)" = "$T" ] || fail "plan trim $(pj .trim.seq), trimmed at $T"
(($(pj '.entries[0].first_seq') <= T && T < $(pj '.entries[0].end_seq'))) ||
	fail "the first entry [$(pj '.entries[0].first_seq'), $(pj '.entries[0].end_seq')) does not hold the trim point $T"
TB=$(pj .trim.byte)
read_plan s seq 0
[ "$first_seq" = "$T" ] && [ "$first_byte" = "$TB" ] && [ "$next_byte" = "$SIZE" ] ||
	fail "plan_read after the trim: first $first_seq/$first_byte (trim $T/$TB), next byte $next_byte"
expect_stream_bytes s "$TB"
say "ok: the plan starts at the trim point $T; records are the stream from byte $TB"

say "hostile queries"
q() {
	local want=$1 got
	shift
	got=$(curl -s -o /dev/null -w '%{http_code}' "$@") || true
	[ "$got" = "$want" ] || fail "curl $*: $got, expected $want"
	nv_alive || fail "the daemon died after curl $*"
}
q 400 -H "$AUTH" "$API/v1/streams/t/s/plan?seq=1&offset=2"
q 400 -H "$AUTH" "$API/v1/streams/t/s/plan?seq=-1"
q 400 -H "$AUTH" "$API/v1/streams/t/s/plan?seq=99999999999999999999999"
q 400 -H "$AUTH" "$API/v1/streams/t/s/plan?max=0"
q 400 -H "$AUTH" "$API/v1/streams/t/s/plan?max=257"
q 401 "$API/v1/streams/t/s/plan?seq=0"
q 404 -H "$AUTH" "$API/v1/streams/t/nope/plan"
q 405 -H "$AUTH" -X POST "$API/v1/streams/t/s/plan"
say "ok: 400, 401, 404, 405; the daemon is up"
curl -s -H "$AUTH" "$API/metrics" > "$NV_TMP/metrics"
awk '/^novafs_plans_total/ { n = $2 } END { exit !(n >= 5) }' "$NV_TMP/metrics" ||
	fail "/metrics: novafs_plans_total is not counting ($(grep plans "$NV_TMP/metrics"))"
awk '/^novafs_plan_entries_total/ { n = $2 } END { exit !(n >= 5) }' "$NV_TMP/metrics" ||
	fail "/metrics: novafs_plan_entries_total is not counting"
say "ok: /metrics counts plans and vended entries"
nv_stop
