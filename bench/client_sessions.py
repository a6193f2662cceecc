"""The recorded requests of the real coding agents (tests/fixtures/clients, see its README) for
bench/client_replay.py: loading them, deriving a second session from session 1's first turn the way each client
makes a new session, the shared-part probe, each API's prompt/cached usage fields, and a replay's summary and
checks. Pure functions of the fixtures (no server): bench/client_replay_test.py tests them.
"""
import copy
import glob
import json
import os
import random
import re

# The e2e suite's task texts (tests/e2e-clients/clients.test.mjs): session 1's first turn, session 2's.
FIRST_TASK = "Say hello in one short sentence."
SECOND_TASK = "Name one colour, please."
# Headers recorded as "<redacted>": not sent on replay (agentkv without API keys needs none).
SECRET_HEADERS = {"authorization", "x-api-key", "proxy-authorization", "cookie"}

# How each client names its session, and what it keeps from one session to the next (read from the recorded
# session 1 and session2/ of tests/fixtures/clients; client_replay_test.py checks the derivation against them):
#   session_header: the header whose value is the session id (it also appears in the body: Claude Code's
#                   metadata.user_id, Codex's prompt_cache_key and client_metadata);
#   new_ids:        every UUID of the request is per session or per turn (Codex: the turn and message ids),
#                   except the ones `stable_uuids` finds (Codex's installation id);
#   billing:        Claude Code's billing line carries a per-session hash (cc_version=2.1.332.XXX;), which
#                   agentkv keeps out of the rendered text (api/anthropic_json.cc).
CLIENTS = {
    "claude-code": {"session_header": "x-claude-code-session-id", "new_ids": True, "billing": True},
    "codex": {"session_header": "thread-id", "new_ids": True, "billing": False},
    "opencode": {"session_header": "x-session-id", "new_ids": False, "billing": False},
}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
BILLING_HASH = re.compile(r"(cc_version=[0-9.]+\.)([0-9a-f]+)(;)")


def fixture_dir(root, client):
    """The recording of `client` under root (<client>-<version>); raises when there is not exactly one."""
    dirs = [d for d in glob.glob(os.path.join(root, client + "-*")) if os.path.isdir(d)]
    if len(dirs) != 1:
        raise FileNotFoundError("want one recording of %s under %s, found %s" % (client, root, dirs or "none"))
    return dirs[0]


def load_fixtures(root, client):
    """{session: {turn: [fixture, ...] in the order sent}} of `client`'s recording (session 2 where recorded)."""
    d = fixture_dir(root, client)
    sessions = {}
    for s, sub in ((1, d), (2, os.path.join(d, "session2"))):
        for path in sorted(glob.glob(os.path.join(sub, "turn*.json"))):
            with open(path) as f:
                fx = json.load(f)
            fx["file"] = os.path.relpath(path, root)
            sessions.setdefault(s, {}).setdefault(fx["turn"], []).append(fx)
    if 1 not in sessions or 1 not in sessions[1]:
        raise FileNotFoundError("%s: no session 1 turn 1" % d)
    return sessions


