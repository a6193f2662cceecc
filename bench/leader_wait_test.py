#!/usr/bin/env python3
"""Unit test of bench/leader_wait.py's per-arm summary (no server)."""
import os
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import leader_wait  # noqa: E402


def rec(ttft, prefilled, wait, state="resident", match="diverge", prompt=100):
    return {"client_ttft_ms": ttft, "tokens_prefilled": prefilled, "wait_ms": wait, "state": state, "match": match,
            "prompt_tokens": prompt}


class SummarizeArmTest(unittest.TestCase):
    def test_the_first_ttft_is_the_leader_and_the_rest_are_followers(self):
        rs = [rec(90, 20, 60), rec(40, 100, 1, "cold", "miss"), rec(80, 20, 55), rec(120, 20, 70)]
        s = leader_wait.summarize_arm(rs, 150.0)
        self.assertEqual(s["first_ttft_ms"], 40)
        self.assertEqual(s["followers_ttft_p50_ms"], 90)
        self.assertEqual(s["followers_ttft_max_ms"], 120)
        self.assertEqual(s["followers_wait_p50_ms"], 60)
        self.assertEqual(s["prefilled_tokens"], 160)
        self.assertEqual(s["prompt_tokens"], 400)
        self.assertEqual(s["wall_ms"], 150.0)
        self.assertEqual(s["states"], "cold/miss,resident/diverge,resident/diverge,resident/diverge")


if __name__ == "__main__":
    unittest.main()
