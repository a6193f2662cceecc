#!/usr/bin/env python3
"""Agents returning one after another after a restart: the first returning agent's read is not the only
one that matters (bench/HISTORY.md, stop 13, the read reserve's refill).

Per binary (--bin, repeatable; runs alternate between them): one agentkv server (--slots 1, -c fitting one
agent), N agents (default 3) of ~--tokens prompt tokens each (distinct slices of the held-out text) are
prefilled cold and saved; then, per rep: SIGTERM, the cache's files dropped from the page cache, a new process
(startup excluded), and the agents return in order, each sending its same prompt again (an EXACT match,
max_tokens 1) --gap-ms after the previous answer. The sides take turns within each rep, their order
alternating from rep to rep, so agent i of rep r pairs two interleaved measurements. Reported per binary and per position in the order: the
median [min-max] over reps of the client-side TTFT and of the server's read_ms (usage.agentkv).

With --llama-server (issue 34), llama-server is measured the same way beside them: one process, -np --agents
(each agent its own slot, -c agents x the agent's context, -ctk/-ctv --kv), each agent prefilled on its slot and
saved to its slot file; per rep: a new process, the slot files dropped from the page cache, and the agents
return in the same order, each restoring its file into its slot (POST /slots/i?action=restore) and sending its
same prompt (TTFT = restore wall + completion TTFT; its restore_ms reported as read_ms). Its threads are bound
(--ls-bind, lib.ls_bind_env_args). --slots sets agentkv's slots (default 1, as the stop-13 runs).

  python3 bench/returning_team.py --bin /tmp/old-agentkv --bin build/agentkv --reps 5 --threads 2
  python3 bench/returning_team.py --bin build/agentkv --llama-server build-srv/bin/llama-server --agents 8 \
      --tokens 2048 --slots 8 --gap-ms 100
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


def start(binary, model, cache, port, ctx, threads, log, slots=1, kv="q4_0"):
    proc = subprocess.Popen([binary, "serve", "-m", model, "--port", str(port), "--cache-dir", cache, "--slots",
                             str(slots), "-c", str(ctx), "-t", str(threads), "--kv", kv], stdout=log,
                            stderr=subprocess.STDOUT)
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


class LsArgs:
    """The fields lib.LlamaServer reads from a driver's args."""

    def __init__(self, a):
        self.llama_server, self.model_path, self.threads, self.ls_bind = a.llama_server, a.model, a.threads, a.ls_bind


def llama_server_prepare(a, prompts, ctx, out):
    """llama-server's side of the protocol in the module doc, before the reps: each agent prefilled on its slot
    and saved to its slot file. Returns the (stopped) server and the files."""
    ls = lib.LlamaServer(LsArgs(a), out, ctx, kv=a.kv, name="returning-llama-server", slots=a.agents, bind=a.ls_bind)
    ls.start()
    for i, pr in enumerate(prompts):
        ls.complete(pr, 1, slot=i)
        ls.slot("save", "agent%d.bin" % i, slot=i)
    ls.stop()
    return ls, [os.path.join(ls.slot_dir, "agent%d.bin" % i) for i in range(a.agents)]


def llama_server_rep(a, ls, files, prompts):
    """One rep of llama-server's side: a new process, the slot files dropped from the page cache, every agent's
    file restored into its slot and its prompt sent; one sample per agent."""
    lib.drop_page_cache(files)
    ls.start()
    out = []
    for i, pr in enumerate(prompts):
        j, wall = ls.slot("restore", "agent%d.bin" % i, slot=i)
        r = ls.complete(pr, 1, slot=i)
        out.append({"ttft_ms": wall + (r["client_ttft_ms"] or 0), "read_ms": (j.get("timings") or {}).get(
            "restore_ms"), "cache_state": "slot restore (%s cached)" % r.get("tokens_cached"),
            "first_decode_ms": r.get("prompt_ms"), "startup_ms": ls.startup_ms})
        time.sleep(a.gap_ms / 1e3)
    ls.stop()
    return out


