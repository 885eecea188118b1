#!/usr/bin/env python3
"""bench/gw_replay.py - replay a stream through novagw by byte offset,
page after page on one kept-alive connection (bench/gateway_replay.sh).

For: throughput of a paged replay.  Not for: tests.

  gw_replay.py URL KEY MAX_BYTES [CMP_FILE]
      GET URL?offset=O&max_bytes=MAX_BYTES from 0, following Nova-Next-Offset
      until it reaches Nova-End-Offset (the stream's end when the replay
      started: a settled stream does not grow); prints
      "bytes=B pages=P"; with CMP_FILE, every page is compared with the
      same bytes of that file and a difference exits 1.

Invariant: a page must start at the offset asked (Nova-Offset) and the
next one where the header says; anything else exits 1, never skipped.
"""
import http.client
import sys
import urllib.parse


def main():
    url, key, maxb = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ref = open(sys.argv[4], 'rb') if len(sys.argv) > 4 else None
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    off, end, total, pages = 0, None, 0, 0
    while end is None or off < end:
        conn.request('GET', '%s?offset=%d&max_bytes=%d&limit=1000' % (u.path, off, maxb),
                     headers={'Authorization': 'Bearer ' + key})
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            sys.exit('offset %d: HTTP %d %s' % (off, r.status, body[:200]))
        if int(r.getheader('Nova-Offset')) != off:
            sys.exit('offset %d: page starts at %s' % (off, r.getheader('Nova-Offset')))
        nxt = int(r.getheader('Nova-Next-Offset'))
        if end is None:
            end = int(r.getheader('Nova-End-Offset'))
        if nxt - off != len(body) or (not body and off < end):
            sys.exit('offset %d: %d bytes, next %d' % (off, len(body), nxt))
        if ref is not None:
            ref.seek(off)
            if ref.read(len(body)) != body:
                sys.exit('offset %d: the page differs from the file' % off)
        total += len(body)
        pages += 1
        off = nxt
    print('bytes=%d pages=%d' % (total, pages))


if __name__ == '__main__':
    main()
