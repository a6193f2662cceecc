#!/usr/bin/env python3
"""Full disk (issue 12, RELIABILITY): `agentkv serve` with its cache dir on a small tmpfs that fills up.

The cache dir is a tmpfs of --size-mib MiB (mount needs root or CAP_SYS_ADMIN: without it the harness prints
"skip: ..." and exits 0, so CI without the privilege passes), with a disk budget (--cache-disk 1G) far above
what the tmpfs holds and a small RAM pool, so agents keep coming back from disk. Phases:

  fill     --agents agents x 2 turns: the disk fills; saves that do not fit evict the least recently used
           agents (agentkv_disk_evictions_total{reason="no_space"}) and land
  foreign  another program keeps taking every free byte (it grows a file whenever room appears): the disk
           refuses saves (agentkv_disk_out_of_space_total), the store evicts its own agents for room and
           retries; a save whose retries the other program keeps beating fails
           (agentkv_save_failures_total) and its turn stays in RAM; requests are still served
  freed    the file is deleted: saves land again
  restart  SIGTERM, `agentkv cache verify` (0 bad), restart, every agent's next turn

Every answer, in every phase, is compared with a cold oracle (a second server with its cache on the normal
disk; a fresh agent id per check: greedy), so a corrupt cache that were loaded would show as a mismatch.
Exit status 0 iff every request was answered 200, mismatches == 0, verify found 0 bad agents, the disk
refused writes during "foreign" (out-of-space attempts > 0), some agent was evicted for room, and nothing
was left unsaved after "freed". Whether a save also failed in "foreign" depends on who wins each race for
freed bytes (our retry or the other program's next write): it is reported (foreign_save_failures), not
required; scheduler_io_test's AFullDiskLosesNoTurn covers a failed save deterministically.

  sudo python3 bench/disk_full.py --json bench/results/disk_full_cpu.json
  python3 bench/disk_full.py --quick     # scripts/test.sh
"""
import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
from crash_loop import Server, chat, verify  # noqa: E402

WATCH = ("agentkv_save_failures_total", "agentkv_disk_out_of_space_total", "agentkv_disk_evictions_total",
         "agentkv_unsaved_agents", "agentkv_corruption_events_total", "agentkv_read_failures_total",
         "agentkv_requests_total")


def mount_tmpfs(path, size_mib):
    os.makedirs(path, exist_ok=True)
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm,mode=0700" % size_mib, "tmpfs", path],
                           capture_output=True, text=True)
    except OSError as e:  # no mount(8)
        return False, str(e)
    return r.returncode == 0, (r.stderr or r.stdout).strip()


def df(path):
    st = os.statvfs(path)
    return {"total": st.f_blocks * st.f_frsize, "free": st.f_bavail * st.f_frsize}


