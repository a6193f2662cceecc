#!/usr/bin/env python3
"""Unit tests of bench/paired.py (run: /usr/bin/python3 bench/paired_test.py; scripts/test.sh runs it)."""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired import paired_geomean  # noqa: E402


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


if __name__ == "__main__":
    unittest.main()
