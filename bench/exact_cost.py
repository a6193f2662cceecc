#!/usr/bin/env python3
"""What exactness costs (issue 33): cold prefill and decode of agentkv with the exactness patches (0005
batch-invariant f16 flash attention, 0006 slot rows rounded through q4_0), agentkv without them (--bin-base,
e.g. a build of the commit before), and llama-server's default f16 KV (built with -DGGML_FA_BATCH_INVARIANT=OFF:
upstream's kernels), interleaved: every repetition runs each context on each server in turn, so load changes
on a shared machine hit all of them alike.

Per context: a cold prefill (client TTFT of a 1-token completion; fresh agent id and a text slice of its own
per repetition, so nothing is reused), and for the first context a decode (median inter-token ms of a 48-token
streamed completion). Medians over --reps; ratios against llama-server f16.

  /usr/bin/python3 bench/exact_cost.py --bin-base /tmp/agentkv-main --llama-server build-srv/bin/llama-server
"""
import argparse
import os
import sys

import lib


def decode_ms(token_ms):
    gaps = [b - a for a, b in zip(token_ms, token_ms[1:])]
    return lib.med(gaps) if gaps else None


def run_agentkv(srv, prompt, agent, n):
    r = srv.complete(agent, prompt, n, {"cache_prompt": False})
    return r["client_ttft_ms"], decode_ms(r["token_ms"]), r["prompt_tokens"]


def run_llama(srv, prompt, n):
    body = {"prompt": prompt, "n_predict": n, "id_slot": 0, "cache_prompt": False, "temperature": 0, "stream": True}
    r = lib.stream_request(srv.port, "/completion", body)
    if r["status"] != 200:
        raise RuntimeError("llama-server: %s %s" % (r["status"], r.get("error")))
    return r["client_ttft_ms"], decode_ms(r["token_ms"]), None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=lib.DEFAULT_BIN, help="agentkv with the patches")
    ap.add_argument("--bin-base", required=True, help="agentkv without them")
    ap.add_argument("--llama-server", default=lib.DEFAULT_LLAMA_SERVER)
    ap.add_argument("--model", default=lib.DEFAULT_MODEL)
    ap.add_argument("--contexts", default="2048,8192")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=48)
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    args = ap.parse_args()
    args.model_path, args.model_label = args.model, os.path.basename(args.model)
    ctxs = [int(c) for c in args.contexts.split(",")]
    slot_ctx = int(max(ctxs) * 1.2) + 256  # the chars-per-token estimate is rough
    d, work = lib.fresh_work_dir(args, "exact_cost")
    corpus = lib.Corpus(lib.DEFAULT_TEXT)

    a = argparse.Namespace(**vars(args))
    base = argparse.Namespace(**vars(args))
    base.bin = args.bin_base
    servers = {"agentkv": lib.Agentkv(a, work, "agentkv", ctx=slot_ctx),
               "agentkv-base": lib.Agentkv(base, work, "agentkv-base", ctx=slot_ctx),
               "llama-server-f16": lib.LlamaServer(args, work, slot_ctx, kv="f16")}
    samples = {(n, c, k): [] for n in servers for c in ctxs for k in ("prefill_ms", "decode_ms")}
    try:
        for s in servers.values():
            s.start()
        corpus.calibrate_http(servers["agentkv"].port)
        for rep in range(-1, args.reps):  # rep -1: warm-up, not recorded
            for c in ctxs:
                prompt = corpus.slice(100_000 + (rep + 1) * 9_000 + c, c)
                n = args.gen if c == ctxs[0] else 1
                for name, s in servers.items():
                    if name.startswith("agentkv"):
                        ttft, dec, _ = run_agentkv(s, prompt, "cost-%d-%d" % (rep, c), n)
                    else:
                        ttft, dec, _ = run_llama(s, prompt, n)
                    if rep >= 0:
                        samples[(name, c, "prefill_ms")].append(ttft)
                        if dec is not None and n > 1:
                            samples[(name, c, "decode_ms")].append(dec)
                    lib.log("rep %d ctx %d %s: ttft %.0f ms, decode %s ms/token" % (rep, c, name, ttft, dec))
    finally:
        lib.stop_all()

    rows = []
    for c in ctxs:
        ref = lib.med(samples[("llama-server-f16", c, "prefill_ms")])
        ref_dec = lib.med(samples[("llama-server-f16", c, "decode_ms")]) if c == ctxs[0] else None
        for name in servers:
            p = samples[(name, c, "prefill_ms")]
            dec = samples[(name, c, "decode_ms")]
            rows.append({"server": name, "context": c, "prefill_ms_median": lib.med(p), "prefill_ms_min": min(p),
                         "prefill_ms_max": max(p), "prefill_vs_llama_server_f16": lib.ratio(lib.med(p), ref),
                         "decode_ms_per_token": lib.med(dec) if dec else None,
                         "decode_vs_llama_server_f16": lib.ratio(lib.med(dec), ref_dec) if dec and ref_dec else None})
    cols = list(rows[0].keys())
    meta = lib.make_meta(args, "exact_cost")
    meta["bin_base"] = lib.file_identity(args.bin_base)
    body = lib.md_table(rows, cols) + (
        "\n\nCold prefill: client TTFT of a 1-token completion (fresh agent / cache_prompt false), median [min, max]"
        " of %d interleaved repetitions after one warm-up; ratios: this server / llama-server f16 (> 1: slower)."
        " Decode: median inter-token gap of a %d-token streamed completion after the %d-token prompt."
        % (args.reps, args.gen, ctxs[0]))
    lib.write_outputs(d, "exact_cost", meta, {"rows": rows, "samples": {"|".join(map(str, k)): v
                                                                        for k, v in samples.items()}}, rows, body, cols)
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
