import subprocess, time, urllib.request, sys, json, re, os
model='/tmp/m/llama-3.1-8b-q4_0.gguf'
res=[]
def once(binary, port, tag):
    log=open('/tmp/st_%s.log'%tag,'w')
    t0=time.perf_counter()
    p=subprocess.Popen([binary,'serve','-m',model,'--port',str(port),'--cache-dir','/tmp/st-cache-'+tag,'--slots','1','-c','32768','-t','2'],stdout=log,stderr=subprocess.STDOUT)
    while True:
        try:
            with urllib.request.urlopen('http://127.0.0.1:%d/health'%port, timeout=1) as r:
                if r.status==200: break
        except Exception: pass
        time.sleep(0.01)
    t=(time.perf_counter()-t0)*1000
    time.sleep(2.5)
    p.terminate(); p.wait()
    txt=open('/tmp/st_%s.log'%tag).read()
    m=re.search(r'staging buffer: ([\d.]+) MB \((\w+)\) ready after (\d+) ms',txt)
    return t, (m.groups() if m else None)
for b in ('/tmp/agentkv-before','/tmp/agentkv-after'): once(b, 39001, 'warm')  # fingerprints cached, page cache warm
for rep in range(5):
    for name,b in (('before','/tmp/agentkv-before'),('after','/tmp/agentkv-after')) if rep%2==0 else (('after','/tmp/agentkv-after'),('before','/tmp/agentkv-before')):
        t,st=once(b, 39001, name)
        res.append({'side':name,'rep':rep,'startup_ms':t,'staging':st})
        print(name, rep, round(t), st, flush=True)
json.dump({'date':time.strftime('%Y-%m-%dT%H:%M:%SZ',time.gmtime()),'model':model,'args':'--slots 1 -c 32768 -t 2','machine':'2-core VM (CPU)','before':'4d7e9fc^ (staging reserved synchronously)','after':'4d7e9fc (in the background)','samples':res},open('/tmp/startup_cpu.json','w'),indent=1)
