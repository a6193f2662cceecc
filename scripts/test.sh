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
# Hostile clients (~30 s): bad requests, slow-loris, idle flood (bench/RESULTS.md); the table on failure.
mkdir -p bench/out/hostile
/usr/bin/python3 bench/hostile_clients.py --quick --bin "$BUILD/agentkv" --json bench/out/hostile/quick.json \
  >bench/out/hostile/quick.txt 2>&1 || { cat bench/out/hostile/quick.txt; exit 1; }
/usr/bin/python3 bench/run.py all --quick --bin "$BUILD/agentkv"; /usr/bin/python3 bench/check_quick.py  # benchmark smoke run (bench/README.md)
echo "test: all tests passed in $(( $(date +%s) - start )) s"
