#!/bin/bash
# t_partition.sh - a network partition between one star and everything
# else (etcd and the other star), made with nft drop rules inside a
# network namespace; star_lease_s=2, put_timeout_s=2.
#
# Star A runs in the namespace NS (entered with nsenter --net only, so
# its FUSE mount is in the host's mount namespace), reached over a veth
# pair: A listens on the namespace's address, star B and one etcd member
# (started here, listening on the host's veth address) on the host's.
# Both stars share one directory store.
#   1. A leads stream b/p with writer wa on A's mount; writer wb on B's
#      mount appends to it too (B's cluster client redials A).
#   2. Partition: in NS, nft drops every packet to or from the host's
#      veth address.  A acks nothing after its lease deadline (no ack of
#      wa later than the partition + star_lease_s + 1 s of scheduling, and
#      none after B's first ack as the leader, until the heal); B takes
#      the stream after A's lease expired (its
#      take fences A's epoch: "fenced at slot" in B's log) and wb goes on.
#   3. Heal (the nft table goes): A finds its registry lease lost,
#      registers again, and its mount sends wa's appends to B.
#   4. Both mounts read identical bytes; every acked record of wa and wb
#      is there exactly once, in each writer's order, nothing nobody
#      wrote (tests/etcd/stars_check.py).
# Needs root, ip (iproute2), nsenter and nft (nftables, installed when
# missing); 77 (skipped) when namespaces or nft cannot be had.  The EXIT
# trap kills every process started here by PID and removes the
# namespace and the veth pair.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CHECK=$here/stars_check.py
TTL=2
nv_init

[ "$(id -u)" = 0 ] || nv_skip "needs root (network namespaces)"
if ! command -v nft >/dev/null 2>&1; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nftables \
		> "$NV_TMP/apt.log" 2>&1 || nv_skip "nftables is not installed and cannot be"
fi
for c in ip nsenter nft etcd etcdctl; do
	command -v "$c" >/dev/null 2>&1 || nv_skip "$c is missing"
done

NS=nvpart$$
VH=nvp$$h
VN=nvp$$n
NSNET=/run/netns/$NS
A_PID= B_PID= E_PID=
WPIDS=()
part_cleanup() {
	local rc=$? p
	set +e
	for p in "${WPIDS[@]}"; do nv_is_own "$p" && kill -9 "$p" 2>/dev/null; done
	for p in $A_PID $B_PID; do
		nv_is_own "$p" || continue
		kill -CONT "$p" 2>/dev/null || true
		kill -9 "$p" 2>/dev/null || true
		nv_wait_pid_exit "$p" 10 || true
	done
	for m in "${MA:-}" "${MB:-}"; do
		[ -n "$m" ] && grep -q " $m " /proc/mounts &&
			{ timeout 10 fusermount3 -uz "$m" 2>/dev/null || true; }
	done
	[ -n "$E_PID" ] && nv_is_own "$E_PID" && { kill -9 "$E_PID" 2>/dev/null; wait "$E_PID" 2>/dev/null; }
	ip link del "$VH" 2>/dev/null || true
	[ -e "$NSNET" ] && ip netns del "$NS" 2>/dev/null
	(exit $rc)
	nv_cleanup
}
trap part_cleanup EXIT

# A /24 of 10.213.0.0/16 nobody on this host uses.
for _ in $(seq 50); do
	NET=10.213.$((RANDOM % 250 + 1))
	ip -4 -o addr | grep -q " $NET\." || break
done
IPH=$NET.1
IPN=$NET.2
ip netns add "$NS" || nv_skip "cannot make a network namespace"
ip link add "$VH" type veth peer name "$VN" || nv_skip "cannot make a veth pair"
ip link set "$VN" netns "$NS"
ip addr add "$IPH/24" dev "$VH"
ip link set "$VH" up
nsenter --net="$NSNET" ip addr add "$IPN/24" dev "$VN"
nsenter --net="$NSNET" ip link set "$VN" up
nsenter --net="$NSNET" ip link set lo up
nsenter --net="$NSNET" nft add table inet novapart || nv_skip "nft does not work in a namespace"
nsenter --net="$NSNET" nft delete table inet novapart

