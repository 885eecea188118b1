#!/bin/bash
# t_permissions: owners and modes of buckets and streams are kept, shown
# and enforced (issue 12 item 1; novafs(8), PERMISSIONS).  On a mount with
# allow_other (every mount has default_permissions), the unprivileged user
# `nobody` (setpriv, no supplementary groups) is refused every cat, echo
# >>, create, setfattr user.nova.trim/class, rm, rmdir, mkdir, chmod and
# chown on root's 0600/0700 and 0644/0755 entries (EACCES where the mode
# forbids, EPERM where only the owner or root may), and nothing changes;
# in a bucket chowned to nobody, nobody's own calls work, creations take
# nobody's uid and mode & ~umask, chgrp to a group nobody is not in is
# EPERM; `mv` within a bucket and `tar` keep a 0600 mode; modes and owners
# survive a remount.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
export LC_ALL=C
command -v setpriv >/dev/null || nv_skip "setpriv (util-linux) is not installed"
getent passwd nobody >/dev/null || nv_skip "no user nobody"
NOBODY_GROUP=$(id -gn nobody)
nv_init
# The temp dir must be searchable by nobody to reach the mount point.
chmod 0755 "$NV_TMP"
nv_start "allow_other"

# as_nobody CMD...: run CMD as nobody:NOBODY_GROUP with no other group.
as_nobody() { setpriv --reuid=nobody --regid="$NOBODY_GROUP" --clear-groups "$@"; }

# denied ERRTEXT WHAT CMD...: CMD as nobody fails with ERRTEXT in its output.
denied() {
	local want=$1 what=$2
	shift 2
	nv_refuse "$want" "nobody: $what" as_nobody "$@"
}
ACCES="Permission denied"
PERM="Operation not permitted"

# mode_of PATH: owner:group:octal mode.
mode_of() { stat -c '%U:%G:%a' "$1"; }

say "--- root's entries"
mkdir "$MNT/pub" "$MNT/priv"
chmod 0700 "$MNT/priv"
printf 'public\n' >> "$MNT/pub/open"
printf 'secret\n' >> "$MNT/pub/secret"
chmod 0600 "$MNT/pub/secret"
printf 'hidden\n' >> "$MNT/priv/inner"
nv_expect_eq "$(mode_of "$MNT/pub")" root:root:755 "owner and mode of a bucket root made (umask 022)"
nv_expect_eq "$(mode_of "$MNT/pub/open")" root:root:644 "owner and mode of a stream root made"
nv_expect_eq "$(mode_of "$MNT/pub/secret")" root:root:600 "mode after chmod 0600"
nv_expect_eq "$(mode_of "$MNT/priv")" root:root:700 "mode of a bucket after chmod 0700"
(umask 077 && printf 'x\n' >> "$MNT/pub/masked") || fail "create under umask 077 failed"
nv_expect_eq "$(mode_of "$MNT/pub/masked")" root:root:600 "a stream created under umask 077"
rm "$MNT/pub/masked"

say "--- nobody against root's entries"
nv_expect_eq "$(as_nobody cat "$MNT/pub/open")" public "nobody reads a 0644 stream"
denied "$ACCES" "cat a 0600 stream" cat "$MNT/pub/secret"
denied "$ACCES" "echo >> a 0644 stream" sh -c "echo x >> '$MNT/pub/open'"
denied "$ACCES" "echo >> a 0600 stream" sh -c "echo x >> '$MNT/pub/secret'"
denied "$ACCES" "create in a 0755 bucket" sh -c ": > '$MNT/pub/new'"
denied "$ACCES" "rm in a 0755 bucket" rm -f "$MNT/pub/open"
denied "$ACCES" "ls a 0700 bucket" ls "$MNT/priv"
denied "$ACCES" "cat in a 0700 bucket" cat "$MNT/priv/inner"
denied "$ACCES" "rmdir of a bucket in the 0755 root" rmdir "$MNT/priv"
denied "$ACCES" "mkdir a bucket in the 0755 root" mkdir "$MNT/mine"
denied "$ACCES" "mkdir in a 0755 bucket" mkdir "$MNT/pub/sub"
denied "$ACCES" "setfattr user.nova.trim on a 0644 stream" \
	setfattr -n user.nova.trim -v 1 "$MNT/pub/open"
