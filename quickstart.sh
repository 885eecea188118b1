#!/usr/bin/env bash
# quickstart.sh - from a fresh Debian 12 machine to a mounted novafs, or to
# a tested build, in one command.  `./quickstart.sh --help` lists the modes.
#
# For: installing the packages listed in packages.txt (only the missing
# ones), building with autotools, mounting with the embedded defaults
# (directory object store + SQLite metastore under one data directory),
# and running the test suites, plain and under ASan+UBSan.  Not for:
# production deployment or other distributions (there it names the
# packages to install and carries on).
#
# Re-running is cheap: packages already installed are skipped, autoreconf
# and configure run only when their inputs changed, make is incremental,
# and a mount point already served by novafs is left alone.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$top"
packages_file=$top/packages.txt
default_mountpoint=/mnt/nova

say() { printf 'quickstart: %s\n' "$*"; }
die() { printf 'quickstart: error: %s\n' "$*" >&2; exit 1; }

usage() {
	cat <<EOF
usage: ./quickstart.sh [MOUNTPOINT]   install, build and mount novafs (default $default_mountpoint)
       ./quickstart.sh check          install, build, run 'make check'; then again under ASan+UBSan
       ./quickstart.sh build          install the build packages and build; no mount
       ./quickstart.sh bench-deps     install the [bench] packages (hyperfine, fio) for bench/
       ./quickstart.sh --help         this help

Modes:
  [MOUNTPOINT]  Installs the missing [build] packages of packages.txt, builds
                in place (autoreconf -fi when needed, ./configure, make), then
                mounts:  src/novafs -o data_dir=\$NOVAFS_DATA MOUNTPOINT
                The mount point is created if missing.  If novafs already
                serves it, says so and exits 0.  Prints a short tour and how
                to unmount:  fusermount3 -u MOUNTPOINT
                (A mount point named like a mode must be given as ./check.)
  check         Also installs the [test] packages, builds, runs 'make check'
                (integration tests mount FUSE: run as root with /dev/fuse) and
                prints test-suite.log on failure, then 'make memcheck'
                (every unit test under valgrind).  With SANITIZERS=1 (the
                default) it then builds a second copy in build-san/ with
                --enable-sanitizers and runs 'make check' there too.  Exits
                non-zero on the first failure.
  build         The [build] packages and the in-place build only.
  bench-deps    The [bench] packages only; quickstart never installs them
                otherwise.

Environment:
  NOVAFS_DATA       data directory of the mount (default: /var/lib/novafs as
                    root, else \$XDG_DATA_HOME/novafs or ~/.local/share/novafs,
                    as novafs itself picks); created if missing
  NOVAFS_OPTS       extra novafs -o options, comma-separated (see novafs --help)
  CONFIGURE_FLAGS   extra ./configure arguments, split on white space
  MAKE_CHECK_FLAGS  extra 'make check' arguments, e.g. -j2
  SANITIZERS        check mode: 1 (default) also runs the sanitizer build; 0 skips it

Packages are listed once, in packages.txt.  apt-get needs root (sudo is used
when you are not root and it is available).  See README.md and man/novafs.8.
EOF
}

# ------------------------------------------------------------ packages

