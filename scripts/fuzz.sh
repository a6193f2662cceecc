#!/usr/bin/env bash
# libFuzzer under ASan/UBSan: the block file decoder, the manifest parser and
# request JSON -> GenerationRequest (docs/testing: issue 12).
#   scripts/fuzz.sh [SECONDS]   -> build-fuzz/, runs each target SECONDS (default 30)
# Env: AGENTKV_FUZZ_DIR (default build-fuzz), AGENTKV_FUZZ_JOBS (ninja -j),
#      AGENTKV_FUZZ_TARGETS (default: all three).
# Seeds: valid block files and manifests from agentkv_fuzz_seeds (the block
# and manifest fuzzers re-seal checksums after each mutation, so they reach
# the structural checks), request JSON from src/api/fuzz_seeds/. Corpora grow
# in build-fuzz/corpus/<target>; crashes are written to build-fuzz/crashes/.
# Exits non-zero on the first crash, leak or sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-30}
B=${AGENTKV_FUZZ_DIR:-build-fuzz}

# clang + libFuzzer runtime (Debian 12: clang-14 + libclang-rt-14-dev).
if ! command -v clang++-14 >/dev/null 2>&1 || ! dpkg -s libclang-rt-14-dev >/dev/null 2>&1; then
  echo "fuzz: installing clang-14 and libclang-rt-14-dev"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev >/dev/null
fi

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/agentkv/ccache}
export CCACHE_BASEDIR=$PWD
# This is also the tree's clang build: the libraries with thread-safety annotations
# (util/thread_annotations.h) are built too, and -Werror=thread-safety fails it on a
# GUARDED_BY field touched without its lock. (Set on every run: an older build dir's cache
# held fewer layers.)
# engine/ and sched/ are compiled too, not linked: with CMAKE_OPTIMIZE_DEPENDENCIES a static
# library builds without its dependencies, so llama.cpp (configured for its headers) is not built.
FUZZ_LAYERS="util;store;remote;prefix;engine;kv;sched;api"
if [ ! -f "$B/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DAGENTKV_FUZZ=ON -DAGENTKV_TESTS=OFF -DCMAKE_OPTIMIZE_DEPENDENCIES=ON -DAGENTKV_LAYERS="$FUZZ_LAYERS" >/dev/null
else
  cmake "$B" -DCMAKE_OPTIMIZE_DEPENDENCIES=ON -DAGENTKV_LAYERS="$FUZZ_LAYERS" >/dev/null
fi
ninja -C "$B" -j "${AGENTKV_FUZZ_JOBS:-$(nproc)}" block_file_fuzz manifest_fuzz openai_json_fuzz agentkv_fuzz_seeds \
  agentkv_util agentkv_store agentkv_remote agentkv_prefix agentkv_kv agentkv_engine agentkv_sched agentkv_api

mkdir -p "$B/corpus/block_file_fuzz" "$B/corpus/manifest_fuzz" "$B/corpus/openai_json_fuzz" "$B/crashes"
"$B/src/store/agentkv_fuzz_seeds" "$B/corpus/block_file_fuzz" "$B/corpus/manifest_fuzz" 16
cp src/api/fuzz_seeds/*.json "$B/corpus/openai_json_fuzz/"

export ASAN_OPTIONS="detect_leaks=1 abort_on_error=1 ${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1 ${UBSAN_OPTIONS:-}"
for t in ${AGENTKV_FUZZ_TARGETS:-block_file_fuzz manifest_fuzz openai_json_fuzz}; do
  bin=$(find "$B/src" -name "$t" -type f -perm -u+x | head -1)
  echo "fuzz: $t for ${SECONDS_EACH} s"
  # -max_len: block files and manifests of the seeds are up to ~20 KB.
  "$bin" -max_total_time="$SECONDS_EACH" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$B/crashes/$t-" "$B/corpus/$t" 2>&1 |
    tee "$B/$t.log" | grep -E "^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::|==[0-9]+==ERROR|SUMMARY)" || true
  if grep -qE "==[0-9]+==ERROR|SUMMARY: .*Sanitizer|deadly signal|contract violated|decodes differently|does not re-encode" "$B/$t.log"; then
    echo "fuzz: $t FAILED; see $B/$t.log and $B/crashes/" >&2
    exit 1
  fi
done
echo "fuzz: clean"
