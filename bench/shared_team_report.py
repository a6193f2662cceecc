"""Summaries of bench/shared_team.py's raw request records: per round and side, per rep, the paired ratios
agentkv / llama-server, and the Markdown report. Pure functions of the records (no servers, no I/O)."""
import os
import socket
from collections import Counter

import lib
import paired


def phase(args, r):
    """Label of round r (from 0), as in the issue's table."""
    parts = []
    if r == 0:
        parts.append("all cold")
    if args.restart_before and r == args.restart_before:
        parts.append("after a restart")
    if args.new_agents and r == args.rounds - 1:
        parts.append("+ %d new agents" % args.new_agents)
    return ", ".join(parts) or "all hot"


def round_stats(rs):
    """One side's round (its request records): wall time from the first request sent to the last response done,
    TTFT p50/p95, aggregate generated tokens/s, prompt and reused tokens, the new agents' TTFT p50 and reuse.
    Failed requests count in "errors" only."""
    ok = [x for x in rs if not x.get("error")]
    wall = None
    if ok:
        wall = (max(x["t0"] + x["client_total_ms"] / 1000.0 for x in ok) - min(x["t0"] for x in ok)) * 1000.0
    gen = sum(x["completion_tokens"] or 0 for x in ok)
    new = [x for x in ok if x["new"]]
    prompt, reused = sum(x["prompt_tokens"] for x in ok), sum(x["reused_tokens"] for x in ok)
    states = Counter("%s/%s" % (x["state"], x["match"]) for x in ok if "state" in x)
    return {"agents": len(rs), "errors": len(rs) - len(ok), "wall_ms": wall,
            "ttft_p50_ms": lib.pct([x["client_ttft_ms"] for x in ok], 50),
            "ttft_p95_ms": lib.pct([x["client_ttft_ms"] for x in ok], 95),
            "gen_tokens": gen, "gen_tps": gen / (wall / 1000.0) if wall else None,
            "prompt_tokens": prompt, "reused_tokens": reused, "reused_frac": lib.ratio(reused, prompt),
            "new_agents": len(new), "new_ttft_p50_ms": lib.pct([x["client_ttft_ms"] for x in new], 50),
            "new_prompt_tokens": sum(x["prompt_tokens"] for x in new) if new else None,
            "new_reused_tokens": sum(x["reused_tokens"] for x in new) if new else None,
            # agentkv only (usage.agentkv.wait_ms): how much of the new agents' TTFT was waiting to be admitted
            # (a slot, a read), so that queue position and reuse are told apart.
            "new_wait_p50_ms": lib.pct([x["agentkv"]["wait_ms"] for x in new
                                        if isinstance(x.get("agentkv"), dict) and "wait_ms" in x["agentkv"]], 50),
            "states": ",".join("%s:%d" % kv for kv in sorted(states.items())) or None}


def per_rep_rounds(args, reqs):
    """round_stats of every (side, rep, round) that has records."""
    keys = sorted({(x["side"], x["rep"], x["round"]) for x in reqs})
    return [dict(round_stats([x for x in reqs if (x["side"], x["rep"], x["round"]) == k]),
                 side=k[0], rep=k[1], round=k[2], phase=phase(args, k[2])) for k in keys]


MEDIAN_KEYS = ("wall_ms", "ttft_p50_ms", "ttft_p95_ms", "gen_tps", "prompt_tokens", "reused_tokens", "reused_frac",
               "new_ttft_p50_ms", "new_prompt_tokens", "new_reused_tokens", "new_wait_p50_ms")


def median_rows(args, reps):
    """One row per (round, side): the median over reps of each round statistic."""
    rows = []
    for r in range(args.rounds):
        for side in args.sides:
            of = [x for x in reps if x["side"] == side and x["round"] == r]
            if of:
                row = {"round": r, "phase": phase(args, r), "side": side, "reps": len(of),
                       "errors": sum(x["errors"] for x in of), "states": of[-1]["states"]}
                for k in MEDIAN_KEYS:
                    v = lib.med([x[k] for x in of])
                    row[k] = int(v) if isinstance(v, float) and v.is_integer() and k.endswith("tokens") else v
                rows.append(row)
    return rows


def rep_sums(args, reps):
    """{(side, rep): sum of that rep's round wall times}, for reps with a wall time in every one of the rounds
    (an interrupted rep has none)."""
    walls = {}
    for x in reps:
        walls.setdefault((x["side"], x["rep"]), []).append(x["wall_ms"])
    return {k: sum(w) for k, w in walls.items() if len(w) == args.rounds and None not in w}


