#!/usr/bin/env python3
"""bench/follow_latency.py - helper of bench/follow_latency.sh (stdlib only).

Subcommands:
  writer    append COUNT records (after WARMUP unmeasured ones, then TRAIL
            unmeasured ones) to a stream, one write() per record, O_APPEND;
            each record carries its send time (CLOCK_MONOTONIC, taken just
            before the write()).  Every write() is timed.  Writes
            "idx send_ns ack_ns" per measured record to --out.
  reader    read records from a file (the follow view, or a FIFO fed by tail
            or cat) and write "idx send_ns recv_ns" per measured record to
            --out; recv_ns is CLOCK_MONOTONIC when the read() that completed
            the record's line returned.  Ends once every measured record
            arrived, at end-of-file, or after --timeout seconds.
  analyze   percentiles of a writer file and reader files.
  cpu       CPU time (utime+stime ticks, and schedstat ns summed over live
            threads) and thread counts of a list of PIDs.
  wakecheck wait until N files under a directory contain a byte string.

Record layout (SIZE bytes): b"%08d %020d " % (idx, send_ns), padding 'x',
b"\\n".  Lines that do not parse (a header line) are skipped.
"""
import argparse
import math
import os
import signal
import sys
import time


def pct(sorted_vals, p):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, int(math.ceil(p / 100.0 * len(sorted_vals))) - 1))
    return sorted_vals[k]


def ms(ns):
    return ns / 1e6


class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout()


# ------------------------------------------------------------------ writer

def cmd_writer(a):
    size = a.size
    total = a.warmup + a.count + a.trail
    fd = os.open(a.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pad = b"x" * size
    send = [0] * a.count
    ack = [0] * a.count
    interval_ns = int(a.interval_ms * 1e6)
    t_start = 0
    for i in range(total):
        j = i - a.warmup
        if interval_ns and 0 <= j < a.count:
            # Measured records on a fixed schedule (no drift); the warm-up
            # and trailing records go back to back.
            if j == 0:
                t_start = time.monotonic_ns()
            else:
                delay = t_start + j * interval_ns - time.monotonic_ns()
                if delay > 0:
                    time.sleep(delay / 1e9)
        t0 = time.monotonic_ns()
        head = b"%08d %020d " % (i, t0)
        rec = head + pad[: size - len(head) - 1] + b"\n"
        n = os.write(fd, rec)
        t1 = time.monotonic_ns()
        if n != len(rec):
            sys.exit("short write: %d of %d bytes (record %d)" % (n, len(rec), i))
        if 0 <= j < a.count:
            send[j] = t0
            ack[j] = t1
    os.close(fd)
    with open(a.out, "w") as f:
        for j in range(a.count):
            f.write("%d %d %d\n" % (j + a.warmup, send[j], ack[j]))
    lat = sorted(ack[j] - send[j] for j in range(a.count))
    wall = (ack[-1] - send[0]) / 1e9 if a.count else 0.0
    print("writes=%d wall_s=%.3f appends_per_s=%.0f write_p50_ms=%.3f write_p99_ms=%.3f write_max_ms=%.3f"
          % (a.count, wall, a.count / wall if wall > 0 else 0, ms(pct(lat, 50)), ms(pct(lat, 99)),
             ms(lat[-1]) if lat else float("nan")))


# ------------------------------------------------------------------ reader

def cmd_reader(a):
    lo, hi = a.warmup, a.warmup + a.count
    got = {}
    other = dups = disorder = 0
    last = -1
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, a.timeout)
    ready_done = not a.ready
    status = "complete"
    fd = None
    try:
        fd = 0 if a.path == "-" else os.open(a.path, os.O_RDONLY)
        buf = b""
        while len(got) < a.count:
            chunk = os.read(fd, 65536)
            t = time.monotonic_ns()
            if not chunk:
                status = "eof"
                break
            buf += chunk
            if b"\n" not in chunk:
                continue
            lines = buf.split(b"\n")
            buf = lines.pop()
            for line in lines:
                try:
                    sidx, ssend, _ = line.split(b" ", 2)
                    idx, snd = int(sidx), int(ssend)
                except ValueError:
                    other += 1
                    if not ready_done:
                        with open(a.ready, "w") as f:
                            f.write("ready\n")
                        ready_done = True
                    continue
                if idx <= last:
                    disorder += 1
                last = max(last, idx)
                if lo <= idx < hi:
                    if idx in got:
                        dups += 1
                    else:
                        got[idx] = (snd, t)
    except Timeout:
        status = "timeout"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    with open(a.out, "w") as f:
        for idx in sorted(got):
            f.write("%d %d %d\n" % (idx, got[idx][0], got[idx][1]))
    print("received=%d of=%d status=%s other_lines=%d dups=%d disorder=%d"
          % (len(got), a.count, status, other, dups, disorder))
    sys.exit(0 if len(got) == a.count else 3)


# ------------------------------------------------------------------ analyze

def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) == 3:
                rows[int(p[0])] = (int(p[1]), int(p[2]))
    return rows


