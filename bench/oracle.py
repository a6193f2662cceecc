"""Comparing a restored agent's answer with a cold oracle's (issue 33).

exact      the answers must be equal byte for byte (CPU: the default configuration is exact, docs/engine.md).
near-tie   (GPU) llama.cpp's CUDA kernels make logits depend on the batch shape, so two correct runs may pick
           different tokens where the model's top two candidates are nearly tied. The oracle's answer is asked
           with logprobs (top 2); its "sure" prefix is its tokens before the first step whose top-2 gap is below
           TIE nats. The answer must equal the oracle's answer, or share its sure prefix and differ only after it
           (counted as `after_near_tie`, not a failure). A difference before the first near-tie is a mismatch: a
           real corruption looks exactly like that.

stdlib only.
"""

# The gap (nats) below which two candidates count as tied on the GPU. Measured on the H200 (stop 29,
# EngineTest.LogitsOfEveryPositionDoNotDependOnTheBatchShape via `scripts/device-bench.sh gpu-tests`): batch
# shapes move a logit of the bundled model by up to 0.22, so a top-2 gap by up to 0.44; 0.5 sits above that.
# (0.1 before stop 29 flagged answers whose first difference was at gaps of 0.103-0.130: docs/engine.md.)
TIE = 0.5

EQUAL, AFTER_NEAR_TIE, MISMATCH = "equal", "after_near_tie", "mismatch"


def _gap(entry):
    top = entry.get("top_logprobs") or []
    return top[0]["logprob"] - top[1]["logprob"] if len(top) >= 2 else None


def sure_prefix_bytes(logprobs_content, tie=TIE):
    """The oracle's bytes before its first near-tie, from a chat choice's logprobs.content
    (each entry: token, logprob, bytes, top_logprobs with >= 2 alternatives)."""
    out = bytearray()
    for entry in logprobs_content:
        gap = _gap(entry)
        if gap is None or gap < tie:
            break
        out += bytes(entry["bytes"])
    return bytes(out)


def compare(got, want, want_logprobs=None, tie=TIE):
    """EQUAL, AFTER_NEAR_TIE or MISMATCH. Without want_logprobs (exact mode) only EQUAL or MISMATCH."""
    if got == want:
        return EQUAL
    if want_logprobs is None:
        return MISMATCH
    sure = sure_prefix_bytes(want_logprobs, tie)
    g = got.encode("utf-8", "surrogateescape")
    w = want.encode("utf-8", "surrogateescape")
    if len(sure) >= len(w):  # no near-tie within the answer: it had to be equal
        return MISMATCH
    return AFTER_NEAR_TIE if g[:len(sure)] == sure and w.startswith(sure) else MISMATCH


def divergence(got, want, want_logprobs):
    """Where `got` leaves the oracle's answer, for a report: the index of the oracle's token that holds the first
    differing byte, that step's top-2 gap (nats) and the smallest gap before it (None where unknown). A
    difference at a step whose gap is just above TIE reads differently from one at a step the model was sure of."""
    g = got.encode("utf-8", "surrogateescape")
    w = want.encode("utf-8", "surrogateescape")
    first = next((i for i in range(min(len(g), len(w))) if g[i] != w[i]), min(len(g), len(w)))
    pos, gaps = 0, []
    for k, entry in enumerate(want_logprobs or []):
        n = len(entry.get("bytes") or [])
        if pos + n > first:
            # Whether `got` took the oracle's second candidate at that step (a swap of the top two, as batch-shape
            # noise makes; a corruption would rarely pick exactly the runner-up).
            top = entry.get("top_logprobs") or []
            second = top[1].get("bytes") if len(top) >= 2 else None
            if second is None and len(top) >= 2:
                second = list(top[1]["token"].encode("utf-8", "surrogateescape"))
            runner_up = bool(second) and g[pos:pos + len(second)] == bytes(second)
            return {"token": k, "gap_nats": _gap(entry), "min_gap_before_nats": min(gaps) if gaps else None,
                    "took_runner_up": runner_up}
        gaps.append(_gap(entry) if _gap(entry) is not None else float("inf"))
        pos += n
    return {"token": len(want_logprobs or []), "gap_nats": None, "min_gap_before_nats": min(gaps) if gaps else None,
            "took_runner_up": False}