def ak_over(pairs):
    """pairs [(machine, agentkv ms, llama-server ms)]: paired geometric mean of agentkv / llama-server with its
    95% cluster-bootstrap interval (paired.py computes baseline / ours; inverted here, < 1: agentkv faster)."""
    r = paired.paired_geomean(pairs)
    if not r["n"]:
        return None
    return {"ratio": 1.0 / r["geomean"], "lo": 1.0 / r["hi"], "hi": 1.0 / r["lo"], "n": r["n"],
            "machines": r["machines"], "agentkv_faster": r["won"]}


def ratios(args, reps, sums):
    """agentkv / each llama-server side: of the sum of round times and of every round, paired by rep."""
    host = socket.gethostname()
    out = []
    for side in [s for s in args.sides if s != "agentkv"]:
        both = [rep for rep in range(args.reps) if ("agentkv", rep) in sums and (side, rep) in sums]
        r = ak_over([(host, sums[("agentkv", rep)], sums[(side, rep)]) for rep in both])
        if r:
            out.append(dict(r, what="sum of rounds", vs=side))
        for rd in range(args.rounds):
            wall = {(x["side"], x["rep"]): x["wall_ms"] for x in reps if x["round"] == rd and x["wall_ms"]}
            r = ak_over([(host, wall[("agentkv", rep)], wall[(side, rep)]) for rep in range(args.reps)
                         if ("agentkv", rep) in wall and (side, rep) in wall])
            if r:
                out.append(dict(r, what="round %d" % rd, vs=side))
    return out


def totals(args, sums):
    rows = []
    for side in args.sides:
        s = lib.summarize([v for (sd, _), v in sums.items() if sd == side])
        rows.append({"side": side, "sum_median_ms": s["median"], "sum_min_ms": s["min"], "sum_max_ms": s["max"],
                     "reps": s["n"]})
    return rows


def step_stats(delta, rs):
    """agentkv's forward passes in one round, from lib.HistogramDeltas over shared_team.STEP_HISTOGRAMS (`delta`)
    and the round's records `rs`: passes and their mean time in llama_decode and per loop iteration; the passes
    that only decoded (no prompt tokens), their mean time and the cells their rows attended to (the step time at
    that load); prompt tokens fed per pass; and the time the loop spent putting agents' caches into slots
    (usage.agentkv.restore_ms summed: RAM -> slot copies, which no pass overlaps)."""
    mean = lambda name: lib.mean_of(delta, name)  # noqa: E731
    restore = [((x.get("agentkv") or {}).get("restore_ms") or 0.0) for x in rs]
    return {"passes": int(delta["agentkv_decode_ms"][0]) if delta else None,
            "decode_ms_mean": mean("agentkv_decode_ms"), "iteration_ms_mean": mean("agentkv_loop_iteration_ms"),
            "decode_only_passes": int(delta["agentkv_decode_only_ms"][0]) if delta else None,
            "decode_only_ms_mean": mean("agentkv_decode_only_ms"),
            "decode_only_cells_mean": mean("agentkv_decode_only_context_tokens"),
            "prefill_tokens_per_pass": mean("agentkv_batch_prefill_tokens"),
            "restore_ms_sum": sum(restore)}


def new_agents_pooled(args, reqs):
    """Per side: the new agents' TTFT p50 over every rep's new agents together (nearest rank, lib.pct), and how
    many. A rep's own p50 of a few new agents swings with how many of them arrived ahead of the others (the wave
    of slots they land in), so the pooled p50 is the one to compare across runs."""
    out = []
    for side in args.sides:
        ttfts = [x["client_ttft_ms"] for x in reqs
                 if x["side"] == side and x["new"] and not x.get("error") and x.get("client_ttft_ms") is not None]
        if ttfts:
            out.append({"side": side, "n": len(ttfts), "reps": len({x["rep"] for x in reqs
                                                                     if x["side"] == side and x["new"]}),
                        "ttft_p50_ms": lib.pct(ttfts, 50)})
    return out


def build(args, reqs, restarts, kvs, cmds, phases, steps=()):
    """The result document (merged with lib.make_meta's meta into the JSON): every summary and every raw record;
    `steps`: step_stats rows (agentkv, per rep and round)."""
    reps = per_rep_rounds(args, reqs)
    sums = rep_sums(args, reps)
    config = {k: getattr(args, k) for k in ("agents", "slots", "shared_tokens", "own_tokens", "rounds",
                                            "restart_before", "new_agents", "max_tokens", "reps", "threads", "ctx",
                                            "cache_ram", "sides", "agentkv_extra", "ls_extra", "drop", "text")}
    config["ram_mib"] = getattr(args, "ram_mib", None)
    result = {"config": config, "commands": cmds, "kv_types": kvs, "rows": median_rows(args, reps),
              "totals": totals(args, sums), "ratios": ratios(args, reps, sums),
              "rep_sums": [{"side": s, "rep": r, "sum_ms": v} for (s, r), v in sorted(sums.items())],
              "new_agents_pooled": new_agents_pooled(args, reqs),
              "per_rep_rounds": reps, "restarts": restarts, "phases": phases, "steps": list(steps),
              "requests": reqs}
    result["notes"] = notes(args, result)
    return result


