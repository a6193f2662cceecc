#!/usr/bin/python3
"""agentkv benchmark driver: reproduces the paper's tables side by side with llama.cpp's llama-server.

  bench/run.py ttft [--quick] [--model M] [--contexts 1024,2048,...] [--reps 5]
  bench/run.py vs-llama-server [--quick] [--llama-server build-srv/bin/llama-server]
  bench/run.py capacity [--quick] [--budget 4G] [--verify-contexts 4096,8192]
  bench/run.py ppl [--quick]
  bench/run.py scenario prisoners|routing [--quick]
  bench/run.py all --quick          # every benchmark in quick mode (what CI runs, with bench/check_quick.py)

Outputs: bench/out/<subcommand>/<name>.{json,csv,md[,png]} (bench/README.md explains each).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
from lib import log, summarize, ratio, med  # noqa: E402
import vs_llama  # noqa: E402

STATES = ["cold", "warm", "hot", "resident"]


def parse_size(s):
    s = str(s).strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def ints(s):
    return [int(x) for x in str(s).split(",") if x.strip()]


def round_up(x, m=256):
    return ((x + m - 1) // m) * m


def slot_for(n_tokens, extra=256, headroom=1.12):
    """A slot size for prompts cut to ~n_tokens by Corpus.slice: its chars-per-token estimate overshoots by a
    few % (more when it was calibrated on another server's start-up), so leave headroom, plus `extra`."""
    return round_up(int(n_tokens * headroom) + extra)


def workdir(args, sub):
    d = os.path.join(lib.out_dir(args, sub), "work")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def cleanup_work(args, d):
    if args.keep_work:
        return
    for p in os.listdir(d):  # keep the server logs, drop caches / slot files
        fp = os.path.join(d, p)
        if os.path.isdir(fp):
            shutil.rmtree(fp, ignore_errors=True)


def ctx_note(args, n_max):
    t = lib.trained_ctx(args)
    if t and n_max > t:
        return ("model trained at %d tokens: contexts above that run RoPE beyond training (text is garbage, "
                "timing is valid)" % t)
    return ""


def cap_contexts(args, corpus, contexts):
    """Drop contexts whose estimated cold prefill exceeds --max-cold-s (from the calibration rate)."""
    keep, skipped = [], []
    for n in contexts:
        est = n / max(1.0, getattr(corpus, "prefill_tps", 1e9))
        if est > args.max_cold_s:
            skipped.append({"context": n, "reason": "estimated cold prefill %.0f s > --max-cold-s %d" % (
                est, args.max_cold_s)})
        else:
            keep.append(n)
    return keep, skipped


# ====================================================================== ttft

def prepare_state(srv, state, agent, args, cache_files_dir):
    """Put `agent` into `state` (resident / hot / warm) before a measured request. Returns page-cache info."""
    info = {}
    if state == "hot":
        srv.complete("bench-pusher", "The pusher agent takes the slot.", 1)  # --slots 1: moves agent to RAM pool
    elif state == "warm":
        st, _ = srv.evict(agent)
        if st != 200:
            raise RuntimeError("evict_only %s -> %s" % (agent, st))
        info = lib.drop_page_cache(lib.files_under(cache_files_dir), args.drop)
    a = srv.agent(agent)
    info["tier_before"] = a.get("tier") if a else None
    return info


def bench_ttft(args):
    sub = "ttft"
    d = lib.out_dir(args, sub)
    wd = workdir(args, sub)
    meta = lib.make_meta(args, sub)
    corpus = lib.Corpus(args.text)
    contexts = ints(args.contexts or ("256,512" if args.quick else "1024,2048,4096,8192,16384,32768"))
    reps = args.reps or (2 if args.quick else 5)
    warmup = 1
    ext_tokens = 32
    slot_ctx = slot_for(max(contexts), extra=ext_tokens * (reps + warmup + 2) * 2 + 128)
    srv = lib.Agentkv(args, wd, slots=1, ctx=slot_ctx, kv=args.kv)
    srv.start()
    spec_bpt = srv.bytes_per_token_spec()
    corpus.calibrate(srv)
    contexts, skipped = cap_contexts(args, corpus, contexts)
    bw = lib.measure_read_bandwidth(wd, (64 << 20) if args.quick else (1 << 30), args.drop)
    log("read bandwidth: cold %.0f MB/s (%s), cached %.0f MB/s" % (bw["cold_read_MBps"], bw["cold_label"],
                                                                 bw["cached_read_MBps"]))
    samples, summary = [], []
    # warm-up of the whole path on a short prompt (not measured)
    srv.complete("bench-warmup", corpus.slice(50000, 256), 1)
    srv.erase("bench-warmup")
    for ci, n in enumerate(contexts):
        base_off = 1000 + ci * 40000
        prompt = corpus.slice(base_off, n)
        log("ttft: context %d (%d chars)" % (n, len(prompt)))
        # cold: fresh agent ids, same text; the last one becomes the base agent for the other states
        cold_ids = ["cold-%d-%d" % (n, i) for i in range(reps)]
        for i, aid in enumerate(cold_ids):
            r = srv.complete(aid, prompt, 1)
            r.update({"context": n, "state_wanted": "cold", "match_wanted": "miss", "rep": i})
            samples.append(r)
            if i < reps - 1:
                srv.erase(aid)
        base = cold_ids[-1]
        info = srv.agent(base) or {}
        base_tokens = info.get("tokens")
        # Q4 bytes of this context: tokens x the server's bytes/token (ModelCacheSpec, startup log)
        q4_bytes = base_tokens * spec_bpt if (base_tokens and spec_bpt) else info.get("disk_bytes")
        disk_bytes = info.get("disk_bytes")
        ext_i = 0
        for match in ("exact", "extend"):
            for state in ("resident", "hot", "warm"):
                for i in range(warmup + reps):
                    if match == "extend":
                        # back to the base context first (unmeasured: a DIVERGE that keeps the prompt's tokens),
                        # so that every extend sample extends the same context by ~ext_tokens
                        srv.complete(base, prompt, 1)
                    pc = prepare_state(srv, state, base, args, srv.cache_dir)
                    if match == "exact":
                        p = prompt  # the agent's cached text (max_tokens 1: the generated token is never cached)
                    else:
                        p = prompt + " " + corpus.slice(base_off + n + 200 + ext_i * ext_tokens, ext_tokens)
                        ext_i += 1
                    r = srv.complete(base, p, 1)
                    r.update({"context": n, "state_wanted": state, "match_wanted": match, "rep": i - warmup,
                              "warmup": i < warmup, "page_cache": pc.get("label"),
                              "resident_after_drop": pc.get("resident_after"), "tier_before": pc.get("tier_before")})
                    samples.append(r)
        srv.erase(base)
        # summaries
        for state in STATES:
            for match in (["miss"] if state == "cold" else ["exact", "extend"]):
                ss = [s for s in samples if s["context"] == n and s["state_wanted"] == state and
                      s["match_wanted"] == match and not s.get("warmup")]
                if not ss:
                    continue
                srv_t, cli_t = summarize([s["server_ttft_ms"] for s in ss]), summarize([s["client_ttft_ms"] for s in ss])
                row = {"context": n, "tokens": med([s["prompt_tokens"] for s in ss]), "state": state, "match": match,
                       "reported_states": "/".join(sorted({str(s["state"]) for s in ss})),
                       "reported_matches": "/".join(sorted({str(s["match"]) for s in ss})),
                       "tokens_prefilled": med([s["tokens_prefilled"] for s in ss]),
                       "server_ttft_ms": srv_t["median"], "server_min": srv_t["min"], "server_max": srv_t["max"],
                       "client_ttft_ms": cli_t["median"], "client_min": cli_t["min"], "client_max": cli_t["max"],
                       "n": srv_t["n"], "page_cache": ss[0].get("page_cache") if state == "warm" else None,
                       "ok": all(s["state"] == state for s in ss) and
                       (state == "cold" or all(s["match"] == match for s in ss))}
                summary.append(row)
        cold = next((r for r in summary if r["context"] == n and r["state"] == "cold"), None)
        q4_read_ms = (q4_bytes / (bw["cold_read_MBps"] * 1e6) * 1000.0) if q4_bytes else None
        for r in summary:
            if r["context"] == n:
                r["q4_bytes"] = q4_bytes
                r["disk_bytes"] = disk_bytes
                r["floor_ms"] = q4_read_ms
                r["speedup_vs_cold"] = ratio(cold and cold["server_ttft_ms"], r["server_ttft_ms"])
    srv.stop()
    for s in samples:
        s.pop("text", None)
    cols = ["context", "tokens", "state", "match", "server_ttft_ms", "server_min", "server_max", "client_ttft_ms",
            "client_min", "client_max", "n", "tokens_prefilled", "speedup_vs_cold", "q4_bytes", "disk_bytes", "floor_ms",
            "page_cache", "reported_states", "reported_matches", "ok"]
    notes = [ctx_note(args, max(contexts) if contexts else 0)]
    notes.append("floor = Q4 bytes of the context / sequential read bandwidth measured in this run "
                 "(%.0f MB/s, %s; cached: %.0f MB/s)" % (bw["cold_read_MBps"], bw["cold_label"], bw["cached_read_MBps"]))
    notes.append("TTFT: server = usage.agentkv.ttft_ms (request receipt -> first token); client = POST -> first SSE "
                 "content chunk over loopback. median (min-max) of %d runs after %d warm-up; cold runs use fresh agent "
                 "ids. exact = the agent's cached text again; extend = cached text + ~%d new tokens." % (
                     reps, warmup, ext_tokens))
    for s in skipped:
        notes.append("skipped context %d: %s" % (s["context"], s["reason"]))
    if any(not r["ok"] for r in summary):
        notes.append("WARNING: some rows' reported cache_state/match differ from the wanted ones (see reported_*)")
    md = lib.md_table(summary, cols) + "\n\n" + "\n".join("- " + x for x in notes if x)
    png = plot_ttft(d, summary, bw)
    if png:
        md += "\n\n![TTFT vs context](ttft.png)\n"
    lib.write_outputs(d, "ttft", meta, {"summary": summary, "samples": samples, "bandwidth": bw, "skipped": skipped,
                                        "notes": notes, "chars_per_token": corpus.cpt, "slot_ctx": slot_ctx,
                                        "reps": reps, "warmup": warmup, "png": png}, summary, md, cols)
    cleanup_work(args, wd)
    return summary


def plot_ttft(d, summary, bw):
    p = lib.plt()
    if p is None:
        log("matplotlib not available: no PNG")
        return None
    fig, ax = p.subplots(figsize=(7, 5))
    colors = {"cold": "tab:red", "warm": "tab:orange", "hot": "tab:green", "resident": "tab:blue"}
    for state in STATES:
        for match, ls in (("miss", "-"), ("exact", "-"), ("extend", "--")):
            rows = sorted([r for r in summary if r["state"] == state and r["match"] == match], key=lambda r: r["tokens"])
            if not rows:
                continue
            xs = [r["tokens"] for r in rows]
            ax.errorbar(xs, [r["server_ttft_ms"] for r in rows],
                        yerr=[[r["server_ttft_ms"] - r["server_min"] for r in rows],
                              [r["server_max"] - r["server_ttft_ms"] for r in rows]],
                        color=colors[state], ls=ls, marker="o", capsize=2,
                        label=state + {"miss": "", "exact": " (exact)", "extend": " (extend)"}[match])
    fl = sorted({(r["tokens"], r["floor_ms"]) for r in summary if r.get("floor_ms") and r["state"] == "cold"})
    if fl:
        ax.plot([x for x, _ in fl], [y for _, y in fl], color="gray", ls=":", label="floor: Q4 bytes / read bw")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("context (prompt tokens)")
    ax.set_ylabel("TTFT (ms, server-reported)")
    ax.set_title("agentkv TTFT by cache state")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    path = os.path.join(d, "ttft.png")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    p.close(fig)
    return "ttft.png"


# ====================================================================== vs-llama-server

def bench_vs_llama(args):
    return vs_llama.bench_vs_llama(args, slot_for, ints, cap_contexts, ctx_note, workdir, cleanup_work)


# ====================================================================== capacity

def bench_capacity(args):
    sub = "capacity"
    d = lib.out_dir(args, sub)
    wd = workdir(args, sub)
    meta = lib.make_meta(args, sub)
    corpus = lib.Corpus(args.text)
    kvs = ["q4_0", "q8_0", "f16"]
    budget = parse_size(args.budget)
    contexts = ints(args.contexts or ("256,512" if args.quick else "4096,8192,16384,32768"))
    verify = ints(args.verify_contexts or ("256" if args.quick else "4096,8192"))
    fit_q4 = args.verify_agents or (5 if args.quick else 8)
    verified, bpt = [], {}
    for kv in kvs:
        for n in verify:
            # a budget that fits about fit_q4 q4_0 agents of this context (fewer at q8_0 / f16)
            srv = lib.Agentkv(args, wd, name="cap-%s-%d" % (kv, n), slots=1, ctx=slot_for(n, headroom=1.25), kv=kv,
                              cache_ram=1 << 30)
            srv.start()
            spec = srv.bytes_per_token_spec()
            if not corpus.calibrated:
                corpus.calibrate(srv)
            srv.stop()
            q4_spec = bpt.get("q4_0", {}).get("spec") or spec
            vbudget = int((fit_q4 + 0.5) * n * q4_spec)
            srv.wipe()
            srv.cmd[srv.cmd.index("--cache-ram") + 1] = str(vbudget)
            srv.start()
            log("capacity: kv %s, context %d, budget %d B" % (kv, n, vbudget))
            rows, agent_bytes, first_evict_at = [], [], None
            max_hot, hot_bytes_at_max = 0, 0
            limit = int(vbudget / (n * spec)) + 3
            for i in range(limit):
                r = srv.complete("cap-%d" % i, corpus.slice(2000 + i * (n + 300), n), 1)
                srv.wait_saved("cap-%d" % i)  # its commit landed: the pool's numbers below include it
                if i > 0:  # the previous agent has left the slot: its pool bytes are its RAM footprint
                    a = srv.agent("cap-%d" % (i - 1)) or {}
                    if a.get("tier") == "hot" and a.get("tokens"):
                        agent_bytes.append((a.get("ram_bytes"), a.get("tokens")))
                m = srv.metrics()
                # evictions from the RAM pool (from="slot" only means an agent left its engine slot)
                ev = sum(v for k, v in m.items() if k.startswith("agentkv_evictions_total") and 'from="slot"' not in k)
                # the metric (so far) counts only slot evictions: also detect a pool eviction directly, as an
                # earlier agent that is now on disk only
                warm = [x["id"] for x in srv.agents() if x.get("tier") == "warm" and x["id"].startswith("cap-")]
                ev_seen = ev > 0 or bool(warm)
                hot = m.get('agentkv_tier_agents{tier="hot"}', 0)
                if hot > max_hot and not ev_seen:
                    max_hot, hot_bytes_at_max = int(hot), m.get('agentkv_tier_bytes{tier="hot"}', 0)
                rows.append({"i": i, "prompt_tokens": r["prompt_tokens"], "pool_evictions_metric": ev,
                             "warm_agents": warm, "hot_agents": hot,
                             "hot_bytes": m.get('agentkv_tier_bytes{tier="hot"}', 0)})
                if ev_seen:
                    first_evict_at = i + 1
                    break
            srv.stop()
            srv.wipe()
            b_tok = [b / t for b, t in agent_bytes if b and t]
            measured_bpt = med(b_tok) or ((hot_bytes_at_max / max_hot / med([r["prompt_tokens"] for r in rows[:max_hot]]))
                                          if max_hot else None)
            tokens = med([r["prompt_tokens"] for r in rows])
            bpt[kv] = {"spec": spec, "measured": measured_bpt}
            computed = int(vbudget // (tokens * measured_bpt)) if tokens and measured_bpt else None
            verified.append({"kv": kv, "context": n, "tokens": tokens, "budget_bytes": vbudget,
                             "bytes_per_token_spec": spec, "bytes_per_token_measured": measured_bpt,
                             "computed_fit": computed, "measured_fit": max_hot, "hot_bytes_at_max": hot_bytes_at_max,
                             "first_eviction_at_agent": first_evict_at,
                             "match": computed == max_hot if computed is not None else None, "trace": rows})
    table = []
    for n in contexts:
        row = {"context": n, "budget_bytes": budget}
        for kv in kvs:
            b = (bpt.get(kv) or {}).get("measured") or (bpt.get(kv) or {}).get("spec")
            row["%s_MiB_per_agent" % kv] = (n * b / 2**20) if b else None
            row["%s_agents" % kv] = int(budget // (n * b)) if b else None
        row["q4_vs_f16"] = ratio(row["q4_0_agents"], row["f16_agents"])
        table.append(row)
    cols = ["context", "q4_0_MiB_per_agent", "q4_0_agents", "q8_0_MiB_per_agent", "q8_0_agents",
            "f16_MiB_per_agent", "f16_agents", "q4_vs_f16"]
    vcols = ["kv", "context", "tokens", "budget_bytes", "bytes_per_token_spec", "bytes_per_token_measured",
             "computed_fit", "measured_fit", "first_eviction_at_agent", "match"]
    md = ("## Agents that fit in %s of RAM pool (computed from measured bytes/token)\n\n" % args.budget +
          lib.md_table(table, cols) + "\n\n## Verified by filling the pool (--slots 1, --cache-ram = budget)\n\n" +
          lib.md_table(verified, vcols) +
          "\n\n- measured_fit = the most agents held by the RAM pool (agentkv_tier_agents{tier=\"hot\"}, the slot's "
          "agent included) before the first pool eviction (an earlier agent found on disk only, or "
          "agentkv_evictions_total{from!=\"slot\"} > 0); computed_fit = budget // (tokens x measured bytes/token)\n"
          "- bytes/token: spec = the server's ModelCacheSpec (startup log); measured = ram_bytes / tokens of "
          "agents in the hot tier (/v1/agents): pool bytes including per-block overhead\n"
          "- the verification budget is (verify_agents + 0.5) q4_0 agents of that context, so q8_0 / f16 fit "
          "proportionally fewer; every agent has distinct text (the pool shares identical blocks)\n")
    lib.write_outputs(d, "capacity", meta, {"budget_bytes": budget, "table": table, "verified": verified,
                                            "bytes_per_token": bpt}, table, md, cols)
    lib.write_csv(os.path.join(d, "capacity_verified.csv"), verified, vcols)
    cleanup_work(args, wd)
    return table


# ====================================================================== ppl

def bench_ppl(args):
    sub = "ppl"
    d = lib.out_dir(args, sub)
    meta = lib.make_meta(args, sub)
    helptext = subprocess.run([args.bin, "--help"], capture_output=True, text=True).stdout + \
        subprocess.run([args.bin, "--help"], capture_output=True, text=True).stderr
    reference = [  # /work/shared/models/README.md: llama-perplexity, Q8_0 weights, -fa on
        {"source": "llama-perplexity (README)", "kv": "f16", "ctx": 512, "ppl": 142.1055},
        {"source": "llama-perplexity (README)", "kv": "q4_0", "ctx": 512, "ppl": 142.5174},
        {"source": "llama-perplexity (README)", "kv": "f16", "ctx": 1024, "ppl": 141.2874},
        {"source": "llama-perplexity (README)", "kv": "q4_0", "ctx": 1024, "ppl": 141.6526}]
    if not any(l.strip().startswith("ppl") for l in helptext.splitlines()):
        msg = "`agentkv ppl` is not available in %s (not in `agentkv --help`)" % args.bin
        log(msg)
        lib.write_outputs(d, "ppl", meta, {"status": "not available", "reason": msg, "rows": [],
                                           "reference": reference}, reference,
                          "**not available**: %s\n\nReference (llama-perplexity):\n\n%s" % (
                              msg, lib.md_table(reference, ["source", "kv", "ctx", "ppl"], fmt={"ppl": "%.4f"})))
        return []
    if "tiny-llama-brown" not in os.path.basename(args.model_path):
        log("ppl: perplexity is only meaningful on the trained model; running anyway on %s" % args.model_label)
    rows = []
    settings = [(512, 256), (1024, 512)]
    max_chunks = ["--chunks", "8"] if args.quick else []
    for c, stride in settings:
        for kv in ("f16", "q8_0", "q4_0"):
            cmd = [args.bin, "ppl", "-m", args.model_path, "-f", args.text, "-c", str(c), "--stride", str(stride),
                   "--kv", kv, "-t", str(args.threads), "--json"] + max_chunks
            t0 = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True)
            row = {"ctx": c, "stride": stride, "kv": kv, "cmd": " ".join(cmd), "rc": p.returncode,
                   "wall_s": time.perf_counter() - t0}
            try:
                j = json.loads(p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "")
                row["ppl"] = j.get("ppl", j.get("perplexity"))
                row["tokens_scored"] = j.get("tokens_scored", j.get("tokens"))
                row["raw"] = j
            except (ValueError, IndexError):
                row["ppl"] = None
                row["error"] = (p.stderr or p.stdout)[-500:]
            rows.append(row)
    for r in rows:
        base = next((x for x in rows if x["ctx"] == r["ctx"] and x["kv"] == "f16"), None)
        r["delta_pct_vs_f16"] = (100.0 * (r["ppl"] / base["ppl"] - 1)) if (r.get("ppl") and base and base.get("ppl")) \
            else None
    cols = ["ctx", "stride", "kv", "ppl", "delta_pct_vs_f16", "tokens_scored", "wall_s", "rc"]
    md = lib.md_table(rows, cols, fmt={"ppl": "%.4f", "delta_pct_vs_f16": "%+.3f%%"}) + "\n\nReference (llama-perplexity, README of the model):\n\n" + \
        lib.md_table(reference, ["source", "kv", "ctx", "ppl"], fmt={"ppl": "%.4f"})
    status = "ok" if all(r.get("ppl") for r in rows) else "error"
    lib.write_outputs(d, "ppl", meta, {"status": status, "rows": rows, "reference": reference}, rows, md, cols)
    return rows


# ====================================================================== scenarios

ROLES = {"warden": "You are the warden of the county jail. You question prisoners and report to the court.",
         "alice": "You are Alice, a prisoner accused of a robbery with Bob. You want the shortest sentence.",
         "bob": "You are Bob, a prisoner accused of a robbery with Alice. You want the shortest sentence.",
         "judge": "You are the judge. You read the record and pronounce the sentences."}
PHASES = [("Phase 1: arrest and first statements", ["warden", "alice", "bob", "warden", "alice"]),
          ("Phase 2: separate interrogation", ["warden", "bob", "warden", "alice", "bob"]),
          ("Phase 3: the offer of a deal", ["warden", "alice", "bob", "alice", "bob"]),
          ("Phase 4: confrontation", ["warden", "alice", "bob", "warden", "alice"]),
          ("Phase 5: the verdict", ["judge", "warden", "alice", "bob", "judge"])]


def scenario_prisoners(args):
    sub = "scenario-prisoners"
    d = lib.out_dir(args, sub)
    wd = workdir(args, sub)
    meta = lib.make_meta(args, sub)
    corpus = lib.Corpus(args.text)
    doc_tokens = 96 if args.quick else 768
    gen = 8 if args.quick else 32
    all_rows, totals = [], {}
    transcripts = {}
    for mode in ("persistent", "clear"):
        srv = lib.Agentkv(args, wd, name="prisoners-" + mode, slots=args.slots, ctx=4096, kv=args.kv)
        srv.wipe()
        srv.start()
        corpus.calibrate(srv)
        ctx = {}  # agent -> text it has seen (prompt + reply)
        seen = {}  # agent -> index into transcript already shown
        transcript = []
        t_all = time.perf_counter()
        for pi, (title, turns) in enumerate(PHASES):
            if mode == "clear":
                for a in list(ctx):
                    srv.erase(a)
            t_phase = time.perf_counter()
            for ti, who in enumerate(turns):
                if who not in ctx:
                    case = corpus.slice(3000 + len(ctx) * 9000, doc_tokens)
                    ctx[who] = "%s\nCase file:\n%s\n" % (ROLES[who], case)
                    seen[who] = 0
                new = "".join("%s: %s\n" % (w, t) for w, t in transcript[seen[who]:])
                header = "\n== %s ==\n" % title if (ti == 0 or who not in turns[:ti]) else ""
                prompt = ctx[who] + header + new + "%s:" % who
                r = srv.complete(who, prompt, gen)
                reply = r["text"].split("\n")[0].strip() or "..."
                ctx[who] = prompt + r["text"]
                transcript.append((who, reply))
                seen[who] = len(transcript)
                all_rows.append({"mode": mode, "phase": pi + 1, "turn": ti + 1, "agent": who,
                                 "prompt_tokens": r["prompt_tokens"], "cached_tokens": r["cached_tokens"],
                                 "tokens_prefilled": r["tokens_prefilled"], "state": r["state"], "match": r["match"],
                                 "server_ttft_ms": r["server_ttft_ms"], "client_ttft_ms": r["client_ttft_ms"],
                                 "total_ms": r["client_total_ms"]})
            totals[(mode, pi + 1)] = (time.perf_counter() - t_phase) * 1000.0
        totals[(mode, "all")] = (time.perf_counter() - t_all) * 1000.0
        transcripts[mode] = transcript
        srv.stop()
        srv.wipe()
    summary = []
    for pi in range(1, len(PHASES) + 1):
        row = {"phase": pi, "turns": len(PHASES[pi - 1][1])}
        for mode, k in (("persistent", "p"), ("clear", "c")):
            rs = [r for r in all_rows if r["mode"] == mode and r["phase"] == pi]
            row["%s_ttft_sum_ms" % k] = sum(r["server_ttft_ms"] or 0 for r in rs)
            row["%s_ttft_median_ms" % k] = med([r["server_ttft_ms"] for r in rs])
            row["%s_prefilled" % k] = sum(r["tokens_prefilled"] or 0 for r in rs)
            row["%s_wall_ms" % k] = totals[(mode, pi)]
            row["%s_states" % k] = ",".join(r["state"] for r in rs)
        row["ttft_speedup"] = ratio(row["c_ttft_sum_ms"], row["p_ttft_sum_ms"])
        summary.append(row)
    tot = {"phase": "total", "turns": sum(len(t) for _, t in PHASES),
           "p_ttft_sum_ms": sum(r["p_ttft_sum_ms"] for r in summary),
           "c_ttft_sum_ms": sum(r["c_ttft_sum_ms"] for r in summary),
           "p_prefilled": sum(r["p_prefilled"] for r in summary), "c_prefilled": sum(r["c_prefilled"] for r in summary),
           "p_wall_ms": totals[("persistent", "all")], "c_wall_ms": totals[("clear", "all")]}
    tot["ttft_speedup"] = ratio(tot["c_ttft_sum_ms"], tot["p_ttft_sum_ms"])
    tot["wall_speedup"] = ratio(tot["c_wall_ms"], tot["p_wall_ms"])
    summary.append(tot)
    same = transcripts["persistent"] == transcripts["clear"]
    cols = ["phase", "turns", "p_ttft_sum_ms", "c_ttft_sum_ms", "ttft_speedup", "p_ttft_median_ms", "c_ttft_median_ms",
            "p_prefilled", "c_prefilled", "p_wall_ms", "c_wall_ms", "p_states", "c_states"]
    notes = ["5 phases, 25 turns, agents warden/alice/bob (permanent) + judge (phase 5 only); each prompt = the agent's "
             "previous context + what the others said since + its cue (EXTEND match across phases)",
             "p_ = persistent caches; c_ = every agent's cache deleted before each phase (full re-prefill)",
             "temperature 0, seed 42, %d tokens per reply, --slots %d, case file ~%d tokens per agent" % (
                 gen, args.slots, doc_tokens),
             "transcripts identical in both modes: %s" % ("yes" if same else "NO (q4 KV written by decode vs by "
                                                          "prefill can differ; see JSON)")]
    md = lib.md_table(summary, cols) + "\n\n" + "\n".join("- " + x for x in notes)
    png = plot_phases(d, "prisoners.png", summary[:-1], "p_ttft_sum_ms", "c_ttft_sum_ms",
                      "prisoners: TTFT per phase (sum of turns)", ("persistent", "clear before each phase"))
    lib.write_outputs(d, "prisoners", meta, {"summary": summary, "turns": all_rows, "notes": notes,
                                             "transcripts": transcripts, "transcripts_identical": same, "png": png},
                      summary, md, cols)
    cleanup_work(args, wd)
    return summary


def plot_phases(d, name, rows, ka, kb, title, labels):
    p = lib.plt()
    if p is None:
        return None
    fig, ax = p.subplots(figsize=(7, 4))
    xs = list(range(len(rows)))
    w = 0.4
    ax.bar([x - w / 2 for x in xs], [r[ka] or 0 for r in rows], w, label=labels[0])
    ax.bar([x + w / 2 for x in xs], [r[kb] or 0 for r in rows], w, label=labels[1])
    ax.set_xticks(xs)
    ax.set_xticklabels([str(r.get("phase")) for r in rows])
    ax.set_ylabel("TTFT (ms)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(d, name), dpi=110)
    p.close(fig)
    return name


def scenario_routing(args):
    sub = "scenario-routing"
    d = lib.out_dir(args, sub)
    wd = workdir(args, sub)
    meta = lib.make_meta(args, sub)
    corpus = lib.Corpus(args.text)
    n_exp = 10
    doc_tokens = 128 if args.quick else 4096
    n_queries = 10 if args.quick else 20
    gen = 4 if args.quick else 16
    srv = lib.Agentkv(args, wd, name="routing", slots=args.slots, ctx=round_up(doc_tokens + 1024), kv=args.kv)
    srv.wipe()
    srv.start()
    corpus.calibrate(srv)
    experts = ["expert-%d" % i for i in range(n_exp)]
    ctx = {}
    rows = []

    def ask(phase, e, prompt):
        r = srv.complete(e, prompt, gen)
        ctx[e] = prompt + r["text"]
        rows.append({"phase": phase, "expert": e, "prompt_tokens": r["prompt_tokens"], "state": r["state"],
                     "match": r["match"], "tokens_prefilled": r["tokens_prefilled"],
                     "server_ttft_ms": r["server_ttft_ms"], "client_ttft_ms": r["client_ttft_ms"]})

    for i, e in enumerate(experts):  # priming: cold
        doc = corpus.slice(500 + i * (doc_tokens + 500), doc_tokens)
        ask("prime (cold)", e, "Document %d:\n%s\n\nQuestion: What is this document about?\nAnswer:" % (i, doc))
    queries = []
    for q in range(n_queries):  # deterministic routing: a fixed permutation of the experts
        e = experts[(q * 7 + 3) % n_exp]
        words = [w for w in corpus.slice(120000 + q * 40, 12).split() if w.isalpha()]
        queries.append((e, "Who or what is %s?" % (words[0] if words else "it")))
    srv.stop()
    srv.start()  # restart: every expert is on disk only
    pc = lib.drop_page_cache(lib.files_under(srv.cache_dir), args.drop)
    first = set()
    for e, q in queries:
        phase = "query after restart (warm)" if e not in first else "query (resident/hot)"
        first.add(e)
        ask(phase, e, ctx[e] + "\n\nQuestion: %s\nAnswer:" % q)
    for e, q in queries:
        ask("repeat query (hot)", e, ctx[e] + "\n\nQuestion: %s Again, briefly.\nAnswer:" % q)
    srv.stop()
    srv.wipe()
    summary = []
    cold_med = None
    for ph in ("prime (cold)", "query after restart (warm)", "query (resident/hot)", "repeat query (hot)"):
        rs = [r for r in rows if r["phase"] == ph]
        if not rs:
            continue
        s = lib.summarize([r["server_ttft_ms"] for r in rs])
        row = {"phase": ph, "requests": len(rs), "tokens_median": med([r["prompt_tokens"] for r in rs]),
               "ttft_median_ms": s["median"], "ttft_min_ms": s["min"], "ttft_max_ms": s["max"],
               "ttft_sum_ms": sum(r["server_ttft_ms"] or 0 for r in rs),
               "client_ttft_median_ms": med([r["client_ttft_ms"] for r in rs]),
               "prefilled": sum(r["tokens_prefilled"] or 0 for r in rs),
               "states": "/".join(sorted({str(r["state"]) for r in rs}))}
        if ph.startswith("prime"):
            cold_med = row["ttft_median_ms"]
        row["speedup_vs_cold"] = ratio(cold_med, row["ttft_median_ms"])
        if ph.endswith("(warm)"):
            row["page_cache"] = pc["label"]
        summary.append(row)
    cols = ["phase", "requests", "tokens_median", "ttft_median_ms", "ttft_min_ms", "ttft_max_ms", "ttft_sum_ms",
            "client_ttft_median_ms", "speedup_vs_cold", "prefilled", "states", "page_cache"]
    notes = ["%d experts, each primed with ~%d tokens of held-out Brown text; %d queries routed by a fixed "
             "permutation; restart between priming and queries; --slots %d" % (n_exp, doc_tokens, n_queries,
                                                                               args.slots),
             "states column: what the server reported (cache_state)"]
    md = lib.md_table(summary, cols) + "\n\n" + "\n".join("- " + x for x in notes)
    png = None
    p = lib.plt()
    if p is not None:
        fig, ax = p.subplots(figsize=(7, 4))
        ax.bar(range(len(summary)), [r["ttft_median_ms"] or 0 for r in summary],
               yerr=[[r["ttft_median_ms"] - r["ttft_min_ms"] for r in summary],
                     [r["ttft_max_ms"] - r["ttft_median_ms"] for r in summary]], capsize=3)
        ax.set_xticks(range(len(summary)))
        ax.set_xticklabels([r["phase"].replace(" (", "\n(") for r in summary], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("TTFT median (ms, log)")
        ax.set_title("routing: %d experts x ~%d tokens" % (n_exp, doc_tokens))
        fig.tight_layout()
        fig.savefig(os.path.join(d, "routing.png"), dpi=110)
        p.close(fig)
        png = "routing.png"
    lib.write_outputs(d, "routing", meta, {"summary": summary, "requests": rows, "notes": notes, "png": png},
                      summary, md, cols)
    cleanup_work(args, wd)
    return summary


# ====================================================================== main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["ttft", "vs-llama-server", "capacity", "ppl", "scenario", "all"])
    ap.add_argument("scenario", nargs="?", choices=["prisoners", "routing"])
    ap.add_argument("--quick", action="store_true", help="tiny contexts, 2 reps: a smoke run (CI)")
    ap.add_argument("--model", help="GGUF path or synth preset (llama-3.2-1b, llama-3.1-8b, gemma-3-12b, ...)")
    ap.add_argument("--synth-type", default="q4_0", help="weight type for synthetic models")
    ap.add_argument("--bin", default=lib.DEFAULT_BIN)
    ap.add_argument("--llama-server", default=lib.DEFAULT_LLAMA_SERVER)
    ap.add_argument("--text", default=lib.DEFAULT_TEXT)
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--kv", default="q4_0", help="KV type of the agentkv server (and llama-server)")
    ap.add_argument("--slot-kv", choices=["auto", "f16", "q8_0", "q4_0"],
                    help="KV type of the agentkv server's engine slots (default: the server's, auto = the at-rest type)")
    ap.add_argument("--ls-kv", help="vs-llama-server: llama-server's KV type if not --kv (f16 = its default)")
    ap.add_argument("--contexts", help="comma-separated target context sizes in tokens")
    ap.add_argument("--reps", type=int, help="measured repetitions (default 5, quick 2)")
    ap.add_argument("--slots", type=int, default=2, help="slots for the scenarios")
    ap.add_argument("--max-cold-s", type=int, default=900, help="skip contexts whose cold prefill would exceed this")
    ap.add_argument("--drop", default="fadvise", choices=["fadvise", "drop_caches", "none"],
                    help="how to drop cache files from the page cache before warm runs")
    ap.add_argument("--budget", default="4G", help="capacity: RAM pool budget for the computed table")
    ap.add_argument("--verify-contexts", help="capacity: contexts verified by filling the pool")
    ap.add_argument("--verify-agents", type=int, help="capacity: q4_0 agents the verification budget holds")
    vs_llama.add_args(ap)
    ap.add_argument("--keep-work", action="store_true", help="keep cache dirs and slot files under out/*/work")
    args = ap.parse_args(argv)
    if args.what == "scenario" and not args.scenario:
        ap.error("scenario needs prisoners or routing")
    if not os.path.exists(args.bin):
        ap.error("agentkv binary not found: %s (build it: scripts/bootstrap.sh)" % args.bin)
    lib.resolve_model(args)
    jobs = {"ttft": [bench_ttft], "vs-llama-server": [bench_vs_llama], "capacity": [bench_capacity],
            "ppl": [bench_ppl], "scenario": [scenario_prisoners if args.scenario == "prisoners" else scenario_routing],
            "all": [bench_ttft, bench_vs_llama, bench_capacity, bench_ppl, scenario_prisoners, scenario_routing]}
    t0 = time.perf_counter()
    failed = []
    for fn in jobs[args.what]:
        t1 = time.perf_counter()
        try:
            fn(args)
        except Exception as e:  # keep going in `all`; the check fails on the missing outputs
            import traceback
            traceback.print_exc()
            failed.append("%s: %s" % (fn.__name__, e))
        finally:
            lib.stop_all()
        log("%s took %.1f s" % (fn.__name__, time.perf_counter() - t1))
    log("done in %.1f s%s" % (time.perf_counter() - t0, "; FAILED: " + "; ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
