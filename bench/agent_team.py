#!/usr/bin/env python3
"""Agent-team scenario: a team of agents, each with its own growing conversation, sharing one local model,
measured on agentkv and on llama.cpp's llama-server side by side (one run, same model, threads and context).

The team: N agents (default 6: coder, reviewer, planner, tester, writer, researcher), each with its own system
prompt plus its own slice of ~--context-tokens tokens of held-out Brown text as a reference document (distinct
slices, so agents never share a prefix by accident). R rounds (default 6): in each round every agent in turn
sends its whole conversation so far plus one new user message (~60-100 tokens of corpus text) to
/v1/chat/completions (non-streamed, temperature 0, max_tokens --max-tokens) and appends the assistant reply to
its history, so each round EXTENDs the agent's previous turn. After round --restart-after (default 3) the
server process is restarted (SIGTERM, start again) and agentkv's cache files are dropped from the page cache
(lib.drop_page_cache), so the next round measures agents returning after a restart.

The two servers run one at a time (the whole scenario on one, then on the other; which goes first alternates
across --reps), each from an empty state:
  agentkv       `agentkv serve` with its default options, only -m, -c, -t, --slots (--slots 2), --port and
                --cache-dir (a fresh dir per rep under the work dir); agents named by the X-Agent-Id header.
  llama-server  its out-of-the-box configuration: only -m, -c, --threads, --port (so f16 KV, its default -np
                auto = 4 slots with a unified KV pool, its default RAM prompt cache --cache-ram 8192 MiB, jinja
                on; a GGUF without a chat template gets its ChatML default, the same ChatML agentkv falls back
                to), plus --override-kv ARCH.context_length when -c exceeds the model's training context (it caps
                a slot there otherwise; lib.TRAINED_CTX) and --ls-extra. Its -c is agentkv's unless --ls-ctx: note
                that it sizes the KV pool its 4 slots share, and a pool the size of one conversation leaves no
                room to put a returning agent's prompt back from its RAM prompt cache (counted in the output).

Measured per turn, client side: the wall time from sending the request to the whole response, with the usage
each server reports (agentkv: usage.agentkv cache_state / match / tokens_prefilled / ttft_ms; both:
usage.prompt_tokens_details.cached_tokens; llama-server: timings.cache_n / prompt_n / prompt_ms). Reported:
per round the median turn time and the round's sum; per rep the sum of all turn times; across reps the median
[min-max] of that sum, per round the median of the per-round medians, and agentkv / llama-server ratios
(< 1: agentkv faster). Server start-up and shutdown are excluded. Replies must be non-empty (checked; texts
are not compared across servers: f16 vs q4_0-at-rest KV gives different text).

  /usr/bin/python3 bench/agent_team.py --quick                       # smoke run (seconds on the bundled model)
  nice -n 19 /usr/bin/python3 bench/agent_team.py --reps 5 --threads 2   # the full measurement
  /usr/bin/python3 bench/agent_team.py --only agentkv --quick        # one server only
Outputs bench/out/agent_team/agent_team.{json,csv,md} (server logs, one per server and rep, in
bench/out/agent_team/work/).
Exit status 1 if a request failed or a reply was empty (the outputs are written first when the run finished).
"""
import argparse
import os
import shutil
import sys
import time
from collections import Counter

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
from lib import log, med  # noqa: E402

SUB = "agent_team"
SERVERS = ("agentkv", "llama-server")
ROLES = [
    ("coder", "You are the coder of a small software team. You write short, correct code changes."),
    ("reviewer", "You are the code reviewer of a small software team. You point out bugs and risks plainly."),
    ("planner", "You are the planner of a small software team. You split the work into clear next steps."),
    ("tester", "You are the tester of a small software team. You write test cases that break things."),
    ("writer", "You are the technical writer of a small software team. You explain changes in plain words."),
    ("researcher", "You are the researcher of a small software team. You find facts and cite the document."),
]
QUICK = {"agents": 3, "rounds": 2, "restart_after": 1, "context_tokens": 300, "reps": 1}
DEFAULTS = {"agents": 6, "rounds": 6, "restart_after": 3, "context_tokens": 1500, "reps": 5}
MSG_TOKENS = (60, 100)  # a user message: this many tokens of corpus text, varied per turn
DOC_BASE = 2000  # corpus offsets (tokens) of the documents and of the messages
MSG_GAP = 500


