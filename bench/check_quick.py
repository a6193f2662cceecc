#!/usr/bin/python3
"""Checks that the benchmark outputs under bench/out/ are well-formed (not how fast anything was).

  bench/check_quick.py [--out bench/out] [--only ttft,capacity,...] [--strict]

For each benchmark: the JSON parses and has its required keys, the CSV has a header and rows, the Markdown
has a table, the PNG (where matplotlib is installed) starts with the PNG signature. vs-llama-server and ppl
may say "not available" (llama-server not built / `agentkv ppl` missing) unless --strict.
Semantic oddities (a warm request that the server did not report as warm, ...) are warnings, errors with --strict;
a failed reuse check of client-replay (a second session of a coding agent that does not reuse the shared system
text and tools) is an error.
Exit status 0 = all good.
"""
import argparse
import csv
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PNG_SIG = b"\x89PNG\r\n\x1a\n"

SPECS = {
    "ttft": {"dir": "ttft", "name": "ttft", "png": "ttft.png", "keys": ["summary", "samples", "bandwidth"],
             "row_list": "summary", "row_keys": ["context", "tokens", "state", "match", "server_ttft_ms",
                                                 "client_ttft_ms", "server_min", "server_max", "n", "floor_ms"]},
    "vs-llama-server": {"dir": "vs-llama-server", "name": "vs-llama-server", "png": None, "keys": ["status", "summary"],
                        "optional": True, "row_list": "summary",
                        "row_keys": ["context", "ak_cold_ms", "ls_cold_ms", "ratio_cold", "ak_hit_ms", "ls_hit_ms",
                                     "ak_restart_ms", "ls_restart_ms", "ratio_restart"]},
    "capacity": {"dir": "capacity", "name": "capacity", "png": None, "keys": ["table", "verified", "budget_bytes"],
                 "row_list": "verified", "row_keys": ["kv", "context", "tokens", "computed_fit", "measured_fit",
                                                      "bytes_per_token_spec", "bytes_per_token_measured"],
                 "extra_csv": ["capacity_verified.csv"]},
    "ppl": {"dir": "ppl", "name": "ppl", "png": None, "keys": ["status", "rows", "reference"], "optional": True,
            "row_list": "rows", "row_keys": ["ctx", "kv", "ppl", "delta_pct_vs_f16"]},
    "prisoners": {"dir": "scenario-prisoners", "name": "prisoners", "png": "prisoners.png",
                  "keys": ["summary", "turns", "transcripts_identical"], "row_list": "summary",
                  "row_keys": ["phase", "turns", "p_ttft_sum_ms", "c_ttft_sum_ms", "p_wall_ms", "c_wall_ms"]},
    "routing": {"dir": "scenario-routing", "name": "routing", "png": "routing.png", "keys": ["summary", "requests"],
                "row_list": "summary", "row_keys": ["phase", "requests", "ttft_median_ms", "ttft_min_ms",
                                                    "ttft_max_ms", "states"]},
    "shared-team": {"dir": "shared_team", "name": "shared_team", "png": None,
                    "keys": ["config", "kv_types", "rows", "totals", "ratios", "requests"], "row_list": "rows",
                    "row_keys": ["round", "phase", "side", "wall_ms", "ttft_p50_ms", "ttft_p95_ms", "gen_tps",
                                 "prompt_tokens", "reused_tokens", "new_ttft_p50_ms", "new_reused_tokens"]},
    "client-replay": {"dir": "client_replay", "name": "client_replay", "png": None,
                      "keys": ["status", "rows", "requests"], "row_list": "rows",
                      "row_keys": ["client", "rep", "s1_cold_ttft_ms", "s2_ttft_ms", "s2_cached",
                                   "shared_part_tokens", "s2_reuse_of_shared", "checks", "ok"]},
}
META_KEYS = ["subcommand", "date", "command_line", "machine", "git", "model", "threads"]
MACHINE_KEYS = ["cpu_model", "usable_cpus", "logical_cpus", "ram_bytes"]


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except Exception:
        return False


