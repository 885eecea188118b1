#!/bin/bash
# t_fsck.sh - novactl fsck finds metastore damage (issue 12 item 10):
# 64 damaged bytes of meta.db are reported through SQLite's own
# integrity check; a lost batch marker is a violation that names the
# stream and its byte range; a settled object nothing names is leaked
# unless a settle's commit is pending for it; a healthy store passes, and status opens
# with a summary (and has --json).  The daemon refuses to start on the
# damaged meta.db (PRAGMA quick_check at open), naming the file, fsck and
# a recovery path, unless -o meta_check=warn; a healthy one mounts.
set -euo pipefail
. "$TESTLIB"
nv_init
command -v sqlite3 >/dev/null || python3 -c 'import sqlite3' ||
	nv_skip "neither sqlite3 nor python3's sqlite3"

say "1. streams that stay unsettled (their batch markers stay), clean close"
nv_start "settle_trigger_mib=1024,age_cap_standard_s=3600"
for b in b c; do
	mkdir "$MNT/$b"
	for i in $(seq 1 40); do
		for k in 1 2 3; do echo "rec $i $k" >> "$MNT/$b/s$i"; done
	done
done
nv_stop
nv_fsck
cp -a "$DATA" "$NV_TMP/pristine"

say "2. novactl status: a summary first, and --json"
"$NOVACTL" status -o "data_dir=$DATA" > "$NV_TMP/status.out"
head -n 1 "$NV_TMP/status.out" | grep -q "not mounted" ||
	fail "status does not open with the summary: $(head -n 3 "$NV_TMP/status.out")"
grep -q "2 buckets, 80 streams" "$NV_TMP/status.out" ||
	fail "status summary lacks the counts: $(head -n 4 "$NV_TMP/status.out")"
"$NOVACTL" status --json -o "data_dir=$DATA" > "$NV_TMP/status.json"
[ "$(nv_json_get streams < "$NV_TMP/status.json")" = 80 ] ||
	fail "status --json: $(cat "$NV_TMP/status.json")"
[ "$(nv_json_get mounted < "$NV_TMP/status.json")" = False ] ||
	[ "$(nv_json_get mounted < "$NV_TMP/status.json")" = false ] ||
	fail "status --json: mounted is not false: $(cat "$NV_TMP/status.json")"
say "ok: status"

