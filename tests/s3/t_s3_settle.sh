#!/bin/bash
# t_s3_settle: settlement and reclamation on a real S3 store, the checks of
# t_settle that look into the store done through S3 itself (t_settle reads
# DATA_DIR/objects, which an S3 store does not have).  Needs
# NOVAFS_TEST_STORE (an s3:// URL with endpoint, access_key, secret_key;
# tests/s3/t_s3_suite.sh sets it); skipped without it.
#
# Three streams at once: hot (12 MiB as 64 KiB records, half random, half
# text), cold (200 small records) and fast (express, 300 records of
# 1-7 KiB).  Checked:
#  - each settles (user.nova.settled == user.nova.seq, no span ref left);
#  - every settled object a layout names is in the bucket; downloaded, each
#    is a well-formed bundle of exactly its stream's records, contiguous,
#    cut at the output cap (lib.sh's nv_check_objects on the copies);
#    hot has more than one (12 MiB at a 4 MiB cap);
#  - after the read grace the bucket holds exactly the settled objects the
#    layouts name (replaced tail revisions deleted) and no chain slot;
#  - stats slots_deleted == slots_written; range_copies or copy_fallbacks
#    show which way the server extended objects;
#  - the bytes read back are identical (page cache dropped), also after a
#    clean remount; `novactl fsck --full` passes;
#  - signed vending on a server that checks signatures (RGW under
#    t_s3_suite.sh; s3rver checks none): a plan's presigned URL (the
#    star's own SigV4 signer, plan_vending=signed, its expiry the read
#    grace) reads the object (200); the same URL with one hex digit of
#    X-Amz-Signature changed, and the URL once X-Amz-Expires has passed,
#    are 403, while a fresh plan's URL of the same object is 200 again.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
. "$(dirname "$0")/s3lib.sh"
nv_init
[ -n "${NOVAFS_TEST_STORE:-}" ] || nv_skip "NOVAFS_TEST_STORE is not set (run by tests/s3/t_s3_suite.sh)"
command -v jq >/dev/null || nv_skip "jq is not installed"

