#!/usr/bin/env python3
"""The RAM tier: two agents alternating on one slot, each turn restored from host RAM (issue 31's "RAM tier"
number, kept through the Scheduler split).

Every server runs one slot. Agent A and agent B (distinct slices of the held-out text, ~--tokens each) are
prefilled cold once; then, for --rounds rounds, A and B send their same prompt again (max_tokens 1, an EXACT
match), so each turn finds the other agent in the slot and its own state in RAM:
  - agentkv (--bin, repeatable: e.g. the code before and after a change): `--slots 1`, its RAM pool at its
    default size; the turn's usage.agentkv.cache_state must say "hot" (restored from the RAM pool);
  - llama-server (--llama-server, optional): `-np 1 --cache-ram --ls-cache-ram-mib`, its prompt cache in RAM
    (the slot's state is saved there when another prompt arrives and restored when it matches); its
    timings.cache_n says how many prompt tokens it restored rather than evaluated.
All servers run at once, idle between their turns, and take turns round by round (the side that goes first
rotates), so every round gives one interleaved pair per agent. TTFT = client time from POST to the first streamed
token. The first --warmup rounds are not recorded.

Output: ram_tier.{json,md} under --out/ram_tier/; the JSON's "pairs" list feeds bench/paired.py:
  bench/paired.py OUT/ram_tier/ram_tier.json --key ak_ms --base ls_ms --group tokens     (vs llama-server)
  bench/paired.py OUT/ram_tier/ram_tier.json --key ak_ms --base ak1_ms --group tokens    (the first --bin vs
                                                                                           the second: > 1 = first faster)
  python3 bench/ram_tier.py --bin build/agentkv --llama-server build-srv/bin/llama-server --tokens 1800
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402


class Side:
    """One server under test: its label, its process and how one turn is sent to it."""

    def __init__(self, label, srv, send):
        self.label, self.srv, self.send = label, srv, send


def agentkv_side(args, k, binary, work, ctx):
    a = argparse.Namespace(**vars(args))
    a.bin = binary
    srv = lib.Agentkv(a, work, name="agentkv%d" % k, slots=1, ctx=ctx, kv=args.kv,
                      extra=args.agentkv_extra.split() if args.agentkv_extra else None)

    def send(agent, prompt):
        r = srv.complete(agent, prompt, 1)
        return {"ttft_ms": r["client_ttft_ms"], "state": r["state"], "match": r["match"],
                "prompt_tokens": r["prompt_tokens"], "restored_tokens": r["cached_tokens"],
                "server_restore_ms": r["server_restore_ms"], "server_wait_ms": r["server_wait_ms"]}
    return Side("ak%d" % k if k else "ak", srv, send)


def llama_server_side(args, work, ctx):
    srv = lib.LlamaServer(args, work, ctx, kv=args.kv, name="llama-server", slots=1, bind=args.ls_bind)
    srv.cmd[srv.cmd.index("--cache-ram") + 1] = str(args.ls_cache_ram_mib)

    def send(agent, prompt):
        r = srv.complete(prompt, 1, slot=0)
        return {"ttft_ms": r["client_ttft_ms"], "state": "cache_n %s" % r["tokens_cached"], "match": None,
                "prompt_tokens": (r["prompt_tokens"] or 0) + (r["tokens_cached"] or 0),
                "restored_tokens": r["tokens_cached"], "first_decode_ms": r["prompt_ms"]}
    return Side("ls", srv, send)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", action="append", help="agentkv binary (repeatable; default build/agentkv)")
    ap.add_argument("--llama-server", help="also measure llama-server with its RAM prompt cache")
    ap.add_argument("--model", default=None, help="GGUF path or synth-model preset (default: the bundled model)")
    ap.add_argument("--synth-type", default="q4_0")
    ap.add_argument("--text", default=lib.DEFAULT_TEXT)
    ap.add_argument("--tokens", type=int, default=1800, help="approximate prompt tokens per agent")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=1, help="rounds not recorded")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv", default="q4_0", help="agentkv --kv; llama-server -ctk/-ctv")
    ap.add_argument("--slot-kv", default=None, help="agentkv --slot-kv (default: the server's)")
    ap.add_argument("--agentkv-extra", default="")
    ap.add_argument("--ls-cache-ram-mib", type=int, default=8192, help="llama-server --cache-ram (MiB)")
    ap.add_argument("--ls-bind", choices=lib.LS_BIND_CHOICES, default="omp")
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    args = ap.parse_args(argv)
    args.bin = args.bin or [lib.DEFAULT_BIN]
    args.quick = False
    a0 = argparse.Namespace(**vars(args))
    a0.bin = args.bin[0]
    lib.resolve_model(a0)
    args.model_path, args.model_label = a0.model_path, a0.model_label
    d, work, meta = lib.start_driver(a0, "ram_tier", "ram_tier")
    meta["agentkv_bins"] = [dict(lib.file_identity(b, full=True), version=lib.binary_version(b)) for b in args.bin]
    if args.llama_server:
        meta["llama_server_bin"] = lib.file_identity(args.llama_server, full=True)
    machine = meta["machine"].get("boot_id") or "this machine"

    sides = []
    try:
        probe = agentkv_side(args, 0, args.bin[0], work, 4096 + 256)
        probe.srv.start()
        corpus = lib.Corpus(args.text)
        corpus.calibrate(probe.srv)
        probe.srv.stop()
        prompts = {"A": corpus.slice(1000, args.tokens), "B": corpus.slice(1000 + 2 * args.tokens, args.tokens)}
        ctx = (int(args.tokens * 1.1) + 64 + 255) // 256 * 256  # the prompt (its estimate may be ~10% low) and 1 token
        sides = [agentkv_side(args, k, b, work, ctx) for k, b in enumerate(args.bin)]
        if args.llama_server:
            sides.append(llama_server_side(args, work, ctx))
        for s in sides:
            s.srv.start()
            for agent, p in prompts.items():  # cold prefill of both; B's turn moves A out of the slot
                s.send(agent, p)
        samples = []
        for rnd in range(args.warmup + args.rounds):
            order = sides[rnd % len(sides):] + sides[:rnd % len(sides)]
            for agent in ("A", "B"):
                for s in order:
                    r = s.send(agent, prompts[agent])
                    r.update({"side": s.label, "agent": agent, "round": rnd, "recorded": rnd >= args.warmup})
                    samples.append(r)
            lib.log("round %d: %s" % (rnd, ", ".join("%s %.1f ms" % (x["side"], x["ttft_ms"])
                                                     for x in samples[-2 * len(sides):])))
    finally:
        for s in sides:
            s.srv.stop()

    rec = [x for x in samples if x["recorded"]]
    pairs = []
    for rnd in sorted({x["round"] for x in rec}):
        for agent in ("A", "B"):
            p = {"machine": machine, "tokens": args.tokens, "round": rnd, "agent": agent}
            for x in rec:
                if x["round"] == rnd and x["agent"] == agent:
                    p[x["side"] + "_ms"] = x["ttft_ms"]
            pairs.append(p)
    summary = []
    for s in sides:
        xs = [x for x in rec if x["side"] == s.label]
        t = [x["ttft_ms"] for x in xs]
        summary.append({"side": s.label, "command": " ".join(s.srv.cmd), "n": len(t),
                        "ttft_ms": lib.summarize(t), "states": sorted({str(x["state"]) for x in xs}),
                        "prompt_tokens": sorted({x["prompt_tokens"] for x in xs}),
                        "restored_tokens_median": lib.med([x["restored_tokens"] or 0 for x in xs])})
    result = {"args": {k: v for k, v in vars(args).items()}, "summary": summary, "pairs": pairs,
              "samples": samples,
              "kv": {"agentkv": "--kv %s at rest; slots: %s (its log's start line says)" % (
                  args.kv, args.slot_kv or "server default"),
                  "llama-server": "-ctk/-ctv %s in its slot and its RAM prompt cache" % args.kv}}
    rows = [{"side": x["side"], "n": x["n"], "ttft_median_ms": x["ttft_ms"]["median"],
             "ttft_min_ms": x["ttft_ms"]["min"], "ttft_max_ms": x["ttft_ms"]["max"],
             "states": " ".join(x["states"]), "restored_tokens": x["restored_tokens_median"]} for x in summary]
    cols = ["side", "n", "ttft_median_ms", "ttft_min_ms", "ttft_max_ms", "states", "restored_tokens"]
    body = ("## Two agents alternating on one slot, ~%d tokens each, %d rounds\n\n" % (args.tokens, args.rounds) +
            lib.md_table(rows, cols) + "\n\n" + "\n".join("- %s: `%s`" % (x["side"], x["command"]) for x in summary) +
            "\n- pairs (round x agent): `bench/paired.py ram_tier.json --key ak_ms --base ls_ms --group tokens`\n")
    lib.write_outputs(d, "ram_tier", meta, result, rows, body, cols)
    for x in summary:
        print("%s: TTFT median %.1f ms [%.1f-%.1f], states %s" % (x["side"], x["ttft_ms"]["median"],
              x["ttft_ms"]["min"], x["ttft_ms"]["max"], x["states"]))
    bad = [x for x in rec if x["side"].startswith("ak") and x["state"] != "hot"]
    if bad:
        print("warning: %d agentkv turns were not restored from RAM (state != hot)" % len(bad))
    return 0


if __name__ == "__main__":
    sys.exit(main())
