#!/usr/bin/env python3
"""Unit tests of bench/client_sessions.py (bench/client_replay.py's fixtures, second sessions, probe, checks) on
the recorded requests of tests/fixtures/clients, and of lib.stream_piece (run: /usr/bin/python3
bench/client_replay_test.py; scripts/test.sh runs it; no server)."""
import json
import os
import re
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_sessions as cs  # noqa: E402
import lib  # noqa: E402

FIXTURES = os.path.join(lib.ROOT, "tests", "fixtures", "clients")
UNIX_MS = re.compile(r"\b1[0-9]{12}\b")


def normalized(client, fx):
    """headers + body with what no two sessions share masked: the session id, UUIDs, the billing hash, unix-ms
    timestamps."""
    text = json.dumps({"headers": fx["headers"], "body": fx["body"]}, sort_keys=True)
    text = text.replace(fx["headers"][cs.CLIENTS[client]["session_header"]], "<session>")
    text = cs.UUID.sub("<uuid>", text)
    text = cs.BILLING_HASH.sub(r"\1<h>\3", text)
    return json.loads(UNIX_MS.sub("<ms>", text))


def uuids(fx):
    return set(cs.UUID.findall(json.dumps({"headers": fx["headers"], "body": fx["body"]})))


class SecondSessionTest(unittest.TestCase):
    def test_derived_second_session_is_the_recorded_one(self):
        """Derived from session 1's turn 1, the second session's requests equal the recorded session2/ ones up to
        the values no two sessions share, and keep exactly the ids the real client kept."""
        for client in cs.CLIENTS:
            with self.subTest(client=client):
                sessions = cs.load_fixtures(FIXTURES, client)
                self.assertIn(2, sessions, "%s: no session2/ recorded" % client)
                real = sessions[2][1]
                derived = cs.second_session(client, sessions[1][1], cs.SECOND_TASK, seed=7)
                self.assertEqual([f["kind"] for f in derived], [f["kind"] for f in real])
                for d, r, s1 in zip(derived, real, sessions[1][1]):
                    self.assertEqual(normalized(client, d), normalized(client, r), "%s vs %s" % (s1["file"], r["file"]))
                    self.assertEqual(uuids(d) & uuids(s1), uuids(r) & uuids(s1), r["file"])
                    header = cs.CLIENTS[client]["session_header"]
                    self.assertNotEqual(d["headers"][header], s1["headers"][header])
                    self.assertEqual(len(d["headers"][header]), len(s1["headers"][header]))
                    self.assertEqual(d["session"], 2)

    def test_a_recording_without_the_task_is_refused(self):
        s1 = cs.load_fixtures(FIXTURES, "opencode")[1][1]
        with self.assertRaises(ValueError):
            cs.second_session("opencode", [dict(f, body={"messages": []}) for f in s1], cs.SECOND_TASK)

    def test_fresh_like_keeps_the_shape(self):
        import random
        rng = random.Random(1)
        for v in ("0c126835-ac1c-497f-9482-c66e7a8cea66", "ses_dc88fe17affez90XbE5IHWnuwV"):
            n = cs.fresh_like(v, rng)
            self.assertNotEqual(n, v)
            self.assertEqual(len(n), len(v))
            self.assertEqual(re.sub(r"[0-9A-Za-z]", "a", n), re.sub(r"[0-9A-Za-z]", "a", v))
        self.assertTrue(cs.fresh_like("ses_abc", rng).startswith("ses_"))


