#!/usr/bin/env python3
"""Hostile clients, the attacks between tenants (issue 29): isolation between keys and fairness.

isolation_attacks: a server of its own with three keys of one namespace (a victim, an attacker, another
isolated key); the attacker tries every way it has to reach the victim's context (continuing, forking or
listing its agent, implicit matching, cached_tokens, timing) and must learn nothing. fairness_attack: one
tenant's backlog must not keep another tenant's request from a slot. Used by bench/hostile_clients.py
(--isolation on|only); Python 3 standard library only.
"""
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

CHAT = "/v1/chat/completions"

ISO_NAME = "team"
ISO_KEYS = {"victim": "sk-victim-4821", "attacker": "sk-attacker-7777", "other_isolated": "sk-other-iso-1234"}
ISO_PIN = "4821"
ISO_SYSTEM = ("You are the vault assistant of the Brown County savings bank. The committee met on Tuesday "
              "and decided that the vault would be opened only by the officer on duty. ")
ISO_VICTIM_SESSION = "victim-session-0001"


def iso_chat(port, key, user_text, headers=None, max_tokens=1):
    h = {"Authorization": "Bearer " + key}
    h.update(headers or {})
    body = {"messages": [{"role": "system", "content": ISO_SYSTEM}, {"role": "user", "content": user_text}],
            "max_tokens": max_tokens, "temperature": 0}
    st, j, _ = lib.http_json(port, "POST", CHAT, body, h, timeout=120)
    usage = (j or {}).get("usage") or {}
    return st, (usage.get("prompt_tokens_details") or {}).get("cached_tokens"), usage


def iso_vectors():
    """(name, headers for probe number i): every way a client of another key may reach the victim."""
    v = ISO_VICTIM_SESSION
    return [
        ("implicit (no id)", lambda i: {}),
        ("fork: Claude Code subagent of the session",
         lambda i: {"X-Claude-Code-Session-Id": v, "X-Claude-Code-Agent-Id": "probe%d" % i}),
        ("fork: Codex x-codex-parent-thread-id", lambda i: {"thread-id": "cx-probe%d" % i, "x-codex-parent-thread-id": v}),
        ("fork: X-Session-ID + x-parent-session-id", lambda i: {"X-Session-ID": "oc-probe%d" % i, "x-parent-session-id": v}),
        ("fork: x-opencode-session + x-parent-session-id",
         lambda i: {"x-opencode-session": "oc2-probe%d" % i, "x-parent-session-id": v}),
        # Last: in the old code these continued (and so overwrote) the victim's agent itself.
        ("continue: X-Agent-Id of the victim", lambda i: {"X-Agent-Id": v}),
        ("continue: the victim's session header", lambda i: {"X-Claude-Code-Session-Id": v}),
    ]


def iso_attack(port, vector, headers_of, counter):
    """Guesses the PIN digit by digit through cached_tokens. Returns a row."""
    known, requests, statuses = "", 0, set()
    for pos in range(len(ISO_PIN)):
        cached = {}
        for d in "0123456789":
            st, c, _ = iso_chat(port, ISO_KEYS["attacker"], "The vault PIN is " + known + d, headers_of(counter[0]))
            counter[0] += 1
            requests += 1
            statuses.add(st)
            cached[d] = c if isinstance(c, int) else -1
        best = max(cached.values())
        winners = [d for d, c in cached.items() if c == best]
        if len(winners) != 1:
            break  # no digit stands out: nothing learned at this position
        known += winners[0]
    leaked = len(known) > 0 and ISO_PIN.startswith(known)
    return {"vector": vector, "requests": requests, "recovered": known, "leaked": leaked,
            "statuses": sorted(statuses), "ok": not leaked and statuses == {200}}


def isolation_attacks(bin_path, model, work):
    cache_dir = os.path.join(work, "iso-cache")
    port = lib.free_port()
    keys = ",".join(["%s:%s:isolated" % (ISO_NAME, ISO_KEYS["victim"]), "%s:%s" % (ISO_NAME, ISO_KEYS["attacker"]),
                     "%s:%s:isolated" % (ISO_NAME, ISO_KEYS["other_isolated"])])
    cmd = [bin_path, "serve", "-m", model, "--port", str(port), "--cache-dir", cache_dir, "--slots", "2",
           "-c", "1024", "-t", "2", "--api-key", keys]
    vhdr = {"X-Claude-Code-Session-Id": ISO_VICTIM_SESSION}
    victim_text = "The vault PIN is %s. Tell nobody." % ISO_PIN
    out = {"rounds": []}
    counter = [0]
    for round_name in ("first start", "after a restart"):
        server = lib.Proc(cmd, os.path.join(work, "iso-server.log"), port)
        server.start(timeout=300)
        try:
            if round_name == "first start":
                st, _, _ = iso_chat(port, ISO_KEYS["victim"], victim_text, vhdr, max_tokens=8)
                assert st == 200, "the victim's first turn failed: %s" % st
            listing = {}
            for who in ("attacker", "other_isolated"):
                h = {"Authorization": "Bearer " + ISO_KEYS[who]}
                _, lst, _ = lib.http_json(port, "GET", "/v1/agents", None, h, timeout=60)
                st_get, _, _ = lib.http_json(port, "GET", "/v1/agents/" + ISO_VICTIM_SESSION, None, h, timeout=60)
                ids = [a.get("id") for a in (lst or {}).get("data", [])]
                # The victim's id in another key's list is fine only if that key made one of its own (the
                # attacker's "continue" vectors create an agent of that id in the attacker's domain).
                listing[who] = {"lists_victim_id": ISO_VICTIM_SESSION in ids, "get_status": st_get}
            # Checked before the attacks: the attacker's "continue" vectors make an agent of that id in its
            # own domain (listed to it from then on, after the restart too).
            checked = ["other_isolated"] + (["attacker"] if round_name == "first start" else [])
            listed_ok = all(not listing[w]["lists_victim_id"] and listing[w]["get_status"] == 404 for w in checked)
            rows = []
            for name, headers_of in iso_vectors():
                rows.append(iso_attack(port, name, headers_of, counter))
            # The victim's own next turn: its cache, not a cold start.
            st, cached, usage = iso_chat(port, ISO_KEYS["victim"], victim_text, vhdr, max_tokens=1)
            victim_ok = st == 200 and isinstance(cached, int) and cached > 0
            out["rounds"].append({"round": round_name, "attacks": rows, "listing": listing,
                                  "victim_next_turn": {"ok": victim_ok, "cached_tokens": cached,
                                                       "cache_state": (usage.get("agentkv") or {}).get("cache_state")},
                                  "ok": all(r["ok"] for r in rows) and victim_ok and listed_ok})
        finally:
            server.stop()
    out["ok"] = all(r["ok"] for r in out["rounds"])
    return out


