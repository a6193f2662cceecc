#!/usr/bin/env python3
"""Agents returning one after another after a restart: the first returning agent's read is not the only
one that matters (bench/RESULTS.md, stop 13, the read reserve's refill).

Per binary (--bin, repeatable; runs alternate between them): one agentkv server (--slots 1, -c fitting one
agent), N agents (default 3) of ~--tokens prompt tokens each (distinct slices of the held-out text) are
prefilled cold and saved; then, per rep: SIGTERM, the cache's files dropped from the page cache, a new process
(startup excluded), and the agents return in order, each sending its same prompt again (an EXACT match,
max_tokens 1) --gap-ms after the previous answer. Reported per binary and per position in the order: the
median [min-max] over reps of the client-side TTFT and of the server's read_ms (usage.agentkv).

  python3 bench/returning_team.py --bin /tmp/old-agentkv --bin build/agentkv --reps 5 --threads 2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402


def post(port, agent, prompt):
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": 1, "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json", "X-Agent-Id": agent})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.load(r)
    return (time.perf_counter() - t) * 1e3, out["usage"]


def start(binary, model, cache, port, ctx, threads, log):
    proc = subprocess.Popen([binary, "serve", "-m", model, "--port", str(port), "--cache-dir", cache, "--slots", "1",
                             "-c", str(ctx), "-t", str(threads)], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc
        except Exception:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


def stop(proc):
    proc.terminate()
    proc.wait(timeout=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True)
    ap.add_argument("--model", default=lib.DEFAULT_MODEL)
    ap.add_argument("--agents", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=4096, help="approximate prompt tokens per agent")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--gap-ms", type=float, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="/tmp/returning_team")
    a = ap.parse_args()
    model = a.model
    text = open(lib.DEFAULT_TEXT).read()
    per = a.tokens * 4  # ~4 characters per token of this text
    prompts = [text[i * per:(i + 1) * per] for i in range(a.agents)]
    ctx = a.tokens + a.tokens // 4
    os.makedirs(a.out, exist_ok=True)
    results = {b: [[] for _ in range(a.agents)] for b in a.bin}
    port = 18300
    caches = {}
    for k, b in enumerate(a.bin):  # cold prefill and save, once per binary
        caches[b] = os.path.join(a.out, f"cache{k}")
        subprocess.run(["rm", "-rf", caches[b]])
        with open(os.path.join(a.out, f"server{k}.log"), "a") as log:
            p = start(b, model, caches[b], port, ctx, a.threads, log)
            for i, pr in enumerate(prompts):
                post(port, f"agent{i}", pr)
            stop(p)
    for rep in range(a.reps):
        for k, b in enumerate(a.bin):
            files = [os.path.join(d, f) for d, _, fs in os.walk(caches[b]) for f in fs]
            lib.drop_page_cache(files)
            with open(os.path.join(a.out, f"server{k}.log"), "a") as log:
                p = start(b, model, caches[b], port, ctx, a.threads, log)
                for i, pr in enumerate(prompts):
                    ttft, usage = post(port, f"agent{i}", pr)
                    ak = usage.get("agentkv", {})
                    results[b][i].append({"ttft_ms": ttft, "read_ms": ak.get("read_ms"),
                                          "cache_state": ak.get("cache_state")})
                    time.sleep(a.gap_ms / 1e3)
                stop(p)
    summary = {}
    for b in a.bin:
        rows = []
        for i in range(a.agents):
            t = [r["ttft_ms"] for r in results[b][i]]
            rd = [r["read_ms"] for r in results[b][i]]
            states = sorted({r["cache_state"] for r in results[b][i]})
            rows.append({"position": i + 1, "ttft_median": statistics.median(t), "ttft_min": min(t),
                         "ttft_max": max(t), "read_median": statistics.median(rd), "read_min": min(rd),
                         "read_max": max(rd), "cache_states": states})
            print(f"{b}: agent {i + 1}: ttft {statistics.median(t):.2f} [{min(t):.2f}-{max(t):.2f}] ms, "
                  f"read {statistics.median(rd):.2f} [{min(rd):.2f}-{max(rd):.2f}] ms, {states}")
        summary[b] = rows
    with open(os.path.join(a.out, "returning_team.json"), "w") as f:
        json.dump({"args": vars(a), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "summary": summary, "samples": results}, f, indent=1)


if __name__ == "__main__":
    main()
