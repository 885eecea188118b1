#!/bin/bash
# t_readme_tour: the README's shell session is true.  The fenced code block
# between the lines `<!-- tour:begin -->` and `<!-- tour:end -->` of
# README.md is a session: lines starting with "$ " are commands (a command
# ending in "\" continues on the next line, a leading "> " there is
# dropped), the lines up to the next command are its expected output
# (stdout and stderr together).  The commands run one by one in one bash
# (cwd and variables carry over; stdin is /dev/null) against a fresh mount
# whose path replaces /mnt/nova; /var/lib/novafs becomes the test's data dir.
# Output is compared line by line after mapping those paths back, exactly,
# except: an expected line containing "..." matches any one line, an
# expected line that is just "..." matches any number of lines (0 or more),
# and trailing blank lines are ignored.
# Special commands:
#   novafs ... /mnt/nova      mounts (the test's daemon; its -o options are
#                             kept, data_dir and -f are the test's own; its
#                             expected output is ignored).  If the session
#                             starts with it, the test does not pre-mount.
#   fusermount3 -u /mnt/nova  a clean close (waits for the daemon to exit).
#   novafs/novactl otherwise  run the built programs ($NOVAFS, $NOVACTL).
# Each command must finish within 30 s.  No README or no markers: skip (77).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"

README=${NV_README:-$NV_LIB_DIR/../../README.md}
[ -f "$README" ] || nv_skip "no README.md ($README)"
grep -qx '<!-- tour:begin -->' "$README" && grep -qx '<!-- tour:end -->' "$README" ||
	nv_skip "README.md has no <!-- tour:begin --> / <!-- tour:end --> markers"

nv_init
# The tour runs commands as nobody (setpriv): they must reach the mount
# point inside the temp dir.
chmod 0755 "$NV_TMP"
STEPS=$NV_TMP/steps
mkdir "$STEPS" "$NV_TMP/home"

# Parse the tour into $STEPS/<n>.cmd (the command as written) and
# $STEPS/<n>.want (expected lines).
python3 - "$README" "$STEPS" <<'PY' || fail "cannot parse the tour in $README"
import sys, os
readme, out = sys.argv[1], sys.argv[2]
lines = open(readme, encoding="utf-8").read().split("\n")
try:
    b = lines.index("<!-- tour:begin -->")
    e = lines.index("<!-- tour:end -->", b)
except ValueError:
    sys.exit("markers missing or out of order")
body = lines[b + 1:e]
fences = [i for i, l in enumerate(body) if l.lstrip().startswith("```")]
if len(fences) < 2:
    sys.exit("no fenced code block between the markers")
block = body[fences[0] + 1:fences[1]]
steps, i = [], 0
while i < len(block):
    l = block[i]
    if l.startswith("$ "):
        cmd = l[2:]
        while cmd.endswith("\\") and i + 1 < len(block):
            i += 1
            nxt = block[i]
            cmd += "\n" + (nxt[2:] if nxt.startswith("> ") else nxt)
        steps.append([cmd, []])
    elif l == "$":
        steps.append(["", []])
    elif steps:
        steps[-1][1].append(l)
    elif l.strip():
        sys.exit("output line before the first command: %r" % l)
    i += 1
if not steps:
    sys.exit("no commands in the tour")
for n, (cmd, want) in enumerate(steps, 1):
    with open(os.path.join(out, "%03d.cmd" % n), "w") as f:
        f.write(cmd)
    with open(os.path.join(out, "%03d.want" % n), "w") as f:
        f.write("".join(w + "\n" for w in want))
