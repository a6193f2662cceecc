#!/usr/bin/env bash
# ThreadSanitizer build of the concurrent parts (scheduler, RAM pool, disk
# store, remote tier, HTTP layer) and their tests. llama.cpp itself is not instrumented (its OpenMP
# threads only touch llama's own memory); our code is.
#   scripts/tsan.sh      -> build-tsan/, runs sched_test, kv_test, store_test, remote_test, api_test, util_test
#                           and engine_test's concurrent parts (the overlapped restore's row pipeline, the
#                           gated import beside a decode)
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/agentkv/ccache}
export CCACHE_BASEDIR=$PWD
B=${AGENTKV_TSAN_DIR:-build-tsan}
if [ ! -f "$B/build.ninja" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAGENTKV_SANITIZE=thread \
    -DAGENTKV_LAYERS="util;store;remote;prefix;engine;kv;sched;api"
fi
ninja -C "$B" -j "${AGENTKV_JOBS:-$(nproc)}" sched_test kv_test api_test store_test remote_test util_test engine_test
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp ${TSAN_OPTIONS:-}"
"$B/src/util/util_test" --gtest_brief=1
"$B/src/engine/engine_test" --gtest_brief=1 --gtest_filter='RowCopyPipelineTest.*:EngineTest.ExportImportAcrossSlotsIsExact:LayerGatedImportTest.*'
"$B/src/kv/kv_test" --gtest_brief=1
"$B/src/store/store_test" --gtest_brief=1
"$B/src/remote/remote_test" --gtest_brief=1
"$B/src/api/api_test" --gtest_brief=1
"$B/src/sched/sched_test" --gtest_brief=1
echo "tsan: clean"
