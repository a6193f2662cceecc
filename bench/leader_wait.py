#!/usr/bin/env python3
"""Agents arriving together with the same new prefix (issue 32, item 3): what waiting for a leader costs them.

When several agents of a namespace arrive at once with a system text nobody has cached, agentkv lets the first
one (the leader) prefill it and makes the others wait until the leader's slot holds it, then copies it into
theirs (sched/prefix_donor.h): the text is prefilled once, and the followers pay a head-of-line wait of at most
the leader's prefill. The control arm is the same burst from an isolated key (docs/api.md, "Trust domains and
isolated keys"): its agents are never seeded, so each prefills the whole text itself, side by side in its slot.

One agentkv process (--slots N, two keys: `team:KEY` and `solo:KEY:isolated`); per rep, both arms, their order
alternating, with the same texts (the two namespaces never share; each rep's texts are new, so nothing is
cached) and N agents sent at once (one
thread each, a barrier): ~--shared-tokens tokens of the prefix, "Task of <agent>:" and ~--own-tokens of its own,
streamed /v1/completions, --max-tokens tokens (ignore_eos, temperature 0). Reported per arm: the burst's wall
time (first request sent -> last response done), the TTFT of the first agent and of the others (the followers),
the prompt tokens the burst prefilled (usage.agentkv.tokens_prefilled, summed) and the followers' wait for the
leader (wait_ms); and paired ratios isolated / shared over the reps (bench/paired.py's geometric mean with a
95% interval; > 1: sharing is faster).

  python3 bench/leader_wait.py --bin build/agentkv --reps 5
Outputs bench/out/leader_wait/leader_wait.{json,csv,md}.
"""
import argparse
import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import paired  # noqa: E402
from lib import log  # noqa: E402

SUB = "leader_wait"
KEYS = {"shared": "team-key-0001", "isolated": "solo-key-0001"}


