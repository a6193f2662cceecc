#!/usr/bin/env python3
"""Scheduler benchmarks (issue #5): aggregate decode throughput with N concurrent
agents, staggered arrivals (interleaved vs serial prefill), and prefetch of a warm
agent during another agent's decode; (issue #8) one agent's decode while another's
cache loads or saves, and the cost of the end of a turn.

  /usr/bin/python3 bench/sched_bench.py [throughput|staggered|prefetch|interference|all] [--quick]

Writes bench/out/sched/<name>.{json,csv,md}. Uses the bundled model by default.
"""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402


def concurrent(fns):
    """Runs the callables in threads; returns their results in order and the wall time in ms."""
    out = [None] * len(fns)

    def run(i, f):
        out[i] = f()

    ts = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(fns)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out, (time.perf_counter() - t0) * 1000.0


def bench_throughput(args, corpus, work):
    rows = []
    gen = 32 if args.quick else 64
    for n in ([1, 2] if args.quick else [1, 2, 4, 8]):
        srv = lib.Agentkv(args, work, name="tp%d" % n, slots=8, ctx=1024)
        srv.wipe()  # every request is a cold agent
        srv.start()
        try:
            samples = []
            for rep in range(args.reps + 1):
                fns = [lambda i=i, rep=rep: srv.complete("tp-%d-%d-%d" % (n, rep, i), corpus.slice(200 * i + 37 * rep, 64),
                                                          gen) for i in range(n)]
                res, wall = concurrent(fns)
                toks = sum(r["completion_tokens"] for r in res)
                if rep > 0:  # first round is the warm-up
                    samples.append(toks / (wall / 1000.0))
            s = lib.summarize(samples)
            rows.append({"agents": n, "gen_tokens_each": gen, "tok_s": s["median"], "tok_s_min": s["min"],
                         "tok_s_max": s["max"], "n": s["n"]})
        finally:
            srv.stop()
    base = rows[0]["tok_s"]
    for r in rows:
        r["vs_one_agent"] = r["tok_s"] / base
    return rows


def bench_staggered(args, corpus, work):
    n_a = 1024 if args.quick else 4096
    rows = []
    for mode, chunk in (("interleaved", 512), ("serial", 8192)):
        srv = lib.Agentkv(args, work, name="stag-" + mode, slots=2, ctx=n_a + 1024, extra=["--prefill-chunk", str(chunk)])
        srv.wipe()  # A and B start cold
        srv.start()
        try:
            samples = []
            for rep in range(args.reps):
                a_prompt = corpus.slice(5000 + 97 * rep, n_a)
                b_prompt = corpus.slice(90000 + 31 * rep, 200)

                def a():
                    return srv.complete("A-%s-%d" % (mode, rep), a_prompt, 16)

                def b():
                    time.sleep(2.0)
                    t0 = time.perf_counter()
                    r = srv.complete("B-%s-%d" % (mode, rep), b_prompt, 16)
                    r["b_wall_ms"] = (time.perf_counter() - t0) * 1000.0
                    return r

                (ra, rb), wall = concurrent([a, b])
                samples.append((ra["server_ttft_ms"], rb["server_ttft_ms"], wall, ra["prompt_tokens"], rb["prompt_tokens"]))
            rows.append({"mode": mode, "prefill_chunk": chunk, "a_tokens": samples[0][3], "b_tokens": samples[0][4],
                         "a_ttft_ms": lib.med([s[0] for s in samples]), "b_ttft_ms": lib.med([s[1] for s in samples]),
                         "b_ttft_min": min(s[1] for s in samples), "b_ttft_max": max(s[1] for s in samples),
                         "total_wall_ms": lib.med([s[2] for s in samples]), "n": len(samples)})
        finally:
            srv.stop()
    return rows


def two_agents(args, corpus, work, name, n_b):
    """A fresh 2-slot server whose agent B has computed an n_b-token prompt; agent A's
    prompt is short. Returns (server, its cache dir, A's prompt, B's prompt)."""
    cache = os.path.join(work, name + "-cache")
    b_prompt = corpus.slice(30000, n_b)
    # The corpus's chars-per-token is the bundled model's; other vocabularies split
    # the same text into up to ~10% more tokens.
    srv = lib.Agentkv(args, work, name=name, slots=2, ctx=int(n_b * 1.15) + 512, cache_dir=cache)
    srv.wipe()
    srv.start()
    srv.complete("B", b_prompt, 1)
    return srv, cache, corpus.slice(70000, 64), b_prompt


