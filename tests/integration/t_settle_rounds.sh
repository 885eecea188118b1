#!/bin/bash
# t_settle_rounds: a hot stream settles once per round with everything it
# accumulated, not just the batch that crossed the trigger (seeds,
# settlement.txt "The transit window").  The age cap is 10 minutes, so
# anything left to it stays in transit during the test, and what a round
# leaves behind below the trigger rightly waits for it (settling it would
# mint the sub-trigger fragments the policy forbids).  With a trigger of
# 1 MiB and 64 KiB records:
#  - a 12 MiB burst into one stream ends with less than the trigger
#    un-settled (16 records) within a few lingers;
#  - so does a stream fed 64 KiB every 50 ms for 6 s (crossing, settling
#    and crossing again while it is written), in more than one settle job;
#  - the bytes read back are the bytes written; fsck --full is clean.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
nv_init

nv_start "settle_trigger_mib=1,settle_linger_s=1,age_cap_standard_s=600,age_cap_express_s=600,read_grace_s=1,audit_interval_ms=200"
mkdir "$MNT/b"

# in_transit_below_trigger FILE: fewer than 16 of its 64 KiB records are
# not settled.
in_transit_below_trigger() {
	local seq settled
	seq=$(nv_xattr "$1" user.nova.seq) || return 1
	settled=$(nv_xattr "$1" user.nova.settled) || return 1
	((seq - settled < 16))
}

say "a 12 MiB burst in 64 KiB records"
head -c $((12 << 20)) /dev/urandom > "$NV_TMP/burst"
dd if="$NV_TMP/burst" of="$MNT/b/burst" bs=64k oflag=append conv=notrunc status=none ||
	fail "dd into b/burst"
nv_expect_eq "$(nv_size "$MNT/b/burst")" $((12 << 20)) "size of b/burst"
nv_await 20 "b/burst to settle all but less than the trigger" in_transit_below_trigger "$MNT/b/burst"
say "ok: b/burst settled up to seq $(nv_xattr "$MNT/b/burst" user.nova.settled) of $(nv_xattr "$MNT/b/burst" user.nova.seq)"
nv_same_file "$MNT/b/burst" "$NV_TMP/burst" "b/burst after settling"

say "a steady writer: 64 KiB every 50 ms for 6 s"
jobs0=$(nv_stat settle_jobs)
: > "$NV_TMP/steady"
end=$((SECONDS + 6))
while ((SECONDS < end)); do
	head -c 65536 /dev/urandom > "$NV_TMP/rec"
	dd if="$NV_TMP/rec" of="$MNT/b/steady" bs=64k oflag=append conv=notrunc status=none ||
		fail "append to b/steady"
	cat "$NV_TMP/rec" >> "$NV_TMP/steady"
	sleep 0.05
done
say "steady: $(nv_size "$MNT/b/steady") bytes written"
nv_await 20 "b/steady to settle all but less than the trigger" in_transit_below_trigger "$MNT/b/steady"
jobs1=$(nv_stat settle_jobs)
((jobs1 - jobs0 >= 2)) || fail "steady: one settle job ($jobs0 -> $jobs1); expected a round per linger"
say "ok: b/steady settled up to seq $(nv_xattr "$MNT/b/steady" user.nova.settled) of $(nv_xattr "$MNT/b/steady" user.nova.seq) in $((jobs1 - jobs0)) settle jobs"
nv_same_file "$MNT/b/steady" "$NV_TMP/steady" "b/steady after settling"

nv_stop
nv_fsck --full