# The bucket and credentials of the store URL.
q=${NOVAFS_TEST_STORE#*\?}
BKT=${NOVAFS_TEST_STORE#s3://}
BKT=${BKT%%\?*}
qv() { tr '&' '\n' <<< "$q" | sed -n "s/^$1=//p" | head -n 1; }
EP=$(qv endpoint) AK=$(qv access_key) SK=$(qv secret_key)
[ -n "$EP" ] && [ -n "$AK" ] && [ -n "$SK" ] || nv_skip "NOVAFS_TEST_STORE has no endpoint/access_key/secret_key"
PFX=$(nv_store_prefix)

# s3_keys SUBPREFIX: the keys under PFX/SUBPREFIX (relative to PFX), sorted.
# One page of 1000 is enough here; a longer listing prints a marker line.
s3_keys() {
	local enc
	enc=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$PFX/$1")
	s3_curl "$EP" "$AK" "$SK" GET "/$BKT?list-type=2&max-keys=1000&prefix=$enc" |
		python3 -c '
import re, sys
x = sys.stdin.read()
p = sys.argv[1] + "/"
for k in sorted(re.findall(r"<Key>([^<]*)</Key>", x)):
    print(k[len(p):] if k.startswith(p) else k)
if "<IsTruncated>true" in x:
    print("(more)")' "$PFX"
}

GRACE=3
CAP_MIB=4
CAP=$((CAP_MIB * 1048576))
OPTS="settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=3,age_cap_express_s=3,output_cap_mib=$CAP_MIB,read_grace_s=$GRACE,audit_interval_ms=200"
# The star API with signed vending for the presigned URLs below; a port
# somebody takes before the daemon binds it is retried.
SEC=$NV_TMP/secret
head -c 32 /dev/urandom | base64 > "$SEC"
chmod 600 "$SEC"
for try in 1 2 3; do
	PORT=$(nv_free_port)
	nv_start_try "$OPTS,listen=127.0.0.1:$PORT,cluster_secret_file=$SEC,plan_vending=signed" && break
	[ "$try" -lt 3 ] || fail "the daemon did not start with listen=127.0.0.1:$PORT"
done
say "store: s3://$BKT/$PFX at $EP"

B=$MNT/s
mkdir "$B"
: > "$B/fast"
setfattr -n user.nova.class -v express "$B/fast"
python3 - "$NV_TMP" <<'PY'
import os, random, sys
d = sys.argv[1]
r = random.Random(4321)
with open(os.path.join(d, "hot.ref"), "wb") as f:
    for i in range(192):   # 12 MiB in 64 KiB records
        f.write(r.randbytes(32768) + (("hot record %06d " % i) * 3000).encode()[:32768])
with open(os.path.join(d, "cold.ref"), "w") as f:
    for i in range(200):
        f.write("cold %04d %s\n" % (i, "c" * (i * 37 % 300)))
with open(os.path.join(d, "fast.ref"), "w") as f:
    for i in range(300):
        f.write("fast %04d %s\n" % (i, "f" * (1024 + i * 211 % 6144)))
PY
cat > "$NV_TMP/append_lines.py" <<'PY'
import os, sys
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
for line in open(sys.argv[1], "rb"):
    if os.write(fd, line) != len(line):
        sys.exit("short write")
PY
T0=$EPOCHREALTIME
dd if="$NV_TMP/hot.ref" of="$B/hot" bs=64k oflag=append conv=notrunc status=none &
p1=$!
python3 "$NV_TMP/append_lines.py" "$NV_TMP/cold.ref" "$B/cold" &
p2=$!
python3 "$NV_TMP/append_lines.py" "$NV_TMP/fast.ref" "$B/fast" &
p3=$!
nv_bg "$p1"; nv_bg "$p2"; nv_bg "$p3"
for p in $p1 $p2 $p3; do nv_wait_bg "$p" || fail "a writer failed"; done
say "written in $(nv_elapsed "$T0") s"
nv_expect_eq "$(nv_xattr "$B/hot" user.nova.seq)" 192 "hot seq"
nv_expect_eq "$(nv_xattr "$B/cold" user.nova.seq)" 200 "cold seq"
nv_expect_eq "$(nv_xattr "$B/fast" user.nova.seq)" 300 "fast seq"
T0=$EPOCHREALTIME
nv_wait_settled 90 "$B/hot" "$B/cold" "$B/fast"
say "all three settled $(nv_elapsed "$T0") s after the writes"

# check_stream NAME: layout, then the objects fetched from S3 and checked.
check_stream() {
	local f=$B/$1 doc k
	doc=$(nv_layout "$f")
	nv_expect_eq "$(jq -r .span_refs <<< "$doc")" 0 "$1: span refs left"
	rm -rf "$NV_TMP/mirror"
	while read -r k; do
		mkdir -p "$NV_TMP/mirror/objects/$(dirname "$k")"
		s3_curl "$EP" "$AK" "$SK" GET "/$BKT/$PFX/$k" -o "$NV_TMP/mirror/objects/$k" ||
			fail "$1: settled object $k named by the layout is not in the bucket"
	done < <(jq -r '.settled_objects[].key' <<< "$doc")
	# nv_check_objects reads $DATA/objects: point it at the copies.
	say "$(DATA=$NV_TMP/mirror nv_check_objects "$f" "$CAP")"
}
for s in hot cold fast; do check_stream "$s"; done
nhot=$(nv_layout "$B/hot" | jq '.settled_objects | length')
((nhot >= 2)) || fail "hot: 12 MiB at a ${CAP_MIB} MiB cap settled into only $nhot object(s)"

# signed_url: a plan of cold from seq 0; its first entry's key and
# presigned URL into KEY and URL.
signed_url() {
	local code
	code=$(curl -s -o "$NV_TMP/plan.json" -w '%{http_code}' -H "Authorization: Bearer $(cat "$SEC")" \
		"http://127.0.0.1:$PORT/v1/streams/s/cold/plan?seq=0") || true
	[ "$code" = 200 ] || fail "plan of cold: HTTP $code: $(head -c 600 "$NV_TMP/plan.json")"
	KEY=$(jq -r '.entries[0].key // empty' "$NV_TMP/plan.json")
	URL=$(jq -r '.entries[0].url // empty' "$NV_TMP/plan.json")
	[ -n "$KEY" ] && [ -n "$URL" ] || fail "a signed plan of cold without key or URL: $(head -c 600 "$NV_TMP/plan.json")"
}
url_code() { curl -s -o /dev/null -w '%{http_code}' "$1" || true; }
signed_url
T_SIGNED=$EPOCHREALTIME
SIGNED_KEY=$KEY SIGNED_URL=$URL
EXPIRES=$(sed -n 's/.*[?&]X-Amz-Expires=\([0-9]*\).*/\1/p' <<< "$URL")
SIG=$(sed -n 's/.*[?&]X-Amz-Signature=\([0-9a-f]*\).*/\1/p' <<< "$URL")
[ -n "$EXPIRES" ] && ((${#SIG} == 64)) || fail "no X-Amz-Expires or X-Amz-Signature in $URL"
nv_expect_eq "$(url_code "$URL")" 200 "GET of the presigned URL of $KEY"
BAD_SIG=$([ "${SIG:0:1}" = 0 ] && echo 1 || echo 0)${SIG:1}
nv_expect_eq "$(url_code "${URL/X-Amz-Signature=$SIG/X-Amz-Signature=$BAD_SIG}")" 403 \
	"GET of that URL with its signature altered"

compare_all() {
	local s
	nv_drop_caches
	for s in hot cold fast; do
		nv_same_file "$B/$s" "$NV_TMP/$s.ref" "$1: $s reads back identical"
	done
}
compare_all "settled"

listed_keys() {
	local s
	for s in hot cold fast; do nv_layout "$B/$s" | jq -r '.settled_objects[].key'; done | sort
}
exact_objects() { [ "$(s3_keys streams/)" = "$(listed_keys)" ]; }
nv_await $((GRACE + 15)) "the bucket to hold exactly the settled objects the layouts name (extra: $(comm -13 <(listed_keys) <(s3_keys streams/) | tr '\n' ' '))" exact_objects
say "ok: the bucket holds exactly the $(listed_keys | wc -l) settled objects the layouts name"
no_slots() { [ -z "$(s3_keys chains/)" ]; }
nv_await $((GRACE + 15)) "every chain slot to be deleted from the bucket ($(s3_keys chains/ | wc -l) left)" no_slots
say "ok: no chain slot left in the bucket"
nv_expect_eq "$(nv_stat slots_deleted)" "$(nv_stat slots_written)" "stats slots_deleted == slots_written"
say "stats: settle_jobs=$(nv_stat settle_jobs) settled_objects=$(nv_stat settled_objects) range_copies=$(nv_stat range_copies) copy_fallbacks=$(nv_stat copy_fallbacks)"

# The presigned URL of above once its X-Amz-Expires has passed (a second
# more: X-Amz-Date is whole seconds; the waits above have usually used
# it up); a fresh plan names the same object and its URL reads it.
left=$(awk -v t="$T_SIGNED" -v e="$EXPIRES" -v now="$EPOCHREALTIME" 'BEGIN { d = t + e + 1 - now; printf "%.2f", (d > 0 ? d : 0) }')
sleep "$left"
say "waited $left s here for the URL's expiry"
nv_expect_eq "$(url_code "$SIGNED_URL")" 403 "GET of the presigned URL of $SIGNED_KEY after its $EXPIRES s"
signed_url
nv_expect_eq "$KEY" "$SIGNED_KEY" "the fresh plan's first object"
nv_expect_eq "$(url_code "$URL")" 200 "GET of the fresh plan's URL"

# Remounted without the API (the port is not kept).
nv_stop
nv_start "$OPTS"
for s in hot cold fast; do
	nv_expect_eq "$(nv_size "$B/$s")" "$(stat -c %s "$NV_TMP/$s.ref")" "after remount: st_size of $s"
done
compare_all "after remount"
nv_stop
nv_fsck --full