# ---------------------------------------------------------------- Markdown

def secs(ms):
    return "—" if ms is None else "%.2f s" % (ms / 1000.0) if ms < 10000 else "%.1f s" % (ms / 1000.0)


def ktok(n):
    return "—" if n is None else "%.1fK" % (n / 1000.0) if n >= 1000 else "%d" % n


def fmt_ratio(r):
    if r is None:
        return "—"
    if r["n"] < 2:
        return "%.2fx (1 rep: no interval)" % r["ratio"]
    return "%.2fx [%.2f, %.2f] (n=%d, %d machine(s); agentkv faster in %d)" % (
        r["ratio"], r["lo"], r["hi"], r["n"], r["machines"], r["agentkv_faster"])


def issue_table(args, result):
    """The issue's layout: one row per round, one column per side (medians over reps)."""
    by = {(x["round"], x["side"]): x for x in result["rows"]}
    head = "| round | " + " | ".join(args.sides) + " |\n|---|" + "---|" * len(args.sides)
    lines = [head]
    for r in range(args.rounds):
        cells = []
        for side in args.sides:
            x = by.get((r, side))
            cells.append("—" if not x else "%s, TTFT p50 %s, %s of %s reused" % (
                secs(x["wall_ms"]), secs(x["ttft_p50_ms"]), ktok(x["reused_tokens"]), ktok(x["prompt_tokens"])))
        lines.append("| %d: %s | %s |" % (r, phase(args, r), " | ".join(cells)))
        if args.new_agents and r == args.rounds - 1:
            cells = ["—" if not by.get((r, s)) else "TTFT p50 %s%s, %s of %s reused" % (
                secs(by[(r, s)]["new_ttft_p50_ms"]),
                " (%s of it waiting to be admitted)" % secs(by[(r, s)]["new_wait_p50_ms"])
                if by[(r, s)].get("new_wait_p50_ms") is not None else "",
                ktok(by[(r, s)]["new_reused_tokens"]), ktok(by[(r, s)]["new_prompt_tokens"])) for s in args.sides]
            lines.append("| %d: the new agents | %s |" % (r, " | ".join(cells)))
            pooled = {x["side"]: x for x in result.get("new_agents_pooled", [])}
            if args.reps > 1 and pooled:
                cells = ["—" if s not in pooled else "TTFT p50 %s (%d new agents of %d reps)" % (
                    secs(pooled[s]["ttft_p50_ms"]), pooled[s]["n"], pooled[s]["reps"]) for s in args.sides]
                lines.append("| %d: the new agents, every rep pooled | %s |" % (r, " | ".join(cells)))
    tot = {t["side"]: t for t in result["totals"]}
    sums = {x["vs"]: x for x in result["ratios"] if x["what"] == "sum of rounds"}
    cells = ["%s%s" % (secs(tot[s]["sum_median_ms"]), " (agentkv %.2fx)" % sums[s]["ratio"] if s in sums else "")
             for s in args.sides]
    lines.append("| sum | %s |" % " | ".join(cells))
    return "\n".join(lines)


