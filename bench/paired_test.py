#!/usr/bin/env python3
"""Unit tests of bench/paired.py (run: /usr/bin/python3 bench/paired_test.py; scripts/test.sh runs it)."""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json  # noqa: E402
import tempfile  # noqa: E402

import paired  # noqa: E402
from paired import paired_geomean, machine_of, pairs_from_samples  # noqa: E402


class PairedGeomeanTest(unittest.TestCase):
    def test_constant_ratio_has_a_point_interval(self):
        r = paired_geomean([("m1", 10, 20), ("m1", 5, 10), ("m2", 1, 2)])
        self.assertAlmostEqual(r["geomean"], 2.0)
        self.assertAlmostEqual(r["lo"], 2.0)
        self.assertAlmostEqual(r["hi"], 2.0)
        self.assertEqual((r["n"], r["machines"], r["won"], r["lost"]), (3, 2, 3, 0))

    def test_geomean_is_symmetric_under_swapping_sides(self):
        pairs = [("m", 10, 13), ("m", 11, 9), ("m", 12, 30)]
        a = paired_geomean(pairs)
        b = paired_geomean([(m, y, x) for m, x, y in pairs])
        self.assertAlmostEqual(a["geomean"] * b["geomean"], 1.0)
        self.assertEqual((a["won"], a["lost"]), (b["lost"], b["won"]))

    def test_geomean_of_ratios_not_ratio_of_medians(self):
        # Ratios 2, 2, 0.5: the geometric mean is 2^(1/3), whatever the medians of each side are.
        r = paired_geomean([("m", 1, 2), ("m", 100, 200), ("m", 10, 5)])
        self.assertAlmostEqual(r["geomean"], 2 ** (1 / 3))
        self.assertEqual((r["won"], r["lost"]), (2, 1))

    def test_interval_widens_when_machines_disagree(self):
        one = paired_geomean([("m1", 1, 1.5)] * 10 + [("m1", 1, 1.4)] * 10)
        two = paired_geomean([("m1", 1, 3.0)] * 10 + [("m2", 1, 0.9)] * 10)
        self.assertLess(one["hi"] - one["lo"], two["hi"] - two["lo"])
        self.assertLess(two["lo"], two["geomean"])
        self.assertGreater(two["hi"], two["geomean"])

    def test_deterministic_for_a_seed(self):
        pairs = [("m%d" % (i % 3), 1 + i % 5, 2 + i % 7) for i in range(30)]
        self.assertEqual(paired_geomean(pairs, seed=7), paired_geomean(pairs, seed=7))

    def test_missing_values_are_dropped_and_nonpositive_refused(self):
        self.assertEqual(paired_geomean([("m", None, 1)])["n"], 0)
        with self.assertRaises(ValueError):
            paired_geomean([("m", 0, 1)])
        self.assertTrue(math.isfinite(paired_geomean([("m", 1, 2), ("m", None, 3)])["geomean"]))



def sample(system, what, ctx, pair, ms):
    return {"system": system, "what": what, "context": ctx, "pair": pair, "client_ttft_ms": ms}


class PoolingTest(unittest.TestCase):
    def test_machine_is_boot_id_else_the_call_directory(self):
        self.assertEqual(machine_of({"meta": {"machine": {"boot_id": "b1", "hostname": "vm"}}}, "x.json"), "b1")
        self.assertEqual(machine_of({"meta": {"machine": {"hostname": "vm"}}}, "r/stop/call2/vs/a.json"),
                         os.path.join("r", "stop", "call2"))
        self.assertEqual(machine_of({}, "a.json"), "a.json")

    def test_pairs_match_by_context_and_pair_and_arm(self):
        doc = {"meta": {"machine": {"boot_id": "m"}}, "samples": [
            sample("agentkv", "restart", 2048, 0, 10), sample("llama-server", "restart", 2048, 0, 20),
            sample("llama-server", "restart_ids", 2048, 0, 15), sample("agentkv", "restart", 2048, 1, 10),
            sample("llama-server", "restart", 4096, 1, 99), sample("agentkv", "cold", 2048, 0, 1)]}
        self.assertEqual(pairs_from_samples(doc, "f"), [(2048, "m", 10, 20)])
        self.assertEqual(pairs_from_samples(doc, "f", arm="restart_ids"), [(2048, "m", 10, 15)])
        self.assertEqual(pairs_from_samples(doc, "f", peer="llama-server-stock"), [])

    def test_old_json_pairs_by_rep(self):
        doc = {"samples": [{"system": "agentkv", "what": "restart", "context": 1, "rep": 3, "client_ttft_ms": 4},
                           {"system": "llama-server", "what": "restart", "context": 1, "rep": 3, "client_ttft_ms": 8}]}
        self.assertEqual(pairs_from_samples(doc, "f"), [(1, "f", 4, 8)])

    def test_returning_team_pairs_by_agent_and_rep(self):
        doc = {"meta": {"machine": {"boot_id": "m"}}, "args": {"agents": 2, "tokens": 2048},
               "samples": {"build/agentkv": [[{"ttft_ms": 5}, {"ttft_ms": 6}], [{"ttft_ms": 7}]],
                           "llama-server": [[{"ttft_ms": 10}, {"ttft_ms": 12}], [{"ttft_ms": 21}]]}}
        self.assertEqual(paired.pairs_from_returning(doc, "f"),
                         [("2x2048", "m", 5, 10), ("2x2048", "m", 6, 12), ("2x2048", "m", 7, 21)])
        self.assertEqual(paired.pairs_from_returning({"samples": {"build/agentkv": [[{"ttft_ms": 5}]]}}, "f"), [])

    def test_main_pools_files_of_two_machines(self):
        d = tempfile.mkdtemp()
        paths = []
        for k, ratio in enumerate((2.0, 4.0)):
            doc = {"meta": {"machine": {"boot_id": "boot%d" % k}, "git": {"commit": "c%d" % k}}, "samples": [
                sample("agentkv", "restart", 2048, i, 10) for i in range(3)] + [
                sample("llama-server", "restart", 2048, i, 10 * ratio) for i in range(3)]}
            paths.append(os.path.join(d, "%d.json" % k))
            with open(paths[-1], "w") as f:
                json.dump(doc, f)
        out = os.path.join(d, "out.txt")
        with open(out, "w") as f:
            old, sys.stdout = sys.stdout, f
            try:
                paired.main(paths + ["--json"])
            finally:
                sys.stdout = old
        with open(out) as f:
            r = json.load(f)["2048"]
        self.assertEqual((r["n"], r["machines"], r["won"], r["commits"]), (6, 2, 6, ["c0", "c1"]))
        self.assertAlmostEqual(r["geomean"], 8 ** 0.5)
        self.assertAlmostEqual(r["lo"], 2.0)
        self.assertAlmostEqual(r["hi"], 4.0)


if __name__ == "__main__":
    unittest.main()