# ---------------------------------------------------------------- the plan (same for both servers)

def role(i):
    """Agent i's (name, system prompt); beyond the six roles, numbered copies with distinct prompts."""
    name, prompt = ROLES[i % len(ROLES)]
    k = i // len(ROLES)
    if k:
        return "%s-%d" % (name, k + 1), "Team member %d. %s" % (i + 1, prompt)
    return name, prompt


def make_plan(corpus, n_agents, n_rounds, ctx_tokens):
    """System messages (role + own document slice) and every round's user message, per agent."""
    stride = ctx_tokens + MSG_GAP
    agents = []
    for i in range(n_agents):
        name, sysp = role(i)
        doc = corpus.slice(DOC_BASE + i * stride, ctx_tokens)
        agents.append({"name": name, "system": "%s\n\nReference document:\n%s" % (sysp, doc), "messages": []})
    base = DOC_BASE + n_agents * stride + MSG_GAP
    for r in range(n_rounds):
        for i, a in enumerate(agents):
            k = r * n_agents + i
            n = MSG_TOKENS[0] + (k * 37) % (MSG_TOKENS[1] - MSG_TOKENS[0] + 1)
            text = corpus.slice(base + k * (MSG_TOKENS[1] + 20), n)
            a["messages"].append("Round %d, note for the %s: %s" % (r + 1, a["name"], text))
    return agents


def round_phase(r, restart_after):
    """Label of round r (1-based)."""
    if r == 1:
        return "cold (first turn)"
    if restart_after and r == restart_after + 1:
        return "after restart"
    return "extend"


# ---------------------------------------------------------------- servers

def agentkv_cmd(args, port, cache_dir, ctx):
    return [args.bin, "serve", "-m", args.model_path, "--port", str(port), "--cache-dir", cache_dir,
            "--slots", str(args.slots), "-c", str(ctx), "-t", str(args.threads)] + args.agentkv_extra.split()


def llama_server_cmd(args, port, ctx):
    """ctx: the conversation context (agentkv's -c); llama-server's -c is --ls-ctx if given (its KV pool)."""
    cmd = [args.llama_server, "-m", args.model_path, "-c", str(args.ls_ctx or ctx), "--threads", str(args.threads),
           "--port", str(port)]
    return cmd + lib.ctx_override_args(args.model_path, ctx) + args.ls_extra.split()


def new_server(args, which, workdir, ctx, tag):
    """A lib.Proc for `which` logging to <which>-<tag>.log, with .cache_dir (agentkv's, emptied; None for
    llama-server)."""
    port = lib.free_port()
    log_path = os.path.join(workdir, "%s-%s.log" % (which, tag))
    if which == "agentkv":
        cache_dir = os.path.join(workdir, "agentkv-cache")
        shutil.rmtree(cache_dir, ignore_errors=True)
        proc = lib.Proc(agentkv_cmd(args, port, cache_dir, ctx), log_path, port)
        proc.cache_dir = cache_dir
    else:
        proc = lib.Proc(llama_server_cmd(args, port, ctx), log_path, port)
        proc.cache_dir = None
    return proc


def ls_cache_load_failures(srv):
    """llama-server: how often its RAM prompt cache held the agent's prompt but could not put it back (with a
    unified KV pool the size of one conversation, another slot's cells are still in use at that moment)."""
    return srv.log_text().count("failed to load prompt from cache") if srv.cache_dir is None else None


def restart(args, srv):
    """Real process restart; agentkv's cache files leave the page cache in between. Returns what happened."""
    stop_ms = srv.stop()
    drop = {"label": "n/a (no disk cache)"}
    if srv.cache_dir:
        drop = lib.drop_page_cache(lib.files_under(srv.cache_dir), args.drop)
    srv.start()
    return {"server": "agentkv" if srv.cache_dir else "llama-server", "stop_ms": stop_ms,
            "startup_ms": srv.startup_ms, "page_cache": drop["label"], "resident_after": drop.get("resident_after")}


