#!/usr/bin/env bash
# GPU benchmark runs on the H200 device machine (bench/RESULTS.md), in steps
# that each fit one device call (10 minutes). Every step leaves its outputs in
# $OUT/<step>.tgz (the device returns at most 8 files).
#   scripts/device-bench.sh setup            CUDA build (+ llama-server), synthetic models, bench restore
#   scripts/device-bench.sh ttft PRESET CTXS ttft on a synthetic preset (or "bundled"), contexts CTXS
#   scripts/device-bench.sh vs PRESET CTXS   vs-llama-server on a preset (PAIRS restart pairs per context, default
#                                            REPS; SETTLE_LOAD: wait for the 1-min load average below it before the
#                                            cold runs and before the pairs, default 4; LS_BIND omp|strict|none, default omp; the prompt as text
#                                            and as token ids on llama-server)
#   scripts/device-bench.sh stock-llama      llama-server built from the pinned source WITHOUT patches/llama.cpp
#                                            (reversed from the patched copy), as build-cuda-stock/bin/llama-server
#                                            (CUDA=0: a CPU build, for a smoke run here); ~4-5 min on the device
#   scripts/device-bench.sh vs-stock PRESET CTXS  vs-llama-server with the patched and the stock llama-server in one
#                                            run (builds what is missing: agentkv + llama-server, the stock one)
#   scripts/device-bench.sh returning PRESET AGENTS TOKENS  bench/returning_team.py: AGENTS agents of ~TOKENS tokens
#                                            return after one restart (GAP_MS apart, default 1000/AGENTS), agentkv
#                                            --slots AGENTS vs llama-server restoring their slot files into -np AGENTS
#   scripts/device-bench.sh ram-tier PRESET TOKENS  bench/ram_tier.py: two agents alternating on one slot, each
#                                            turn restored from RAM, vs llama-server --cache-ram (ROUNDS, 12)
#   scripts/device-bench.sh decode-load PRESET [AGENTS]  bench/decode_load.py: AGENTS (1,4,16,64) agents decoding
#                                            together, agentkv --slots N vs llama-server -np N (MAX_TOKENS, 128)
#   scripts/device-bench.sh vs-env VAR=VALUE PRESET CTXS  vs-llama-server without and with VAR=VALUE in the
#                                            environment of both servers, alternating, ROUNDS (2) rounds
#   scripts/device-bench.sh vs-ab PATCH PRESET CTXS  CUDA build of this tree (A) and of it with PATCH reversed
#                                            (B, same build dir; PATCH made here, e.g. `git diff REF -- src
#                                            > .device/ab.patch`), then vs-llama-server and bench store (2048
#                                            tokens, 8B layout) with A, B, A, B (ROUNDS, 2; LAST_ROUND_BY_S: no
#                                            round starts after that many s); 2048 tokens fit one call
#   scripts/device-bench.sh capacity CTXS    capacity fill verification, bundled model
#   scripts/device-bench.sh fattn-ops        CUDA build + ggml's test-backend-ops: every decode-shaped FLASH_ATTN_EXT case
#                                            against the CPU, then the vector kernel's Q-head grouping (patch 0007) off
#                                            and on in `perf` (GGML_CUDA_FATTN_VEC_GQA=0/1, ROUNDS, 2), as a table
#   scripts/device-bench.sh team PRESET [ARGS...]  bench/shared_team.py at issue 32's H200 size on a preset (32
#                                            agents / 16 slots / 4000 shared + 1500 own tokens / 64 tokens, 4 rounds,
#                                            restart before round 2, 8 new agents in round 3; agentkv vs llama-server
#                                            q4_0 with our RAM budget vs its defaults, 1 rep); ARGS go to the script
#                                            last (they win), e.g. --agentkv-extra '--prefill-chunk 2048', --reps 2,
#                                            --sides agentkv,ls-q4_0. Builds agentkv + llama-server if absent; one
#                                            call with the build: quick-build then team (see below)
#   scripts/device-bench.sh quick-setup      CUDA build (agentkv + llama-server only), the llama-3.1-8b
#                                            model, bench restore on it with --overlap-import off and on
#                                            (fits one call)
#   scripts/device-bench.sh gpu-tests        CUDA build of engine_test and sched_test, then the tests in FILTER
#                                            (default: the pipelined restore's, 'LayerGated*:ReadLanding*')
#   scripts/device-bench.sh reliability [CYCLES] [LOAD_S]  CUDA build (agentkv), crash loop (50) + load (300 s) on
#                                            the bundled model with the near-tie oracle (bench/oracle.py)
#   scripts/device-bench.sh quick-build      the build and model of quick-vs only (when a call cannot hold both)
#   scripts/device-bench.sh quick-vs CTXS    CUDA build + the llama-3.1-8b model + vs-llama-server on it
#   scripts/device-bench.sh store [TOKENS]   CUDA build (agentkv) + bench store of a synthetic agent in the
#                                            llama-3.1-8b q4_0 KV layout (default 34816 tokens), on the repo's disk
#   scripts/device-bench.sh store-chunks [TOKENS,...]  CUDA build (agentkv) + bench store in the llama-3.1-8b
#                                            layout (default 2048,32768 tokens): loads with one read per block file
#                                            (--read-chunk-kib 0, as before issue 11.2) vs the store's chunked reads
#                                            (default), interleaved, 2 rounds; fixed chunk sizes at the first TOKENS;
#                                            read_probe's chunk modes (8 files); the disk's queue settings
#   scripts/device-bench.sh disk-probe         no build (~3 min): bench/tools/layout_probe.py (filefrag of a save's 9
#                                            block files, read one after another / in parallel vs one file of the
#                                            same bytes) and read_probe's agent mode, on the device's disk
#   scripts/device-bench.sh read-modes [TOKENS]  CUDA build (agentkv) + bench store's cold load (llama-3.1-8b layout,
#                                            default 2048 tokens) read five ways (32 readers in chunks, a reader per
#                                            file, 4 MiB reads, one sequential stream, 8 readers), ROUNDS (4) rounds
#   scripts/device-bench.sh remote CTXS FETCH_CTXS  CUDA build (agentkv) + the llama-3.1-8b model +
#                                            bench/remote_ttft.py on it (Redis on the same host, loopback)
#   scripts/device-bench.sh prepare-llama    (here) the pinned llama.cpp source, trimmed, as .device/llama.cpp.tar.xz
#                                            (~4 MB; builds agentkv and llama-server; see the step)
#   scripts/device-bench.sh prepare-ccache   (here) this machine's ccache in .device/ccache, for a second call
#                                            on a warm device machine
#   scripts/device-bench.sh prepare          (here, not on the device) copies this machine's hiredis
#                                            headers and static library into .device/hiredis, and
#                                            redis-server / redis-benchmark with their non-libc libraries
#                                            into .device/redis.tar.xz (wrappers set LD_LIBRARY_PATH for
#                                            them only), for device machines without them (carry .device)
# The pipelined restore against the default, interleaved restarts, one call (build ~280 s + ~4 runs of 30 s):
#   scripts/device-bench.sh quick-build; AGENTKV_LOG=debug ROUNDS=2 STEP_TIMEOUT=90 \
#     scripts/device-bench.sh vs-env AGENTKV_PIPELINED_RESTORE=on llama-3.1-8b 2048
# The team benchmark in one call (build ~280 s, model, then ~240 s of team, estimated from the issue's round
# times; every phase prints its time; past STEP_TIMEOUT the script writes the rounds it finished, marked partial):
#   scripts/device-bench.sh quick-build; STEP_TIMEOUT=260 scripts/device-bench.sh team llama-3.1-8b
# Each device call copies the working tree anew (every source file's mtime changes), so a later call's
# build_cuda recompiles everything (~5 min): run a build step and the steps that use it in ONE call, e.g.
#   scripts/device-bench.sh quick-build; STEP_TIMEOUT=230 scripts/device-bench.sh vs llama-3.1-8b 2048,32768
# The coding agents' recorded requests on the 8B shape (issue 30): cold turn 1 vs a second session's turn 1:
#   STEP_TIMEOUT=200 scripts/device-bench.sh replay llama-3.1-8b
# Issue 34's headline runs (each line one device call; AGENTKV_SOURCE_COMMIT=$(git rev-parse HEAD) on every step;
# build-cuda/ and the device ccache stay on a warm machine, so later calls there skip the build):
#   scripts/device-bench.sh quick-build; SETTLE_LOAD=8 PAIRS=20 STEP_TIMEOUT=270 scripts/device-bench.sh vs llama-3.1-8b 2048
#   PAIRS=20 STEP_TIMEOUT=540 scripts/device-bench.sh vs llama-3.1-8b 32768      (same, warm machine: no build)
#   scripts/device-bench.sh stock-llama; PAIRS=6 STEP_TIMEOUT=200 scripts/device-bench.sh vs-stock llama-3.1-8b 2048
#   STEP_TIMEOUT=400 scripts/device-bench.sh decode-load llama-3.1-8b
#   REPS=3 STEP_TIMEOUT=250 scripts/device-bench.sh returning llama-3.1-8b 8 2048; REPS=3 STEP_TIMEOUT=280 \
#     scripts/device-bench.sh returning llama-3.1-8b 4 32768
#   STEP_TIMEOUT=540 scripts/device-bench.sh team llama-3.1-8b --sides agentkv,ls-q4_0,ls-save   (warm machine)
# Env: MODELS (where synthetic models go, default ~/m), REPS (5), STEP_TIMEOUT (seconds per step, 540),
#      REDIS_IO_THREADS (remote: redis-server io-threads, default 1),
#      AGENTKV_SOURCE_COMMIT (the commit of the tree sent to the device: the copy there is not this
#      checkout, so its git, if any, names another commit; every JSON and `agentkv version` record this
#      value). Call it as `AGENTKV_SOURCE_COMMIT=<git rev-parse HEAD here> scripts/device-bench.sh ...`.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
# Provenance (issue 34): a measuring step refuses to run without the source commit (the device's copy is not
# a checkout of it), and records where it ran in $OUT/provenance-<step>.json: the commit, the machine (its
# boot_id changes at every boot, so "a fresh machine" is provable), the date and the binaries' sha256.
case "${1:-}" in
  prepare*|"") ;;
  *) if [ -z "${AGENTKV_SOURCE_COMMIT:-}" ]; then
       echo "device-bench.sh $1: refused: set AGENTKV_SOURCE_COMMIT=\$(git rev-parse HEAD) (the commit of the tree sent" \
         "to the device; every JSON records it)" >&2
       exit 2
     fi ;;