def agentkv_rep(a, k, b, cache, prompts, model, port, ctx):
    """One rep of binary b: SIGTERM'd before, its cache files dropped from the page cache, a new process, every
    agent returning in order; one sample per agent."""
    files = [os.path.join(d, f) for d, _, fs in os.walk(cache) for f in fs]
    lib.drop_page_cache(files)
    out = []
    with open(os.path.join(a.out, f"server{k}.log"), "a") as log:
        p = start(b, model, cache, port, ctx, a.threads, log, a.slots, a.kv)
        for i, pr in enumerate(prompts):
            ttft, usage = post(port, f"agent{i}", pr)
            ak = usage.get("agentkv", {})
            out.append({"ttft_ms": ttft, "read_ms": ak.get("read_ms"), "cache_state": ak.get("cache_state")})
            time.sleep(a.gap_ms / 1e3)
        stop(p)
    return out


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
    ap.add_argument("--slots", type=int, default=1, help="agentkv --slots")
    ap.add_argument("--kv", default="q4_0", help="agentkv --kv, llama-server -ctk/-ctv")
    ap.add_argument("--llama-server", help="also measure llama-server restoring the agents' slot files into -np N")
    ap.add_argument("--ls-bind", choices=lib.LS_BIND_CHOICES, default="omp")
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
            p = start(b, model, caches[b], port, ctx, a.threads, log, a.slots, a.kv)
            for i, pr in enumerate(prompts):
                post(port, f"agent{i}", pr)
            stop(p)
    ls = None
    if a.llama_server:
        ls, ls_files = llama_server_prepare(a, prompts, ctx, a.out)
        results["llama-server"] = [[] for _ in range(a.agents)]
    # The sides interleaved per rep, their order alternating (issue 34: interleaved pairs).
    for rep in range(a.reps):
        sides = [(k, b) for k, b in enumerate(a.bin)] + ([(None, "llama-server")] if ls else [])
        for k, b in (sides if rep % 2 == 0 else sides[::-1]):
            samples = (llama_server_rep(a, ls, ls_files, prompts) if b == "llama-server" else
                       agentkv_rep(a, k, b, caches[b], prompts, model, port, ctx))
            for i, x in enumerate(samples):
                results[b][i].append(dict(x, rep=rep))
    summary = {}
    for b in results:
        rows = []
        for i in range(a.agents):
            t = [r["ttft_ms"] for r in results[b][i]]
            rd = [r["read_ms"] for r in results[b][i] if r["read_ms"] is not None] or [0.0]
            states = sorted({r["cache_state"] for r in results[b][i]})
            rows.append({"position": i + 1, "ttft_median": statistics.median(t), "ttft_min": min(t),
                         "ttft_max": max(t), "read_median": statistics.median(rd), "read_min": min(rd),
                         "read_max": max(rd), "cache_states": states})
            print(f"{b}: agent {i + 1}: ttft {statistics.median(t):.2f} [{min(t):.2f}-{max(t):.2f}] ms, "
                  f"read {statistics.median(rd):.2f} [{min(rd):.2f}-{max(rd):.2f}] ms, {states}")
        summary[b] = rows
    with open(os.path.join(a.out, "returning_team.json"), "w") as f:
        meta_args = argparse.Namespace(bin=a.bin[0], model_path=model, model_label=os.path.basename(model),
                                       threads=a.threads, quick=False)
        meta = lib.make_meta(meta_args, "returning_team")
        meta["agentkv_bins"] = [lib.file_identity(b, full=True) for b in a.bin]
        if a.llama_server:
            meta["llama_server_bin"] = lib.file_identity(a.llama_server, full=True)
        json.dump({"meta": meta, "args": vars(a), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "kv": {"agentkv": "--kv %s at rest, default slot type (its log says)" % a.kv,
                          "llama-server": "%s at rest (slot files) and in slots, threads bound by %s" % (
                              a.kv, a.ls_bind)},
                   "summary": summary, "samples": results,
                   "interleaved": "per rep, order alternating"}, f, indent=1)


if __name__ == "__main__":
    main()