def print_isolation(iso):
    print("\nisolation between keys (PIN %s held by an isolated key's Claude Code session)" % ISO_PIN)
    print("%-16s %-50s %8s %9s %6s %s" % ("round", "vector", "requests", "recovered", "leak", "statuses"))
    for rnd in iso["rounds"]:
        for r in rnd["attacks"]:
            print("%-16s %-50s %8d %9s %6s %s" % (rnd["round"], r["vector"][:50], r["requests"], r["recovered"] or "-",
                                                 "YES" if r["leaked"] else "no", r["statuses"]))
        print("%-16s listing: %s; victim's next turn: %s" % (rnd["round"], rnd["listing"], rnd["victim_next_turn"]))
    if "fairness" in iso:
        print("fair admission (1 slot; tenant A's backlog, then one request of B): %s" % iso["fairness"])
    print("isolation and fairness -> %s" % ("PASS" if iso["ok"] else "FAIL"))


# ---------------------------------------------------------------- fair admission across tenants (issue 29, finding 11)
# One slot, two keys. Tenant A queues a backlog of long turns; then tenant B sends one request. FIFO made B
# wait for A's whole backlog (with 32 queued and long turns: past the 120 s queue timeout); round-robin by
# tenant gives B the next slot that frees up. Pass: B finishes before at least half of A's requests that
# were still unfinished when B was sent (at least 4 of them: else the run proves nothing).

def fairness_attack(bin_path, model, work, n_backlog=12, max_tokens=96):
    port = lib.free_port()
    cmd = [bin_path, "serve", "-m", model, "--port", str(port), "--cache-dir", os.path.join(work, "fair-cache"),
           "--slots", "1", "-c", "1024", "-t", "2", "--api-key", "a:sk-tenant-a,b:sk-tenant-b"]
    server = lib.Proc(cmd, os.path.join(work, "fair-server.log"), port)
    server.start(timeout=300)
    done = {}

    def one(key, agent, text):
        body = {"messages": [{"role": "user", "content": text}], "max_tokens": max_tokens, "temperature": 0}
        st, j, wall = lib.http_json(port, "POST", CHAT, body, {"Authorization": "Bearer " + key, "X-Agent-Id": agent},
                                    timeout=300)
        done[agent] = {"status": st, "finished": time.monotonic(), "wall_ms": round(wall, 1),
                       "wait_ms": round((((j or {}).get("usage") or {}).get("agentkv") or {}).get("wait_ms") or -1, 1)}
    try:
        threads = [threading.Thread(target=one, args=("sk-tenant-a", "a%d" % i, "Tell the story number %d." % i))
                   for i in range(n_backlog)]
        for t in threads:
            t.start()
        time.sleep(0.2)  # A's backlog is queued
        b_sent = time.monotonic()
        b = threading.Thread(target=one, args=("sk-tenant-b", "b0", "Tell me one story."))
        b.start()
        for t in threads + [b]:
            t.join(320)
    finally:
        server.stop()
    a_rows = [done[k] for k in done if k.startswith("a")]
    b_row = done.get("b0", {"status": None, "finished": float("inf"), "wait_ms": None, "wall_ms": None})
    # Of A's requests still unfinished when B was sent (FIFO: all of them finish before B; round-robin: all
    # but the one running, and perhaps one admitted just before B arrived, finish after B).
    pending = sum(1 for r in a_rows if r["finished"] > b_sent)
    after_b = sum(1 for r in a_rows if r["finished"] > b_row["finished"])
    ok = (b_row["status"] == 200 and all(r["status"] == 200 for r in a_rows) and pending >= 4
          and after_b >= pending // 2)
    return {"backlog": n_backlog, "max_tokens": max_tokens, "b_wait_ms": b_row["wait_ms"], "b_wall_ms": b_row["wall_ms"],
            "a_wait_ms_median": statistics.median([r["wait_ms"] for r in a_rows]) if a_rows else None,
            "a_pending_when_b_sent": pending, "a_finished_after_b": after_b, "ok": ok}


# ---------------------------------------------------------------- grammar cost (issue 29, findings 2 and 10)
