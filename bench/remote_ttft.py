#!/usr/bin/env python3
"""TTFT of a returning agent from the remote tier (Redis) vs local disk (warm) vs cold (docs/remote.md).

Two `agentkv serve --slots 1` processes (A, B) with separate cache dirs share one redis-server started here on
loopback (nothing persisted: Redis holds the blocks in RAM). Per context size and repetition, a fresh agent:
  cold    its first request on A (fresh id, the whole prompt prefilled);
  remote  the same prompt on B, which has never seen the agent: fetched from Redis, verified, imported (its
          write-through to B's disk is queued after; exact match, max_tokens 1);
  warm    on B again after `evict_only` and with B's cache files dropped from the page cache: B's own disk.
Before the remote request the script waits until A's push of the agent landed in Redis (its /metrics).

--fetch-contexts (large contexts, where one cold prefill costs minutes on a CPU): one cold agent on A, then
`reps` remote fetches of it, each on B restarted with an empty cache dir (so B must fetch it again), each
followed by the warm read as above. Their cold row has n=1.

Remote path throughput against loopback (table "bandwidth"): the remote fetch's effective rate (bytes read
from Redis / the server's read_ms, which covers manifest + pipelined block GETs on up to 4 connections +
checksum verification), next to three baselines on the same machine and Redis:
  python GET   the very same block keys (the agent's, found by diffing Redis's keys around A's push),
               pipelined over one connection by a Python client, 5 times per sample;
  redis-bench  redis-benchmark GETs of one value of the median block size, 4 connections, pipeline 8
               (C client: what Redis + loopback serve for values of that size);
  tcp          one loopback TCP stream, 256 MB (the kernel's copy rate, no Redis).

  /usr/bin/python3 bench/remote_ttft.py --contexts 1024,4096 --reps 5 --threads 2
  /usr/bin/python3 bench/remote_ttft.py --contexts 1024,4096 --fetch-contexts 16384 --reps 5 \
      --redis-server /path/to/redis-server --redis-benchmark /path/to/redis-benchmark
  /usr/bin/python3 bench/remote_ttft.py --model llama-3.1-8b.gguf --contexts 4096 --fetch-contexts 32768 ...
Outputs bench/out/remote/remote_ttft.{json,csv,md}.
"""
import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import redis_local  # noqa: E402


def metric(srv, name):
    return lib.prom_sum(srv.metrics(), name)


