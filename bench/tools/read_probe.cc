// Disk read probe (issue #8): how fast N block files (or one big file of the same bytes) are
// read cold, by threads, destination memory (fresh vs pre-faulted), copy-out, O_DIRECT and
// readahead hints. Build: g++ -O2 -std=c++17 -pthread bench/tools/read_probe.cc -o /tmp/rp
// Run:   /tmp/rp DIR [n_files=137] [file_bytes=9445376] [reps=3] [modes=all|chunks]
//        (writes, then deletes, its files in DIR). "chunks" runs only the chunked block reads: each
//        file's bytes split into pieces of 256 KiB .. 8 MiB, all (file, piece) pairs read by 8 / 32
//        threads, against whole-file reads by the same threads (the store's block read, issue 11).
//        "short" compares the ways to read a short agent (a few files) against one file of the same
//        bytes: readahead hints issued for every file up front, O_DIRECT reads all in flight, one
//        thread in file order, and the same for the one big file (issue 11, H200 2K restart).
//        "agent" writes the block files back to back (as a save does) before the big file, then
//        compares, rounds alternating: the big file in one read; the block files by 1-32 threads,
//        whole files or in chunks of a file's 1/8 (the store's reads of a 2K agent), into
//        pre-faulted memory; and the same chunks into fresh 147 KB buffers, one per tensor
//        (what the store's reads fill), with and without zero-filling them first; and the big file
//        read as a pack of block images by ONE thread, a preadv per image into its 64 tensors of
//        147 KB, the tensors pre-faulted before the clock starts or allocated (zeroed) at its start
//        by 16 threads.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

