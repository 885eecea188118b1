#!/bin/bash
# t_tools: everyday tools inside the mount do what novafs(8) ("Everyday
# tools" under THE FILESYSTEM) says, each with the exit status, errno
# and bytes expected (issue 12 items 2 and 7):
#  1. Recursive tools over the whole mount (grep -r, find, du, cp -r,
#     tar c) finish and see each stream once: .follow is not listed in
#     the root, yet `ls MOUNT/.follow/BUCKET` still lists the streams.
#  2. mv within a bucket renames (bytes, owner, mode kept; a stream of
#     the new name is replaced); rename(2) to another bucket is EXDEV,
#     so mv copies and deletes, quietly, and the copy does not inherit
#     the trim point; mv of a bucket copies it the same way.
#  3. cp -a of a stream works without a warning; cp -r of a tree with a
#     subdirectory copies the files and fails on the directory with
#     EPERM ("Operation not permitted").
#  4. rsync -a (temporary dot-names, then rename) works, also for an
#     update; rsync --inplace works for new files and --append for grown
#     ones, and fails with EPERM on an in-place rewrite, changing
#     nothing.
#  5. tar x of regular files works (mode kept); a directory in the
#     archive fails with EPERM.
#  6. sqlite3 and git init fail cleanly (EPERM underneath), leaving the
#     daemon serving.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
export LC_ALL=C
for t in rsync sqlite3 git tar timeout; do
	command -v "$t" >/dev/null || nv_skip "$t is not installed (packages.txt, [test])"
done
nv_init
nv_start

# errno_of OP ARGS...: one os call; prints OK or the errno name.
errno_of() {
	python3 - "$@" <<'PY'
import errno, os, sys
op, a = sys.argv[1], sys.argv[2:]
try:
    if op == "rename":
        os.rename(a[0], a[1])
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PY
}

# ---------------------------------------------------------------- 1. walks
say "--- 1. recursive tools over the whole mount"
mkdir "$MNT/logs" "$MNT/metrics"
printf 'needle one\n' >> "$MNT/logs/app"
printf 'hay\n' >> "$MNT/logs/web"
printf 'needle two\n' >> "$MNT/metrics/cpu"
printf 'hay\n' >> "$MNT/metrics/mem"
nv_expect_eq "$(ls -a "$MNT" | tr '\n' ' ')" ". .. logs metrics " "ls -a of the root (no .follow)"
nv_expect_eq "$(ls "$MNT/.follow/logs" | tr '\n' ' ')" "app web " "ls .follow/logs (reachable by name)"
nv_expect_eq "$(timeout 20 grep -r needle "$MNT" | sort | tr '\n' '|')" \
	"$MNT/logs/app:needle one|$MNT/metrics/cpu:needle two|" "grep -r over the mount (each stream once)"
nv_expect_eq "$(timeout 20 find "$MNT" -type f | sort | tr '\n' ' ')" \
	"$MNT/logs/app $MNT/logs/web $MNT/metrics/cpu $MNT/metrics/mem " "find -type f over the mount"
nv_expect_eq "$(timeout 20 du -ab "$MNT" | awk -v m="$MNT" '$2 == m { print $1 }')" \
	"$(( $(printf 'needle one\nhay\nneedle two\nhay\n' | wc -c) ))" "du -ab of the mount (each stream counted once)"
timeout 20 cp -r "$MNT" "$NV_TMP/copy" || fail "cp -r of the whole mount failed or hung"
nv_expect_eq "$(cd "$NV_TMP/copy" && find . -type f | sort | tr '\n' ' ')" \
	"./logs/app ./logs/web ./metrics/cpu ./metrics/mem " "files cp -r copied out of the mount"
timeout 20 tar -C "$MNT" -cf "$NV_TMP/all.tar" . || fail "tar c of the whole mount failed or hung"
nv_expect_eq "$(tar -tf "$NV_TMP/all.tar" | grep -v '/$' | sort | tr '\n' ' ')" \
	"./logs/app ./logs/web ./metrics/cpu ./metrics/mem " "tar c of the whole mount (each stream once)"

# ---------------------------------------------------------------- 2. mv
say "--- 2. mv"
B=$MNT/mv
mkdir "$B" "$MNT/mv2"
printf 'alpha\n' >> "$B/a"
printf 'beta\n' >> "$B/a"
chmod 0600 "$B/a"
stat "$MNT/.follow/mv/a" > /dev/null || fail "no .follow/mv/a before the rename"
mv "$B/a" "$B/a.renamed" 2> "$NV_TMP/mv.err" || fail "mv within a bucket failed: $(cat "$NV_TMP/mv.err")"
[ ! -e "$B/a" ] || fail "mv within a bucket left the old name"
[ ! -e "$MNT/.follow/mv/a" ] || fail "the follow view still shows the old name right after the rename"
nv_expect_eq "$(head -n 1 "$MNT/.follow/mv/a.renamed")" alpha "the follow view under the new name"
nv_expect_eq "$(cat "$B/a.renamed" | tr '\n' ' ')" "alpha beta " "bytes after mv within a bucket"
nv_expect_eq "$(stat -c %a "$B/a.renamed"):$(nv_xattr "$B/a.renamed" user.nova.seq)" 600:2 \
	"mode and seq after mv within a bucket (the same stream)"
