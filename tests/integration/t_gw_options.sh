#!/bin/bash
# t_gw_options: novagw(8) documents exactly the options novagw has, in
# the same order, with the same defaults and ranges.  The names,
# defaults and ranges come from `novagw --help` (generated from
# src/novagw.c's one table, GW_OPTIONS): an entry is "    --NAME=META
# text", continued on lines indented by more than four spaces.  The man
# page's entries are those of its OPTIONS section headed
# `.BI \-\-NAME= META`.  Then every number is parsed strictly and the
# refusal names the option.  No mount: it needs neither root nor
# /dev/fuse.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"

if [ -n "${srcdir:-}" ]; then
	GW_MAN=$srcdir/man/novagw.8
else
	GW_MAN=$(dirname "$TESTLIB")/../../man/novagw.8
fi
[ -r "$GW_MAN" ] || nv_hard_error "cannot read the man page $GW_MAN"
[ -x "${NOVAGW:-}" ] || nv_hard_error "NOVAGW is not set to the novagw binary"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$NOVAGW" --help > "$TMP/help" || nv_hard_error "$NOVAGW --help failed"
fields='
function flush() {
	if (name == "" || name == "help" || name == "version") { name = ""; return }
	def = ""; range = ""
	gsub(/[ \t]+/, " ", text)
	if (match(text, /\(default: [^;)]*/)) def = substr(text, RSTART + 10, RLENGTH - 10)
	if (match(text, /; range [^)]*\)/)) range = substr(text, RSTART + 8, RLENGTH - 9)
	printf "%s\t%s\t%s\n", name, def, range
	name = ""
}
'
awk "$fields"'
/^    --[a-z-]+(=|  )/ && $1 != "--help" && $1 != "--version" {
	flush(); name = $1; sub(/^--/, "", name); sub(/=.*/, "", name); text = $0; next
}
/^     / && name != "" { text = text " " $0; next }
{ flush() }
END { flush() }
' "$TMP/help" > "$TMP/help.opts"
awk "$fields"'
function clean(t) {
	gsub(/\\-/, "-", t); gsub(/\\&/, "", t); gsub(/\\f[BIRP]/, "", t)
	sub(/^\.[A-Z]+ /, "", t); gsub(/"/, "", t)
	return t
}
/^\.SH OPTIONS/ { in_opts = 1; next }
/^\.S[SH]/ { if (in_opts) flush(); in_opts = 0; next }
!in_opts { next }
/^\.BI \\-\\-[a-z\\-]+= / { flush(); name = clean($2); sub(/^--/, "", name); sub(/=.*/, "", name); text = ""; next }
/^\.B \\-\\-[a-z\\-]+$/ && prev ~ /^\.TP/ { flush(); name = clean($2); sub(/^--/, "", name); text = ""; next }
/^\.(TP|PP|IP)/ { flush(); prev = $0; next }
name != "" { text = text " " clean($0) }
{ prev = $0 }
END { flush() }
' "$GW_MAN" > "$TMP/man.opts"
[ -s "$TMP/help.opts" ] || nv_hard_error "no options found in novagw --help"
[ -s "$TMP/man.opts" ] || nv_hard_error "no options found in $GW_MAN"
if ! diff "$TMP/help.opts" "$TMP/man.opts" > "$TMP/diff"; then
	cat "$TMP/diff" >&2
	fail "novagw --help and $GW_MAN differ (name, default, range per line; < --help, > man page)"
fi
say "ok: $(wc -l < "$TMP/help.opts") options, the same in --help and the man page"

for bad in --fetch-inflight=64MB --fetch-inflight=1 --max-conns=-1 --max-conns=0 \
	--heartbeat-s=1.5 --client-timeout-s= --star-timeout-ms=99999999999999999999999; do
	rc=0
	out=$("$NOVAGW" "$bad" 2>&1) || rc=$?
	((rc == 2)) || fail "$bad: exit status $rc, expected 2"
	[[ $out == *"$bad"* ]] || fail "$bad: the refusal does not name the option: '$out'"
done
rc=0
out=$("$NOVAGW" --no-such-option=1 2>&1) || rc=$?
((rc == 2)) && [[ $out == *"unknown option"* ]] || fail "an unknown option: status $rc, '$out'"
say "ok: malformed numbers and unknown options are refused, naming the option"

REQ=(--listen=127.0.0.1:1 --star=127.0.0.1:2 --cluster-secret-file=/nonexistent
	--api-keys-file=/nonexistent)
refused() { # STATUS TEXT ARGS...: novagw refuses ARGS with STATUS, saying TEXT
	local want=$1 text=$2 rc=0 out
	shift 2
	out=$("$NOVAGW" "${REQ[@]}" "$@" 2>&1) || rc=$?
	((rc == want)) || fail "$*: exit status $rc, expected $want ('$out')"
	[[ $out == *"$text"* ]] || fail "$*: the refusal does not say '$text': '$out'"
}
refused 2 "--storage-bucket is for --serve-plan" --storage-bucket=dir:/tmp
refused 2 "--serve-plan needs --footer-cache-bytes above 0" --serve-plan --footer-cache-bytes=0
refused 2 "unknown option '--serve-plan=1'" --serve-plan=1
refused 2 "--serve-plan needs --fetch-inflight of at least 16 MiB" --serve-plan --fetch-inflight=8M
say "ok: --storage-bucket without --serve-plan, --serve-plan without a footer budget or with a fetch pool under 16 MiB are refused"
refused 2 "--cache is for --serve-plan's signed fetches" --cache=http://127.0.0.1:1 \
	--cache-auth-file=/nonexistent
refused 2 "--cache needs --cache-auth-file" --serve-plan --cache=http://127.0.0.1:1
refused 2 "--cache-* options need --cache" --serve-plan --cache-hedge-ms=100
refused 2 "--cache-* options need --cache" --serve-plan --cache-auth-file=/nonexistent
refused 2 "--cache-slice-kib=32: bad value" --serve-plan --cache=http://127.0.0.1:1 \
	--cache-slice-kib=32
say "ok: --cache without --serve-plan or a token, --cache-* without --cache, a slice under 64 KiB are refused"
say "PASS"
