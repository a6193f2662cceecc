#!/usr/bin/env bash
# Installs everything agentkv needs on a fresh Debian machine and builds it.
#   scripts/bootstrap.sh            -> build/agentkv and the unit tests
# Idempotent: apt packages are only installed when missing, the pinned
# llama.cpp source and the compiler cache live in ~/.cache/agentkv (outside
# the clone), so rebuilds and CI reuse them.
# Env: AGENTKV_BUILD_DIR (default build), AGENTKV_CMAKE_ARGS (extra -D...),
#      AGENTKV_JOBS (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

APT_PACKAGES=(cmake ninja-build g++ ccache git openssl ca-certificates libgtest-dev libgmock-dev
              python3 python3-matplotlib redis-server libhiredis-dev pkgconf nginx-light)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# node/npm may come from Debian or from NodeSource (whose nodejs bundles npm
# and conflicts with Debian's npm): only install what is absent.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The e2e tests (tests/e2e/run.mjs) need node >= 18: Debian 12's nodejs is enough.
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 18 ]; then
  echo "bootstrap: node $(node --version) is too old; tests/e2e needs node >= 18" >&2
  exit 1
fi

scripts/fetch-llama.sh

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/agentkv/ccache}
export CCACHE_BASEDIR=$ROOT
ccache --max-size=8G >/dev/null

BUILD=${AGENTKV_BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja ${AGENTKV_CMAKE_ARGS:-}
elif [ -n "${AGENTKV_CMAKE_ARGS:-}" ]; then
  cmake "$BUILD" ${AGENTKV_CMAKE_ARGS}
fi
start=$(date +%s)
ninja -C "$BUILD" -j "${AGENTKV_JOBS:-$(nproc)}"
echo "bootstrap: built in $(( $(date +%s) - start )) s -> $BUILD/agentkv"
