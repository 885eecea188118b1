#!/usr/bin/env python3
"""bench/sse_consumers.py - many SSE consumers of one stream through novagw,
and the writer that appends to it on the mount (bench/gateway_sse.sh).

For: measuring append-ack -> consumer latency and checking every record
reaches every consumer exactly once.  Not for: tests (nothing here is
asserted by make check).

  sse_consumers.py write PATH NREC SIZE INTERVAL_MS ACKS
      append NREC records of SIZE bytes (one write() each, O_APPEND) every
      INTERVAL_MS; ACKS gets "index ack_ns call_ns" per record, ack_ns
      being CLOCK_MONOTONIC right after write() returned, call_ns right
      before it was called.
  sse_consumers.py read URL KEY N NREC SIZE OUT READY [TIMEOUT_S]
      open N events connections (?offset=0) from one process (non-blocking
      sockets, one selector), touch READY once all N have their response
      headers, and take every data event until each consumer has
      NREC*SIZE bytes (or TIMEOUT_S passes); OUT gets
      "consumer record recv_ns" per (consumer, record) and a last line
      "# consumers=N accepted=A refused=STATUS:COUNT+... complete=K dup=D
      gap=G consumers_cpu_s=S"; a consumer whose response is not 200 is
      refused (counted, not retried: the bench measures what is served).
  sse_consumers.py follow PATH N NREC SIZE OUT READY [TIMEOUT_S]
      the same from N followers on the mount instead (the baseline): one
      thread each, blocked in read() on PATH (MNT/.follow/BUCKET/STREAM);
      OUT as for read, a follower whose bytes differ from what the writer
      wrote counting as a gap.
  sse_consumers.py report ACKS OUT N NREC
      latency p50/p99/max over all (consumer, record) pairs, from the ack
      (negative when the consumer read the record before the writer was
      scheduled back from write()) and from the call; exactly-once; how
      many consumers saw some record more than 1 s after its ack.

Invariants:
 1. A record counts as received when the event carrying its last byte is
    read off the socket (the time is taken once per recv() batch).
 2. Exactly once: each consumer's events must be contiguous from byte 0
    (event k+1's offset is event k's end); an overlap counts as dup, a hole
    as gap, and neither is papered over.
"""
import base64
import json
import os
import selectors
import socket
import sys
import time
import urllib.parse


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def writer(path, nrec, size, interval_ms, acks):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    out = []
    t0 = mono_ns()
    step = interval_ms * 1_000_000
    for i in range(nrec):
        due = t0 + i * step
        d = due - mono_ns()
        if d > 0:
            time.sleep(d / 1e9)
        body = (b'%010d ' % i).ljust(size - 1, b'x') + b'\n'
        tc = mono_ns()
        if os.write(fd, body) != size:
            sys.exit('short write')
        out.append('%d %d %d\n' % (i, mono_ns(), tc))
    os.close(fd)
    with open(acks, 'w') as f:
        f.writelines(out)


