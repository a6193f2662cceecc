import os,time,sys,statistics as st
from concurrent.futures import ThreadPoolExecutor
def drop(fs):
    for f in fs:
        fd=os.open(f,os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED); os.close(fd)
CH=1<<20*1+ (1<<18)  # ~1.25 MB
CH=1310720
def chunks(fs):
    out=[]
    for f in fs:
        n=os.path.getsize(f)
        for o in range(0,n,CH): out.append((f,o,min(CH,n-o)))
    return out
bufs={}
def rdchunk(c):
    f,o,n=c
    fd=os.open(f,os.O_RDONLY)
    b=os.pread(fd,n,o); os.close(fd); return len(b)
pool=ThreadPoolExecutor(int(sys.argv[1]) if len(sys.argv)>1 else 8)
def par(fs):
    cs=chunks(fs); t=time.perf_counter(); sum(pool.map(rdchunk,cs)); return (time.perf_counter()-t)*1e3
sets={'k-files':[f'/tmp/lay/k{i}' for i in range(8)],'f-files':[f'/tmp/lay/f{i}' for i in range(8)],'big':['/tmp/lay/big']}
res={k:[] for k in sets}
for r in range(7):
    for k,fs in sets.items():
        drop(fs); time.sleep(0.05); res[k].append(par(fs))
for k,v in res.items(): print(k, 'median %.1f [%.1f-%.1f]'%(st.median(v),min(v),max(v)))
