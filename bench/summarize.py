#!/usr/bin/env python3
"""bench/summarize.py - markdown tables from the RESULT lines of a run.

  python3 bench/summarize.py bench/results/<date>-<host>.txt

Every cell is "median [min-max]" over the repetitions of that row (n in the
last column).  Ratios are per repetition (paired runs), then summarised.
"""
import statistics
import sys
from collections import defaultdict


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            if not line.startswith("RESULT "):
                continue
            d = {}
            for tok in line.split()[1:]:
                if "=" in tok:
                    k, v = tok.split("=", 1)
                    d[k] = v
            rows.append(d)
    return rows


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def fmt(v):
    if v is None:
        return "-"
    if abs(v) >= 100:
        return "%.0f" % v
    if abs(v) >= 10:
        return "%.1f" % v
    return "%.2f" % v


def cell(vals):
    v = [x for x in (num(x) for x in vals) if x is not None]
    if not v:
        return "-"
    return "%s [%s-%s]" % (fmt(statistics.median(v)), fmt(min(v)), fmt(max(v)))


def table(title, header, rows):
    print("\n" + title + "\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")


def main():
    rows = parse(sys.argv[1])
    by = defaultdict(list)
    for r in rows:
        by[r.get("bench")].append(r)

    fl = by.get("floor", [])
    if fl:
        out = []
        for r in fl:
            out.append([r["case"], r["threads"], r["ops_per_s"], r["p50_us"], r["p99_us"], r["p999_us"]])
        table("floor (the disk alone, one run each)",
              ["case", "threads", "ops/s", "p50 us", "p99 us", "p99.9 us"], out)

    ab = [r for r in by.get("append_big", []) if "nova_mbps" in r]
    ad = [r for r in by.get("append_big", []) if "local_dsync_mbps" in r]
    if ab:
        out = []
        for src in sorted({r["src"] for r in ab}, reverse=True):
            a = [r for r in ab if r["src"] == src]
            d = [r for r in ad if r["src"] == src]
            out.append([src, cell(r["nova_mbps"] for r in a), cell(r["local_mbps"] for r in a),
                        cell(r["ratio"] for r in a), cell(r["local_dsync_mbps"] for r in d),
                        cell(r["ratio_vs_dsync"] for r in d),
                        cell(r.get("nova_daemon_cores") for r in a),
                        cell(r.get("nova_sys_busy") for r in a), str(len(a))])
        table("append_big (MB/s = 10^6 B/s)",
              ["src", "novafs MB/s", "local fsync MB/s", "ratio novafs/local", "local dsync MB/s",
               "ratio novafs/dsync", "daemon cores", "machine busy", "n"], out)

    sm = by.get("append_small", [])
    main_rows = [r for r in sm if r.get("target") in ("novafs", "local_dsync")]
    if main_rows:
        out = []
        for mode in ("streams", "one"):
            for t in ("novafs", "local_dsync"):
                a = [r for r in main_rows if r["mode"] == mode and r["target"] == t]
                if not a:
                    continue
                out.append([mode, t, cell(r["appends_per_s"] for r in a), cell(r["p50_us"] for r in a),
                            cell(r["p99_us"] for r in a), cell(r["p999_us"] for r in a),
                            cell(r.get("recs_per_flight") for r in a),
                            cell(r.get("sys_busy") for r in a), str(len(a))])
            rr = [r for r in sm if r.get("target") == "ratio" and r["mode"] == mode]
            if rr:
                out.append([mode, "**ratio**", cell(r["appends_ratio"] for r in rr), "", "", "", "", "",
                            str(len(rr))])
        table("append_small (8 writers x 4 KiB; latency in us)",
              ["mode", "target", "appends/s", "p50", "p99", "p99.9", "recs/flight", "machine busy", "n"],
              out)
    sw = [r for r in sm if r.get("target") == "sweep"]
    if sw:
        out = []
        keys = []
        for r in sw:
            k = (r["mode"], int(r["linger_us"]), int(r["put_window"]))
            if k not in keys:
                keys.append(k)
        for k in sorted(keys, key=lambda k: (k[0] != "streams", k[1], k[2])):
            a = [r for r in sw if (r["mode"], int(r["linger_us"]), int(r["put_window"])) == k]
            out.append([k[0], str(k[1]), str(k[2]), cell(r["appends_per_s"] for r in a),
                        cell(r["p50_us"] for r in a), cell(r["p99_us"] for r in a),
                        cell(r.get("recs_per_flight") for r in a), str(len(a))])
        table("append_small sweep (novafs only)",
              ["mode", "linger_us", "put_window", "appends/s", "p50", "p99", "recs/flight", "n"], out)
    dg = [r for r in sm if r.get("target") == "diag"]
    if dg:
        out = []
        cfgs = []
        for r in dg:
            if r["cfg"] not in cfgs:
                cfgs.append(r["cfg"])
        for c in cfgs:
            a = [r for r in dg if r["cfg"] == c]
            out.append([c, a[0]["writers"], cell(r["appends_per_s"] for r in a), cell(r["p50_us"] for r in a),
                        cell(r["p99_us"] for r in a), cell(r.get("recs_per_flight") for r in a),
                        cell(r.get("daemon_cores") for r in a), str(len(a))])
        table("append_small diagnostics (novafs, mode streams; *_tmpfs are NOT durable)",
              ["config", "writers", "appends/s", "p50", "p99", "recs/flight", "daemon cores", "n"], out)

    rc = [r for r in by.get("read_cold", []) if "nova_mbps" in r]
    if rc:
        out = []
        keys = []
        for r in rc:
            k = (r.get("phase", "transit"), r["kind"])
            if k not in keys:
                keys.append(k)
        for k in keys:
            a = [r for r in rc if (r.get("phase", "transit"), r["kind"]) == k]
            out.append([k[0], k[1], cell(r["nova_mbps"] for r in a), cell(r["local_mbps"] for r in a),
                        cell(r["ratio"] for r in a), cell(r.get("nova_daemon_cores") for r in a),
                        cell(r.get("nova_sys_busy") for r in a), str(len(a))])
        table("read_cold (MB/s = 10^6 B/s)",
              ["phase", "read", "novafs MB/s", "local MB/s", "ratio", "daemon cores", "machine busy", "n"],
              out)


if __name__ == "__main__":
    main()
