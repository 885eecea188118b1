#!/usr/bin/env python3
"""bench/putfloor.py - the durability floor, without novafs.

Two modes.

Local disk (--dir DIR): times, on the file system of DIR, the syscall
sequences that bound the benchmarks (each one --iters times per thread,
--threads threads in parallel, CLOCK_MONOTONIC per operation):

  dsync4k   write 4 KiB to an O_APPEND|O_DSYNC file (one file per thread):
            what a local durable append costs
  publish   what the dir store does for one slot PUT (engine/store/dir/files.c
            dir_publish): openat(O_CREAT|O_EXCL) a temp file, write SIZE,
            fdatasync, close, link() to the final name, unlink the temp,
            fsync the directory (--size bytes; 4 KiB ~ one small flight,
            1 MiB ~ one dd bs=1M record)

S3 (--s3 ENDPOINT --bucket B --key-id K --secret S): the object store's
floor for one durable small append:

  s3put     --iters sequential PUTs of --size bytes (default 100) to new
            keys PREFIX/NNNNNNN of an existing bucket, path style
            (ENDPOINT/BUCKET/KEY), one kept-alive HTTP/1.1 connection with
            TCP_NODELAY (as curl, and so novafs, sets it), each PUT signed
            with SigV4 the way novafs signs a slot PUT by default
            (x-amz-content-sha256: UNSIGNED-PAYLOAD, plus Content-MD5;
            --create-once adds novafs's If-None-Match: *).  Each timing
            covers signing, sending and reading the whole answer; --warmup
            (default 20) PUTs before them are not timed (the connect, the
            bucket's first index writes).  Any answer but 200 stops the run
            with exit status 1.  http only (no TLS); python3 stdlib only.
            The keys are left in the bucket.

Prints one key=value line per case: ops/s and latency percentiles (us).
"""
import argparse
import base64
import datetime
import hashlib
import hmac
import http.client
import os
import socket
import sys
import threading
import time
import urllib.parse


def pct(v, p):
    k = min(len(v) - 1, max(0, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def report(name, threads, v, secs, extra=""):
    v = sorted(v)
    print("case=%s threads=%d ops=%d ops_per_s=%.0f p50_us=%.0f p99_us=%.0f p999_us=%.0f mean_us=%.0f%s"
          % (name, threads, len(v), len(v) / secs, pct(v, 50) / 1e3, pct(v, 99) / 1e3,
             pct(v, 99.9) / 1e3, sum(v) / len(v) / 1e3, extra), flush=True)


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
    report(name, threads, [x for l in lats for x in l], secs)


def disk(a):
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


# ---------------------------------------------------------------- S3

def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sigv4_put_headers(host, path, body, key_id, secret, region, create_once):
    """Headers of one SigV4-signed PUT of body to path (already URI-encoded,
    path style), UNSIGNED-PAYLOAD with Content-MD5, as novafs sends them."""
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    h = {
        "content-md5": base64.b64encode(hashlib.md5(body).digest()).decode(),
        "host": host,
        "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
        "x-amz-date": amz_date,
    }
    if create_once:
        h["if-none-match"] = "*"
    names = sorted(h)
    signed = ";".join(names)
    canon = "\n".join(["PUT", path, ""] + ["%s:%s" % (n, h[n]) for n in names]
                      + ["", signed, "UNSIGNED-PAYLOAD"])
    scope = "%s/%s/s3/aws4_request" % (day, region)
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(canon.encode()).hexdigest()])
    k = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret).encode(), day), region), "s3"), "aws4_request")
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    h["authorization"] = ("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
                          % (key_id, scope, signed, sig))
    return h


def s3(a):
    u = urllib.parse.urlsplit(a.s3)
    if u.scheme != "http" or not u.hostname:
        sys.exit("putfloor.py: --s3 wants http://HOST[:PORT] (no TLS here)")
    host = u.netloc
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=60)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    body = os.urandom(a.size)
    prefix = a.prefix or "putfloor-%d-%d" % (os.getpid(), int(time.time()))
    base = "/" + urllib.parse.quote(a.bucket, safe="") + "/" + urllib.parse.quote(prefix, safe="/")

    def put(j):
        path = "%s/%07d" % (base, j)
        h = sigv4_put_headers(host, path, body, a.key_id, a.secret, a.region, a.create_once)
        conn.request("PUT", path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            sys.exit("putfloor.py: PUT %s: HTTP %d %s" % (path, r.status, data[:300]))

    for j in range(a.warmup):
        put(a.iters + j)
    lats = []
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    for j in range(a.iters):
        s = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        put(j)
        lats.append(time.clock_gettime_ns(time.CLOCK_MONOTONIC) - s)
    secs = (time.clock_gettime_ns(time.CLOCK_MONOTONIC) - t0) / 1e9
    conn.close()
    report("s3put", 1, lats, secs, " bytes=%d create_once=%d" % (a.size, int(a.create_once)))


def main():
    ap = argparse.ArgumentParser(description="the durability floor without novafs "
                                 "(see the module docstring)")
    m = ap.add_mutually_exclusive_group(required=True)
    m.add_argument("--dir", help="local disk mode: a directory on the disk to time")
    m.add_argument("--s3", metavar="ENDPOINT", help="S3 mode: http://HOST:PORT of the server")
    ap.add_argument("--iters", type=int, default=2000,
                    help="operations per thread (S3: PUTs) (default 2000)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 4, 8],
                    help="disk mode: thread counts to run (default 1 4 8)")
    ap.add_argument("--bucket", help="S3: an existing bucket")
    ap.add_argument("--key-id", help="S3: access key id")
    ap.add_argument("--secret", help="S3: secret access key")
    ap.add_argument("--region", default="us-east-1", help="S3: signing region (default us-east-1)")
    ap.add_argument("--size", type=int, default=100, help="S3: bytes per PUT (default 100)")
    ap.add_argument("--prefix", help="S3: key prefix (default putfloor-PID-TIME)")
    ap.add_argument("--warmup", type=int, default=20, help="S3: untimed PUTs first (default 20)")
    ap.add_argument("--create-once", action="store_true",
                    help="S3: send If-None-Match: * as novafs's slot PUTs do")
    a = ap.parse_args()
    if a.s3:
        if not (a.bucket and a.key_id and a.secret):
            ap.error("--s3 needs --bucket, --key-id and --secret")
        s3(a)
    else:
        disk(a)


if __name__ == "__main__":
    main()
