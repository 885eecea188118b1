#!/usr/bin/env python3
# slots.py - the chain slots in a directory store, for the integration
# tests: slot files under OBJECTS/chains/ and the live records of the
# segment files under OBJECTS/#seg/ (-o slot_segments; record format in
# engine/store/dir/segfmt.h: magic, state, key length, version, payload
# length; checksums are not checked here), each named as the file of the
# same key would be (OBJECTS/<key>).
#
# For: tests/integration/lib.sh nv_slot_files, samplers that watch slots
# disappear (tests/integration/t_settle.sh: segment_slots()), and
# bench/settle.sh's copy of the live slot bytes (live_records()).
# Not for: settled objects (always plain files: test them with -e / -f).
#
# Usage: slots.py OBJECTS   prints every live slot, one a line, unsorted.
import os
import struct
import sys

HDR = 32
MAGIC = 0x5253564E
DEAD = 0x44414544


def segment_slots(root):
    """The paths of the live records of every segment under root/#seg."""
    return set(r[0] for r in segment_records(root))


def segment_records(root):
    """(path, segment file, payload offset, payload length) of every live
    record of the segments under root/#seg."""
    out = []
    seg = os.path.join(root, "#seg")
    try:
        names = sorted(os.listdir(seg))
    except FileNotFoundError:
        return out
    for name in names:
        if not name.endswith(".seg"):
            continue
        try:
            f = open(os.path.join(seg, name), "rb")
        except FileNotFoundError:
            continue
        with f:
            size = os.fstat(f.fileno()).st_size
            off = 0
            while off + HDR <= size:
                f.seek(off)
                hdr = f.read(HDR)
                if len(hdr) < HDR:
                    break
                magic, state, klen, ver, _, plen = struct.unpack_from("<IIHHIQ", hdr)
                if magic != MAGIC or ver != 1 or klen == 0 or off + HDR + klen + plen > size:
                    break
                key = f.read(klen)
                if state != DEAD:
                    out.append((os.path.join(root, key.decode("ascii", "replace")),
                                f.name, off + HDR + klen, plen))
                off += (HDR + klen + plen + 7) & ~7
    return out


def file_slots(root):
    """The slot files under root/chains (no '#' temporaries)."""
    out = set()
    for d, _, files in os.walk(os.path.join(root, "chains")):
        out.update(os.path.join(d, n) for n in files if "#" not in n)
    return out


def live_slots(root):
    return file_slots(root) | segment_slots(root)


def live_records(root):
    """(path, file, offset, length) of every live slot's bytes."""
    recs = [(p, p, 0, os.path.getsize(p)) for p in sorted(file_slots(root))]
    return recs + segment_records(root)


if __name__ == "__main__":
    for p in live_slots(sys.argv[1]):
        print(p)
