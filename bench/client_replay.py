#!/usr/bin/env python3
"""Replays the recorded requests of the real coding agents (tests/fixtures/clients/<client>-<version>, written by
tests/e2e-clients) against agentkv: per client, on a fresh server, session 1's turn 1 (cold), turns 2 and 3, then
the first turn of a second session of the same client in the same project, then one probe that measures the
system text and tools the two sessions share. Every recorded request of a turn is sent in its recorded order
(OpenCode's title request included), with its recorded path, headers and body, streamed, with the output capped
at --max-tokens.

The second session is derived from session 1's turn 1 the way the real client changes it (client_sessions.py;
bench/client_replay_test.py checks the derivation against the recorded session2/): a new session id everywhere
it appears (headers, prompt_cache_key, metadata), new per-turn ids (Codex's message and turn ids), Claude Code's
per-session billing hash, and another task text. Its agent is therefore new: only another agent's cache (a
prefix donor, docs/api.md "Shared prefixes") can give it the shared part.

The shared part is what the request renders before its first user message (the system text and tools),
measured in tokens by agentkv itself: the probe is the second session's main request with everything from the
first user message on replaced by one word (explicit agent id, not streamed); its prompt tokens are that part
plus a few, so the check below is slightly stricter than the definition.

Measured per request (client side): TTFT (first streamed text or tool-call token), total time; from agentkv's
usage: prompt, cached, shared_tokens (cached from another agent), prefilled, match, cache state, agent id.
Checks (exit status 1 when one fails): every request answered; session 1's later main turns reuse >= 95% of
their prompt; the second session's first main request reuses >= 95% of the shared part, from another agent.

  /usr/bin/python3 bench/client_replay.py --quick                   # CI smoke run: OpenCode, bundled model
  /usr/bin/python3 bench/client_replay.py --clients claude-code,codex,opencode
  (on the device, by the lead: bench/client_replay.py --bin B/agentkv --model M --ctx 32768 --slots 2 --threads 16)
Outputs bench/out/client_replay/client_replay.{json,csv,md}; server logs in bench/out/client_replay/work/.
The replies in turns 2-3 are the recording's (the client echoes what it got then), not what this run's model
says, so a turn's cache DIVERGEs where this run's reply differs: reuse is that of the prompt up to there. The
recording's temp dir is sent as "$TMP" (a few tokens fewer than the real path).
"""
import argparse
import copy
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_sessions as cs  # noqa: E402
import lib  # noqa: E402
from lib import log  # noqa: E402

SUB = "client_replay"
MIN_REUSE = 0.95
DEFAULTS = {"clients": ",".join(cs.CLIENTS), "ctx": 32768, "slots": 2, "max_tokens": 32, "reps": 1}
QUICK = {"clients": "opencode", "ctx": 8192, "slots": 2, "max_tokens": 8, "reps": 1}
PROBE_AGENT = "shared-part-probe"


# ---------------------------------------------------------------- requests

def capped(fx, max_tokens):
    """The fixture's body as sent on replay: streamed (chat: with usage), its output capped at max_tokens."""
    b = copy.deepcopy(fx["body"])
    b["stream"] = True
    if fx["api"] == "chat":
        b["stream_options"] = {"include_usage": True}
    if fx["api"] == "responses":
        b["max_output_tokens"] = max(16, max_tokens)  # the Responses API's minimum
    else:
        b["max_tokens"] = max_tokens
    return b


def usage_of(api, chunks):
    """{prompt, cached, shared, prefilled, match, state, agent, side_of} from a stream's last usage with agentkv's
    extension (None when the stream had none)."""
    u = None
    for j in chunks:
        cand = j.get("usage") or (j.get("message") or {}).get("usage") or (j.get("response") or {}).get("usage")
        if cand and (cand.get("agentkv") or u):
            u = dict(u or {}, **cand)
    if not u or not u.get("agentkv"):
        return None
    prompt, cached = cs.prompt_cached(api, u)
    ak = u["agentkv"]
    return {"prompt": prompt, "cached": cached, "shared": ak.get("shared_tokens", 0),
            "prefilled": ak.get("tokens_prefilled"), "match": ak.get("match"), "state": ak.get("cache_state"),
            "agent": ak.get("agent_id"), "side_of": ak.get("side_of")}