denied "$ACCES" "setfattr user.nova.class on a 0755 bucket" \
	setfattr -n user.nova.class -v express "$MNT/pub"
setfattr -n user.nova.durable -v fsync "$MNT/pub/open"
denied "$ACCES" "setfattr user.nova.durable on a 0644 stream" \
	setfattr -n user.nova.durable -v write "$MNT/pub/open"
denied "$ACCES" "setfattr -x user.nova.durable on a 0644 stream" \
	setfattr -x user.nova.durable "$MNT/pub/open"
nv_expect_eq "$(nv_xattr "$MNT/pub/open" user.nova.durable)" fsync "durable after nobody's attempts"
setfattr -x user.nova.durable "$MNT/pub/open"
denied "$PERM" "chmod 0666 of root's stream" chmod 0666 "$MNT/pub/open"
denied "$PERM" "chmod 0777 of root's bucket" chmod 0777 "$MNT/pub"
denied "$PERM" "chown nobody of root's stream" chown nobody "$MNT/pub/open"
denied "$PERM" "chmod of the root" chmod 0777 "$MNT"
denied "$ACCES" "mv within a 0755 bucket" mv "$MNT/pub/open" "$MNT/pub/moved"
# The follow view mirrors the modes without write bits.
nv_expect_eq "$(stat -c %a "$MNT/.follow/pub/secret")" 400 "mode of .follow/pub/secret"
nv_expect_eq "$(stat -c %a "$MNT/.follow/pub")" 555 "mode of .follow/pub"
chmod 0750 "$MNT/pub"
nv_expect_eq "$(stat -c %a "$MNT/.follow/pub")" 550 "mode of .follow/pub right after chmod 0750 of pub"
chmod 0755 "$MNT/pub"
denied "$ACCES" "cat .follow of a 0600 stream" timeout 5 cat "$MNT/.follow/pub/secret"
nv_expect_eq "$(cat "$MNT/pub/open"):$(cat "$MNT/pub/secret"):$(cat "$MNT/priv/inner")" \
	public:secret:hidden "root's streams after nobody's attempts"
nv_expect_eq "$(nv_xattr "$MNT/pub/open" user.nova.trim):$(nv_xattr "$MNT/pub" user.nova.class)" \
	0:standard "trim and class after nobody's attempts"
nv_expect_eq "$(ls "$MNT" | tr '\n' ' ')" "priv pub " "buckets after nobody's attempts"
nv_expect_eq "$(mode_of "$MNT/pub/open")" root:root:644 "root's stream kept its owner and mode"

say "--- nobody in a bucket chowned to nobody"
mkdir "$MNT/nb"
chown "nobody:$NOBODY_GROUP" "$MNT/nb"
nv_expect_eq "$(mode_of "$MNT/nb")" "nobody:$NOBODY_GROUP:755" "owner after chown"
as_nobody sh -c "umask 022; echo one >> '$MNT/nb/log'; echo two >> '$MNT/nb/log'" ||
	fail "nobody could not create and append in their own bucket"
