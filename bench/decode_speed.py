#!/usr/bin/env python3
"""Decode speed: the gap between streamed tokens on agentkv and on llama-server, side by side in one run.

Each server (one at a time, each started once; agentkv with its defaults, llama-server with its default
f16 KV and -np 1) answers --reqs streamed requests of --max-tokens tokens (ignore_eos, temperature 0) to a
~--prompt-tokens prompt (a new agent per request on agentkv, cache_prompt off on llama-server), after one
unmeasured warm-up request. Per request: the mean gap between the first and the last streamed piece
(ms per token, client side over loopback). Reported: median [min-max] over the requests, and the ratio
agentkv / llama-server (< 1: agentkv faster). Several agentkv binaries can be compared (--bin A --bin B),
e.g. before and after a change.

  /usr/bin/python3 bench/decode_speed.py --bin build/agentkv --llama-server build-srv/bin/llama-server
Outputs bench/out/decode_speed/decode_speed.{json,csv,md}.
"""
import argparse
import os
import shutil
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
from lib import log  # noqa: E402

SUB = "decode_speed"


def gap_ms(r):
    """Mean ms between the first and the last streamed piece of one response."""
    t = r["token_ms"]
    if r["status"] != 200 or len(t) < 2:
        raise RuntimeError("request failed or too short: %s %s" % (r["status"], r.get("error")))
    return (t[-1] - t[0]) / (len(t) - 1), len(t)


def measure(srv, args, prompt, is_agentkv, label):
    rows = []
    for i in range(args.reqs + 1):  # request 0 warms up
        if is_agentkv:
            body = {"prompt": prompt, "max_tokens": args.max_tokens, "temperature": 0, "stream": True,
                    "ignore_eos": True}
            r = lib.stream_request(srv.port, "/v1/completions", body, {"X-Agent-Id": "decode-%d" % i})
        else:
            body = {"prompt": prompt, "n_predict": args.max_tokens, "temperature": 0, "stream": True,
                    "ignore_eos": True, "cache_prompt": False}
            r = lib.stream_request(srv.port, "/completion", body)
        ms, pieces = gap_ms(r)
        if i > 0:
            rows.append({"server": label, "req": i, "ms_per_token": ms, "pieces": pieces,
                         "ttft_ms": r["client_ttft_ms"]})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", help="agentkv binary (repeat to compare several)")
    ap.add_argument("--llama-server", default=os.path.join(lib.ROOT, "build-srv", "bin", "llama-server"))
    ap.add_argument("--model")
    ap.add_argument("--synth-type", default="q4_0")
    ap.add_argument("--text", default=lib.DEFAULT_TEXT)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--reqs", type=int, default=7)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prompt-tokens", type=int, default=200)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    args = ap.parse_args()
    bins = args.bin or [os.path.join(lib.ROOT, "build", "agentkv")]
    args.bin = bins[0]
    lib.resolve_model(args)
    d = lib.out_dir(args, SUB)
    work = os.path.join(d, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    corpus = lib.Corpus(args.text)
    prompt = corpus.slice(1000, args.prompt_tokens)
    rows = []
    for k, b in enumerate(bins):
        label = "agentkv" if len(bins) == 1 else "agentkv[%d] %s" % (k, b)
        args.bin = b
        srv = lib.Agentkv(args, work, name="agentkv%d" % k, slots=1, ctx=args.ctx, kv="q4_0")
        srv.start()
        try:
            log("decode: %s" % label)
            rows += measure(srv, args, prompt, True, label)
        finally:
            srv.stop()
    ls = lib.LlamaServer(args, work, args.ctx, kv="f16")
    ls.start()
    try:
        log("decode: llama-server")
        rows += measure(ls, args, prompt, False, "llama-server")
    finally:
        ls.stop()
    summary = []
    ls_med = lib.med([r["ms_per_token"] for r in rows if r["server"] == "llama-server"])
    for label in dict.fromkeys(r["server"] for r in rows):
        s = lib.summarize([r["ms_per_token"] for r in rows if r["server"] == label])
        summary.append({"server": label, "ms_per_token": s, "ratio_vs_llama_server": lib.ratio(s["median"], ls_med)})
    args.bin = bins[0]
    meta = lib.make_meta(args, SUB)
    meta["agentkv_bins"] = [lib.file_identity(b) for b in bins]
    result = {"meta": meta, "summary": summary, "samples": rows,
              "notes": ["ms per token: mean gap between the first and last streamed piece of one response, "
                        "client side; %d requests of %d tokens after a warm-up, prompt ~%d tokens, -c %d, "
                        "threads %d; agentkv --kv q4_0 with its default slot type; llama-server f16 KV, -fa on, -np 1"
                        % (args.reqs, args.max_tokens, args.prompt_tokens, args.ctx, args.threads)]}
    body = lib.md_table([{"server": s["server"], "ms/token median [min-max]": "%.2f [%.2f-%.2f]" % (
        s["ms_per_token"]["median"], s["ms_per_token"]["min"], s["ms_per_token"]["max"]),
        "ratio ak/ls": s["ratio_vs_llama_server"]} for s in summary],
        ["server", "ms/token median [min-max]", "ratio ak/ls"])
    lib.write_outputs(d, SUB, meta, result, rows, body + "\n" + "\n".join("- " + n for n in result["notes"]) + "\n")
    print(body)


if __name__ == "__main__":
    main()