def send(args, srv, fx, label):
    """One recorded request, streamed; its record (an "error" key where it failed)."""
    headers = {k: v for k, v in fx["headers"].items() if k not in cs.SECRET_HEADERS}
    r = lib.stream_request(srv.port, fx["path"], capped(fx, args.max_tokens), headers)
    rec = {"label": label, "session": fx.get("session", 1), "turn": fx["turn"], "seq": fx["seq"], "kind": fx["kind"],
           "api": fx["api"], "status": r["status"], "ttft_ms": r["client_ttft_ms"], "total_ms": r["total_ms"],
           "text": r["text"][:200]}
    u = usage_of(fx["api"], r["chunks"])
    rec.update(u or {})
    if r["status"] != 200 or r.get("error"):
        rec["error"] = "HTTP %s %s" % (r["status"], str(r.get("error"))[:500])
    elif u is None:
        rec["error"] = "no usage with agentkv's fields in the stream"
    return rec


def probe_shared_part(srv, fx):
    """Prompt tokens of the shared part of main request fx (the module's docstring), or raises."""
    path, body = cs.shared_part_probe(fx)
    st, j, _ = lib.http_json(srv.port, "POST", path, body, {"X-Agent-Id": PROBE_AGENT})
    if st != 200 or not (j or {}).get("usage"):
        raise RuntimeError("shared-part probe: HTTP %s %s" % (st, str(j)[:300]))
    return cs.prompt_cached(fx["api"], j["usage"])[0]


# ---------------------------------------------------------------- one client

def run_client(args, client, rep, workdir, acc):
    """The replay of one client on a fresh server; appends its requests and summary to acc."""
    sessions = cs.load_fixtures(args.fixtures, client)
    s1 = sessions[1]
    s2 = cs.second_session(client, s1[1], cs.SECOND_TASK, seed=rep)
    srv = lib.Agentkv(args, workdir, name="agentkv-%s-rep%d" % (client, rep), slots=args.slots, ctx=args.ctx,
                      kv=args.kv, extra=args.agentkv_extra.split())
    srv.wipe()
    srv.start()
    recs = []
    summary = {"client": client, "rep": rep, "version": s1[1][0]["version"]}
    try:
        plan = [("s1 turn %d" % t, s1[t]) for t in sorted(s1)] + [("s2 turn 1", s2)]
        for label, fixtures in plan:
            for fx in fixtures:
                rec = send(args, srv, fx, label)
                rec.update(client=client, rep=rep)
                recs.append(rec)
                log("%s rep %d %s #%d %s: HTTP %s, TTFT %s ms, prompt %s, cached %s (shared %s), %s%s" % (
                    client, rep, label, fx["seq"], fx["kind"], rec["status"], lib.fmt_cell(rec["ttft_ms"]),
                    rec.get("prompt"), rec.get("cached"), rec.get("shared"), rec.get("match"),
                    ", " + rec["error"] if rec.get("error") else ""))
        s2_main = next(fx for fx in s2 if fx["kind"] == "main")
        summary["shared_part_tokens"] = probe_shared_part(srv, s2_main)
    except Exception as e:  # a dead server, a refused connection: recorded, the next client goes on
        summary["error"] = "%s: %s" % (type(e).__name__, e)
        log("%s rep %d: %s" % (client, rep, summary["error"]))
    finally:
        srv.stop()
        if not args.keep_work:
            srv.wipe()
    acc["requests"] += recs
    acc["clients"].append(cs.summarize(summary, recs, MIN_REUSE))


# ---------------------------------------------------------------- outputs

REQUEST_COLS = ["client", "rep", "label", "seq", "kind", "status", "ttft_ms", "total_ms", "prompt", "cached",
                "shared", "prefilled", "match", "state", "agent"]
SUMMARY_COLS = ["client", "rep", "s1_cold_ttft_ms", "s1_t2_ttft_ms", "s1_t3_ttft_ms", "s2_ttft_ms",
                "s2_vs_cold_ttft", "s1_prompt", "s2_prompt", "s2_cached", "s2_shared", "shared_part_tokens",
                "s2_reuse_of_shared", "ok"]


