#!/usr/bin/env python3
"""records.py - writers and the checker of the many-star tests
(tests/etcd/t_handoff.sh, t_drain.sh).

  records.py write PATH NAME LOG [N [PAUSE_MS]]
      records "NAME n pad\\n" for n = 0.. (N of them, 0 or none: until
      LOG.stop exists), one write() each to PATH (O_APPEND), PAUSE_MS
      (default 0) between two; LOG gets "ack n" or
      "err n ERRNO" per record.  It goes on after an error, except when
      the mount is gone.
  records.py verify STREAM LOG...
      (each LOG named .../NAME.log) every acked record present exactly
      once, each writer's records in its order, a failed one at most
      once, no record nobody wrote.  Prints a summary; exit 1 otherwise.
"""
import collections
import errno
import os
import sys
import time


def write(path, name, log, limit=None, pause=0.0):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    out = open(log, "w", buffering=1)
    pad = b"." * (20 + len(name) * 3)
    n = 0
    while (limit is None or n < limit) and not os.path.exists(log + ".stop"):
        try:
            os.write(fd, b"%s %d %s\n" % (name.encode(), n, pad))
            out.write("ack %d\n" % n)
        except OSError as e:
            out.write("err %d %s\n" % (n, errno.errorcode.get(e.errno, str(e.errno))))
            if e.errno in (errno.ENOTCONN, errno.ECONNABORTED, errno.ENXIO):
                break
        n += 1
        if pause:
            time.sleep(pause)


def verify(stream, logs):
    data = open(stream, "rb").read()
    if data and not data.endswith(b"\n"):
        sys.exit("the stream does not end with a whole record (%d bytes)" % len(data))
    seen = collections.defaultdict(list)
    for line in data.split(b"\n")[:-1]:
        f = line.split(b" ")
        if len(f) != 3 or not f[1].isdigit():
            sys.exit("a record nobody wrote: %r" % line[:80])
        seen[f[0].decode()].append(int(f[1]))
    acked_all = failed_all = 0
    for log in logs:
        name = os.path.basename(log)[:-4]
        acked, failed = set(), set()
        for l in open(log):
            k, n = l.split()[:2]
            (acked if k == "ack" else failed).add(int(n))
        got = seen.pop(name, [])
        dup = [n for n, c in collections.Counter(got).items() if c > 1]
        if dup:
            sys.exit("%s: a record twice: %r" % (name, dup[:5]))
        if got != sorted(got):
            i = next(i for i in range(1, len(got)) if got[i] < got[i - 1])
            sys.exit("%s: its records out of order: ... %r ..." % (name, got[max(0, i - 3):i + 3]))
        if acked - set(got):
            sys.exit("%s: acked records missing: %r" % (name, sorted(acked - set(got))[:10]))
        if set(got) - acked - failed:
            sys.exit("%s: records it never wrote: %r" % (name, sorted(set(got) - acked - failed)[:5]))
        acked_all += len(acked)
        failed_all += len(failed)
    if seen:
        sys.exit("records of unknown writers: %r" % list(seen)[:3])
    print("%d records, %d acked, %d failed" % (len(data.split(b"\n")) - 1, acked_all, failed_all))


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "write":
        limit = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] != "0" else None
        pause = float(sys.argv[6]) / 1000 if len(sys.argv) > 6 else 0.0
        write(sys.argv[2], sys.argv[3], sys.argv[4], limit, pause)
    elif len(sys.argv) >= 4 and sys.argv[1] == "verify":
        verify(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
