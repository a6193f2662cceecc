"""Shared plumbing for the agentkv benchmark driver (stdlib only; matplotlib optional for plots).

Servers (agentkv and llama.cpp's llama-server) are started as child processes and stopped by their own
PID only. All HTTP is loopback; streaming requests measure the client-side time to the first SSE chunk.
"""
import csv
import ctypes
import ctypes.util
import datetime
import hashlib
import http.client
import json
import mmap
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BIN = os.path.join(ROOT, "build", "agentkv")
DEFAULT_MODEL = os.path.join(ROOT, "models", "tiny-llama-brown-16m-q8_0.gguf")
DEFAULT_TEXT = os.path.join(ROOT, "models", "brown_test.txt")
DEFAULT_LLAMA_SERVER = os.path.join(ROOT, "build-srv", "bin", "llama-server")
# Training context and GGUF architecture of models whose slots we run beyond
# training: llama-server caps its slots at the training context, so the
# comparison lifts that cap with --override-kv ARCH.context_length (RoPE is
# computed the same way either side; only the cap changes).
TRAINED_CTX = {"tiny-llama-brown-16m-q8_0.gguf": 2048}
MODEL_ARCH = {"tiny-llama-brown-16m-q8_0.gguf": "llama"}


def log(*a):
    print("[bench %s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- statistics

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def ratio(a, b):
    return (a / b) if (a is not None and b not in (None, 0)) else None


def pct(xs, p):
    """The p-th percentile (0-100) of xs, nearest rank; None if xs has no values."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


# ---------------------------------------------------------------- machine / provenance

def _read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def machine_info():
    cpu = ""
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = None
    m = re.search(r"MemTotal:\s+(\d+) kB", _read("/proc/meminfo"))
    if m:
        mem = int(m.group(1)) * 1024
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    # boot_id changes at every boot: two runs with different boot_ids ran on different (or rebooted) machines,
    # so "fresh machine" is provable and bench/paired.py clusters its bootstrap by it.
    return {"cpu_model": cpu or platform.processor(), "logical_cpus": os.cpu_count(), "usable_cpus": usable,
            "ram_bytes": mem, "kernel": platform.release(), "python": platform.python_version(),
            "hostname": socket.gethostname(), "boot_id": boot_id(), "loadavg_start": _read("/proc/loadavg").strip()}


def boot_id():
    """/proc/sys/kernel/random/boot_id (a UUID that changes at every boot), or "" where there is none."""
    return _read("/proc/sys/kernel/random/boot_id").strip()


def loadavg_1m():
    """The 1-minute load average, or None where /proc/loadavg cannot be read."""
    try:
        return float(_read("/proc/loadavg").split()[0])
    except (IndexError, ValueError):
        return None


def settle_load(threshold, max_wait_s=300, poll_s=2.0):
    """Waits until the 1-minute load average is below `threshold` (None or <= 0: no wait), at most max_wait_s.
    Returns {"threshold", "waited_s", "loadavg", "settled"}: settled is False when it gave up (the caller
    records that beside its measurement instead of failing)."""
    t0 = time.time()
    la = loadavg_1m()
    if not threshold or threshold <= 0:
        return {"threshold": None, "waited_s": 0.0, "loadavg": la, "settled": True}
    while la is not None and la >= threshold and time.time() - t0 < max_wait_s:
        time.sleep(poll_s)
        la = loadavg_1m()
    return {"threshold": threshold, "waited_s": round(time.time() - t0, 1), "loadavg": la,
            "settled": la is None or la < threshold}


def git_info():
    def g(*args):
        try:
            return subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True, text=True,
                                  timeout=20).stdout.strip()
        except Exception:
            return ""
    # A copied tree (the device machine's) may have no .git, or an unrelated one: the caller names the
    # source commit in AGENTKV_SOURCE_COMMIT (scripts/device-bench.sh), which then wins.
    explicit = os.environ.get("AGENTKV_SOURCE_COMMIT", "").strip()
    if explicit:
        return {"commit": explicit, "dirty": None, "source": "AGENTKV_SOURCE_COMMIT"}
    return {"commit": g("rev-parse", "HEAD"), "dirty": bool(g("status", "--porcelain", "--", "src", "bench")),
            "source": "git"}


def binary_version(path):
    """What `agentkv version` says of the binary (the commit it was built from), or "" if it cannot say."""
    try:
        return subprocess.run([path, "version"], capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        return ""


def file_identity(path, full=False):
    """{"path", "bytes", "mtime", "sha256_first_mib"} of a file, plus "sha256" of all of it with full=True
    (binaries: tens of MB, hashed once per run; models keep the first-MiB identity: multi-GB)."""
    if not path or not os.path.exists(path):
        return {"path": path, "exists": False}
    st = os.stat(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(1 << 20))
        out = {"path": os.path.abspath(path), "bytes": st.st_size, "mtime": int(st.st_mtime),
               "sha256_first_mib": h.hexdigest()[:16]}
        if full:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
            out["sha256"] = h.hexdigest()
    return out


def make_meta(args, sub):
    return {"subcommand": sub, "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command_line": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
            "quick": bool(getattr(args, "quick", False)), "machine": machine_info(), "git": git_info(),
            "agentkv_bin": dict(file_identity(args.bin, full=True), version=binary_version(args.bin)), "model": file_identity(args.model_path),
            "model_label": args.model_label, "threads": args.threads,
            "slot_kv": getattr(args, "slot_kv", None) or "server default (auto)"}


# ---------------------------------------------------------------- outputs

def out_dir(args, sub):
    d = os.path.join(args.out, sub)
    os.makedirs(d, exist_ok=True)
    return d


def fresh_work_dir(args, sub):
    """(out_dir(args, sub), its "work" subfolder emptied): where a driver's server logs and cache dirs go."""
    d = out_dir(args, sub)
    work = os.path.join(d, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return d, work


def write_csv(path, rows, cols=None):
    if cols is None:
        cols = []
        for r in rows:
            for k in r:
                if k not in cols:
                    cols.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: fmt_cell(r.get(k), csvmode=True) for k in cols})