def chat(srv, agent, messages, max_tokens):
    """One non-streamed chat turn: wall time (POST -> whole response), reply text and the usage fields."""
    body = {"model": "agent-team", "messages": messages, "max_tokens": max_tokens, "temperature": 0, "seed": 42}
    st, j, wall = lib.http_json(srv.port, "POST", "/v1/chat/completions", body, {"X-Agent-Id": agent})
    if st != 200 or not isinstance(j, dict) or not j.get("choices"):
        raise RuntimeError("%s: turn of %s failed: HTTP %s %s" % (srv.cmd[0], agent, st, str(j)[:500]))
    choice = j["choices"][0]
    usage = j.get("usage") or {}
    ak = usage.get("agentkv") or {}
    t = j.get("timings") or {}
    return {"wall_ms": wall, "reply": (choice.get("message") or {}).get("content") or "",
            "finish_reason": choice.get("finish_reason"), "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
            "state": ak.get("cache_state"), "match": ak.get("match"), "tokens_prefilled": ak.get("tokens_prefilled"),
            "server_ttft_ms": ak.get("ttft_ms"), "ls_cache_n": t.get("cache_n"), "ls_prompt_n": t.get("prompt_n"),
            "ls_prompt_ms": t.get("prompt_ms"), "ls_predicted_ms": t.get("predicted_ms")}


# ---------------------------------------------------------------- the scenario

def run_scenario(args, which, rep, plan, workdir, ctx):
    """The whole scenario on a fresh server: returns (turn records, restart info, command line, llama-server's
    prompt-cache load failures)."""
    srv = new_server(args, which, workdir, ctx, "rep%d" % rep)
    srv.start()
    histories = {a["name"]: [{"role": "system", "content": a["system"]}] for a in plan}
    turns, restart_info = [], None
    try:
        for r in range(1, args.rounds + 1):
            for a in plan:
                hist = histories[a["name"]]
                hist.append({"role": "user", "content": a["messages"][r - 1]})
                t = chat(srv, a["name"], hist, args.max_tokens)
                hist.append({"role": "assistant", "content": t["reply"]})
                t.update({"server": which, "rep": rep, "round": r, "phase": round_phase(r, args.restart_after),
                          "agent": a["name"], "reply_chars": len(t["reply"]), "empty": not t["reply"].strip()})
                turns.append(t)
            log("%s rep %d round %d: median turn %.0f ms, sum %.0f ms" % (
                which, rep, r, med([t["wall_ms"] for t in turns if t["round"] == r]),
                sum(t["wall_ms"] for t in turns if t["round"] == r)))
            if r == args.restart_after and r < args.rounds:
                restart_info = restart(args, srv)
                log("%s restarted (%.0f ms start-up; page cache: %s)" % (
                    which, restart_info["startup_ms"], restart_info["page_cache"]))
    finally:
        srv.stop()
        if srv.cache_dir and not args.keep_work:
            shutil.rmtree(srv.cache_dir, ignore_errors=True)
    return turns, restart_info, srv.cmd, ls_cache_load_failures(srv)


def calibrate(args, corpus, workdir):
    """Chars per token of the corpus, from one short-lived server (both tokenize with the model's vocab)."""
    which = "agentkv" if "agentkv" in args.servers else "llama-server"
    srv = new_server(args, which, workdir, 2048, "calibrate")
    srv.start()
    try:
        corpus.calibrate_http(srv.port)
    finally:
        srv.stop()
        if srv.cache_dir:
            shutil.rmtree(srv.cache_dir, ignore_errors=True)
    return corpus.cpt


