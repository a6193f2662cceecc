#!/usr/bin/env python3
"""Headline ratios of paired measurements (issue 34): the paired geometric mean of per-pair ratios with a 95%
bootstrap interval clustered by machine, and how many pairs each side won.

A pair is one interleaved measurement of both servers under the same conditions (same machine, same context,
back to back), e.g. llama-server's TTFT and ours after the same restart. ratio = baseline / ours, so > 1 means we
are faster. The geometric mean of the ratios is the ratio a typical pair shows, symmetric under swapping the sides
(1/x), unlike a ratio of medians taken over different pairs. The interval resamples machines with replacement and,
within each drawn machine, its pairs with replacement (a two-stage cluster bootstrap): pairs from one machine
share its disk, CPU and noise, so they are not independent draws, and with a single machine the interval
reflects that machine only (say so next to it).

  bench/paired.py FILE.json [...] [--key ak_ms --base ls_ms] [--group context]
reads every object in FILE's "pairs" list (or a top-level list) with the two keys, a "machine" (default: the file)
and a grouping key, and prints one row per group: n, machines, geometric mean, 95% interval, pairs won.
"""
import argparse
import json
import math
import random
import sys


def paired_geomean(pairs, iters=10000, seed=1, level=0.95):
    """pairs: [(machine, ours, baseline), ...] with positive times. Returns {"n", "machines", "geomean",
    "lo", "hi", "won", "lost", "tied"}: geomean of baseline/ours, its cluster-bootstrap interval at `level`,
    and pairs where ours was faster / slower / equal. Deterministic for a given seed."""
    pairs = [(m, float(a), float(b)) for m, a, b in pairs if a is not None and b is not None]
    if not pairs:
        return {"n": 0, "machines": 0, "geomean": None, "lo": None, "hi": None, "won": 0, "lost": 0, "tied": 0}
    if any(a <= 0 or b <= 0 for _, a, b in pairs):
        raise ValueError("paired_geomean: times must be positive")
    by_machine = {}
    for m, a, b in pairs:
        by_machine.setdefault(m, []).append(math.log(b / a))
    clusters = list(by_machine.values())
    logs = [x for c in clusters for x in c]
    est = sum(logs) / len(logs)
    rng = random.Random(seed)
    means = []
    for _ in range(iters):
        drawn = []
        for _ in clusters:
            c = clusters[rng.randrange(len(clusters))]
            drawn.extend(c[rng.randrange(len(c))] for _ in c)
        means.append(sum(drawn) / len(drawn))
    means.sort()
    lo_i = int(math.floor((1 - level) / 2 * iters))
    hi_i = min(iters - 1, int(math.ceil((1 + level) / 2 * iters)) - 1)
    won = sum(1 for _, a, b in pairs if a < b)
    lost = sum(1 for _, a, b in pairs if a > b)
    return {"n": len(pairs), "machines": len(clusters), "geomean": math.exp(est), "lo": math.exp(means[lo_i]),
            "hi": math.exp(means[hi_i]), "won": won, "lost": lost, "tied": len(pairs) - won - lost}


def format_row(label, r):
    if not r["n"]:
        return "%s: no pairs" % label
    return "%s: %.3fx [%.3f, %.3f] (95%% cluster bootstrap), n=%d on %d machine(s), won %d of %d" % (
        label, r["geomean"], r["lo"], r["hi"], r["n"], r["machines"], r["won"], r["n"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--key", default="ak_ms", help="our time in each pair")
    ap.add_argument("--base", default="ls_ms", help="the baseline's time in each pair")
    ap.add_argument("--group", default="context", help="one row per value of this key")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    groups = {}
    for path in args.files:
        with open(path) as f:
            doc = json.load(f)
        items = doc if isinstance(doc, list) else doc.get("pairs", [])
        for p in items:
            groups.setdefault(p.get(args.group), []).append(
                (p.get("machine", path), p.get(args.key), p.get(args.base)))
    rows = {str(g): paired_geomean(ps) for g, ps in sorted(groups.items(), key=lambda kv: str(kv[0]))}
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for g, r in rows.items():
            print(format_row("%s=%s" % (args.group, g), r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
