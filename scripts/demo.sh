#!/usr/bin/env bash
# Builds agentkv and runs the main job on the bundled model (models/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
BUILD=${AGENTKV_BUILD_DIR:-build}
if "$BUILD/agentkv" --help 2>&1 | grep -q "^  demo "; then
  exec "$BUILD/agentkv" demo "$@"
fi
exec "$BUILD/agentkv" generate -m models/tiny-llama-brown-16m-q8_0.gguf -p "The President said that" -n 48 "$@"
