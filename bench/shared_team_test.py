#!/usr/bin/env python3
"""Unit tests of bench/shared_team.py's plan and bench/shared_team_report.py's summaries, on synthetic request
records (run: /usr/bin/python3 bench/shared_team_test.py; scripts/test.sh runs it; no server)."""
import argparse
import os
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import shared_team  # noqa: E402
import shared_team_report as report  # noqa: E402


def make_args(**kw):
    a = dict(shared_team.DEFAULTS, agents=2, new_agents=1, rounds=3, restart_before=1, reps=2, own_tokens=50,
             shared_tokens=100, sides=["agentkv", "ls-q4_0"], threads=2, ctx=1024, cache_ram=None, agentkv_extra="",
             ls_extra="", drop="fadvise", text=lib.DEFAULT_TEXT, model_path=lib.DEFAULT_MODEL)
    a.update(kw)
    return argparse.Namespace(**a)


def req(side, rep, rnd, t0, total_ms, ttft_ms, prompt=100, reused=50, new=False, **kw):
    r = {"side": side, "rep": rep, "round": rnd, "t0": t0, "client_total_ms": total_ms, "client_ttft_ms": ttft_ms,
         "prompt_tokens": prompt, "reused_tokens": reused, "completion_tokens": 8, "new": new}
    r.update(kw)
    return r


class PlanTest(unittest.TestCase):
    def test_every_agent_starts_with_the_same_shared_text_then_its_own_task(self):
        corpus = lib.Corpus(lib.DEFAULT_TEXT)
        args = make_args()
        plan = shared_team.make_plan(corpus, args)
        shared = corpus.slice(shared_team.SHARED_BASE, args.shared_tokens)
        self.assertEqual([a["name"] for a in plan], ["agent-00", "agent-01", "new-00"])
        self.assertTrue(all(a["head"].startswith(shared + "\n\nTask of ") for a in plan))
        own = [a["head"][len(shared):] for a in plan]
        self.assertEqual(len(set(x.split(":\n", 1)[1] for x in own)), 3)  # distinct tasks
        self.assertEqual([a["first_round"] for a in plan], [0, 0, 2])
        self.assertEqual(sorted(plan[2]["lines"]), [2])  # the new agent sends in the last round only
        self.assertEqual(sorted(plan[0]["lines"]), [0, 1, 2])

    def test_phase_labels_follow_the_issue(self):
        args = make_args(rounds=4, restart_before=2, new_agents=8)
        self.assertEqual([report.phase(args, r) for r in range(4)],
                         ["all cold", "all hot", "after a restart", "+ 8 new agents"])


class RoundStatsTest(unittest.TestCase):
    def test_wall_is_first_send_to_last_response_and_new_agents_apart(self):
        rs = [req("agentkv", 0, 0, 10.0, 1000, 100), req("agentkv", 0, 0, 10.5, 2000, 300),
              req("agentkv", 0, 0, 10.2, 500, 200, prompt=40, reused=0, new=True, agentkv={"wait_ms": 150}),
              {"agent": "x", "error": "HTTP 500", "new": False}]
        st = report.round_stats(rs)
        self.assertAlmostEqual(st["wall_ms"], 2500.0)  # 10.0 -> 10.5 + 2.0 s
        self.assertEqual((st["errors"], st["prompt_tokens"], st["reused_tokens"]), (1, 240, 100))
        self.assertEqual((st["ttft_p50_ms"], st["ttft_p95_ms"]), (200, 300))
        self.assertEqual((st["new_agents"], st["new_ttft_p50_ms"], st["new_reused_tokens"]), (1, 200, 0))
        self.assertEqual(st["new_wait_p50_ms"], 150)  # the new agent's admission wait (agentkv's usage)
        self.assertAlmostEqual(st["gen_tps"], 24 / 2.5)