esac
export AGENTKV_SOURCE_COMMIT=${AGENTKV_SOURCE_COMMIT:-}
record_provenance() {  # record_provenance STEP: $OUT/provenance-STEP.json, at the end of every measuring step
  local bins=() b
  for b in build-cuda/agentkv build-cuda/bin/llama-server build-cuda-stock/bin/llama-server; do
    [ -x "$b" ] && bins+=("\"$b\": \"$(sha256sum "$b" | cut -d' ' -f1)\"")
  done
  mkdir -p "$OUT"
  # Two runs of one step in a call (e.g. `returning` at 2K then at 32K) each keep their record.
  local f="$OUT/provenance-${1:-none}.json" n=2
  while [ -e "$f" ]; do f="$OUT/provenance-${1:-none}-$n.json"; n=$((n + 1)); done
  printf '{"step": "%s", "commit": "%s", "date": "%s", "hostname": "%s", "boot_id": "%s", "gpu": "%s", "binaries_sha256": {%s}}\n' \
    "$*" "$AGENTKV_SOURCE_COMMIT" "$(date -Is)" "$(hostname)" "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)" \
    "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)" \
    "$(IFS=,; echo "${bins[*]}")" > "$f"
}
case "${1:-}" in prepare*|"") ;; *) trap 'record_provenance "$@"' EXIT ;; esac
MODELS=${MODELS:-$HOME/m}
REPS=${REPS:-5}
B=build-cuda
mkdir -p "$OUT" "$MODELS"
T=${STEP_TIMEOUT:-540}
BENCH=(/usr/bin/env python3 bench/run.py --bin $B/agentkv --llama-server $B/bin/llama-server --threads 16)
STOCK=${STOCK_DIR:-build-cuda-stock}
VS_ARGS=(--pairs "${PAIRS:-$REPS}" --settle-load "${SETTLE_LOAD:-4}" --ls-bind "${LS_BIND:-omp}")
# AK_B_EXTRA (vs, vs-stock): an A/B arm in the same interleaved pairs, agentkv started with these extra args,
# e.g. AK_B_EXTRA='--pipelined-restore off' (bench/vs_llama.py --ak-b-extra; ratio_ak_b = B / default)
if [ -n "${AK_B_EXTRA:-}" ]; then VS_ARGS+=(--ak-b-extra "$AK_B_EXTRA"); fi

