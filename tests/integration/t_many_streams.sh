#!/bin/bash
# t_many_streams: 100 streams over 3 buckets, a few records each with content
# derived from the name.  `ls` of the root and of each bucket lists exactly
# what was created; every stream reads back right; rmdir of a non-empty
# bucket fails with "Directory not empty"; after deleting every stream of one
# bucket its rmdir works; a deleted name re-created is a new, empty stream;
# after a remount everything is checked again.
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
. "$TESTLIB"
export LC_ALL=C
nv_init
nv_start

BUCKETS=(alpha beta gamma)
NSTREAMS=100

# content NAME I: the records of stream NAME (I+1 records, 1..4), each
# "NAME record J of N <name repeated>\n".
content() {
	local name=$1 n=$(($2 % 4 + 1)) j
	for ((j = 1; j <= n; j++)); do
		echo "$name record $j of $n $name$name$name"
	done
}

say "mkdir ${BUCKETS[*]}"
for b in "${BUCKETS[@]}"; do mkdir "$MNT/$b" || fail "mkdir $b"; done

say "create $NSTREAMS streams"
declare -A want_ls
for ((i = 0; i < NSTREAMS; i++)); do
	b=${BUCKETS[i % 3]}
	name=$(printf 'stream-%03d.log' "$i")
	while IFS= read -r line; do
		echo "$line" >> "$MNT/$b/$name" || fail "append to $b/$name failed"
	done < <(content "$name" "$i")
	want_ls[$b]+="$name"$'\n'
done

# check_all LABEL BUCKET...: ls of the root, ls of each bucket, every stream.
check_all() {
	local label=$1 b name i n=0
	shift
	[ "$(ls -1 "$MNT")" = "$(printf '%s\n' "$@" | sort)" ] ||
		fail "$label: ls of the root is '$(ls -1 "$MNT" | tr '\n' ' ')', expected '$*'"
	for b in "$@"; do
		[ "$(ls -1 "$MNT/$b")" = "$(printf '%s' "${want_ls[$b]}" | sort)" ] ||
			fail "$label: ls $b differs: $(diff <(ls -1 "$MNT/$b") <(printf '%s' "${want_ls[$b]}" | sort) | head -20)"
	done
	say "ok: $label: ls of the root and of $# buckets lists exactly the streams"
	for ((i = 0; i < NSTREAMS; i++)); do
		b=${BUCKETS[i % 3]}
		[[ " $* " == *" $b "* ]] || continue
		name=$(printf 'stream-%03d.log' "$i")
		cmp "$MNT/$b/$name" <(content "$name" "$i") > "$NV_TMP/cmp.out" 2>&1 ||
			fail "$label: content of $b/$name: $(cat "$NV_TMP/cmp.out")"
		[ "$(nv_xattr "$MNT/$b/$name" user.nova.seq)" = $((i % 4 + 1)) ] ||
			fail "$label: $b/$name user.nova.seq = $(nv_xattr "$MNT/$b/$name" user.nova.seq), expected $((i % 4 + 1))"
		n=$((n + 1))
	done
	say "ok: $label: content and seq of $n streams"
}

check_all "fresh" "${BUCKETS[@]}"

say "rmdir of non-empty buckets"
for b in "${BUCKETS[@]}"; do
	nv_refuse "Directory not empty" "rmdir non-empty $b" rmdir "$MNT/$b"
done

say "unlink every stream of gamma, then rmdir gamma"
for f in "$MNT"/gamma/*; do rm "$f" || fail "rm $f"; done
[ -z "$(ls -A "$MNT/gamma")" ] || fail "gamma not empty after deleting its streams: $(ls -A "$MNT/gamma")"
rmdir "$MNT/gamma" || fail "rmdir of the emptied bucket gamma failed"
[ ! -e "$MNT/gamma" ] || fail "gamma still exists after rmdir"
say "ok: gamma removed"
unset 'want_ls[gamma]'

say "a deleted stream re-created under the same name is new and empty"
rm "$MNT/beta/stream-001.log"
[ ! -e "$MNT/beta/stream-001.log" ] || fail "beta/stream-001.log exists after rm"
: > "$MNT/beta/stream-001.log" || fail "re-creating beta/stream-001.log failed"
nv_expect_eq "$(nv_size "$MNT/beta/stream-001.log")" 0 "size of the re-created stream"
nv_expect_eq "$(nv_xattr "$MNT/beta/stream-001.log" user.nova.seq)" 0 "seq of the re-created stream"
content stream-001.log 1 >> "$MNT/beta/stream-001.log"

check_all "after deletes" alpha beta

say "remount"
nv_remount
nv_drop_caches
[ ! -e "$MNT/gamma" ] || fail "gamma came back after a remount"
check_all "after remount" alpha beta
nv_refuse "Directory not empty" "rmdir non-empty alpha after remount" rmdir "$MNT/alpha"
mkdir "$MNT/gamma" || fail "mkdir gamma again"
[ -z "$(ls -A "$MNT/gamma")" ] || fail "re-created bucket gamma is not empty: $(ls -A "$MNT/gamma")"
say "ok: re-created bucket gamma is empty"
nv_stop
