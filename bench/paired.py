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

  bench/paired.py FILE.json [...] [--arm restart|restart_ids] [--peer llama-server|llama-server-stock] [--markdown]
pools every FILE (several calls, several machines). A returning_team JSON (bench/returning_team.py with
--llama-server) gives one pair per agent and rep (pairs_from_returning). A vs-llama-server JSON (bench/vs_llama.py) gives its restart
pairs: agentkv's restart and llama-server's `--arm` restart of the same context and pair; the machine is
meta.machine.boot_id (machine_of). Other JSON: every object in its "pairs" list (or a top-level list) with
--key, --base, a "machine" and --group. One row per group (context): n, machines, geometric mean, 95%
interval, pairs won.
"""
import argparse
import json
import math
import os
import random
import re
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


def machine_of(doc, path):
    """The machine a driver's JSON ran on: meta.machine.boot_id (changes at every boot), else, for JSON from
    before boot_id was recorded, the device call it came from (a path component "callN": each call of
    scripts/device-bench.sh ran on a fresh machine), else the file itself."""
    m = ((doc.get("meta") or {}).get("machine") or {}) if isinstance(doc, dict) else {}
    if m.get("boot_id"):
        return m["boot_id"]
    parts = os.path.normpath(path).split(os.sep)
    calls = [i for i, c in enumerate(parts) if re.match(r"call\d+$", c)]
    if calls:
        return os.sep.join(parts[:calls[-1] + 1])
    return path


def pairs_from_samples(doc, path, arm="restart", peer="llama-server", ours="agentkv"):
    """(group, machine, ours_ms, theirs_ms) for every restart pair of a vs-llama-server JSON: agentkv's
    what=restart sample and `peer`'s what=`arm` sample with the same context and pair index (the rep, in JSON
    from before --pairs). Pairs missing either side are left out."""
    machine = machine_of(doc, path)
    key = lambda s: (s.get("context"), s.get("pair", s.get("rep")))  # noqa: E731
    mine = {key(s): s for s in doc.get("samples", []) if s.get("system") == ours and s.get("what") == "restart"}
    out = []
    for s in doc.get("samples", []):
        if s.get("system") == peer and s.get("what") == arm and key(s) in mine:
            out.append((s.get("context"), machine, mine[key(s)].get("client_ttft_ms"), s.get("client_ttft_ms")))
    return out


def pairs_from_returning(doc, path):
    """(group, machine, ours_ms, theirs_ms) for a bench/returning_team.py JSON run with --llama-server: agentkv's
    TTFT of agent i in rep r and llama-server's of the same agent and rep (the same prompt after its own restart;
    interleaved per rep where the JSON says "interleaved", one side after the other in older JSON). Group:
    "<agents>x<tokens>". With several --bin, the first one is ours."""
    samples = doc.get("samples", {})
    ours = next((b for b in samples if b != "llama-server"), None)
    theirs = samples.get("llama-server")
    if ours is None or theirs is None:
        return []
    args = doc.get("args", {})
    group = "%sx%s" % (args.get("agents"), args.get("tokens"))
    machine = machine_of(doc, path)
    out = []
    for mine, peer in zip(samples[ours], theirs):
        for a, b in zip(mine, peer):
            out.append((group, machine, a.get("ttft_ms"), b.get("ttft_ms")))
    return out


def load_pairs(path, args):
    """[(group, machine, ours, baseline)] of one JSON: a vs-llama-server JSON (its samples), or a "pairs" list /
    top-level list of objects with --key, --base, --group and "machine"."""
    with open(path) as f:
        doc = json.load(f)
    if isinstance(doc, dict) and isinstance(doc.get("samples"), dict):
        return pairs_from_returning(doc, path)
    if isinstance(doc, dict) and "samples" in doc and not isinstance(doc.get("pairs"), list):
        return pairs_from_samples(doc, path, args.arm, args.peer)
    items = doc if isinstance(doc, list) else doc.get("pairs", [])
    return [(p.get(args.group), p.get("machine", machine_of(doc, path)), p.get(args.key), p.get(args.base))
            for p in items]


def provenance(path):
    """(commit, date) a driver's JSON names, or ("?", "?")."""
    try:
        with open(path) as f:
            meta = (json.load(f) or {}).get("meta") or {}
    except (OSError, ValueError, AttributeError):
        return "?", "?"
    return (meta.get("git") or {}).get("commit", "?")[:10] or "?", meta.get("date", "?")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="JSON files; several calls' files are pooled")
    ap.add_argument("--arm", default="restart", choices=["restart", "restart_ids"],
                    help="vs-llama-server JSON: llama-server's arm (prompt as text or as token ids)")
    ap.add_argument("--peer", default="llama-server", help="vs-llama-server JSON: llama-server or llama-server-stock")
    ap.add_argument("--key", default="ak_ms", help="a pairs list: our time in each pair")
    ap.add_argument("--base", default="ls_ms", help="a pairs list: the baseline's time in each pair")
    ap.add_argument("--group", default="context", help="one row per value of this key")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table (group, n, machines, ratio, "
                                                            "interval, won, commits)")
    args = ap.parse_args(argv)
    groups, commits = {}, {}
    for path in args.files:
        c, _ = provenance(path)
        for g, m, a, b in load_pairs(path, args):
            groups.setdefault(g, []).append((m, a, b))
            commits.setdefault(g, set()).add(c)
    rows = {str(g): paired_geomean(ps) for g, ps in sorted(groups.items(), key=lambda kv: str(kv[0]))}
    for g in rows:
        rows[g]["commits"] = sorted(commits.get(next(k for k in groups if str(k) == g), []))
    if args.json:
        print(json.dumps(rows, indent=2))
    elif args.markdown:
        print("| %s | ratio (paired geomean) | 95%% interval | pairs won | n | machines | commits |" % args.group)
        print("|---|---|---|---|---|---|---|")
        for g, r in rows.items():
            if r["n"]:
                print("| %s | %.2fx | [%.2f, %.2f] | %d/%d | %d | %d | %s |" % (
                    g, r["geomean"], r["lo"], r["hi"], r["won"], r["n"], r["n"], r["machines"], ", ".join(r["commits"])))
    else:
        for g, r in rows.items():
            print(format_row("%s=%s" % (args.group, g), r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
