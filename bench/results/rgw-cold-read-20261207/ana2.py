import re, sys, datetime
rx = re.compile(r"\[(\d+/\w+/\d+:\d+:\d+:\d+)(\.\d+) [^]]*\] \"GET (\S+) .*latency=([0-9.]+)s")
for fn in sys.argv[1:]:
    sp=[]
    for l in open(fn):
        m=rx.search(l)
        if not m: continue
        t=datetime.datetime.strptime(m.group(1), "%d/%b/%Y:%H:%M:%S").timestamp()+float(m.group(2))
        sp.append((t,t+float(m.group(4))))
    if not sp: continue
    t0=min(a for a,b in sp); t1=max(b for a,b in sp)
    ev=sorted([(a,1) for a,b in sp]+[(b,-1) for a,b in sp], key=lambda e:(e[0],e[1]))
    hist={}; cur=0; last=t0
    for t,d in ev:
        hist[cur]=hist.get(cur,0)+(t-last); last=t; cur+=d
    tot=t1-t0
    print("%-22s n=%3d span=%.3f " % (fn.split('acc.')[1], len(sp), tot) + " ".join("%d:%2.0f%%" % (k, 100*v/tot) for k,v in sorted(hist.items()) if v>0))
