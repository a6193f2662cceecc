"""`bench/run.py vs-llama-server`: agentkv against llama.cpp's llama-server on one model, side by side.

Per context (bench/README.md, "vs-llama-server"):
- cold and hit (the same prompt again) on both servers, --reps each;
- restart: --pairs interleaved pairs; a pair is one restart of every arm, back to back, page cache dropped:
    agentkv       SIGTERM -> new process -> the agent's same prompt (EXACT match, read from disk)
    restart       llama-server: new process -> POST /slots/0?action=restore -> /completion with the prompt TEXT
    restart_ids   llama-server: the same, the prompt sent as TOKEN IDS (tokenized before timing with its own
                  /tokenize): what is left when the client tokenizes, as agentkv's stored tokenization does
  The arms' order rotates from pair to pair (A,B,C then B,C,A ...), so drift falls on every arm alike.
  --stock-llama-server adds the same two arms for a second llama-server binary (the pinned source without our
  patches): system "llama-server-stock".
- per-stage columns: agentkv's read / restore / the rest of its TTFT (usage.agentkv), llama-server's restore
  (the slot-restore response's timings.restore_ms), request handling before its first decode (completion TTFT -
  timings.prompt_ms: tokenization for the text arm) and first decode (timings.prompt_ms), the /tokenize wall;
- startup columns: each process's startup (spawn -> /health 200) and startup + the restart's TTFT;
- every row names the KV type at rest and in slots on both sides and how llama-server's threads were bound.

Headline ratios come from bench/paired.py (paired geometric mean, 95% bootstrap interval clustered by machine),
which reads this driver's JSON: samples with what = restart / restart_ids, paired by (context, pair).
A SIGTERM (scripts/device-bench.sh's `timeout`) stops the run and writes the pairs finished so far, marked partial.
"""
import os
import re

import lib
from lib import log, med, ratio
from paired import paired_geomean

LS = "llama-server"
STOCK = "llama-server-stock"
AK_B = "agentkv-b"


def add_args(ap):
    """vs-llama-server's own options (run.py's parser has the shared ones)."""
    ap.add_argument("--pairs", type=int, help="vs-llama-server: interleaved restart pairs per context (default: "
                                              "--reps)")
    ap.add_argument("--settle-load", type=float, default=0.0,
                    help="vs-llama-server: before measuring (the cold runs, then the restart pairs) wait, at most "
                         "--settle-max-s each time, until the 1-minute load average is below this (0: no wait); "
                         "every pair records the load average it started at")
    ap.add_argument("--settle-max-s", type=float, default=120.0)
    ap.add_argument("--ls-bind", choices=lib.LS_BIND_CHOICES, default="omp",
                    help="how llama-server's CPU threads are bound (lib.LS_BIND_CHOICES; default omp: "
                         "OMP_PROC_BIND=close OMP_PLACES=cores)")
    ap.add_argument("--ls-arms", default="text,ids", help="llama-server restart arms: text, ids or both")
    ap.add_argument("--stock-llama-server", help="a second llama-server binary (e.g. the pinned source without our "
                                                 "patches) measured in the same run")
    ap.add_argument("--ak-b-extra", default="",
                    help="an A/B arm: a second agentkv restart arm (system agentkv-b) started with these extra serve "
                         "args (one string, e.g. '--pipelined-restore off') on the same cache directory, in the same "
                         "interleaved pairs; summary ratio_ak_b_* = agentkv-b / agentkv (> 1: the default faster)")


class Peer:
    """One llama-server binary: its system name in the samples, its slot files and its prompts as token ids."""

    def __init__(self, system, binary):
        self.system, self.binary = system, binary
        self.ids, self.tokenize_ms, self.saves = {}, {}, {}


def agentkv_kv(log_text):
    """agentkv's start line: (KV type at rest, KV type in slots), None where it does not say."""
    m = re.findall(r"kv (\w+) \((\d+) B/token\) at rest, (\w+) in slots", log_text)
    return (m[-1][0], m[-1][2]) if m else (None, None)


