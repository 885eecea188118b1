#!/usr/bin/env python3
"""stars_check.py - the writer and the checker of the multi-star fault tests
(tests/etcd/t_partition.sh, tests/etcd/t_soak_stars.sh).

  stars_check.py write PATH LOG TAG [PAUSE]
      Append records "TAG N\\n" (N = 0, 1, ...) to PATH, one write() each
      (PAUSE seconds apart, default 0), until LOG.stop exists.  Every
      outcome goes to LOG as one line: "ack N T" or "err N ERRNO T" (T:
      time.time() after the write returned).  A failed record is never
      written again: it may be durable (in doubt), so it may be present
      at most once.  When the mount goes away (ENOTCONN, EBADF, ENODEV),
      or is away at the start, the writer reopens PATH until the mount is
      back, without O_CREAT
      (on the bare mount point directory the open fails: nothing is
      written beside the mount).
  stars_check.py verify FILE [FILE...] -- LOG [LOG...]
      Every FILE (the same stream read through different mounts) must hold
      the same bytes; in it every record acked in a LOG is present exactly
      once, each writer's records are in the order it wrote them, and no
      record is there that nobody wrote (a failed one may be, once).
      Prints a summary; exit status 1 with the first problem.

Not for: records that are not lines "TAG N".
"""
import errno
import os
import sys
import time


GONE = (errno.ENOTCONN, errno.EBADF, errno.ENODEV)


def write(path, log, tag, pause=0.0):
    out = open(log, "a", buffering=1)
    fd = None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as e:
        if e.errno not in GONE + (errno.ENOENT,):
            raise  # the mount is there and refuses: a real error
    n = 0
    while not os.path.exists(log + ".stop"):
        if fd is None:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            except OSError:
                time.sleep(0.1)
                continue
        try:
            os.write(fd, b"%s %d\n" % (tag.encode(), n))
            out.write("ack %d %.6f\n" % (n, time.time()))
            if pause:
                time.sleep(pause)
        except OSError as e:
            out.write("err %d %s %.6f\n" % (n, errno.errorcode.get(e.errno, str(e.errno)),
                                           time.time()))
            if e.errno in GONE:
                try:
                    os.close(fd)
                except OSError:
                    pass
                fd = None
            time.sleep(0.05)  # not a spin while a star is away
        n += 1


def verify(files, logs):
    data = []
    for f in files:
        t0 = time.time()
        data.append(open(f, "rb").read())
        if time.time() - t0 > 1:
            print("reading %s took %.1f s" % (f, time.time() - t0), file=sys.stderr)
    for f, d in zip(files[1:], data[1:]):
        if d != data[0]:
            n = next((i for i, (a, b) in enumerate(zip(d, data[0])) if a != b),
                     min(len(d), len(data[0])))
            sys.exit("%s differs from %s at byte %d (%d and %d bytes)" %
                     (f, files[0], n, len(d), len(data[0])))
    lines = data[0].decode(errors="replace").splitlines()
    if len(set(lines)) != len(lines):
        dup = sorted(l for l in set(lines) if lines.count(l) > 1)
        sys.exit("records twice: %r" % dup[:10])
    seen = {}
    for l in lines:
        f = l.split()
        if len(f) != 2 or not f[1].isdigit():
            sys.exit("a record nobody wrote: %r" % l)
        seen.setdefault(f[0], []).append(int(f[1]))
    acked_total = failed_total = 0
    for log in logs:
        tag = os.path.basename(log).split(".")[0]
        acked, failed = set(), set()
        for l in open(log):
            f = l.split()
            (acked if f[0] == "ack" else failed).add(int(f[1]))
        got = seen.pop(tag, [])
        if got != sorted(got):
            sys.exit("writer %s: records out of order" % tag)
        missing = acked - set(got)
        if missing:
            sys.exit("writer %s: acked records missing: %r" % (tag, sorted(missing)[:10]))
        extra = set(got) - acked - failed
        if extra:
            sys.exit("writer %s: records never written: %r" % (tag, sorted(extra)[:10]))
        acked_total += len(acked)
        failed_total += len(failed)
    if seen:
        sys.exit("records of unknown writers: %r" % sorted(seen)[:10])
    print("%d records, %d acked, %d failed, %d mounts identical" %
          (len(lines), acked_total, failed_total, len(files)))


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], sys.argv[4],
              float(sys.argv[5]) if len(sys.argv) > 5 else 0.0)
    elif len(sys.argv) >= 5 and sys.argv[1] == "verify" and "--" in sys.argv:
        i = sys.argv.index("--")
        verify(sys.argv[2:i], sys.argv[i + 1:])
    else:
        sys.exit(__doc__)
