#!/usr/bin/env python3
"""Rolling restart behind nginx, with and without the remote tier (issue 14, docs/remote.md).

Three `agentkv serve` processes (separate cache dirs) behind nginx running the repository's
deploy/nginx/agentkv.conf (consistent hash of X-Agent-Id; only ports and paths replaced, plus an
`add_header X-Agentkv-Upstream` so the script sees which server answered). N agents (default 24) each hold
a conversation of T turns (default 5): a system text of their own (~300 tokens of held-out prose) and one
short question per turn, greedy, 8 tokens per answer, all agents of a turn sent concurrently.

Phases (one per turn): turn 1 with every server up (all cold); in each middle turn one server is stopped
for the whole turn (SIGTERM by default: a graceful stop that flushes its saves and Redis pushes; --signal
KILL for a crash), so its agents move to their next server on the hash ring; before the next turn it is
started again on the same port and cache dir (a rolling restart keeps the disk; --wipe gives it an empty
one) and nginx is reloaded (SIGHUP: forgets that the server failed, instead of waiting fail_timeout), so its
agents return to it. The last turn runs with every server up. Everything runs twice: `local` (no remote
tier) and `remote` (`--remote redis://...` on one redis-server on loopback).

Per phase: prefill tokens computed (usage.agentkv.tokens_prefilled summed, cross-checked against the
servers' agentkv_tokens_prefilled_total), prompt and cached tokens, the cache states reported, agents that
moved (answered by another server than in the previous turn), bytes read from Redis and wall time. Every
answer is checked against a cold oracle (a separate server, no remote, each conversation sent once with a
fresh agent id, so it is prefilled from scratch): they must be equal.

Exit status 0 iff every request succeeded, every answer equals the oracle's and, in the remote run with
--signal TERM, no agent was recomputed cold after turn 1 (the local run is expected to recompute them).

  /usr/bin/python3 bench/rolling_restart.py                    # 3 servers x 24 agents x 5 turns, both modes
  /usr/bin/python3 bench/rolling_restart.py --quick            # 3 x 6 agents x 5 turns, ~100-token texts
  /usr/bin/python3 bench/rolling_restart.py --redis-server /opt/redis/bin/redis-server --nginx /opt/nginx/sbin/nginx
Outputs bench/out/rolling/rolling_restart.{json,csv,md} (--out DIR to change).
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import redis_local  # noqa: E402

QUESTIONS = ["Who wrote this, and for whom?", "What is the main point?", "Name one person or place in it.",
             "What happens next?", "Say it again in one sentence.", "What is missing from it?",
             "Is any of it true?", "Which word matters most?"]
STATES = ("cold", "warm", "remote", "hot", "resident")


# ---------------------------------------------------------------- nginx

class Nginx:
    """deploy/nginx/agentkv.conf with this run's ports and paths; foreground master, our child."""

    def __init__(self, binary, workdir, ports):
        self.binary, self.workdir = binary, workdir
        self.port = lib.free_port()
        with open(os.path.join(lib.ROOT, "deploy", "nginx", "agentkv.conf")) as f:
            conf = f.read()
        it = iter(ports)
        conf, n = re.subn(r"server 127\.0\.0\.1:808[1-3]", lambda _: "server 127.0.0.1:%d" % next(it), conf)
        if n != len(ports):
            raise RuntimeError("deploy/nginx/agentkv.conf lists %d servers, the script runs %d" % (n, len(ports)))
        conf = conf.replace("listen 127.0.0.1:8080;", "listen 127.0.0.1:%d;" % self.port)
        conf = conf.replace("/tmp/agentkv-nginx", os.path.join(workdir, "nginx"))
        # Bench-only: which server answered (the hash decides; the script reports agents that moved).
        conf = conf.replace("proxy_pass http://agentkv;",
                            "proxy_pass http://agentkv;\n      add_header X-Agentkv-Upstream $upstream_addr always;")
        self.conf = os.path.join(workdir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write("daemon off;\n" + conf)
        self.p = None

    def start(self):
        chk = subprocess.run([self.binary, "-t", "-p", self.workdir, "-c", self.conf], capture_output=True, text=True)
        if chk.returncode != 0:
            raise RuntimeError("nginx -t failed: " + chk.stderr)
        self.log = open(os.path.join(self.workdir, "nginx.log"), "ab")
        self.p = subprocess.Popen([self.binary, "-p", self.workdir, "-c", self.conf], stdout=self.log,
                                  stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                if lib.http_json(self.port, "GET", "/health", timeout=2)[0] == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("nginx did not answer; see %s/nginx.log" % self.workdir)

    def reload(self):
        """New workers with fresh upstream state (no server marked failed); the old ones finish and exit."""
        self.p.send_signal(signal.SIGHUP)
        time.sleep(0.5)

    def stop(self):
        if self.p is not None and self.p.poll() is None:
            self.p.send_signal(signal.SIGQUIT)  # graceful
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
            self.log.close()


# ---------------------------------------------------------------- requests

def chat(port, agent_id, messages, max_tokens, timeout=600):
    """One non-streamed chat turn: (reply text, usage, the upstream nginx chose or None)."""
    body = {"model": "agentkv", "messages": messages, "max_tokens": max_tokens, "temperature": 0, "seed": 7}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", json.dumps(body),
              {"Content-Type": "application/json", "X-Agent-Id": agent_id})
    r = c.getresponse()
    data = r.read()
    ms = (time.perf_counter() - t0) * 1e3
    upstream = r.getheader("X-Agentkv-Upstream")
    c.close()
    if r.status != 200:
        raise RuntimeError("%s: HTTP %s %s" % (agent_id, r.status, data[:500]))
    j = json.loads(data)
    return j["choices"][0]["message"]["content"], j["usage"], upstream, ms


def conversation_key(messages):
    return json.dumps(messages, sort_keys=True)


class Agent:
    def __init__(self, idx, system_text):
        self.id = "roll-%02d" % idx
        self.messages = [{"role": "system", "content": system_text}]
        self.idx = idx

    def ask(self, turn):
        self.messages.append({"role": "user", "content": "(turn %d) %s" % (turn, QUESTIONS[(self.idx + turn) % len(QUESTIONS)])})
        return list(self.messages)


# ---------------------------------------------------------------- one run (local or remote)

def server_metrics(servers):
    out = {}
    for i, s in enumerate(servers):
        if s.p is not None and s.p.poll() is None:
            m = s.metrics()
            out[i] = {"prefilled": lib.prom_sum(m, "agentkv_tokens_prefilled_total"),
                      "remote_read_bytes": lib.prom_sum(m, "agentkv_remote_read_bytes_total"),
                      "remote_fetch_ms_sum": lib.prom_sum(m, "agentkv_remote_fetch_ms_sum"),
                      "remote_errors": lib.prom_sum(m, "agentkv_remote_errors_total")}
    return out


def stop_server(srv, sig):
    t0 = time.perf_counter()
    if sig == "KILL":
        srv.p.kill()  # our own child, by PID
        srv.p.wait()
        lib._LIVE.discard(srv)
    else:
        srv.stop()
    return (time.perf_counter() - t0) * 1e3


def run_mode(args, mode, corpus, work, ports):
    d = os.path.join(work, mode)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    redis = None
    extra = []
    if mode == "remote":
        redis = redis_local.RedisServer(args.redis_server, d).start()
        extra = ["--remote", redis.url]
    servers = [lib.Agentkv(args, d, name="s%d" % i, slots=args.slots, ctx=args.ctx, extra=extra + ["--cache-ram", "256M"],
                           port=ports[i]) for i in range(args.servers)]
    port_of = {"127.0.0.1:%d" % s.port: i for i, s in enumerate(servers)}
    nginx = Nginx(args.nginx, d, [s.port for s in servers])
    agents = [Agent(i, corpus.slice(997 * i, args.system_tokens)) for i in range(args.agents)]
    requests, phases = [], []
    last_home = {}
    try:
        for s in servers:
            s.start()
        nginx.start()
        pool = concurrent.futures.ThreadPoolExecutor(args.concurrency)
        down_prev = None
        for turn in range(1, args.turns + 1):
            down = (turn - 2) % args.servers if 2 <= turn < args.turns else None
            t_ops = time.perf_counter()
            restart_ms = stop_ms = None
            if down_prev is not None:
                if args.wipe:
                    servers[down_prev].wipe()
                restart_ms = servers[down_prev].start()
            if down is not None:
                stop_ms = stop_server(servers[down], args.signal)
            if down_prev is not None or down is not None:
                nginx.reload()
            ops_ms = (time.perf_counter() - t_ops) * 1e3
            before = server_metrics(servers)
            t0 = time.perf_counter()

            def one(a):
                msgs = a.ask(turn)
                try:
                    reply, usage, upstream, ms = chat(nginx.port, a.id, msgs, args.max_tokens)
                except (OSError, http.client.HTTPException, RuntimeError) as e:
                    return {"agent": a.id, "turn": turn, "error": str(e), "key": conversation_key(msgs)}
                ak = usage.get("agentkv") or {}
                return {"agent": a.id, "turn": turn, "reply": reply, "key": conversation_key(msgs),
                        # "A, B" when nginx found A down and retried B: B answered.
                        "upstreams": upstream, "server": port_of.get((upstream or "").split(",")[-1].strip()),
                        "state": ak.get("cache_state"),
                        "prompt_tokens": usage.get("prompt_tokens"),
                        "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
                        "tokens_prefilled": ak.get("tokens_prefilled"), "ttft_ms": ak.get("ttft_ms"),
                        "read_ms": ak.get("read_ms"), "client_ms": ms}
            results = list(pool.map(one, agents))
            wall_ms = (time.perf_counter() - t0) * 1e3
            after = server_metrics(servers)
            for a, r in zip(agents, results):
                a.messages.append({"role": "assistant", "content": r.get("reply", "")})
            ok = [r for r in results if "error" not in r]
            moved = sum(1 for r in ok if r["agent"] in last_home and last_home[r["agent"]] != r["server"])
            for r in ok:
                last_home[r["agent"]] = r["server"]
            mdelta = {k: sum(after[i][k] - before.get(i, {}).get(k, 0) for i in after)
                      for k in ("prefilled", "remote_read_bytes", "remote_fetch_ms_sum", "remote_errors")}
            ph = {"mode": mode, "turn": turn, "down": "s%d" % down if down is not None else "—",
                  "restarted": "s%d" % down_prev if down_prev is not None else "—",
                  "requests": len(results), "errors": len(results) - len(ok), "moved": moved,
                  "tokens_prefilled": sum(r["tokens_prefilled"] or 0 for r in ok),
                  "metrics_prefilled": int(mdelta["prefilled"]),
                  "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in ok),
                  "cached_tokens": sum(r["cached_tokens"] or 0 for r in ok),
                  "remote_read_bytes": int(mdelta["remote_read_bytes"]),
                  "remote_fetch_ms": mdelta["remote_fetch_ms_sum"], "remote_errors": int(mdelta["remote_errors"]),
                  "wall_ms": wall_ms, "restart_ops_ms": ops_ms, "stop_ms": stop_ms, "start_ms": restart_ms,
                  "ttft_ms_median": lib.med([r["ttft_ms"] for r in ok])}
            for st in STATES:
                ph[st] = sum(1 for r in ok if r["state"] == st)
            ph["states"] = ",".join("%s:%d" % (st, ph[st]) for st in STATES if ph[st])
            phases.append(ph)
            requests += results
            lib.log("%s turn %d (down %s): %s, prefilled %d, moved %d, %.1f s" % (
                mode, turn, ph["down"], ph["states"], ph["tokens_prefilled"], moved, wall_ms / 1e3))
            down_prev = down
        pool.shutdown()
    finally:
        nginx.stop()
        for s in servers:
            s.stop()
        if redis:
            redis.stop()
    return phases, requests


def oracle_check(args, requests, work):
    """Each distinct conversation once on a fresh server with a fresh agent id (cold prefill)."""
    d = os.path.join(work, "oracle")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    srv = lib.Agentkv(args, d, name="oracle", slots=1, ctx=args.ctx, extra=["--cache-ram", "64M"])
    want = {}
    t0 = time.perf_counter()
    try:
        srv.start()
        for r in requests:
            if r["key"] in want:
                continue
            oid = "oracle-%d" % len(want)
            reply, usage, _, _ = chat(srv.port, oid, json.loads(r["key"]), args.max_tokens)
            if (usage.get("agentkv") or {}).get("cache_state") != "cold":
                raise RuntimeError("oracle request was not cold: %s" % usage)
            want[r["key"]] = reply
            lib.http_json(srv.port, "DELETE", "/v1/agents/" + oid)
    finally:
        srv.stop()
    mismatches = []
    for r in requests:
        r["oracle_ok"] = ("reply" in r and r["reply"] == want[r["key"]])
        if not r["oracle_ok"]:
            mismatches.append({"agent": r["agent"], "turn": r["turn"], "state": r.get("state"), "got": r.get("reply"),
                               "error": r.get("error"), "oracle": want[r["key"]]})
    return mismatches, len(want), (time.perf_counter() - t0)


def joined(vals):
    """One value if every repetition agrees, else "a|b|..." (so a difference shows in the table)."""
    vs = []
    for v in vals:
        if v not in vs:
            vs.append(v)
    return vs[0] if len(vs) == 1 else "|".join(str(v) for v in vs)


def summarize(args, modes, phases):
    """Rows per (mode, turn) and per mode over all turns; the failures the exit status reports."""
    rows, failures = [], []
    exact = ("down", "restarted", "states", "moved", "tokens_prefilled", "prompt_tokens", "cached_tokens",
             "remote_read_bytes", "errors")
    for m in modes:
        for turn in range(1, args.turns + 1):
            ps = [p for p in phases if p["mode"] == m and p["turn"] == turn]
            w = lib.summarize([p["wall_ms"] for p in ps])
            row = {"mode": m, "turn": turn, "wall_ms": w["median"], "wall_min": w["min"], "wall_max": w["max"],
                   "ttft_ms_median": lib.med([p["ttft_ms_median"] for p in ps])}
            for k in exact:
                row[k] = joined([p[k] for p in ps])
            rows.append(row)
        ps = [p for p in phases if p["mode"] == m]
        reps = sorted({p["rep"] for p in ps})
        per_rep = {k: [sum(p[k] for p in ps if p["rep"] == r) for r in reps]
                   for k in ("tokens_prefilled", "prompt_tokens", "cached_tokens", "remote_read_bytes", "errors",
                             "moved", "wall_ms") + STATES}
        w = lib.summarize(per_rep["wall_ms"])
        row = {"mode": m, "turn": "all", "down": "", "restarted": "", "wall_ms": w["median"], "wall_min": w["min"],
               "wall_max": w["max"]}
        for k in per_rep:
            if k != "wall_ms":
                row[k] = joined(per_rep[k])
        row["states"] = joined([",".join("%s:%d" % (st, per_rep[st][i]) for st in STATES if per_rep[st][i])
                                for i in range(len(reps))])
        rows.append(row)
    if any(p["errors"] for p in phases):
        failures.append("%d requests failed" % sum(p["errors"] for p in phases))
    if any(p["metrics_prefilled"] != p["tokens_prefilled"] for p in phases):
        failures.append("usage and metrics disagree on prefilled tokens")
    if args.signal == "TERM":
        late_cold = sum(p["cold"] for p in phases if p["mode"] == "remote" and p["turn"] > 1)
        if late_cold:
            failures.append("remote run: %d agents recomputed cold after turn 1" % late_cold)
    return rows, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", type=int, default=3, help="must match deploy/nginx/agentkv.conf (3)")
    ap.add_argument("--agents", type=int, default=24)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--system-tokens", type=int, default=300, help="about this many tokens of text per agent")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=6, help="requests in flight through nginx")
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=1024, help="per slot")
    ap.add_argument("--threads", type=int, default=1, help="-t of each server")
    ap.add_argument("--modes", default="local,remote")
    ap.add_argument("--signal", default="TERM", choices=["TERM", "KILL"])
    ap.add_argument("--wipe", action="store_true", help="restart each server on an empty cache dir")
    ap.add_argument("--reps", type=int, default=1, help="repetitions of each mode (timings: median, min, max)")
    ap.add_argument("--quick", action="store_true", help="6 agents, ~100-token texts, 1 repetition (< 60 s)")
    ap.add_argument("--bin", default=lib.DEFAULT_BIN)
    ap.add_argument("--model", default=None)
    ap.add_argument("--text", default=lib.DEFAULT_TEXT)
    ap.add_argument("--redis-server", default=None, help="path (default: redis-server on PATH)")
    ap.add_argument("--nginx", default=None, help="path (default: nginx on PATH, /usr/sbin/nginx)")
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    args = ap.parse_args()
    if args.quick:
        args.agents, args.system_tokens, args.reps = 6, 100, 1
    modes = [m for m in args.modes.split(",") if m]
    if any(m not in ("local", "remote") for m in modes):
        ap.error("--modes: local and/or remote")
    args.redis_server = redis_local.find_binary(args.redis_server, "redis-server")
    args.nginx = redis_local.find_binary(args.nginx, "nginx") or (
        None if args.nginx else redis_local.find_binary("/usr/sbin/nginx", "nginx"))
    if "remote" in modes and not args.redis_server:
        ap.error("redis-server not found: give --redis-server PATH")
    if not args.nginx:
        ap.error("nginx not found: give --nginx PATH")
    if not os.access(args.bin, os.X_OK):
        ap.error("agentkv binary not found: " + args.bin)
    args.synth_type = "q4_0"
    lib.resolve_model(args)
    d = lib.out_dir(args, "rolling")
    work = os.path.join(d, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    meta = lib.make_meta(args, "rolling-restart")
    meta.update({"redis_server": args.redis_server, "nginx": args.nginx, "settings": {
        k: getattr(args, k) for k in ("servers", "agents", "turns", "system_tokens", "max_tokens", "concurrency",
                                      "slots", "ctx", "threads", "signal", "wipe", "reps")}})
    corpus = lib.Corpus(args.text)
    t_all = time.perf_counter()
    phases, requests = [], []
    # The same ports in every mode: nginx's hash ring is built from the servers' addresses, so each agent
    # has the same home (and the same fallback) in both runs.
    ports = [lib.free_port() for _ in range(args.servers)]
    try:
        for rep in range(1, args.reps + 1):
            for m in modes:  # interleaved, so machine noise falls on both modes alike
                p, r = run_mode(args, m, corpus, work, ports)
                for x in p + r:
                    x["rep"] = rep
                    x["mode"] = m
                phases += p
                requests += r
        mismatches, n_oracle, oracle_s = oracle_check(args, requests, work)
    finally:
        lib.stop_all()
    rows, failures = summarize(args, modes, phases)
    if mismatches:
        failures.append("%d answers differ from the cold oracle" % len(mismatches))
    cols = ["mode", "turn", "down", "restarted", "states", "moved", "tokens_prefilled", "prompt_tokens",
            "cached_tokens", "remote_read_bytes", "wall_ms", "wall_min", "wall_max", "ttft_ms_median", "errors"]
    md = lib.md_table(rows, cols)
    notes = ("\n%d servers x %d agents x %d turns, --signal %s%s, %d requests in flight, %d repetition(s) per mode "
             "(interleaved). Token counts and states: exact, equal in every repetition (else listed as a|b). wall_ms: "
             "median (min, max) over the repetitions of the turn's requests only (restart and nginx reload excluded). "
             "moved: agents answered by another server than in their previous turn (away from the stopped server or "
             "back to the restarted one). tokens_prefilled: usage.agentkv.tokens_prefilled summed, equal to the live "
             "servers' agentkv_tokens_prefilled_total deltas%s. Oracle: %d distinct conversations prefilled cold on a "
             "separate server (%.0f s), %d mismatches.\n%s\n" % (
                 args.servers, args.agents, args.turns, args.signal, ", --wipe" if args.wipe else "",
                 args.concurrency, args.reps,
                 "" if not any("metrics" in f for f in failures) else " (NOT: see failures)",
                 n_oracle, oracle_s, len(mismatches), "PASS" if not failures else "FAIL: " + "; ".join(failures)))
    meta["total_s"] = time.perf_counter() - t_all
    for r in requests:
        r.pop("key", None)  # the whole conversation: the replies and the oracle verdict stay
    lib.write_outputs(d, "rolling_restart", meta, {"summary": rows, "phases": phases, "mismatches": mismatches,
                                                   "oracle_conversations": n_oracle, "oracle_s": oracle_s,
                                                   "failures": failures, "requests": requests}, rows, md + notes, cols)
    print(md + notes)
    lib.log("total %.1f s" % meta["total_s"])
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