def fmt_cell(v, csvmode=False):
    if v is None:
        return "" if csvmode else "—"
    if isinstance(v, float):
        if csvmode:
            return "%.6g" % v
        if abs(v) >= 100:
            return "%.0f" % v
        if abs(v) >= 10:
            return "%.1f" % v
        return "%.2f" % v
    return str(v)


def md_table(rows, cols, headers=None, fmt=None):
    headers = headers or cols
    fmt = fmt or {}
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] * len(cols)) + "|"]
    for r in rows:
        out.append("| " + " | ".join((fmt[c] % r.get(c)) if (c in fmt and r.get(c) is not None) else
                                     fmt_cell(r.get(c)) for c in cols) + " |")
    return "\n".join(out)


def md_meta(meta):
    m = meta["machine"]
    lines = ["- date: %s" % meta["date"],
             "- command: `%s`" % meta["command_line"],
             "- git: %s%s (%s)" % (meta["git"].get("commit", "")[:12], " (dirty)" if meta["git"].get("dirty") else "",
                                   meta["git"].get("source", "git")),
             "- machine: %s, %s usable / %s logical CPUs, %.1f GiB RAM, kernel %s, boot_id %s, load at start %s" % (
                 m["cpu_model"], m["usable_cpus"], m["logical_cpus"], (m["ram_bytes"] or 0) / 2**30, m["kernel"],
                 (m.get("boot_id") or "?")[:8], m["loadavg_start"]),
             "- model: %s (%s bytes), threads %s%s" % (meta["model_label"], meta["model"].get("bytes"),
                                                      meta["threads"], ", QUICK mode" if meta["quick"] else "")]
    return "\n".join(lines)


def write_outputs(d, name, meta, result, csv_rows, md_body, csv_cols=None):
    """result: dict merged with meta into <name>.json; csv_rows -> <name>.csv; md_body -> <name>.md."""
    doc = {"meta": meta}
    doc.update(result)
    doc["meta"]["loadavg_end"] = _read("/proc/loadavg").strip()
    with open(os.path.join(d, name + ".json"), "w") as f:
        json.dump(doc, f, indent=1, default=str)
    write_csv(os.path.join(d, name + ".csv"), csv_rows, csv_cols)
    with open(os.path.join(d, name + ".md"), "w") as f:
        f.write("# %s\n\n%s\n\n%s\n" % (name, md_meta(meta), md_body))
    log("wrote %s/%s.{json,csv,md}" % (d, name))


