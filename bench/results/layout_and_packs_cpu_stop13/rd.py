import os,time,sys,statistics as st
def drop(fs):
    for f in fs:
        fd=os.open(f,os.O_RDONLY); os.fsync(fd) if False else None; os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED); os.close(fd)
def rd(fs):
    t=time.perf_counter()
    for f in fs:
        fd=os.open(f,os.O_RDONLY)
        while os.read(fd,1<<20): pass
        os.close(fd)
    return (time.perf_counter()-t)*1e3
sets={'files':[f'f{i}' for i in range(8)],'big':['big']}
for extra in sys.argv[1:]:
    name,files=extra.split('=',1); sets[name]=files.split(',')
res={k:[] for k in sets}
for r in range(7):
    for k,fs in sets.items():
        drop(fs); time.sleep(0.05); res[k].append(rd(fs))
for k,v in res.items(): print(k, 'median %.1f [%.1f-%.1f]'%(st.median(v),min(v),max(v)))
