import re, sys, datetime, collections
rx = re.compile(r"\[(\d+/\w+/\d+:\d+:\d+:\d+)(\.\d+) [^]]*\] \"GET (\S+) .*?\" (\d+) (\d+) - - (\S+) latency=([0-9.]+)s")
for fn in sys.argv[1:]:
    sp=[]; per=collections.Counter(); rng=collections.Counter()
    for l in open(fn):
        m=rx.search(l)
        if not m: continue
        t=datetime.datetime.strptime(m.group(1), "%d/%b/%Y:%H:%M:%S").timestamp()+float(m.group(2))
        key=m.group(3).rsplit('/',1)[-1]
        sp.append((t,t+float(m.group(7)),key,int(m.group(5)),m.group(6)))
        per[key]+=1; rng[m.group(6) if m.group(6)!='-' else '-' ]+=1
    t0=min(a for a,*_ in sp); t1=max(b for _,b,*_ in sp)
    dup=[k for k,c in per.items() if c>1]
    lat=sorted(b-a for a,b,*_ in sp)
    # concurrency histogram over time in 4ms bins
    print(fn, "gets",len(sp),"span %.3f"%(t1-t0),"dupslots",len(dup),"lat p50 %.1f p90 %.1f ms"%(lat[len(lat)//2]*1e3,lat[int(len(lat)*.9)]*1e3),
          "bytes %.1fMiB"%(sum(x[3] for x in sp)/2**20), "ranges", rng.most_common(3))