def burst(srv, key, prefix, owns, max_tokens, tag):
    """Sends one request per own text at once; returns the per-agent records and the burst's wall ms."""
    results = [None] * len(owns)
    barrier = threading.Barrier(len(owns))

    def one(i):
        agent = "%s-agent-%02d" % (tag, i)
        prompt = "%s\n\nTask of %s: %s" % (prefix, agent, owns[i])
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}
        barrier.wait()
        r = lib.stream_request(srv.port, "/v1/completions", body,
                               {"X-Agent-Id": agent, "Authorization": "Bearer " + key})
        usage = next((j["usage"] for j in r["chunks"] if j.get("usage")), None) or {}
        ak = usage.get("agentkv") or {}
        results[i] = {"agent": agent, "status": r["status"], "error": r.get("error"), "t0": r["t0"],
                      "end": r["t0"] + r["total_ms"] / 1000.0, "client_ttft_ms": r["client_ttft_ms"],
                      "prompt_tokens": usage.get("prompt_tokens"), "tokens_prefilled": ak.get("tokens_prefilled"),
                      "shared_tokens": ak.get("shared_tokens"), "wait_ms": ak.get("wait_ms"),
                      "state": ak.get("cache_state"), "match": ak.get("match")}

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(owns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = [r for r in results if r is None or r["status"] != 200]
    if bad:
        raise RuntimeError("burst %s: failed requests: %s" % (tag, bad[:2]))
    wall_ms = (max(r["end"] for r in results) - min(r["t0"] for r in results)) * 1000.0
    return results, wall_ms


def summarize_arm(results, wall_ms):
    by_ttft = sorted(results, key=lambda r: r["client_ttft_ms"])
    followers = by_ttft[1:]
    return {"wall_ms": wall_ms, "first_ttft_ms": by_ttft[0]["client_ttft_ms"],
            "followers_ttft_p50_ms": lib.med([r["client_ttft_ms"] for r in followers]),
            "followers_ttft_max_ms": max(r["client_ttft_ms"] for r in followers),
            "followers_wait_p50_ms": lib.med([r["wait_ms"] or 0.0 for r in followers]),
            "prefilled_tokens": sum(r["tokens_prefilled"] or 0 for r in results),
            "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in results),
            "states": ",".join(sorted("%s/%s" % (r["state"], r["match"]) for r in results))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    lib.add_side_by_side_args(ap, "held-out text the prefixes are cut from")
    ap.add_argument("--agents", type=int, default=4, help="agents per burst (and --slots)")
    ap.add_argument("--shared-tokens", type=int, default=2000)
    ap.add_argument("--own-tokens", type=int, default=100)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=None, help="-c (default: what one prompt needs, rounded up)")
    ap.add_argument("--agentkv-extra", default="", help="extra agentkv serve args (one string)")
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    args = ap.parse_args(argv)
    if args.agents < 2 or args.reps < 1 or args.shared_tokens < 1:
        ap.error("need --agents >= 2, --reps >= 1, --shared-tokens >= 1")
    lib.resolve_model(args)
    d, work, meta = lib.start_driver(args, SUB, "leader_wait")
    corpus = lib.Corpus(args.text)
    # (the corpus' chars per token vary by slice: a quarter of margin)
    ctx = args.ctx or ((int(1.25 * (args.shared_tokens + args.own_tokens)) + args.max_tokens + 64 + 255) // 256) * 256
    extra = ["--api-key", "team:" + KEYS["shared"], "--api-key", "solo:%s:isolated" % KEYS["isolated"]]
    extra += args.agentkv_extra.split()
    srv = lib.Agentkv(args, work, slots=args.agents, ctx=ctx, extra=extra)
    reps = []
    try:
        srv.start()
        sample = corpus.text[:1500]
        st, j, _ = lib.http_json(srv.port, "POST", "/v1/completions", {"prompt": sample, "max_tokens": 1},
                                 {"X-Agent-Id": "calibrate", "Authorization": "Bearer " + KEYS["shared"]})
        if st != 200:
            raise RuntimeError("calibration failed: %s %s" % (st, j))
        corpus.cpt = len(sample) / max(1, j["usage"]["prompt_tokens"])
        # Every burst gets text nobody has sent: a new prefix slice and new own slices.
        stride = args.shared_tokens + args.agents * args.own_tokens + 50
        slot = 1
        for rep in range(args.reps):
            order = ["shared", "isolated"] if rep % 2 == 0 else ["isolated", "shared"]
            row = {"rep": rep, "order": "/".join(order)}
            # The same texts for both arms (their namespaces never share), new ones each rep.
            base = slot * stride
            slot += 1
            prefix = corpus.slice(base, args.shared_tokens)
            owns = [corpus.slice(base + args.shared_tokens + 10 + i * args.own_tokens, args.own_tokens)
                    for i in range(args.agents)]
            for arm in order:
                results, wall = burst(srv, KEYS[arm], prefix, owns, args.max_tokens, "r%d-%s" % (rep, arm))
                row[arm] = summarize_arm(results, wall)
                row[arm + "_requests"] = results
                log("rep %d %s: wall %.0f ms, first TTFT %.0f ms, followers TTFT p50 %.0f ms, prefilled %d (%s)" % (
                    rep, arm, wall, row[arm]["first_ttft_ms"], row[arm]["followers_ttft_p50_ms"],
                    row[arm]["prefilled_tokens"], row[arm]["states"]))
            reps.append(row)
    finally:
        srv.stop()

    metrics = ["wall_ms", "first_ttft_ms", "followers_ttft_p50_ms", "followers_ttft_max_ms"]
    machine = lib.boot_id() or "this machine"
    ratios = {m: paired.paired_geomean([(machine, r["shared"][m], r["isolated"][m]) for r in reps]) for m in metrics}
    csv_rows, md_rows = [], []
    for arm in ["shared", "isolated"]:
        agg = {"arm": arm}
        for m in metrics + ["followers_wait_p50_ms", "prefilled_tokens", "prompt_tokens"]:
            agg[m] = lib.med([r[arm][m] for r in reps])
        csv_rows.append(agg)
        md_rows.append(agg)
    ratio_rows = [{"what": m, "isolated / shared": g["geomean"], "95% lo": g["lo"], "95% hi": g["hi"],
                   "reps shared faster": g["won"], "reps": g["n"]} for m, g in ratios.items()]
    body = "\n".join([
        "### medians over %d reps (%d agents at once, ~%d shared + ~%d own tokens, %d tokens each, %d slots)" % (
            args.reps, args.agents, args.shared_tokens, args.own_tokens, args.max_tokens, args.agents),
        "", lib.md_table(md_rows, list(md_rows[0].keys())), "",
        "### paired ratios (geometric mean over reps of isolated / shared; > 1: sharing the prefix is faster)", "",
        lib.md_table(ratio_rows, list(ratio_rows[0].keys())), "",
        "- shared: a non-isolated key, whose agents start from a leader's slot once it holds the prefix "
        "(sched/prefix_donor.h); isolated: an isolated key, never seeded, each agent prefills the prefix itself",
        "- followers = every agent but the one with the earliest TTFT; wait_ms = usage.agentkv.wait_ms (queued, "
        "which for a follower is its wait for the leader)"])
    result = {"config": {k: getattr(args, k) for k in ["agents", "shared_tokens", "own_tokens", "max_tokens", "reps",
                                                         "threads"]} | {"ctx": ctx},
              "reps": reps, "ratios": ratios, "medians": md_rows}
    lib.write_outputs(d, SUB, meta, result, csv_rows, body)
    print(body)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        lib.stop_all()