def bench_prefetch(args, corpus, work):
    n_b = 512 if args.quick else 2048
    rows = []
    srv, cache, a_prompt, b_prompt = two_agents(args, corpus, work, "pf", n_b)
    hot = []
    for rep in range(args.reps):  # hot: B in the RAM pool, two other agents took both slots
        srv.complete("push1-%d" % rep, "Hello there.", 1)
        srv.complete("push2-%d" % rep, "Hello again.", 1)
        hot.append(srv.complete("B", b_prompt, 1)["server_ttft_ms"])
    srv.stop()
    during, alone = [], []
    for rep in range(args.reps):
        for mode in ("alone", "during"):
            srv = lib.Agentkv(args, work, name="pf-%s-%d" % (mode, rep), slots=2, ctx=n_b + 512, cache_dir=cache)
            srv.start()
            lib.drop_page_cache(lib.files_under(cache), args.drop)
            try:
                if mode == "alone":
                    r = srv.complete("B", b_prompt, 1)
                    alone.append(r["server_ttft_ms"])
                else:
                    def a():
                        return srv.complete("A-%d" % rep, a_prompt, 96)

                    def b():
                        time.sleep(0.5)  # A is decoding
                        return srv.complete("B", b_prompt, 1)

                    (ra, rb), _ = concurrent([a, b])
                    during.append(rb["server_ttft_ms"])
                    assert rb["state"] == "warm", rb["state"]
            finally:
                srv.stop()
    h = lib.summarize(hot)
    for name, xs in (("hot (RAM pool)", hot), ("warm, alone (read on demand)", alone),
                     ("warm, during another agent's decode (prefetched)", during)):
        s = lib.summarize(xs)
        rows.append({"case": name, "b_tokens": n_b, "ttft_ms": s["median"], "min": s["min"], "max": s["max"],
                     "n": s["n"], "vs_hot": s["median"] / h["median"]})
    return rows


