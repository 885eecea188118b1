# shellcheck shell=bash
# tests/etcd/trim_lib.sh - checks shared by t_stars_trim_view.sh and
# t_stars_trim_remote.sh (sourced after stars_lib.sh, not run): problems
# collected rather than fatal (PROBLEMS, listed at the end), byte checks by
# cat and dd against a reference file, xattrs, and the records the two
# tests append.  Uses NV_TMP and say from tests/integration/lib.sh.
PROBLEMS=()
problem() { PROBLEMS+=("$*"); say "PROBLEM: $*"; }
# expect ACTUAL WANT WHAT
expect() { if [ "$1" = "$2" ]; then say "ok: $3 = $2"; else problem "$3: got '$1', want '$2'"; fi; }
# same FILE WANT WHAT: FILE reads (cat) byte for byte as WANT.
same() {
	if cat "$1" > "$NV_TMP/got" 2> "$NV_TMP/got.err" && cmp -s "$NV_TMP/got" "$2"; then
		say "ok: $3"
	else
		problem "$3: $(cat "$NV_TMP/got.err") $(cmp "$NV_TMP/got" "$2" 2>&1)"
	fi
}
# same_range FILE REF OFF LEN WHAT: dd of [OFF, OFF+LEN) of FILE is REF's.
same_range() {
	dd if="$1" iflag=skip_bytes,count_bytes skip="$3" count="$4" bs=4096 status=none \
		> "$NV_TMP/dd" 2> "$NV_TMP/dd.err" || true
	dd if="$2" iflag=skip_bytes,count_bytes skip="$3" count="$4" bs=4096 status=none \
		> "$NV_TMP/dd.want"
	if cmp -s "$NV_TMP/dd" "$NV_TMP/dd.want"; then
		say "ok: $5"
	else
		problem "$5: $(cat "$NV_TMP/dd.err") $(cmp "$NV_TMP/dd" "$NV_TMP/dd.want" 2>&1)"
	fi
}
x() { getfattr --absolute-names --only-values -n "$2" "$1" 2>/dev/null || echo "(failed)"; }
is() { [ "$(x "$1" "$2")" = "$3" ]; }
# records FILE FIRST COUNT: COUNT records "s NNNNN pad\n" (one write()
# each) appended to FILE; they are printed too.
records() {
	python3 - "$@" <<'PY'
import os, sys
path, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
out = []
for i in range(first, first + count):
    rec = ("s %05d %s\n" % (i, chr(97 + i % 26) * (20 + i * 37 % 300))).encode()
    if os.write(fd, rec) != len(rec):
        sys.exit("short write at %d" % i)
    out.append(rec)
sys.stdout.buffer.write(b"".join(out))
PY
}
rec_start() { head -n "$2" "$1" | wc -c; }                       # REF K: byte of record K
zeroed() { head -c "$2" /dev/zero; tail -c +$(($2 + 1)) "$1"; }  # REF N: first N bytes 0
