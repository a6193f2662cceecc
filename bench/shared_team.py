#!/usr/bin/env python3
"""Shared-prefix team (issue 32, item 7): N agents that share one long system text, each with its own task, all
sending their turn at the same time; agentkv vs llama-server with a q4_0 KV and a RAM prompt cache of our RAM
budget vs llama-server out of the box, side by side in one run.

The team: N agents (--agents) whose prompts all start with the same --shared-tokens tokens of held-out text (the
same slice for every agent), then "Task of <agent>:" and the agent's own --own-tokens slice (distinct slices),
then its history so far (every earlier user line and reply) and a short new user line (~16 tokens of corpus text,
distinct per agent and round). R rounds (--rounds): in each, every agent sends its turn AT THE SAME TIME (one
thread each, released together by a barrier): a streamed `/v1/completions` request, --max-tokens tokens with
ignore_eos (every side generates the same number of tokens), temperature 0, the agent named by X-Agent-Id
(llama-server ignores the header and gets cache_prompt: true). Before round --restart-before the server process
is restarted (SIGTERM, start again; agentkv's cache files are dropped from the page cache, lib.drop_page_cache;
llama-server keeps nothing). In the last round --new-agents brand-new agents with the same shared text and their
own tasks join (rounds are numbered from 0 as in the issue's table).

The sides, one server at a time (which goes first alternates across --reps; each rep starts from empty state):
  agentkv   `agentkv serve` with its defaults: only -m, -c, -t, --slots, --port, --cache-dir (fresh per rep) and
            --cache-ram if given (+ --agentkv-extra)
  ls-q4_0   llama-server -np S -ctk q4_0 -ctv q4_0 --cache-ram <agentkv's RAM pool in MiB> (+ --ls-extra)
  ls-f16    llama-server's defaults (f16 KV, its 8 GiB RAM prompt cache) with -np S (+ --ls-extra)
  ls-save   ls-q4_0 whose client saves every slot to a file before the restart (POST /slots/i?action=save) and
            restores them after it (action=restore), as a client of llama-server can do by hand (issue 34); the
            save and restore times are in the restart's record (like the start-up, outside the round's time,
            while agentkv's reads are inside its round: add restore_ms to compare; the notes print both)
Every llama-server side holds all its slots' contexts in its KV pool (-c S x ctx) and runs with its threads
bound (--ls-bind, lib.ls_bind_env_args). The restart round is also reported apart: each side's sum of rounds
without it, in the notes.
-c is agentkv's per-slot context (fits the longest prompt + reply); llama-server gets -c S x that (its -c is the
KV of all its slots), plus --override-kv ARCH.context_length above the bundled model's trained 2048.

Measured per request (client side): TTFT (first streamed token), total time, prompt and reused tokens (agentkv:
usage.prompt_tokens and usage.prompt_tokens_details.cached_tokens, with usage.agentkv kept whole; llama-server:
timings.prompt_n + timings.cache_n and timings.cache_n of its last streamed chunk), generated tokens. Per round
and side: wall time (first request sent -> last response done), TTFT p50/p95, aggregate generated tokens/s,
prompt and reused tokens, and the new agents' TTFT p50 and reuse; the sum of round times per side; ratios
agentkv / each llama-server as paired geometric means over reps with a 95% interval (bench/paired.py).

  /usr/bin/python3 bench/shared_team.py --quick                       # smoke run, all three sides (< 90 s)
  nice -n 19 /usr/bin/python3 bench/shared_team.py --reps 2           # the issue's CPU size (defaults)
  scripts/device-bench.sh quick-build; scripts/device-bench.sh team llama-3.1-8b   # the H200 size
Outputs bench/out/shared_team/shared_team.{json,csv,md}; server logs in bench/out/shared_team/work/.
Exit status 1 if a request failed (outputs are written first; also when interrupted by SIGTERM).
"""
import argparse
import os
import re
import shutil
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import shared_team_report as report  # noqa: E402
from lib import log  # noqa: E402

