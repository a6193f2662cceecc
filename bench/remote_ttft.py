#!/usr/bin/env python3
"""TTFT of a returning agent from the remote tier (Redis) vs local disk (warm) vs cold (docs/remote.md).

Two `agentkv serve --slots 1` processes (A, B) with separate cache dirs share one redis-server started here on
loopback (nothing persisted: Redis holds the blocks in RAM). Per context size and repetition, a fresh agent:
  cold    its first request on A (fresh id, the whole prompt prefilled);
  remote  the same prompt on B, which has never seen the agent: fetched from Redis, verified, imported (its
          write-through to B's disk is queued after; exact match, max_tokens 1);
  warm    on B again after `evict_only` and with B's cache files dropped from the page cache: B's own disk.
Before the remote request the script waits until A's push of the agent landed in Redis (its /metrics).
Also reports the remote path's effective throughput: bytes read from Redis / the server's read_ms.

  /usr/bin/python3 bench/remote_ttft.py --contexts 1024,4096 --reps 5 --threads 2
Outputs bench/out/remote/remote_ttft.{json,csv,md}.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402


def start_redis(workdir):
    port = lib.free_port()
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", workdir, "--maxmemory", "4gb",
                          "--maxmemory-policy", "allkeys-lru"],
                         stdout=open(os.path.join(workdir, "redis.log"), "ab"), stderr=subprocess.STDOUT)
    for _ in range(200):
        r = subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return p, port
        time.sleep(0.05)
    p.kill()
    raise RuntimeError("redis-server did not start")


def metric(srv, name):
    return lib.prom_sum(srv.metrics(), name)


def wait_for(pred, what, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--contexts", default="1024,4096")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--bin", default=lib.DEFAULT_BIN)
    ap.add_argument("--text", default=lib.DEFAULT_TEXT)
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    ap.add_argument("--drop", default="fadvise", choices=["fadvise", "drop_caches", "none"])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    args.model = None
    lib.resolve_model(args)
    contexts = [int(c) for c in args.contexts.split(",")]
    d = lib.out_dir(args, "remote")
    work = os.path.join(d, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    meta = lib.make_meta(args, "remote-ttft")
    ctx = max(contexts) + 512
    redis, rport = start_redis(work)
    remote = ["--remote", "redis://127.0.0.1:%d" % rport]
    a = lib.Agentkv(args, work, name="A", slots=1, ctx=ctx, extra=remote)
    b = lib.Agentkv(args, work, name="B", slots=1, ctx=ctx, extra=remote)
    samples = []
    try:
        a.start()
        b.start()
        corpus = lib.Corpus(args.text)
        corpus.calibrate(a)
        for n in contexts:
            for rep in range(args.reps + 1):  # rep 0: unmeasured warm-up
                agent = "r%d-%d" % (n, rep)
                prompt = corpus.slice(rep * 97, n)
                pushed = metric(a, "agentkv_remote_manifests_written_total")
                cold = a.complete(agent, prompt)
                wait_for(lambda: metric(a, "agentkv_remote_manifests_written_total") > pushed, "A's push")
                read_before = metric(b, "agentkv_remote_read_bytes_total")
                rem = b.complete(agent, prompt)
                rem["remote_read_bytes"] = metric(b, "agentkv_remote_read_bytes_total") - read_before
                st, _ = b.evict(agent)
                assert st == 200, st
                files = lib.files_under(b.cache_dir)
                lib.drop_page_cache(files, args.drop)
                resident = lib.resident_fraction(files)
                warm = b.complete(agent, prompt)
                lib.log("n=%d rep=%d cold %.0f ms remote %.1f ms (%s) warm %.1f ms (%s)" % (
                    n, rep, cold["server_ttft_ms"], rem["server_ttft_ms"], rem["state"], warm["server_ttft_ms"],
                    warm["state"]))
                for state, r in (("cold", cold), ("remote", rem), ("warm", warm)):
                    r.pop("token_ms", None)
                    r.pop("text", None)
                    r.update({"context": n, "rep": rep, "measured": rep > 0, "want_state": state})
                    if state == "warm":
                        r["page_cache_resident_fraction"] = resident
                    samples.append(r)
    finally:
        a.stop()
        b.stop()
        redis.terminate()
        redis.wait()
    rows = []
    for n in contexts:
        cold_med = None
        for state in ("cold", "remote", "warm"):
            ss = [s for s in samples if s["context"] == n and s["want_state"] == state and s["measured"]]
            srv = lib.summarize([s["server_ttft_ms"] for s in ss])
            cli = lib.summarize([s["client_ttft_ms"] for s in ss])
            if state == "cold":
                cold_med = srv["median"]
            row = {"tokens": ss[0]["prompt_tokens"], "state": state,
                   "reported_states": ",".join(sorted({s["state"] for s in ss})),
                   "server_ttft_ms": srv["median"], "server_min": srv["min"], "server_max": srv["max"],
                   "client_ttft_ms": cli["median"], "tokens_prefilled": lib.med([s["tokens_prefilled"] for s in ss]),
                   "read_ms": lib.med([s["server_read_ms"] for s in ss]),
                   "speedup_vs_cold": lib.ratio(cold_med, srv["median"]), "n": srv["n"]}
            if state == "remote":
                row["remote_MB_per_s"] = lib.med([s["remote_read_bytes"] / 1e6 / (s["server_read_ms"] / 1e3)
                                                  for s in ss if s["server_read_ms"]])
                row["remote_bytes"] = lib.med([s["remote_read_bytes"] for s in ss])
            rows.append(row)
    cols = ["tokens", "state", "reported_states", "server_ttft_ms", "server_min", "server_max", "client_ttft_ms",
            "tokens_prefilled", "read_ms", "speedup_vs_cold", "remote_bytes", "remote_MB_per_s", "n"]
    md = lib.md_table(rows, cols)
    notes = ("\nremote: fetched from Redis (loopback, in RAM), verified and imported (the write-through to B's disk is queued after); "
             "read_ms = the server's fetch (remote) or disk read (warm). warm: B's own disk after evict_only with "
             "its cache files dropped from the page cache (%s).\n" % args.drop)
    lib.write_outputs(d, "remote_ttft", meta, {"rows": rows, "samples": samples}, rows, md + notes, cols)
    print(md + notes)


if __name__ == "__main__":
    main()