# One etcd member on the host's veth address (and loopback, for etcdctl);
# on new ports when it exits before answering (a port taken meanwhile).
etcd_up() { etcdctl --endpoints="http://127.0.0.1:$PC" endpoint health >/dev/null 2>&1; }
for try in 1 2 3; do
	PC=$(nv_free_port)
	PP=$(nv_free_port)
	etcd --name m1 --data-dir "$NV_TMP/etcd$try" \
		--listen-client-urls "http://127.0.0.1:$PC,http://$IPH:$PC" \
		--advertise-client-urls "http://$IPH:$PC" \
		--listen-peer-urls "http://127.0.0.1:$PP" \
		--initial-advertise-peer-urls "http://127.0.0.1:$PP" \
		--initial-cluster "m1=http://127.0.0.1:$PP" --initial-cluster-state new \
		--unsafe-no-fsync --logger zap --log-outputs stderr >> "$NV_TMP/etcd.log" 2>&1 &
	E_PID=$!
	nv_own "$E_PID"
	for _ in $(seq 300); do
		etcd_up && break 2
		nv_pid_alive "$E_PID" || break
		sleep 0.1
	done
	kill -9 "$E_PID" 2>/dev/null || true
	wait "$E_PID" 2>/dev/null || true
	E_PID=
done
[ -n "$E_PID" ] || fail "etcd did not start, $try times: $(tail -3 "$NV_TMP/etcd.log")"
META="etcd://$IPH:$PC/novafs-part-$$"

SHARED=$NV_TMP/shared
SEC=$NV_TMP/secret
MA=$NV_TMP/mnt-a MB=$NV_TMP/mnt-b
DA=$NV_TMP/data-a DB=$NV_TMP/data-b
LOGA=$NV_TMP/novafs-a.log LOGB=$NV_TMP/novafs-b.log
mkdir -p "$SHARED" "$MA" "$MB" "$DA" "$DB"
: > "$LOGA"
: > "$LOGB"
head -c 32 /dev/urandom | base64 > "$SEC"
chmod 600 "$SEC"
COMMON="store=dir:$SHARED,meta=$META,star_lease_s=$TTL,put_timeout_s=2,attr_timeout=0"
COMMON="$COMMON,cluster_secret_file=$SEC"

# spawn_star WRAP MNT LOG OPTS: a star (WRAP: "" or the nsenter prefix);
# prints nothing, sets SPAWNED; waits for the mount.
spawn_star() {
	local wrap=$1 mnt=$2 log=$3 opts=$4
	$wrap "$NOVAFS" -f -o "$opts" "$mnt" >> "$log" 2>&1 &
	SPAWNED=$!
	nv_own "$SPAWNED"
	nv_await 30 "a star mounts $mnt" mountpoint -q "$mnt"
}
spawn_star "nsenter --net=$NSNET" "$MA" "$LOGA" \
	"data_dir=$DA,star=sa,listen=$IPN:$(nv_free_port),$COMMON"
A_PID=$SPAWNED
spawn_star "" "$MB" "$LOGB" "data_dir=$DB,star=sb,listen=$IPH:$(nv_free_port),$COMMON"
B_PID=$SPAWNED
say "star A (pid $A_PID) in namespace $NS at $IPN, star B (pid $B_PID) at $IPH, etcd $IPH:$PC"

leader() { nv_xattr "$1" user.nova.leader | awk '{ print $1 }'; }
now() { python3 -c 'import time; print("%.6f" % time.time())'; }
# acks_after LOG T: acks in LOG later than time T.
acks_after() { awk -v t="$2" '$1 == "ack" && $3 > t { n++ } END { print n + 0 }' "$1"; }
acked_since() { (($(acks_after "$1" "$2") >= $3)); }
writer() {
	python3 "$CHECK" write "$1" "$2" "$3" &
	WPIDS+=($!)
	nv_own "$!"
}

# 1. A leads b/p; B appends to it through A.
mkdir "$MA/b"
WA=$NV_TMP/wa.log WB=$NV_TMP/wb.log
: > "$WA"
: > "$WB"
writer "$MA/b/p" "$WA" wa
nv_await 20 "wa is acked on A" acked_since "$WA" 0 20
[ "$(leader "$MA/b/p")" = sa ] || fail "A does not lead b/p: $(nv_xattr "$MA/b/p" user.nova.leader)"
writer "$MB/b/p" "$WB" wb
nv_await 20 "wb is acked (through A)" acked_since "$WB" 0 10
say "ok: A leads b/p; wa and wb are acked"