def plt():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as p
        return p
    except Exception:
        return None


# ---------------------------------------------------------------- page cache / bandwidth

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
POSIX_FADV_DONTNEED = 4


def _fadvise_dontneed(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd) if os.access(path, os.W_OK) else None
        return os.posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) if hasattr(os, "posix_fadvise") else None
    finally:
        os.close(fd)


def resident_fraction(paths):
    """Fraction of the files' pages that are in the page cache (mincore); None if unknown."""
    try:
        mincore = _libc.mincore
        mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    except AttributeError:
        return None
    page = mmap.PAGESIZE
    tot = res = 0
    for p in paths:
        try:
            size = os.path.getsize(p)
            if size == 0:
                continue
            with open(p, "rb") as f:
                mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
            try:
                n = (size + page - 1) // page
                vec = (ctypes.c_ubyte * n)()
                # address of the mapping: via a ctypes array view of the mmap object
                arr = (ctypes.c_char * size).from_buffer(mm)
                rc = mincore(ctypes.addressof(arr), size, vec)
                del arr
                if rc != 0:
                    return None
                tot += n
                res += sum(1 for b in vec if b & 1)
            finally:
                mm.close()
        except (OSError, ValueError, BufferError):
            return None
    return (res / tot) if tot else 0.0


def files_under(d):
    out = []
    for dp, _, fns in os.walk(d):
        for fn in fns:
            out.append(os.path.join(dp, fn))
    return out


def drop_page_cache(paths, method="fadvise"):
    """Evict the given files from the page cache. Returns a label dict: method used and the resident fraction
    measured afterwards (mincore). 'page cache' means the files may still be cached."""
    paths = [p for p in paths if os.path.isfile(p)]
    used = None
    if method == "drop_caches":
        try:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1\n")
            used = "drop_caches"
        except OSError:
            used = None
    if used is None and method != "none":
        ok = True
        for p in paths:
            try:
                _fadvise_dontneed(p)
            except OSError:
                ok = False
        used = "fadvise" if ok else None
    frac = resident_fraction(paths) if paths else 0.0
    dropped = used is not None and frac is not None and frac < 0.05
    return {"method": used or "none", "resident_after": frac, "label": "disk (page cache dropped)" if dropped
            else "page cache"}


def measure_read_bandwidth(d, size_bytes, method="fadvise"):
    """Sequential read bandwidth of the file system under d: cold (page cache dropped) and cached."""
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "bw-probe.bin")
    chunk = os.urandom(1 << 22)
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        left = size_bytes
        while left > 0:
            f.write(chunk[:min(left, len(chunk))])
            left -= len(chunk)
        f.flush()
        os.fsync(f.fileno())
    write_s = time.perf_counter() - t0

    def rd():
        t = time.perf_counter()
        with open(path, "rb", buffering=0) as f:
            while f.read(1 << 22):
                pass
        return time.perf_counter() - t
    drop = drop_page_cache([path], method)
    cold_s = rd()
    warm_s = min(rd(), rd())
    os.unlink(path)
    return {"probe_bytes": size_bytes, "write_MBps": size_bytes / write_s / 1e6,
            "cold_read_MBps": size_bytes / cold_s / 1e6, "cached_read_MBps": size_bytes / warm_s / 1e6,
            "cold_label": drop["label"], "drop": drop}