def bench_vs_llama(args, slot_for, ints, cap_contexts, ctx_note, workdir, cleanup_work):
    sub = "vs-llama-server"
    d = lib.out_dir(args, sub)
    meta = lib.make_meta(args, sub)
    meta["llama_server_bin"] = lib.file_identity(args.llama_server, full=True)
    peers = [Peer(LS, args.llama_server)]
    if args.stock_llama_server:
        meta["stock_llama_server_bin"] = lib.file_identity(args.stock_llama_server, full=True)
        peers.append(Peer(STOCK, args.stock_llama_server))
    missing = [p.binary for p in peers if not os.path.exists(p.binary)]
    if missing:
        msg = ("llama-server not found at %s; build it with: cmake -S . -B build-srv -G Ninja "
               "-DAGENTKV_LLAMA_SERVER=ON && ninja -C build-srv llama-server" % ", ".join(missing))
        log(msg)
        lib.write_outputs(d, sub, meta, {"status": "not available", "reason": msg, "summary": []}, [],
                          "**not available**: " + msg, ["context"])
        return []
    arms = [a.strip() for a in args.ls_arms.split(",") if a.strip()]
    if not arms or any(a not in ("text", "ids") for a in arms):
        raise ValueError("--ls-arms: text, ids or text,ids (got %r)" % args.ls_arms)
    wd = workdir(args, sub)
    corpus = lib.Corpus(args.text)
    contexts = ints(args.contexts or ("256,512" if args.quick else "1024,2048,4096,8192,16384,32768"))
    reps = args.reps or (2 if args.quick else 5)
    pairs = args.pairs or reps
    slot_ctx = slot_for(max(contexts))
    ls_kv = args.ls_kv or args.kv
    samples, settles = [], []
    kv = {"agentkv": {"at_rest": args.kv, "in_slots": None}}
    for p in peers:  # a slot file holds the slot's cells as they are: its type at rest is its slots'
        kv[p.system] = {"at_rest": ls_kv, "in_slots": ls_kv, "bind": args.ls_bind}
    skipped, prompts = [], {}

    def add(sysname, what, n, i, r, **more):
        r = dict(r, system=sysname, what=what, context=n, rep=i, **more)
        for k in ("text", "t0", "token_ms"):
            r.pop(k, None)
        samples.append(r)

    ours = lib.Agentkv(args, wd, slots=1, ctx=slot_ctx, kv=args.kv)
    agent_of = {}
    partial = True
    try:
        # ---- cold and hit: agentkv
        settles.append(dict(lib.settle_load(args.settle_load, args.settle_max_s), before="cold runs"))
        ours.start()
        kv["agentkv"]["at_rest"], kv["agentkv"]["in_slots"] = agentkv_kv(ours.log_text())
        corpus.calibrate(ours)
        contexts, skipped = cap_contexts(args, corpus, contexts)
        prompts.update({n: corpus.slice(1000 + ci * 40000, n) for ci, n in enumerate(contexts)})
        ours.complete("bench-warmup", corpus.slice(50000, 256), 1)
        ours.erase("bench-warmup")
        for n in contexts:
            log("vs-llama-server: agentkv, context %d" % n)
            for i in range(reps):
                aid = "c%d-%d" % (n, i)
                add("agentkv", "cold", n, i, ours.complete(aid, prompts[n], 1))
                if i < reps - 1:
                    ours.erase(aid)
            agent_of[n] = "c%d-%d" % (n, reps - 1)
            for i in range(reps):  # same prompt again: the agent is resident
                add("agentkv", "hit", n, i, ours.complete(agent_of[n], prompts[n], 1))
        ours.stop()
        # ---- cold and hit, the slot file, the prompt's token ids: every llama-server, one process per context
        for peer in peers:
            for n in contexts:
                log("vs-llama-server: %s, context %d" % (peer.system, n))
                ls = lib.LlamaServer(args, wd, slot_ctx, kv=ls_kv, name=peer.system, binary=peer.binary)
                ls.start()
                ls.complete(corpus.slice(50000, 256), 1)  # warm-up
                for i in range(reps):
                    ls.slot("erase")
                    add(peer.system, "cold", n, i, ls.complete(prompts[n], 1))
                for i in range(reps):
                    add(peer.system, "hit", n, i, ls.complete(prompts[n], 1))
                peer.ids[n], peer.tokenize_ms[n] = ls.tokenize(prompts[n])
                fname = "ctx%d.bin" % n
                j, wall = ls.slot("save", fname)
                peer.saves[n] = {"save_ms": (j.get("timings") or {}).get("save_ms"), "save_wall_ms": wall,
                                 "file_bytes": os.path.getsize(os.path.join(ls.slot_dir, fname))}
                ls.stop()
        # ---- restarts: interleaved pairs, every arm restarted once per pair
        def restart_of(server, system):
            def run(n, i, pos):
                ours_restart(n, i, pos, server, system)
            return run

        def ours_restart(n, i, pos, server=ours, system="agentkv"):
            ours = server
            ours.start()
            pc = lib.drop_page_cache(lib.files_under(ours.cache_dir), args.drop)
            r = ours.complete(agent_of[n], prompts[n], 1)
            ours.stop()
            rest = None
            if r.get("server_ttft_ms") is not None:
                rest = r["server_ttft_ms"] - (r.get("server_wait_ms") or 0) - (r.get("server_restore_ms") or 0)
            add(system, "restart", n, i, r, pair=i, position=pos, page_cache=pc["label"],
                startup_ms=ours.startup_ms, startup_ttft_ms=ours.startup_ms + (r["client_ttft_ms"] or 0),
                after_restore_ms=rest, **{"ready_" + k: v for k, v in ours.ready_mem.items()})

        def ls_restart(peer, ids):
            def run(n, i, pos):
                fname = "ctx%d.bin" % n
                ls = lib.LlamaServer(args, wd, slot_ctx, kv=ls_kv, name=peer.system, binary=peer.binary)
                ls.start()
                pc = lib.drop_page_cache([os.path.join(ls.slot_dir, fname)], args.drop)
                j, wall = ls.slot("restore", fname)
                r = ls.complete(peer.ids[n] if ids else prompts[n], 1)
                ls.stop()
                completion = r["client_ttft_ms"] or 0
                r.update({"restore_ms": (j.get("timings") or {}).get("restore_ms"), "restore_wall_ms": wall,
                          "completion_ttft_ms": completion, "client_ttft_ms": wall + completion,
                          "handling_ms": completion - (r.get("prompt_ms") or 0), "first_decode_ms": r.get("prompt_ms"),
                          "page_cache": pc["label"], "startup_ms": ls.startup_ms,
                          "startup_ttft_ms": ls.startup_ms + wall + completion, "n_restored": j.get("n_restored"),
                          "prompt_kind": "ids" if ids else "text", "tokenize_wall_ms": peer.tokenize_ms[n]})
                r.update({"ready_" + k: v for k, v in ls.ready_mem.items()})
                r.update(peer.saves[n])
                add(peer.system, "restart_ids" if ids else "restart", n, i, r, pair=i, position=pos)
            return run

        plan = [ours_restart] + [ls_restart(p, a == "ids") for p in peers for a in arms]
        if args.ak_b_extra:  # same cache directory: both arms restore the same agent's files
            plan.append(restart_of(lib.Agentkv(args, wd, name=AK_B, slots=1, ctx=slot_ctx, kv=args.kv,
                                               extra=args.ak_b_extra.split(), cache_dir=ours.cache_dir), AK_B))
        log("vs-llama-server: %d restart pairs per context, %d arms each, rotating order" % (pairs, len(plan)))
        settles.append(dict(lib.settle_load(args.settle_load, args.settle_max_s), before="restart pairs"))
        for i in range(pairs):
            for n in contexts:
                settles.append({"context": n, "pair": i, "loadavg": lib.loadavg_1m()})
                k = i % len(plan)
                for pos, run in enumerate(plan[k:] + plan[:k]):
                    run(n, i, pos)
        partial = False
    except KeyboardInterrupt:
        log("vs-llama-server: interrupted; writing the pairs finished so far (partial)")
    finally:
        lib.stop_all()
    summary = summarize(samples, contexts, peers, kv, meta, args)
    cols, md = report(summary, peers, args, reps, pairs, ls_kv, slot_ctx, ctx_note, contexts, skipped, partial,
                      settles)
    lib.write_outputs(d, sub, meta, {"status": "partial" if partial else "ok", "summary": summary,
                                     "samples": samples, "skipped": skipped, "reps": reps, "pairs_per_context": pairs,
                                     "kv": kv, "settle": settles, "partial": partial,
                                     "ls_arms": arms, "ls_bind": args.ls_bind, "ak_b_extra": args.ak_b_extra},
                      summary, md, cols)
    cleanup_work(args, wd)
    return summary


