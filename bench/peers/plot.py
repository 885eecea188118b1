#!/usr/bin/python3
"""bench/peers/plot.py - draw bench/peers/run.sh results.

    /usr/bin/python3 bench/peers/plot.py RESULTS.txt [OUT.png]

RESULTS.txt holds "peer workload key=value ..." lines (run.sh); the
latency samples of workload d are read from RESULTS.lat-PEER.txt beside it
when present.  Draws four panels (per-append time and upload
amplification of the small appends, append throughput, cold read
throughput, append-to-visible latency) into OUT.png (default
bench/peers/peers.png).  Needs Debian's python3-matplotlib (hence
/usr/bin/python3, not another python on PATH).
"""
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"novafs": "#1f77b4", "s3fs": "#d62728", "rclone": "#2ca02c"}


def load(path):
    res = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        kv = dict(x.split("=", 1) for x in f[2:] if "=" in x)
        res.setdefault(f[0], {})[f[1]] = kv
    return res


def num(d, k):
    try:
        return float(d[k])
    except (KeyError, ValueError):
        return math.nan


def bars(ax, peers, vals, title, ylabel, fmt="%.1f", log=False, notes=None):
    xs = range(len(peers))
    ax.bar(xs, vals, color=[COLORS.get(p, "grey") for p in peers])
    ax.set_xticks(list(xs))
    ax.set_xticklabels(peers)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    for x, v in zip(xs, vals):
        if not math.isnan(v):
            label = fmt % v + ((" " + notes[x]) if notes and notes[x] else "")
            ax.annotate(label, (x, v), ha="center", va="bottom", fontsize=8)


def main():
    src = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "peers.png")
    res = load(src)
    # "ratio" lines are run.sh's verdicts against issue 13's targets, not a peer.
    peers = [p for p in ("novafs", "s3fs", "rclone") if p in res] + \
        [p for p in res if p not in ("novafs", "s3fs", "rclone", "ratio")]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    a = [res[p].get("a_small_appends", {}) for p in peers]
    b = [res[p].get("b_dd_append", {}) for p in peers]
    c = [res[p].get("c_cold_read", {}) for p in peers]
    n_small = a[0].get("n", "?") if a else "?"
    bars(axes[0][0], peers, [num(x, "per_append_ms") for x in a],
         "a: %s x `echo >>` 100 B: time per append\n(until write/close returned)" % n_small,
         "ms per append", "%.2f", log=True)
    # a2: novafs again, until settled and its slots deleted (whole lifecycle).
    a2 = res.get("novafs", {}).get("a2_small_appends_settled")
    pa, up, rq = list(peers), [num(x, "uploaded_bytes") / 1e6 for x in a], [num(x, "requests") for x in a]
    notes = ["(%sx)" % x.get("upload_amplification", "?") for x in a]
    if a2:
        pa.append("novafs\n+settle+trim")
        up.append(num(a2, "uploaded_bytes") / 1e6)
        rq.append(num(a2, "requests"))
        notes.append("")
        COLORS["novafs\n+settle+trim"] = "#9ecae1"
    bars(axes[0][1], pa, up, "a: bytes uploaded to RGW for 1 MB of appends", "MB uploaded", "%.1f",
         log=True, notes=notes)
    bars(axes[0][2], pa, rq, "a: S3 requests for %s appends" % n_small, "requests", "%.0f", log=True)
    mib = b[0].get("mib", "?") if b else "?"
    # b and c: novafs's durable=fsync file beside (bigf: dd's close durable).
    pb, bv, cv = list(peers), [num(x, "mib_s") for x in b], [num(x, "mib_s") for x in c]
    bf = res.get("novafs", {}).get("b_dd_append_fsync")
    cf = res.get("novafs", {}).get("c_cold_read_fsync")
    if bf or cf:
        pb.append("novafs\ndurable=fsync")
        bv.append(num(bf or {}, "mib_s"))
        cv.append(num(cf or {}, "mib_s"))
        COLORS["novafs\ndurable=fsync"] = "#9ecae1"
    bars(axes[1][0], pb, bv,
         "b: dd bs=1M append of %s MiB\n(until whole in RGW)" % mib, "MiB/s")
    bars(axes[1][1], pb, cv,
         "c: cold read after remount + drop_caches", "MiB/s")
    ax = axes[1][2]
    base = os.path.splitext(src)[0]
    for p in peers:
        path = "%s.lat-%s.txt" % (base, p)
        if not os.path.exists(path):
            continue
        v = sorted(float(x) * 1000 for x in open(path).read().split() if x != "lost")
        if v:
            ax.plot(v, [(i + 1) / len(v) for i in range(len(v))], label=p, color=COLORS.get(p))
    ax.set_xscale("log")
    ax.set_xlabel("append-to-visible latency (ms)")
    ax.set_ylabel("fraction of records")
    ax.set_title("d: a reader sees each append (CDF)", fontsize=10)
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("novafs vs s3fs-fuse vs rclone mount on one Ceph RGW (%s)" % os.path.basename(src))
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(out)


if __name__ == "__main__":
    main()