# ---------------------------------------------------------------- HTTP

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def http_json(port, method, path, body=None, headers=None, timeout=3600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    t0 = time.perf_counter()
    c.request(method, path, json.dumps(body) if body is not None else None, h)
    r = c.getresponse()
    data = r.read()
    wall = (time.perf_counter() - t0) * 1000.0
    c.close()
    try:
        j = json.loads(data) if data else None
    except ValueError:
        j = {"raw": data.decode("utf-8", "replace")}
    return r.status, j, wall


def http_text(port, path, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("GET", path)
    r = c.getresponse()
    t = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, t


def stream_piece(j):
    """The generated text (or tool-call arguments) one parsed SSE data object carries, or None: a completion or
    chat chunk (content, tool_calls arguments), llama-server's /completion, an Anthropic content_block_delta
    (text, partial_json, thinking), a Responses output_text / function_call_arguments delta."""
    if j.get("choices"):
        ch = j["choices"][0]
        if "text" in ch:
            return ch.get("text")
        d = ch.get("delta") or {}
        return d.get("content") or "".join(((c.get("function") or {}).get("arguments") or "")
                                           for c in d.get("tool_calls") or []) or None
    t = j.get("type")
    if t == "content_block_delta":
        d = j.get("delta") or {}
        return d.get("text") or d.get("partial_json") or d.get("thinking")
    if t in ("response.output_text.delta", "response.function_call_arguments.delta"):
        return j.get("delta")
    if "content" in j and isinstance(j.get("content"), str):  # llama-server /completion
        return j.get("content")
    return None


def stream_request(port, path, body, headers=None, timeout=3600):
    """POST a streaming request (any of the generation APIs: stream_piece); returns dict with client_ttft_ms
    (first chunk carrying content, else first chunk), total_ms, text, chunks (list of parsed JSON), status."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    t0 = time.perf_counter()
    c.request("POST", path, json.dumps(body), h)
    r = c.getresponse()
    res = {"status": r.status, "client_ttft_ms": None, "client_first_chunk_ms": None, "text": "", "chunks": [],
           "t0": t0, "token_ms": []}  # t0: time.perf_counter() at the request; token_ms: chunks with text, after t0
    if r.status != 200:
        res["error"] = r.read().decode("utf-8", "replace")[:2000]
        res["total_ms"] = (time.perf_counter() - t0) * 1000.0
        c.close()
        return res
    while True:
        line = r.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        d = line[5:].strip()
        if d == b"[DONE]":
            break
        now = (time.perf_counter() - t0) * 1000.0
        try:
            j = json.loads(d)
        except ValueError:
            continue
        res["chunks"].append(j)
        if res["client_first_chunk_ms"] is None and not (j.get("choices") == [] and j.get("usage")):
            res["client_first_chunk_ms"] = now
        piece = stream_piece(j)
        if piece:
            res["token_ms"].append(now)
            if res["client_ttft_ms"] is None:
                res["client_ttft_ms"] = now
            res["text"] += piece
        if j.get("error"):
            res["error"] = j["error"]
    res["total_ms"] = (time.perf_counter() - t0) * 1000.0
    if res["client_ttft_ms"] is None:  # e.g. the only token was EOS or an incomplete UTF-8 piece
        res["client_ttft_ms"] = res["client_first_chunk_ms"]
    c.close()
    return res


# ---------------------------------------------------------------- servers

_LIVE = set()  # started and not yet stopped


def stop_all():
    """Stops every server still running (a benchmark that raised leaves them behind)."""
    for p in list(_LIVE):
        p.stop()


def proc_mem_mib(pid):
    """A process's host memory from /proc/PID/status, MiB: rss (resident), locked (mlock'ed) and pinned (pages
    pinned by the kernel for a driver, e.g. CUDA host buffers, where the kernel reports them); None where
    unknown."""
    out = {"rss_mib": None, "locked_mib": None, "pinned_mib": None}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                key, _, rest = line.partition(":")
                field = {"VmRSS": "rss_mib", "VmLck": "locked_mib", "VmPin": "pinned_mib"}.get(key)
                if field and rest.strip().endswith("kB"):
                    out[field] = int(rest.split()[0]) / 1024.0
    except OSError:
        pass
    return out


class Proc:
    """A child server process; stopped by its own PID only."""

    def __init__(self, cmd, log_path, port, env=None):
        self.cmd, self.log_path, self.port, self.env = cmd, log_path, port, env
        self.p = None

    def start(self, timeout=600):
        logf = open(self.log_path, "ab")
        logf.write(("\n$ %s\n" % " ".join(self.cmd)).encode())
        logf.flush()
        t0 = time.perf_counter()
        self.p = subprocess.Popen(self.cmd, stdout=logf, stderr=subprocess.STDOUT, env=self.env)
        _LIVE.add(self)
        logf.close()
        while True:
            try:
                st, j, _ = http_json(self.port, "GET", "/health", timeout=2)
                if st == 200:
                    break
            except (OSError, http.client.HTTPException):
                pass
            if self.p.poll() is not None:
                raise RuntimeError("server exited with %s; see %s" % (self.p.returncode, self.log_path))
            if time.perf_counter() - t0 > timeout:
                self.stop()
                raise RuntimeError("server not ready after %ss; see %s" % (timeout, self.log_path))
            time.sleep(0.05)
        self.startup_ms = (time.perf_counter() - t0) * 1000.0
        self.ready_mem = proc_mem_mib(self.p.pid)  # what the server holds once ready (reserves, pinned buffers)
        return self.startup_ms

    def stop(self, timeout=120):
        _LIVE.discard(self)
        if self.p is None or self.p.poll() is not None:
            return None
        t0 = time.perf_counter()
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return (time.perf_counter() - t0) * 1000.0

    def log_text(self):
        return _read(self.log_path)

    @property
    def pid(self):
        return self.p.pid if self.p else None


class Agentkv(Proc):
    def __init__(self, args, workdir, name="agentkv", slots=1, ctx=2048, kv="q4_0", cache_ram=None, extra=None,
                 cache_dir=None, port=None):
        self.args = args
        port = port or free_port()
        self.cache_dir = cache_dir or os.path.join(workdir, name + "-cache")
        cmd = [args.bin, "serve", "-m", args.model_path, "--port", str(port), "--cache-dir", self.cache_dir,
               "--slots", str(slots), "-c", str(ctx), "--kv", kv, "-t", str(args.threads)]
        if cache_ram is not None:
            cmd += ["--cache-ram", str(int(cache_ram))]
        if getattr(args, "slot_kv", None):  # the engine slots' KV type (default auto: the at-rest type)
            cmd += ["--slot-kv", args.slot_kv]
        cmd += list(extra or [])
        Proc.__init__(self, cmd, os.path.join(workdir, name + ".log"), port)

    def start(self, timeout=600):
        ms = Proc.start(self, timeout)
        # The one-slot state buffers' page-locked memory, as the server counts it (/metrics): /proc's VmPin does not
        # see the NVIDIA driver's page-locking.
        self.ready_mem["page_locked_mib"] = self.page_locked_mib()
        return ms

    def page_locked_mib(self):
        """MiB of host memory page-locked for the GPU (agentkv_host_buffer_bytes{memory="page_locked"}); None where
        the server does not report it."""
        locked = [v for k, v in self.metrics().items()
                  if k.startswith("agentkv_host_buffer_bytes{") and 'memory="page_locked"' in k]
        return sum(locked) / (1 << 20) if locked else None

    def wipe(self):
        shutil.rmtree(self.cache_dir, ignore_errors=True)

    def complete(self, agent, prompt, max_tokens=1, extra=None):
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "seed": 42, "stream": True,
                "stream_options": {"include_usage": True}}
        body.update(extra or {})
        r = stream_request(self.port, "/v1/completions", body, {"X-Agent-Id": agent})
        usage = None
        for j in r["chunks"]:
            if j.get("usage"):
                usage = j["usage"]
        r["usage"] = usage
        del r["chunks"]
        if r["status"] != 200 or usage is None:
            raise RuntimeError("agentkv request for %s failed: %s %s" % (agent, r["status"], r.get("error")))
        ak = usage.get("agentkv") or {}
        return {"agent": agent, "prompt_tokens": usage.get("prompt_tokens"),
                "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
                "completion_tokens": usage.get("completion_tokens"), "state": ak.get("cache_state"),
                "match": ak.get("match"), "tokens_prefilled": ak.get("tokens_prefilled"),
                "server_ttft_ms": ak.get("ttft_ms"), "client_ttft_ms": r["client_ttft_ms"],
                "client_total_ms": r["total_ms"], "text": r["text"],
                "server_wait_ms": ak.get("wait_ms"), "server_read_ms": ak.get("read_ms"),
                "server_restore_ms": ak.get("restore_ms"), "t0": r["t0"], "token_ms": r["token_ms"]}

    def complete_plain(self, agent, prompt, max_tokens=1):
        """Non-streamed completion: (whole-response client ms, usage)."""
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "seed": 42}
        st, j, wall = http_json(self.port, "POST", "/v1/completions", body, {"X-Agent-Id": agent})
        if st != 200:
            raise RuntimeError("agentkv request for %s failed: %s %s" % (agent, st, j))
        return wall, j["usage"]

    def agent(self, agent):
        st, j, _ = http_json(self.port, "GET", "/v1/agents/" + agent)
        return j if st == 200 else None

    def wait_saved(self, agent, timeout_s=10.0):
        """Wait until the agent's last turn is on disk. A response is sent before its turn is committed (RAM
        pool, then a queued save), so the pool's state right after a response may not include it yet; its
        save landing implies its commit did. True if it landed within timeout_s."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            a = self.agent(agent) or {}
            if a.get("disk_bytes"):
                return True
            time.sleep(0.01)
        return False

    def agents(self):
        st, j, _ = http_json(self.port, "GET", "/v1/agents")
        return (j or {}).get("data", []) if st == 200 else []

    def evict(self, agent):
        st, j, _ = http_json(self.port, "DELETE", "/v1/agents/%s?evict_only=true" % agent)
        return st, j

    def erase(self, agent):
        st, j, _ = http_json(self.port, "DELETE", "/v1/agents/" + agent)
        return st, j

    def metrics(self):
        st, t = http_text(self.port, "/metrics")
        return parse_prom(t) if st == 200 else {}

    def bytes_per_token_spec(self):
        m = re.findall(r"kv (\w+) \((\d+) B/token\)", self.log_text())
        return int(m[-1][1]) if m else None