def _paired(meta, ours, theirs):
    """paired_geomean over the pairs both lists finished (matched by pair index), this call's machine."""
    by_pair = {s["pair"]: s for s in ours if s.get("client_ttft_ms")}
    machine = meta["machine"].get("boot_id") or meta["machine"]["hostname"]
    return paired_geomean([(machine, by_pair[s["pair"]]["client_ttft_ms"], s["client_ttft_ms"])
                           for s in theirs if s["pair"] in by_pair and s.get("client_ttft_ms")])


def summarize(samples, contexts, peers, kv, meta, args):
    def pick(system, what, n):
        return [s for s in samples if s["system"] == system and s["what"] == what and s["context"] == n]

    def m(ss, key):
        return med([s.get(key) for s in ss])

    summary = []
    for n in contexts:
        row = {"context": n, "ak_kv_rest": kv["agentkv"]["at_rest"], "ak_kv_slots": kv["agentkv"]["in_slots"]}
        ak = {w: pick("agentkv", w, n) for w in ("cold", "hit", "restart")}
        row["ak_tokens"] = m(ak["cold"], "prompt_tokens")
        for w in ("cold", "hit", "restart"):
            row["ak_%s_ms" % w] = m(ak[w], "client_ttft_ms")
            row["ak_%s_server_ms" % w] = m(ak[w], "server_ttft_ms")
            row["ak_%s_states" % w] = "/".join(sorted({str(s["state"]) for s in ak[w]}))
        times = [s["client_ttft_ms"] for s in ak["restart"] if s.get("client_ttft_ms") is not None]
        row["ak_restart_min_ms"], row["ak_restart_max_ms"] = (min(times), max(times)) if times else (None, None)
        row.update({"ak_read_ms": m(ak["restart"], "server_read_ms"), "ak_restore_ms": m(ak["restart"],
                    "server_restore_ms"), "ak_wait_ms": m(ak["restart"], "server_wait_ms"),
                    "ak_after_restore_ms": m(ak["restart"], "after_restore_ms"),
                    "ak_startup_ms": m(ak["restart"], "startup_ms"),
                    "ak_startup_ttft_ms": m(ak["restart"], "startup_ttft_ms"),
                    "ak_ready_rss_mib": m(ak["restart"], "ready_rss_mib"),
                    "ak_ready_pinned_mib": m(ak["restart"], "ready_pinned_mib"),
                    "ak_ready_page_locked_mib": m(ak["restart"], "ready_page_locked_mib"),
                    "page_cache": ak["restart"][0]["page_cache"] if ak["restart"] else None})
        for peer in peers:
            p = "ls" if peer.system == LS else "st"
            row.update({"%s_kv_rest" % p: kv[peer.system]["at_rest"], "%s_kv_slots" % p: kv[peer.system]["in_slots"],
                        "%s_bind" % p: kv[peer.system]["bind"]})
            ls = {w: pick(peer.system, w, n) for w in ("cold", "hit", "restart", "restart_ids")}
            row["%s_tokens" % p] = m(ls["cold"], "prompt_tokens")
            for w in ("cold", "hit"):
                row["%s_%s_ms" % (p, w)] = m(ls[w], "client_ttft_ms")
                row["ratio_%s%s" % (w, "" if p == "ls" else "_" + p)] = ratio(row["%s_%s_ms" % (p, w)],
                                                                              row["ak_%s_ms" % w])
            row["%s_tokenize_ms" % p] = peer.tokenize_ms.get(n)
            row["%s_slot_file_bytes" % p] = (peer.saves.get(n) or {}).get("file_bytes")
            for w, tag in (("restart", ""), ("restart_ids", "_ids")):
                ss = ls[w]
                q = p + tag
                row["%s_restart_ms" % q] = m(ss, "client_ttft_ms")
                times = [s["client_ttft_ms"] for s in ss if s.get("client_ttft_ms") is not None]
                row["%s_restart_min_ms" % q], row["%s_restart_max_ms" % q] = (
                    (min(times), max(times)) if times else (None, None))
                row.update({"%s_restore_ms" % q: m(ss, "restore_ms"), "%s_handling_ms" % q: m(ss, "handling_ms"),
                            "%s_first_decode_ms" % q: m(ss, "first_decode_ms"),
                            "%s_startup_ms" % q: m(ss, "startup_ms"), "%s_startup_ttft_ms" % q: m(ss, "startup_ttft_ms"),
                            "%s_ready_rss_mib" % q: m(ss, "ready_rss_mib"),
                            "%s_ready_pinned_mib" % q: m(ss, "ready_pinned_mib")})
                # ratio = llama-server / agentkv (> 1: agentkv faster): median ratio kept for continuity; the
                # headline is the paired geometric mean with its interval and the pairs won
                r = "ratio_restart%s%s" % ("" if p == "ls" else "_" + p, tag)
                row[r] = ratio(row["%s_restart_ms" % q], row["ak_restart_ms"])
                pg = _paired(meta, ak["restart"], ss)
                row[r + "_paired"], row[r + "_paired_lo"], row[r + "_paired_hi"] = pg["geomean"], pg["lo"], pg["hi"]
                row[r + "_won"] = "%d/%d" % (pg["won"], pg["n"])
                row[r + "_startup_paired"] = _paired_startup(meta, ak["restart"], ss)
            row["%s_restore_only_ms" % p] = row["%s_restore_ms" % p]
        b = pick(AK_B, "restart", n)
        if b:  # the A/B arm: agentkv-b / agentkv, > 1 when the default is faster
            row.update({"akb_restart_ms": m(b, "client_ttft_ms"), "akb_read_ms": m(b, "server_read_ms"),
                        "akb_restore_ms": m(b, "server_restore_ms"), "akb_wait_ms": m(b, "server_wait_ms"),
                        "akb_startup_ms": m(b, "startup_ms"), "akb_startup_ttft_ms": m(b, "startup_ttft_ms"),
                        "ratio_ak_b_startup_paired": _paired_startup(meta, ak["restart"], b)})
            pg = _paired(meta, ak["restart"], b)
            row.update({"ratio_ak_b_paired": pg["geomean"], "ratio_ak_b_paired_lo": pg["lo"],
                        "ratio_ak_b_paired_hi": pg["hi"], "ratio_ak_b_won": "%d/%d" % (pg["won"], pg["n"])})
        # continuity with earlier JSON: restart_pairs_won = against llama-server's text arm
        row["restart_pairs_won"] = row.get("ratio_restart_won")
        summary.append(row)
    return summary