class StepStatsTest(unittest.TestCase):
    def test_means_per_pass_and_restores_summed(self):
        delta = {"agentkv_decode_ms": (10, 300.0), "agentkv_loop_iteration_ms": (10, 320.0),
                 "agentkv_decode_only_ms": (8, 200.0), "agentkv_decode_only_context_tokens": (8, 80000.0),
                 "agentkv_batch_prefill_tokens": (10, 4096.0)}
        rs = [{"agentkv": {"restore_ms": 8.0}}, {"agentkv": {"restore_ms": 0.0}}, {"agentkv": None}, {}]
        st = report.step_stats(delta, rs)
        self.assertEqual((st["passes"], st["decode_only_passes"]), (10, 8))
        self.assertAlmostEqual(st["decode_ms_mean"], 30.0)
        self.assertAlmostEqual(st["iteration_ms_mean"], 32.0)
        self.assertAlmostEqual(st["decode_only_ms_mean"], 25.0)
        self.assertAlmostEqual(st["decode_only_cells_mean"], 10000.0)
        self.assertAlmostEqual(st["prefill_tokens_per_pass"], 409.6)
        self.assertAlmostEqual(st["restore_ms_sum"], 8.0)

    def test_no_passes_and_no_server_give_none(self):
        idle = {k: (0, 0.0) for k in shared_team.STEP_HISTOGRAMS}
        self.assertIsNone(report.step_stats(idle, [])["decode_only_ms_mean"])
        self.assertIsNone(report.step_stats(None, [])["passes"])


class RatiosTest(unittest.TestCase):
    def records(self, rounds_done=3):
        out = []
        for rep in range(2):
            for rnd in range(3):
                out.append(req("agentkv", rep, rnd, 0.0, 1000, 10))  # 1 s a round
                if rnd < rounds_done or rep == 0:
                    out.append(req("ls-q4_0", rep, rnd, 0.0, 2000, 10))  # 2 s a round
        return out

    def test_agentkv_over_llama_server_is_below_one_when_agentkv_is_faster(self):
        args = make_args()
        res = report.build(args, self.records(), [], {}, {}, [])
        s = [x for x in res["ratios"] if x["what"] == "sum of rounds"][0]
        self.assertAlmostEqual(s["ratio"], 0.5)
        self.assertEqual((s["n"], s["agentkv_faster"]), (2, 2))
        self.assertEqual({t["side"]: t["sum_median_ms"] for t in res["totals"]}, {"agentkv": 3000, "ls-q4_0": 6000})

    def test_an_interrupted_rep_has_no_sum(self):
        args = make_args()
        res = report.build(args, self.records(rounds_done=1), [], {}, {}, [])
        self.assertEqual([(x["side"], x["rep"]) for x in res["rep_sums"]], [("agentkv", 0), ("agentkv", 1),
                                                                           ("ls-q4_0", 0)])
        s = [x for x in res["ratios"] if x["what"] == "sum of rounds"][0]
        self.assertEqual(s["n"], 1)
        self.assertIn("sum", report.markdown(args, res))


class NewAgentsPooledTest(unittest.TestCase):
    def test_the_p50_pools_every_reps_new_agents(self):
        # rep 0's two new agents were admitted at once, rep 1's waited a wave: each rep's own p50 is one of them,
        # the pooled p50 is taken over all four (nearest rank: index round(0.5 * 3) = 2 of 100, 200, 2100, 2200)
        reqs = [req("agentkv", 0, 2, 0.0, 3000, t, new=True) for t in (100, 200)] + \
               [req("agentkv", 1, 2, 0.0, 3000, t, new=True) for t in (2100, 2200)] + \
               [req("agentkv", 0, 2, 0.0, 3000, 50), {"agent": "x", "side": "agentkv", "rep": 1, "round": 2,
                                                       "new": True, "error": "HTTP 500"}]
        args = make_args(reps=2, rounds=3, new_agents=2)
        res = report.build(args, reqs, [], {}, {}, [])
        self.assertEqual(res["new_agents_pooled"], [{"side": "agentkv", "n": 4, "reps": 2, "ttft_p50_ms": 2100}])
        self.assertIn("every rep pooled | TTFT p50 2.10 s (4 new agents of 2 reps)", report.markdown(args, res))

if __name__ == "__main__":
    unittest.main()
