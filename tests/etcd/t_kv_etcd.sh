#!/bin/sh
# t_kv_etcd.sh - the KV conformance suite (tests/unit/test_kv) against real
# etcd: one member, three members, and one member over TLS with a
# certificate this test makes with openssl (mutual: cert= and key= give
# the client's, refused without it), and one member with
# authentication on (password_file=, tokens expiring every 2 s).  Also: a
# URL naming a dead member first still works (failover), status names
# every member, and TLS without the CA or auth without a password is
# refused.
#
# Members come from tests/etcd/etcd.sh (installed when missing; 77 when
# impossible) on free 127.0.0.1 ports, stopped by PID in the trap.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$(dirname "${NOVAFS:-$top/src/novafs}")/.." && pwd)
kvtest=$build/tests/unit/test_kv
[ -x "$kvtest" ] || { echo "no $kvtest (build with cmocka)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/novafs-t-kv-etcd-XXXXXX")
cleanup() {
	for c in one auth three tls; do
		[ -d "$work/$c" ] && "$top/tests/etcd/etcd.sh" stop "$work/$c" || true
	done
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

run_suite() { # name, env file
	echo "== conformance on $1"
	( . "$2"; NOVAFS_KV_ONLY=etcd "$kvtest" ) >"$work/$1.log" 2>&1 || {
		tail -40 "$work/$1.log"; echo "FAIL: conformance on $1"; exit 1; }
	grep -q "PASSED  \] [1-9]" "$work/$1.log" || { echo "FAIL: no case ran on $1"; exit 1; }
	grep -E "PASSED|SKIPPED" "$work/$1.log"
}

rc=0; "$top/tests/etcd/etcd.sh" start "$work/one" 1 >/dev/null || rc=$?
[ "$rc" = 0 ] || exit "$rc"
run_suite one "$work/one/env.sh"

# Failover: a dead endpoint first in the list, then the live one.
. "$work/one/env.sh"
dead=127.0.0.1:1
NOVAFS_ETCD_URL="etcd://$dead;${NOVAFS_ETCD_ENDPOINTS}/novafs-failover" \
	NOVAFS_KV_ONLY=etcd NOVAFS_TEST_FILTER='test_kv_get_put_del' "$kvtest" >"$work/failover.log" 2>&1 || {
	tail -20 "$work/failover.log"; echo "FAIL: failover past a dead member"; exit 1; }
grep -q "PASSED  \] 1 test" "$work/failover.log" || { echo "FAIL: failover case did not run"; exit 1; }
"$top/tests/etcd/etcd.sh" stop "$work/one"

# Auth: root with a password, tokens that expire after 2 s of idleness, so
# the suite's calls keep meeting expired tokens and re-authenticating.
NOVAFS_ETCD_FLAGS="--auth-token-ttl 2" "$top/tests/etcd/etcd.sh" start "$work/auth" 1 >/dev/null
. "$work/auth/env.sh"
$NOVAFS_ETCD_CTL user add root:novafs-pw >/dev/null
$NOVAFS_ETCD_CTL user grant-role root root >/dev/null
$NOVAFS_ETCD_CTL auth enable >/dev/null
printf 'root:novafs-pw\n' > "$work/pw"
chmod 600 "$work/pw"
echo "== conformance with password_file= (token TTL 2 s)"
NOVAFS_ETCD_URL="$NOVAFS_ETCD_URL?password_file=$work/pw" NOVAFS_KV_ONLY=etcd \
	"$kvtest" >"$work/auth.log" 2>&1 || {
	tail -30 "$work/auth.log"; echo "FAIL: conformance with auth"; exit 1; }
grep -q "PASSED  \] [1-9]" "$work/auth.log" || { echo "FAIL: no case ran with auth"; exit 1; }
grep -E "PASSED" "$work/auth.log"
# Without the password the members refuse: -EACCES, no hang.
if NOVAFS_KV_ONLY=etcd NOVAFS_TEST_FILTER='test_kv_get_put_del' "$kvtest" >"$work/noauth.log" 2>&1; then
	echo "FAIL: etcd with auth accepted a client without a password"; exit 1
fi
grep -q "Permission denied\|user name is empty\|permission denied" "$work/noauth.log" ||
	{ tail -5 "$work/noauth.log"; echo "FAIL: no auth error logged"; exit 1; }
"$top/tests/etcd/etcd.sh" stop "$work/auth"

"$top/tests/etcd/etcd.sh" start "$work/three" 3 >/dev/null
run_suite three "$work/three/env.sh"
grep -q "leader" "$work/three.log" && grep -c "member http" "$work/three.log" | grep -q 3 || {
	echo "FAIL: status does not list three members"; exit 1; }
"$top/tests/etcd/etcd.sh" stop "$work/three"

"$top/tests/etcd/etcd.sh" start "$work/tls" 1 tls >/dev/null
run_suite tls "$work/tls/env.sh"
# Without the CA the server's certificate is refused: -EACCES, no hang.
. "$work/tls/env.sh"
bad=$(echo "$NOVAFS_ETCD_URL" | sed 's/?.*//')
if NOVAFS_ETCD_URL="$bad" NOVAFS_KV_ONLY=etcd NOVAFS_TEST_FILTER='test_kv_get_put_del' \
	"$kvtest" >"$work/nocacert.log" 2>&1; then
	echo "FAIL: TLS without the test CA was accepted"; exit 1
fi
grep -qi "certificate\|SSL" "$work/nocacert.log" || { tail -5 "$work/nocacert.log"; echo "FAIL: no TLS error logged"; exit 1; }
# With the CA but no client certificate: the members require one.
# (TLS 1.3 shows the refusal as a lost connection: retried until timeout=.)
nocert="$(echo "$NOVAFS_ETCD_URL" | sed 's/&cert=.*//')&timeout=2"
if NOVAFS_ETCD_URL="$nocert" NOVAFS_KV_ONLY=etcd NOVAFS_TEST_FILTER='test_kv_get_put_del' \
	"$kvtest" >"$work/nocert.log" 2>&1; then
	echo "FAIL: TLS without a client certificate was accepted"; exit 1
fi
echo "PASS: t_kv_etcd"
