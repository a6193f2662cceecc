#!/usr/bin/env bash
# Fetches the pinned llama.cpp source: node-llama-cpp@3.22.1 from the npm
# registry, checks its sha512 against the pin below, clones the git bundle it
# ships. Idempotent; everything lives under $AGENTKV_CACHE (~/.cache/agentkv).
set -euo pipefail

CACHE=${AGENTKV_CACHE:-$HOME/.cache/agentkv}
PKG=node-llama-cpp@3.22.1
TARBALL=node-llama-cpp-3.22.1.tgz
# npm's integrity field for the tarball (sha512, base64). Pinned here so a
# changed registry copy is refused even if npm itself would accept it.
SHA512=bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw==
COMMIT=de3ff815ea7d559ee917f063901b8986f038abc6

mkdir -p "$CACHE"
cd "$CACHE"
if [ -f llama.cpp/.agentkv-ok ] && [ "$(git -C llama.cpp rev-parse HEAD)" = "$COMMIT" ]; then
  echo "llama.cpp $COMMIT ready in $CACHE/llama.cpp"
  exit 0
fi

if [ ! -f "$TARBALL" ]; then
  echo "fetching $PKG from the npm registry"
  npm pack "$PKG" --silent >/dev/null
fi
got=$(openssl dgst -sha512 -binary "$TARBALL" | base64 -w0)
if [ "$got" != "$SHA512" ]; then
  echo "error: $TARBALL sha512 mismatch (got $got, pinned $SHA512)" >&2
  rm -f "$TARBALL"
  exit 1
fi

rm -rf package llama.cpp
tar xzf "$TARBALL" package/llama/gitRelease.bundle
git -c advice.detachedHead=false clone -q package/llama/gitRelease.bundle llama.cpp
git -C llama.cpp -c advice.detachedHead=false checkout -q "$COMMIT"
rm -rf package
touch llama.cpp/.agentkv-ok
echo "llama.cpp $COMMIT ready in $CACHE/llama.cpp"
