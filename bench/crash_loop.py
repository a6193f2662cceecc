#!/usr/bin/env python3
"""Crash loop (issue 12, RELIABILITY): kill -9 `agentkv serve` at random instants, restart, check.

Each cycle starts `agentkv serve` on one cache dir, first asks every agent for its next turn and compares
the answer with a cold oracle (a second, never-killed server, fresh agent id each time: greedy, same
messages; a turn whose usage.agentkv.respelled_tokens > 0 kept a reply the model wrote in other tokens than
its text's tokenization, so it ran on another token sequence than the oracle: counted as oracle_respelled,
not compared), then drives the agents' multi-turn conversations (one client thread per agent, X-Agent-Id,
streamed or not at random) and SIGKILLs the server at an instant chosen by one of three modes:

  after-reply  right after the k-th reply of the cycle arrived (its write-behind save is queued or running)
  random       a uniform instant of the traffic phase (mid-prefill, mid-decode, mid-save, idle)
  quiesced     after every agent's turn returned, 0-30 ms later (saves of the last turns in flight)
  mid-save     the instant a watcher sees a save's temp file (*.tmp) in agents/ or blocks/: a block file
               or manifest half written (counted as mid_save_hits; else killed when traffic ends)

With the server dead, `agentkv cache verify` (read-only) must report 0 bad agents and every manifest's
version must be >= the highest version seen before for that agent (versions never go backwards). Each
user message carries a marker "(<agent> turn <n>)", so the last turn on disk is read from the manifest's
text: acknowledged turns past it were lost to write-behind (expected, counted), turns on disk that the
client never got acknowledged are counted too (the reply was sent, the client was killed first).

A failed (killed) turn is retried with the same message after the restart, so a cached text longer than
the prompt (prefix truncation) is exercised. An agent whose prompt nears the context starts a new
generation (new agent id); the old one stays on disk and is still verified.

stdlib only. Exit status 0 iff corruptions == 0, version regressions == 0 and oracle mismatches == 0.

  python3 bench/crash_loop.py --cycles 100 --json bench/results/crash_loop_cpu.json
  python3 bench/crash_loop.py --quick      # 5 cycles (scripts/test.sh)
"""
import argparse
import base64
import glob
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import oracle as oracle_lib  # noqa: E402

MARKER = re.compile(r"\((a\d+g\d+) turn (\d+)\)")
MODES = ("after-reply", "random", "quiesced", "mid-save")


class Agent:
    """One client conversation. `history` holds only acknowledged turns."""

    def __init__(self, idx):
        self.idx, self.gen = idx, 0
        self.reset()

    def reset(self):
        self.gen += 1
        self.history = [{"role": "system", "content": "You are agent %d. Answer briefly." % self.idx}]
        self.turn = 0          # number of acknowledged turns in this generation
        self.pending = None    # the user message of a turn that failed (retried as is)
        self.prompt_tokens = 0

    @property
    def id(self):
        return "a%dg%d" % (self.idx, self.gen)

    def next_user(self, corpus, rng):
        if self.pending is None:
            a = rng.randrange(0, len(corpus) - 400)
            words = corpus[a:a + rng.randint(60, 260)].split()[1:]
            self.pending = "(%s turn %d) %s" % (self.id, self.turn + 1, " ".join(words))
        return self.history + [{"role": "user", "content": self.pending}]


def chat(port, agent_id, messages, max_tokens, stream, timeout=120):
    """One chat turn. Returns (content, usage); raises OSError/HTTPException/RuntimeError on failure."""
    body = {"model": "agentkv", "messages": messages, "max_tokens": max_tokens, "temperature": 0, "seed": 7}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        r = lib.stream_request(port, "/v1/chat/completions", body, {"X-Agent-Id": agent_id}, timeout=timeout)
        if r["status"] != 200 or r.get("error"):
            raise RuntimeError("HTTP %s %s" % (r["status"], r.get("error")))
        usage = next((c["usage"] for c in r["chunks"] if c.get("usage")), None)
        done = any(c.get("choices") and c["choices"][0].get("finish_reason") for c in r["chunks"])
        if usage is None or not done:
            raise RuntimeError("stream ended early")
        return r["text"], usage
    st, j, _ = lib.http_json(port, "POST", "/v1/chat/completions", body, {"X-Agent-Id": agent_id}, timeout=timeout)
    if st != 200:
        raise RuntimeError("HTTP %s %s" % (st, j))
    return j["choices"][0]["message"]["content"], j["usage"]