def _paired_startup(meta, ours, theirs):
    """Paired geometric mean of (startup + restart TTFT): llama-server's over agentkv's."""
    conv = lambda ss: [dict(s, client_ttft_ms=s.get("startup_ttft_ms")) for s in ss]  # noqa: E731
    return _paired(meta, conv(ours), conv(theirs))["geomean"]


def report(summary, peers, args, reps, pairs, ls_kv, slot_ctx, ctx_note, contexts, skipped, partial, settles):
    """(CSV columns, markdown body): the restart headline, the stages, startup and cold/hit, then the notes."""
    restart = ["context", "ak_tokens", "ak_kv_rest", "ak_kv_slots", "ak_restart_ms"]
    stages = ["context", "ak_read_ms", "ak_restore_ms", "ak_wait_ms", "ak_after_restore_ms"]
    startup = ["context", "ak_startup_ms", "ak_startup_ttft_ms", "ak_ready_rss_mib", "ak_ready_pinned_mib",
               "ak_ready_page_locked_mib"]
    coldhit = ["context", "ak_cold_ms", "ak_hit_ms"]
    for peer in peers:
        p = "ls" if peer.system == LS else "st"
        sfx = "" if p == "ls" else "_st"
        restart += ["%s_kv_rest" % p, "%s_kv_slots" % p, "%s_bind" % p]
        for tag in ("", "_ids"):
            r = "ratio_restart%s%s" % (sfx, tag)
            restart += ["%s%s_restart_ms" % (p, tag), r + "_paired", r + "_paired_lo", r + "_paired_hi", r + "_won"]
            stages += ["%s%s_restore_ms" % (p, tag), "%s%s_handling_ms" % (p, tag), "%s%s_first_decode_ms" % (p, tag)]
            startup += ["%s%s_startup_ms" % (p, tag), "%s%s_startup_ttft_ms" % (p, tag), r + "_startup_paired"]
            if not tag:  # the same process either way: its memory once, for the text arm
                startup += ["%s_ready_rss_mib" % p, "%s_ready_pinned_mib" % p]
        stages += ["%s_tokenize_ms" % p]
        coldhit += ["%s_cold_ms" % p, "ratio_cold" + sfx, "%s_hit_ms" % p, "ratio_hit" + sfx]
    if any("akb_restart_ms" in row for row in summary):
        restart += ["akb_restart_ms", "ratio_ak_b_paired", "ratio_ak_b_paired_lo", "ratio_ak_b_paired_hi",
                    "ratio_ak_b_won"]
        stages += ["akb_read_ms", "akb_restore_ms", "akb_wait_ms"]
        startup += ["akb_startup_ms", "akb_startup_ttft_ms", "ratio_ak_b_startup_paired"]
    restart += ["ak_restart_states", "page_cache"]
    body = []
    if partial:
        body.append("**PARTIAL**: interrupted (SIGTERM/Ctrl-C); the rows hold the pairs that finished.\n")
    body += ["## Restart (page cache dropped), %d interleaved pairs per context\n" % pairs, lib.md_table(summary, restart),
             "\n## Where the restart's time went (medians, ms)\n", lib.md_table(summary, stages),
             "\n## Startup (process spawn -> /health), startup + the restart's TTFT, host memory once ready "
             "(RSS and VmPin, MiB, /proc/PID/status; the NVIDIA driver's page-locking, cudaMallocHost or "
             "cudaHostRegister, is not counted in VmPin, so it reads 0 on a GPU: ak_ready_page_locked_mib is "
             "agentkv's own count, /metrics agentkv_host_buffer_bytes)\n", lib.md_table(summary, startup),
             "\n## Cold and hit (%d reps)\n" % reps, lib.md_table(summary, coldhit)]
    settled = [s for s in settles if s.get("threshold")]
    pair_loads = [s["loadavg"] for s in settles if "pair" in s and s.get("loadavg") is not None]
    notes = [ctx_note(args, max(contexts) if contexts else 0),
             "all times client-measured over loopback, POST -> first streamed token; ratio = llama-server / agentkv "
             "(> 1: agentkv faster); *_paired = geometric mean of the per-pair ratios, _lo/_hi its 95% bootstrap "
             "interval (this call: one machine; pool calls with bench/paired.py), *_won = pairs agentkv was faster",
             "restart arms, one restart each per pair, order rotating: agentkv (SIGTERM -> start -> the agent's same "
             "prompt, read from disk); llama-server text (start -> /slots/0?action=restore -> /completion with the "
             "prompt text; time = restore wall + completion TTFT); llama-server ids (the same with the prompt as the "
             "token ids its /tokenize gave before timing). Startup excluded from *_restart_ms, included in "
             "*_startup_ttft_ms",
             "stages: ak_read/restore/wait = usage.agentkv read_ms/restore_ms/wait_ms (the read is inside wait); "
             "ak_after_restore = ttft - wait - restore (the first decode, plus tokenizing new text if any); "
             "ls restore = the slot-restore response's timings.restore_ms; handling = completion TTFT - "
             "timings.prompt_ms (tokenization of a text prompt and request handling); first_decode = "
             "timings.prompt_ms (the prompt tokens evaluated after the restore); tokenize = wall of one /tokenize "
             "of the prompt (client, includes HTTP)",
             "KV: ak_kv_rest/slots from agentkv's start line; llama-server -ctk/-ctv %s (its slot files hold its "
             "slots' type); llama-server -fa on -np 1 --cache-ram 0, threads %d bound by %s (lib.ls_bind_env_args)"
             % (ls_kv, args.threads, args.ls_bind)]
    if args.ak_b_extra:
        notes.append("akb_* = the A/B arm: agentkv started with `%s` on the same cache directory, restarted in the "
                     "same pairs; ratio_ak_b = agentkv-b / agentkv (> 1: the default faster)" % args.ak_b_extra)
    if len(peers) > 1:
        notes.append("st_* = %s (a second llama-server binary: the pinned source without our patches when run by "
                     "scripts/device-bench.sh vs-stock)" % peers[1].binary)
    if settled:
        notes.append("load settled before the cold runs and before the restart pairs: 1-minute load < %.2f; "
                     "waited %s s; %s" % (settled[0]["threshold"], " + ".join("%.0f" % s["waited_s"] for s in settled),
                                         "settled" if all(s["settled"] for s in settled) else
                                         "GAVE UP after %.0f s at load %s" % (args.settle_max_s, ", ".join(
                                             str(s["loadavg"]) for s in settled if not s["settled"]))))
    if pair_loads:
        notes.append("1-minute load average at the start of the pairs: %.2f-%.2f" % (min(pair_loads), max(pair_loads)))
    if lib.trained_ctx(args) and slot_ctx > lib.trained_ctx(args):
        notes.append("llama-server caps a slot at the model's training context (%d); it ran with --override-kv "
                     "%s.context_length=int:%d to lift only that cap (both servers compute RoPE identically)" % (
                         lib.trained_ctx(args), lib.MODEL_ARCH.get(os.path.basename(args.model_path)), slot_ctx))
    for s in skipped:
        notes.append("skipped context %d: %s" % (s["context"], s["reason"]))
    cols = []
    for c in ["context"] + restart + stages + startup + coldhit + sorted(summary[0] if summary else []):
        if c not in cols:
            cols.append(c)
    return cols, "\n".join(body) + "\n\n" + "\n".join("- " + x for x in notes if x)
