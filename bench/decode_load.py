#!/usr/bin/env python3
"""Decode under load (issue 34): N agents decoding together, agentkv --slots N vs llama-server -np N.

Per N in --agents (default 1,4,16,64) and per server (one process each, started for that N): N streamed
requests of --max-tokens tokens (ignore_eos, temperature 0) to N distinct ~--prompt-tokens prompts, all sent at
once (one thread each), after one unmeasured warm-up round of the same shape. Reported per N and server:
- tokens/s: the completion tokens the servers counted (agentkv usage.completion_tokens, llama-server
  timings.predicted_n), summed over the N streams, over the decode window (the earliest first token to the
  latest last token);
- p50 / p99 inter-token latency over TOKENS, not SSE pieces: a piece that carries k tokens (llama-server's
  `tokens` field with return_tokens; agentkv: one per piece, and the tokens its usage counts beyond its
  pieces are reported as merged_tokens) contributes k gaps of (its gap / k);
- the KV type at rest and in slots of both servers, and llama-server's thread binding.

  bench/decode_load.py --bin build/agentkv --llama-server build-srv/bin/llama-server --agents 1,4 --max-tokens 32
Outputs <out>/decode_load/decode_load.{json,csv,md}; a SIGTERM writes the rows finished so far (partial).
"""
import argparse
import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
from lib import log  # noqa: E402
import vs_llama  # noqa: E402

SUB = "decode_load"


def token_gaps(piece_ms, piece_tokens):
    """Per-token gaps (ms) of one stream: piece i (i >= 1) arrived piece_ms[i] - piece_ms[i-1] after the previous
    one and carried piece_tokens[i] tokens, each of which gets an equal share of that gap. The first piece's
    tokens have no gap (they are the TTFT)."""
    out = []
    for i in range(1, len(piece_ms)):
        k = max(1, piece_tokens[i])
        out += [(piece_ms[i] - piece_ms[i - 1]) / k] * k
    return out


def one_stream(srv, is_agentkv, agent, prompt, max_tokens, res):
    """Runs one streamed request; res gets: t0 (perf_counter at the request), piece_ms (arrival of each piece with
    text, ms after t0), piece_tokens, tokens (the server's count), status, error."""
    if is_agentkv:
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True, "ignore_eos": True,
                "stream_options": {"include_usage": True}}
        r = lib.stream_request(srv.port, "/v1/completions", body, {"X-Agent-Id": agent})
    else:
        body = {"prompt": prompt, "n_predict": max_tokens, "temperature": 0, "stream": True, "ignore_eos": True,
                "cache_prompt": False, "return_tokens": True}
        r = lib.stream_request(srv.port, "/completion", body)
    res.update({"t0": r["t0"], "status": r["status"], "error": r.get("error"), "piece_ms": r["token_ms"]})
    chunks = [j for j in r["chunks"] if lib.stream_piece(j)]
    if is_agentkv:
        usage = next((j["usage"] for j in r["chunks"] if j.get("usage")), None) or {}
        res["tokens"] = usage.get("completion_tokens")
        res["piece_tokens"] = [1] * len(chunks)
    else:
        t = next((j["timings"] for j in reversed(r["chunks"]) if j.get("timings")), None) or {}
        res["tokens"] = t.get("predicted_n")
        res["piece_tokens"] = [len(j.get("tokens") or [0]) or 1 for j in chunks]
    if len(res["piece_tokens"]) != len(res["piece_ms"]):  # a piece without text (stream_piece) is not timed
        res["piece_tokens"] = res["piece_tokens"][:len(res["piece_ms"])] + [1] * (len(res["piece_ms"]) -
                                                                                len(res["piece_tokens"]))


