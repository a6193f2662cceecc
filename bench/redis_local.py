"""A redis-server for the benchmarks (started here on a free loopback port, nothing persisted), a minimal
binary-safe RESP client (stdlib), and loopback bandwidth probes to set the remote tier's throughput against.

The redis-server binary is a parameter (`--redis-server PATH` of the scripts), so the benchmarks run where
Redis is not on PATH.
"""
import os
import shutil
import socket
import statistics
import subprocess
import threading
import time

import lib


class RespError(Exception):
    pass


class Resp:
    """One connection; `pipeline` sends several commands at once and reads every reply (bulk strings as bytes)."""

    def __init__(self, port, host="127.0.0.1", timeout=30):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.sock.makefile("rb", buffering=1 << 20)

    def close(self):
        self.f.close()
        self.sock.close()

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out += [b"$%d\r\n" % len(b), b, b"\r\n"]
        return b"".join(out)

    def _read(self):
        line = self.f.readline()
        if not line.endswith(b"\r\n"):
            raise RespError("connection closed")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RespError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            if len(data) != n + 2:
                raise RespError("short bulk reply")
            return data[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RespError("bad RESP type %r" % t)

    def pipeline(self, cmds):
        self.sock.sendall(b"".join(self.encode(c) for c in cmds))
        return [self._read() for _ in cmds]

    def call(self, *args):
        r = self.pipeline([args])[0]
        if isinstance(r, RespError):
            raise r
        return r


def find_binary(given, name):
    """`given` if it is an executable path, else `name` on PATH; None if neither."""
    if given:
        return given if os.access(given, os.X_OK) else None
    return shutil.which(name)


class RedisServer:
    def __init__(self, binary, workdir, maxmemory="4gb", io_threads=1):
        """io_threads > 1: Redis's threaded I/O (`io-threads N`, `io-threads-do-reads yes`): socket writes of
        large replies on N threads; command execution stays on one."""
        self.binary, self.workdir, self.maxmemory, self.io_threads = binary, workdir, maxmemory, io_threads
        self.p = None

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def start(self):
        self.port = lib.free_port()
        log = open(os.path.join(self.workdir, "redis.log"), "ab")
        self.p = subprocess.Popen([self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                   "--appendonly", "no", "--dir", self.workdir, "--maxmemory", self.maxmemory,
                                   "--maxmemory-policy", "allkeys-lru"] +
                                  (["--io-threads", str(self.io_threads), "--io-threads-do-reads", "yes"]
                                   if self.io_threads > 1 else []), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        for _ in range(400):
            try:
                c = Resp(self.port, timeout=2)
                ok = c.call("PING") == "PONG"
                c.close()
                if ok:
                    return self
            except (OSError, RespError):
                pass
            if self.p.poll() is not None:
                break
            time.sleep(0.025)
        self.stop()
        raise RuntimeError("redis-server did not start; see %s/redis.log" % self.workdir)

    def stop(self):
        if self.p is not None and self.p.poll() is None:
            self.p.terminate()  # our own child, by PID
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()

    def client(self):
        return Resp(self.port)

    def keys(self, pattern):
        c = self.client()
        try:
            return sorted(k.decode() for k in c.call("KEYS", pattern))
        finally:
            c.close()


# ---------------------------------------------------------------- loopback probes

def time_gets(port, keys, reps=5):
    """Pipelined GETs of `keys` over one connection (a Python client: a lower bound of what the link allows).
    Returns per-rep {ms, bytes}."""
    out = []
    for _ in range(reps):
        c = Resp(port)
        t0 = time.perf_counter()
        vals = c.pipeline([("GET", k) for k in keys])
        ms = (time.perf_counter() - t0) * 1e3
        c.close()
        if any(not isinstance(v, bytes) for v in vals):
            raise RuntimeError("a key was missing or failed: the probe would time nothing")
        out.append({"ms": ms, "bytes": sum(len(v) for v in vals)})
    return out


def tcp_loopback_MBps(total_bytes=256 << 20, reps=5, chunk=1 << 20):
    """One TCP stream over 127.0.0.1 (Python sender and receiver threads, recv_into): MB/s per rep."""
    res = []
    for _ in range(reps):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        payload = memoryview(bytes(chunk))

        def send():
            conn, _ = srv.accept()
            left = total_bytes
            while left > 0:
                n = min(left, chunk)
                conn.sendall(payload[:n])
                left -= n
            conn.close()
        t = threading.Thread(target=send)
        t.start()
        c = socket.create_connection(("127.0.0.1", port))
        buf = bytearray(chunk)
        got = 0
        t0 = time.perf_counter()
        while got < total_bytes:
            n = c.recv_into(buf)
            if n == 0:
                break
            got += n
        s = time.perf_counter() - t0
        c.close()
        t.join()
        srv.close()
        res.append(got / s / 1e6)
    return res


def redis_benchmark_get_MBps(binary, port, value_bytes, clients=4, pipeline=8, requests=400, reps=5):
    """redis-benchmark (C) GETs of one `value_bytes` value over `clients` connections, `pipeline` deep: MB/s per
    rep (GET requests/s x value size). None if the binary is missing."""
    if not binary:
        return None
    res = []
    for _ in range(reps):
        r = subprocess.run([binary, "-p", str(port), "-t", "set,get", "-d", str(value_bytes), "-n", str(requests),
                            "-c", str(clients), "-P", str(pipeline), "--csv"], capture_output=True, text=True,
                           timeout=300)
        rps = None
        for line in r.stdout.splitlines():
            cols = [c.strip('"') for c in line.split(",")]
            if cols and cols[0] == "GET":
                rps = float(cols[1])
        if rps is None:
            raise RuntimeError("redis-benchmark printed no GET row: %s %s" % (r.stdout[-500:], r.stderr[-500:]))
        res.append(rps * value_bytes / 1e6)
    return res


def summary(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)} if xs else None
