#!/usr/bin/env python3
"""Unit tests of bench/vs_llama.py's summary (run: /usr/bin/python3 bench/vs_llama_test.py)."""
import argparse
import os
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vs_llama  # noqa: E402


def ak(pair, ms, read=5.0):
    return {"system": "agentkv", "what": "restart", "context": 2048, "pair": pair, "client_ttft_ms": ms,
            "server_read_ms": read, "server_restore_ms": 1.0, "server_wait_ms": read + 1, "after_restore_ms": 2.0,
            "startup_ms": 1000.0, "startup_ttft_ms": 1000.0 + ms, "state": "warm", "page_cache": "disk"}


def ls(what, pair, ms, handling):
    return {"system": "llama-server", "what": what, "context": 2048, "pair": pair, "client_ttft_ms": ms,
            "restore_ms": ms - handling - 3, "handling_ms": handling, "first_decode_ms": 3.0, "startup_ms": 500.0,
            "startup_ttft_ms": 500.0 + ms}


class SummaryTest(unittest.TestCase):
    def setUp(self):
        self.peer = vs_llama.Peer("llama-server", "ls")
        self.peer.tokenize_ms[2048] = 7.0
        self.kv = {"agentkv": {"at_rest": "q4_0", "in_slots": "f16"},
                   "llama-server": {"at_rest": "q4_0", "in_slots": "q4_0", "bind": "omp"}}
        self.meta = {"machine": {"boot_id": "b", "hostname": "h"}}

    def summary(self, samples):
        return vs_llama.summarize(samples, [2048], [self.peer], self.kv, self.meta, argparse.Namespace())[0]

    def test_text_and_ids_arms_are_paired_apart(self):
        s = [ak(0, 10), ak(1, 20), ls("restart", 0, 20, 8), ls("restart", 1, 40, 8),
             ls("restart_ids", 0, 12, 1), ls("restart_ids", 1, 10, 1)]
        row = self.summary(s)
        self.assertAlmostEqual(row["ratio_restart_paired"], 2.0)
        self.assertEqual(row["ratio_restart_won"], "2/2")
        self.assertAlmostEqual(row["ratio_restart_ids_paired"], (1.2 * 0.5) ** 0.5)
        self.assertEqual(row["ratio_restart_ids_won"], "1/2")
        self.assertEqual(row["restart_pairs_won"], "2/2")

    def test_stages_startup_and_kv_columns(self):
        row = self.summary([ak(0, 10, read=4.0), ls("restart", 0, 20, 8), ls("restart_ids", 0, 13, 1)])
        self.assertEqual((row["ak_read_ms"], row["ak_restore_ms"], row["ak_after_restore_ms"]), (4.0, 1.0, 2.0))
        self.assertEqual((row["ls_handling_ms"], row["ls_ids_handling_ms"], row["ls_first_decode_ms"]), (8, 1, 3.0))
        self.assertEqual(row["ls_tokenize_ms"], 7.0)
        self.assertEqual((row["ak_startup_ttft_ms"], row["ls_startup_ttft_ms"]), (1010.0, 520.0))
        self.assertAlmostEqual(row["ratio_restart_startup_paired"], 520.0 / 1010.0)
        self.assertEqual((row["ak_kv_slots"], row["ls_kv_slots"], row["ls_bind"]), ("f16", "q4_0", "omp"))

    def test_a_pair_missing_one_side_is_left_out(self):
        row = self.summary([ak(0, 10), ak(1, 10), ls("restart", 1, 30, 8)])
        self.assertEqual(row["ratio_restart_won"], "1/1")
        self.assertAlmostEqual(row["ratio_restart_paired"], 3.0)


if __name__ == "__main__":
    unittest.main()