# Print the packages of the given sections of packages.txt, one a line,
# in file order, each once.
packages_in() {
	awk -v want=" $* " '
		{ sub(/#.*/, ""); gsub(/^[ \t]+|[ \t]+$/, "") }
		$0 == "" { next }
		/^\[[a-z-]+\]$/ { section = substr($0, 2, length($0) - 2); next }
		index(want, " " section " ") && !seen[$1]++ { print $1 }
	' "$packages_file"
}

as_root() {
	if ((EUID == 0)); then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "root is needed to run: $*"
	fi
}

is_installed() {
	[[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) == installed ]]
}

# Install whatever is missing from the given sections.
install_sections() {
	local p
	local -a pkgs=() missing=()

	[[ -r $packages_file ]] || die "$packages_file is missing"
	mapfile -t pkgs < <(packages_in "$@")
	((${#pkgs[@]})) || die "packages.txt lists nothing in section(s): $*"
	if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
		say "no apt here: make sure these (Debian names) are installed: ${pkgs[*]}"
		return 0
	fi
	for p in "${pkgs[@]}"; do
		is_installed "$p" || missing+=("$p")
	done
	if ((${#missing[@]} == 0)); then
		say "packages [$*]: all ${#pkgs[@]} installed"
		return 0
	fi
	say "packages [$*]: installing ${missing[*]}"
	as_root apt-get update
	as_root env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y --no-install-recommends "${missing[@]}"
}

# ------------------------------------------------------------ building

# autoreconf when configure is missing or older than its inputs.
autoreconf_if_needed() {
	if [[ ! -x configure || ! -f Makefile.in || configure -ot configure.ac ||
		configure -ot Makefile.am ]]; then
		say "autoreconf -fi ($PWD)"
		autoreconf -fi
	fi
}

# Run configure (the first argument, a path) with the remaining arguments
# in the current directory, unless config.status there is newer than
# configure and records exactly these arguments.
configure_if_needed() {
	local cfg=$1 want had
	shift
	want=$(printf '%q ' "$@")
	if [[ -f config.status && -f Makefile && config.status -nt $cfg ]]; then
		# --config prints the recorded arguments shell-quoted.
		had=$(eval "printf '%q ' $(./config.status --config)")
		[[ $had == "$want" ]] && return 0
	fi
	say "configure: $cfg${*:+ $*} ($PWD)"
	"$cfg" "$@"
}

# The in-place build: src/novafs, src/novactl and the libraries.
build_in_tree() {
	local -a flags=()

	read -r -a flags <<<"${CONFIGURE_FLAGS:-}"
	autoreconf_if_needed
	configure_if_needed ./configure "${flags[@]}"
	say "make -j$(nproc)"
	make -j"$(nproc)"
}

# ------------------------------------------------------------ mounting

novafs_fstype() {
	findmnt -n -o FSTYPE --mountpoint "$1" 2>/dev/null || true
}

default_data_dir() {
	if ((EUID == 0)); then
		echo /var/lib/novafs
	elif [[ -n ${XDG_DATA_HOME:-} ]]; then
		echo "$XDG_DATA_HOME/novafs"
	else
		echo "$HOME/.local/share/novafs"
	fi
}

print_tour() {
	local mp q
	mp=$1
	printf -v q '%q' "$mp"
	cat <<EOF

novafs is mounted on $mp.  Every file is an append-only stream; a write
returns once the record is durable.  Try:

    mkdir $q/logs
    echo "first record" >> $q/logs/app
    echo "second record" >> $q/logs/app
    cat $q/logs/app
    getfattr -d -m user.nova $q/logs/app

Unmount (flushes, absorbs and closes cleanly):

    fusermount3 -u $q

More: README.md (the tour), src/novafs --help, man ./man/novafs.8
EOF
}

mount_mode() {
	local mp data opts fstype

	mp=$(realpath -m -- "$1")
	fstype=$(novafs_fstype "$mp")
	if [[ $fstype == fuse.novafs ]]; then
		if stat -t -- "$mp" >/dev/null 2>&1; then
			say "novafs is already mounted on $mp"
			print_tour "$mp"
			exit 0
		fi
		# The daemon died and left "Transport endpoint is not connected".
		say "the novafs daemon behind $mp is gone: removing the stale mount"
		fusermount3 -u -z -- "$mp" || as_root umount -l -- "$mp"
	elif [[ -n $fstype ]]; then
		die "$mp is already a mount point ($fstype); pick another MOUNTPOINT"
	fi

	install_sections build
	build_in_tree

	[[ -c /dev/fuse ]] ||
		die "/dev/fuse is missing: 'modprobe fuse' (in a container: --device /dev/fuse --cap-add SYS_ADMIN)"
	data=$(realpath -m -- "${NOVAFS_DATA:-$(default_data_dir)}")
	[[ $data != *,* ]] || die "NOVAFS_DATA must not contain a comma (it is a -o option): $data"
	[[ $mp != *,* ]] || die "MOUNTPOINT must not contain a comma: $mp"
	mkdir -p -- "$mp"
	opts="data_dir=$data${NOVAFS_OPTS:+,$NOVAFS_OPTS}"
	say "mounting: src/novafs -o $opts $mp"
	# novafs forks into the background once mounted; start-up errors
	# (a busy data directory, a failed recovery) are printed here first.
	src/novafs -o "$opts" "$mp" ||
		die "novafs did not start (see above; 'src/novafs -f -o $opts $mp' shows its log)"
	[[ $(novafs_fstype "$mp") == fuse.novafs ]] || die "novafs exited but $mp is not mounted"
	print_tour "$mp"
}

# ------------------------------------------------------------ checking

show_file() {
	if [[ -f $1 ]]; then
		printf '\n===== %s =====\n' "$1"
		cat -- "$1"
		printf '===== end of %s =====\n\n' "$1"
	fi
}

# make check in the current directory; on failure print the logs, exit 1.
make_check() {
	local label=$1
	local -a flags=()

	read -r -a flags <<<"${MAKE_CHECK_FLAGS:-}"
	say "$label: make${flags[*]:+ ${flags[*]}} check ($PWD)"
	if ! make "${flags[@]}" check; then
		show_file test-suite.log
		if [[ ${NOVAFS_SANITIZERS:-0} == 1 ]]; then
			show_sanitizer_logs
		fi
		die "$label: make check failed (test-suite.log above; per-test logs next to each test)"
	fi
}

# Copy the sources into build-san/: every file git tracks or would track
# (untracked work included), plus the autotools outputs of the in-place
# build so the copy need not autoreconf.  tar keeps modification times,
# so an unchanged file stays unchanged for make.
sync_sources() {
	local dest=$1 f

	mkdir -p -- "$dest"
	if command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		{
			git ls-files -z --cached --others --exclude-standard
			for f in configure Makefile.in aclocal.m4 config.h.in build-aux m4; do
				printf '%s\0' "$f"
			done
		} | while IFS= read -r -d '' f; do
			if [[ -e $f && $f != build-san/* ]]; then
				printf '%s\0' "$f"
			fi
		done | tar --null -T - -cf - | tar -C "$dest" -xf -
	else
		# Not a git checkout (an unpacked tarball): everything but the
		# products of a build.
		tar --exclude=./.git --exclude='./build*' --exclude='*.o' --exclude='*.a' \
			--exclude=.deps --exclude=.dirstamp --exclude=config.status \
			--exclude=config.log --exclude=./config.h --exclude=stamp-h1 \
			--exclude=./Makefile --exclude='*.log' --exclude='*.trs' \
			-cf - . | tar -C "$dest" -xf -
	fi
}

san_logs=$top/build-san/sanitizer-logs

show_sanitizer_logs() {
	local f

	[[ -d $san_logs ]] || return 0
	for f in "$san_logs"/*; do
		[[ -e $f ]] && show_file "$f"
	done
	return 0
}

# The sanitizer pass.
#
# Why a copy instead of `mkdir build-san && cd build-san && ../configure`:
# automake refuses an out-of-tree (VPATH) build of a source tree that is
# also configured in place ("source directory already configured; run
# make distclean there first"), because make would find the in-place
# objects through VPATH and link them, unsanitized, into the new build.
# The in-place build is the one `./quickstart.sh` mounts from and the one
# developers use, so it stays; build-san/ gets its own copy of the
# sources, configured in place with --enable-sanitizers.
#
# Sanitizer options:
#  - halt_on_error=1 everywhere (configure also passes
#    -fno-sanitize-recover=undefined): the first error fails the program
#    and so its test.  abort_on_error=0: exit status 1, no core files.
#  - Every report goes to build-san/sanitizer-logs/ (log_path) as well as
#    failing its process: a daemon's stderr is the mount's log, which a
#    passing test may never show, and a report from a daemon's exit after
#    the unmount would otherwise go unseen.  Any report there fails this
#    pass even when every test passed.
#  - Leak detection stays ON for everything, the FUSE daemons included.
#    Measured on Debian 12 (libfuse 3.14): a sanitized novafs that mounts,
#    serves, and exits at unmount or on SIGTERM reports nothing, so a leak
#    report is ours.  Should a libfuse version ever report its own
#    allocations, suppress those by function (LSAN_OPTIONS=suppressions=
#    with leak:fuse_<function>), never by module: leak:libfuse3.so would
#    match every allocation our FUSE handlers make, since they all run
#    below libfuse frames, and hide exactly the leaks we want to see.
#  - NOVAFS_SANITIZERS=1 tells tests that measure memory (RSS budgets) that
#    shadow memory and the quarantine inflate what they see.
check_sanitized() {
	local -a flags=()

	read -r -a flags <<<"${CONFIGURE_FLAGS:-}"
	say "sanitizers: syncing sources into build-san/"
	sync_sources "$top/build-san"
	(
		cd "$top/build-san"
		autoreconf_if_needed
		configure_if_needed ./configure --enable-sanitizers "${flags[@]}"
		say "sanitizers: make -j$(nproc) (build-san)"
		make -j"$(nproc)"

		rm -rf -- "$san_logs"
		mkdir -p -- "$san_logs"
		export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:print_summary=1:log_path=$san_logs/asan"
		export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:print_summary=1:log_path=$san_logs/ubsan"
		export NOVAFS_SANITIZERS=1
		make_check "sanitizers"
		if compgen -G "$san_logs/*" >/dev/null; then
			show_sanitizer_logs
			die "sanitizers: reports in $san_logs although the tests passed"
		fi
	)
}

check_mode() {
	install_sections build test
	if ((EUID != 0)) || [[ ! -c /dev/fuse ]]; then
		say "warning: the integration tests mount FUSE and need root and /dev/fuse"
	fi
	build_in_tree
	make_check "tests"
	say "memcheck: valgrind over every unit test"
	make memcheck || die "memcheck: valgrind found errors (logs: tests/unit/*.memcheck.log)"
	if [[ ${SANITIZERS:-1} == 1 ]]; then
		check_sanitized
	else
		say "sanitizers: skipped (SANITIZERS=${SANITIZERS})"
	fi
	say "all checks passed"
}

# ------------------------------------------------------------ main

case ${1:-} in
-h | --help | help)
	usage
	;;
check)
	(($# == 1)) || die "check takes no arguments (see --help)"
	check_mode
	;;
build)
	(($# == 1)) || die "build takes no arguments (see --help)"
	install_sections build
	build_in_tree
	say "built: src/novafs, src/novactl"
	;;
bench-deps)
	(($# == 1)) || die "bench-deps takes no arguments (see --help)"
	install_sections bench
	;;
-*)
	die "unknown option $1 (see --help)"
	;;
*)
	(($# <= 1)) || die "one MOUNTPOINT at most (see --help)"
	mount_mode "${1:-$default_mountpoint}"
	;;
esac
