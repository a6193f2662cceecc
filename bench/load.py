#!/usr/bin/env python3
"""Open-loop load (issue 12, RELIABILITY): many agents' conversations against `agentkv serve`, then checks.

Requests arrive as a Poisson process of --rate per second for --seconds, whatever the server's latency
(open loop). Each arrival goes to a random idle agent (an agent's turns are sequential: turn n+1 carries
turn n's reply); if all agents are busy, the arrival is counted as `skipped_all_busy` (the generator, not the
server, is then the bound). Half the requests stream (SSE), half do not. An agent whose context nears the
slot's size starts a new conversation under a new id (the old one stays cached).

Measured: HTTP status of every request (only 429 is an allowed error: docs/api.md), TTFT per cache state
(usage.agentkv.cache_state; server-side usage.agentkv.ttft_ms for every request, client-side time to the
first content chunk for streamed ones), the server process's RSS, threads and open fds sampled from
/proc/PID every second.

Checked afterwards: every agent's conversation is replayed serially (one request at a time, same messages,
same agent id) on a fresh server with its own empty cache, and every answer must equal the answer under load
(greedy). Exit status 0 iff errors == 0 and mismatches == 0 and fds/threads did not grow.

  python3 bench/load.py --seconds 600 --json bench/results/load_cpu.json
  python3 bench/load.py --quick        # 20 s of load + replay, ~45 s (scripts/test.sh)
"""
import argparse
import http.client
import json
import os
import random
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import oracle as oracle_lib  # noqa: E402
from lib import pct  # noqa: E402
from crash_loop import Server  # noqa: E402


def proc_sample(pid):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    out["rss"] = int(line.split()[1]) * 1024
                elif line.startswith("Threads:"):
                    out["threads"] = int(line.split()[1])
        out["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        pass
    return out


def request(port, agent_id, messages, max_tokens, stream, timeout=300, logprobs=False):
    """Returns dict(status, text, usage, client_ttft_ms, error, logprobs); logprobs (not streamed): the choice's
    logprobs.content with 2 alternatives per token (the near-tie oracle, bench/oracle.py)."""
    body = {"model": "agentkv", "messages": messages, "max_tokens": max_tokens, "temperature": 0, "seed": 3}
    if logprobs:
        body.update(logprobs=True, top_logprobs=2)
    h = {"X-Agent-Id": agent_id}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        r = lib.stream_request(port, "/v1/chat/completions", body, h, timeout=timeout)
        usage = next((c["usage"] for c in r["chunks"] if c.get("usage")), None)
        err = r.get("error") or (None if usage else "stream without usage")
        return {"status": r["status"], "text": r["text"], "usage": usage, "client_ttft_ms": r["client_ttft_ms"],
                "error": err if r["status"] == 200 and err else (None if r["status"] == 200 else r.get("error"))}
    st, j, wall = lib.http_json(port, "POST", "/v1/chat/completions", body, h, timeout=timeout)
    if st != 200:
        return {"status": st, "text": None, "usage": None, "client_ttft_ms": None, "error": json.dumps(j)[:300]}
    return {"status": st, "text": j["choices"][0]["message"]["content"], "usage": j["usage"], "client_ttft_ms": None,
            "error": None, "logprobs": (j["choices"][0].get("logprobs") or {}).get("content")}


class Agent:
    def __init__(self, idx):
        self.idx, self.gen, self.busy = idx, 0, False
        self.new_conversation()

    def new_conversation(self):
        self.gen += 1
        self.id = "L%dg%d" % (self.idx, self.gen)
        self.history = [{"role": "system", "content": "You are agent %d." % self.idx}]
        self.tokens = 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=lib.DEFAULT_BIN)
    ap.add_argument("--model", default=lib.DEFAULT_MODEL)
    ap.add_argument("--agents", type=int, default=64)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--cache-ram", default="32M")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rate", type=float, default=2.0, help="arrivals per second")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--seed", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="20 s of load (CI)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--oracle", choices=["exact", "near-tie"], default="exact",
                    help="exact: serial answers equal the answers under load byte for byte (CPU); near-tie: equal up "
                         "to the serial run's first near-tie, later differences counted (GPU; bench/oracle.py)")
    args = ap.parse_args()
    if args.quick:
        args.seconds = 20
    args.workdir = args.workdir or "/tmp/agentkv-load-%d" % os.getpid()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    args.model = os.path.abspath(args.model)
    flags = ["--cache-ram", args.cache_ram]
    srv = Server(args, "server", os.path.join(args.workdir, "cache"), flags, args.slots, args.threads)
    serial = Server(args, "serial", os.path.join(args.workdir, "serial-cache"), flags, args.slots, args.threads)
    try:
        return run(args, srv, serial)
    finally:
        srv.kill9()
        serial.kill9()