def round_of(srv, is_agentkv, prompts, max_tokens, tag):
    """All prompts at once; returns the per-stream results."""
    results = [{} for _ in prompts]
    threads = [threading.Thread(target=one_stream, args=(srv, is_agentkv, "%s-%d" % (tag, i), p, max_tokens,
                                                          results[i])) for i, p in enumerate(prompts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = [r for r in results if r.get("status") != 200]
    if bad:
        raise RuntimeError("decode_load: %d of %d streams failed: %s" % (len(bad), len(results), bad[0].get("error")))
    return results


class StepTimes(lib.HistogramDeltas):
    """agentkv's forward passes between two calls (its /metrics agentkv_decode_ms and agentkv_loop_iteration_ms):
    the mean time in llama_decode and the mean whole loop iteration per pass. None for llama-server."""

    def __init__(self, srv):
        super().__init__(srv, ("agentkv_decode_ms", "agentkv_loop_iteration_ms"))

    def since_last(self):
        d = super().since_last()
        if d is None:
            return {"passes": None, "decode_ms_mean": None, "iteration_ms_mean": None}
        return {"passes": int(d["agentkv_decode_ms"][0]), "decode_ms_mean": lib.mean_of(d, "agentkv_decode_ms"),
                "iteration_ms_mean": lib.mean_of(d, "agentkv_loop_iteration_ms")}


def summarize(server, n, results, kv):
    first = min(r["t0"] + r["piece_ms"][0] / 1e3 for r in results if r["piece_ms"])
    last = max(r["t0"] + r["piece_ms"][-1] / 1e3 for r in results if r["piece_ms"])
    tokens = sum(r.get("tokens") or 0 for r in results)
    gaps = [g for r in results for g in token_gaps(r["piece_ms"], r["piece_tokens"])]
    merged = sum(max(0, (r.get("tokens") or 0) - sum(r["piece_tokens"])) for r in results)
    window_s = max(1e-9, last - first)
    return {"server": server, "agents": n, "tokens": tokens, "window_s": window_s,
            "tokens_per_s": (tokens - n) / window_s if tokens > n else None,  # the first tokens are TTFT, not decode
            "itl_p50_ms": lib.pct(gaps, 50), "itl_p99_ms": lib.pct(gaps, 99), "gaps": len(gaps),
            "merged_tokens": merged, "ttft_p50_ms": lib.pct([r["piece_ms"][0] for r in results if r["piece_ms"]], 50),
            "kv_rest": kv[0], "kv_slots": kv[1], "bind": kv[2]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    lib.add_side_by_side_args(ap, "held-out text the prompts are cut from")
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--agents", default="1,4,16,64", help="agents decoding together, one row each")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prompt-tokens", type=int, default=256)
    ap.add_argument("--kv", default="q4_0", help="agentkv --kv and llama-server -ctk/-ctv")
    ap.add_argument("--slot-kv", choices=["auto", "f16", "q8_0", "q4_0"], help="agentkv --slot-kv")
    ap.add_argument("--ls-bind", choices=lib.LS_BIND_CHOICES, default="omp")
    ap.add_argument("--sides", default="agentkv,llama-server")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pause-s", type=float, default=0.0,
                    help="seconds between the warm-up round and the measured one (the warm-up turns' saves land)")
    args = ap.parse_args(argv)
    lib.resolve_model(args)
    d, work, meta = lib.start_driver(args, SUB, SUB)
    sides = args.sides.split(",")
    if "llama-server" in sides:
        meta["llama_server_bin"] = lib.file_identity(args.llama_server, full=True)
    corpus = lib.Corpus(args.text)
    ctx = ((args.prompt_tokens * 5 // 4 + args.max_tokens + 64 + 255) // 256) * 256
    rows, partial = [], True
    try:
        for n in [int(x) for x in args.agents.split(",")]:
            prompts = [corpus.slice(1000 + i * (args.prompt_tokens + 500), args.prompt_tokens) for i in range(n)]
            for side in sides:
                if side == "agentkv":
                    srv = lib.Agentkv(args, work, name="agentkv-%d" % n, slots=n, ctx=ctx, kv=args.kv)
                else:
                    srv = lib.LlamaServer(args, work, ctx, kv=args.kv, name="llama-server-%d" % n, slots=n,
                                          bind=args.ls_bind)
                srv.start()
                kv = (vs_llama.agentkv_kv(srv.log_text()) + ("-",) if side == "agentkv"
                      else (args.kv, args.kv, args.ls_bind))
                log("decode_load: %s, %d agents" % (side, n))
                steps = StepTimes(srv if side == "agentkv" else None)
                round_of(srv, side == "agentkv", prompts, args.max_tokens, "warm")
                warm_steps = steps.since_last()
                time.sleep(args.pause_s)
                steps.since_last()
                res = round_of(srv, side == "agentkv", prompts, args.max_tokens, "m")
                row = summarize(side, n, res, kv)
                row.update(steps.since_last())
                row.update({"warmup_" + k: v for k, v in warm_steps.items()})
                srv.stop()
                rows.append(row)
        partial = False
    except KeyboardInterrupt:
        log("decode_load: interrupted; writing the rows finished so far (partial)")
    finally:
        lib.stop_all()
    cols = ["agents", "server", "tokens_per_s", "itl_p50_ms", "itl_p99_ms", "ttft_p50_ms", "tokens", "window_s",
            "gaps", "merged_tokens", "passes", "decode_ms_mean", "iteration_ms_mean", "warmup_decode_ms_mean",
            "warmup_iteration_ms_mean", "kv_rest", "kv_slots", "bind"]
    notes = ["%d tokens per agent (ignore_eos, temperature 0), prompts ~%d tokens, distinct per agent; one warm-up "
             "round of the same shape first; per-slot context %d (llama-server -c = agents x that)" % (
                 args.max_tokens, args.prompt_tokens, ctx),
             "tokens_per_s = (tokens counted by the server - one first token per agent) / (latest last token - "
             "earliest first token); itl = inter-token latency over tokens (a piece of k tokens gives k gaps of "
             "gap/k); merged_tokens = tokens the server counted beyond the pieces (0: one token per piece)",
             "agentkv only: passes = its forward passes in the measured round, decode_ms_mean = their mean time "
             "in llama_decode, iteration_ms_mean = the mean loop iteration around them (its /metrics); warmup_*: "
             "the same over the warm-up round",
             "threads %d; llama-server -fa on, --cache-ram 0, cache_prompt off, threads bound by %s" % (
                 args.threads, args.ls_bind)]
    md = ("**PARTIAL**\n\n" if partial else "") + lib.md_table(rows, cols) + "\n\n" + "\n".join("- " + x for x in notes)
    lib.write_outputs(d, SUB, meta, {"status": "partial" if partial else "ok", "rows": rows, "notes": notes,
                                     "partial": partial}, rows, md, cols)
    print(lib.md_table(rows, cols))
    return 1 if partial else 0


if __name__ == "__main__":
    sys.exit(main())
