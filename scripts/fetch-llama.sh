#!/usr/bin/env bash
# Fetches the pinned llama.cpp source: node-llama-cpp@3.22.1 from the npm
# registry, checks its sha512 against the pin below, clones the git bundle it
# ships, and applies our patches (patches/llama.cpp/*.patch, in name order;
# each is small and meant for upstream). Idempotent; everything lives under
# $AGENTKV_CACHE (~/.cache/agentkv). The marker file llama.cpp/.agentkv-ok
# records the commit and the patches' checksum: a changed patch set resets the
# clone to the pinned commit and applies them again.
set -euo pipefail
PATCH_DIR=$(cd "$(dirname "$0")/../patches/llama.cpp" && pwd)

CACHE=${AGENTKV_CACHE:-$HOME/.cache/agentkv}
PKG=node-llama-cpp@3.22.1
TARBALL=node-llama-cpp-3.22.1.tgz
# npm's integrity field for the tarball (sha512, base64). Pinned here so a
# changed registry copy is refused even if npm itself would accept it.
SHA512=bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw==
COMMIT=de3ff815ea7d559ee917f063901b8986f038abc6

PATCHES=$(ls "$PATCH_DIR"/*.patch | LC_ALL=C sort)
MARK="$COMMIT patches $(cat $PATCHES | openssl dgst -sha256 -r | cut -c1-16)"

apply_patches() {  # the pinned commit's files, then every patch
  git -C llama.cpp reset -q --hard "$COMMIT"
  for p in $PATCHES; do
    git -C llama.cpp apply --whitespace=nowarn "$p" || { echo "error: patch $p does not apply" >&2; exit 1; }
  done
  echo "$MARK" > llama.cpp/.agentkv-ok
}

mkdir -p "$CACHE"
cd "$CACHE"
if [ -d llama.cpp/.git ] && [ "$(git -C llama.cpp rev-parse HEAD 2>/dev/null)" = "$COMMIT" ]; then
  if [ "$(cat llama.cpp/.agentkv-ok 2>/dev/null)" != "$MARK" ]; then
    apply_patches
    echo "llama.cpp: applied $(echo $PATCHES | wc -w) patch(es)"
  fi
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
apply_patches
echo "llama.cpp $COMMIT ready in $CACHE/llama.cpp"