class ProbeTest(unittest.TestCase):
    def test_probe_keeps_what_comes_before_the_first_user_message(self):
        for client in cs.CLIENTS:
            with self.subTest(client=client):
                main = next(f for f in cs.load_fixtures(FIXTURES, client)[1][1] if f["kind"] == "main")
                path, b = cs.shared_part_probe(main)
                self.assertEqual(path, main["path"])
                self.assertNotIn("stream", b)
                self.assertEqual(b["tools"], main["body"]["tools"])
                items = b.get("messages") or b.get("input")
                self.assertEqual(items[-1]["content"], "x")
                self.assertFalse(any(m.get("role") == "user" for m in items[:-1]))
                self.assertNotIn(cs.FIRST_TASK, json.dumps(b))
        codex = next(f for f in cs.load_fixtures(FIXTURES, "codex")[1][1] if f["kind"] == "main")
        self.assertEqual(len(cs.shared_part_probe(codex)[1]["input"]), 3)  # its two developer messages + "x"

    def test_prompt_cached_per_api(self):
        self.assertEqual(cs.prompt_cached("anthropic", {"input_tokens": 5, "cache_read_input_tokens": 90,
                                                        "cache_creation_input_tokens": 5}), (100, 90))
        self.assertEqual(cs.prompt_cached("responses", {"input_tokens": 100,
                                                        "input_tokens_details": {"cached_tokens": 90}}), (100, 90))
        self.assertEqual(cs.prompt_cached("chat", {"prompt_tokens": 100}), (100, 0))


def rec(label, prompt, cached, shared=0, agent="a", **kw):
    return dict({"label": label, "seq": 0, "kind": "main", "prompt": prompt, "cached": cached, "shared": shared,
                 "agent": agent, "ttft_ms": 10.0}, **kw)


class SummarizeTest(unittest.TestCase):
    def recs(self, s2_cached, s2_shared=900, s2_agent="b"):
        return [rec("s1 turn 1", 1000, 0, ttft_ms=100.0), rec("s1 turn 2", 1020, 1000), rec("s1 turn 3", 1040, 1020),
                rec("s2 turn 1", 1000, s2_cached, s2_shared, s2_agent, ttft_ms=20.0)]

    def test_passes_when_the_second_session_reuses_the_shared_part(self):
        row = cs.summarize({"client": "c", "rep": 0, "shared_part_tokens": 900}, self.recs(880), 0.95)
        self.assertTrue(row["ok"], row["checks"])
        self.assertAlmostEqual(row["s2_vs_cold_ttft"], 0.2)
        self.assertAlmostEqual(row["s2_reuse_of_shared"], 880 / 900)

    def test_fails_below_95_percent_from_the_same_agent_or_not_shared(self):
        for recs in (self.recs(800), self.recs(880, s2_shared=0), self.recs(880, s2_agent="a")):
            row = cs.summarize({"client": "c", "rep": 0, "shared_part_tokens": 900}, recs, 0.95)
            self.assertFalse(row["ok"])
            self.assertEqual([c["ok"] for c in row["checks"]], [True, True, False])

    def test_fails_on_an_error_or_a_missing_probe(self):
        recs = self.recs(880)
        recs[1]["error"] = "HTTP 500"
        self.assertFalse(cs.summarize({"client": "c", "rep": 0, "shared_part_tokens": 900}, recs, 0.95)["ok"])
        self.assertFalse(cs.summarize({"client": "c", "rep": 0, "error": "probe"}, self.recs(880), 0.95)["ok"])


class StreamPieceTest(unittest.TestCase):
    def test_each_api(self):
        self.assertEqual(lib.stream_piece({"choices": [{"text": "a"}]}), "a")
        self.assertEqual(lib.stream_piece({"choices": [{"delta": {"content": "b"}}]}), "b")
        self.assertEqual(lib.stream_piece({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": "{"}}]}}]}),
                         "{")
        self.assertIsNone(lib.stream_piece({"choices": [], "usage": {}}))
        self.assertEqual(lib.stream_piece({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "c"}}),
                         "c")
        self.assertEqual(lib.stream_piece({"type": "content_block_delta", "delta": {"partial_json": "{\"a"}}), "{\"a")
        self.assertIsNone(lib.stream_piece({"type": "message_start", "message": {"content": []}}))
        self.assertEqual(lib.stream_piece({"type": "response.output_text.delta", "delta": "d"}), "d")
        self.assertIsNone(lib.stream_piece({"type": "response.created", "response": {}}))
        self.assertEqual(lib.stream_piece({"content": "e"}), "e")


if __name__ == "__main__":
    unittest.main()