model_path() {  # preset name -> GGUF path
  if [ "$1" = bundled ]; then echo "$PWD/models/tiny-llama-brown-16m-q8_0.gguf"; else echo "$MODELS/$1-q4_0.gguf"; fi
}
pack() {  # pack DIR NAME: whatever the step wrote, minus caches and models
  (cd "$1" && tar czf "$OUT/$2.tgz" --exclude='*-cache' --exclude='*-slots' --exclude='*.gguf' --exclude='*.bin' .)
}

keep_our_log_lines() {  # keep_our_log_lines DIR: a debug log is mostly llama.cpp's; keep ours and the commands
  [ -n "${AGENTKV_LOG:-}" ] && find "$1" -name 'agentkv*.log' -exec sed -i -n '/^agentkv\|^\$ /p' {} +
  return 0
}

patch_set_hash() {  # the patches' checksum as scripts/fetch-llama.sh records it in llama.cpp/.agentkv-ok
  cat $(ls patches/llama.cpp/*.patch | LC_ALL=C sort) | sha256sum | cut -c1-16
}
build_cuda() {  # build_cuda TARGET...: configure (sm_90, with llama-server) and build into build-cuda/
  # ccache outside .device: a carried .device replaces the device's copy, and with it the cache
  # (the H200 machines had no ccache on 2026-12-01, and are given back after 30 s idle).
  export AGENTKV_CACHE=$PWD/.device CCACHE_DIR=${DEVICE_CCACHE_DIR:-$HOME/.cache/agentkv-device-ccache}
  # The plain source `prepare-llama` packed (no git: fits the device's 64 MiB) is unpacked once and used as is.
  if [ -f .device/llama.cpp.tar.xz ] && [ ! -f "$AGENTKV_CACHE/llama.cpp/.agentkv-plain" ]; then
    mkdir -p "$AGENTKV_CACHE/llama.cpp" && tar xJf .device/llama.cpp.tar.xz -C "$AGENTKV_CACHE/llama.cpp"
    # The tarball keeps its files' old mtimes: over a build dir left by an older tarball on a warm machine,
    # ninja would keep that source's objects (seen at stop 24: a missing symbol). Newer mtimes rebuild them
    # (ccache hits where nothing changed).
    [ -d $B ] && find "$AGENTKV_CACHE/llama.cpp" -type f -exec touch {} +
  fi
  [ -f "$AGENTKV_CACHE/llama.cpp/.agentkv-plain" ] || scripts/fetch-llama.sh
  # A tarball packed before patches/llama.cpp changed builds the wrong llama.cpp (stop 24 lost a call to it):
  # refuse at once. `prepare-llama` (here) packs a matching one.
  if [ "$(cut -d' ' -f3 "$AGENTKV_CACHE/llama.cpp/.agentkv-ok" 2>/dev/null)" != "$(patch_set_hash)" ]; then
    echo "build_cuda: .device/llama.cpp.tar.xz was packed from other patches/llama.cpp; run" \
      "'AGENTKV_CACHE=<a patched clone> scripts/device-bench.sh prepare-llama' here first" | tee -a "$OUT/gpu.txt"
    exit 3
  fi
  if [ -x .device/ccache/ccache ] && ! command -v ccache >/dev/null; then
    export PATH=$PWD/.device/ccache:$PATH LD_LIBRARY_PATH=$PWD/.device/ccache${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  pkg-config --exists hiredis 2>/dev/null || export PKG_CONFIG_PATH=$PWD/.device/hiredis/lib/pkgconfig
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$OUT/gpu.txt"  # -a: a step's lines before it stay
  echo "source commit: ${AGENTKV_SOURCE_COMMIT:-UNSET (JSON commit fields name the git of the copied tree, not this tree)}" |
    tee -a "$OUT/gpu.txt"
  echo "ccache: $(command -v ccache || echo none); THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled)" | tee -a "$OUT/gpu.txt"
  local start=$(date +%s)
  cmake -S . -B $B -G Ninja -DAGENTKV_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DAGENTKV_LLAMA_SERVER=ON \
    -DAGENTKV_LLAMA_DIR="$AGENTKV_CACHE/llama.cpp" -DAGENTKV_NATIVE=ON >/dev/null
  ninja -C $B -j "$(nproc)" "$@" > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s" | tee -a "$OUT/gpu.txt"
}
synth_model() {  # synth_model PRESET: the preset's random-weight q4_0 GGUF, once
  [ -f "$(model_path $1)" ] || $B/agentkv synth-model --preset $1 --type q4_0 --vocab-dir .device/llama.cpp/models \
    -o "$(model_path $1)" > "$MODELS/$1.log" 2>&1
}

case "${1:-}" in
  prepare-llama)  # (here) .device/llama.cpp.tar.xz: the patched pinned source without git, docs, tests, the UI's
    # sources and other backends, xz-compressed (~8 MB; carry .device): with the tracked tree (~32 MB) it fits the
    # 64 MiB a device call takes, where the npm tarball (36 MB) and the unpacked copy with tools/ (~45 MB) do not.
    # build_cuda unpacks it into .device/llama.cpp there; it builds agentkv and llama-server.
    src=${AGENTKV_CACHE:-$HOME/.cache/agentkv}/llama.cpp
    rm -rf .device/llama.cpp .device/llama.cpp.tar.xz && mkdir -p .device
    [ "$(cut -d' ' -f3 "$src/.agentkv-ok" 2>/dev/null)" = "$(patch_set_hash)" ] ||
      { echo "prepare-llama: $src was not patched with this tree's patches/llama.cpp (run scripts/fetch-llama.sh with that AGENTKV_CACHE)"; exit 3; }
    (cd "$src" && touch .agentkv-plain && tar cJf - --exclude='ggml/src/ggml-'{vulkan,sycl,opencl,hexagon,metal,et,cann,musa,webgpu,zdnn,openvino,virtgpu} \
      --exclude='tools/ui/'{src,tests,static} --exclude='tools/server/'{tests,webui,public} --exclude='tools/mtmd/'{tests,'test-*'} \
      --exclude='*.md' --exclude='ggml/src/ggml-cpu/spacemit' \
      CMakeLists.txt cmake ggml src include common vendor licenses LICENSE tools scripts/ui-assets.cmake tests/test-backend-ops.cpp \
      scripts/build-info.sh .agentkv-ok .agentkv-plain models/ggml-vocab-{llama-bpe,gemma-4,deepseek-llm}.gguf) > .device/llama.cpp.tar.xz
    rm -f "$src/.agentkv-plain"
    du -sh .device/llama.cpp.tar.xz
    ;;
  prepare-ccache)  # (here) .device/ccache: this machine's ccache and its libhiredis, so that a second call on a
    # warm device machine (whose copied tree has new mtimes) rebuilds from the device's ccache in seconds
    mkdir -p .device/ccache && cp "$(command -v ccache)" .device/ccache/
    for l in $(ldd "$(command -v ccache)" | awk '/hiredis|zstd/ {print $3}'); do cp "$l" .device/ccache/; done
    du -sh .device/ccache
    ;;
  prepare)
    d=.device/hiredis
    rm -rf $d && mkdir -p $d/include $d/lib/pkgconfig
    inc=$(pkg-config --variable=includedir hiredis)  # Debian 12: /usr/include/hiredis itself; else its parent
    [ "$(basename "$inc")" = hiredis ] || inc=$inc/hiredis
    cp -r "$inc" $d/include/hiredis
    cp "$(dpkg -L libhiredis-dev | grep '/libhiredis\.a$')" $d/lib/
    sed -e 's|^prefix=.*|prefix=${pcfiledir}/../..|' -e 's|^libdir=.*|libdir=${prefix}/lib|' \
      -e 's|^includedir=.*|includedir=${prefix}/include/hiredis|' -e 's|^Cflags: |Cflags: -I${prefix}/include |' \
      "$(pkg-config --variable=pcfiledir hiredis)/hiredis.pc" > $d/lib/pkgconfig/hiredis.pc
    du -sh $d
    r=.device/redis
    rm -rf $r && mkdir -p $r/bin $r/lib
    for b in redis-server redis-benchmark; do
      cp "$(command -v $b)" $r/bin/
      ldd "$(command -v $b)" | awk '$3 ~ /^\// {print $3}' | grep -Ev '/(libc|libm|libpthread|libdl|librt)\.so' |
        xargs -r cp -L -t $r/lib/
      printf '#!/bin/sh\nd=$(dirname "$(readlink -f "$0")")\nLD_LIBRARY_PATH="$d/lib" exec "$d/bin/%s" "$@"\n' $b > $r/$b
      chmod +x $r/$b
    done
    tar cJf $r.tar.xz -C .device redis && rm -rf $r  # ~4.5 MB: the carried tree is capped at 64 MiB
    du -sh $r.tar.xz
    ;;
  setup)
    build_cuda agentkv llama-server engine_arch_test
    AGENTKV_LLAMA_DIR=.device/llama.cpp $B/src/engine/engine_arch_test 2>&1 | tail -3 | tee -a "$OUT/gpu.txt"
    "$0" models
    ;;
  gpu-tests)  # the engine's and the scheduler's tests of a path, on the GPU (FILTER: a gtest filter; TESTS: which
    # test binaries, default "engine_test sched_test")
    tests=${TESTS:-engine_test sched_test}
    build_cuda $tests ${ALSO_BUILD:-}  # ALSO_BUILD: e.g. "agentkv llama-server" for later steps
    f=${FILTER:-'LayerGated*:ReadLanding*'}
    for t in $tests; do
      t=${t%_test}/${t}
      timeout 240 $B/src/$t --gtest_filter="$f" 2>&1 | grep -E '^\[ +(OK|FAILED|PASSED) |Failure|Expected|Which is|actual|slot copy|max \|' |
        tee -a "$OUT/gpu-tests.txt"
    done
    ;;
  reliability)  # reliability CYCLES LOAD_S: CUDA build (agentkv), then the crash loop (CYCLES, default 50) and the
    # open-loop load (LOAD_S seconds, default 300) on the bundled model with the near-tie oracle (bench/oracle.py:
    # a difference before the cold answer's first near-tie fails, after it is counted), raw JSON in reliability.tgz;
    # CYCLES or LOAD_S 0 skips that half (two calls on a warm machine); an agentkv already built is used as is
    [ -x $B/agentkv ] || build_cuda agentkv
    mkdir -p /tmp/rel
    if [ "${2:-50}" != 0 ]; then
      timeout $T python3 bench/crash_loop.py --bin $B/agentkv --model "$(model_path bundled)" --cycles "${2:-50}" \
        --oracle near-tie --json /tmp/rel/crash_loop_gpu.json > /tmp/rel/crash_loop_gpu.log 2>&1
      echo "crash loop rc=$?: $(python3 -c "import json;c=json.load(open('/tmp/rel/crash_loop_gpu.json'))['counts'];print({k:c[k] for k in ('cycles','kills','oracle_checks','oracle_after_near_tie','oracle_mismatches','corruptions','version_regressions')})" 2>&1)"
    fi
    if [ "${3:-300}" != 0 ]; then
      timeout $T python3 bench/load.py --bin $B/agentkv --model "$(model_path bundled)" --seconds "${3:-300}" \
        --oracle near-tie --json /tmp/rel/load_gpu.json > /tmp/rel/load_gpu.log 2>&1
      echo "load rc=$?: $(python3 -c "import json;j=json.load(open('/tmp/rel/load_gpu.json'));print({k:j.get(k) for k in ('requests','errors','answers_checked_serially','mismatches','after_near_tie','passed')})" 2>&1)"
    fi
    pack /tmp/rel reliability
    ;;
  quick-build)  # the build and the model of quick-vs, for a later call on the same (warm) machine
    build_cuda agentkv llama-server
    synth_model llama-3.1-8b
    ;;
  quick-setup|quick-vs)
    build_cuda agentkv llama-server
    p=llama-3.1-8b
    synth_model $p
    [ -n "${2:-}" ] && exec "$0" vs $p "$2"
    mkdir -p /tmp/restore
    for o in off on; do  # side by side: rows written before vs while llama.cpp copies them (--overlap-import)
      timeout 180 $B/agentkv bench restore -m "$(model_path $p)" --tokens 2048,8192,32768 --reps 5 -t 16 \
        --overlap-import $o --json /tmp/restore/restore_${p}_overlap_$o.json > /tmp/restore/restore_${p}_overlap_$o.md \
        2>/tmp/restore/restore_${p}_overlap_$o.log
      echo "overlap-import $o:"; grep -E 'import|export' /tmp/restore/restore_${p}_overlap_$o.md
    done
    pack /tmp/restore restore
    ;;
  models)
    for p in llama-3.1-8b gemma-3-12b deepseek-v2-lite; do
      synth_model $p &
    done
    wait
    ls -la "$MODELS" | tee -a "$OUT/gpu.txt"
    mkdir -p /tmp/restore
    for p in ${RESTORE_MODELS:-bundled llama-3.1-8b gemma-3-12b deepseek-v2-lite}; do
      timeout 120 $B/agentkv bench restore -m "$(model_path $p)" --tokens 1024,4096,16384,32768 --reps 5 -t 16 \
        --json /tmp/restore/restore_$p.json > /tmp/restore/restore_$p.md 2>/tmp/restore/restore_$p.log
      cat /tmp/restore/restore_$p.md
    done
    pack /tmp/restore restore
    ;;
  ttft)
    out=/tmp/b/ttft-$2
    timeout $T "${BENCH[@]}" ttft --model "$(model_path $2)" --contexts "$3" --reps $REPS --out $out 2>&1 | tail -15
    pack $out ttft-$2
    ;;
  vs)
    out=/tmp/b/vs-$2-${3//,/_}
    timeout $T "${BENCH[@]}" vs-llama-server --model "$(model_path $2)" --contexts "$3" --reps $REPS "${VS_ARGS[@]}" \
      --out $out 2>&1 | tail -40
    keep_our_log_lines $out
    pack $out vs-$2-${3//,/_}
    ;;
  vs-env)
    for round in $(seq "${ROUNDS:-2}"); do
      for with in 0 1; do
        out=/tmp/b/vs-env-$3-r$round-$with
        if [ $with = 1 ]; then env=(env "$2"); else env=(env); fi
        echo "round $round, ${env[*]}:"
        timeout $T "${env[@]}" "${BENCH[@]}" vs-llama-server --model "$(model_path $3)" --contexts "$4" --reps $REPS \
          --out $out 2>&1 | tail -8
        keep_our_log_lines $out
        pack $out vs-env-$3-r$round-$with
      done
    done
    ;;
  vs-ab)
    patch=$(readlink -f "$2") p=$3
    build_cuda agentkv llama-server
    synth_model $p
    cp $B/agentkv /tmp/agentkv-A
    git apply -R "$patch" && ninja -C $B agentkv >> "$OUT/build.log" 2>&1 && cp $B/agentkv /tmp/agentkv-B ||
      { echo "B build failed"; tail -30 "$OUT/build.log"; exit 1; }
    git apply "$patch"
    echo "B = A minus $2 ($(wc -l < "$patch") lines); rebuilt by $(date +%T)" | tee -a "$OUT/gpu.txt"
    out=/tmp/b/vs-ab-$p
    for round in $(seq "${ROUNDS:-2}"); do
      [ "$round" -gt 1 ] && [ "$SECONDS" -gt "${LAST_ROUND_BY_S:-99999}" ] && { echo "no time for round $round"; break; }
      for v in A B; do
        timeout $T /usr/bin/env python3 bench/run.py --bin /tmp/agentkv-$v --llama-server $B/bin/llama-server \
          --threads 16 vs-llama-server --model "$(model_path $p)" --contexts "$4" --reps $REPS \
          --out $out/r$round-$v > /dev/null 2>&1
        echo "$v: $(grep '^| [0-9]' $out/r$round-$v/vs-llama-server/vs-llama-server.md)"
        timeout 120 /tmp/agentkv-$v bench store --cache-dir "$PWD/bench/out/store-cache" --tokens 2048 \
          --layout 32x576 --reps $REPS --json $out/r$round-$v/store.json 2>&1 | grep 'store load'
        rm -rf "$PWD/bench/out/store-cache"
        pack $out vs-ab-$p  # after every run: a call that times out still returns what was done
      done
    done
    ;;
  store)
    build_cuda agentkv
    mkdir -p /tmp/store
    timeout $T $B/agentkv bench store --cache-dir "$PWD/bench/out/store-cache" --tokens "${2:-34816}" --layout 32x576 \
      --reps $REPS --json /tmp/store/store_llama31_8b_layout.json 2>&1 | tail -12 | tee /tmp/store/store_llama31_8b_layout.md
    rm -rf "$PWD/bench/out/store-cache"
    pack /tmp/store store
    ;;
  store-chunks)
    build_cuda agentkv
    out=/tmp/store-chunks
    mkdir -p $out
    cache="$PWD/bench/out/store-cache"
    IFS=, read -ra toks <<< "${2:-2048,32768}"
    store() {  # store NAME TOKENS FLAGS...
      local name=$1 t=$2; shift 2
      timeout $T $B/agentkv bench store --cache-dir "$cache" --tokens $t --layout 32x576 --reps $REPS "$@" \
        --json $out/$name.json > $out/$name.md 2> $out/$name.log
      echo "$name: $(grep '^| store load (cold)' $out/$name.md)"
    }
    dev=$(df --output=source "$PWD" | tail -1); dev=$(basename "$(readlink -f "$dev")")
    for q in /sys/class/block/$dev/queue /sys/class/block/$dev/../queue; do
      [ -d $q ] && for f in read_ahead_kb max_sectors_kb nr_requests rotational scheduler; do
        echo "$dev $f: $(cat $q/$f)"; done
    done > $out/disk.txt 2>&1
    for round in 1 2; do
      for t in "${toks[@]}"; do
        store store_${t}_whole_r$round $t --read-chunk-kib 0
        store store_${t}_auto_r$round $t
      done
    done
    for kib in 512 1024 2048 4096; do store store_${toks[0]}_chunk${kib} ${toks[0]} --read-chunk-kib $kib; done
    rm -rf "$cache"
    g++ -O2 -std=c++17 -pthread bench/tools/read_probe.cc -o /tmp/read_probe &&
      timeout 120 /tmp/read_probe "$PWD/bench/out/probe" 8 9445376 5 chunks | tee $out/read_probe_8files.txt
    rm -rf "$PWD/bench/out/probe"
    pack $out store-chunks
    ;;
  disk-probe)  # no build: where a save's files lie and what reading them costs (layout_probe, read_probe agent)
    out=/tmp/disk-probe
    mkdir -p $out
    timeout 200 python3 bench/tools/layout_probe.py /tmp/lp 9 9445376 7 32 | tee $out/layout_probe.txt
    g++ -O2 -std=c++17 -pthread bench/tools/read_probe.cc -o /tmp/read_probe &&
      timeout 240 /tmp/read_probe /tmp/rpd 9 9445376 5 agent | tee $out/read_probe_agent.txt
    pack $out disk-probe
    ;;
  read-modes)  # read-modes [TOKENS]: bench store's cold load of one agent (8B layout) read five ways, interleaved
    build_cuda agentkv
    out=/tmp/read-modes
    mkdir -p $out
    cache="$PWD/bench/out/store-cache"
    t=${2:-2048}
    for round in $(seq "${ROUNDS:-4}"); do
      for mode in auto whole chunk4m seq1 whole8; do
        case $mode in
          auto) flags=() ;;                                            # 32 readers, ~2 reads each
          whole) flags=(--read-chunk-kib 0) ;;                         # a reader per file
          chunk4m) flags=(--read-chunk-kib 4096) ;;                    # reads of max_sectors_kb
          seq1) flags=(--read-threads 1 --read-chunk-kib 0) ;;         # one stream, file after file
          whole8) flags=(--read-threads 8 --read-chunk-kib 0) ;;
        esac
        timeout 120 $B/agentkv bench store --cache-dir "$cache" --tokens $t --layout 32x576 --reps $REPS "${flags[@]}" \
          --json $out/${mode}_r$round.json > $out/${mode}_r$round.md 2> $out/${mode}_r$round.log
        echo "r$round $mode: $(grep -E '^\| (store load|plain read) \(cold\)' $out/${mode}_r$round.md | tr '\n' ' ')"
        rm -rf "$cache"
      done
    done
    pack $out read-modes
    ;;
  remote)  # remote CTXS FETCH_CTXS: returning agent from Redis vs local disk vs cold, 8B shape
    build_cuda agentkv
    p=llama-3.1-8b
    synth_model $p
    [ -f .device/redis.tar.xz ] && [ ! -d .device/redis ] && tar xJf .device/redis.tar.xz -C .device
    rs=$(command -v redis-server || echo "$PWD/.device/redis/redis-server")
    rb=$(command -v redis-benchmark || echo "$PWD/.device/redis/redis-benchmark")
    out=/tmp/b/remote-$p
    timeout $T /usr/bin/env python3 bench/remote_ttft.py --bin $B/agentkv --model "$(model_path $p)" --threads 16 \
      --contexts "$2" --fetch-contexts "${3:-}" --reps $REPS --redis-server "$rs" --redis-benchmark "$rb" \
      --redis-io-threads ${REDIS_IO_THREADS:-1} --out $out 2>&1 | tail -25
    pack $out remote-$p
    ;;
  team)  # team PRESET [ARGS...]: the shared-prefix team (issue 32) at the H200 size, 1 rep (TEAM_TAG: a suffix for
    # the output's name, so that several runs in one call, e.g. an A/B of an environment variable, keep theirs)
    p=$2
    t0=$SECONDS
    [ -x $B/agentkv ] && [ -x $B/bin/llama-server ] || build_cuda agentkv llama-server
    synth_model $p
    echo "team: build + model $p: $((SECONDS - t0)) s"
    out=/tmp/b/team-$p${TEAM_TAG:+-$TEAM_TAG}
    mkdir -p $out
    t0=$SECONDS
    timeout $T /usr/bin/env python3 bench/shared_team.py --bin $B/agentkv --llama-server $B/bin/llama-server \
      --model "$(model_path $p)" --threads 16 --agents 32 --slots 16 --shared-tokens 4000 --own-tokens 1500 \
      --max-tokens 64 --rounds 4 --restart-before 2 --new-agents 8 --reps 1 --out $out "${@:3}" 2>&1 |
      tee $out/console.txt | grep -E '^\[bench|^\| ([0-9]+:|sum )|^- agentkv|^status'
    echo "team: benchmark $((SECONDS - t0)) s (rc ${PIPESTATUS[0]})"
    keep_our_log_lines $out
    pack $out team-$p${TEAM_TAG:+-$TEAM_TAG}
    ;;
  fattn-ops)  # ggml's test-backend-ops on the GPU: FLASH_ATTN_EXT with quantized K/V against the CPU (FATTN_FILTER, a
    # regex on the case's parameters), then `perf` of the decode cases of Llama-3-8B's heads (patch 0007's), with the
    # vector kernel's GQA grouping off and on (GGML_CUDA_FATTN_VEC_GQA), ROUNDS (2) times alternating
    build_cuda agentkv llama-server test-backend-ops
    out=/tmp/fattn-ops
    mkdir -p $out
    tbo=$(find $B -name test-backend-ops -type f -perm -u+x | head -1)
    timeout 300 $tbo -o FLASH_ATTN_EXT -b CUDA0 -p "${FATTN_FILTER:-nb=[12],}" > $out/test.txt 2>&1
    echo "test-backend-ops FLASH_ATTN_EXT (${FATTN_FILTER:-nb=[12],}) rc=$?: $(grep -E 'tests passed' $out/test.txt |
      head -1 | tr -s ' '), $(grep -c 'FAIL' $out/test.txt) lines with FAIL" | tee -a "$OUT/gpu.txt"
    grep FAIL $out/test.txt | head -20
    for round in $(seq "${ROUNDS:-2}"); do
      for gqa in 0 1; do
        GGML_CUDA_FATTN_VEC_GQA=$gqa timeout 120 $tbo perf -o FLASH_ATTN_EXT -b CUDA0 -p 'hsk=128,hsv=128,nh=8,nr23=\[4,' \
          > $out/perf_gqa${gqa}_r$round.txt 2>&1
      done
      echo "perf, round $round (gqa0: one Q head per block, upstream; gqa1: patch 0007):"
      python3 bench/tools/fattn_perf_table.py $out/perf_gqa0_r$round.txt $out/perf_gqa1_r$round.txt | tee $out/perf_r$round.md
    done
    pack $out fattn-ops
    ;;
  replay)  # replay PRESET [ARGS...]: the recorded coding-agent requests (bench/client_replay.py, issue 30), 1 rep
    p=$2
    t0=$SECONDS
    [ -x $B/agentkv ] || build_cuda agentkv
    synth_model $p
    echo "replay: build + model $p: $((SECONDS - t0)) s"
    out=/tmp/b/replay-$p
    mkdir -p $out
    t0=$SECONDS
    timeout $T /usr/bin/env python3 bench/client_replay.py --bin $B/agentkv --model "$(model_path $p)" --threads 16 \
      --ctx 32768 --slots 2 --out $out "${@:3}" 2>&1 | tee $out/console.txt | tail -60
    echo "replay: $((SECONDS - t0)) s (rc ${PIPESTATUS[0]})"
    pack $out replay-$p
    ;;
  stock-llama)  # llama-server of the pinned source without our patches (patch 0002 changes its CPU kernels)
    t0=$SECONDS
    src=${AGENTKV_CACHE:-$PWD/.device}/llama.cpp
    if [ -f .device/llama.cpp.tar.xz ] && [ ! -f "$src/.agentkv-plain" ]; then
      mkdir -p "$src" && tar xJf .device/llama.cpp.tar.xz -C "$src"
    fi
    [ -f "$src/CMakeLists.txt" ] || src=$HOME/.cache/agentkv/llama.cpp  # here: the bootstrap's patched clone
    stock=/tmp/llama.cpp-stock
    rm -rf $stock && mkdir -p $stock && cp -a "$src"/. $stock/ && rm -rf $stock/.git
    for p in $(ls patches/llama.cpp/*.patch | LC_ALL=C sort -r); do  # newest first: each reverses cleanly
      (cd $stock && patch -s -R -p1 --no-backup-if-mismatch < "$OLDPWD/$p") || { echo "stock: cannot reverse $p"; exit 1; }
    done
    echo "stock: $(ls patches/llama.cpp/*.patch | wc -l) patches reversed" | tee -a "$OUT/gpu.txt"
    cuda=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON)
    [ "${CUDA:-1}" = 0 ] && cuda=(-DGGML_CUDA=OFF -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
    command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
    export CCACHE_DIR=${DEVICE_CCACHE_DIR:-$HOME/.cache/agentkv-device-ccache}
    cmake -S $stock -B $STOCK -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" -DBUILD_SHARED_LIBS=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON \
      -DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF -DGGML_OPENMP=ON >/dev/null &&
      ninja -C $STOCK -j "${JOBS:-$(nproc)}" llama-server > "$OUT/build-stock.log" 2>&1 ||
      { tail -40 "$OUT/build-stock.log"; exit 1; }
    echo "stock llama-server: $STOCK/bin/llama-server, $((SECONDS - t0)) s" | tee -a "$OUT/gpu.txt"
    ;;
  vs-stock)  # vs-stock PRESET CTXS: the patched and the stock llama-server in one vs-llama-server run
    t0=$SECONDS
    [ -x $B/agentkv ] && [ -x $B/bin/llama-server ] || build_cuda agentkv llama-server
    [ -x $STOCK/bin/llama-server ] || "$0" stock-llama || exit 1
    synth_model $2
    echo "vs-stock: builds + model $((SECONDS - t0)) s"
    out=/tmp/b/vs-stock-$2-${3//,/_}
    timeout $T "${BENCH[@]}" vs-llama-server --model "$(model_path $2)" --contexts "$3" --reps $REPS "${VS_ARGS[@]}" \
      --stock-llama-server $STOCK/bin/llama-server --out $out 2>&1 | tail -40
    keep_our_log_lines $out
    pack $out vs-stock-$2-${3//,/_}
    ;;
  returning)  # returning PRESET AGENTS TOKENS: several agents returning within a second of one restart
    t0=$SECONDS
    [ -x $B/agentkv ] && [ -x $B/bin/llama-server ] || build_cuda agentkv llama-server
    synth_model $2
    echo "returning: build + model $((SECONDS - t0)) s"
    out=/tmp/b/returning-$2-$3x$4
    timeout $T /usr/bin/env python3 bench/returning_team.py --bin $B/agentkv --llama-server $B/bin/llama-server \
      --model "$(model_path $2)" --threads 16 --agents $3 --tokens $4 --slots $3 --reps "${REPS}" \
      --gap-ms "${GAP_MS:-$((1000 / $3))}" --ls-bind "${LS_BIND:-omp}" --out $out 2>&1 | tail -20
    rm -rf $out/cache*
    pack $out returning-$2-$3x$4
    ;;
  ram-tier)  # ram-tier PRESET TOKENS: bench/ram_tier.py, two agents alternating on one slot, each turn restored
    # from host RAM: agentkv's RAM pool vs llama-server's --cache-ram (32 GiB), ROUNDS (12) interleaved rounds
    t0=$SECONDS
    [ -x $B/agentkv ] && [ -x $B/bin/llama-server ] || build_cuda agentkv llama-server
    synth_model $2
    echo "ram-tier: build + model $((SECONDS - t0)) s"
    out=/tmp/b/ram-tier-$2-$3
    timeout $T /usr/bin/env python3 bench/ram_tier.py --bin $B/agentkv --llama-server $B/bin/llama-server \
      --model "$(model_path $2)" --threads 16 --tokens $3 --rounds "${ROUNDS:-12}" --ls-cache-ram-mib 32768 \
      --ls-bind "${LS_BIND:-omp}" --out $out 2>&1 | tail -8
    pack $out ram-tier-$2-$3
    ;;
  decode-load)  # decode-load PRESET [AGENTS]: bench/decode_load.py on a preset
    t0=$SECONDS
    [ -x $B/agentkv ] && [ -x $B/bin/llama-server ] || build_cuda agentkv llama-server
    synth_model $2
    echo "decode-load: build + model $((SECONDS - t0)) s"
    out=/tmp/b/decode-load-$2
    timeout $T /usr/bin/env python3 bench/decode_load.py --bin $B/agentkv --llama-server $B/bin/llama-server \
      --model "$(model_path $2)" --threads 16 --agents "${3:-1,4,16,64}" --max-tokens "${MAX_TOKENS:-128}" \
      --ls-bind "${LS_BIND:-omp}" --out $out 2>&1 | tail -20
    pack $out decode-load-$2
    ;;
  capacity)
    out=/tmp/b/capacity
    timeout $T "${BENCH[@]}" capacity --verify-contexts "$2" --out $out 2>&1 | tail -15
    pack $out capacity
    ;;
  *) sed -n "2,/^# Env/p" "$0"; exit 2 ;;
esac
