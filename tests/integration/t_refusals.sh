#!/bin/bash
# t_refusals: the errno contract (DESIGN.md section 5).  The test walks the
# table of the ERRORS section of man/novafs.8 itself: it parses the rows
# (operation, errno) out of the man page, every check below names the row it
# covers (`row "operation" ERRNO`), and at the end every row must have been
# named, with the table's errno, and no name may be missing from the table;
# so the man page and the test cannot drift apart.  Every refused operation
# is checked through the mount, twice where it matters: the exit status and
# error text of the real command a user types, and the exact errno from a
# tiny python3 os call.  Rows that need a fault or a signal are checked by
# the test named with `row_elsewhere` (the file must exist here and mention
# the errno).  Afterwards the daemon must still be alive, every stream
# intact, also across a remount.  Last, the rest of the man page that
# names the code: the xattrs of each EXTENDED ATTRIBUTES subsection are
# exactly those the daemon lists or fs/xattr.c handles there (and each
# reads), and the FILES section's DATA_DIR entries are exactly what a
# running daemon made in its data directory (novafs.log: t_mount's).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
export LC_ALL=C
nv_init

# ---------------------------------------------------------------- the table
# The rows of the tbl table between .TS and .TE in the ERRORS section of
# man/novafs.8: "operation<TAB>ERRNO", or "T{", text lines, "T}<TAB>ERRNO"
# for an operation written over several lines (joined with spaces).  The
# header row (Operation, Error) and the _ rule are not rows.
if [ -n "${srcdir:-}" ]; then
	NV_MAN=$srcdir/man/novafs.8
else
	NV_MAN=$(dirname "$TESTLIB")/../../man/novafs.8
