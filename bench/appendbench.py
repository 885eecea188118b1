#!/usr/bin/env python3
"""bench/appendbench.py - N writers appending fixed-size records, timed per write.

Each writer is its own process (no GIL between writers) with its own file
descriptor opened O_WRONLY|O_APPEND|O_CREAT (plus O_DSYNC with --dsync); each
write() is one record.  Writers start together at a common CLOCK_MONOTONIC
instant, write for --warmup seconds uncounted, then for --duration seconds
(or --count records each) with every write timed on CLOCK_MONOTONIC.

  --mode streams   writer i appends to DIR/w<i>  (N files)
  --mode one       every writer appends to DIR/shared (one file; the kernel
                   serialises writes to one file, so this measures one
                   writer's latency-bound rate, shared N ways)

Records are random bytes (per-writer buffer, sliding offset) so novafs's
zstd does not shrink them.  Prints one line of key=value: appends/s over the
measured window, latency percentiles in microseconds, per-writer min/max
counts, and a size check (bytes the files grew == records * size).

--interval-ms M paces each writer: one record every M ms (writer i offset
by i*M/N ms, so the writers do not tick together), a trickle instead of a
closed loop; latency is still per write.
"""
import argparse
import array
import multiprocessing as mp
import os
import sys
import time

CLOCK = time.CLOCK_MONOTONIC
INTERVAL_NS = 0  # --interval-ms, set before the writers fork
WRITERS = 1      # --writers, likewise


def now_ns():
    return time.clock_gettime_ns(CLOCK)


def writer(idx, path, flags, size, t_start, warmup_ns, dur_ns, count, conn):
    try:
        run_writer(idx, path, flags, size, t_start, warmup_ns, dur_ns, count, conn)
    except BaseException as e:  # report instead of leaving the parent waiting
        conn.send(("error", "writer %d: %s" % (idx, e)))
        conn.close()
        raise SystemExit(1)


def run_writer(idx, path, flags, size, t_start, warmup_ns, dur_ns, count, conn):
    fd = os.open(path, flags, 0o644)
    pool = os.urandom(size * 64 + size)
    lat = array.array("q")
    total = 0
    off = (idx * 977 * 64) % (size * 64)
    # Wait for the common start.
    while True:
        d = t_start - now_ns()
        if d <= 0:
            break
        time.sleep(min(d / 1e9, 0.01) if d > 2_000_000 else 0)
    t_meas = t_start + warmup_ns
    t_end = t_meas + dur_ns
    mv = memoryview(pool)
    write = os.write
    tick = [t_start + (idx * INTERVAL_NS) // WRITERS]

    def pace():
        if not INTERVAL_NS:
            return
        tick[0] += INTERVAL_NS
        d = tick[0] - now_ns()
        if d > 0:
            time.sleep(d / 1e9)
    # Warm-up (not counted in latency; counted in the size check).
    t = now_ns()
    while t < t_meas:
        write(fd, mv[off:off + size])
        off = (off + 4099) % (size * 64)
        total += 1
        pace()
        t = now_ns()
    n = 0
    last = t
    while (count and n < count) or (not count and t < t_end):
        b = mv[off:off + size]
        t0 = now_ns()
        w = write(fd, b)
        t = now_ns()
        if w != size:
            raise SystemExit("short write %d" % w)
        lat.append(t - t0)
        off = (off + 4099) % (size * 64)
        n += 1
        total += 1
        last = t
        pace()
        t = now_ns()
    os.close(fd)
    conn.send((idx, t_meas, last, n, total, lat.tobytes()))
    conn.close()


def pct(sorted_v, p):
    if not sorted_v:
        return float("nan")
    k = min(len(sorted_v) - 1, max(0, int(round(p / 100.0 * len(sorted_v) + 0.5)) - 1))
    return sorted_v[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--mode", choices=("streams", "one"), required=True)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--count", type=int, default=0, help="records per writer instead of --duration")
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--dsync", action="store_true", help="open with O_DSYNC (local files)")
    ap.add_argument("--lat-out", help="write all latencies (ns, one per line) here")
    ap.add_argument("--interval-ms", type=float, default=0.0,
                    help="one record per writer every this many ms (0: back to back)")
    a = ap.parse_args()
    global INTERVAL_NS, WRITERS
    INTERVAL_NS = int(a.interval_ms * 1e6)
    WRITERS = max(1, a.writers)

    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    if a.dsync:
        flags |= os.O_DSYNC
    if a.mode == "streams":
        paths = [os.path.join(a.dir, "w%d" % i) for i in range(a.writers)]
    else:
        paths = [os.path.join(a.dir, "shared")] * a.writers
    uniq = sorted(set(paths))
    before = {p: (os.stat(p).st_size if os.path.exists(p) else 0) for p in uniq}

    t_start = now_ns() + 300_000_000
    procs, conns = [], []
    for i in range(a.writers):
        r, w = mp.Pipe(duplex=False)
        p = mp.Process(target=writer, args=(i, paths[i], flags, a.size, t_start,
                                            int(a.warmup * 1e9), int(a.duration * 1e9),
                                            a.count, w))
        p.start()
        w.close()
        procs.append(p)
        conns.append(r)
    res = [c.recv() for c in conns]
    for p in procs:
        p.join()
    errs = [r[1] for r in res if r[0] == "error"]
    if errs:
        sys.exit("appendbench: " + "; ".join(errs))
    for p in procs:
        if p.exitcode != 0:
            sys.exit("appendbench: a writer exited with status %s" % p.exitcode)

    t_meas = min(r[1] for r in res)
    t_last = max(r[2] for r in res)
    n = sum(r[3] for r in res)
    total = sum(r[4] for r in res)
    lat = array.array("q")
    for r in res:
        lat.frombytes(r[5])
    v = sorted(lat)
    secs = (t_last - t_meas) / 1e9
    grown = sum(os.stat(p).st_size - before[p] for p in uniq)
    if a.lat_out:
        with open(a.lat_out, "w") as f:
            f.write("\n".join(str(x) for x in lat))
    us = lambda x: x / 1000.0
    print("appends=%d secs=%.3f appends_per_s=%.0f mb_per_s=%.2f p50_us=%.0f p99_us=%.0f "
          "p999_us=%.0f max_us=%.0f mean_us=%.0f writer_min=%d writer_max=%d size_ok=%d"
          % (n, secs, n / secs, n * a.size / secs / 1e6, us(pct(v, 50)), us(pct(v, 99)),
             us(pct(v, 99.9)), us(v[-1]), us(sum(v) / len(v)),
             min(r[3] for r in res), max(r[3] for r in res),
             1 if grown == total * a.size else 0))


if __name__ == "__main__":
    main()