SUB = "shared_team"
SIDES = ("agentkv", "ls-q4_0", "ls-f16", "ls-save")
# The CPU size (bundled model); --quick is the same shape at a smoke scale.
DEFAULTS = {"agents": 8, "slots": 4, "shared_tokens": 1000, "own_tokens": 300, "rounds": 4, "restart_before": 2,
            "new_agents": 2, "max_tokens": 64, "reps": 2}
QUICK = {"agents": 3, "slots": 2, "shared_tokens": 300, "own_tokens": 60, "rounds": 3, "restart_before": 1,
         "new_agents": 1, "max_tokens": 8, "reps": 1}
LS_DEFAULT_CACHE_RAM_MIB = 8192  # llama-server's --cache-ram default (common/common.h, the pinned source)
USER_TOKENS = 16  # a new user line: this many tokens of corpus text
SHARED_BASE = 1000  # corpus offsets (tokens) of the shared text, the tasks and the user lines
GAP = 200


# ---------------------------------------------------------------- the plan (same for every side)

def make_plan(corpus, args):
    """Every agent (the team, then the new agents): its name, first round and prompt head (shared text + own
    task), and its user line of every round it takes part in."""
    shared = corpus.slice(SHARED_BASE, args.shared_tokens)
    base = SHARED_BASE + args.shared_tokens + GAP
    n = args.agents + args.new_agents
    agents = []
    for i in range(n):
        new = i >= args.agents
        name = "new-%02d" % (i - args.agents) if new else "agent-%02d" % i
        own = corpus.slice(base + i * (args.own_tokens + GAP), args.own_tokens)
        agents.append({"name": name, "new": new, "first_round": args.rounds - 1 if new else 0,
                       "head": "%s\n\nTask of %s:\n%s" % (shared, name, own), "lines": {}})
    ubase = base + n * (args.own_tokens + GAP)
    for r in range(args.rounds):
        for i, a in enumerate(agents):
            if r >= a["first_round"]:
                text = corpus.slice(ubase + (r * n + i) * (USER_TOKENS + 8), USER_TOKENS)
                a["lines"][r] = "\n\nUser (round %d): %s\nAssistant:" % (r, text)
    return agents


