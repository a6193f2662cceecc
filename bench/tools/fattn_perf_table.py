#!/usr/bin/env python3
"""The A/B table of `test-backend-ops perf -o FLASH_ATTN_EXT` runs: one column per file, a row per decode case.

Each file is one perf run (device-bench's fattn-ops step: GGML_CUDA_FATTN_VEC_GQA=0 and =1, patch 0007); a case's
line is `FLASH_ATTN_EXT(params): ... N runs - X us/run` (ggml's debug lines may sit between the two halves).
Prints Markdown: the case's GQA ratio and sequences (nr23), KV cells, query tokens, K/V type, us per run in each
file, and the first file's time over the last one's. Only cases with one or two query tokens (decode).

  python3 bench/tools/fattn_perf_table.py perf_gqa0.txt perf_gqa1.txt
"""
import re
import sys


def parse(path):
    """{(nr23, kv, nb, type_K): us per run} of one perf run."""
    out, case = {}, None
    for line in open(path, errors="replace"):
        m = re.search(r"FLASH_ATTN_EXT\((.*?)\):", line)
        if m:
            case = dict(re.findall(r"(\w+)=(\[[^\]]*\]|[^,]+)", m.group(1)))
        t = re.search(r"(\d+) runs -\s+([\d.]+) us/run", line)
        if t and case is not None:
            out[(case["nr23"], int(case["kv"]), int(case["nb"]), case["type_K"])] = float(t.group(2))
            case = None
    return out


def main(paths):
    runs = [parse(p) for p in paths]
    names = [p.rsplit("/", 1)[-1] for p in paths]
    print("| nr23 (GQA, sequences) | KV cells | tokens | K/V | " + " | ".join(f"{n} (us)" for n in names) +
          f" | {names[0]} / {names[-1]} |")
    print("|---|---|---|---|" + "---|" * (len(paths) + 1))
    for key in sorted(runs[0], key=lambda k: (k[3], k[1], k[0])):
        if key[2] > 2 or not all(key in r for r in runs):
            continue
        times = [r[key] for r in runs]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | " + " | ".join(f"{t:.1f}" for t in times) +
              f" | {times[0] / times[-1]:.2f}x |")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1:])
