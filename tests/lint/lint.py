#!/usr/bin/env python3
"""lint.py - the house rules a reader relies on, checked on every `make check`.

For: the rules of DESIGN.md section 2 and STYLE.md that a compiler does not
check, so they cannot drift silently:

  layers    every #include follows the dependency direction
            src -> fs -> api -> engine -> (engine/store, meta) -> src/base,
            and src -> gw -> api: gw/ includes only gw/, api/ and src/base/;
            fs/ includes only fs/, api/, engine/ and src/base/; nothing in
            engine/store/, meta/ or src/base/ includes engine/; engine/store
            and meta never include each other; src/base includes only
            src/base.  No module cycle: a module is a .c/.h pair (or a
            lone header), and the graph of "module A includes a header of
            module B" has no cycle.
  sizes     no .c file over MAX_FILE lines and no function over MAX_FUNC
            lines, unless the file's opening comment names it on a line
            "Size exception: <file or function name>: <why>".
  map       README.md's "Source tree" section names only paths that exist,
            names every module of the tree, and names every word of
            DESIGN.md section 1 (when ../shared/DESIGN.md is there, as it
            is beside every checkout of the project).
  names     every `name()` written in a comment of the engine's code
            (state tables, "see foo()") is a function or macro defined in
            the tree or a known library call: a comment never names a
            function that does not exist.

Not for: style that a formatter or the compiler checks (-Wall -Wextra).

Usage: lint.py [--top DIR] [layers|sizes|map|names ...]   (default: all)
Exit 0 when clean; 1 with one line per violation ("lint: RULE: file:line: why").
"""
import os
import re
import sys

MAX_FILE = 900
MAX_FUNC = 120
CODE_DIRS = ("src", "gw", "fs", "api", "engine", "meta")


def layer_of(path):
    """The layer of a source path, or None outside the layered code."""
    if path.startswith("src/base/"):
        return "base"
    if path.startswith("src/"):
        return "src"
    if path.startswith("gw/"):
        return "gw"
    if path.startswith("fs/"):
        return "fs"
    if path.startswith("api/"):
        return "api"
    if path.startswith("engine/store/"):
        return "store"
    if path.startswith("engine/"):
        return "engine"
    if path.startswith("meta/"):
        return "meta"
    return None


# What each layer may include (itself included).  fs/ may use api/'s
# cluster client; api/ never includes fs/; store and meta are peers.
# gw/ (the Gateway) reaches the stars only through api/: no fs/, no
# engine internals, no store or metastore.
ALLOWED = {
    "src": {"src", "gw", "fs", "api", "engine", "store", "meta", "base"},
    "gw": {"gw", "api", "base"},
    "fs": {"fs", "api", "engine", "base"},
    "api": {"api", "engine", "store", "meta", "base"},
    "engine": {"engine", "store", "meta", "base"},
    "store": {"store", "base"},
    "meta": {"meta", "base"},
    "base": {"base"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def source_files(top):
    out = []
    for d in CODE_DIRS:
        root = os.path.join(top, d)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for f in sorted(filenames):
                if f.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(dirpath, f), top))
    return out


def read(top, rel):
    with open(os.path.join(top, rel), encoding="utf-8", errors="replace") as fh:
        return fh.read().split("\n")


def includes(top, rel):
    for n, line in enumerate(read(top, rel), 1):
        m = INCLUDE.match(line)
        if m and m.group(1) != "config.h":
            yield n, m.group(1)


def module_of(rel):
    return rel[:-2]


def check_layers(top, files, bad):
    edges = {}
    for rel in files:
        mine = layer_of(rel)
        for n, inc in includes(top, rel):
            if not os.path.exists(os.path.join(top, inc)):
                bad.append(f"layers: {rel}:{n}: includes \"{inc}\", which is not a "
                           "path from the top of the tree")
                continue
            theirs = layer_of(inc)
            if theirs is None:
                bad.append(f"layers: {rel}:{n}: includes \"{inc}\" outside the layered code")
                continue
            if theirs not in ALLOWED[mine]:
                bad.append(f"layers: {rel}:{n}: {mine} may not include {theirs} "
                           f"(\"{inc}\"; DESIGN.md section 2)")
            a, b = module_of(rel), module_of(inc)
            if a != b:
                edges.setdefault(a, set()).add(b)
    for cyc in cycles(edges):
        bad.append("layers: module cycle: " + " -> ".join(cyc + [cyc[0]]))


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def opening_comment(lines):
    text = []
    for line in lines:
        text.append(line)
        if "*/" in line:
            break
    return "\n".join(text)


