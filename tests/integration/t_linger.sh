#!/bin/bash
# t_linger.sh - per-class flight linger (novafs(8) -o linger_standard_us,
# -o linger_express_us): each class's chain runs with its own value, and
# linger_us stays the default of both.  The start-up log names the linger
# each chain was started with (engine/star.c start_class()).
set -euo pipefail
. "$TESTLIB"
nv_init

# chain_linger CLASS: the linger (us) the last start gave CLASS's chain.
chain_linger() {
	sed -n "s/.* $1 chain epoch [0-9]* started (linger \([0-9]*\) us).*/\1/p" "$LOG" | tail -n 1
}

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
nv_expect_eq "$(chain_linger standard)" 50000 "standard linger"
nv_expect_eq "$(chain_linger express)" 1000 "express linger (the linger_us default)"
mkdir "$MNT/b"
echo one >> "$MNT/b/s" || fail "append under a 50 ms standard linger failed"
nv_expect_eq "$(cat "$MNT/b/s")" one "content"
nv_stop