fi
[ -r "$NV_MAN" ] || nv_hard_error "cannot read the man page $NV_MAN"
NV_TDIR=$(cd "$(dirname "$0")" && pwd) # the tests next to this one
awk '
function clean(t) {
	gsub(/\\-/, "-", t); gsub(/\\&/, "", t); gsub(/\\e/, "\\", t)
	sub(/^[ \t]+/, "", t); sub(/[ \t]+$/, "", t)
	return t
}
function emit(l,    n, f) {
	n = split(l, f, "\t")
	if (n == 2 && f[1] == "Operation" && f[2] == "Error")
		return
	f[1] = clean(f[1]); f[2] = clean(f[2])
	if (n != 2 || f[1] == "" || f[2] !~ /^E[A-Z0-9]+$/)
		print "BAD\t" l
	else
		print f[1] "\t" f[2]
}
/^\.SH/ { sec = $0; sub(/^\.SH[ \t]+/, "", sec); gsub(/"/, "", sec); inerr = (sec == "ERRORS"); next }
!inerr || done { next }
!tbl { if (/^\.TS/) { tbl = 1; fmt = 1; found = 1 } next }
/^\.TE/ { tbl = 0; done = 1; next }
fmt { if (/\.[ \t]*$/) fmt = 0; next }	# the options and format lines
blk {
	if (/^T\}/) { rest = $0; sub(/^T\}/, "", rest); emit(text rest); blk = 0 }
	else text = text (text == "" ? "" : " ") $0
	next
}
/^T\{/ { blk = 1; text = substr($0, 3); next }
/^[_=]$/ || /^\./ { next }		# rules, requests
{ emit($0) }
END { if (!found) print "BAD\tno .TS table after .SH ERRORS" }
' "$NV_MAN" > "$NV_TMP/errors.table" || nv_hard_error "awk could not parse $NV_MAN"
declare -A NV_ROW_ERRNO=() NV_ROW_SEEN=()
NV_ROWS=()          # the table's rows, in order
NV_ROW_PROBLEMS=()  # drift between the table and the test, reported at the end
while IFS=$'\t' read -r op err; do
	[ "$op" != BAD ] || fail "$NV_MAN, ERRORS: not an 'operation<TAB>ERRNO' row: '$err'"
	[ -z "${NV_ROW_ERRNO[$op]+set}" ] || fail "$NV_MAN, ERRORS: row '$op' appears twice"
	NV_ROW_ERRNO[$op]=$err
	NV_ROWS+=("$op")
done < "$NV_TMP/errors.table"
((${#NV_ROWS[@]} > 0)) || fail "$NV_MAN, ERRORS: the table has no rows"
say "the ERRORS table of $NV_MAN has ${#NV_ROWS[@]} rows"

# row OPERATION ERRNO [HOW]: the checks that follow (up to the next row)
# cover this row of the table; OPERATION is its text, exactly as joined
# above.  A name not in the table or another errno is drift, reported (all
# of it at once) by rows_check at the end.
row() {
	local op=$1 err=$2
	if [ -z "${NV_ROW_ERRNO[$op]+set}" ]; then
		NV_ROW_PROBLEMS+=("the test names a row that is not in the table: '$op' ($err)")
		say "--- row NOT IN THE TABLE: $op -> $err"
		return 0
	fi
	[ "${NV_ROW_ERRNO[$op]}" = "$err" ] ||
		NV_ROW_PROBLEMS+=("row '$op': the table says ${NV_ROW_ERRNO[$op]}, the test checks $err")
	NV_ROW_SEEN[$op]=${3:-here}
	say "--- row: $op -> $err"
}

# row_elsewhere OPERATION ERRNO TEST...: a row that needs a fault or a
# signal, checked by TEST (t_*.sh next to this test), which must exist and
# mention ERRNO or its strerror text.
row_elsewhere() {
	local op=$1 err=$2 f txt
	shift 2
	txt=$(python3 -c 'import errno, os, sys; print(os.strerror(getattr(errno, sys.argv[1])))' "$err") ||
		fail "row '$op': $err is not an errno name"
	for f; do
		[ -f "$NV_TDIR/$f" ] || fail "row '$op': $f, named as its test, is not in $NV_TDIR"
		grep -qwF -e "$err" -e "$txt" "$NV_TDIR/$f" ||
			fail "row '$op': $f, named as its test, mentions neither $err nor '$txt'"
	done
	row "$op" "$err" elsewhere
	say "ok: checked by $* (it mentions $err or '$txt')"
}

# rows_check: every row of the table was named, no name is missing from it.
rows_check() {
	local op p here=0 elsewhere=0
	for op in "${NV_ROWS[@]}"; do
		case ${NV_ROW_SEEN[$op]:-} in
		here) here=$((here + 1)) ;;
		elsewhere) elsewhere=$((elsewhere + 1)) ;;
		*) NV_ROW_PROBLEMS+=("a table row no check names: '$op' (${NV_ROW_ERRNO[$op]})") ;;
		esac
	done
	if ((${#NV_ROW_PROBLEMS[@]})); then
		for p in "${NV_ROW_PROBLEMS[@]}"; do
			printf '%s: drift: %s\n' "$NV_TEST" "$p" >&2
		done
		fail "the ERRORS table of $NV_MAN and this test disagree (${#NV_ROW_PROBLEMS[@]} problem(s) above)"
	fi
	say "ok: all ${#NV_ROWS[@]} rows of the ERRORS table named: $here checked here, $elsewhere by other tests"
}

nv_start "absorb_linger_us=0"

# $NV_TMP/op.py OP ARGS...: perform one os call, print OK or the errno name.
cat > "$NV_TMP/op.py" <<'PY'
import ctypes, errno, os, stat, sys
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
    elif op == "open":          # PATH FLAGS, e.g. WRONLY|APPEND (os.O_ names)
        fl = 0
        for f in a[1].split("|"):
            fl |= getattr(os, "O_" + f)
        os.close(os.open(a[0], fl, 0o644))
    elif op == "truncate":      # PATH LENGTH
        os.truncate(a[0], int(a[1]))
    elif op == "rename":
        os.rename(a[0], a[1])
    elif op == "rename_exchange":  # OLD NEW: renameat2(RENAME_EXCHANGE)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.renameat2(-100, a[0].encode(), -100, a[1].encode(), 2) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    elif op == "link":
        os.link(a[0], a[1])
    elif op == "symlink":
        os.symlink(a[0], a[1])
    elif op == "chmod":
        os.chmod(a[0], int(a[1], 8))
    elif op == "chown":         # PATH UID GID (-1: leave it)
        os.chown(a[0], int(a[1]), int(a[2]))
    elif op == "mkdir":
        os.mkdir(a[0])
    elif op == "rmdir":
        os.rmdir(a[0])
    elif op == "unlink":
        os.unlink(a[0])
    elif op == "mkfifo":
        os.mkfifo(a[0])
    elif op == "mknod":         # PATH reg|chr|blk|sock
        kind = {"reg": stat.S_IFREG, "chr": stat.S_IFCHR,
                "blk": stat.S_IFBLK, "sock": stat.S_IFSOCK}[a[1]]
        os.mknod(a[0], kind | 0o600, os.makedev(1, 3))
    elif op == "setxattr":      # PATH NAME VALUE
        os.setxattr(a[0], a[1], a[2].encode())
    elif op == "getxattr":      # PATH NAME
        os.getxattr(a[0], a[1])
    elif op == "removexattr":   # PATH NAME
        os.removexattr(a[0], a[1])
    elif op == "lseek":         # PATH DATA|HOLE OFFSET [WANT]: AT<n> if not WANT
        fd = os.open(a[0], os.O_RDONLY)
        try:
            at = os.lseek(fd, int(a[2]), {"DATA": os.SEEK_DATA, "HOLE": os.SEEK_HOLE}[a[1]])
        finally:
            os.close(fd)
        if len(a) > 3 and at != int(a[3]):
            print("AT%d" % at); sys.exit(0)
    elif op == "fallocate":     # PATH MODE OFFSET LENGTH: fallocate(2) itself
        # (glibc's posix_fallocate would emulate a refused mode 0 by writing).
        libc = ctypes.CDLL(None, use_errno=True)
        libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        fd = os.open(a[0], os.O_WRONLY)
        try:
            if libc.fallocate(fd, int(a[1], 0), int(a[2]), int(a[3])) != 0:
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e))
        finally:
            os.close(fd)
    elif op == "write_after_unlink":  # PATH DATA: open, unlink, then write
        try:
            fd = os.open(a[0], os.O_WRONLY | os.O_APPEND)
            os.unlink(a[0])
        except OSError as e:
            print("SETUP_" + errno.errorcode.get(e.errno, str(e.errno))); sys.exit(0)
        try:
            os.write(fd, a[1].encode())
        finally:
            os.close(fd)
    else:
        sys.exit("op.py: unknown op " + op)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY

# expect_errno ERRNO WHAT OP ARGS...: the python os call must give ERRNO.
# EOPNOTSUPP == ENOTSUP on Linux; python names errno 95 ENOTSUP.
expect_errno() {
	local want=$1 what=$2 got
	shift 2
	got=$(python3 "$NV_TMP/op.py" "$@") || fail "$what: op.py $* crashed"
	[ "$got" = "${want/#EOPNOTSUPP/ENOTSUP}" ] || fail "$what: os.$1 gave $got, expected $want"
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

row "write at an offset other than the end" EPERM
expect_errno EPERM "pwrite at offset 0 of a non-empty stream" pwrite "$NE" 0 XXXX
expect_errno EPERM "pwrite in the middle (offset 5)" pwrite "$NE" 5 XXXX
expect_errno EPERM "pwrite past the end (a hole)" pwrite "$NE" 1000 XXXX
nv_refuse "Operation not permitted" "dd conv=notrunc seek=0 over a non-empty stream" \
	dd if=/dev/zero of="$NE" bs=4 count=1 conv=notrunc status=none
cmp "$NE" "$NV_TMP/nonempty.want" || fail "a refused overwrite changed the stream"
expect_errno OK "pwrite at offset == size (an append)" pwrite "$NE" "$(nv_size "$NE")" $'third record\n'
printf 'third record\n' >> "$NV_TMP/nonempty.want"
cmp "$NE" "$NV_TMP/nonempty.want" || fail "append by pwrite at offset == size went wrong"

row "truncate or O_TRUNC of a non-empty stream" EPERM
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

row "rename of a stream to another bucket, or of a bucket" EXDEV
expect_errno EXDEV "rename(2) of a stream to another bucket" rename "$NE" "$O2/moved"
expect_errno EXDEV "rename(2) of a bucket" rename "$O2" "$MNT/other2"
[ -e "$NE" ] || fail "a refused rename removed $NE"
row "rename of a stream to the top level" EPERM
expect_errno EPERM "rename(2) of a stream to the top level" rename "$NE" "$MNT/moved"
row "rename with RENAME_EXCHANGE" EINVAL
expect_errno EINVAL "renameat2(2) RENAME_EXCHANGE" rename_exchange "$NE" "$B/empty"
nv_expect_eq "$(cat "$NE")" "$(cat "$NV_TMP/nonempty.want")" "nonempty after the refused renames"
row "link, symlink" EPERM
nv_refuse "Operation not permitted" "ln (hard link)" ln "$NE" "$B/hard"
expect_errno EPERM "link(2)" link "$NE" "$B/hard"
nv_refuse "Operation not permitted" "ln -s" ln -s nonempty "$B/soft"
expect_errno EPERM "symlink(2)" symlink nonempty "$B/soft"
for gone in moved hard soft; do
	[ ! -e "$B/$gone" ] || fail "$B/$gone exists after a refused operation"
done
[ ! -e "$MNT/other2" ] || fail "refused bucket rename left $MNT/other2"

row "chmod or chown of the top level" EPERM
owner=$(stat -c %u:%g:%a "$MNT")
nv_refuse "Operation not permitted" "chmod 700 of the mount's root" chmod 700 "$MNT"
expect_errno EPERM "chmod(2) of the root" chmod "$MNT" 700
expect_errno EPERM "chown(2) of the root to uid 1000" chown "$MNT" 1000 -1
expect_errno OK "chmod(2) of the root to the mode it has" chmod "$MNT" "$(stat -c %a "$MNT")"
nv_expect_eq "$(stat -c %u:%g:%a "$MNT")" "$owner" "owner and mode of the root after the refusals"
# Owners' and root's chmod and chown of buckets and streams work; other
# users are refused (POSIX rules), tested as nobody by t_permissions.sh.
expect_errno OK "chmod(2) 0600 of a stream by root" chmod "$NE" 600
expect_errno OK "chown(2) of a stream to uid 1000 by root" chown "$NE" 1000 1000
nv_expect_eq "$(stat -c %u:%g:%a "$NE")" 1000:1000:600 "owner and mode of the stream after chown and chmod"
chown 0:0 "$NE" && chmod 644 "$NE"
row_elsewhere "chmod or chown of an entry by a user who does not own it; chown to another user, or chgrp to a group one is not in, except by root" EPERM t_permissions.sh
row_elsewhere "open, create, unlink, rename, mkdir, rmdir, list or setxattr that the owner, group and mode do not allow" EACCES t_permissions.sh

row "create a file at the top level" EPERM
nv_refuse "Operation not permitted" ": > MOUNT/file (file at the root)" bash -c ": > '$MNT/rootfile'"
expect_errno EPERM "create(2) at the root" create "$MNT/rootfile"
expect_errno EPERM "mknod(2) of a regular file at the root" mknod "$MNT/rootfile" reg
row "mkdir inside a bucket; mknod of a non-regular file" EPERM
nv_refuse "Operation not permitted" "mkdir inside a bucket" mkdir "$B/sub"
expect_errno EPERM "mkdir(2) inside a bucket" mkdir "$B/sub"
nv_refuse "Operation not permitted" "mkfifo in a bucket" mkfifo "$B/fifo"
expect_errno EPERM "mkfifo(3) in a bucket" mkfifo "$B/fifo"
expect_errno EPERM "mknod(2) of a character device in a bucket" mknod "$B/chr" chr
expect_errno EPERM "mknod(2) of a socket in a bucket" mknod "$B/sock" sock
for gone in "$MNT/rootfile" "$B/sub" "$B/fifo" "$B/chr" "$B/sock"; do
	[ ! -e "$gone" ] || fail "a refused create left $gone"
done

row "invalid bucket or stream name" EINVAL
expect_errno EINVAL "mkdir(2) of bucket '.dot'" mkdir "$MNT/.dot"
nv_refuse "Invalid argument" "mkdir of bucket 'a:b' (a character outside [A-Za-z0-9._-])" mkdir "$MNT/a:b"
expect_errno EINVAL "mkdir(2) of bucket 'a b'" mkdir "$MNT/a b"
row "name too long (bucket > 63, stream > 255 bytes)" ENAMETOOLONG
LONG=$(printf 'n%.0s' $(seq 1 300))
nv_refuse "File name too long" "a 300-byte stream name" bash -c ": > '$B/$LONG'"
expect_errno ENAMETOOLONG "create(2) with a 300-byte name" create "$B/$LONG"
expect_errno ENAMETOOLONG "create(2) with a 256-byte name" create "$B/$(printf 's%.0s' $(seq 1 256))"
expect_errno ENAMETOOLONG "mkdir(2) with a 300-byte bucket name" mkdir "$MNT/$LONG"
# 64 bytes: the kernel lets it through, the daemon refuses it.
nv_refuse "File name too long" "mkdir of a 64-byte bucket name" mkdir "$MNT/$(printf 'b%.0s' $(seq 1 64))"
expect_errno ENAMETOOLONG "mkdir(2) with a 64-byte bucket name" mkdir "$MNT/$(printf 'b%.0s' $(seq 1 64))"
B63=$MNT/$(printf 'b%.0s' $(seq 1 63))
expect_errno OK "mkdir(2) with a 63-byte bucket name" mkdir "$B63"
expect_errno OK "create(2) of a 255-byte stream name in it" create "$B63/$(printf 's%.0s' $(seq 1 255))"
[ "$(ls -A "$B" | sort | tr '\n' ' ')" = "empty nonempty " ] ||
	fail "bucket listing after refused creates: $(ls -A "$B" | tr '\n' ' ')"
say "ok: the bucket lists only 'empty' and 'nonempty'"

row "set a read-only user.nova. xattr" ENOTSUP
nv_refuse "Operation not supported" "setfattr user.nova.seq (read-only)" \
	setfattr -n user.nova.seq -v 5 "$NE"
expect_errno ENOTSUP "setxattr(2) user.nova.seq" setxattr "$NE" user.nova.seq 5
expect_errno ENOTSUP "setxattr(2) user.nova.layout" setxattr "$NE" user.nova.layout '{}'
expect_errno ENOTSUP "setxattr(2) user.nova.stats on the root" setxattr "$MNT" user.nova.stats '{}'
row "remove a user.nova. xattr other than a stream's user.nova.durable" EPERM
nv_refuse "Operation not permitted" "setfattr -x user.nova.class" setfattr -x user.nova.class "$NE"
expect_errno EPERM "removexattr(2) user.nova.class" removexattr "$NE" user.nova.class
expect_errno EPERM "removexattr(2) user.nova.seq" removexattr "$NE" user.nova.seq
expect_errno EPERM "removexattr(2) user.nova.nope (unknown, still user.nova.)" removexattr "$NE" user.nova.nope
expect_errno EPERM "removexattr(2) user.nova.class of a bucket" removexattr "$B" user.nova.class
expect_errno EPERM "removexattr(2) user.nova.durable of a bucket (streams only)" removexattr "$B" user.nova.durable
nv_expect_eq "$(nv_xattr "$NE" user.nova.seq)" 3 "user.nova.seq unchanged"
nv_expect_eq "$(nv_xattr "$NE" user.nova.class)" standard "user.nova.class still there"
row "set an xattr outside user.nova." ENOTSUP
nv_refuse "Operation not supported" "setfattr user.foo" setfattr -n user.foo -v 1 "$NE"
expect_errno ENOTSUP "setxattr(2) user.foo" setxattr "$NE" user.foo 1
expect_errno ENOTSUP "setxattr(2) trusted.foo" setxattr "$NE" trusted.foo 1
row "set an unknown user.nova. xattr" ENOTSUP
nv_refuse "Operation not supported" "setfattr user.nova.nope" setfattr -n user.nova.nope -v 1 "$NE"
expect_errno ENOTSUP "setxattr(2) user.nova.nope" setxattr "$NE" user.nova.nope 1
expect_errno ENOTSUP "setxattr(2) user.nova.seq on a bucket (a stream's name)" setxattr "$B" user.nova.seq 1
expect_errno ENOTSUP "setxattr(2) user.nova.class on the root" setxattr "$MNT" user.nova.class express
row "read an unknown xattr" ENODATA
nv_refuse "No such attribute" "getfattr user.nova.nope" getfattr -n user.nova.nope "$NE"
expect_errno ENODATA "getxattr(2) user.nova.nope" getxattr "$NE" user.nova.nope
expect_errno ENODATA "getxattr(2) user.foo" getxattr "$NE" user.foo
expect_errno ENODATA "getxattr(2) user.nova.seq on a bucket" getxattr "$B" user.nova.seq

row "set user.nova.class of a non-empty stream" ENOTEMPTY
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
row "set user.nova.durable to a value other than write or fsync" EINVAL
nv_refuse "Invalid argument" "setfattr durable=bogus" setfattr -n user.nova.durable -v bogus "$NE"
expect_errno EINVAL "setxattr(2) durable=''" setxattr "$NE" user.nova.durable ""
expect_errno EINVAL "setxattr(2) durable='fsyncx'" setxattr "$NE" user.nova.durable fsyncx
nv_expect_eq "$(nv_xattr "$NE" user.nova.durable)" write "durable after refused values"
row "set user.nova.leader to an empty value or one longer than a star id" EINVAL
expect_errno EINVAL "setxattr(2) leader=''" setxattr "$NE" user.nova.leader ""
row "set user.nova.leader to a star id no star registered" EINVAL
expect_errno EINVAL "setxattr(2) leader=other" setxattr "$NE" user.nova.leader other
nv_expect_eq "$(nv_xattr "$NE" user.nova.leader | cut -d' ' -f2)" 1 "lease epoch after the refusals"
row "set user.nova.class to a malformed value" EINVAL
: > "$B/bad"
nv_refuse "Invalid argument" "setfattr class=bogus" setfattr -n user.nova.class -v bogus "$B/bad"
expect_errno EINVAL "setxattr(2) class=''" setxattr "$B/bad" user.nova.class ""
expect_errno EINVAL "setxattr(2) class='expressx'" setxattr "$B/bad" user.nova.class expressx
nv_expect_eq "$(nv_xattr "$B/bad" user.nova.class)" standard "class after refused values"

say "--- the follow view (bucket fv)"
FV=$MNT/fv
mkdir "$FV"
printf 'followed\n' >> "$FV/s"
F=$MNT/.follow/fv/s
nv_expect_eq "$(head -c 9 "$F")" followed "the follow view reads the stream"
row "in the .follow view: a write open, O_TRUNC, create, mknod, mkdir, rmdir, unlink, rename, truncate, chmod, chown, setxattr (link there: EPERM)" EROFS
nv_refuse "Read-only file system" "echo x >> .follow/fv/s (write open)" bash -c "echo x >> '$F'"
expect_errno EROFS "open(2) O_WRONLY|O_APPEND in the follow view" open "$F" "WRONLY|APPEND"
expect_errno EROFS "open(2) O_WRONLY in the follow view" open "$F" WRONLY
expect_errno EROFS "open(2) O_RDWR in the follow view" open "$F" RDWR
nv_refuse "Read-only file system" "echo x > .follow/fv/s (O_TRUNC)" bash -c "echo x > '$F'"
expect_errno EROFS "open(2) O_RDONLY|O_TRUNC in the follow view" open "$F" "RDONLY|TRUNC"
nv_refuse "Read-only file system" ": > .follow/fv/new (create)" bash -c ": > '$MNT/.follow/fv/new'"
expect_errno EROFS "create(2) in a follow bucket" create "$MNT/.follow/fv/new"
expect_errno EROFS "mknod(2) of a regular file in a follow bucket" mknod "$MNT/.follow/fv/new" reg
nv_refuse "Read-only file system" "mkdir .follow/fv/d" mkdir "$MNT/.follow/fv/d"
expect_errno EROFS "mkdir(2) in a follow bucket" mkdir "$MNT/.follow/fv/d"
expect_errno EROFS "mkdir(2) of a bucket in .follow" mkdir "$MNT/.follow/newbucket"
nv_refuse "Read-only file system" "rmdir .follow/fv" rmdir "$MNT/.follow/fv"
expect_errno EROFS "rmdir(2) of a follow bucket" rmdir "$MNT/.follow/fv"
expect_errno EROFS "rmdir(2) of .follow itself" rmdir "$MNT/.follow"
nv_refuse "Read-only file system" "rm -f .follow/fv/s" rm -f "$F"
expect_errno EROFS "unlink(2) in the follow view" unlink "$F"
nv_refuse "Read-only file system" "truncate -s 0 .follow/fv/s" truncate -s 0 "$F"
expect_errno EROFS "truncate(2) to 0 in the follow view" truncate "$F" 0
expect_errno EROFS "truncate(2) to its own size in the follow view" truncate "$F" "$(nv_size "$FV/s")"
nv_refuse "Read-only file system" "chmod 600 .follow/fv/s" chmod 600 "$F"
expect_errno EROFS "chmod(2) in the follow view" chmod "$F" 600
expect_errno EROFS "chown(2) in the follow view" chown "$F" 1000 -1
nv_refuse "Read-only file system" "setfattr user.nova.class in the follow view" \
	setfattr -n user.nova.class -v express "$F"
expect_errno EROFS "setxattr(2) user.nova.trim in the follow view" setxattr "$F" user.nova.trim 1
expect_errno EROFS "setxattr(2) user.foo in the follow view" setxattr "$F" user.foo 1
expect_errno EROFS "rename(2) inside the follow view" rename "$F" "$MNT/.follow/fv/moved"
expect_errno EROFS "rename(2) out of the follow view" rename "$F" "$FV/moved"
# link is refused everywhere by its own row, the follow view too.
row "link, symlink" EPERM
expect_errno EPERM "link(2) into the follow view" link "$FV/s" "$MNT/.follow/fv/hard"
nv_expect_eq "$(cat "$FV/s")" followed "fv/s after the refusals in the follow view"
nv_expect_eq "$(ls -A "$FV" | tr '\n' ' ')" "s " "listing of fv"
nv_expect_eq "$(ls -A "$MNT/.follow/fv" | tr '\n' ' ')" "s " "listing of .follow/fv"
nv_expect_eq "$(nv_xattr "$FV/s" user.nova.class):$(nv_xattr "$FV/s" user.nova.trim)" standard:0 \
	"class:trim of fv/s"
[ ! -e "$MNT/newbucket" ] || fail "a refused mkdir in .follow made a bucket"
row "mkdir .follow at the top level" EEXIST
nv_refuse "File exists" "mkdir MOUNT/.follow" mkdir "$MNT/.follow"
expect_errno EEXIST "mkdir(2) of .follow" mkdir "$MNT/.follow"

say "--- fallocate and lseek (bucket fa)"
FA=$MNT/fa
mkdir "$FA"
printf 'aaaa\n' >> "$FA/s"
printf 'bbbb\n' >> "$FA/s"
printf 'cccc\n' >> "$FA/s"
printf 'aaaa\nbbbb\ncccc\n' > "$NV_TMP/fa.want"
row "fallocate other than a hole punch that starts inside the trimmed head" EOPNOTSUPP
nv_refuse "Operation not supported" "fallocate -l 100 (mode 0: allocate)" fallocate -l 100 "$FA/s"
nv_refuse "Operation not supported" "fallocate -z (zero a range)" fallocate -z -o 0 -l 5 "$FA/s"
expect_errno EOPNOTSUPP "fallocate(2) mode 0 (allocate)" fallocate "$FA/s" 0 0 100
expect_errno EOPNOTSUPP "fallocate(2) FALLOC_FL_KEEP_SIZE" fallocate "$FA/s" 0x01 0 100
expect_errno EOPNOTSUPP "fallocate(2) FALLOC_FL_ZERO_RANGE" fallocate "$FA/s" 0x10 0 5
expect_errno EOPNOTSUPP "fallocate(2) FALLOC_FL_COLLAPSE_RANGE" fallocate "$FA/s" 0x08 0 5
expect_errno EOPNOTSUPP "fallocate(2) FALLOC_FL_INSERT_RANGE" fallocate "$FA/s" 0x20 0 5
expect_errno EOPNOTSUPP "fallocate(2) a hole punch at offset 5, past the trimmed head (none)" fallocate "$FA/s" 0x03 5 5
nv_same_file "$FA/s" "$NV_TMP/fa.want" "fa/s after the refused fallocates"
# The one fallocate allowed: a hole punch that starts inside the trimmed head
# (a trim); then the head ends at 5, and a punch from 5 on is allowed too.
expect_errno OK "fallocate(2) punch [0, 5) (trims record 1)" fallocate "$FA/s" 0x03 0 5
nv_expect_eq "$(nv_xattr "$FA/s" user.nova.trim)" 1 "user.nova.trim of fa/s after the punch"
expect_errno OK "fallocate(2) punch [5, 10) (from the trimmed head's end)" fallocate "$FA/s" 0x03 5 5
nv_expect_eq "$(nv_xattr "$FA/s" user.nova.trim)" 2 "user.nova.trim of fa/s after the second punch"
expect_errno EOPNOTSUPP "fallocate(2) a hole punch at offset 11, past the trimmed head (10)" fallocate "$FA/s" 0x03 11 2
nv_expect_eq "$(nv_size "$FA/s")" 15 "size of fa/s after the punches"
nv_expect_eq "$(tail -c 5 "$FA/s")" cccc "the record after the trimmed head"
row "lseek SEEK_DATA or SEEK_HOLE at or past the end" ENXIO
printf 'seek me\n' >> "$FA/seek"
expect_errno ENXIO "lseek(2) SEEK_DATA at the end (8)" lseek "$FA/seek" DATA 8
expect_errno ENXIO "lseek(2) SEEK_HOLE at the end (8)" lseek "$FA/seek" HOLE 8
expect_errno ENXIO "lseek(2) SEEK_DATA past the end" lseek "$FA/seek" DATA 100
expect_errno ENXIO "lseek(2) SEEK_HOLE past the end" lseek "$FA/seek" HOLE 100
expect_errno ENXIO "lseek(2) SEEK_DATA 0 of an empty stream" lseek "$B/empty" DATA 0
expect_errno OK "lseek(2) SEEK_DATA 3 -> 3" lseek "$FA/seek" DATA 3 3
expect_errno OK "lseek(2) SEEK_HOLE 0 -> the end (8)" lseek "$FA/seek" HOLE 0 8
expect_errno OK "lseek(2) SEEK_DATA 0 of fa/s (trimmed to 10) -> 10" lseek "$FA/s" DATA 0 10
expect_errno OK "lseek(2) SEEK_HOLE 0 of fa/s (trimmed to 10) -> 0" lseek "$FA/s" HOLE 0 0
expect_errno ENXIO "lseek(2) SEEK_DATA at the end of fa/s (15)" lseek "$FA/s" DATA 15

say "--- user.nova.trim (bucket tr)"
TR=$MNT/tr
mkdir "$TR"
for i in 1 2 3 4; do printf 'rec %s\n' "$i" >> "$TR/s"; done
setfattr -n user.nova.trim -v 2 "$TR/s" || fail "setfattr user.nova.trim=2 failed"
nv_expect_eq "$(nv_xattr "$TR/s" user.nova.trim)" 2 "user.nova.trim after trim=2"
row "set user.nova.trim below its value, past user.nova.seq, or not a number" EINVAL
nv_refuse "Invalid argument" "setfattr user.nova.trim=1 (below its value, 2)" setfattr -n user.nova.trim -v 1 "$TR/s"
expect_errno EINVAL "setxattr(2) trim=1 (below 2)" setxattr "$TR/s" user.nova.trim 1
expect_errno EINVAL "setxattr(2) trim=0 (below 2)" setxattr "$TR/s" user.nova.trim 0
nv_refuse "Invalid argument" "setfattr user.nova.trim=5 (past seq 4)" setfattr -n user.nova.trim -v 5 "$TR/s"
expect_errno EINVAL "setxattr(2) trim=5 (past seq 4)" setxattr "$TR/s" user.nova.trim 5
expect_errno EINVAL "setxattr(2) trim=18446744073709551616 (over 64 bits)" setxattr "$TR/s" user.nova.trim 18446744073709551616
nv_refuse "Invalid argument" "setfattr user.nova.trim=abc" setfattr -n user.nova.trim -v abc "$TR/s"
expect_errno EINVAL "setxattr(2) trim=''" setxattr "$TR/s" user.nova.trim ""
expect_errno EINVAL "setxattr(2) trim=' 3'" setxattr "$TR/s" user.nova.trim " 3"
expect_errno EINVAL "setxattr(2) trim='-1'" setxattr "$TR/s" user.nova.trim -1
expect_errno EINVAL "setxattr(2) trim='3x'" setxattr "$TR/s" user.nova.trim 3x
expect_errno OK "setxattr(2) trim=2 (its value: nothing to do)" setxattr "$TR/s" user.nova.trim 2
nv_expect_eq "$(nv_xattr "$TR/s" user.nova.trim):$(nv_xattr "$TR/s" user.nova.seq)" 2:4 \
	"trim:seq of tr/s after the refused trims"
nv_expect_eq "$(tail -c 12 "$TR/s" | tr '\n' ' ')" "rec 3 rec 4 " "the records after the trim point"

say "--- buckets and deleted streams"
row "rmdir of a bucket that holds streams" ENOTEMPTY
FULL=$MNT/full
mkdir "$FULL"
printf 'kept\n' >> "$FULL/s"
: > "$FULL/zero"
nv_refuse "Directory not empty" "rmdir of a bucket with streams" rmdir "$FULL"
expect_errno ENOTEMPTY "rmdir(2) of a bucket with streams" rmdir "$FULL"
expect_errno OK "unlink(2) of a stream" unlink "$FULL/s"
expect_errno ENOTEMPTY "rmdir(2) of a bucket with one empty stream" rmdir "$FULL"
printf 'kept\n' >> "$FULL/s"
nv_expect_eq "$(ls -A "$FULL" | tr '\n' ' ')" "s zero " "listing of full"
expect_errno OK "unlink(2) of the 255-byte stream" unlink "$B63/$(printf 's%.0s' $(seq 1 255))"
expect_errno OK "rmdir(2) of the 63-byte bucket, now empty" rmdir "$B63"
row "write to a deleted stream (open before unlink)" ENOENT
DEL=$MNT/del
mkdir "$DEL"
printf 'doomed\n' >> "$DEL/s"
expect_errno ENOENT "write(2) through an fd opened before unlink(2)" write_after_unlink "$DEL/s" $'more\n'
printf 'doomed\n' >> "$DEL/t"
nv_refuse "No such file or directory" "echo >&3 after rm (bash opened fd 3 before)" \
	bash -c "exec 3>> '$DEL/t' && rm '$DEL/t' && echo more >&3"
nv_expect_eq "$(ls -A "$DEL" | tr '\n' ' ')" "" "listing of del after the deletes"
row "create in a bucket that does not exist" ENOENT
nv_refuse "No such file or directory" ": > MOUNT/nobucket/s" bash -c ": > '$MNT/nobucket/s'"
expect_errno ENOENT "create(2) in a bucket that does not exist" create "$MNT/nobucket/s"
expect_errno ENOENT "mknod(2) in a bucket that does not exist" mknod "$MNT/nobucket/s" reg
rmdir "$DEL" || fail "rmdir of the empty bucket del failed"
expect_errno ENOENT "create(2) in a deleted bucket" create "$DEL/s"
[ ! -e "$MNT/nobucket" ] && [ ! -e "$DEL" ] || fail "a create in a missing bucket made it"

say "--- not a refusal: user.nova.layout is cut to fit in 64 KiB (bucket ly)"
# More span refs than the attribute lists (200): the lists stop there and
# "truncated" says so; the value stays under the 64 KiB an xattr may hold.
LY=$MNT/ly
mkdir "$LY"
for i in $(seq 1 400); do echo "r$i" >> "$LY/s"; done
nv_await 30 "ly/s to have a ref for every record (frontier 400)" \
	sh -c "[ \"\$(getfattr --absolute-names --only-values -n user.nova.frontier '$LY/s')\" = 400 ]"
python3 - "$LY/s" <<'PY' || fail "user.nova.layout of a stream with many span refs: see above"
import json, os, sys
v = os.getxattr(sys.argv[1], "user.nova.layout")
d = json.loads(v)
print("t_refusals: layout of ly/s: %d bytes, span_refs %d, %d spans listed, truncated %s"
      % (len(v), d["span_refs"], len(d["spans"]), d["truncated"]))
if d["span_refs"] > 200 and not (len(d["spans"]) == 200 and d["truncated"] is True):
    sys.exit("t_refusals: FAIL: more than 200 span refs, but the list is not cut at 200")
if len(v) >= 65536:
    sys.exit("t_refusals: FAIL: the layout is %d bytes" % len(v))
PY

say "--- rows that need a fault or a signal: checked by the tests named"
# t_follow.sh checks the parked follow read; no test interrupts a wait at
# the gate (after a crash, until every earlier epoch is settled).
row_elsewhere "an I/O error underneath, a corrupt object" EIO t_store_faults.sh
# The cluster client's errnos through fs/remote.c: real stars in
# ../etcd/t_stars.sh (no secret; the holder killed) and t_stars_three.sh
# (the holder killed mid-request), the rest pinned by the unit tests.
row_elsewhere "append or read of a stream another star leads, when that star cannot be reached (nothing was sent), serves no star API, or the mount has no cluster_secret_file" \
	EHOSTUNREACH ../etcd/t_stars.sh ../etcd/t_stars_three.sh ../unit/test_fs_remote.c
row_elsewhere "unlink or trim of a stream another star leads, or a rename over one, when that star cannot be asked (not reached, no star API, or no cluster_secret_file here): nothing changed until its lease has gone" \
	EHOSTUNREACH ../etcd/t_stars.sh ../unit/test_fs_remote.c
# A draining star as the handoff's target: real stars in ../etcd/t_drain.sh.
row_elsewhere "set user.nova.leader to a star that is draining or closing, or whose registry lease went" \
	EHOSTDOWN ../etcd/t_drain.sh
row_elsewhere "append or read of a stream whose leadership is moving (NOT_OWNER again after the one redial, a stale redirect, or vacant since), or that was renamed at its leader again while the call was asked again under its name now (stream_moved twice)" \
	EAGAIN ../unit/test_fs_remote.c
row_elsewhere "append to a stream another star leads that got it and did not answer within put_timeout_s + star_lease_s, or answered that its lease deadline passed: in doubt (it may be durable there)" \
	ETIMEDOUT ../unit/test_api_client.c ../unit/test_fs_remote.c
row_elsewhere "append or read of a stream another star leads when the connection broke mid-request (an append is in doubt), that star refused this mount's cluster secret, or answered nonsense (logged)" \
	EIO ../unit/test_fs_remote.c ../etcd/t_stars_three.sh
# An unlink at the leader, or a rename over a stream led elsewhere, that
# the leader refused: unit-pinned (test_fs_remote.c, its rename case).
row_elsewhere "unlink of a stream another star leads, or a rename over one (nothing renamed), when its leadership is moving (NOT_OWNER after the redial)" \
	EAGAIN ../unit/test_fs_remote.c
row_elsewhere "unlink of a stream another star leads, or a rename over one, when that star did not answer in time: in doubt (it may be deleted, or renamed, there)" \
	ETIMEDOUT ../unit/test_fs_remote.c
# A rename over a stream whose name or lease moved as it was done, and
# one whose source the leader does not find: unit-pinned
# (test_fs_remote.c: ESTALE twice is EAGAIN; the leader's ENOENT), and
# the source's ENOENT at the leader in t_stars_delete.sh.
row_elsewhere "rename over a stream whose name, or whose lease, moved again as the rename was looked up once more (nothing renamed)" \
	EAGAIN ../unit/test_fs_remote.c
row_elsewhere "rename over a stream another star leads when the source does not exist there (nothing changed)" \
	ENOENT ../unit/test_fs_remote.c ../etcd/t_stars_delete.sh
row_elsewhere "unlink of a stream another star leads, or a rename over one (nothing renamed), when the connection broke, the secret was refused, or the answer was nonsense (logged)" \
	EIO ../unit/test_fs_remote.c
row_elsewhere "the store is full (after put_timeout_s of retries)" ENOSPC t_store_faults.sh t_local_faults.sh
row_elsewhere "append when the store stayed unreachable (timeouts, EAGAIN, refused connections) for put_timeout_s" EIO t_store_faults.sh
row_elsewhere "a request waiting at the recovery gate when the daemon stops (a signal, or the mount detached)" EIO t_shutdown.sh
row_elsewhere "fsync or close after a record written with durable=fsync could not be made durable" EIO t_durable.sh
row_elsewhere "an open by name or a cold read while no etcd member answers (after the meta URL's timeout=)" \
	ETIMEDOUT ../etcd/t_etcd_faults.sh
row_elsewhere "append that waited backlog_wait_s for backlog tokens (the absorb cannot commit: e.g. no etcd member answers)" \
	ETIMEDOUT ../etcd/t_etcd_faults.sh
row_elsewhere "an append acknowledged after this star's lease deadline, or made (or a tail read) while it lost its registry lease (paused or cut off from the metastore past star_lease_s): an append is durable and may still become visible" \
	ETIMEDOUT ../etcd/t_stars.sh ../unit/test_lease.c
row_elsewhere "an append to a stream taken from a star whose epochs are still unsettled after 3 x star_lease_s + 10 s" \
	ETIMEDOUT ../unit/test_lease.c

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
nv_expect_eq "$(cat "$FV/s")" followed "fv/s across a remount"
nv_expect_eq "$(cat "$FULL/s")" kept "full/s across a remount"
nv_expect_eq "$(nv_xattr "$TR/s" user.nova.trim)" 2 "tr/s trim across a remount"
say "ok: streams intact after a remount"
nv_stop

say "--- a halted class: appends fail with EIO (a second data dir, every slot PUT failing)"
# The chain gives up on its slot after put_timeout_s, halts, and restarts
# in a new epoch while it settles the old one; every slot PUT keeps
# failing, so each append ends in EIO, never in a hang or a success.
DATA=$NV_TMP/halt
mkdir "$DATA"
nv_start "store_faults=put_error=1:prefix=chains/,put_timeout_s=1"
mkdir "$MNT/h"
: > "$MNT/h/s" || fail "creating a stream with every slot PUT failing"
row "append while a halted class restarts" EIO
expect_errno EIO "os.write to a class whose slot PUTs fail (it halts)" append "$MNT/h/s" x
expect_errno EIO "os.write while the halted class restarts" append "$MNT/h/s" y
nv_refuse "Input/output error" "echo >> a stream of the halted class" bash -c "echo z >> '$MNT/h/s'"
grep -q 'halted' "$LOG" || fail "no log line about the halted chain"
nv_expect_eq "$(nv_size "$MNT/h/s")" 0 "size of a stream whose every append failed"
nv_alive || fail "the daemon died with a halted class"
nv_stop

say "--- a signal during a wait at the gate: EINTR (a third data dir, recovery held up)"
# After a crash the stream is not served until the earlier epoch is
# settled; recovery is held up 5 s at its first step, so an open or read of
# the stream waits at the gate, and SIGALRM 0.3 s into the wait ends it.
# The parked follow read's EINTR is t_follow.sh's (Ctrl-C of a parked cat).
DATA=$NV_TMP/gate
mkdir "$DATA"
nv_start ""
mkdir "$MNT/g"
echo "before the crash" >> "$MNT/g/s"
nv_crash
NOVAFS_FAILPOINTS=recover.before_walk=delay:5000 nv_start ""
row_elsewhere "a signal during a parked follow read or a wait at the gate" EINTR t_follow.sh
got=$(python3 - "$MNT/g/s" <<'PY'
import ctypes, errno, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGALRM, lambda *a: None)  # no SA_RESTART: the call returns EINTR
def interrupted(call):
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    t0 = time.monotonic()
    r = call()
    e = ctypes.get_errno()
    signal.setitimer(signal.ITIMER_REAL, 0)
    return r, e, time.monotonic() - t0
fd, e, dt = interrupted(lambda: libc.open(sys.argv[1].encode(), os.O_RDONLY))
what = "open"
if fd >= 0:
    buf = ctypes.create_string_buffer(4096)
    n, e, dt = interrupted(lambda: libc.read(fd, buf, 4096))
    what = "read"
    if n >= 0:
        print("%s returned %d bytes after %.2f s (no wait at the gate)" % (what, n, dt)); sys.exit(0)
print("%s %s %.2f" % (what, errno.errorcode.get(e, str(e)), dt))
PY
) || fail "the gate probe crashed: $got"
read -r what err secs <<< "$got"
[ "$err" = EINTR ] || fail "a signal during a wait at the gate: $got; expected EINTR"
awk -v s="$secs" 'BEGIN { exit !(s < 4) }' || fail "the $what returned EINTR only after $secs s"
say "ok: $what at the gate -> EINTR $secs s after it started (SIGALRM at 0.3 s)"
# (A read now may wait at the gate too, until recovery is done.)
nv_await 30 "the stream to be served once recovery ran" \
	sh -c "[ \"\$(cat '$MNT/g/s' 2>/dev/null)\" = 'before the crash' ]"
say "ok: served after recovery: $(cat "$MNT/g/s")"
nv_stop

# ------------------------------------------------ xattrs and FILES of the man page
# man_section TITLE: the lines of the man page's .SH TITLE section.
man_section() { awk -v t=".SH $1" '$0 == t { on = 1; next } /^\.SH / { on = 0 } on' "$NV_MAN"; }

say "the man page's xattrs are the daemon's (listxattr, fs/xattr.c), place by place"
NV_XATTR_C=$(dirname "$NV_MAN")/../fs/xattr.c
[ -r "$NV_XATTR_C" ] || nv_hard_error "cannot read $NV_XATTR_C"
nv_start ""
for place in "stream:$MNT/g/s" "bucket:$MNT/g" "root:$MNT"; do
	what=${place%%:*}
	path=${place#*:}
	case $what in
	stream) sub="On a stream" ;;
	bucket) sub="On a bucket" ;;
	root) sub="On the root" ;;
	esac
	# The entries of the .SS SUB subsection: `.B user.nova.NAME` after .TP.
	man_section "EXTENDED ATTRIBUTES" | awk -v t=".SS $sub" '
		$0 == t { on = 1; next } /^\.S[SH] / { on = 0 }
		on && tp && $1 == ".B" && $2 ~ /^user\.nova\./ { print $2 }
		{ tp = ($0 == ".TP") }' | sort > "$NV_TMP/xa.man"
	# What the daemon lists there, and what fs/xattr.c handles there (a
	# stream's trim is handled but not listed): the union.
	python3 - "$path" "$NV_XATTR_C" "$what" <<'PY' | sort -u > "$NV_TMP/xa.code"
