#!/bin/bash
# t_store_faults.sh - the object store misbehaves (engine/store/fault.h):
# appends retry or fail with EIO without losing acknowledged records; a
# corrupt object is an EIO on read and a counted, logged event, never
# wrong bytes; other streams keep serving; nothing crashes.
set -euo pipefail
. "$TESTLIB"
nv_init

expect=$NV_TMP/expect
: > "$expect"

say "1. 30% of PUTs fail: every append still succeeds (retries)"
nv_start "store_faults=put_error=0.3:seed=11,put_timeout_s=20"
mkdir "$MNT/b"
for i in $(seq 1 300); do
	echo "rec $i" >> "$MNT/b/s" || fail "append $i failed under transient PUT errors"
	echo "rec $i" >> "$expect"
done
nv_same_file "$MNT/b/s" "$expect" "content of s"
stats=$(nv_xattr "$MNT" user.nova.stats)
retries=$(nv_json_get slot_put_retries <<< "$stats")
((retries > 0)) || fail "no PUT was retried (slot_put_retries=$retries): faults not injected?"
say "ok: 300 appends, $retries PUT retries, content intact"
# A second stream we will keep healthy below.
for i in $(seq 1 50); do echo "other $i" >> "$MNT/b/t"; done
seq 1 50 | sed 's/^/other /' > "$NV_TMP/expect_t"
nv_stop

say "2. flipped bits in one stream's slots: EIO, counted and logged; never wrong bytes"
# Each stream's records sit in their own slots here (written one after the
# other), but slots are shared per chain; corrupt every chain read and
# check that whatever is read is exactly right or an error.
nv_start "store_faults=flip=0.5:prefix=chains/:seed=5"
nv_drop_caches
ok=0 bad=0
for round in $(seq 1 10); do
	if cat "$MNT/b/s" > "$NV_TMP/got" 2> "$NV_TMP/err"; then
		cmp -s "$expect" "$NV_TMP/got" || fail "a read returned wrong bytes under corruption"
		ok=$((ok + 1))
	else
		grep -q "Input/output error" "$NV_TMP/err" ||
			fail "a corrupt read failed with '$(cat "$NV_TMP/err")', expected EIO"
		bad=$((bad + 1))
	fi
done
((bad > 0)) || fail "no read met corruption with flip=0.5"
stats=$(nv_xattr "$MNT" user.nova.stats)
corrupt=$(nv_json_get corrupt_objects <<< "$stats")
((corrupt > 0)) || fail "corrupt_objects=$corrupt after failed reads"
grep -q "failed verification" "$LOG" || fail "no log line names the corrupt object"
nv_alive || fail "daemon died under corruption"
# New data in another bucket (written now, hot) still serves.
mkdir "$MNT/c"
echo fresh >> "$MNT/c/u"
[ "$(cat "$MNT/c/u")" = fresh ] || fail "a fresh stream does not serve beside the corruption"
say "ok: $ok clean reads, $bad EIO, corrupt_objects=$corrupt, daemon alive"
nv_stop

say "3. disk full: appends fail with ENOSPC, the daemon stays up, acked data stays"
nv_start "store_faults=full=1,put_timeout_s=1"
out=$(echo nope 2>&1 >> "$MNT/b/s") && fail "an append succeeded on a full store"
grep -q "No space left on device" <<< "$out" || fail "append on a full store failed with '$out'"
nv_alive || fail "daemon died on a full store"
nv_same_file "$MNT/b/s" "$expect" "content of s"
nv_same_file "$MNT/b/t" "$NV_TMP/expect_t" "content of t"
say "ok: ENOSPC to the writer, streams intact"
nv_stop

say "4. slow and failing GETs: reads are right or EIO, never wrong"
nv_start "store_faults=get_error=0.3:latency_ms=2:seed=9"
nv_drop_caches
for round in $(seq 1 5); do
	if cat "$MNT/b/t" > "$NV_TMP/got" 2>/dev/null; then
		nv_same_file "$NV_TMP/got" "$NV_TMP/expect_t" "content of got"
	fi
done
nv_alive || fail "daemon died under GET errors"
nv_stop

say "5. after the faults: the store is consistent"
nv_start ""
nv_same_file "$MNT/b/s" "$expect" "content of s"
nv_same_file "$MNT/b/t" "$NV_TMP/expect_t" "content of t"
nv_stop

say "6. an unreachable store (every PUT: EAGAIN): the writer gets EIO, never EAGAIN"
nv_start "store_faults=put_error=1:put_errno=11,put_timeout_s=1"
out=$(echo nope 2>&1 >> "$MNT/b/s") && fail "an append succeeded on an unreachable store"
grep -q "Input/output error" <<< "$out" ||
	fail "append on an unreachable store failed with '$out', expected EIO (EAGAIN makes writers spin)"
nv_alive || fail "daemon died on an unreachable store"
nv_same_file "$MNT/b/s" "$expect" "content of s"
say "ok: EIO to the writer"
nv_stop

say "7. the store is back: the halted epoch settles, nothing acked is lost"
nv_start ""
nv_same_file "$MNT/b/s" "$expect" "content of s"
nv_stop
nv_fsck
say "PASS"