say "3. a lost batch marker: a violation naming the stream and bytes"
python3 - "$DATA/meta.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = [r[0] for r in db.execute("select k from kv where substr(k, 1, 5) = X'026d726b00' order by k")]
assert rows, "no marker rows"
db.execute("delete from kv where k = ?", (rows[len(rows) // 2],))
db.commit()
PY
rc=0
"$NOVACTL" fsck -o "data_dir=$DATA" > "$NV_TMP/fsck.out" 2>&1 || rc=$?
((rc == 1)) || fail "fsck after a lost marker exited with $rc: $(tail -n 5 "$NV_TMP/fsck.out")"
grep -E "VIOLATION [bc]/s[0-9]+: records [0-9]+\.\.[0-9]+, bytes \[[0-9]+, [0-9]+\).*no batch marker" \
	"$NV_TMP/fsck.out" > /dev/null ||
	fail "no violation names the stream of the lost marker: $(head -n 5 "$NV_TMP/fsck.out")"
say "ok: $(grep -c VIOLATION "$NV_TMP/fsck.out") violation(s), e.g. $(grep -m1 VIOLATION "$NV_TMP/fsck.out")"

say "3b. settled objects nothing names: pending a settle's commit (a note) or leaked"
rm -rf "$DATA"
cp -a "$NV_TMP/pristine" "$DATA"
# b/s1's records from seq 0 are still a span ref's: an object there is
# a settle's output awaiting its commit.  One past its refs, or of a
# stream that does not exist, nothing will ever adopt.
id=$("$NOVACTL" layout -o "data_dir=$DATA" b/s1 | nv_json_get stream)
objs=$DATA/objects/streams/b
mkdir -p "$objs/$id/0000000000000001" "$objs/999999/0000000000000001"
echo pending > "$objs/$id/0000000000000001/0000000000000000"
echo leaked > "$objs/$id/0000000000000001/0000000000100000"
echo leaked > "$objs/999999/0000000000000001/0000000000000000"
rc=0
"$NOVACTL" fsck -o "data_dir=$DATA" > "$NV_TMP/fsck.out" 2>&1 || rc=$?
((rc == 1)) || fail "fsck with two leaked objects exited with $rc: $(tail -n 5 "$NV_TMP/fsck.out")"
grep -q "^note .*streams/b/$id/0000000000000001/0000000000000000: published by a settle whose commit is not done" \
	"$NV_TMP/fsck.out" || fail "the pending object is not a note: $(grep streams/ "$NV_TMP/fsck.out")"
for k in "$id/0000000000000001/0000000000100000" 999999/0000000000000001/0000000000000000; do
	grep -q "^VIOLATION streams/b/$k: a settled object nothing names (leaked)" "$NV_TMP/fsck.out" ||
		fail "the leaked object $k is not a violation: $(grep streams/ "$NV_TMP/fsck.out")"
done
say "ok: $(grep -c "VIOLATION streams/" "$NV_TMP/fsck.out") leaked, 1 pending"

say "4. 64 damaged bytes of meta.db: fsck reports the metastore"
rm -rf "$DATA"
cp -a "$NV_TMP/pristine" "$DATA"
size=$(stat -c %s "$DATA/meta.db")
# The start of a page in the middle: its b-tree page header.
off=$((size * 2 / 3 / 4096 * 4096))
python3 -c "
import sys
f = open(sys.argv[1], 'r+b'); f.seek(int(sys.argv[2])); f.write(b'\xa5' * 64); f.close()" \
	"$DATA/meta.db" "$off"
rc=0
"$NOVACTL" fsck -o "data_dir=$DATA" > "$NV_TMP/fsck.out" 2>&1 || rc=$?
((rc != 0)) || fail "fsck passed a damaged meta.db: $(tail -n 3 "$NV_TMP/fsck.out")"
grep -q "VIOLATION metastore sqlite:$DATA/meta.db" "$NV_TMP/fsck.out" ||
	fail "fsck did not report the metastore damage: $(head -n 5 "$NV_TMP/fsck.out")"
say "ok: $(grep -m2 "VIOLATION metastore" "$NV_TMP/fsck.out" | tail -n 1)"

say "5. the daemon refuses to mount the damaged meta.db, naming it and fsck"
cp "$DATA/meta.db" "$NV_TMP/damaged.db"
if nv_start_try ""; then
	fail "the daemon mounted a damaged meta.db"
fi
((NV_EXIT_RC == 1)) || fail "refused start exited with $NV_EXIT_RC, expected 1"
line=$(grep "is damaged (" "$LOG" | tail -n 1)
[ -n "$line" ] || fail "no line says the metastore is damaged: $(tail -n 5 "$LOG")"
for want in "$DATA/meta.db" "refusing to start" "novactl fsck -o data_dir=$DATA" \
	".recover" "meta_check=warn"; do
	grep -qF -- "$want" <<< "$line" || fail "the refusal does not say '$want': $line"
done
cmp -s "$DATA/meta.db" "$NV_TMP/damaged.db" || fail "the refused start changed meta.db"
say "ok: refused: $line"

say "6. -o meta_check=warn starts on it anyway, and says so"
nv_start "meta_check=warn"
grep -q "starting on it (meta_check=warn)" "$LOG" || fail "meta_check=warn did not log the damage"
nv_stop
NV_OPTS=

say "7. a healthy meta.db still mounts (the check passes)"
rm -rf "$DATA"
cp -a "$NV_TMP/pristine" "$DATA"
: > "$LOG"
nv_start ""
[ "$(cat "$MNT/b/s1")" = "$(printf 'rec 1 %s\n' 1 2 3)" ] || fail "b/s1 reads wrong"
grep -q "is damaged" "$LOG" && fail "a healthy meta.db was called damaged: $(grep damaged "$LOG")"
nv_stop
say "PASS"