import os, re, sys
path, src, what = sys.argv[1:]
names = [n for n in os.listxattr(path) if n.startswith("user.nova.")]
m = re.search(r"static const char \*const %s_names\[\] = \{([^}]*)\}" % what, open(src).read())
if not m:
    sys.exit("fs/xattr.c: no %s_names[] table" % what)
names += ["user.nova." + n for n in re.findall(r'"([a-z_]+)"', m.group(1))]
for n in names:
    os.getxattr(path, n)  # handled: reads
    print(n)
PY
	[ -s "$NV_TMP/xa.code" ] || fail "the $what has no user.nova. xattr"
	if ! cmp -s "$NV_TMP/xa.man" "$NV_TMP/xa.code"; then
		comm -3 "$NV_TMP/xa.man" "$NV_TMP/xa.code" |
			sed 's/^\t/  daemon lists, man page lacks: /; t; s/^/  man page has, daemon lacks: /' >&2
		fail "$NV_MAN, EXTENDED ATTRIBUTES, $sub: not the xattrs the daemon lists (above)"
	fi
	say "ok: $what: $(tr '\n' ' ' < "$NV_TMP/xa.code")"
done

say "the FILES section names what the daemon makes in its data directory, and only that"
# Entry heads `.I DATA_DIR/NAME` (NAME/ for a directory); the entries'
# text may name more (meta.db-wal, meta.db-shm).
man_section FILES | sed -n 's/^\.I DATA_DIR\/\([^ ]*\)$/\1/p' | sed 's/\\-/-/g' > "$NV_TMP/files.man"
[ -s "$NV_TMP/files.man" ] || fail "$NV_MAN, FILES: no DATA_DIR entries"
man_section FILES | sed 's/\\-/-/g' > "$NV_TMP/files.text"
while read -r f; do
	case $f in
	novafs.log) # only for a background start without a syslog socket
		grep -qF 'DATA/novafs.log' "$NV_TDIR/t_mount.sh" ||
			fail "FILES names novafs.log; t_mount.sh, its test, does not check it"
		continue ;;
	*/) [ -d "$DATA/${f%/}" ] || fail "FILES names DATA_DIR/$f; the daemon made no such directory" ;;
	*) [ -f "$DATA/$f" ] || fail "FILES names DATA_DIR/$f; the daemon made no such file" ;;
	esac
done < "$NV_TMP/files.man"
for p in "$DATA"/*; do
	f=${p##*/}
	[ -d "$p" ] && f=$f/
	grep -qxF "$f" "$NV_TMP/files.man" || grep -qF "${f%/}" "$NV_TMP/files.text" ||
		fail "the daemon made DATA_DIR/$f; FILES does not name it"
done
say "ok: FILES: $(tr '\n' ' ' < "$NV_TMP/files.man")"
nv_stop
rows_check
