#!/usr/bin/env python3
"""Before/after of issue 29 findings 1 and 7: agentkv BIN [as_limit_bytes]."""
import json, os, sys, tempfile, time, threading, concurrent.futures, resource
sys.path.insert(0, "/work/wt/json/bench")
import lib, hostile_clients as h

binary = sys.argv[1]
as_limit = int(sys.argv[2]) if len(sys.argv) > 2 else 0
work = tempfile.mkdtemp(prefix="akv-attack-")
port = lib.free_port()
cmd = [binary, "serve", "-m", "/work/wt/json/models/tiny-llama-brown-16m-q8_0.gguf", "--port", str(port),
       "--cache-dir", os.path.join(work, "c"), "--slots", "2", "-c", "1024", "-t", "1"]
if as_limit:
    cmd = ["prlimit", "--as=%d" % as_limit, "--"] + cmd

def start():
    p = lib.Proc(cmd, os.path.join(work, "server.log"), port)
    p.start(timeout=120)
    return p

def pid_of(p):
    # prlimit execs the server: the pid is the server's
    return p.p.pid

def rss_peak(pid):
    try:
        for l in open("/proc/%d/status" % pid):
            if l.startswith("VmHWM"):
                return int(l.split()[1]) // 1024
    except OSError:
        return None

def cpu_s(pid):
    try:
        f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None

def alive(p):
    return p.p.poll() is None

out = {"binary": binary, "as_limit": as_limit}
server = start()
# Finding 1: the five nesting forms, one each (restart after a crash).
for name, parts, expect, _ in ([] if os.environ.get("ONLY_PARALLEL") else h.nesting_cases(40000)):
    if not alive(server):
        server = start()
    r = h.raw(port, parts, timeout=30)
    time.sleep(0.3)
    msg = ""
    try:
        msg = json.loads(r["body"])["error"]["message"][:90]
    except Exception:
        pass
    out[name] = {"outcome": r["outcome"], "status": r["status"], "ms": round(r["ms"], 1),
                 "server_alive": alive(server), "rc": server.p.poll(), "message": msg}
    print(name, out[name], flush=True)

def fresh():
    global server
    server.stop()
    server = start()

# Finding 7a: one 32 MiB DOM-heavy body: RSS peak and time to answer.
body = h.dom_heavy_body(31)
if not os.environ.get("ONLY_PARALLEL"):
  fresh()
  pid = pid_of(server)
  base = rss_peak(pid)
  body = h.dom_heavy_body(31)
  r = h.raw(port, h.post_json(body), timeout=120)
  out["one 31 MiB body"] = {"status": r["status"], "outcome": r["outcome"], "ms": round(r["ms"]), "rss_before_mib": base,
                            "rss_peak_mib": rss_peak(pid), "alive": alive(server)}
  print("one 31 MiB body", out["one 31 MiB body"], flush=True)


# Finding 7b: 6 in parallel.
fresh()
pid = pid_of(server)
t0 = time.monotonic()
with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
    rs = list(pool.map(lambda _: h.raw(port, h.post_json(body), timeout=180), range(6)))
time.sleep(0.5)
out["6 parallel 31 MiB bodies"] = {"statuses": [x["status"] if x["outcome"] == "response" else x["outcome"] for x in rs],
                                   "s": round(time.monotonic() - t0, 1), "rss_peak_mib": rss_peak(pid),
                                   "alive": alive(server), "rc": server.p.poll()}
print("6 parallel", out["6 parallel 31 MiB bodies"], flush=True)
if not alive(server):
    print(server.log_text()[-600:])

# Finding 7c: 25 MB of tool descriptions.
if os.environ.get("ONLY_PARALLEL"):
    server.stop(); json.dump(out, open(os.environ.get("OUT_JSON", "/tmp/x/attack.json"), "w"), indent=1); sys.exit(0)
fresh()
pid = pid_of(server)
tools = [{"type": "function", "function": {"name": "f%d" % i, "description": "word " * (200000 // 5)}} for i in range(125)]
b = h.jb({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "tools": tools})
c0 = cpu_s(pid)
r = h.raw(port, h.post_json(b), timeout=300)
out["25 MB tool descriptions"] = {"body_mb": round(len(b) / 1e6, 1), "status": r["status"], "outcome": r["outcome"],
                                  "ms": round(r["ms"]), "server_cpu_s": round((cpu_s(pid) or 0) - (c0 or 0), 2),
                                  "rss_peak_mib": rss_peak(pid), "alive": alive(server)}
print("25 MB tools", out["25 MB tool descriptions"], flush=True)
server.stop()
json.dump(out, open(os.environ.get("OUT_JSON", "/tmp/x/attack.json"), "w"), indent=1)