def run(args, srv, serial):
    rng = random.Random(args.seed)
    with open(lib.DEFAULT_TEXT, encoding="utf-8") as f:
        corpus = f.read()
    srv.start()
    pid = srv.p.pid
    time.sleep(0.5)
    baseline = proc_sample(pid)
    agents = [Agent(i) for i in range(args.agents)]
    log = []  # (agent id, messages, answer, stream)
    res = {"requests": 0, "status": {}, "errors": [], "skipped_all_busy": 0, "ttft_server_ms": {},
           "ttft_client_ms": {}, "new_conversations": 0}
    lock = threading.Lock()
    samples = []
    stop = threading.Event()

    def sampler():
        t0 = time.time()
        while not stop.is_set():
            s = proc_sample(pid)
            s["t"] = round(time.time() - t0, 1)
            samples.append(s)
            stop.wait(1.0)

    def one(a, msgs, stream):
        r = request(srv.port, a.id, msgs, args.max_tokens, stream)
        with lock:
            res["status"][str(r["status"])] = res["status"].get(str(r["status"]), 0) + 1
            if r["status"] == 200 and not r["error"]:
                u = r["usage"]
                ak = u.get("agentkv") or {}
                state = ak.get("cache_state", "?")
                res["ttft_server_ms"].setdefault(state, []).append(ak.get("ttft_ms"))
                if r["client_ttft_ms"] is not None:
                    res["ttft_client_ms"].setdefault(state, []).append(r["client_ttft_ms"])
                log.append((a.id, msgs, r["text"], stream))
                a.history = msgs + [{"role": "assistant", "content": r["text"]}]
                a.tokens = u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)
            elif r["status"] != 429:
                res["errors"].append("%s: %s %s" % (a.id, r["status"], (r["error"] or "")[:200]))
            a.busy = False

    threading.Thread(target=sampler, daemon=True).start()
    workers = []
    t0 = time.time()
    next_at = t0
    while True:
        next_at += rng.expovariate(args.rate)
        if next_at - t0 > args.seconds:
            break
        time.sleep(max(0.0, next_at - time.time()))
        with lock:
            idle = [a for a in agents if not a.busy]
            if not idle:
                res["skipped_all_busy"] += 1
                continue
            a = rng.choice(idle)
            a.busy = True
            if a.tokens > args.ctx - 250:
                a.new_conversation()
                res["new_conversations"] += 1
            pos = rng.randrange(0, len(corpus) - 600)
            msgs = a.history + [{"role": "user", "content": corpus[pos:pos + rng.randint(80, 400)]}]
            res["requests"] += 1
        w = threading.Thread(target=one, args=(a, msgs, rng.random() < 0.5))
        w.start()
        workers.append(w)
        workers = [w for w in workers if w.is_alive()]
    for w in workers:
        w.join()
    load_s = time.time() - t0
    time.sleep(2.0)  # write-behind saves land; idle connections close
    end = proc_sample(pid)
    stop.set()
    srv.stop()

    # Serial replay on a fresh server: each agent alone, turn after turn.
    serial.start()
    by_agent = {}
    for aid, msgs, text, stream in log:
        by_agent.setdefault(aid, []).append((msgs, text))
    mismatches, checked, after_near_tie = [], 0, 0
    t_replay = time.time()
    for aid in sorted(by_agent):
        for msgs, text in sorted(by_agent[aid], key=lambda x: len(x[0])):
            r = request(serial.port, aid, msgs, args.max_tokens, False, logprobs=args.oracle == "near-tie")
            checked += 1
            verdict = oracle_lib.MISMATCH if r["status"] != 200 else \
                oracle_lib.compare(text, r["text"], r["logprobs"] if args.oracle == "near-tie" else None)
            if verdict == oracle_lib.AFTER_NEAR_TIE:
                after_near_tie += 1
            elif verdict == oracle_lib.MISMATCH:
                where = oracle_lib.divergence(text, r["text"], r["logprobs"]) \
                    if args.oracle == "near-tie" and r["status"] == 200 else None
                mismatches.append("%s turn %d: load %r, serial %r (%s)%s" % (
                    aid, len(msgs) // 2, text, r["text"], r["status"],
                    "; first difference at the serial answer's token %d, its top-2 gap %s nats" %
                    (where["token"], where["gap_nats"]) if where else ""))
    serial.stop()

    rss = [s["rss"] for s in samples if "rss" in s]
    thr = [s["threads"] for s in samples if "threads" in s]
    fds = [s["fds"] for s in samples if "fds" in s]
    half = len(samples) // 2
    model_bytes = os.path.getsize(args.model)
    out = {
        "load_seconds": round(load_s, 1), "rate_per_s": args.rate, "requests": res["requests"],
        "status": res["status"], "errors": len(res["errors"]), "error_samples": res["errors"][:20],
        "skipped_all_busy": res["skipped_all_busy"], "new_conversations": res["new_conversations"],
        "answers_checked_serially": checked, "mismatches": len(mismatches), "mismatch_samples": mismatches[:20],
        "after_near_tie": after_near_tie, "oracle": args.oracle,
        "replay_seconds": round(time.time() - t_replay, 1),
        "ttft_server_ms": {s: {"n": len(v), "p50": pct(v, 50), "p95": pct(v, 95), "p99": pct(v, 99)}
                           for s, v in sorted(res["ttft_server_ms"].items())},
        "ttft_client_stream_ms": {s: {"n": len(v), "p50": pct(v, 50), "p95": pct(v, 95), "p99": pct(v, 99)}
                                  for s, v in sorted(res["ttft_client_ms"].items())},
        "process": {"baseline": baseline, "end": end, "rss_max": max(rss) if rss else None,
                    "threads_max": max(thr) if thr else None, "fds_max": max(fds) if fds else None,
                    "fds_first_half_max": max(fds[:half]) if half else None,
                    "fds_second_half_max": max(fds[half:]) if half else None,
                    "threads_first_half_max": max(thr[:half]) if half else None,
                    "threads_second_half_max": max(thr[half:]) if half else None,
                    "model_bytes": model_bytes, "cache_ram": args.cache_ram},
        "samples": samples,
    }
    p = out["process"]
    # fds/threads "do not grow": the second half of the run never exceeds the first half's peak by more
    # than the slack of connections in flight (one per arrival in the last second, at most 16).
    slack = 16
    out["fds_grew"] = bool(half) and p["fds_second_half_max"] > p["fds_first_half_max"] + slack
    out["threads_grew"] = bool(half) and p["threads_second_half_max"] > p["threads_first_half_max"] + slack
    out["passed"] = out["errors"] == 0 and out["mismatches"] == 0 and not out["fds_grew"] and not out["threads_grew"]
    out["meta"] = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "git": lib.git_info(),
                   "machine": lib.machine_info(), "argv": sys.argv,
                   "server": {"slots": args.slots, "ctx": args.ctx, "threads": args.threads,
                              "cache_ram": args.cache_ram, "agents": args.agents, "max_tokens": args.max_tokens}}
    print(json.dumps({k: v for k, v in out.items() if k not in ("samples", "meta")}, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if not out["passed"]:
        print("load FAILED; logs in %s" % args.workdir)
        return 1
    shutil.rmtree(args.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
