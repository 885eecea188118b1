#!/bin/bash
# t_refusals: the errno contract (DESIGN.md section 5).  Every refused
# operation is checked twice where it matters: the exit status and error text
# of the real command a user types, and the exact errno from a tiny python3
# os call.  Covers overwrites, O_TRUNC, truncate, rename, link, symlink,
# chmod, files at the root, directories in a bucket, bad names, read-only and
# unknown xattrs, and the class xattr.  Afterwards the daemon must still be
# alive and every stream intact.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
export LC_ALL=C
nv_init
nv_start

# $NV_TMP/op.py OP ARGS...: perform one os call, print OK or the errno name.
cat > "$NV_TMP/op.py" <<'PY'
import errno, os, sys
op, a = sys.argv[1], sys.argv[2:]
try:
    if op == "pwrite":          # PATH OFFSET DATA, opened without O_APPEND
        fd = os.open(a[0], os.O_WRONLY)
        try:
            n = os.pwrite(fd, a[2].encode(), int(a[1]))
            if n != len(a[2]):
                print("SHORT"); sys.exit(0)
        finally:
            os.close(fd)
    elif op == "append":        # PATH DATA
        fd = os.open(a[0], os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, a[1].encode())
        finally:
            os.close(fd)
    elif op == "open_trunc":    # PATH
        os.close(os.open(a[0], os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644))
    elif op == "create":        # PATH
        os.close(os.open(a[0], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    elif op == "truncate":      # PATH LENGTH
        os.truncate(a[0], int(a[1]))
    elif op == "rename":
        os.rename(a[0], a[1])
    elif op == "link":
        os.link(a[0], a[1])
    elif op == "symlink":
        os.symlink(a[0], a[1])
    elif op == "chmod":
        os.chmod(a[0], int(a[1], 8))
    elif op == "mkdir":
        os.mkdir(a[0])
    elif op == "setxattr":      # PATH NAME VALUE
        os.setxattr(a[0], a[1], a[2].encode())
    elif op == "getxattr":      # PATH NAME
        os.getxattr(a[0], a[1])
    else:
        sys.exit("op.py: unknown op " + op)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY

# expect_errno ERRNO WHAT OP ARGS...: the python os call must give ERRNO.
expect_errno() {
	local want=$1 what=$2 got
	shift 2
	got=$(python3 "$NV_TMP/op.py" "$@") || fail "$what: op.py $* crashed"
	[ "$got" = "$want" ] || fail "$what: os.$1 gave $got, expected $want"
	say "ok: $what -> $want (python os.$1)"
}

B=$MNT/b
mkdir "$B"
NE=$B/nonempty
printf 'first record\n' >> "$NE"
printf 'second record\n' >> "$NE"
printf 'first record\nsecond record\n' > "$NV_TMP/nonempty.want"
O2=$MNT/other
mkdir "$O2"
printf 'other\n' >> "$O2/x"

say "--- overwrites"
expect_errno EPERM "pwrite at offset 0 of a non-empty stream" pwrite "$NE" 0 XXXX
expect_errno EPERM "pwrite in the middle (offset 5)" pwrite "$NE" 5 XXXX
expect_errno EPERM "pwrite past the end (a hole)" pwrite "$NE" 1000 XXXX
nv_refuse "Operation not permitted" "dd conv=notrunc seek=0 over a non-empty stream" \
	dd if=/dev/zero of="$NE" bs=4 count=1 conv=notrunc status=none
cmp "$NE" "$NV_TMP/nonempty.want" || fail "a refused overwrite changed the stream"
expect_errno OK "pwrite at offset == size (an append)" pwrite "$NE" "$(nv_size "$NE")" $'third record\n'
printf 'third record\n' >> "$NV_TMP/nonempty.want"
cmp "$NE" "$NV_TMP/nonempty.want" || fail "append by pwrite at offset == size went wrong"

say "--- O_TRUNC and truncate"
nv_refuse "Operation not permitted" "echo x > nonempty (O_TRUNC)" bash -c "echo x > '$NE'"
expect_errno EPERM "open(O_TRUNC) of a non-empty stream" open_trunc "$NE"
: > "$B/empty" || fail ": > new_stream (create with O_TRUNC) failed"
nv_expect_eq "$(nv_size "$B/empty")" 0 "size of the new stream"
: > "$B/empty" || fail ": > existing empty stream (O_TRUNC) failed"
expect_errno OK "open(O_TRUNC) of an empty stream" open_trunc "$B/empty"
nv_refuse "Operation not permitted" "truncate -s 0 nonempty" truncate -s 0 "$NE"
nv_refuse "Operation not permitted" "truncate -s +100 nonempty (extend)" truncate -s +100 "$NE"
expect_errno EPERM "truncate(2) to 1 byte" truncate "$NE" 1
cmp "$NE" "$NV_TMP/nonempty.want" || fail "a refused truncate changed the stream"

say "--- names: rename, link, symlink, chmod"
nv_refuse "Operation not permitted" "mv within a bucket" mv "$NE" "$B/moved"
nv_refuse "Operation not permitted" "mv to another bucket" mv "$NE" "$O2/moved"
expect_errno EPERM "rename(2) of a stream" rename "$NE" "$B/moved"
expect_errno EPERM "rename(2) of a bucket" rename "$O2" "$MNT/other2"
expect_errno EPERM "rename(2) onto an existing stream" rename "$B/empty" "$NE"
nv_refuse "Operation not permitted" "ln (hard link)" ln "$NE" "$B/hard"
expect_errno EPERM "link(2)" link "$NE" "$B/hard"
nv_refuse "Operation not permitted" "ln -s" ln -s nonempty "$B/soft"
expect_errno EPERM "symlink(2)" symlink nonempty "$B/soft"
nv_refuse "Operation not permitted" "chmod 600" chmod 600 "$NE"
expect_errno EPERM "chmod(2) 0600" chmod "$NE" 600
for gone in moved hard soft; do
	[ ! -e "$B/$gone" ] || fail "$B/$gone exists after a refused operation"
done
[ ! -e "$MNT/other2" ] || fail "refused bucket rename left $MNT/other2"

say "--- structure: files at the root, directories in a bucket"
nv_refuse "Operation not permitted" ": > MOUNT/file (file at the root)" bash -c ": > '$MNT/rootfile'"
expect_errno EPERM "create(2) at the root" create "$MNT/rootfile"
nv_refuse "Operation not permitted" "mkdir inside a bucket" mkdir "$B/sub"
expect_errno EPERM "mkdir(2) inside a bucket" mkdir "$B/sub"
[ ! -e "$MNT/rootfile" ] && [ ! -e "$B/sub" ] || fail "a refused create left an entry"

say "--- invalid names"
LONG=$(printf 'n%.0s' $(seq 1 300))
nv_refuse "Invalid argument" "stream name with a leading '.'" bash -c ": > '$B/.hidden'"
expect_errno EINVAL "create(2) of '.hidden'" create "$B/.hidden"
expect_errno EINVAL "mkdir(2) of bucket '.dot'" mkdir "$MNT/.dot"
nv_refuse "File name too long" "a 300-byte stream name" bash -c ": > '$B/$LONG'"
expect_errno ENAMETOOLONG "create(2) with a 300-byte name" create "$B/$LONG"
expect_errno ENAMETOOLONG "mkdir(2) with a 300-byte bucket name" mkdir "$MNT/$LONG"
[ "$(ls -A "$B" | sort | tr '\n' ' ')" = "empty nonempty " ] ||
	fail "bucket listing after refused creates: $(ls -A "$B" | tr '\n' ' ')"
say "ok: the bucket lists only 'empty' and 'nonempty'"

say "--- xattrs"
nv_refuse "Operation not permitted" "setfattr user.nova.seq (read-only)" \
	setfattr -n user.nova.seq -v 5 "$NE"
expect_errno EPERM "setxattr(2) user.nova.seq" setxattr "$NE" user.nova.seq 5
nv_expect_eq "$(nv_xattr "$NE" user.nova.seq)" 3 "user.nova.seq unchanged"
nv_refuse "Operation not supported" "setfattr user.foo" setfattr -n user.foo -v 1 "$NE"
# EOPNOTSUPP == ENOTSUP on Linux; python names errno 95 ENOTSUP.
expect_errno ENOTSUP "setxattr(2) user.foo" setxattr "$NE" user.foo 1
nv_refuse "No such attribute" "getfattr user.nova.nope" getfattr -n user.nova.nope "$NE"
expect_errno ENODATA "getxattr(2) user.nova.nope" getxattr "$NE" user.nova.nope

say "--- class"
: > "$B/fast"
nv_expect_eq "$(nv_xattr "$B/fast" user.nova.class)" standard "default class"
setfattr -n user.nova.class -v express "$B/fast" || fail "setfattr class=express on an empty stream failed"
nv_expect_eq "$(nv_xattr "$B/fast" user.nova.class)" express "class after setfattr on the empty stream"
getfattr --absolute-names -d -m user.nova "$B/fast" | grep -qx 'user.nova.class="express"' ||
	fail "getfattr -d does not show class express: $(getfattr --absolute-names -d -m user.nova "$B/fast")"
printf 'express record\n' >> "$B/fast" || fail "append to the express stream failed"
nv_expect_eq "$(cat "$B/fast")" "express record" "content of the express stream"
nv_refuse "Directory not empty" "setfattr class on a non-empty stream" \
	setfattr -n user.nova.class -v express "$NE"
expect_errno ENOTEMPTY "setxattr(2) class on a non-empty stream" setxattr "$NE" user.nova.class express
nv_expect_eq "$(nv_xattr "$NE" user.nova.class)" standard "class of the non-empty stream unchanged"
: > "$B/bad"
nv_refuse "Invalid argument" "setfattr class=bogus" setfattr -n user.nova.class -v bogus "$B/bad"
expect_errno EINVAL "setxattr(2) class=''" setxattr "$B/bad" user.nova.class ""
expect_errno EINVAL "setxattr(2) class='expressx'" setxattr "$B/bad" user.nova.class expressx
nv_expect_eq "$(nv_xattr "$B/bad" user.nova.class)" standard "class after refused values"

say "--- after the walk"
nv_alive || fail "the daemon died or the mount stopped answering during the refusals"
say "ok: daemon $NV_PID alive, mount answers"
cmp "$NE" "$NV_TMP/nonempty.want" || fail "nonempty changed"
[ "$(cat "$O2/x")" = other ] || fail "other/x changed"
nv_expect_eq "$(nv_size "$B/empty")" 0 "empty stream still empty"
nv_expect_eq "$(nv_xattr "$NE" user.nova.seq)" 3 "nonempty seq"
nv_remount
cmp "$NE" "$NV_TMP/nonempty.want" || fail "nonempty changed across a remount"
nv_expect_eq "$(nv_xattr "$B/fast" user.nova.class)" express "class express kept across a remount"
nv_expect_eq "$(cat "$B/fast")" "express record" "express stream across a remount"
say "ok: streams intact after a remount"
nv_stop