static double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static void Die(const char* what, const std::string& p) {
  perror((std::string(what) + " " + p).c_str());
  exit(1);
}
static void Drop(const std::string& p) {
  int fd = open(p.c_str(), O_RDONLY);
  if (fd < 0) Die("open", p);
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}
static void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& f) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (size_t i; (i = next++) < n;) f(i);
    });
  for (auto& t : ts) t.join();
}
static void ReadAll(int fd, uint8_t* dst, size_t n, off_t off = 0) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(fd, dst + done, n - done, off + done);
    if (r <= 0) Die("pread", "");
    done += r;
  }
}

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "/tmp/probe";
  size_t n_files = argc > 2 ? atol(argv[2]) : 137;
  size_t fbytes = argc > 3 ? atol(argv[3]) : 9437184 + 8192;
  int reps = argc > 4 ? atoi(argv[4]) : 3;
  const std::string modes = argc > 5 ? argv[5] : "all";
  if (modes != "all" && modes != "chunks" && modes != "short" && modes != "agent") {
    Die("modes must be all, chunks, short or agent:", modes);
  }
  mkdir(dir.c_str(), 0700);
  std::vector<std::string> files;
  std::string big = dir + "/big.bin";
  {
    std::vector<uint8_t> buf(fbytes);
    std::mt19937_64 rng(1);
    for (size_t i = 0; i < buf.size(); i += 8) *reinterpret_cast<uint64_t*>(&buf[i]) = rng();
    int bfd = open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const bool big_after = modes == "agent";  // block files back to back, as one save writes them
    for (size_t pass = 0; pass < (big_after ? 2 : 1); ++pass) {
    for (size_t i = 0; i < n_files; ++i) {
      if (big_after && pass == 1) {
        if (write(bfd, buf.data(), buf.size()) != (ssize_t)buf.size()) Die("write", big);
        continue;
      }
      buf[0] = uint8_t(i);
      buf[4096] = uint8_t(i >> 8);
      std::string p = dir + "/b" + std::to_string(i) + ".safetensors";
      int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0 || write(fd, buf.data(), buf.size()) != (ssize_t)buf.size()) Die("write", p);
      fsync(fd);
      close(fd);
      if (!big_after && write(bfd, buf.data(), buf.size()) != (ssize_t)buf.size()) Die("write", big);
      files.push_back(p);
    }
    }
    fsync(bfd);
    close(bfd);
  }
  const double total = double(n_files) * fbytes;
  printf("files %zu x %zu bytes = %.2f GB in %s\n", n_files, fbytes, total / 1e9, dir.c_str());
  std::vector<uint8_t*> fresh_bufs;
  auto dropall = [&] {
    for (auto& f : files) Drop(f);
    Drop(big);
  };
  // pre-faulted destination
  uint8_t* final_buf = static_cast<uint8_t*>(aligned_alloc(4096, n_files * fbytes + 4096));
  memset(final_buf, 1, n_files * fbytes);
  auto run = [&](const char* name, const std::function<void()>& body) {
    std::vector<double> gbs;
    for (int r = 0; r < reps; ++r) {
      dropall();
      double t0 = Now();
      body();
      double dt = Now() - t0;
      gbs.push_back(total / dt / 1e9);
    }
    std::sort(gbs.begin(), gbs.end());
    printf("%-58s median %.2f GB/s  [%.2f - %.2f]\n", name, gbs[gbs.size() / 2], gbs.front(), gbs.back());
    fflush(stdout);
  };
  auto cleanup = [&] {
    for (auto& f : files) unlink(f.c_str());
    unlink(big.c_str());
  };
  // O_DIRECT reads of [off, off + n) of a file (n, off multiples of 4 KiB; the tail
  // below 4 KiB is left out, as the other O_DIRECT modes do).
  auto direct_items = [&](const std::string& path, uint8_t* dst, size_t bytes, size_t chunk, int threads) {
    int fd = open(path.c_str(), O_RDONLY | O_DIRECT);
    if (fd < 0) Die("open O_DIRECT", path);
    const size_t n = bytes & ~size_t(4095);
    ParallelFor((n + chunk - 1) / chunk, threads, [&](size_t k) {
      const size_t off = k * chunk;
      ReadAll(fd, dst + off, std::min(chunk, n - off), static_cast<off_t>(off));
    });
    close(fd);
  };
  auto willneed = [&](const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY);
    posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
    close(fd);
  };
  if (modes == "agent") {
    const size_t tensor = 147456, chunk = ((fbytes / 8 + 65535) / 65536) * 65536;
    // Reads file i's bytes [off, off + n) into tensor-sized fresh buffers (one per 147 KB, as the
    // store's decoded tensors), allocated (and, if zero, zero-filled) by the reading thread.
    auto fresh_read = [&](int fd, size_t off, size_t n, bool zero) {
      std::vector<std::vector<uint8_t>> bufs;
      std::vector<uint8_t*> raw;
      for (size_t done = 0; done < n; done += tensor) {
        const size_t len = std::min(tensor, n - done);
        if (zero) {
          bufs.emplace_back(len);
          ReadAll(fd, bufs.back().data(), len, static_cast<off_t>(off + done));
        } else {
          raw.push_back(static_cast<uint8_t*>(malloc(len)));
          ReadAll(fd, raw.back(), len, static_cast<off_t>(off + done));
        }
      }
      for (uint8_t* r : raw) free(r);
    };
    const size_t head = fbytes - 64 * tensor;  // each image: a head, then 64 tensors
    std::vector<std::vector<uint8_t>> tensors(n_files * 64);
    // The big file as a pack: image i's tensors read by one preadv of 64 iovecs (one thread).
    auto stream_pack = [&] {
      int fd = open(big.c_str(), O_RDONLY);
      posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      std::vector<uint8_t> h(head);
      for (size_t i = 0; i < n_files; ++i) {
        ReadAll(fd, h.data(), head, static_cast<off_t>(i * fbytes));
        std::vector<iovec> iov(64);
        for (size_t k = 0; k < 64; ++k) iov[k] = {tensors[i * 64 + k].data(), tensor};
        size_t want = 64 * tensor, got = 0;
        off_t off = static_cast<off_t>(i * fbytes + head);
        size_t first = 0;
        while (got < want) {  // preadv may return short: advance the iovecs
          ssize_t r = preadv(fd, iov.data() + first, static_cast<int>(64 - first), off + static_cast<off_t>(got));
          if (r <= 0) Die("preadv", big);
          got += r;
          while (r > 0 && first < 64) {
            if (static_cast<size_t>(r) >= iov[first].iov_len) {
              r -= iov[first].iov_len;
              ++first;
            } else {
              iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + r;
              iov[first].iov_len -= r;
              r = 0;
            }
          }
        }
      }
      close(fd);
    };
    for (int round = 0; round < 2; ++round) {
      run("big file: one read, 1 thread (llama-server)", [&] {
        int fd = open(big.c_str(), O_RDONLY);
        ReadAll(fd, final_buf, n_files * fbytes);
        close(fd);
      });
      for (auto& t : tensors) t.assign(tensor, 1);
      run("pack: 1 thread, preadv per image into pre-faulted tensors", stream_pack);
      run("pack: 16 thr allocate+zero tensors, then 1 thread streams", [&] {
        for (auto& t : tensors) std::vector<uint8_t>().swap(t);
        ParallelFor(tensors.size(), 16, [&](size_t k) { tensors[k].resize(tensor); });
        stream_pack();
      });
      for (int t : {1, 2, 4, 8}) {
        run(("blocks: " + std::to_string(t) + " thr, whole files").c_str(), [&] {
          ParallelFor(n_files, t, [&](size_t i) {
            int fd = open(files[i].c_str(), O_RDONLY);
            ReadAll(fd, final_buf + i * fbytes, fbytes);
            close(fd);
          });
        });
      }
      const size_t per_file = (fbytes + chunk - 1) / chunk;
      for (int t : {2, 4, 8, 16, 32}) {
        run(("blocks: " + std::to_string(t) + " thr, chunks of 1/8 file").c_str(), [&] {
          ParallelFor(n_files * per_file, t, [&](size_t item) {
            const size_t i = item / per_file, off = item % per_file * chunk;
            int fd = open(files[i].c_str(), O_RDONLY);
            ReadAll(fd, final_buf + i * fbytes + off, std::min(chunk, fbytes - off), static_cast<off_t>(off));
            close(fd);
          });
        });
      }
      for (int t : {4, 32}) {
        for (bool zero : {true, false}) {
          run(("blocks: " + std::to_string(t) + " thr, chunks into fresh 147 KB" + (zero ? " zeroed" : "")).c_str(), [&] {
            ParallelFor(n_files * per_file, t, [&](size_t item) {
              const size_t i = item / per_file, off = item % per_file * chunk;
              int fd = open(files[i].c_str(), O_RDONLY);
              fresh_read(fd, off, std::min(chunk, fbytes - off), zero);
              close(fd);
            });
          });
        }
      }
    }
    cleanup();
    return 0;
  }
  if (modes == "short") {
    for (int round = 0; round < 2; ++round) {
      run("big file: one read, 1 thread (llama-server)", [&] {
        int fd = open(big.c_str(), O_RDONLY);
        ReadAll(fd, final_buf, n_files * fbytes);
        close(fd);
      });
      run("big file: WILLNEED, then one read", [&] {
        willneed(big);
        int fd = open(big.c_str(), O_RDONLY);
        ReadAll(fd, final_buf, n_files * fbytes);
        close(fd);
      });
      for (size_t mib : {1, 4}) {
        for (int t : {4, 16}) {
          run(("big file: O_DIRECT " + std::to_string(mib) + " MiB reads, " + std::to_string(t) + " thr").c_str(),
              [&] { direct_items(big, final_buf, n_files * fbytes, mib << 20, t); });
        }
      }
      for (int t : {2, 8}) {
        run(("big file: " + std::to_string(t) + " thr, a file's bytes per read").c_str(), [&] {
          int fd = open(big.c_str(), O_RDONLY);
          ParallelFor(n_files, t, [&](size_t i) { ReadAll(fd, final_buf + i * fbytes, fbytes, static_cast<off_t>(i * fbytes)); });
          close(fd);
        });
      }
      run("blocks: 1 thread, one file after another", [&] {
        for (size_t i = 0; i < n_files; ++i) {
          int fd = open(files[i].c_str(), O_RDONLY);
          ReadAll(fd, final_buf + i * fbytes, fbytes);
          close(fd);
        }
      });
      run("blocks: 8 thr, whole files", [&] {
        ParallelFor(n_files, 8, [&](size_t i) {
          int fd = open(files[i].c_str(), O_RDONLY);
          ReadAll(fd, final_buf + i * fbytes, fbytes);
          close(fd);
        });
      });
      run("blocks: WILLNEED all in order, then 1 thread in order", [&] {
        for (auto& f : files) willneed(f);
        for (size_t i = 0; i < n_files; ++i) {
          int fd = open(files[i].c_str(), O_RDONLY);
          ReadAll(fd, final_buf + i * fbytes, fbytes);
          close(fd);
        }
      });
      run("blocks: WILLNEED all in order, then 8 thr", [&] {
        for (auto& f : files) willneed(f);
        ParallelFor(n_files, 8, [&](size_t i) {
          int fd = open(files[i].c_str(), O_RDONLY);
          ReadAll(fd, final_buf + i * fbytes, fbytes);
          close(fd);
        });
      });
      for (size_t mib : {1, 4}) {
        for (int t : {8, 32}) {
          run(("blocks: O_DIRECT " + std::to_string(mib) + " MiB reads, " + std::to_string(t) + " thr").c_str(), [&] {
            const size_t chunk = mib << 20, n = fbytes & ~size_t(4095), per_file = (n + chunk - 1) / chunk;
            std::vector<int> fds(n_files);
            for (size_t i = 0; i < n_files; ++i) {
              fds[i] = open(files[i].c_str(), O_RDONLY | O_DIRECT);
              if (fds[i] < 0) Die("open O_DIRECT", files[i]);
            }
            ParallelFor(n_files * per_file, t, [&](size_t item) {
              const size_t i = item / per_file, off = item % per_file * chunk;
              ReadAll(fds[i], final_buf + i * n + off, std::min(chunk, n - off), static_cast<off_t>(off));
            });
            for (int fd : fds) close(fd);
          });
        }
      }
    }
    cleanup();
    return 0;
  }
  // Chunked reads: file i's bytes at [k * chunk, (k+1) * chunk) are one pread,
  // every (file, chunk) pair an item of one ParallelFor; chunk 0 = whole files.
  for (int t : {8, 32}) {
    for (size_t chunk_kib : {0, 256, 512, 1024, 2048, 4096, 8192}) {
      const size_t chunk = chunk_kib ? chunk_kib << 10 : fbytes;
      const size_t per_file = (fbytes + chunk - 1) / chunk;
      const std::string name = "blocks: " + std::to_string(t) + " thr, " +
                               (chunk_kib ? "chunks of " + std::to_string(chunk_kib) + " KiB" : std::string("whole files")) +
                               " into pre-faulted";
      run(name.c_str(), [&] {
        ParallelFor(n_files * per_file, t, [&](size_t item) {
          const size_t i = item / per_file, off = item % per_file * chunk;
          int fd = open(files[i].c_str(), O_RDONLY);
          if (fd < 0) Die("open", files[i]);
          ReadAll(fd, final_buf + i * fbytes + off, std::min(chunk, fbytes - off), static_cast<off_t>(off));
          close(fd);
        });
      });
    }
  }
  if (modes == "chunks") {
    for (auto& f : files) unlink(f.c_str());
    unlink(big.c_str());
    return 0;
  }
  run("big file: one read into fresh malloc (llama-server)", [&] {
    uint8_t* b = static_cast<uint8_t*>(malloc(n_files * fbytes));
    int fd = open(big.c_str(), O_RDONLY);
    ReadAll(fd, b, n_files * fbytes);
    close(fd);
    free(b);
  });
  run("big file: 1 thread into pre-faulted", [&] {
    int fd = open(big.c_str(), O_RDONLY);
    ReadAll(fd, final_buf, n_files * fbytes);
    close(fd);
  });
  for (int t : {1, 2, 4, 8, 16, 32}) {
    run(("blocks: " + std::to_string(t) + " thr, fresh buf + copy-out (today)").c_str(), [&] {
      ParallelFor(n_files, t, [&](size_t i) {
        int fd = open(files[i].c_str(), O_RDONLY);
        std::string s;
        s.resize(fbytes);
        ReadAll(fd, reinterpret_cast<uint8_t*>(s.data()), fbytes);
        close(fd);
        std::vector<uint8_t> out(s.begin() + 8192, s.end());
        asm volatile("" ::"r"(out.data()));
      });
    });
    run(("blocks: " + std::to_string(t) + " thr, into pre-faulted final").c_str(), [&] {
      ParallelFor(n_files, t, [&](size_t i) {
        int fd = open(files[i].c_str(), O_RDONLY);
        ReadAll(fd, final_buf + i * fbytes, fbytes);
        close(fd);
      });
    });
  }
  for (int t : {4, 8, 16}) {
    run(("blocks: " + std::to_string(t) + " thr, O_DIRECT into pre-faulted").c_str(), [&] {
      ParallelFor(n_files, t, [&](size_t i) {
        int fd = open(files[i].c_str(), O_RDONLY | O_DIRECT);
        if (fd < 0) Die("open O_DIRECT", files[i]);
        size_t n = fbytes & ~size_t(4095);
        ReadAll(fd, final_buf + i * n, n);
        close(fd);
      });
    });
  }
  for (int t : {8, 16}) {
    run(("blocks: WILLNEED all, " + std::to_string(t) + " thr into pre-faulted").c_str(), [&] {
      for (auto& f : files) {
        int fd = open(f.c_str(), O_RDONLY);
        posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
        close(fd);
      }
      ParallelFor(n_files, t, [&](size_t i) {
        int fd = open(files[i].c_str(), O_RDONLY);
        ReadAll(fd, final_buf + i * fbytes, fbytes);
        close(fd);
      });
    });
  }
  run("big file: 8 thr chunks of 16 MB into pre-faulted", [&] {
    int fd = open(big.c_str(), O_RDONLY);
    size_t chunk = 16 << 20, n = n_files * fbytes;
    ParallelFor((n + chunk - 1) / chunk, 8, [&](size_t i) {
      size_t off = i * chunk;
      ReadAll(fd, final_buf + off, std::min(chunk, n - off), off);
    });
    close(fd);
  });
  for (auto& f : files) unlink(f.c_str());
  unlink(big.c_str());
}