class Consumer:
    def __init__(self, idx, sock):
        self.idx, self.sock = idx, sock
        self.buf = b''
        self.headers_done = False
        self.chunked = False
        self.raw = b''       # de-chunked body not yet parsed as events
        self.next_byte = 0   # the byte after the last event
        self.dup = self.gap = 0
        self.recv = []       # (record, recv_ns)
        self.done = False
        self.status = None

    def feed(self, data, t, size, want):
        self.buf += data
        if not self.headers_done:
            i = self.buf.find(b'\r\n\r\n')
            if i < 0:
                return
            head = self.buf[:i].decode('latin-1').split('\r\n')
            self.status = head[0].split(' ', 2)[1]
            if self.status != '200':
                self.headers_done = self.done = True
                return
            self.chunked = any(h.lower().startswith('transfer-encoding:') and 'chunked' in h.lower()
                               for h in head[1:])
            self.buf = self.buf[i + 4:]
            self.headers_done = True
        if self.chunked:
            while True:
                j = self.buf.find(b'\r\n')
                if j < 0:
                    break
                n = int(self.buf[:j].split(b';')[0], 16)
                if len(self.buf) < j + 2 + n + 2:
                    break
                self.raw += self.buf[j + 2:j + 2 + n]
                self.buf = self.buf[j + 2 + n + 2:]
                if n == 0:
                    self.done = True
        else:
            self.raw += self.buf
            self.buf = b''
        while True:
            k = self.raw.find(b'\n\n')
            if k < 0:
                break
            ev, self.raw = self.raw[:k].decode(), self.raw[k + 2:]
            f = dict(l.split(': ', 1) for l in ev.split('\n') if ': ' in l)
            if f.get('event') != 'data':
                if f.get('event') in ('end', 'error'):
                    self.done = True
                continue
            d = json.loads(f['data'])
            off, ln = d['offset'], d['length']
            if len(base64.b64decode(d['base64'])) != ln:
                raise RuntimeError('consumer %d: length mismatch at %d' % (self.idx, off))
            if off < self.next_byte:
                self.dup += 1
            elif off > self.next_byte:
                self.gap += 1
            end = off + ln
            # records whose last byte is in [max(off,next), end)
            first = max(off, self.next_byte) // size
            for r in range(first, end // size):
                if (r + 1) * size > max(off, self.next_byte):
                    self.recv.append((r, t))
            self.next_byte = max(self.next_byte, end)
        if self.next_byte >= want:
            self.done = True


def reader(url, key, n, nrec, size, out, ready, timeout_s=120.0):
    u = urllib.parse.urlsplit(url)
    want = nrec * size
    sel = selectors.DefaultSelector()
    cons = []
    req = ('GET %s?offset=0 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n'
           'Accept: text/event-stream\r\n\r\n' % (u.path, u.netloc, key)).encode()
    for i in range(n):
        s = socket.create_connection((u.hostname, u.port))
        s.sendall(req)
        s.setblocking(False)
        c = Consumer(i, s)
        cons.append(c)
        sel.register(s, selectors.EVENT_READ, c)
    live = n
    signalled = False
    deadline = time.monotonic() + timeout_s
    while live and time.monotonic() < deadline:
        for key_, _ in sel.select(timeout=1.0):
            c = key_.data
            try:
                data = c.sock.recv(1 << 20)
            except BlockingIOError:
                continue
            t = mono_ns()
            if not data:
                c.done = True
            else:
                c.feed(data, t, size, want)
            if c.done:
                sel.unregister(c.sock)
                c.sock.close()
                live -= 1
        if not signalled and all(c.headers_done or c.done for c in cons):
            open(ready, 'w').close()
            signalled = True
    complete = sum(1 for c in cons if c.next_byte >= want)
    refused = {}
    for c in cons:
        if c.status not in (None, '200'):
            refused[c.status] = refused.get(c.status, 0) + 1
    accepted = sum(1 for c in cons if c.status == '200')
    with open(out, 'w') as f:
        for c in cons:
            f.writelines('%d %d %d\n' % (c.idx, r, t) for r, t in c.recv)
        tm = os.times()
        f.write('# consumers=%d accepted=%d refused=%s complete=%d dup=%d gap=%d '
                'consumers_cpu_s=%.2f\n'
                % (n, accepted, '+'.join('%s:%d' % kv for kv in sorted(refused.items())) or '0',
                   complete, sum(c.dup for c in cons), sum(c.gap for c in cons),
                   tm.user + tm.system))


def expected(nrec, size):
    return b''.join((b'%010d ' % i).ljust(size - 1, b'x') + b'\n' for i in range(nrec))


def follow(path, n, nrec, size, out, ready, timeout_s=120.0):
    import threading
    want = nrec * size
    fds = [os.open(path, os.O_RDONLY) for _ in range(n)]
    recv = [[] for _ in range(n)]
    data = [bytearray() for _ in range(n)]
    deadline = time.monotonic() + timeout_s

    def run(i):
        got = 0
        while got < want and time.monotonic() < deadline:
            b = os.read(fds[i], 1 << 16)
            t = mono_ns()
            if not b:
                break
            data[i] += b
            # the records whose last byte is in [got, got + len(b))
            recv[i].extend((r, t) for r in range(got // size, (got + len(b)) // size))
            got += len(b)

    th = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in th:
        t.start()
    open(ready, 'w').close()
    for t in th:
        t.join(max(0.0, deadline - time.monotonic()))
    exp = expected(nrec, size)
    gap = sum(1 for d in data if bytes(d[:want]) != exp)
    complete = sum(1 for d in data if len(d) >= want)
    with open(out, 'w') as f:
        for i in range(n):
            f.writelines('%d %d %d\n' % (i, r, t) for r, t in recv[i])
        tm = os.times()
        f.write('# consumers=%d accepted=%d refused=0 complete=%d dup=%d gap=%d '
                'consumers_cpu_s=%.2f\n' % (n, n, complete, sum(1 for d in data if len(d) > want),
                                           gap, tm.user + tm.system))
    for fd in fds:
        os.close(fd)


def pct(v, p):
    return v[min(len(v) - 1, int(p * len(v)))]


def report(acks, out, n, nrec):
    ack, call = {}, {}
    for line in open(acks):
        i, t, tc = map(int, line.split())
        ack[i], call[i] = t, tc
    seen = {}
    lat, latc = [], []
    worst = {}  # consumer -> its highest latency
    trailer = ''
    for line in open(out):
        if line.startswith('#'):
            trailer = line[1:].strip()
            continue
        c, r, t = map(int, line.split())
        seen[(c, r)] = seen.get((c, r), 0) + 1
        lat.append((t - ack[r]) / 1e6)
        latc.append((t - call[r]) / 1e6)
        worst[c] = max(worst.get(c, -1e9), lat[-1])
    twice = sum(1 for v in seen.values() if v > 1)
    accepted = int(trailer.split('accepted=')[1].split()[0]) if 'accepted=' in trailer else n
    missing = accepted * nrec - len(seen)
    lat.sort()
    latc.sort()
    if not lat:
        print('pairs=0 %s' % trailer)
        return
    print('pairs=%d missing=%d twice=%d lat_p50_ms=%.2f lat_p99_ms=%.2f lat_max_ms=%.2f '
          'lat_min_ms=%.2f call_p50_ms=%.2f call_p99_ms=%.2f write_p50_ms=%.2f '
          'consumers_max_over_1s=%d %s'
          % (len(seen), missing, twice, pct(lat, 0.50), pct(lat, 0.99), lat[-1], lat[0],
             pct(latc, 0.50), pct(latc, 0.99),
             sorted((ack[i] - call[i]) / 1e6 for i in ack)[len(ack) // 2],
             sum(1 for v in worst.values() if v > 1000), trailer))


if __name__ == '__main__':
    a = sys.argv
    if a[1] == 'write':
        writer(a[2], int(a[3]), int(a[4]), float(a[5]), a[6])
    elif a[1] == 'read':
        reader(a[2], a[3], int(a[4]), int(a[5]), int(a[6]), a[7], a[8],
               float(a[9]) if len(a) > 9 else 120.0)
    elif a[1] == 'follow':
        follow(a[2], int(a[3]), int(a[4]), int(a[5]), a[6], a[7],
               float(a[8]) if len(a) > 8 else 120.0)
    elif a[1] == 'report':
        report(a[2], a[3], int(a[4]), int(a[5]))
    else:
        sys.exit(__doc__)