def oracle_answer(port, agent_id, messages, max_tokens, with_logprobs):
    """The cold oracle's answer, and with_logprobs (near-tie mode) its logprobs.content with 2 alternatives."""
    body = {"model": "agentkv", "messages": messages, "max_tokens": max_tokens, "temperature": 0, "seed": 7}
    if with_logprobs:
        body.update(logprobs=True, top_logprobs=2)
    st, j, _ = lib.http_json(port, "POST", "/v1/chat/completions", body, {"X-Agent-Id": agent_id}, timeout=120)
    if st != 200:
        raise RuntimeError("HTTP %s %s" % (st, j))
    choice = j["choices"][0]
    return choice["message"]["content"], (choice.get("logprobs") or {}).get("content") if with_logprobs else None


class Server:
    def __init__(self, args, name, cache_dir, extra=(), slots=2, threads=1):
        self.args, self.name, self.cache_dir = args, name, cache_dir
        self.extra, self.slots, self.threads = list(extra), slots, threads
        self.log = os.path.join(args.workdir, name + ".log")
        self.p = None

    def start(self):
        self.port = lib.free_port()
        cmd = [self.args.bin, "serve", "-m", self.args.model, "--port", str(self.port), "--cache-dir", self.cache_dir,
               # The server's default configuration: the oracles here (crash_loop, disk_full, load) compare
               # restored answers with cold ones bit for bit, which it guarantees on CPU (docs/engine.md,
               # "Exactness").
               "--slots", str(self.slots), "-c", str(self.args.ctx), "-t", str(self.threads)] + self.extra
        with open(self.log, "ab") as f:
            self.p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        t0 = time.time()
        while time.time() - t0 < 60:
            if self.p.poll() is not None:
                raise RuntimeError("%s exited with %s; see %s" % (self.name, self.p.returncode, self.log))
            try:
                if lib.http_json(self.port, "GET", "/health", timeout=2)[0] == 200:
                    return (time.time() - t0) * 1000.0
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.02)
        raise RuntimeError("%s not ready; see %s" % (self.name, self.log))

    def kill9(self):
        if self.p and self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGKILL)  # our own child, by PID
        if self.p:
            self.p.wait()

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill9()


def read_manifests(cache_dir):
    """{agent_id: (version, last turn marker in its text)} from the manifest files on disk."""
    out = {}
    for path in glob.glob(os.path.join(cache_dir, "*", "*", "agents", "*.json")):
        with open(path, encoding="utf-8") as f:
            m = json.load(f)["record"]  # renamed into place whole: a torn one is a finding
        text = m["text"] if "text" in m else base64.b64decode(m["text_base64"]).decode("utf-8", "replace")
        turns = [int(n) for a, n in MARKER.findall(text) if a == m["agent_id"]]
        out[m["agent_id"]] = (int(m.get("version", 0)), max(turns) if turns else 0)
    return out


def temp_files(cache_dir):
    """Temp files of saves in progress (store/durable_io.h kTempSuffix)."""
    found = []
    for d in glob.glob(os.path.join(cache_dir, "*", "*", "agents")) + glob.glob(os.path.join(cache_dir, "*", "*", "blocks")):
        try:
            found += [e.name for e in os.scandir(d) if e.name.endswith(".tmp")]
        except OSError:
            pass
    return found