printf 'appended after the rename\n' >> "$B/a.renamed" || fail "append after a rename failed"
printf 'old\n' >> "$B/target"
mv "$B/a.renamed" "$B/target" || fail "mv onto an existing stream failed"
nv_expect_eq "$(head -n 1 "$B/target")" alpha "mv onto an existing stream replaced it"
nv_expect_eq "$(ls "$B" | tr '\n' ' ')" "target " "bucket listing after the renames"
nv_expect_eq "$(errno_of rename "$B/target" "$MNT/mv2/target")" EXDEV "rename(2) to another bucket"
# The copy mv falls back to: quiet, same bytes, no inherited trim point.
printf 'gamma\n' >> "$B/target"
setfattr -n user.nova.trim -v 1 "$B/target"
cat "$B/target" > "$NV_TMP/target.want"
mv "$B/target" "$MNT/mv2/moved" 2> "$NV_TMP/mv.err" || fail "mv across buckets failed: $(cat "$NV_TMP/mv.err")"
[ ! -s "$NV_TMP/mv.err" ] || fail "mv across buckets printed: $(cat "$NV_TMP/mv.err")"
[ ! -e "$B/target" ] || fail "mv across buckets left the source"
nv_same_file "$MNT/mv2/moved" "$NV_TMP/target.want" "bytes after mv across buckets"
nv_expect_eq "$(nv_xattr "$MNT/mv2/moved" user.nova.trim)" 0 "the copy's trim point (not inherited)"
nv_expect_eq "$(stat -c %a "$MNT/mv2/moved")" 600 "mode after mv across buckets"
mv "$MNT/mv2" "$MNT/mv3" 2> "$NV_TMP/mv.err" || fail "mv of a bucket failed: $(cat "$NV_TMP/mv.err")"
nv_same_file "$MNT/mv3/moved" "$NV_TMP/target.want" "bytes after mv of a bucket"
[ ! -e "$MNT/mv2" ] || fail "mv of a bucket left the old bucket"

# ---------------------------------------------------------------- 3. cp
say "--- 3. cp"
C=$MNT/cp
mkdir "$C"
cp -a "$MNT/mv3/moved" "$C/copy" 2> "$NV_TMP/cp.err" || fail "cp -a failed: $(cat "$NV_TMP/cp.err")"
[ ! -s "$NV_TMP/cp.err" ] || fail "cp -a printed: $(cat "$NV_TMP/cp.err")"
nv_same_file "$C/copy" "$NV_TMP/target.want" "bytes after cp -a"
mkdir -p "$NV_TMP/tree/sub"
printf 'top\n' > "$NV_TMP/tree/top"
printf 'deep\n' > "$NV_TMP/tree/sub/deep"
rc=0
cp -r "$NV_TMP/tree" "$C/" 2> "$NV_TMP/cp.err" || rc=$?
((rc != 0)) || fail "cp -r of a tree with a subdirectory into a bucket succeeded"
grep -q "cannot create directory.*Operation not permitted" "$NV_TMP/cp.err" ||
	fail "cp -r into a bucket: expected 'cannot create directory ... Operation not permitted', got: $(cat "$NV_TMP/cp.err")"
say "ok: cp -r of a tree into a bucket -> EPERM on the directory"
rc=0
cp -r "$NV_TMP/tree" "$MNT/" 2> "$NV_TMP/cp.err" || rc=$?
((rc != 0)) || fail "cp -r of a tree with a subdirectory to the top level succeeded"
grep -q "sub.*Operation not permitted" "$NV_TMP/cp.err" ||
	fail "cp -r to the top level: expected EPERM on sub, got: $(cat "$NV_TMP/cp.err")"
nv_expect_eq "$(cat "$MNT/tree/top")" top "cp -r to the top level made a bucket and copied its files"

