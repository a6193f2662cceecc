#!/usr/bin/env python3
"""Unit tests of bench/oracle.py (stdlib unittest)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402


def entry(tok, gap):
    return {"token": tok, "logprob": -0.1, "bytes": list(tok.encode()),
            "top_logprobs": [{"token": tok, "logprob": -0.1}, {"token": "x", "logprob": -0.1 - gap}]}


class OracleTest(unittest.TestCase):
    def test_exact_mode(self):
        self.assertEqual(oracle.compare("ab", "ab"), oracle.EQUAL)
        self.assertEqual(oracle.compare("ab", "ac"), oracle.MISMATCH)

    def test_difference_after_the_first_near_tie_is_counted_not_failed(self):
        lps = [entry("He", 2.0), entry("llo", 1.0), entry(" wor", 0.01), entry("ld", 3.0)]
        self.assertEqual(oracle.sure_prefix_bytes(lps), b"Hello")
        self.assertEqual(oracle.compare("Hello there", "Hello world", lps), oracle.AFTER_NEAR_TIE)

    def test_difference_before_the_first_near_tie_fails(self):
        lps = [entry("He", 2.0), entry("llo", 1.0), entry(" wor", 0.01), entry("ld", 3.0)]
        self.assertEqual(oracle.compare("Help world", "Hello world", lps), oracle.MISMATCH)
        self.assertEqual(oracle.compare("", "Hello world", lps), oracle.MISMATCH)

    def test_no_near_tie_means_the_answers_must_be_equal(self):
        lps = [entry("He", 2.0), entry("llo", 1.0)]
        self.assertEqual(oracle.compare("Help", "Hello", lps), oracle.MISMATCH)
        self.assertEqual(oracle.compare("Hello", "Hello", lps), oracle.EQUAL)

    def test_divergence_names_the_step_and_its_gap(self):
        lps = [entry("He", 2.0), entry("llo", 1.0), entry(" wor", 0.15), entry("ld", 3.0)]
        d = oracle.divergence("Hello there", "Hello world", lps)
        self.assertEqual(d["token"], 2)
        self.assertAlmostEqual(d["gap_nats"], 0.15)
        self.assertAlmostEqual(d["min_gap_before_nats"], 1.0)
        self.assertEqual(oracle.divergence("Help", "Hello world", lps)["token"], 1)
        self.assertFalse(d["took_runner_up"])  # " there" is not the runner-up "x"
        self.assertTrue(oracle.divergence("Hellox", "Hello world", lps)["took_runner_up"])


if __name__ == "__main__":
    unittest.main()