def cmd_analyze(a):
    w = load(a.writer)
    out = []
    wl = sorted(ack - snd for snd, ack in w.values())
    if not a.reader:
        out.append("write_p50_ms=%.3f write_p90_ms=%.3f write_p99_ms=%.3f write_max_ms=%.3f"
                   % tuple(ms(x) for x in (pct(wl, 50), pct(wl, 90), pct(wl, 99), wl[-1])))
    for rpath in a.reader:
        r = load(rpath)
        fl = sorted(recv - snd for snd, recv in r.values())
        # The follower's delay beyond the writer's own acknowledgement
        # (negative: the follower had the record before write() returned).
        ex = sorted(r[i][1] - w[i][1] for i in r if i in w)
        before = sum(1 for x in ex if x < 0)
        n = len(fl)
        s = ("received=%d of=%d p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f mean_ms=%.3f"
             % (n, len(w), *(ms(pct(fl, p)) for p in (50, 90, 99, 99.9)),
                ms(fl[-1]) if fl else float("nan"), ms(sum(fl) / n) if n else float("nan")))
        s += (" write_p50_ms=%.3f write_p90_ms=%.3f write_p99_ms=%.3f write_max_ms=%.3f"
              % tuple(ms(x) for x in (pct(wl, 50), pct(wl, 90), pct(wl, 99), wl[-1])))
        if ex:
            s += (" extra_p50_ms=%.3f extra_p90_ms=%.3f extra_p99_ms=%.3f extra_max_ms=%.3f before_ack_frac=%.3f"
                  % (ms(pct(ex, 50)), ms(pct(ex, 90)), ms(pct(ex, 99)), ms(ex[-1]), before / len(ex)))
        if a.over:
            s += " over_%gms=%d" % (a.over, sum(1 for x in fl if x > a.over * 1e6))
        out.append(s)
    print("\n".join(out))


# ------------------------------------------------------------------ cpu

def proc_cpu(pid):
    """(ticks, ns, threads) of a live PID, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        fields = st[st.rindex(")") + 2:].split()
        ticks = int(fields[11]) + int(fields[12])
        ns = 0
        tasks = os.listdir("/proc/%d/task" % pid)
        for t in tasks:
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                    ns += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        return ticks, ns, len(tasks)
    except (OSError, ValueError):
        return None


def cmd_cpu(a):
    pids = [int(p) for p in a.pids]
    if a.pidfile:
        with open(a.pidfile) as f:
            pids += [int(x) for x in f.read().split()]
    ticks = ns = threads = alive = 0
    for p in pids:
        c = proc_cpu(p)
        if c:
            alive += 1
            ticks += c[0]
            ns += c[1]
            threads += c[2]
    print("%d %d %d %d" % (ticks, ns, threads, alive))


# ------------------------------------------------------------------ wakecheck

def cmd_wakecheck(a):
    pat = a.pattern.encode()
    t0 = time.monotonic()
    names = [os.path.join(a.dir, n) for n in os.listdir(a.dir)]
    pending = set(names)
    while True:
        for n in list(pending):
            try:
                with open(n, "rb") as f:
                    if pat in f.read():
                        pending.discard(n)
            except OSError:
                pass
        done = len(names) - len(pending)
        if done >= a.count or time.monotonic() - t0 > a.timeout:
            break
        time.sleep(0.02)
    print("woke=%d of=%d after_s=%.3f" % (done, a.count, time.monotonic() - t0))
    sys.exit(0 if done >= a.count else 3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("writer")
    w.add_argument("--path", required=True)
    w.add_argument("--count", type=int, required=True)
    w.add_argument("--warmup", type=int, default=0)
    w.add_argument("--trail", type=int, default=0)
    w.add_argument("--size", type=int, default=100)
    w.add_argument("--interval-ms", type=float, default=0.0)
    w.add_argument("--out", required=True)
    r = sub.add_parser("reader")
    r.add_argument("--path", required=True, help="file or FIFO; - for stdin")
    r.add_argument("--count", type=int, required=True)
    r.add_argument("--warmup", type=int, default=0)
    r.add_argument("--timeout", type=float, default=120.0)
    r.add_argument("--ready", default="")
    r.add_argument("--out", required=True)
    z = sub.add_parser("analyze")
    z.add_argument("--writer", required=True)
    z.add_argument("--reader", action="append", default=[])
    z.add_argument("--over", type=float, default=0.0, help="also count latencies above this many ms")
    c = sub.add_parser("cpu")
    c.add_argument("--pidfile", default="")
    c.add_argument("pids", nargs="*")
    k = sub.add_parser("wakecheck")
    k.add_argument("--dir", required=True)
    k.add_argument("--pattern", required=True)
    k.add_argument("--count", type=int, required=True)
    k.add_argument("--timeout", type=float, default=60.0)
    a = ap.parse_args()
    {"writer": cmd_writer, "reader": cmd_reader, "analyze": cmd_analyze, "cpu": cmd_cpu,
     "wakecheck": cmd_wakecheck}[a.cmd](a)


if __name__ == "__main__":
    main()