# 2. The partition.
nsenter --net="$NSNET" nft -f - <<EOF
table inet novapart {
	chain in { type filter hook input priority 0; policy accept; ip saddr $IPH drop; }
	chain out { type filter hook output priority 0; policy accept; ip daddr $IPH drop; }
}
EOF
TP=$(now)
say "A is cut off (nft drop in $NS)"
nv_await 60 "B takes b/p and wb goes on" acked_since "$WB" "$TP" 10
[ "$(leader "$MB/b/p")" = sb ] || fail "B does not lead b/p after the partition"
grep -q "sa epoch [0-9]*: fenced at slot" "$LOGB" || fail "B's take did not fence A's epoch"
say "ok: B took b/p $(nv_elapsed "$TP") s after the partition and fenced A's epoch"
nv_await 30 "wb goes on" acked_since "$WB" "$(now)" 5

# 3. Heal.
TH=$(now)
nsenter --net="$NSNET" nft delete table inet novapart
# Its deadline is at most star_lease_s - star_lease_s/5 after the cut;
# the bound allows 1 s more for a loaded machine between A's ack and the
# writer's clock.  And none after B's first ack as the new leader.
late=$(awk -v a="$TP" -v b="$TH" -v ttl="$TTL" \
	'$1 == "ack" && $3 > a + ttl + 1 && $3 < b { n++ } END { print n + 0 }' "$WA")
((late == 0)) || fail "A acked $late record(s) of wa past its lease deadline while cut off"
# (B's first ack as the leader: wb's first a second after the cut, when
# no reply of A's can still be on its way.)
took=$(awk -v a="$TP" '$1 == "ack" && $3 > a + 1 { print $3; exit }' "$WB")
both=$(awk -v a="$TP" -v b="$TH" -v t="$took" \
	'$1 == "ack" && $3 > a && $3 < b && $3 >= t { n++ } END { print n + 0 }' "$WA")
((both == 0)) || fail "A acked $both record(s) of wa after B had taken the stream"
last=$(awk -v a="$TP" -v b="$TH" '$1 == "ack" && $3 > a && $3 < b { l = $3 - a } END { printf "%.2f", l }' "$WA")
say "ok: A acked nothing past its deadline while cut off ($(acks_after "$WA" "$TP") after the cut, the last ${last} s after it; lease ${TTL} s)"
nv_await 30 "A registers again" grep -q "registered again" "$LOGA"
nv_await 30 "wa is acked again (through B)" acked_since "$WA" "$TH" 10
say "ok: A rejoined; its mount sends wa's appends to B"

# 4. Stop the writers; every acked record once, in order, on both mounts.
touch "$WA.stop" "$WB.stop"
for p in "${WPIDS[@]}"; do wait "$p" || fail "a writer exited with status $?"; done
WPIDS=()
for e in $(awk '$1 == "err" { print $3 }' "$WA" "$WB" | sort -u); do
	case $e in
	ETIMEDOUT|EIO|EHOSTUNREACH|EREMOTE|EAGAIN) ;;
	*) fail "a writer failed with $e" ;;
	esac
done
nv_await 20 "A and B read the same bytes" cmp -s "$MA/b/p" "$MB/b/p"
python3 "$CHECK" verify "$MB/b/p" "$MA/b/p" -- "$WA" "$WB" > "$NV_TMP/verify.out" ||
	fail "the stream after the partition: $(cat "$NV_TMP/verify.out")"
say "ok: $(cat "$NV_TMP/verify.out")"
for p in $A_PID $B_PID; do
	m=$MA
	[ "$p" = "$B_PID" ] && m=$MB
	fusermount3 -u "$m"
	nv_await 30 "star $p exits" bash -c "! kill -0 $p 2>/dev/null"
	wait "$p" || fail "star $p exited with status $? after a clean unmount"
done
A_PID= B_PID=
say "ok: both stars closed cleanly"
