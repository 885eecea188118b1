#!/usr/bin/env python3
"""bench/putfloor.py - the disk's durability floor, without novafs.

Times, on the file system of --dir, the syscall sequences that bound the
benchmarks (each one --iters times per thread, --threads threads in
parallel, CLOCK_MONOTONIC per operation):

  dsync4k   write 4 KiB to an O_APPEND|O_DSYNC file (one file per thread):
            what a local durable append costs
  publish   what the dir store does for one slot PUT (engine/store/dir/files.c
            dir_publish): openat(O_CREAT|O_EXCL) a temp file, write SIZE,
            fdatasync, close, link() to the final name, unlink the temp,
            fsync the directory (--size bytes; 4 KiB ~ one small flight,
            1 MiB ~ one dd bs=1M record)

Prints one key=value line per case: ops/s and latency percentiles (us).
"""
import argparse
import os
import threading
import time


def pct(v, p):
    k = min(len(v) - 1, max(0, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def run(name, fn, threads, iters):
    lats = [[] for _ in range(threads)]
    start = threading.Barrier(threads + 1)

    def body(i):
        start.wait()
        for j in range(iters):
            t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            fn(i, j)
            lats[i].append(time.clock_gettime_ns(time.CLOCK_MONOTONIC) - t0)

    ts = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    start.wait()
    for t in ts:
        t.join()
    secs = (time.clock_gettime_ns(time.CLOCK_MONOTONIC) - t0) / 1e9
    v = sorted(x for l in lats for x in l)
    print("case=%s threads=%d ops=%d ops_per_s=%.0f p50_us=%.0f p99_us=%.0f p999_us=%.0f mean_us=%.0f"
          % (name, threads, len(v), len(v) / secs, pct(v, 50) / 1e3, pct(v, 99) / 1e3,
             pct(v, 99.9) / 1e3, sum(v) / len(v) / 1e3), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 4, 8])
    a = ap.parse_args()
    buf4k = os.urandom(4096)
    buf1m = os.urandom(1 << 20)

    for threads in a.threads:
        fds = [os.open(os.path.join(a.dir, "dsync%d" % i),
                       os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_DSYNC, 0o644)
               for i in range(threads)]
        run("dsync4k", lambda i, j: os.write(fds[i], buf4k), threads, a.iters)
        for fd in fds:
            os.close(fd)

    for size, buf, iters in ((4096, buf4k, a.iters), (1 << 20, buf1m, max(50, a.iters // 10))):
        for threads in a.threads:
            d = os.path.join(a.dir, "pub-%d-%d" % (size, threads))
            os.mkdir(d)
            dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)

            def publish(i, j, d=d, dfd=dfd, buf=buf):
                tmp = ".tmp.%d.%d" % (i, j)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dfd)
                os.write(fd, buf)
                os.fdatasync(fd)
                os.close(fd)
                os.link(tmp, "obj.%d.%d" % (i, j), src_dir_fd=dfd, dst_dir_fd=dfd)
                os.unlink(tmp, dir_fd=dfd)
                os.fsync(dfd)

            run("publish%s" % ("4k" if size == 4096 else "1m"), publish, threads, iters)
            os.close(dfd)


if __name__ == "__main__":
    main()