EXCEPTION = re.compile(r"Size exception:\s*([A-Za-z0-9_./]+)")
FUNC_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def functions(lines):
    """(name, first line, line count) of each function defined in house
    style: the body's '{' and '}' alone at column 0."""
    out = []
    start = None
    for i, line in enumerate(lines):
        if line == "{" and start is None:
            start = i
            name = "?"
            for j in range(i - 1, max(i - 8, -1), -1):
                m = FUNC_NAME.search(lines[j])
                if m and not lines[j].startswith((" ", "\t", "*", "/")):
                    name = m.group(1)
                    break
        elif line.startswith("}") and start is not None and not line.startswith("};"):
            out.append((name, start + 1, i - start + 1))
            start = None
    return out


def check_sizes(top, files, bad):
    for rel in files:
        if not rel.endswith(".c"):
            continue
        lines = read(top, rel)
        allowed = set(EXCEPTION.findall(opening_comment(lines)))
        n = len(lines) - (1 if lines and lines[-1] == "" else 0)
        if n > MAX_FILE and os.path.basename(rel) not in allowed and rel not in allowed:
            bad.append(f"sizes: {rel}: {n} lines (limit {MAX_FILE}; split it or say "
                       "why in a 'Size exception:' line of its opening comment)")
        for name, first, count in functions(lines):
            if count > MAX_FUNC and name not in allowed:
                bad.append(f"sizes: {rel}:{first}: {name}() is {count} lines "
                           f"(limit {MAX_FUNC})")


PATH_TOKEN = re.compile(r"`?((?:src|gw|fs|api|engine|meta|tests|bench|man)/[A-Za-z0-9_./*-]*)`?")


def readme_source_map(top):
    lines = read(top, "README.md")
    out, level = [], 0  # level: the heading depth of "Source tree", 0 outside
    for line in lines:
        m = re.match(r"^(#+)\s", line)
        if m:
            depth = len(m.group(1))
            if re.match(r"^#+\s+Source tree", line):
                level = depth
                continue
            if level and depth <= level:
                level = 0
        if level:
            out.append(line)
    return "\n".join(out)


def design_words(top):
    """The terms of DESIGN.md section 1, split at '/' (one row may define
    several words), or None when DESIGN.md is not beside the checkout."""
    path = os.path.join(top, "..", "shared", "DESIGN.md")
    if not os.path.exists(path):
        return None
    words, inside = [], False
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("## "):
                inside = line.startswith("## 1.")
                continue
            m = re.match(r"^\|\s*([^|]+?)\s*\|", line)
            if inside and m and m.group(1) not in ("term", "---"):
                for w in m.group(1).split("/"):
                    w = w.strip()
                    if w:
                        words.append(w)
    return words


def check_map(top, files, bad):
    text = readme_source_map(top)
    if not text.strip():
        bad.append("map: README.md has no 'Source tree' section")
        return
    for tok in sorted(set(PATH_TOKEN.findall(text))):
        p = tok.rstrip(".,;:")
        if "*" in p:
            continue
        if not os.path.exists(os.path.join(top, p)):
            bad.append(f"map: README.md Source tree names {p}, which does not exist")
    named = set(t.rstrip(".,;:") for t in PATH_TOKEN.findall(text))
    for rel in files:
        if not rel.endswith(".c"):
            continue
        mod = module_of(rel)
        if not ({rel, mod + ".h", mod} & named):
            bad.append(f"map: README.md Source tree does not name the module {rel}")
    words = design_words(top)
    if words is None:
        print("lint: map: ../shared/DESIGN.md not found; the words of section 1 "
              "were not checked")
        return
    low = text.lower()
    for w in words:
        if w.lower() not in low:
            bad.append(f"map: README.md Source tree does not name the DESIGN.md "
                       f"section 1 word '{w}'")