def context_size(args, plan, cpt):
    """-c for both servers: the longest conversation (estimated from characters) + 15% + 256, rounded to 256."""
    longest = max(len(a["system"]) + sum(len(m) for m in a["messages"]) for a in plan) / cpt
    longest += args.rounds * (args.max_tokens + 24)  # replies + template tokens per turn
    return ((int(longest * 1.15) + 256 + 255) // 256) * 256


# ---------------------------------------------------------------- summaries

def rep_summary(turns, which, rep):
    """Per-round median and sum of one server's rep, and its total."""
    ts = [t for t in turns if t["server"] == which and t["rep"] == rep]
    rounds = sorted({t["round"] for t in ts})
    per_round = {r: {"median_ms": med([t["wall_ms"] for t in ts if t["round"] == r]),
                     "sum_ms": sum(t["wall_ms"] for t in ts if t["round"] == r)} for r in rounds}
    return {"server": which, "rep": rep, "total_ms": sum(t["wall_ms"] for t in ts), "rounds": per_round}


def counts(values):
    c = Counter(str(v) for v in values if v is not None)
    return ",".join("%s:%d" % kv for kv in sorted(c.items())) or None


def round_rows(args, turns, reps):
    """One row per round: medians over reps of each server's per-round median and sum, ratios, cache states."""
    rows = []
    for r in range(1, args.rounds + 1):
        row = {"round": r, "phase": round_phase(r, args.restart_after)}
        for which, k in (("agentkv", "ak"), ("llama-server", "ls")):
            ts = [t for t in turns if t["server"] == which and t["round"] == r]
            reps_of = [rs for rs in reps if rs["server"] == which]
            row["%s_median_ms" % k] = med([rs["rounds"][r]["median_ms"] for rs in reps_of if r in rs["rounds"]])
            row["%s_sum_ms" % k] = med([rs["rounds"][r]["sum_ms"] for rs in reps_of if r in rs["rounds"]])
            row["%s_cached_tokens" % k] = med([t["cached_tokens"] for t in ts])
        row["prompt_tokens"] = med([t["prompt_tokens"] for t in turns if t["round"] == r])
        ak = [t for t in turns if t["server"] == "agentkv" and t["round"] == r]
        row["ak_states"] = counts(t["state"] for t in ak)
        row["ak_prefilled"] = med([t["tokens_prefilled"] for t in ak])
        row["ratio_median"] = lib.ratio(row["ak_median_ms"], row["ls_median_ms"])
        row["ratio_sum"] = lib.ratio(row["ak_sum_ms"], row["ls_sum_ms"])
        rows.append(row)
    return rows


def total_rows(args, turns, reps):
    """One row per server: sum of all turn times per rep, median [min-max] over reps; empty replies."""
    rows = []
    for which in args.servers:
        s = lib.summarize([rs["total_ms"] for rs in reps if rs["server"] == which])
        ts = [t for t in turns if t["server"] == which]
        rows.append({"server": which, "sum_median_ms": s["median"], "sum_min_ms": s["min"], "sum_max_ms": s["max"],
                     "reps": s["n"], "turns_per_rep": args.agents * args.rounds,
                     "empty_replies": sum(1 for t in ts if t["empty"]),
                     "ls_cache_load_failures": (sum(rs["ls_cache_load_failures"] for rs in reps
                                                    if rs["server"] == which) if which == "llama-server" else None),
                     "prompt_tokens_max": max((t["prompt_tokens"] or 0) for t in ts) if ts else None})
    return rows


def markdown(args, totals, rounds, ratio, notes):
    tot = [dict(r, sum=("%s [%s-%s]" % (lib.fmt_cell(r["sum_median_ms"]), lib.fmt_cell(r["sum_min_ms"]),
                                        lib.fmt_cell(r["sum_max_ms"])))) for r in totals]
    t1 = lib.md_table(tot, ["server", "sum", "reps", "turns_per_rep", "empty_replies", "prompt_tokens_max",
                            "ls_cache_load_failures"],
                      ["server", "sum of turn times per rep, ms: median [min-max]", "reps", "turns/rep",
                       "empty replies", "max prompt tokens", "prompt-cache loads failed (all reps)"])
    cols = ["round", "phase", "ak_median_ms", "ls_median_ms", "ratio_median", "ak_sum_ms", "ls_sum_ms", "ratio_sum",
            "prompt_tokens", "ak_cached_tokens", "ls_cached_tokens", "ak_prefilled", "ak_states"]
    t2 = lib.md_table(rounds, cols, ["round", "phase", "agentkv median turn ms", "llama-server median turn ms",
                                     "ratio ak/ls", "agentkv round sum ms", "llama-server round sum ms",
                                     "ratio ak/ls (sum)", "prompt tokens", "agentkv cached", "llama-server cached",
                                     "agentkv prefilled", "agentkv cache states"])
    head = "ratio agentkv / llama-server of the median sums: **%s** (< 1: agentkv faster)\n\n" % (
        "%.3f" % ratio if ratio is not None else "—")
    return (head + "### total per rep\n\n" + t1 + "\n\n### per round (medians over reps)\n\n" + t2 + "\n\n" +
            "\n".join("- " + n for n in notes if n))


def build_notes(args, ctx, cmds, restarts):
    pcs = sorted({r["page_cache"] for r in restarts if r and r["server"] == "agentkv"})
    notes = ["%d agents x %d rounds, ~%d-token document per agent (distinct slices of %s), user messages ~%d-%d "
             "tokens, max_tokens %d, temperature 0, non-streamed /v1/chat/completions; one turn = client wall time "
             "POST -> whole response (loopback)" % (args.agents, args.rounds, args.context_tokens,
                                                    os.path.basename(args.text), MSG_TOKENS[0], MSG_TOKENS[1],
                                                    args.max_tokens),
             ("restart after round %d: SIGTERM, start again (start-up excluded); agentkv's cache files dropped "
              "from the page cache: %s" % (args.restart_after, ", ".join(pcs) or "—"))
             if 0 < args.restart_after < args.rounds else "no restart",
             "servers one at a time, alternating which goes first; each rep starts both from an empty state; "
             "-c %d agentkv (per slot, %d slots), -c %d llama-server (its KV pool, shared by its default 4 slots "
             "through the unified KV)" % (ctx, args.slots, args.ls_ctx or ctx),
             "ratio columns: agentkv / llama-server (< 1: agentkv faster); sums and medians are medians over %d "
             "rep(s)" % args.reps]
    if "llama-server" in args.servers:
        notes.append("prompt-cache loads failed (llama-server log 'failed to load prompt from cache'): its RAM "
                     "prompt cache held the returning agent's prompt but its KV pool had no room to put it back, so "
                     "it prefilled the whole conversation again; --ls-ctx (e.g. 4 x -c) gives the pool room")
    for which, cmd in sorted(cmds.items()):
        notes.append("%s command: `%s`" % (which, " ".join(os.path.basename(c) if i == 0 else c
                                                          for i, c in enumerate(cmd))))
    trained = lib.trained_ctx(args)
    if trained and ctx > trained:
        notes.append("model trained at %d tokens: contexts above that run RoPE beyond training (text is garbage, "
                     "timing is valid); llama-server got --override-kv to lift its slot cap" % trained)
    return notes


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    lib.add_side_by_side_args(ap, "held-out text for documents and messages")
    ap.add_argument("--agents", type=int, help="agents in the team (default 6; quick 3)")
    ap.add_argument("--rounds", type=int, help="rounds (default 6; quick 2)")
    ap.add_argument("--restart-after", type=int, help="restart the server after this round, 0 = never "
                                                      "(default 3; quick 1)")
    ap.add_argument("--context-tokens", type=int, help="document tokens per agent (default 1500; quick 300)")
    ap.add_argument("--max-tokens", type=int, default=16, help="max_tokens of each reply")
    ap.add_argument("--slots", type=int, default=2, help="agentkv --slots")
    ap.add_argument("--threads", type=int, default=2, help="threads of both servers")
    ap.add_argument("--ctx", type=int, help="-c of both servers (default: fits the longest conversation)")
    ap.add_argument("--ls-ctx", type=int, help="llama-server's -c if not --ctx's: its KV pool, which its default 4 "
                                                "slots share (unified KV)")
    ap.add_argument("--reps", type=int, help="repetitions, alternating which server goes first (default 5; quick 1)")
    ap.add_argument("--only", choices=SERVERS, help="run one server only")
    lib.add_extra_args(ap)
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    ap.add_argument("--json", default=None, help="also write the JSON document to this path")
    ap.add_argument("--keep-work", action="store_true", help="keep agentkv's cache dirs under the work dir")
    ap.add_argument("--quick", action="store_true", help="3 agents, 2 rounds, restart after 1, 300 tokens, 1 rep")
    args = ap.parse_args(argv)
    lib.fill_defaults(args, QUICK, DEFAULTS)
    if args.agents < 1 or args.rounds < 1 or args.reps < 1 or not 0 <= args.restart_after <= args.rounds:
        ap.error("need --agents, --rounds, --reps >= 1 and 0 <= --restart-after <= --rounds")
    args.servers = [args.only] if args.only else list(SERVERS)
    for which, path in (("agentkv", args.bin), ("llama-server", args.llama_server)):
        if which in args.servers and not os.path.exists(path):
            ap.error("%s binary not found: %s" % (which, path))
    lib.resolve_model(args)
    return args


def main(argv=None):
    args = parse_args(argv)
    t_start = time.perf_counter()
    d, workdir = lib.fresh_work_dir(args, SUB)
    meta = lib.make_meta(args, "agent-team")
    meta["llama_server_bin"] = lib.file_identity(args.llama_server) if "llama-server" in args.servers else None
    corpus = lib.Corpus(args.text)
    turns, reps, restarts, cmds = [], [], [], {}
    try:
        cpt = calibrate(args, corpus, workdir)
        plan = make_plan(corpus, args.agents, args.rounds, args.context_tokens)
        ctx = args.ctx or context_size(args, plan, cpt)
        log("agent-team: %d agents x %d rounds, %d reps, chars/token %.2f, -c %d, servers %s" % (
            args.agents, args.rounds, args.reps, cpt, ctx, "/".join(args.servers)))
        for rep in range(args.reps):
            order = args.servers if rep % 2 == 0 else args.servers[::-1]
            for which in order:
                ts, rs, cmds[which], fails = run_scenario(args, which, rep, plan, workdir, ctx)
                turns += ts
                restarts.append(rs)
                reps.append(dict(rep_summary(turns, which, rep), ls_cache_load_failures=fails))
                log("%s rep %d: sum of turn times %.0f ms" % (which, rep, reps[-1]["total_ms"]))
    finally:
        lib.stop_all()
    totals = total_rows(args, turns, reps)
    rounds = round_rows(args, turns, reps)
    by = {r["server"]: r["sum_median_ms"] for r in totals}
    ratio = lib.ratio(by.get("agentkv"), by.get("llama-server"))
    for t in turns:  # replies stay in the JSON (short), not compared across servers
        t["reply"] = t["reply"][:200]
    notes = build_notes(args, ctx, cmds, restarts)
    empty = sum(r["empty_replies"] for r in totals)
    if empty:
        notes.append("WARNING: %d empty replies (see turns in the JSON)" % empty)
    meta.update({"ctx": ctx, "chars_per_token": cpt, "wall_s": time.perf_counter() - t_start})
    result = {"config": {k: getattr(args, k) for k in ("agents", "rounds", "restart_after", "context_tokens",
                                                       "max_tokens", "slots", "threads", "reps", "servers", "ls_ctx",
                                                       "agentkv_extra", "ls_extra", "drop")},
              "commands": cmds, "ratio_sum_ak_over_ls": ratio, "totals": totals, "rounds": rounds,
              "reps": reps, "restarts": restarts, "notes": notes, "turns": turns}
    md = markdown(args, totals, rounds, ratio, notes)
    csv_rows = rounds + [{"round": "total", "phase": "all rounds", "ak_sum_ms": by.get("agentkv"),
                          "ls_sum_ms": by.get("llama-server"), "ratio_sum": ratio}]
    lib.write_outputs(d, SUB, meta, result, csv_rows, md)
    if args.json:
        with open(os.path.join(d, SUB + ".json")) as f, open(args.json, "w") as g:
            g.write(f.read())
    print(md)
    log("agent-team done in %.1f s" % (time.perf_counter() - t_start))
    if empty:
        log("FAILED: %d empty replies" % empty)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