def verify(args, cache_dir):
    """`agentkv cache verify` on the dead server's cache: (exit code, agents checked, bad lines)."""
    r = subprocess.run([args.bin, "cache", "verify", "--cache-dir", cache_dir], capture_output=True, text=True)
    lines = [l for l in r.stdout.splitlines() if l and not l.startswith("    ")]
    bad = [l for l in lines if " BAD " in l]
    if r.returncode not in (0, 1) or (r.returncode == 1 and not bad):
        bad.append("verify failed: rc %d %s" % (r.returncode, r.stderr.strip()[:300]))
    return r.returncode, len(lines), bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=lib.DEFAULT_BIN)
    ap.add_argument("--model", default=lib.DEFAULT_MODEL)
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--max-tokens", type=int, default=12)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--quick", action="store_true", help="5 cycles, 3 agents (CI)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--oracle", choices=["exact", "near-tie"], default="exact",
                    help="exact: answers equal byte for byte (CPU); near-tie: equal up to the cold oracle's first "
                         "near-tie, later differences counted as oracle_after_near_tie (GPU; bench/oracle.py)")
    args = ap.parse_args()
    if args.quick:
        args.cycles, args.agents = 5, 3
    args.workdir = args.workdir or "/tmp/agentkv-crash-loop-%d" % os.getpid()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    with open(lib.DEFAULT_TEXT, encoding="utf-8") as f:
        corpus = f.read()

    cache_dir = os.path.join(args.workdir, "cache")
    srv = Server(args, "server", cache_dir)
    # The oracle is never killed; each check uses a fresh agent id there (a cold prefill), erased after.
    oracle = Server(args, "oracle", os.path.join(args.workdir, "oracle-cache"), ["--cache-ram", "64M"])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` stops our servers
    try:
        oracle.start()
        return run_cycles(args, srv, oracle, corpus)
    finally:
        srv.kill9()
        oracle.kill9()


def run_cycles(args, srv, oracle, corpus):
    rng = random.Random(args.seed)
    cache_dir = srv.cache_dir
    agents = [Agent(i) for i in range(args.agents)]
    max_version = {}
    c = {"cycles": 0, "kills": 0, "kills_by_mode": {m: 0 for m in MODES}, "turns_ok": 0, "turns_failed": 0,
         "turns_lost_to_write_behind": 0, "mid_save_hits": 0, "temp_files_left_by_kills": 0, "turns_on_disk_unacknowledged": 0, "oracle_checks": 0,
         "oracle_after_near_tie": 0, "oracle_respelled": 0,
         "oracle_mismatches": 0, "check_server_s": 0.0, "check_oracle_s": 0.0, "post_restart_states": {}, "verify_agents_checked": 0, "corruptions": 0,
         "version_regressions": 0, "manifest_read_errors": 0, "generations": 0, "startup_ms": []}
    findings = []
    t_start = time.time()

    def turn(a, stream, port):
        """One turn of agent a; True if acknowledged."""
        msgs = a.next_user(corpus, rng_local[a.idx])
        try:
            text, usage = chat(port, a.id, msgs, args.max_tokens, stream)
        except (OSError, http.client.HTTPException, RuntimeError, ValueError, KeyError) as e:
            a.last_error = str(e)[:200]
            return False, None
        a.history = msgs + [{"role": "assistant", "content": text}]
        a.turn += 1
        a.pending = None
        a.prompt_tokens = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
        return True, usage

    rng_local = {a.idx: random.Random(args.seed * 1000 + a.idx) for a in agents}

    for cycle in range(args.cycles):
        t_cycle = time.time()
        c["startup_ms"].append(srv.start())
        # 1. After a restart: every agent's next answer equals a cold oracle's.
        if cycle > 0:
            for a in agents:
                msgs = a.next_user(corpus, rng_local[a.idx])
                t0 = time.time()
                ok, usage = turn(a, rng.random() < 0.5, srv.port)
                c["check_server_s"] += time.time() - t0
                if not ok:
                    findings.append("cycle %d: post-restart turn of %s failed: %s" % (cycle, a.id, a.last_error))
                    continue
                state = (usage.get("agentkv") or {}).get("cache_state", "?")
                c["post_restart_states"][state] = c["post_restart_states"].get(state, 0) + 1
                # The cold oracle prefills the prompt's own tokenization; an agent that kept a reply the model
                # wrote in other tokens (character-level reuse, docs/prefix-matching.md) computed another token
                # sequence, which the oracle cannot be sent: counted, not compared.
                if (usage.get("agentkv") or {}).get("respelled_tokens", 0) > 0:
                    c["oracle_respelled"] += 1
                    continue
                oid = "oracle%d" % c["oracle_checks"]
                t0 = time.time()
                want, want_lps = oracle_answer(oracle.port, oid, msgs, args.max_tokens, args.oracle == "near-tie")
                c["check_oracle_s"] += time.time() - t0
                lib.http_json(oracle.port, "DELETE", "/v1/agents/" + oid)
                c["oracle_checks"] += 1
                got = a.history[-1]["content"]
                verdict = oracle_lib.compare(got, want, want_lps)
                if verdict == oracle_lib.AFTER_NEAR_TIE:
                    c["oracle_after_near_tie"] += 1
                elif verdict == oracle_lib.MISMATCH:
                    c["oracle_mismatches"] += 1
                    where = oracle_lib.divergence(got, want, want_lps) if want_lps is not None else {}
                    findings.append("cycle %d: %s (%s) answered %r, cold oracle %r%s" % (
                        cycle, a.id, state, got, want,
                        "; first difference at the oracle's token %d, its top-2 gap %s nats, smallest gap before %s,"
                        " took the oracle's runner-up: %s" % (where["token"], where["gap_nats"],
                                                              where["min_gap_before_nats"], where["took_runner_up"])
                        if where else ""))
        t_traffic = time.time()
        # 2. Traffic, then kill -9 at an instant chosen by the cycle's mode.
        mode = MODES[cycle % len(MODES)] if cycle < len(MODES) else rng.choice(MODES)
        replies = [0]
        lock = threading.Lock()
        after_k = rng.randint(1, 2 * args.agents)
        fired = threading.Event()
        turns_each = rng.randint(1, 4)

        def kill_now():
            if not fired.is_set():
                fired.set()
                srv.kill9()

        def drive(a):
            for _ in range(turns_each):
                if fired.is_set():
                    return
                if a.prompt_tokens > args.ctx - 300:
                    a.reset()
                    with lock:
                        c["generations"] += 1
                ok, _ = turn(a, rng_local[a.idx].random() < 0.5, srv.port)
                with lock:
                    c["turns_ok" if ok else "turns_failed"] += 1
                    if ok:
                        replies[0] += 1
                        if mode == "after-reply" and replies[0] == after_k:
                            kill_now()

        threads = [threading.Thread(target=drive, args=(a,)) for a in agents]
        for t in threads:
            t.start()
        if mode == "random":
            fired.wait(rng.uniform(0.0, 0.4 * turns_each * args.agents))
            kill_now()
        if mode == "mid-save":
            while any(t.is_alive() for t in threads) and not fired.is_set():
                if temp_files(cache_dir):
                    kill_now()
                    c["mid_save_hits"] += 1
        for t in threads:
            t.join()
        if mode == "quiesced" or not fired.is_set():
            time.sleep(rng.uniform(0.0, 0.03))
        kill_now()
        c["kills"] += 1
        c["kills_by_mode"][mode] += 1
        t_verify = time.time()
        # 3. Dead server: verify, versions, turns lost.
        c["temp_files_left_by_kills"] += len(temp_files(cache_dir))
        rc, n, bad = verify(args, cache_dir)
        c["verify_agents_checked"] += n
        if bad:
            c["corruptions"] += len(bad)
            findings.append("cycle %d: verify: %s" % (cycle, "; ".join(bad)[:500]))
        try:
            on_disk = read_manifests(cache_dir)
        except (OSError, ValueError, KeyError) as e:
            c["manifest_read_errors"] += 1
            findings.append("cycle %d: manifest unreadable: %s" % (cycle, e))
            on_disk = {}
        for aid, (version, _) in on_disk.items():
            if version < max_version.get(aid, 0):
                c["version_regressions"] += 1
                findings.append("cycle %d: %s version %d < %d seen before" % (cycle, aid, version, max_version[aid]))
            max_version[aid] = max(version, max_version.get(aid, 0))
        for a in agents:
            saved = on_disk.get(a.id, (0, 0))[1]
            c["turns_lost_to_write_behind"] += max(0, a.turn - saved)
            c["turns_on_disk_unacknowledged"] += max(0, saved - a.turn)
        c["cycles"] += 1
        lib.log("cycle %d (%s): %d ok / %d failed turns so far, lost %d, corrupt %d, mismatches %d; "
                "s: check %.1f traffic %.1f verify %.1f" % (
                    cycle, mode, c["turns_ok"], c["turns_failed"], c["turns_lost_to_write_behind"], c["corruptions"],
                    c["oracle_mismatches"], t_traffic - t_cycle, t_verify - t_traffic, time.time() - t_verify))
    oracle.stop()
    su = sorted(c["startup_ms"])
    c["startup_ms"] = {"p50": su[len(su) // 2], "max": su[-1]} if su else {}
    c["seconds"] = round(time.time() - t_start, 1)
    c["agents_on_disk"] = len(max_version)
    passed = c["corruptions"] == 0 and c["version_regressions"] == 0 and c["oracle_mismatches"] == 0 \
        and c["manifest_read_errors"] == 0 and not any("post-restart" in f for f in findings)
    res = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "git": lib.git_info(),
                    "machine": lib.machine_info(), "argv": sys.argv, "seed": args.seed, "agents": args.agents,
                    "ctx": args.ctx, "max_tokens": args.max_tokens, "oracle": args.oracle, "tie_nats": oracle_lib.TIE},
           "counts": c, "findings": findings, "passed": passed}
    print(json.dumps(res["counts"], indent=1))
    for f in findings:
        print("FINDING:", f)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    if passed:
        shutil.rmtree(args.workdir, ignore_errors=True)
    else:
        print("crash loop FAILED; logs and cache kept in %s" % args.workdir)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