def fresh_like(value, rng):
    """A new value of the same shape: every letter and digit replaced by a random one of its class (hex digits
    stay hex), other characters and a leading "ses_"-style prefix kept."""
    prefix, rest = re.match(r"^([a-z]+_)?(.*)$", value, re.S).groups()
    out = []
    for ch in rest:
        if ch in "0123456789abcdef":
            out.append(rng.choice("0123456789abcdef"))
        elif ch.isdigit():
            out.append(rng.choice("0123456789"))
        elif ch.islower():
            out.append(rng.choice("abcdefghijklmnopqrstuvwxyz"))
        elif ch.isupper():
            out.append(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
        else:
            out.append(ch)
    return (prefix or "") + "".join(out)


def stable_uuids(fx):
    """UUIDs the client keeps across sessions: Codex's installation id (client_metadata, turn metadata)."""
    meta = (fx.get("body") or {}).get("client_metadata") or {}
    return {v for k, v in meta.items() if k.endswith("installation-id")}


def second_session(client, turn1, task, seed=0):
    """Session 1's first-turn fixtures `turn1` (a list, in order) as the client's second session in the same
    project would send them: a new session id wherever the old one appears, new per-turn ids, a new billing
    hash (Claude Code), and `task` instead of FIRST_TASK. Raises ValueError when a main request lacks the
    session header or FIRST_TASK (a recording this does not understand)."""
    spec = CLIENTS[client]
    rng = random.Random("%s/%s" % (client, seed))  # a str seed is deterministic; each client its own ids
    main = next((fx for fx in turn1 if fx["kind"] == "main"), None)
    if main is None or spec["session_header"] not in main["headers"]:
        raise ValueError("%s: session 1's first main request has no %s header" % (client, spec["session_header"]))
    old_id = main["headers"][spec["session_header"]]
    new_id = fresh_like(old_id, rng)
    keep = set().union(*(stable_uuids(fx) for fx in turn1))
    ids = {}

    def new_uuid(m):
        u = m.group(0)
        if u in keep:
            return u
        return ids.setdefault(u, fresh_like(u, rng))

    out = []
    for fx in turn1:
        text = json.dumps({"headers": fx["headers"], "body": fx["body"]})
        if json.dumps(FIRST_TASK)[1:-1] not in text:
            raise ValueError("%s: %s does not contain the task %r" % (client, fx.get("file"), FIRST_TASK))
        text = text.replace(json.dumps(FIRST_TASK)[1:-1], json.dumps(task)[1:-1]).replace(old_id, new_id)
        if spec["new_ids"]:
            text = UUID.sub(new_uuid, text)
        if spec["billing"]:
            text = BILLING_HASH.sub(lambda m: m.group(1) + fresh_like(m.group(2), rng) + m.group(3), text)
        changed = json.loads(text)
        new = copy.deepcopy(fx)
        new.update(changed, session=2, file=None, usage=None, reply_text=None)
        out.append(new)
    return out


def _before_first_user(items):
    for i, m in enumerate(items):
        if isinstance(m, dict) and m.get("role") == "user":
            return items[:i]
    return list(items)


def shared_part_probe(fx):
    """(path, body) of the probe that measures the shared part of main request fx: everything from its first
    user message on replaced by the one word "x", not streamed, 2 output tokens (Responses: 16, its minimum)."""
    b = copy.deepcopy(fx["body"])
    b.pop("stream", None)
    b.pop("stream_options", None)
    word = {"role": "user", "content": "x"}
    if fx["api"] == "anthropic":
        b["messages"] = [word]
        b["max_tokens"] = 2
    elif fx["api"] == "responses":
        b["input"] = _before_first_user(b.get("input") or []) + [dict(word, type="message")]
        b["max_output_tokens"] = 16
    else:
        b["messages"] = _before_first_user(b.get("messages") or []) + [word]
        b["max_tokens"] = 2
    return fx["path"], b


def prompt_cached(api, u):
    """(prompt tokens, cached tokens) of a usage object of `api` (anthropic, responses, chat)."""
    if api == "anthropic":
        cached = u.get("cache_read_input_tokens") or 0
        return (u.get("input_tokens") or 0) + cached + (u.get("cache_creation_input_tokens") or 0), cached
    if api == "responses":
        return u.get("input_tokens"), (u.get("input_tokens_details") or {}).get("cached_tokens") or 0
    return u.get("prompt_tokens"), (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0


def summarize(summary, recs, min_reuse):
    """A client's summary row: the main requests' TTFTs and reuse, and its checks [{what, ok}] (every request
    answered; session 1's turns 2+ reuse >= min_reuse of their prompt; session 2's first main request reuses
    >= min_reuse of the shared part, from another agent)."""
    row = dict(summary)
    mains = {r["label"]: r for r in recs if r["kind"] == "main"}
    s1, s2 = mains.get("s1 turn 1"), mains.get("s2 turn 1")
    row.update(s1_cold_ttft_ms=(s1 or {}).get("ttft_ms"), s1_prompt=(s1 or {}).get("prompt"),
               s1_t2_ttft_ms=(mains.get("s1 turn 2") or {}).get("ttft_ms"),
               s1_t3_ttft_ms=(mains.get("s1 turn 3") or {}).get("ttft_ms"),
               s2_ttft_ms=(s2 or {}).get("ttft_ms"), s2_prompt=(s2 or {}).get("prompt"),
               s2_cached=(s2 or {}).get("cached"), s2_shared=(s2 or {}).get("shared"))
    if row["s1_cold_ttft_ms"] and row["s2_ttft_ms"]:
        row["s2_vs_cold_ttft"] = row["s2_ttft_ms"] / row["s1_cold_ttft_ms"]
    shared = row.get("shared_part_tokens")
    if shared and row["s2_cached"] is not None:
        row["s2_reuse_of_shared"] = row["s2_cached"] / shared
    who = "%s rep %s" % (row["client"], row["rep"])
    checks = [{"what": "%s: %s" % (who, row["error"]), "ok": False}] if row.get("error") else []
    checks += [{"what": "%s %s #%s: %s" % (who, r["label"], r["seq"], r["error"]), "ok": False}
               for r in recs if r.get("error")]
    for label in ("s1 turn 2", "s1 turn 3"):
        r = mains.get(label)
        ok = bool(r and r.get("prompt") and r.get("cached", 0) >= min_reuse * r["prompt"])
        checks.append({"what": "%s %s: reused %s of %s prompt tokens (want >= %.0f%%)" % (
            who, label, (r or {}).get("cached"), (r or {}).get("prompt"), 100 * min_reuse), "ok": ok})
    ok = bool(s2 and shared and (s2.get("cached") or 0) >= min_reuse * shared and (s2.get("shared") or 0) > 0
              and s2.get("agent") != (s1 or {}).get("agent"))
    checks.append({"what": "%s s2 turn 1: reused %s of the %s tokens of system text and tools (want >= %.0f%%), "
                           "%s from another agent (%s, session 1: %s)" % (
                               who, (s2 or {}).get("cached"), shared, 100 * min_reuse, (s2 or {}).get("shared"),
                               (s2 or {}).get("agent"), (s1 or {}).get("agent")), "ok": ok})
    row["checks"] = checks
    row["ok"] = all(c["ok"] for c in checks)
    return row