def context_size(args, plan, cpt):
    """agentkv's -c (per slot): the longest prompt (estimated from characters) with every reply, + 15% + 256,
    in multiples of 256."""
    longest = max(len(a["head"]) + sum(len(x) for x in a["lines"].values()) for a in plan) / cpt
    longest += args.rounds * args.max_tokens
    return ((int(longest * 1.15) + 256 + 255) // 256) * 256


# ---------------------------------------------------------------- servers

def side_cmd(args, side, port, cache_dir):
    if side == "agentkv":
        cmd = [args.bin, "serve", "-m", args.model_path, "--port", str(port), "--cache-dir", cache_dir,
               "--slots", str(args.slots), "-c", str(args.ctx), "-t", str(args.threads)]
        if args.cache_ram:
            cmd += ["--cache-ram", args.cache_ram]
        return cmd + args.agentkv_extra.split()
    cmd = [args.llama_server, "-m", args.model_path, "-c", str(args.slots * args.ctx), "-np", str(args.slots),
           "--threads", str(args.threads), "--port", str(port)]
    if side in ("ls-q4_0", "ls-save"):
        cmd += ["-ctk", "q4_0", "-ctv", "q4_0", "--cache-ram", str(args.ram_mib)]
    if side == "ls-save":
        cmd += ["--slot-save-path", os.path.join(args.work_dir, "ls-save-slots")]
        os.makedirs(cmd[-1], exist_ok=True)
    cmd += lib.ls_bind_env_args(args.ls_bind)[1]
    return cmd + lib.ctx_override_args(args.model_path, args.ctx) + args.ls_extra.split()


def new_server(args, side, workdir, tag):
    """A lib.Proc for `side` logging to <side>-<tag>.log, with .cache_dir (agentkv's, emptied; None for
    llama-server)."""
    port = lib.free_port()
    cache_dir = os.path.join(workdir, "agentkv-cache") if side == "agentkv" else None
    if cache_dir:
        shutil.rmtree(cache_dir, ignore_errors=True)
    env = lib.ls_bind_env_args(args.ls_bind)[0] if side != "agentkv" else None
    proc = lib.Proc(side_cmd(args, side, port, cache_dir), os.path.join(workdir, "%s-%s.log" % (side, tag)), port,
                    env=env)
    proc.cache_dir = cache_dir
    return proc


def agentkv_ready(log_text):
    """What agentkv's start line says: KV type at rest and in slots, RAM pool MiB (None where it does not say)."""
    m = re.findall(r"kv (\w+) \((\d+) B/token\) at rest, (\w+) in slots", log_text)
    ram = re.findall(r"RAM pool (\d+) MiB", log_text)
    return {"at_rest": m[-1][0] if m else None, "in_slots": m[-1][2] if m else None,
            "at_rest_bytes_per_token": int(m[-1][1]) if m else None, "ram_mib": int(ram[-1]) if ram else None}


def kv_types(args, side, srv):
    """The KV type at rest and in the slots of a started side: agentkv's from its start line, llama-server's from
    its command line (its RAM prompt cache holds slot states, so its type at rest is its slots'), with the slot
    layout its log reports."""
    text = srv.log_text()
    if side == "agentkv":
        return dict(agentkv_ready(text), ram_budget="--cache-ram %s" % args.cache_ram if args.cache_ram
                    else "default (25% of memory)")
    slots = re.findall(r"n_slots = (\d+), n_ctx_slot = (\d+), kv_unified = '(\w+)'", text)
    q4 = side in ("ls-q4_0", "ls-save")
    slot_kv = "q4_0 (-ctk/-ctv)" if q4 else "f16 (its default -ctk/-ctv)"
    return {"at_rest": slot_kv, "in_slots": slot_kv, "bind": args.ls_bind,
            "ram_mib": args.ram_mib if q4 else LS_DEFAULT_CACHE_RAM_MIB,
            "ram_budget": "--cache-ram %d (agentkv's RAM pool)" % args.ram_mib if q4
            else "default --cache-ram %d" % LS_DEFAULT_CACHE_RAM_MIB,
            "n_slots": int(slots[-1][0]) if slots else None, "n_ctx_slot": int(slots[-1][1]) if slots else None,
            "kv_unified": slots[-1][2] if slots else None}


def slots_action(args, srv, action):
    """ls-save: POST /slots/i?action=save|restore for every slot (file slot<i>.bin). Returns (client wall ms of
    all of them, per-slot results: tokens saved / restored or the error: an unused slot has nothing to save)."""
    t0, out = time.perf_counter(), []
    for i in range(args.slots):
        st, j, wall = lib.http_json(srv.port, "POST", "/slots/%d?action=%s" % (i, action), {"filename": "slot%d.bin" % i})
        out.append({"slot": i, "status": st, "wall_ms": wall,
                    "tokens": (j or {}).get("n_saved" if action == "save" else "n_restored") if st == 200 else None,
                    "error": None if st == 200 else str(j)[:200]})
    return (time.perf_counter() - t0) * 1000.0, out


def restart(args, srv, side):
    """Real process restart; agentkv's cache files (and ls-save's slot files) leave the page cache in between;
    ls-save saves its slots before the stop and restores them after the start."""
    t0 = time.perf_counter()
    rec = {"side": side}
    if side == "ls-save":
        rec["save_ms"], rec["saves"] = slots_action(args, srv, "save")
    stop_ms = srv.stop()
    drop = {"label": "n/a (llama-server keeps nothing)"}
    if srv.cache_dir:
        drop = lib.drop_page_cache(lib.files_under(srv.cache_dir), args.drop)
    if side == "ls-save":
        drop = lib.drop_page_cache(lib.files_under(os.path.join(args.work_dir, "ls-save-slots")), args.drop)
    srv.start()
    if side == "ls-save":
        rec["restore_ms"], rec["restores"] = slots_action(args, srv, "restore")
    rec.update({"stop_ms": stop_ms, "startup_ms": srv.startup_ms, "page_cache": drop["label"],
                "resident_after": drop.get("resident_after"), "total_ms": (time.perf_counter() - t0) * 1000.0})
    return rec


# ---------------------------------------------------------------- one turn, one round

def turn(args, srv, side, agent, prompt):
    """One streamed completion; the request's raw numbers (an "error" key where it failed)."""
    body = {"model": "shared-team", "prompt": prompt, "max_tokens": args.max_tokens, "temperature": 0, "seed": 42,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    if side != "agentkv":
        body["cache_prompt"] = True
    r = lib.stream_request(srv.port, "/v1/completions", body, {"X-Agent-Id": agent})
    usage, timings = {}, {}
    for j in r["chunks"]:
        usage = j.get("usage") or usage
        timings = j.get("timings") or timings
    rec = {"agent": agent, "status": r["status"], "t0": r["t0"], "client_ttft_ms": r["client_ttft_ms"],
           "client_total_ms": r["total_ms"], "text": r["text"], "completion_tokens": usage.get("completion_tokens")}
    if side == "agentkv":
        ak = usage.get("agentkv") or {}
        rec.update(prompt_tokens=usage.get("prompt_tokens"),
                   reused_tokens=(usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
                   state=ak.get("cache_state"), match=ak.get("match"), agentkv=ak)
    else:
        n_cache, n_prompt = timings.get("cache_n"), timings.get("prompt_n")
        rec.update(prompt_tokens=(n_cache + n_prompt) if None not in (n_cache, n_prompt) else usage.get("prompt_tokens"),
                   reused_tokens=n_cache, ls_prompt_ms=timings.get("prompt_ms"))
        if rec["completion_tokens"] is None:
            rec["completion_tokens"] = timings.get("predicted_n")
    if r["status"] != 200 or r.get("error"):
        rec["error"] = "HTTP %s %s" % (r["status"], str(r.get("error"))[:500])
    elif rec["reused_tokens"] is None or rec["prompt_tokens"] is None:
        rec["error"] = "no prompt/reused token counts in the stream (usage %s, timings %s)" % (usage, timings)
    return rec


def send_round(args, srv, side, agents, histories, r):
    """Every agent of round r sends its turn at once; returns their records (in plan order). A successful
    turn's user line and reply join the agent's history."""
    barrier = threading.Barrier(len(agents))
    out = [None] * len(agents)

    def one(i, a):
        prompt = a["head"] + histories[a["name"]] + a["lines"][r]
        try:
            barrier.wait()
            out[i] = turn(args, srv, side, a["name"], prompt)
        except Exception as e:  # a dead server, a refused connection: recorded, the round goes on
            out[i] = {"agent": a["name"], "error": "%s: %s" % (type(e).__name__, e)}
        out[i].update(new=a["new"], prompt_chars=len(prompt))

    threads = [threading.Thread(target=one, args=(i, a), daemon=True) for i, a in enumerate(agents)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, rec in zip(agents, out):
        if not rec.get("error"):
            histories[a["name"]] += a["lines"][r] + rec["text"]
    return out


# agentkv's /metrics histograms read before and after each round: its forward passes (report.step_stats)
STEP_HISTOGRAMS = ("agentkv_decode_ms", "agentkv_loop_iteration_ms", "agentkv_decode_only_ms",
                   "agentkv_decode_only_context_tokens", "agentkv_batch_prefill_tokens")


def run_side(args, side, rep, plan, workdir, acc):
    """The whole scenario on a fresh server. Records into acc as it goes (so an interrupted run keeps every
    finished round): "requests", "restarts", "steps" (lists), "kv_types", "commands" (by side)."""
    srv = new_server(args, side, workdir, "rep%d" % rep)
    acc["commands"][side] = srv.cmd
    srv.start()
    acc["kv_types"][side] = kv_types(args, side, srv)
    histories = {a["name"]: "" for a in plan}
    try:
        for r in range(args.rounds):
            if r == args.restart_before and r > 0:
                if side == "agentkv" and rep == 0:
                    capacity(args, srv, acc, "ram")
                acc["restarts"].append(dict(restart(args, srv, side), rep=rep, before_round=r))
                log("%s rep %d restarted (start-up %.0f ms; page cache: %s)" % (
                    side, rep, acc["restarts"][-1]["startup_ms"], acc["restarts"][-1]["page_cache"]))
                if side == "agentkv" and rep == 0:
                    capacity(args, srv, acc, "disk")
            t0 = time.perf_counter()
            steps = lib.HistogramDeltas(srv if side == "agentkv" else None, STEP_HISTOGRAMS)
            rs = send_round(args, srv, side, [a for a in plan if a["first_round"] <= r], histories, r)
            for x in rs:
                x.update(side=side, rep=rep, round=r)
            acc["requests"] += rs
            if side == "agentkv":
                acc["steps"].append(dict(report.step_stats(steps.since_last(), rs), side=side, rep=rep, round=r))
            st = report.round_stats(rs)
            log("%s rep %d round %d: %.2f s, TTFT p50 %s ms, reused %s of %s prompt tokens%s (%.1f s)" % (
                side, rep, r, (st["wall_ms"] or 0) / 1000.0, lib.fmt_cell(st["ttft_p50_ms"]), st["reused_tokens"],
                st["prompt_tokens"], ", %d FAILED" % st["errors"] if st["errors"] else "", time.perf_counter() - t0))
    finally:
        srv.stop()
        if srv.cache_dir and not args.keep_work:
            shutil.rmtree(srv.cache_dir, ignore_errors=True)


def capacity(args, srv, acc, where):
    """agentkv's bytes for the team against one copy of the shared text plus every agent's own tokens (the
    issue's capacity target: <= 1.15x). where "ram": the RAM pool (`agentkv_tier_bytes{tier="hot"}` once it
    holds still: a turn's blocks enter the pool after its reply); "disk": every file under the cache dir (after
    a restart, which saves every turn). Ideal bytes = at-rest bytes/token x (S + sum over agents of
    max(0, tokens - S)), tokens from GET /v1/agents, S = the longest prefix an agent got from another agent's
    cache in this run (usage.agentkv.shared_tokens; the shared text as tokenized, which is longer than
    --shared-tokens by the calibration's error and the common "Task of " that follows it), else --shared-tokens."""
    bpt = (acc["kv_types"].get("agentkv") or {}).get("at_rest_bytes_per_token")
    if not bpt:
        return
    if where == "ram":
        last, held = None, 0
        for _ in range(40):  # up to 10 s for the last turns' exports
            cur = lib.parse_prom(lib.http_text(srv.port, "/metrics")[1]).get('agentkv_tier_bytes{tier="hot"}')
            held = held + 1 if cur == last else 0
            if held >= 2:
                break
            last = cur
            time.sleep(0.25)
        actual = last
    else:
        actual = sum(os.path.getsize(f) for f in lib.files_under(srv.cache_dir) if os.path.isfile(f))
    status, body, _ = lib.http_json(srv.port, "GET", "/v1/agents")
    tokens = [a.get("tokens") or 0 for a in (body or {}).get("data", [])] if status == 200 else []
    seeded = [(x.get("agentkv") or {}).get("shared_tokens") or 0 for x in acc["requests"] if x.get("side") == "agentkv"]
    S = max(seeded + [0]) or args.shared_tokens
    ideal = bpt * (S + sum(max(0, t - S) for t in tokens)) if tokens else None
    acc.setdefault("capacity", []).append({
        "where": where, "agents": len(tokens), "bytes": actual, "ideal_bytes": ideal, "bytes_per_token": bpt,
        "agent_tokens": sum(tokens), "shared_tokens": S,
        "ratio": (actual / ideal) if ideal else None})
    log("agentkv %s: %.1f MiB for %d agents, %.2fx of one shared copy + own tokens" % (
        where, actual / 2**20, len(tokens), actual / ideal if ideal else float("nan")))


def calibrate(args, corpus, workdir):
    """Chars per token of the corpus and agentkv's RAM pool (its start line), from one short-lived agentkv."""
    port, cache_dir = lib.free_port(), os.path.join(workdir, "calibrate-cache")
    srv = lib.Proc(side_cmd(args, "agentkv", port, cache_dir), os.path.join(workdir, "agentkv-calibrate.log"), port)
    srv.start()
    try:
        corpus.calibrate_http(srv.port)
        ready = agentkv_ready(srv.log_text())
    finally:
        srv.stop()
        shutil.rmtree(cache_dir, ignore_errors=True)
    if ready["ram_mib"] is None:
        raise RuntimeError("agentkv's start line names no RAM pool (see %s)" % srv.log_path)
    return corpus.cpt, ready


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    lib.add_side_by_side_args(ap, "held-out text for the shared text, tasks and lines")
    ap.add_argument("--agents", type=int, help="agents in the team (default 8; quick 3)")
    ap.add_argument("--slots", type=int, help="slots of every side: agentkv --slots, llama-server -np (4; quick 2)")
    ap.add_argument("--shared-tokens", type=int, help="tokens of the shared system text (1000; quick 300)")
    ap.add_argument("--own-tokens", type=int, help="tokens of each agent's own task (300; quick 60)")
    ap.add_argument("--rounds", type=int, help="rounds, numbered from 0 (4; quick 3)")
    ap.add_argument("--restart-before", type=int, help="restart the servers before this round, 0 = never (2; quick 1)")
    ap.add_argument("--new-agents", type=int, help="new agents joining in the last round (2; quick 1)")
    ap.add_argument("--max-tokens", type=int, help="generated tokens per turn, ignore_eos (64; quick 8)")
    ap.add_argument("--reps", type=int, help="repetitions, alternating which side goes first (2; quick 1)")
    ap.add_argument("--threads", type=int, default=2, help="threads of every server")
    ap.add_argument("--ctx", type=int, help="agentkv's -c per slot (default: fits the longest prompt + replies); "
                                            "llama-server gets -c slots x ctx")
    ap.add_argument("--cache-ram", help="agentkv's --cache-ram (BYTES: 512M, 4G); default: its own (25%% of memory)")
    ap.add_argument("--sides", default=",".join(SIDES), help="comma-separated subset of " + ",".join(SIDES))
    lib.add_extra_args(ap, "extra args of both llama-servers (one string)")
    ap.add_argument("--ls-bind", choices=lib.LS_BIND_CHOICES, default="omp", help="llama-server's thread binding")
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    ap.add_argument("--keep-work", action="store_true", help="keep agentkv's cache dir under the work dir")
    ap.add_argument("--quick", action="store_true", help="3 agents, 2 slots, 300 shared + 60 own tokens, 3 rounds, "
                                                         "restart before 1, 1 new agent, 8 tokens, 1 rep")
    args = ap.parse_args(argv)
    lib.fill_defaults(args, QUICK, DEFAULTS)
    if min(args.agents, args.slots, args.rounds, args.reps, args.max_tokens, args.shared_tokens) < 1 or \
            args.own_tokens < 0 or args.new_agents < 0 or not 0 <= args.restart_before < args.rounds:
        ap.error("need --agents, --slots, --rounds, --reps, --max-tokens, --shared-tokens >= 1, --own-tokens, "
                 "--new-agents >= 0 and 0 <= --restart-before < --rounds")
    args.sides = [s for s in args.sides.split(",") if s]
    bad = [s for s in args.sides if s not in SIDES]
    if bad or not args.sides or "agentkv" not in args.sides:
        ap.error("--sides: a subset of %s that includes agentkv (got %s)" % (",".join(SIDES), ",".join(args.sides)))
    if not os.path.exists(args.bin):
        ap.error("agentkv binary not found: %s" % args.bin)
    if any(s != "agentkv" for s in args.sides) and not os.path.exists(args.llama_server):
        ap.error("llama-server binary not found: %s (build it: cmake -S . -B build-srv -G Ninja "
                 "-DAGENTKV_LLAMA_SERVER=ON && ninja -C build-srv llama-server; or --sides agentkv)" % args.llama_server)
    lib.resolve_model(args)
    return args


def main(argv=None):
    args = parse_args(argv)
    t_start = time.perf_counter()
    d, workdir, meta = lib.start_driver(args, SUB, "shared-team")
    args.work_dir = workdir
    meta["llama_server_bin"] = (lib.file_identity(args.llama_server)
                                if any(s != "agentkv" for s in args.sides) else None)
    corpus = lib.Corpus(args.text)
    user_ctx, args.ctx = args.ctx, args.ctx or 2048  # 2048: the calibration server's -c
    acc = {"requests": [], "restarts": [], "kv_types": {}, "commands": {}, "steps": []}
    phases, status = [], "ok"
    try:
        t = time.perf_counter()
        cpt, ready = calibrate(args, corpus, workdir)
        args.ram_mib = ready["ram_mib"]
        plan = make_plan(corpus, args)
        args.ctx = user_ctx or context_size(args, plan, cpt)
        phases.append({"phase": "calibrate", "s": time.perf_counter() - t})
        log("shared-team: %d agents (+%d new) x %d rounds, %d slots, %d shared + %d own tokens, chars/token %.2f, "
            "-c %d, agentkv RAM pool %d MiB, sides %s, %d rep(s)" % (
                args.agents, args.new_agents, args.rounds, args.slots, args.shared_tokens, args.own_tokens, cpt,
                args.ctx, args.ram_mib, "/".join(args.sides), args.reps))
        for rep in range(args.reps):
            for side in (args.sides if rep % 2 == 0 else args.sides[::-1]):
                t = time.perf_counter()
                run_side(args, side, rep, plan, workdir, acc)
                phases.append({"phase": "%s rep %d" % (side, rep), "s": time.perf_counter() - t})
                log("%s rep %d done in %.1f s" % (side, rep, phases[-1]["s"]))
    except KeyboardInterrupt as e:
        status = "interrupted (%s): partial results" % (e or "SIGINT")
        log(status)
    finally:
        lib.stop_all()
    meta.update({"ctx": args.ctx, "chars_per_token": corpus.cpt, "wall_s": time.perf_counter() - t_start,
                 "status": status})
    reqs = acc["requests"]
    result = report.build(args, reqs, acc["restarts"], acc["kv_types"], acc["commands"], phases, acc["steps"])
    result["status"] = status
    result["capacity"] = acc.get("capacity", [])
    for c in result["capacity"]:
        result["notes"].append("capacity (%s, before the restart): %.1f MiB for %d agents = %.2fx of one copy of the "
                               "shared text (%d tokens) + every agent's own tokens (%.1f MiB at %d B/token; target <= 1.15x)" % (
                                   c["where"], c["bytes"] / 2**20, c["agents"], c["ratio"] or float("nan"),
                                   c["shared_tokens"], (c["ideal_bytes"] or 0) / 2**20, c["bytes_per_token"]))
    for x in reqs:  # the texts stay in the JSON, shortened
        if "text" in x:
            x["text"] = x["text"][:200]
    lib.write_outputs(d, SUB, meta, result, result["rows"], report.markdown(args, result))
    print(report.markdown(args, result))
    errors = sum(1 for x in reqs if x.get("error"))
    log("shared-team done in %.1f s%s" % (time.perf_counter() - t_start, ", %d requests FAILED" % errors
                                          if errors else ""))
    return 1 if errors or status != "ok" else 0


if __name__ == "__main__":
    sys.exit(main())