def markdown(result):
    rows = result["rows"]
    out = ["Per client: TTFT of session 1's turns (turn 1 cold) and of a second session's first turn, and how much "
           "of the system text and tools (shared part, probe-measured) the second session read from the cache.",
           "", lib.md_table(rows, SUMMARY_COLS), "", "Every request:", "",
           lib.md_table(result["requests"], REQUEST_COLS)]
    failed = [c for r in rows for c in r["checks"] if not c["ok"]]
    out += ["", "Checks: %s" % ("all passed" if not failed else "; ".join(c["what"] for c in failed))]
    return "\n".join(out)


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=lib.DEFAULT_BIN, help="agentkv binary")
    ap.add_argument("--model", default=None, help="GGUF path or synth-model preset (default: the bundled model)")
    ap.add_argument("--synth-type", default="q4_0", help="weight type of a generated preset")
    ap.add_argument("--fixtures", default=os.path.join(lib.ROOT, "tests", "fixtures", "clients"))
    ap.add_argument("--clients", help="comma-separated subset of %s (default all; quick opencode)" % ",".join(cs.CLIENTS))
    ap.add_argument("--ctx", type=int, help="agentkv -c per slot (32768: Claude Code's 13K-token prompts fit; quick 8192)")
    ap.add_argument("--slots", type=int, help="agentkv --slots (2)")
    ap.add_argument("--threads", type=int, default=2, help="agentkv -t")
    ap.add_argument("--kv", default="q4_0", help="agentkv --kv (KV type at rest)")
    ap.add_argument("--slot-kv", default=None, help="agentkv --slot-kv (default: the server's, auto)")
    ap.add_argument("--max-tokens", type=int, help="output cap of every request (32; quick 8)")
    ap.add_argument("--reps", type=int, help="repetitions, a fresh server each (1)")
    ap.add_argument("--agentkv-extra", default="", help="extra agentkv serve args (one string)")
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    ap.add_argument("--keep-work", action="store_true", help="keep agentkv's cache dirs under the work dir")
    ap.add_argument("--quick", action="store_true", help="OpenCode only, -c 8192, 8 output tokens, 1 rep")
    args = ap.parse_args(argv)
    lib.fill_defaults(args, QUICK, DEFAULTS)
    args.clients = [c for c in args.clients.split(",") if c]
    bad = [c for c in args.clients if c not in cs.CLIENTS]
    if bad or not args.clients:
        ap.error("--clients: a subset of %s (got %s)" % (",".join(cs.CLIENTS), ",".join(args.clients)))
    if min(args.ctx, args.slots, args.max_tokens, args.reps, args.threads) < 1:
        ap.error("--ctx, --slots, --max-tokens, --reps and --threads must be >= 1")
    if not os.path.exists(args.bin):
        ap.error("agentkv binary not found: %s" % args.bin)
    lib.resolve_model(args)
    return args


def main(argv=None):
    args = parse_args(argv)
    t_start = time.perf_counter()
    d, workdir, meta = lib.start_driver(args, SUB, "client-replay")
    acc = {"requests": [], "clients": []}
    status = "ok"
    try:
        for rep in range(args.reps):
            for client in args.clients:
                run_client(args, client, rep, workdir, acc)
    except KeyboardInterrupt as e:
        status = "interrupted (%s): partial results" % (e or "SIGINT")
        log(status)
    finally:
        lib.stop_all()
    meta.update({"ctx": args.ctx, "slots": args.slots, "max_tokens": args.max_tokens, "clients": args.clients,
                 "fixtures": os.path.relpath(args.fixtures, lib.ROOT), "wall_s": time.perf_counter() - t_start,
                 "status": status})
    result = {"status": status, "rows": acc["clients"], "requests": acc["requests"]}
    md = markdown(result)
    lib.write_outputs(d, SUB, meta, result, acc["clients"], md, SUMMARY_COLS)
    print(md)
    failed = [c["what"] for r in acc["clients"] for c in r["checks"] if not c["ok"]]
    log("client-replay done in %.1f s%s" % (time.perf_counter() - t_start,
                                            ", FAILED: " + "; ".join(failed) if failed else ""))
    return 1 if failed or status != "ok" else 0


if __name__ == "__main__":
    sys.exit(main())