def gaps(r, during=None):
    """Inter-token gaps of one streamed response r as (token index, ms), first token excluded;
    with `during` (another response), only the gaps that end while that request was in flight."""
    t = [r["t0"] + ms / 1000.0 for ms in r["token_ms"]]
    lo, hi = (during["t0"], during["t0"] + during["client_total_ms"] / 1000.0) if during else (-1e300, 1e300)
    return [(i + 1, (b - a) * 1000.0) for i, (a, b) in enumerate(zip(t, t[1:])) if lo <= b <= hi]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def bench_interference(args, corpus, work):
    """Agent A streams tokens while agent B's large cache is read from disk after a restart
    ("load"), or while B's turn ends and its cache is saved ("save"); A's inter-token gaps vs
    A alone. Also the end of a turn: a non-streamed 1-token turn of B (whole response vs its
    TTFT) and the TTFT of the next agent's short cold prompt right after it."""
    n_b = args.b_tokens or (512 if args.quick else 4096)
    gen = 200 if args.quick else 600  # long enough to outlast B's request
    srv, cache, a_prompt, b_prompt = two_agents(args, corpus, work, "if", n_b)
    samples = {"alone": [], "load": [], "save": []}
    turn_end = []
    try:
        for rep in range(args.reps):
            samples["alone"] += gaps(srv.complete("A-alone-%d" % rep, a_prompt, gen))

            def a(tag):
                return lambda: srv.complete("A-%s-%d" % (tag, rep), a_prompt, gen)

            def b_turn():  # B: a short turn, then its commit and save
                time.sleep(0.2)
                return srv.complete("B", b_prompt + " And%d" % rep, 1)

            (ra, rb), _ = concurrent([a("save"), b_turn])
            # B's commit and save run after its reply: count A's gaps from B's start to 1 s after.
            samples["save"] += gaps(ra, dict(rb, client_total_ms=rb["client_total_ms"] + 1000.0))
            wall, usage = srv.complete_plain("B", b_prompt + " And%d" % rep, 1)
            nxt = srv.complete("S-%d" % rep, "A short question for another agent.", 1)
            alone = srv.complete("S2-%d" % rep, "A short question for a third agent.", 1)
            turn_end.append({"b_total_ms": wall, "b_ttft_ms": usage["agentkv"]["ttft_ms"],
                             "next_ttft_ms": nxt["server_ttft_ms"], "next_alone_ttft_ms": alone["server_ttft_ms"]})
        for rep in range(args.reps):  # B from disk after a restart while A decodes
            srv.stop()
            srv.start()
            lib.drop_page_cache(lib.files_under(cache), args.drop)

            def b_load():
                time.sleep(0.2)
                return srv.complete("B", b_prompt, 1)

            (ra, rb), _ = concurrent([lambda: srv.complete("A-load-%d" % rep, a_prompt, gen), b_load])
            assert rb["state"] == "warm", rb["state"]
            samples["load"] += gaps(ra, rb)
    finally:
        srv.stop()
    rows = []
    # A's gaps grow with its own length (attention over more tokens): each case is compared
    # with A alone at the same token indices.
    alone_at = {}
    for i, g in samples["alone"]:
        alone_at.setdefault(i, []).append(g)
    for case, pairs in samples.items():
        xs = [g for _, g in pairs]
        base = lib.med([lib.med(alone_at[i]) for i, _ in pairs if i in alone_at])
        rows.append({"case": "A decoding " + {"alone": "alone", "load": "while B (%d tokens) loads from disk" % n_b,
                                              "save": "while B's turn ends and its cache is saved"}[case],
                     "gap_ms_median": lib.med(xs), "gap_ms_p90": pct(xs, 0.9), "gap_ms_max": max(xs),
                     "n_gaps": len(xs), "alone_same_tokens_ms": base, "median_vs_alone": lib.med(xs) / base})
    te = lambda k: lib.med([t[k] for t in turn_end])  # noqa: E731
    rows.append({"case": "B's 1-token turn, non-streamed: whole response (median col) vs its TTFT (alone col), %d tokens"
                 % n_b, "gap_ms_median": te("b_total_ms"), "gap_ms_p90": None, "gap_ms_max": None,
                 "n_gaps": len(turn_end), "alone_same_tokens_ms": te("b_ttft_ms"),
                 "median_vs_alone": te("b_total_ms") / te("b_ttft_ms")})
    rows.append({"case": "next agent's short cold TTFT right after B's turn (median col) vs a later one (alone col)",
                 "gap_ms_median": te("next_ttft_ms"), "gap_ms_p90": None, "gap_ms_max": None,
                 "n_gaps": len(turn_end), "alone_same_tokens_ms": te("next_alone_ttft_ms"),
                 "median_vs_alone": te("next_ttft_ms") / te("next_alone_ttft_ms")})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", default="all",
                    choices=["throughput", "staggered", "prefetch", "interference", "all"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--bin", default=lib.DEFAULT_BIN)
    ap.add_argument("--model")
    ap.add_argument("--synth-type", default="q4_0")
    ap.add_argument("--text", default=lib.DEFAULT_TEXT)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--reps", type=int)
    ap.add_argument("--drop", default="fadvise", choices=["fadvise", "drop_caches", "none"])
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    ap.add_argument("--b-tokens", type=int, help="interference: agent B's context (default 4096; 512 with --quick)")
    args = ap.parse_args()
    args.reps = args.reps or (1 if args.quick else 3)
    lib.resolve_model(args)
    d = os.path.join(args.out, "sched")
    work = os.path.join(d, "work")
    os.makedirs(work, exist_ok=True)
    corpus = lib.Corpus(args.text)
    calib = lib.Agentkv(args, work, name="calib", slots=1, ctx=2048)
    calib.start()
    corpus.calibrate(calib)
    calib.stop()
    meta = lib.make_meta(args, "sched")
    todo = ["throughput", "staggered", "prefetch", "interference"] if args.what == "all" else [args.what]
    for name in todo:
        t0 = time.perf_counter()
        rows = {"throughput": bench_throughput, "staggered": bench_staggered, "prefetch": bench_prefetch,
                "interference": bench_interference}[name](args, corpus, work)
        cols = list(rows[0].keys())
        lib.write_outputs(d, name, meta, {"rows": rows}, rows, lib.md_table(rows, cols), cols)
        lib.log("%s took %.1f s" % (name, time.perf_counter() - t0))
        print(lib.md_table(rows, cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