# ---------------------------------------------------------------- 4. rsync
say "--- 4. rsync"
R=$MNT/rs
mkdir "$R" "$NV_TMP/rs"
printf 'one\n' > "$NV_TMP/rs/one"
printf 'dot\n' > "$NV_TMP/rs/.dotfile"
head -c 300000 /dev/urandom > "$NV_TMP/rs/big"
timeout 60 rsync -a "$NV_TMP/rs/" "$R/" 2> "$NV_TMP/rs.err" || fail "rsync -a failed: $(cat "$NV_TMP/rs.err")"
nv_expect_eq "$(ls -A "$R" | tr '\n' ' ')" ".dotfile big one " "names after rsync -a (no temporary left)"
for f in one .dotfile big; do nv_same_file "$R/$f" "$NV_TMP/rs/$f" "rsync -a: $f"; done
printf 'XXXX' | dd of="$NV_TMP/rs/big" bs=1 seek=1000 conv=notrunc status=none
timeout 60 rsync -a -c "$NV_TMP/rs/" "$R/" 2> "$NV_TMP/rs.err" || fail "rsync -a -c (update) failed: $(cat "$NV_TMP/rs.err")"
nv_same_file "$R/big" "$NV_TMP/rs/big" "rsync -a -c sent the changed file whole"
I=$MNT/inplace
mkdir "$I"
timeout 60 rsync -a --inplace "$NV_TMP/rs/" "$I/" 2> "$NV_TMP/rs.err" || fail "rsync --inplace (new files) failed: $(cat "$NV_TMP/rs.err")"
nv_same_file "$I/big" "$NV_TMP/rs/big" "rsync --inplace of a new file"
head -c 5000 /dev/urandom >> "$NV_TMP/rs/big"
timeout 60 rsync -a --append "$NV_TMP/rs/big" "$I/" 2> "$NV_TMP/rs.err" || fail "rsync --append failed: $(cat "$NV_TMP/rs.err")"
nv_same_file "$I/big" "$NV_TMP/rs/big" "rsync --append of a grown file"
cp "$I/big" "$NV_TMP/inplace.before"
printf 'YYYY' | dd of="$NV_TMP/rs/big" bs=1 seek=2000 conv=notrunc status=none
rc=0
timeout 60 rsync -a -I --inplace "$NV_TMP/rs/big" "$I/" 2> "$NV_TMP/rs.err" || rc=$?
((rc != 0)) || fail "rsync --inplace rewrite of a changed file succeeded"
grep -q "Operation not permitted" "$NV_TMP/rs.err" ||
	fail "rsync --inplace rewrite: expected EPERM, got: $(cat "$NV_TMP/rs.err")"
nv_same_file "$I/big" "$NV_TMP/inplace.before" "the stream after the refused in-place rewrite"

# ---------------------------------------------------------------- 5. tar x
say "--- 5. tar x"
mkdir -p "$NV_TMP/tx/d"
printf 'file one\n' > "$NV_TMP/tx/f1"
printf 'file two\n' > "$NV_TMP/tx/f2"
chmod 0640 "$NV_TMP/tx/f2"
printf 'in dir\n' > "$NV_TMP/tx/d/f3"
T=$MNT/tx
mkdir "$T"
tar -C "$NV_TMP/tx" -cf "$NV_TMP/flat.tar" f1 f2
tar -C "$T" -xpf "$NV_TMP/flat.tar" || fail "tar x of regular files failed"
nv_same_file "$T/f1" "$NV_TMP/tx/f1" "tar x: f1"
nv_expect_eq "$(stat -c %a "$T/f2")" 640 "tar x kept f2's mode"
tar -C "$NV_TMP/tx" -cf "$NV_TMP/tree.tar" d
rc=0
tar -C "$T" -xf "$NV_TMP/tree.tar" 2> "$NV_TMP/tar.err" || rc=$?
((rc != 0)) || fail "tar x of a directory into a bucket succeeded"
grep -q "Operation not permitted" "$NV_TMP/tar.err" ||
	fail "tar x of a directory: expected EPERM, got: $(cat "$NV_TMP/tar.err")"
say "ok: tar x of a directory into a bucket -> EPERM"

# ---------------------------------------------------------------- 6. databases
say "--- 6. sqlite3 and git init"
D=$MNT/db
mkdir "$D"
rc=0
(cd "$NV_TMP" && timeout 30 sqlite3 "$D/x.db" "create table t(x); insert into t values (1);") \
	2> "$NV_TMP/sql.err" || rc=$?
((rc != 0 && rc != 124)) || fail "sqlite3 in the mount: status $rc (expected a clean failure)"
grep -qi "disk I/O error" "$NV_TMP/sql.err" ||
	fail "sqlite3: expected 'disk I/O error' (EPERM on a page rewrite), got: $(cat "$NV_TMP/sql.err")"
say "ok: sqlite3 fails cleanly (status $rc)"
rc=0
(cd "$NV_TMP" && timeout 30 git init "$D/repo") 2> "$NV_TMP/git.err" || rc=$?
((rc != 0 && rc != 124)) || fail "git init in the mount: status $rc (expected a clean failure)"
grep -q "Operation not permitted" "$NV_TMP/git.err" ||
	fail "git init: expected EPERM (no directories in a bucket), got: $(cat "$NV_TMP/git.err")"
say "ok: git init fails with EPERM (status $rc)"
nv_alive || fail "the daemon is not serving after the tools"
nv_same_file "$MNT/mv3/moved" "$NV_TMP/target.want" "an earlier stream after the tools"
nv_stop
