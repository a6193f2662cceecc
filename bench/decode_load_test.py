#!/usr/bin/env python3
"""Unit tests of bench/decode_load.py's token accounting (run: /usr/bin/python3 bench/decode_load_test.py)."""
import os
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decode_load import summarize, token_gaps  # noqa: E402


class TokenGapsTest(unittest.TestCase):
    def test_one_token_per_piece(self):
        self.assertEqual(token_gaps([10, 12, 15], [1, 1, 1]), [2, 3])

    def test_a_piece_of_k_tokens_gives_k_equal_gaps(self):
        # pieces at 0, 4 (2 tokens), 10 (3 tokens): 2 gaps of 2 ms, 3 of 2 ms
        self.assertEqual(token_gaps([0, 4, 10], [1, 2, 3]), [2, 2, 2, 2, 2])

    def test_first_piece_is_ttft_not_a_gap(self):
        self.assertEqual(token_gaps([50], [1]), [])


class SummarizeTest(unittest.TestCase):
    def test_tokens_counted_by_the_server_not_pieces(self):
        # two streams started together; 5 tokens each by the server's count, 4 pieces each (one piece held 2)
        res = [{"t0": 100.0, "piece_ms": [10, 20, 30, 40], "piece_tokens": [1, 1, 1, 1], "tokens": 5},
               {"t0": 100.0, "piece_ms": [10, 20, 30, 40], "piece_tokens": [1, 2, 1, 1], "tokens": 5}]
        r = summarize("x", 2, res, ("q4_0", "f16", "-"))
        self.assertEqual(r["tokens"], 10)
        self.assertAlmostEqual(r["window_s"], 0.030)
        self.assertAlmostEqual(r["tokens_per_s"], 8 / 0.030)  # 10 tokens minus the 2 first ones
        self.assertEqual(r["merged_tokens"], 1)
        self.assertEqual(r["gaps"], 3 + 4)


if __name__ == "__main__":
    unittest.main()
