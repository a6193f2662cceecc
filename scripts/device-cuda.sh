#!/usr/bin/env bash
# CUDA build and GPU measurements on a machine with an NVIDIA GPU (used on the
# H200 device machine; see bench/RESULTS.md). Steps, each resumable:
#   scripts/device-cuda.sh build      configure + build (sm_90 by default) into build-cuda/
#   scripts/device-cuda.sh test       engine + scheduler tests on the GPU
#   scripts/device-cuda.sh ppl OUT    perplexity f16/q8_0/q4_0 KV on the bundled model
# Env: AGENTKV_CACHE (where the npm tarball / llama.cpp live), CUDA_ARCH (90).
set -euo pipefail
cd "$(dirname "$0")/.."
export AGENTKV_CACHE=${AGENTKV_CACHE:-$PWD/.device}
export CCACHE_DIR=${CCACHE_DIR:-$AGENTKV_CACHE/ccache}
B=build-cuda
case "${1:-build}" in
  build)
    scripts/fetch-llama.sh
    command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
    if [ ! -f $B/build.ninja ]; then
      cmake -S . -B $B -G Ninja -DAGENTKV_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90} \
        -DAGENTKV_LLAMA_DIR="$AGENTKV_CACHE/llama.cpp" -DAGENTKV_NATIVE=ON
    fi
    time ninja -C $B -j "$(nproc)" agentkv engine_test engine_arch_test
    ;;
  test)
    $B/src/engine/engine_test
    $B/src/engine/engine_arch_test

    ;;
  ppl)
    out=${2:-/tmp}
    for c in 512 1024; do
      $B/agentkv ppl -m models/tiny-llama-brown-16m-q8_0.gguf -f models/brown_test.txt -c $c --kv all \
        --json "$out/ppl_c$c.json" | tee "$out/ppl_c$c.txt"
    done
    ;;
esac
