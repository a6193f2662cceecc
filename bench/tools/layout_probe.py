#!/usr/bin/env python3
"""Where the file system puts a save's block files, and what that costs a cold read.

Writes N files of SIZE bytes one after another the way AgentStore writes block files (write to a temp
name, fsync, rename), then one file of the same N x SIZE bytes, in DIR; prints each file's physical
extents (`filefrag -v`, if installed) and then times, page cache dropped before each read
(POSIX_FADV_DONTNEED), ROUNDS rounds alternating:
  files-seq   the N files read one after another by one thread, read() in 1 MiB pieces
  one-seq     the one file, the same way (llama-server's slot file is read like this)
  files-par   the N files as 1.31 MB preads on THREADS threads (the store's default for a 2K 8B agent)
  one-par     the one file the same way
Medians [min-max] in ms. Pure Python (os.pread releases the GIL), no agentkv binary needed.

  python3 bench/tools/layout_probe.py DIR [N=9] [SIZE=9445376] [ROUNDS=7] [THREADS=32]
"""
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

CHUNK = 1310720


def write_files(d, n, size):
    data = os.urandom(size)
    files = []
    for i in range(n):
        path = os.path.join(d, f"block{i}.safetensors")
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.rename(tmp, path)
        files.append(path)
    one = os.path.join(d, "one.bin")
    fd = os.open(one, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for _ in range(n):
        os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    return files, one


def extents(path):
    if not shutil.which("filefrag"):
        return "(no filefrag)"
    out = subprocess.run(["filefrag", "-v", path], capture_output=True, text=True).stdout
    ext = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0].rstrip(":").isdigit():
            ext.append(parts[3] + parts[4])
    return " ".join(ext)


def drop(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def read_seq(paths):
    t = time.perf_counter()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        while os.read(fd, 1 << 20):
            pass
        os.close(fd)
    return (time.perf_counter() - t) * 1e3


def read_par(pool, paths):
    chunks = []
    for p in paths:
        n = os.path.getsize(p)
        chunks += [(p, o, min(CHUNK, n - o)) for o in range(0, n, CHUNK)]

    def one(c):
        fd = os.open(c[0], os.O_RDONLY)
        got = len(os.pread(fd, c[2], c[1]))
        os.close(fd)
        return got

    t = time.perf_counter()
    sum(pool.map(one, chunks))
    return (time.perf_counter() - t) * 1e3


def main():
    d = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 9445376
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 7
    threads = int(sys.argv[5]) if len(sys.argv) > 5 else 32
    os.makedirs(d, exist_ok=True)
    files, one = write_files(d, n, size)
    print(f"{n} files of {size} bytes and one file of {n * size} bytes in {d}; kernel {os.uname().release}")
    for p in files + [one]:
        print(f"  {os.path.basename(p)} inode {os.stat(p).st_ino}: {extents(p)}")
    pool = ThreadPoolExecutor(threads)
    modes = {
        "files-seq": lambda: read_seq(files),
        "one-seq": lambda: read_seq([one]),
        "files-par": lambda: read_par(pool, files),
        "one-par": lambda: read_par(pool, [one]),
    }
    res = {k: [] for k in modes}
    for _ in range(rounds):
        for k, f in modes.items():
            drop(files + [one])
            time.sleep(0.05)
            res[k].append(f())
    for k, v in res.items():
        print(f"{k:10s} median {statistics.median(v):.1f} [{min(v):.1f}-{max(v):.1f}] ms")
    for p in files + [one]:
        os.remove(p)


if __name__ == "__main__":
    main()