def metrics(port):
    st, text = lib.http_text(port, "/metrics")
    m = lib.parse_prom(text) if st == 200 else {}
    return {k: v for k, v in m.items() if k.startswith(WATCH)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=lib.DEFAULT_BIN)
    ap.add_argument("--model", default=lib.DEFAULT_MODEL)
    ap.add_argument("--agents", type=int, default=16)
    ap.add_argument("--size-mib", type=int, default=6)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--max-tokens", type=int, default=12)
    ap.add_argument("--msg-chars", type=int, default=500, help="characters of each user message")
    ap.add_argument("--quick", action="store_true", help="6 agents, 2 MiB, 250-character messages (CI)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.quick:
        args.agents, args.size_mib, args.msg_chars = 6, 2, 250
    args.workdir = args.workdir or "/tmp/agentkv-disk-full-%d" % os.getpid()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    mnt = os.path.join(args.workdir, "tmpfs")
    ok, why = mount_tmpfs(mnt, args.size_mib)
    if not ok:
        print("disk_full: skip: cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): %s" % why)
        shutil.rmtree(args.workdir, ignore_errors=True)
        return 0
    srv = Server(args, "server", os.path.join(mnt, "cache"), ["--cache-disk", "1G", "--cache-ram", "2M"])
    oracle = Server(args, "oracle", os.path.join(args.workdir, "oracle-cache"), ["--cache-ram", "64M"])
    try:
        return run(args, srv, oracle, mnt)
    finally:
        srv.kill9()
        oracle.kill9()
        subprocess.run(["umount", mnt])


def run(args, srv, oracle, mnt):
    with open(lib.DEFAULT_TEXT, encoding="utf-8") as f:
        corpus = f.read()
    srv.start()
    oracle.start()
    histories = {"d%d" % i: [{"role": "system", "content": "You are agent %d." % i}] for i in range(args.agents)}
    res = {"phases": {}, "requests": 0, "non_200": 0, "mismatches": 0, "states": {}, "findings": []}
    n_oracle = [0]

    def turn(aid, k):
        a = (hash(aid) % 1000 + 997 * k) % (len(corpus) - 2000)
        msgs = histories[aid] + [{"role": "user", "content": "(%s turn %d) %s" % (aid, k, corpus[a:a + args.msg_chars])}]
        res["requests"] += 1
        try:
            text, usage = chat(srv.port, aid, msgs, args.max_tokens, k % 2 == 0)
        except (OSError, http.client.HTTPException, RuntimeError, ValueError, KeyError) as e:
            res["non_200"] += 1
            res["findings"].append("%s turn %d: %s" % (aid, k, str(e)[:200]))
            return
        state = (usage.get("agentkv") or {}).get("cache_state", "?")
        res["states"][state] = res["states"].get(state, 0) + 1
        oid = "oracle%d" % n_oracle[0]
        n_oracle[0] += 1
        want, _ = chat(oracle.port, oid, msgs, args.max_tokens, False)
        lib.http_json(oracle.port, "DELETE", "/v1/agents/" + oid)
        if text != want:
            res["mismatches"] += 1
            res["findings"].append("%s turn %d (%s): %r vs cold %r" % (aid, k, state, text, want))
        histories[aid] = msgs + [{"role": "assistant", "content": text}]

    def phase(name, turns):
        t0 = time.time()
        for k in turns:
            for aid in histories:
                turn(aid, k)
        lib.http_json(srv.port, "GET", "/v1/agents")  # after every turn's commit
        time.sleep(0.5)  # let the write-behind saves run
        res["phases"][name] = {"seconds": round(time.time() - t0, 1), "disk": df(mnt), "metrics": metrics(srv.port)}
        lib.log("%s: %s" % (name, json.dumps(res["phases"][name])))

    phase("fill", [1, 2])
    # Another program takes every free byte, and every byte freed later.
    filler = os.path.join(mnt, "filler")
    stop = threading.Event()

    def hog():
        with open(filler, "wb", buffering=0) as f:
            while not stop.is_set():
                try:
                    f.write(b"\0" * 4096)
                except OSError:
                    # Retry at once: space our evictions free goes to this program before our next
                    # write can take it (with a 1 ms nap a save sometimes won the race, no save
                    # failed in the phase, and the check below of a failed save flaked).
                    time.sleep(0)

    hogger = threading.Thread(target=hog)
    hogger.start()
    time.sleep(0.5)
    phase("foreign", [3])
    stop.set()
    hogger.join()
    res["filler_bytes"] = os.path.getsize(filler)
    os.remove(filler)
    phase("freed", [4])
    srv.stop()
    rc, n, bad = verify(args, srv.cache_dir)
    res["verify"] = {"agents": n, "bad": bad}
    srv.start()
    phase("restart", [5])
    res["disk_total_bytes"] = df(mnt)["total"]
    m = res["phases"]
    # Counters restart with the server: the restart phase's are its own.
    no_space = max(m["freed"]["metrics"].get('agentkv_disk_evictions_total{reason="no_space"}', 0), 0) + \
        m["restart"]["metrics"].get('agentkv_disk_evictions_total{reason="no_space"}', 0)
    res["no_space_evictions"] = no_space
    res["foreign_out_of_space"] = m["foreign"]["metrics"].get("agentkv_disk_out_of_space_total", 0)
    res["foreign_save_failures"] = m["foreign"]["metrics"].get("agentkv_save_failures_total", 0)
    res["passed"] = (res["non_200"] == 0 and res["mismatches"] == 0 and not bad and no_space > 0
                     and res["foreign_out_of_space"] > 0
                     and m["freed"]["metrics"].get("agentkv_unsaved_agents", 1) == 0)
    res["meta"] = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "git": lib.git_info(),
                   "machine": lib.machine_info(), "argv": sys.argv, "agents": args.agents,
                   "size_mib": args.size_mib, "ctx": args.ctx}
    print(json.dumps({k: v for k, v in res.items() if k != "meta"}, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    if not res["passed"]:
        print("disk_full FAILED; logs in %s" % args.workdir)
        return 1
    shutil.rmtree(os.path.join(args.workdir, "oracle-cache"), ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