PY
NSTEPS=$(ls "$STEPS"/*.cmd | wc -l)
say "tour: $NSTEPS commands from $README"

# match.py GOT WANT: compare with the "..." rules; print a diff on mismatch.
cat > "$NV_TMP/match.py" <<'PY'
import sys
got = open(sys.argv[1], encoding="utf-8", errors="replace").read().split("\n")
want = open(sys.argv[2], encoding="utf-8").read().split("\n")
# Trailing blank lines are ignored on both sides (getfattr ends its output
# with one; a README may or may not show it before the closing fence).
while got and got[-1] == "": got.pop()
while want and want[-1] == "": want.pop()
def match(g, w):
    if not w:
        return not g
    if w[0] == "...":
        return any(match(g[k:], w[1:]) for k in range(len(g) + 1))
    if not g:
        return False
    if "..." in w[0] or g[0] == w[0]:
        return match(g[1:], w[1:])
    return False
if not match(got, want):
    print("expected:")
    for l in want: print("  | " + l)
    print("got:")
    for l in got: print("  | " + l)
    sys.exit(1)
PY

# Substitutions, both ways.
to_real() {
	local s=$1
	s=${s//\/mnt\/nova/$MNT}
	s=${s//\/var\/lib\/novafs/$DATA}
	printf '%s' "$s"
}
to_doc() {
	# Real paths back to the documented ones (getfattr also prints them
	# without the leading '/'); bash -c error prefixes as an interactive
	# bash prints them.
	sed -e "s|$MNT|/mnt/nova|g" -e "s|${MNT#/}|mnt/nova|g" \
		-e "s|$DATA|/var/lib/novafs|g" -e "s|${DATA#/}|var/lib/novafs|g" \
		-e 's|^bash: line [0-9]*: |bash: |'
}

# The session shell: one bash for all commands, output read up to a marker.
MARK="__novafs_tour_done_$$_$RANDOM"
coproc TOUR { cd "$NV_TMP/home" && HOME=$NV_TMP/home exec bash --norc --noprofile 2>&1; }
nv_bg "$TOUR_PID"
TOUR_IN=${TOUR[1]}
TOUR_OUT=${TOUR[0]}

# run_in_session CMD OUTFILE
run_in_session() {
	local cmd=$1 out=$2 line rc=""
	: > "$out"
	printf '{ %s\n} < /dev/null 2>&1; __rc=$?; printf "\\n%s %%d\\n" "$__rc"\n' \
		"$cmd" "$MARK" >&"$TOUR_IN" || fail "the session shell is gone"
	while IFS= read -r -t 30 -u "$TOUR_OUT" line; do
		if [[ $line == "$MARK "* ]]; then
			rc=${line#"$MARK "}
			break
		fi
		printf '%s\n' "$line" >> "$out"
	done
	[ -n "$rc" ] || fail "command did not finish within 30 s (or the session shell exited): $cmd"
	# Drop the newline the marker printf added.
	python3 -c '
import sys
p = sys.argv[1]
d = open(p, "rb").read()
if d.endswith(b"\n"): d = d[:-1]
open(p, "wb").write(d)' "$out"

}

# is_mount CMD: "novafs ... /mnt/nova" (optionally after sudo).
is_mount() {
	[[ $1 =~ ^(sudo[[:space:]]+)?novafs[[:space:]] && $1 == *"/mnt/nova"* ]]
}

mount_opts() {
	# The -o options of a documented mount command, minus data_dir.
	python3 - "$1" <<'PY'
import shlex, sys
args = shlex.split(sys.argv[1])
if args[0] == "sudo": args = args[1:]
opts = []
i = 1
while i < len(args):
    a = args[i]
    if a == "-o" and i + 1 < len(args):
        opts += args[i + 1].split(","); i += 1
    elif a.startswith("-o"):
        opts += a[2:].split(",")
    i += 1
print(",".join(o for o in opts if o and not o.startswith("data_dir=")))
PY
}

first=$(cat "$STEPS/001.cmd")
if is_mount "$first"; then
	say "the tour mounts by itself"
else
	nv_start
fi

for cmdf in "$STEPS"/*.cmd; do
	n=$(basename "$cmdf" .cmd)
	cmd=$(cat "$cmdf")
	want=$STEPS/$n.want
	got=$STEPS/$n.got
	say "\$ $cmd"
	if is_mount "$cmd"; then
		nv_start "$(mount_opts "$cmd")"
		continue
	fi
	if [[ $cmd =~ ^(sudo[[:space:]]+)?fusermount3?[[:space:]]+-u[[:space:]]+/mnt/nova/?$ ]]; then
		nv_stop
		: > "$got"
	else
		real=$(to_real "$cmd")
		real=$(sed -E -e "1s#^(sudo[[:space:]]+)?novafs([[:space:]]|\$)#$NOVAFS\\2#" \
			-e "1s#^(sudo[[:space:]]+)?novactl([[:space:]]|\$)#$NOVACTL\\2#" \
			-e "1s#^sudo[[:space:]]+##" <<< "$real")
		run_in_session "$real" "$got.raw"
		to_doc < "$got.raw" > "$got"
	fi
	python3 "$NV_TMP/match.py" "$got" "$want" > "$NV_TMP/match.out" ||
		fail "tour command $n: \$ $cmd
$(cat "$NV_TMP/match.out")"
done
say "ok: all $NSTEPS tour commands produced the documented output"

{ printf 'exit\n' >&"$TOUR_IN"; } 2>/dev/null || true
if [ -n "$NV_PID" ]; then
	nv_alive || fail "the daemon died during the tour"
	nv_stop
fi
