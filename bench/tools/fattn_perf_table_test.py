#!/usr/bin/env python3
"""Unit test of fattn_perf_table.py: a perf run's cases are read even with ggml's debug lines between a case's name
and its time (as the H100 runs of stop 30 printed them), and only decode cases (<= 2 query tokens) are tabled."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fattn_perf_table  # noqa: E402

CASE = ("  FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,16],kv=8192,nb=%d,mask=1,sinks=0,max_bias=0.000000,"
        "logit_softcap=0.000000,prec=f32,type_K=q4_0,type_V=q4_0,permute=[0,1,2,3],kv_view=1,v_is_view_of_k=0,"
        "n_kv_max=0): ")


def run_text(us, nb=1):
    return (CASE % nb + "ggml_backend_cuda_graph_compute: CUDA graph warmup reset\n"
            "ggml_backend_cuda_graph_compute: CUDA graph warmup complete\n"
            "              1880 runs -   %.2f us/run -   2.15 GFLOP/run -   3.96 TFLOPS\n" % us)


class FattnPerfTableTest(unittest.TestCase):
    def test_times_across_debug_lines_and_the_ratio(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = os.path.join(d, "off.txt"), os.path.join(d, "on.txt")
            open(a, "w").write(run_text(542.59) + run_text(9000.0, nb=512))
            open(b, "w").write(run_text(270.8) + run_text(9000.0, nb=512))
            self.assertEqual(fattn_perf_table.parse(a), {("[4,16]", 8192, 1, "q4_0"): 542.59,
                                                         ("[4,16]", 8192, 512, "q4_0"): 9000.0})
            out = io.StringIO()
            with redirect_stdout(out):
                fattn_perf_table.main([a, b])
            rows = [line for line in out.getvalue().splitlines() if line.startswith("| [")]
            self.assertEqual(rows, ["| [4,16] | 8192 | 1 | q4_0 | 542.6 | 270.8 | 2.00x |"])  # the prefill case left out


if __name__ == "__main__":
    unittest.main()
