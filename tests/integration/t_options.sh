#!/bin/bash
# t_options: novafs(8) documents exactly the options novafs has.  The
# option names, defaults and ranges come from `novafs --help` (which
# src/novafs.c generates from its one option table, NOVAFS_OPTIONS); the
# entries come from the "novafs options" section of man/novafs.8 (each
# headed by `.BI "\-o NAME=" META`).  The test fails when the man page
# lacks an option, documents one that does not exist, lists them in
# another order, or gives a numeric option another default or range than
# --help.  No mount: it needs
# neither root nor /dev/fuse.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"

if [ -n "${srcdir:-}" ]; then
	NV_MAN=$srcdir/man/novafs.8
else
	NV_MAN=$(dirname "$TESTLIB")/../../man/novafs.8
fi
[ -r "$NV_MAN" ] || nv_hard_error "cannot read the man page $NV_MAN"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$NOVAFS" --help > "$TMP/help" || nv_hard_error "$NOVAFS --help failed"

# NAME<TAB>DEFAULT<TAB>RANGE for every option an entry of --help names:
# an entry is "    -o NAME=META  text", continued on lines indented by
# more than four spaces; DEFAULT and RANGE are empty where it gives none.
entry_fields='
function flush() {
	if (name == "") return
	def = ""; range = ""
	gsub(/[ \t]+/, " ", text)
	if (match(text, /\(default: [^;)]*/)) def = substr(text, RSTART + 10, RLENGTH - 10)
	if (match(text, /; range [^)]*\)/)) range = substr(text, RSTART + 8, RLENGTH - 9)
	printf "%s\t%s\t%s\n", name, def, range
	name = ""
}
'
awk "$entry_fields"'
/^    -o [a-z_]+=/ {
	flush(); name = $2; sub(/^-o /, "", name); sub(/=.*/, "", name)
	text = $0; next
}
/^     / && name != "" { text = text " " $0; next }
{ flush() }
END { flush() }
' "$TMP/help" > "$TMP/help.opts"

# The same from the man page: the entries between ".SS novafs options"
# and the next .SS/.SH, each from its `.BI "\-o NAME="` line to the next
# .TP/.PP/.SS (text joined, roff escapes removed).  The S3 URL options
# nested in store's entry (.RS ... .RE) are not "-o" entries.
awk "$entry_fields"'
function clean(t) {
	gsub(/\\-/, "-", t); gsub(/\\&/, "", t); gsub(/\\f[BIRP]/, "", t)
	sub(/^\.[A-Z]+ /, "", t); gsub(/"/, "", t)
	return t
}
/^\.SS novafs options/ { in_opts = 1; next }
/^\.S[SH]/ { if (in_opts) flush(); in_opts = 0; next }
!in_opts { next }
/^\.BI "\\-o [a-z_]+=" / {
	flush(); name = $3; sub(/=.*/, "", name)
	text = ""; next
}
/^\.(TP|PP|IP)/ { flush(); next }
name != "" { text = text " " clean($0) }
END { flush() }
' "$NV_MAN" > "$TMP/man.opts"

[ -s "$TMP/help.opts" ] || nv_hard_error "no options found in novafs --help"
[ -s "$TMP/man.opts" ] || nv_hard_error "no options found in $NV_MAN"

declare -A HELP_DEF=() HELP_RANGE=() MAN_DEF=() MAN_RANGE=()
while IFS=$'\t' read -r n d r; do HELP_DEF[$n]=$d; HELP_RANGE[$n]=$r; done < "$TMP/help.opts"
while IFS=$'\t' read -r n d r; do
	[ -z "${MAN_DEF[$n]+set}" ] || fail "$NV_MAN documents -o $n twice"
	MAN_DEF[$n]=$d; MAN_RANGE[$n]=$r
done < "$TMP/man.opts"

problems=()
for n in "${!HELP_DEF[@]}"; do
	if [ -z "${MAN_DEF[$n]+set}" ]; then
		problems+=("-o $n is in --help but not in $NV_MAN")
		continue
	fi
	[ -n "${HELP_RANGE[$n]}" ] || continue # a string: its default is prose
	# Numbers compare as numbers (the man page may write 1.0 for 1).
	awk -v a="${HELP_DEF[$n]}" -v b="${MAN_DEF[$n]}" 'BEGIN { exit !(a != "" && a + 0 == b + 0) }' ||
		problems+=("-o $n: default '${HELP_DEF[$n]}' in --help, '${MAN_DEF[$n]}' in the man page")
	[ "${HELP_RANGE[$n]}" = "${MAN_RANGE[$n]}" ] ||
		problems+=("-o $n: range '${HELP_RANGE[$n]}' in --help, '${MAN_RANGE[$n]}' in the man page")
done
for n in "${!MAN_DEF[@]}"; do
	[ -n "${HELP_DEF[$n]+set}" ] || problems+=("$NV_MAN documents -o $n, which novafs does not have")
done
if [ "${#problems[@]}" -eq 0 ] && ! cut -f1 "$TMP/help.opts" | cmp -s - <(cut -f1 "$TMP/man.opts"); then
	problems+=("the man page lists the options in another order than --help:")
	problems+=("$(diff <(cut -f1 "$TMP/help.opts") <(cut -f1 "$TMP/man.opts") || true)")
fi
if [ "${#problems[@]}" -gt 0 ]; then
	printf '%s\n' "${problems[@]}" >&2
	fail "${#problems[@]} difference(s) between novafs --help and $NV_MAN"
fi
# Every number is parsed strictly, and the error names the option (issue
# 12 item 8): no trailing junk, no sign on an unsigned option, no nan.
for bad in flight_kib=4096abc attr_timeout=nan attr_timeout=inf flight_kib=-1 \
	put_window=4.5 compress=3x put_window= backlog_mib=99999999999 \
	compress=-99999999999 put_window=0; do
	name=${bad%%=*}
	rc=0
	out=$("$NOVAFS" -f -o "data_dir=$TMP/d,$bad" "$TMP/nomnt" 2>&1) || rc=$?
	((rc != 0)) || fail "-o $bad was accepted"
	[[ $out == *"-o $bad"* ]] || fail "-o $bad: the error does not name the option: '$out'"
	[[ $out != *4294967295* ]] || fail "-o $bad: the error echoes a wrapped number: '$out'"
done
out=$("$NOVAFS" -f -o "data_dir=$TMP/d,compress=-3,attr_timeout=0.25" "$TMP/nomnt" 2>&1) || true
[[ $out == *"bad mount point"* ]] ||
	fail "valid numbers (compress=-3, attr_timeout=0.25) were refused: '$out'"
say "ok: malformed numbers are refused, naming the option"

say "PASS: ${#HELP_DEF[@]} options, each in the man page, in the same order, with the same default and range"