def check_one(key, spec, out, strict, errors, warnings):
    d = os.path.join(out, spec["dir"])
    base = os.path.join(d, spec["name"])

    def err(msg):
        errors.append("%s: %s" % (key, msg))

    def warn(msg):
        (errors if strict else warnings).append("%s: %s" % (key, msg))

    try:
        with open(base + ".json") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        err("%s.json: %s" % (spec["name"], e))
        return
    meta = doc.get("meta") or {}
    for k in META_KEYS:
        if k not in meta:
            err("meta.%s missing" % k)
    for k in MACHINE_KEYS:
        if k not in (meta.get("machine") or {}):
            err("meta.machine.%s missing" % k)
    if not (meta.get("git") or {}).get("commit"):
        warn("meta.git.commit empty")
    for k in spec["keys"]:
        if k not in doc:
            err("key %r missing" % k)
    unavailable = doc.get("status") == "not available"
    if unavailable:
        if not doc.get("reason"):
            err("status 'not available' without a reason")
        (errors if strict else warnings).append("%s: not available: %s" % (key, doc.get("reason")))
    else:
        if doc.get("status") not in (None, "ok"):
            warn("status %r" % doc.get("status"))
        rows = doc.get(spec["row_list"]) or []
        if not rows:
            err("%s is empty" % spec["row_list"])
        for i, r in enumerate(rows):
            missing = [k for k in spec["row_keys"] if k not in r]
            if missing:
                err("%s[%d] lacks %s" % (spec["row_list"], i, missing))
                break
        semantic(key, doc, warn, err)
    # CSV
    for cf in [spec["name"] + ".csv"] + spec.get("extra_csv", []):
        p = os.path.join(d, cf)
        try:
            with open(p, newline="") as f:
                rows = list(csv.reader(f))
        except OSError as e:
            err("%s: %s" % (cf, e))
            continue
        if not rows or not rows[0]:
            err("%s has no header" % cf)
        elif len(rows) < 2 and not unavailable:
            err("%s has no data rows" % cf)
        elif any(len(r) != len(rows[0]) for r in rows[1:]):
            err("%s: ragged rows" % cf)
    # Markdown
    try:
        md = open(base + ".md").read()
        if not md.startswith("# ") or ("|---" not in md and not unavailable):
            err("%s.md has no title or no table" % spec["name"])
    except OSError as e:
        err("%s.md: %s" % (spec["name"], e))
    # PNG
    if spec["png"] and not unavailable:
        p = os.path.join(d, spec["png"])
        if os.path.exists(p):
            with open(p, "rb") as f:
                head = f.read(8)
            if head != PNG_SIG:
                err("%s is not a PNG" % spec["png"])
            elif os.path.getsize(p) < 1000:
                err("%s is suspiciously small" % spec["png"])
        elif have_matplotlib():
            err("%s missing although matplotlib is installed" % spec["png"])
        else:
            warnings.append("%s: %s not written (matplotlib not installed)" % (key, spec["png"]))


def semantic(key, doc, warn, err):
    """Oddities are warn()ed; a broken property the benchmark exists to show is err()ed."""
    if key == "ttft":
        states = {r["state"] for r in doc["summary"]}
        for s in ("cold", "warm", "hot", "resident"):
            if s not in states:
                warn("no %s rows" % s)
        for r in doc["summary"]:
            if not r.get("ok", True):
                warn("context %s %s/%s: server reported %s/%s" % (r["context"], r["state"], r["match"],
                                                                   r.get("reported_states"), r.get("reported_matches")))
            if r.get("server_ttft_ms") is None or r.get("server_ttft_ms") <= 0:
                warn("context %s %s: no server TTFT" % (r["context"], r["state"]))
    elif key == "capacity":
        for v in doc["verified"]:
            if v.get("measured_fit") is None or v.get("computed_fit") is None:
                warn("%s %s: fit not measured" % (v.get("kv"), v.get("context")))
            elif abs(v["measured_fit"] - v["computed_fit"]) > 1:
                warn("%s %s: measured %s vs computed %s agents" % (v["kv"], v["context"], v["measured_fit"],
                                                                   v["computed_fit"]))
    elif key == "prisoners":
        if len(doc["turns"]) != 50:
            warn("expected 25 turns x 2 modes, got %d" % len(doc["turns"]))
    elif key == "routing":
        phases = [r["phase"] for r in doc["summary"]]
        for r in doc["summary"]:
            want = "cold" if "cold" in r["phase"] else "warm" if "(warm)" in r["phase"] else None
            if want and r.get("states") != want:
                warn("phase %r: server reported %s" % (r["phase"], r.get("states")))
        if len(phases) < 3:
            warn("expected >= 3 phases, got %s" % phases)
    elif key == "shared-team":
        for r in doc["rows"]:
            if r.get("errors"):
                warn("round %s %s: %s failed requests" % (r["round"], r["side"], r["errors"]))
            if r["side"] == "agentkv" and r["round"] > 0 and not r.get("reused_tokens"):
                warn("round %s: agentkv reused no tokens of its returning agents" % r["round"])
    elif key == "client-replay":
        # The second session's first turn reads >= 95% of the system text and tools from another agent's cache
        # (and session 1's later turns >= 95% of their prompt): bench/client_sessions.py's checks.
        for r in doc["rows"]:
            for c in r.get("checks") or [{"what": "%s: no checks" % r.get("client"), "ok": False}]:
                if not c.get("ok"):
                    err(c.get("what"))
    elif key == "ppl":
        for r in doc.get("rows", []):
            if not r.get("ppl"):
                warn("ctx %s kv %s: no perplexity" % (r.get("ctx"), r.get("kv")))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--only", help="comma-separated subset of: " + ",".join(SPECS))
    ap.add_argument("--strict", action="store_true")
    a = ap.parse_args(argv)
    keys = a.only.split(",") if a.only else list(SPECS)
    errors, warnings = [], []
    for k in keys:
        if k not in SPECS:
            errors.append("unknown benchmark %r" % k)
            continue
        check_one(k, SPECS[k], a.out, a.strict, errors, warnings)
    for w in warnings:
        print("warning:", w)
    for e in errors:
        print("ERROR:", e)
    print("check_quick: %d benchmark(s), %d error(s), %d warning(s)" % (len(keys), len(errors), len(warnings)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