def wait_for(pred, what, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


BLOCK_KEYS = "agentkv:v1:*:b:*"


def one_agent(args, a, b, redis, agent, prompt, n, rep, samples, cold=None, restart_b=False):
    """cold on A (unless `cold` is given: that agent's earlier cold sample), remote and warm on B; appends the
    samples. The remote sample carries the agent's block keys' loopback GET timing (python client)."""
    if cold is None:
        keys_before = set(redis.keys(BLOCK_KEYS))
        pushed = metric(a, "agentkv_remote_manifests_written_total")
        cold = a.complete(agent, prompt)
        wait_for(lambda: metric(a, "agentkv_remote_manifests_written_total") > pushed, "A's push")
        cold["block_keys"] = sorted(set(redis.keys(BLOCK_KEYS)) - keys_before)
        cold.update({"context": n, "rep": rep, "measured": rep > 0, "want_state": "cold"})
        samples.append(cold)
    if restart_b:
        b.stop()
        b.wipe()
        b.start()
    read_before = metric(b, "agentkv_remote_read_bytes_total")
    rem = b.complete(agent, prompt)
    rem["remote_read_bytes"] = metric(b, "agentkv_remote_read_bytes_total") - read_before
    rem["python_get"] = redis_local.time_gets(redis.port, cold["block_keys"]) if cold["block_keys"] else []
    st, _ = b.evict(agent)
    assert st == 200, st
    files = lib.files_under(b.cache_dir)
    lib.drop_page_cache(files, args.drop)
    resident = lib.resident_fraction(files)
    warm = b.complete(agent, prompt)
    lib.log("n=%d rep=%d cold %.0f ms remote %.1f ms (%s, read %.1f ms, %d B) warm %.1f ms (%s)" % (
        n, rep, cold["server_ttft_ms"], rem["server_ttft_ms"], rem["state"], rem["server_read_ms"] or 0,
        rem["remote_read_bytes"], warm["server_ttft_ms"], warm["state"]))
    for state, r in (("remote", rem), ("warm", warm)):
        r.update({"context": n, "rep": rep, "measured": rep > 0, "want_state": state})
        if state == "warm":
            r["page_cache_resident_fraction"] = resident
        samples.append(r)
    return cold


def mbps(nbytes, ms):
    return nbytes / 1e6 / (ms / 1e3) if ms else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--contexts", default="1024,4096")
    ap.add_argument("--fetch-contexts", default="", help="one cold prefill each, then reps remote fetches")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--kv", default="q4_0", choices=["q4_0", "q8_0", "f16"])
    ap.add_argument("--bin", default=lib.DEFAULT_BIN)
    ap.add_argument("--text", default=lib.DEFAULT_TEXT)
    ap.add_argument("--model", default=None, help="GGUF path or synth-model preset (default: the bundled model)")
    ap.add_argument("--synth-type", default="q4_0", help="weight type of a generated preset")
    ap.add_argument("--out", default=os.path.join(lib.ROOT, "bench", "out"))
    ap.add_argument("--drop", default="fadvise", choices=["fadvise", "drop_caches", "none"])
    ap.add_argument("--redis-server", default=None, help="path (default: redis-server on PATH)")
    ap.add_argument("--redis-benchmark", default=None, help="path (default: redis-benchmark on PATH; else skipped)")
    ap.add_argument("--redis-io-threads", type=int, default=1, help="redis-server io-threads (1: Redis's default)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    lib.resolve_model(args)
    redis_bin = redis_local.find_binary(args.redis_server, "redis-server")
    if not redis_bin:
        ap.error("redis-server not found: give --redis-server PATH")
    bench_bin = redis_local.find_binary(args.redis_benchmark, "redis-benchmark")
    contexts = [int(c) for c in args.contexts.split(",") if c]
    fetch_contexts = [int(c) for c in args.fetch_contexts.split(",") if c]
    d = lib.out_dir(args, "remote")
    work = os.path.join(d, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    meta = lib.make_meta(args, "remote-ttft")
    meta.update({"redis_server": redis_bin, "redis_benchmark": bench_bin, "kv": args.kv,
                 "redis_io_threads": args.redis_io_threads})
    # Corpus.slice estimates tokens from characters: leave 15% + 512 for its error and the reply.
    ctx = int(max(contexts + fetch_contexts) * 1.15) + 512
    redis = redis_local.RedisServer(redis_bin, work, io_threads=args.redis_io_threads).start()
    remote = ["--remote", redis.url]
    a = lib.Agentkv(args, work, name="A", slots=1, ctx=ctx, kv=args.kv, extra=remote)
    b = lib.Agentkv(args, work, name="B", slots=1, ctx=ctx, kv=args.kv, extra=remote)
    samples = []
    baselines = {}
    try:
        a.start()
        b.start()
        corpus = lib.Corpus(args.text)
        corpus.calibrate(a)
        for n in contexts:
            for rep in range(args.reps + 1):  # rep 0: unmeasured warm-up
                one_agent(args, a, b, redis, "r%d-%d" % (n, rep), corpus.slice(rep * 97, n), n, rep, samples)
        for n in fetch_contexts:
            agent, prompt = "f%d" % n, corpus.slice(n, n)
            cold = None
            for rep in range(args.reps + 1):  # rep 0: unmeasured warm-up of B's fetch
                cold = one_agent(args, a, b, redis, agent, prompt, n, rep, samples, cold=cold, restart_b=rep > 0)
                cold["measured"] = True  # the one cold prefill is reported (n=1)
        sizes = []
        c = redis.client()
        for s in samples:
            if s["want_state"] == "cold" and s.get("block_keys"):
                sizes += [c.call("STRLEN", k) for k in s["block_keys"]]
        c.close()
        block = int(lib.med(sizes)) if sizes else 0
        lib.log("loopback baselines (block %d B)" % block)
        rb = redis_local.redis_benchmark_get_MBps(bench_bin, redis.port, block) if block else None
        baselines = {"block_bytes": block, "redis_benchmark_get_MBps": rb,
                     "redis_benchmark": "GET of one %d-byte value, 4 connections, pipeline 8, 400 requests" % block,
                     "tcp_loopback_MBps": redis_local.tcp_loopback_MBps()}
    finally:
        a.stop()
        b.stop()
        redis.stop()
    for s in samples:
        s.pop("token_ms", None)
        s.pop("text", None)
    rows, bw = [], []
    for n in contexts + fetch_contexts:
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
                eff = lib.summarize([mbps(s["remote_read_bytes"], s["server_read_ms"]) for s in ss])
                py = lib.summarize([mbps(g["bytes"], g["ms"]) for s in ss for g in s["python_get"]])
                row["remote_MB_per_s"] = eff["median"]
                row["remote_bytes"] = lib.med([s["remote_read_bytes"] for s in ss])
                blocks = lib.med([len(s2["block_keys"]) for s2 in samples
                                  if s2["context"] == n and s2["want_state"] == "cold" and s2.get("block_keys")])
                bw.append({"tokens": row["tokens"], "path": "agentkv remote fetch (manifest + blocks, 4 conns, "
                           "verified)", "bytes": row["remote_bytes"], "blocks": blocks, "MB_per_s": eff["median"],
                           "min": eff["min"], "max": eff["max"], "n": eff["n"]})
                bw.append({"tokens": row["tokens"], "path": "python pipelined GET, same block keys, 1 conn",
                           "bytes": lib.med([g["bytes"] for s in ss for g in s["python_get"]]), "blocks": blocks,
                           "MB_per_s": py["median"], "min": py["min"], "max": py["max"], "n": py["n"]})
            rows.append(row)
    for label, key in (("redis-benchmark GET, %d-byte value, 4 conns, pipeline 8" % baselines.get("block_bytes", 0),
                        "redis_benchmark_get_MBps"), ("TCP loopback, 1 stream, 256 MB (python)", "tcp_loopback_MBps")):
        v = lib.summarize(baselines.get(key) or [])
        bw.append({"tokens": "—", "path": label, "MB_per_s": v["median"], "min": v["min"], "max": v["max"],
                   "n": v["n"]})
    cols = ["tokens", "state", "reported_states", "server_ttft_ms", "server_min", "server_max", "client_ttft_ms",
            "tokens_prefilled", "read_ms", "speedup_vs_cold", "remote_bytes", "remote_MB_per_s", "n"]
    bw_cols = ["tokens", "path", "bytes", "blocks", "MB_per_s", "min", "max", "n"]
    md = lib.md_table(rows, cols) + "\n\n### bandwidth\n\n" + lib.md_table(bw, bw_cols)
    notes = ("\nremote: fetched from Redis (loopback, in RAM), verified and imported (the write-through to B's disk "
             "is queued after); read_ms = the server's fetch (remote) or disk read (warm). warm: B's own disk after "
             "evict_only with its cache files dropped from the page cache (%s). kv %s. Fetch-only contexts (%s): one "
             "cold prefill, B restarted on an empty cache dir before each remote fetch. bandwidth: MB/s = 10^6 "
             "bytes/s, median (min, max) of the samples.\n" % (args.drop, args.kv, args.fetch_contexts or "none"))
    lib.write_outputs(d, "remote_ttft", meta, {"rows": rows, "bandwidth": bw, "baselines": baselines,
                                               "samples": samples}, rows, md + notes, cols)
    print(md + notes)


if __name__ == "__main__":
    main()