def markdown(args, result):
    heads = ["- agentkv / %s, %s: **%s**" % (x["vs"], x["what"], fmt_ratio(x)) for x in result["ratios"]
             if x["what"] in ("sum of rounds", "round 0")]
    cols = ["round", "phase", "side", "wall_ms", "ttft_p50_ms", "ttft_p95_ms", "gen_tps", "prompt_tokens",
            "reused_tokens", "new_ttft_p50_ms", "new_prompt_tokens", "new_reused_tokens", "errors", "states"]
    detail = lib.md_table(result["rows"], cols, ["round", "phase", "side", "wall ms", "TTFT p50 ms", "TTFT p95 ms",
                                                 "generated tok/s", "prompt tokens", "reused tokens",
                                                 "new agents' TTFT p50 ms", "new agents' prompt tokens",
                                                 "new agents' reused", "failed requests", "agentkv state/match"])
    ratio_rows = lib.md_table(result["ratios"], ["vs", "what", "ratio", "lo", "hi", "n", "agentkv_faster"],
                              ["llama-server side", "what", "agentkv / it", "95% lo", "95% hi", "reps",
                               "reps agentkv faster"], {"ratio": "%.3f", "lo": "%.3f", "hi": "%.3f"})
    steps = lib.md_table(result.get("steps", []), ["rep", "round", "passes", "decode_ms_mean", "iteration_ms_mean",
                                                   "decode_only_passes", "decode_only_ms_mean",
                                                   "decode_only_cells_mean", "prefill_tokens_per_pass",
                                                   "restore_ms_sum"],
                         ["rep", "round", "forward passes", "ms in llama_decode / pass", "ms / loop iteration",
                          "decode-only passes", "ms / decode-only pass", "cells attended / decode-only pass",
                          "prompt tokens / pass", "restores into slots, ms (sum)"],
                         {"decode_ms_mean": "%.1f", "iteration_ms_mean": "%.1f", "decode_only_ms_mean": "%.1f",
                          "decode_only_cells_mean": "%.0f", "prefill_tokens_per_pass": "%.0f",
                          "restore_ms_sum": "%.0f"}) if result.get("steps") else "—"
    return ("status: %s\n\n%s\n\n### per round (medians over reps)\n\n%s\n\n### detail\n\n%s\n\n"
            "### ratios agentkv / llama-server (paired geometric means over reps; < 1: agentkv faster)\n\n%s\n\n"
            "### agentkv's forward passes per round (its /metrics before and after the round)\n\n%s\n\n"
            "On a GPU `llama_decode` returns once the pass is queued and the loop waits for it when it samples: "
            "there the loop iteration, not the time in llama_decode, is a pass's time.\n\n%s" % (
                result.get("status", "ok"), "\n".join(heads) or "- no ratios (one side only, or no complete rep)",
                issue_table(args, result), detail, ratio_rows, steps, "\n".join("- " + n for n in result["notes"])))


def notes(args, result):
    out = ["%d agents (+%d new in round %d) x %d rounds on %d slots: ~%d shared tokens (the same slice of %s for "
           "every agent) + ~%d own tokens (distinct slices) + history + a ~16-token user line; every agent of a "
           "round sends at once (streamed /v1/completions, %d tokens with ignore_eos, temperature 0); a round's "
           "time = first request sent -> last response done; TTFT = client time to the first streamed token" % (
               args.agents, args.new_agents, args.rounds - 1, args.rounds, args.slots, args.shared_tokens,
               os.path.basename(args.text), args.own_tokens, args.max_tokens)]
    if args.restart_before:
        pcs = sorted({r["page_cache"] for r in result["restarts"] if r["side"] == "agentkv"})
        out.append("restart before round %d: SIGTERM, start again (start-up excluded from the round); agentkv's "
                   "cache files: %s" % (args.restart_before, ", ".join(pcs) or "—"))
    if args.restart_before:
        by = {}
        for x in result["rows"]:
            by.setdefault(x["side"], {})[x["round"]] = x["wall_ms"]
        for side in args.sides:
            rs = by.get(side, {})
            if args.restart_before in rs and all(rs.get(r) is not None for r in range(args.rounds)):
                out.append("%s: restart round %d %s; sum of the other rounds %s (medians over reps)" % (
                    side, args.restart_before, secs(rs[args.restart_before]),
                    secs(sum(v for r, v in rs.items() if r != args.restart_before))))
        for r in result["restarts"]:
            if r["side"] == "ls-save" and "save_ms" in r:
                out.append("ls-save rep %s: client saved %d slot(s) in %.0f ms before the stop, restored them in "
                           "%.0f ms after the start, before round %d (not in its time); tokens restored per slot %s"
                           % (r.get("rep"), len(r.get("saves", [])), r["save_ms"], r.get("restore_ms") or 0,
                              args.restart_before, [x.get("tokens") for x in r.get("restores", [])]))
    for side, kv in sorted(result["kv_types"].items()):
        out.append("%s KV: %s at rest, %s in slots; RAM: %s%s" % (side, kv.get("at_rest"), kv.get("in_slots"),
                                                                 kv.get("ram_budget"), "; threads bound: %s" % kv[
                                                                     "bind"] if kv.get("bind") else ""))
    for side, cmd in sorted(result["commands"].items()):
        out.append("%s command: `%s`" % (side, " ".join(os.path.basename(c) if i == 0 else c
                                                       for i, c in enumerate(cmd))))
    out.append("sides one at a time, alternating the order over reps; each rep starts every side from an empty "
               "state; ratios pair the reps of one machine, so their interval reflects that machine only")
    trained = lib.trained_ctx(args)
    if trained and args.ctx > trained:
        out.append("model trained at %d tokens: -c %d runs RoPE beyond training (timing only); llama-server got "
                   "--override-kv to lift its slot cap" % (trained, args.ctx))
    out.append("phases: " + ", ".join("%s %.1f s" % (p["phase"], p["s"]) for p in result["phases"]))
    failed = sum(1 for x in result["requests"] if x.get("error"))
    if failed:
        out.append("WARNING: %d requests failed (the requests in the JSON say why)" % failed)
    return out