# Calls into libraries and libc that comments may name.
EXTERNAL_PREFIXES = ("pthread_", "sqlite3_", "curl_", "fuse_", "ZSTD_", "EVP_",
                     "HMAC", "SHA", "MHD_", "json_", "clock_", "posix_", "str",
                     "mem", "f", "SSL_", "CRYPTO_", "OPENSSL_", "atomic_",
                     "__atomic", "__builtin", "sys_", "epoll_", "sig", "mmap",
                     "munmap", "readdir", "opendir", "closedir", "is", "to")
EXTERNAL = set("""
    abort accept access alloca assert atexit bind calloc chdir chmod chown close
    connect dup dup2 exit fork free getenv getpid gettid getuid gmtime ioctl kill
    link listen lseek lstat malloc mkdir mkstemp mkdtemp nanosleep open openat
    pipe poll pread pwrite qsort random read realloc recv rename renameat rmdir
    select send setsid sleep socket snprintf sprintf stat statfs statvfs sync
    syncfs syslog time umask unlink unlinkat usleep vsnprintf wait waitpid write
    writev readv preadv pwritev getrandom close_range eventfd timerfd_create
    linkat mknod mkfifo fallocate lseek64 splice tee vmsplice sendfile truncate
    ftruncate dirfd fdopendir fdatasync fsync syncfs getxattr setxattr listxattr
    removexattr printf puts perror abs llabs bsearch assert_ main exec execv
    execvp gethostname getopt getopt_long localtime nice alarm raise
    main write_all read_all ascii crc32c sysconf getpagesize inotify_add_watch
    flock lockf fcntl umount umount2 mount setrlimit getrlimit prctl
    LLVMFuzzerTestOneInput
""".split())

DEFINE_FUNC = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_ \*]*?[\s\*])?([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.M)
DEFINE_ATTR = re.compile(r"^__attribute__\(\(.*?\)\)\s+[^(]*?\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.M)
DEFINE_MACRO = re.compile(r"^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
COMMENT = re.compile(r"/\*.*?\*/", re.S)
CALL_IN_COMMENT = re.compile(r"(?<![A-Za-z0-9_.>:-])([A-Za-z_][A-Za-z0-9_]*)\(\)")


def check_names(top, files, bad):
    defined = set()
    texts = {}
    for rel in files + [os.path.relpath(p, top) for p in extra_sources(top)]:
        text = "\n".join(read(top, rel))
        texts[rel] = text
        defined.update(DEFINE_FUNC.findall(text))
        defined.update(DEFINE_ATTR.findall(text))
        defined.update(DEFINE_MACRO.findall(text))
    for rel in files:
        text = texts[rel]
        for m in COMMENT.finditer(text):
            for name in CALL_IN_COMMENT.findall(m.group(0)):
                if name in defined or name in EXTERNAL:
                    continue
                if name.startswith(EXTERNAL_PREFIXES):
                    continue
                line = text.count("\n", 0, m.start()) + 1 + \
                    m.group(0).count("\n", 0, m.group(0).find(name + "()"))
                bad.append(f"names: {rel}:{line}: a comment names {name}(), which is "
                           "defined nowhere in the tree")


def extra_sources(top):
    for d in ("tests",):
        for dirpath, dirnames, filenames in os.walk(os.path.join(top, d)):
            for f in filenames:
                if f.endswith((".c", ".h")):
                    yield os.path.join(dirpath, f)


CHECKS = {"layers": check_layers, "sizes": check_sizes, "map": check_map,
          "names": check_names}


def main(argv):
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = list(argv)
    if args[:1] == ["--top"]:
        top, args = args[1], args[2:]
    wanted = args or list(CHECKS)
    files = source_files(top)
    bad = []
    for name in wanted:
        if name not in CHECKS:
            print(f"lint: unknown check {name}; known: {' '.join(CHECKS)}")
            return 2
        CHECKS[name](top, files, bad)
    for line in bad:
        print("lint: " + line)
    print(f"lint: {' '.join(wanted)}: {len(files)} files, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