class HistogramDeltas:
    """What an agentkv server's /metrics histograms gained between two calls: {name: (count, sum)} for each
    name in `names` (its _count and _sum lines). `srv`: anything with the server's `port`; None (llama-server)
    gives None."""

    def __init__(self, srv, names):
        self.srv, self.names = srv, tuple(names)
        self.last = self._read()

    def _read(self):
        if self.srv is None:
            return None
        st, text = http_text(self.srv.port, "/metrics")
        m = parse_prom(text) if st == 200 else {}
        return {k: (m.get(k + "_count", 0.0), m.get(k + "_sum", 0.0)) for k in self.names}

    def since_last(self):
        now = self._read()
        out = None if now is None else {k: (now[k][0] - self.last[k][0], now[k][1] - self.last[k][1])
                                        for k in self.names}
        self.last = now
        return out


def mean_of(delta, name):
    """sum / count of one histogram in a HistogramDeltas result, None without observations."""
    if not delta or not delta[name][0]:
        return None
    return delta[name][1] / delta[name][0]


def parse_prom(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        try:
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
        except ValueError:
            pass
    return out


def prom_sum(m, name):
    return sum(v for k, v in m.items() if k == name or k.startswith(name + "{"))


def ctx_override_args(model_path, ctx):
    """llama-server caps a slot at the model's training context: past it, the args that lift the cap."""
    base = os.path.basename(model_path)
    if TRAINED_CTX.get(base) and ctx > TRAINED_CTX[base] and MODEL_ARCH.get(base):
        return ["--override-kv", "%s.context_length=int:%d" % (MODEL_ARCH[base], ctx)]
    return []


# How llama-server's CPU threads are bound (issue 34: agentkv binds its compute team; an unbound OpenMP team
# stalled llama-server's first decode after a restart by 21-51 ms on the 2-core CPU).
#   omp:    OMP_PROC_BIND=close OMP_PLACES=cores in its environment (ggml's CPU backend runs on OpenMP here)
#   strict: --cpu-strict 1 (ggml's own threadpool placement; used where ggml is built without OpenMP)
#   none:   as it starts by default
LS_BIND_CHOICES = ("omp", "strict", "none")


def ls_bind_env_args(bind):
    """(environment for the llama-server process, extra args) for a LS_BIND_CHOICES value."""
    if bind not in LS_BIND_CHOICES:
        raise ValueError("ls_bind_env_args: unknown binding %r" % bind)
    env = dict(os.environ)
    if bind == "omp":
        env.update({"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"})
    return env, (["--cpu-strict", "1"] if bind == "strict" else [])


class LlamaServer(Proc):
    """llama.cpp's llama-server: -np slots of ctx tokens each (its -c is slots x ctx), KV type `kv` in the slots
    and in its slot files (-ctk/-ctv; a slot file holds the slot's cells as they are), flash attention on, no
    RAM prompt cache unless extra says otherwise. Threads bound as `bind` says (LS_BIND_CHOICES)."""

    def __init__(self, args, workdir, ctx, kv="q4_0", name="llama-server", slots=1, bind=None, extra=None,
                 binary=None):
        port = free_port()
        self.slot_dir = os.path.join(workdir, name + "-slots")
        os.makedirs(self.slot_dir, exist_ok=True)
        self.kv, self.slots = kv, slots
        self.bind = bind or getattr(args, "ls_bind", None) or "omp"
        env, bind_args = ls_bind_env_args(self.bind)
        cmd = [binary or args.llama_server, "-m", args.model_path, "--host", "127.0.0.1", "--port", str(port),
               "-np", str(slots), "-c", str(ctx * slots), "-t", str(args.threads), "-tb", str(args.threads),
               "-fa", "on", "-ctk", kv, "-ctv", kv, "--slot-save-path", self.slot_dir, "--cache-ram", "0",
               "--no-webui"] + bind_args
        cmd += ctx_override_args(args.model_path, ctx)
        cmd += list(extra or [])
        Proc.__init__(self, cmd, os.path.join(workdir, name + ".log"), port, env=env)

    def tokenize(self, text):
        """(token ids of `text` as /completion would tokenize a prompt, client wall ms of the /tokenize call).
        RuntimeError on failure."""
        st, j, wall = http_json(self.port, "POST", "/tokenize", {"content": text, "add_special": True})
        if st != 200 or not isinstance(j, dict) or "tokens" not in j:
            raise RuntimeError("llama-server /tokenize: %s %s" % (st, j))
        return j["tokens"], wall

    def complete(self, prompt, n_predict=1, slot=0, extra=None):
        """One streamed /completion on `slot`; prompt is text or a list of token ids. Returns client TTFT and
        total, and llama-server's own timings: prompt_n / prompt_ms (the prompt tokens it evaluated and how
        long that took: after a restore, the first decode), cache_n (tokens reused from the slot)."""
        body = {"prompt": prompt, "n_predict": n_predict, "id_slot": slot, "cache_prompt": True, "temperature": 0,
                "seed": 42, "stream": True}
        body.update(extra or {})
        r = stream_request(self.port, "/completion", body)
        if r["status"] != 200:
            raise RuntimeError("llama-server request failed: %s %s" % (r["status"], r.get("error")))
        t = {}
        for j in r["chunks"]:
            if j.get("timings"):
                t = j["timings"]
        return {"prompt_tokens": t.get("prompt_n"), "prompt_ms": t.get("prompt_ms"),
                "client_ttft_ms": r["client_ttft_ms"], "client_total_ms": r["total_ms"],
                "tokens_cached": t.get("cache_n"), "t0": r["t0"], "token_ms": r["token_ms"]}

    def slot(self, action, filename=None, slot=0):
        body = {"filename": filename} if filename else {}
        st, j, wall = http_json(self.port, "POST", "/slots/%d?action=%s" % (slot, action), body)
        if st != 200:
            raise RuntimeError("llama-server slot %d %s: %s %s" % (slot, action, st, j))
        return j, wall


# ---------------------------------------------------------------- text and models

class Corpus:
    """Held-out text with a chars-per-token estimate (calibrated against the server's own tokenizer)."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.text = f.read()
        self.cpt = 4.0
        self.calibrated = False

    def calibrate(self, srv, agent="calib"):
        sample = self.text[:1500]
        r = srv.complete(agent, sample, 1)
        srv.erase(agent)
        self.cpt = len(sample) / max(1, r["prompt_tokens"])
        self.prefill_tps = r["prompt_tokens"] / max(1e-3, (r["server_ttft_ms"] or 1) / 1000.0)
        self.calibrated = True
        return self.cpt

    def calibrate_http(self, port):
        """Chars per token (2 decimals) from one non-streamed /v1/completions of a sample on a running server,
        agentkv or llama-server (both count the model's tokens in usage.prompt_tokens). RuntimeError if it fails."""
        sample = self.text[:1500]
        st, j, _ = http_json(port, "POST", "/v1/completions", {"prompt": sample, "max_tokens": 1, "temperature": 0},
                             {"X-Agent-Id": "calibrate"})
        if st != 200 or not isinstance(j, dict) or "usage" not in j:
            raise RuntimeError("calibration request failed: %s %s" % (st, j))
        self.cpt = round(len(sample) / max(1, j["usage"]["prompt_tokens"]), 2)
        self.calibrated = True
        return self.cpt

    def slice(self, offset_tokens, n_tokens):
        """About n_tokens of text starting about offset_tokens in (wraps around); starts at a word boundary."""
        a = int(offset_tokens * self.cpt) % max(1, len(self.text) - 10)
        n = int(n_tokens * self.cpt)
        t = self.text
        while len(t) - a < n:  # wrap
            t = t + "\n" + self.text
        s = t[a:a + n]
        i = s.find(" ")
        return s[i + 1:] if 0 <= i < 40 else s


def add_side_by_side_args(ap, text_help):
    """The options of a driver that runs agentkv and llama-server side by side: both binaries, the model
    (resolve_model reads --model and --synth-type) and the held-out text."""
    ap.add_argument("--bin", default=DEFAULT_BIN, help="agentkv binary")
    ap.add_argument("--llama-server", default=DEFAULT_LLAMA_SERVER, help="llama-server binary")
    ap.add_argument("--model", default=None, help="GGUF path or synth-model preset (default: the bundled model)")
    ap.add_argument("--synth-type", default="q4_0", help="weight type of a generated preset")
    ap.add_argument("--text", default=DEFAULT_TEXT, help=text_help)


def add_extra_args(ap, ls_help="extra llama-server args (one string)"):
    """--agentkv-extra / --ls-extra (pass-through flags, one string each) and --drop (how agentkv's cache files
    leave the page cache at a restart: drop_page_cache's method)."""
    ap.add_argument("--agentkv-extra", default="", help="extra agentkv serve args (one string, e.g. "
                                                        "'--prefill-chunk 2048')")
    ap.add_argument("--ls-extra", default="", help=ls_help)
    ap.add_argument("--drop", default="fadvise", choices=["fadvise", "drop_caches", "none"],
                    help="how agentkv's cache files leave the page cache at the restart")


def fill_defaults(args, quick, defaults):
    """Every option of `args` left unset (None) gets its value from `quick` (with --quick) or `defaults`."""
    for k, v in (quick if args.quick else defaults).items():
        if getattr(args, k) is None:
            setattr(args, k, v)


def raise_on_sigterm(signum, frame):
    """A SIGTERM handler (signal.signal(signal.SIGTERM, lib.raise_on_sigterm)): `timeout` (scripts/device-bench.sh)
    sends SIGTERM; a driver unwinds as on Ctrl-C, stops its servers and writes what it measured."""
    raise KeyboardInterrupt("SIGTERM")


def start_driver(args, sub, subcommand):
    """What a driver's main does first: SIGTERM unwinds as Ctrl-C does (raise_on_sigterm), the output dir and its
    emptied "work" subfolder (fresh_work_dir), the provenance (make_meta). Returns (out dir, work dir, meta)."""
    signal.signal(signal.SIGTERM, raise_on_sigterm)
    d, work = fresh_work_dir(args, sub)
    return d, work, make_meta(args, subcommand)


def resolve_model(args):
    """--model: a GGUF path, or a synth-model preset name (generated once under bench/out/models/)."""
    m = args.model
    if m is None:
        args.model_path, args.model_label = DEFAULT_MODEL, os.path.basename(DEFAULT_MODEL)
        return
    if os.path.exists(m):
        args.model_path, args.model_label = os.path.abspath(m), os.path.basename(m)
        return
    d = os.path.join(args.out, "models")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "%s-%s.gguf" % (m, args.synth_type))
    if not os.path.exists(path):
        log("generating synthetic model %s (%s) -> %s" % (m, args.synth_type, path))
        subprocess.run([args.bin, "synth-model", "--preset", m, "-o", path + ".tmp", "--type", args.synth_type],
                       check=True)
        os.rename(path + ".tmp", path)
    args.model_path, args.model_label = path, "synthetic %s (%s, random weights: timing only)" % (m, args.synth_type)


def trained_ctx(args):
    return TRAINED_CTX.get(os.path.basename(args.model_path))
