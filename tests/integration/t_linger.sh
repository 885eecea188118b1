#!/bin/bash
# t_linger.sh - per-class flight linger (novafs(8) -o linger_standard_us,
# -o linger_express_us): each class's chain runs with its own value, and
# linger_us stays the default of both.  The start-up log names the linger
# each chain was started with (engine/star.c start_class()).  Unset,
# linger_us is chosen by the store: 0 when chain slots go to segment files
# of the data directory's own store, 1000 on slot files or S3.
set -euo pipefail
. "$TESTLIB"
nv_init

# chain_linger CLASS: the linger (us) the last start gave CLASS's chain,
# with " idle" when it waits on an idle chain too (10 ms and more).
chain_linger() {
	sed -n "s/.* $1 chain epoch [0-9]* started (linger \([0-9]*\) us\(, also when\)\{0,1\}\( idle\)\{0,1\}).*/\1\3/p" "$LOG" | tail -n 1
}

# The unset linger_us under this run's store: 0 on segment files, else
# 1000 (NOVAFS_TEST_STORE puts the store on S3, NOVAFS_TEST_SEGMENTS=0 on
# slot files: lib.sh).
auto=0
case "$(nv_store_opt)$(nv_segments_opt)" in
*store=* | *slot_segments=0*) auto=1000 ;;
esac

say "0. linger_us unset: by the store ($auto us here)"
nv_start
nv_expect_eq "$(chain_linger standard)" "$auto" "standard linger (unset)"
nv_expect_eq "$(chain_linger express)" "$auto" "express linger (unset)"
nv_stop
if [ "$auto" = 0 ]; then
	# The same data directory with slot files: a PUT per flight, 1 ms.
	nv_start "slot_segments=0"
	nv_expect_eq "$(chain_linger standard)" 1000 "standard linger (unset, slot files)"
	nv_stop
fi

say "1. linger_us alone: both classes"
nv_start "linger_us=3000"
nv_expect_eq "$(chain_linger standard)" 3000 "standard linger"
nv_expect_eq "$(chain_linger express)" 3000 "express linger"
nv_stop

say "2. per class: each chain its own, the other keeps linger_us"
nv_start "linger_us=3000,linger_express_us=0"
nv_expect_eq "$(chain_linger standard)" 3000 "standard linger"
nv_expect_eq "$(chain_linger express)" 0 "express linger"
nv_stop
nv_start "linger_standard_us=50000"
nv_expect_eq "$(chain_linger standard)" "50000 idle" "standard linger (a cost setting: also when idle)"
nv_expect_eq "$(chain_linger express)" "$auto" "express linger (linger_us unset: by the store)"
mkdir "$MNT/b"
echo one >> "$MNT/b/s" || fail "append under a 50 ms standard linger failed"
nv_expect_eq "$(cat "$MNT/b/s")" one "content"
# Ten writers, one record each at once, under the 50 ms standard linger:
# they share flights and every append returns (the sealer seals an idle
# chain's flight when the linger has passed; that an idle chain's flight
# waits at all is pinned by test_chain_seal_idle_waits_linger).
f0=$(nv_stat flights)
pids=()
for i in 0 1 2 3 4 5 6 7 8 9; do
	echo "w$i" >> "$MNT/b/w$i" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "an append under a 50 ms linger failed"; done
flights=$(( $(nv_stat flights) - f0 ))
say "10 appends on an idle chain under a 50 ms linger: $flights flight(s)"
((flights < 10)) || fail "10 appends took $flights flights under a 50 ms linger"
nv_stop