nv_expect_eq "$(mode_of "$MNT/nb/log")" "nobody:$NOBODY_GROUP:644" "owner of nobody's new stream"
nv_expect_eq "$(as_nobody cat "$MNT/nb/log" | tr '\n' ' ')" "one two " "nobody reads their stream"
as_nobody setfattr -n user.nova.trim -v 1 "$MNT/nb/log" || fail "nobody could not trim their stream"
nv_expect_eq "$(nv_xattr "$MNT/nb/log" user.nova.trim)" 1 "trim set by the owner"
as_nobody chmod 0600 "$MNT/nb/log" || fail "the owner could not chmod 0600"
nv_expect_eq "$(mode_of "$MNT/nb/log")" "nobody:$NOBODY_GROUP:600" "mode after the owner's chmod"
denied "$PERM" "chown of their own stream to root (chown is root's)" chown root "$MNT/nb/log"
denied "$PERM" "chgrp to a group nobody is not in" chgrp root "$MNT/nb/log"
as_nobody chgrp "$NOBODY_GROUP" "$MNT/nb/log" || fail "chgrp to nobody's own group failed"
as_nobody sh -c ": > '$MNT/nb/.tmp.x'" || fail "nobody could not create a dot-named stream"
as_nobody mv "$MNT/nb/.tmp.x" "$MNT/nb/gone" || fail "nobody could not rename their stream"
as_nobody rm "$MNT/nb/gone" || fail "nobody could not remove their stream"
# Root's stream in nobody's bucket: nobody may unlink it (the bucket's
# write bit decides, as in any directory) but not read or append to it.
printf 'roots\n' >> "$MNT/nb/roots"
chmod 0600 "$MNT/nb/roots"
denied "$ACCES" "cat root's 0600 stream in nobody's bucket" cat "$MNT/nb/roots"
denied "$ACCES" "setfattr user.nova.trim on root's stream in nobody's bucket" \
	setfattr -n user.nova.trim -v 1 "$MNT/nb/roots"
as_nobody rm -f "$MNT/nb/roots" || fail "the bucket's owner could not unlink a stream in it"
[ ! -e "$MNT/nb/roots" ] || fail "nb/roots still exists after rm"
denied "$PERM" "mkdir inside their own bucket (no directories in buckets)" mkdir "$MNT/nb/sub"

say "--- mv and tar keep a 0600 mode"
mv "$MNT/nb/log" "$MNT/nb/log.1"
nv_expect_eq "$(mode_of "$MNT/nb/log.1")" "nobody:$NOBODY_GROUP:600" "mode and owner after mv within a bucket"
mv "$MNT/nb/log.1" "$MNT/pub/log.1"
nv_expect_eq "$(mode_of "$MNT/pub/log.1")" "nobody:$NOBODY_GROUP:600" "mode and owner after mv across buckets (copy and delete)"
[ ! -e "$MNT/nb/log.1" ] || fail "mv across buckets left the source"
mkdir "$NV_TMP/src"
printf 'tarred\n' > "$NV_TMP/src/t600"
chmod 0600 "$NV_TMP/src/t600"
mkdir "$MNT/tarx"
tar -C "$NV_TMP/src" -cf - t600 | tar -C "$MNT/tarx" -xpf - || fail "tar x into a bucket failed"
nv_expect_eq "$(stat -c %a "$MNT/tarx/t600"):$(cat "$MNT/tarx/t600")" 600:tarred "tar x kept mode 0600"
tar -C "$MNT" -cf "$NV_TMP/back.tar" tarx || fail "tar c of a bucket failed"
nv_expect_eq "$(tar -tvf "$NV_TMP/back.tar" tarx/t600 | cut -c1-10)" "-rw-------" "tar c recorded mode 0600"

say "--- remount"
nv_remount
nv_expect_eq "$(mode_of "$MNT/pub/secret")" root:root:600 "0600 stream after remount"
nv_expect_eq "$(mode_of "$MNT/priv")" root:root:700 "0700 bucket after remount"
nv_expect_eq "$(mode_of "$MNT/nb")" "nobody:$NOBODY_GROUP:755" "chowned bucket after remount"
nv_expect_eq "$(mode_of "$MNT/pub/log.1")" "nobody:$NOBODY_GROUP:600" "nobody's stream after remount"
denied "$ACCES" "cat a 0600 stream after remount" cat "$MNT/pub/secret"
as_nobody sh -c "echo three >> '$MNT/pub/log.1'" || fail "nobody could not append to their stream after remount"
nv_expect_eq "$(as_nobody cat "$MNT/pub/log.1" | tr -d '\0' | tr '\n' ' ')" "two three " "nobody's stream after remount"
nv_stop
